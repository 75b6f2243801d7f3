# SPDX-License-Identifier: MIT
"""The Python client's side of the end-to-end raycast benchmark, run by bench_session.

bench_session starts sensimd, gives it a scene in environment ENV, writes the rays to RAYS
(little-endian float64: N origins x y z, then N directions x y z) and runs this script, which
joins ENV as an observer and raycasts all N rays through sensim.Client (request built from
numpy arrays, reply read into a record array: what a user's call costs). After a warm-up call
it prints `ready`, then times one call per line `go` read from stdin (printing
`e2e_seconds <s>`), so that bench_session can interleave its own in-process calls with these;
at `end` (or end of input) it writes the hits of the last call to HITS as
RaycastResult.hits_bytes records, which bench_session compares with the hits it traces itself.

    bench_e2e.py --port P --environment ENV --rays RAYS --hits HITS [--max-range 120]
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

import sensim


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--environment", required=True)
    ap.add_argument("--rays", required=True, help="file of origins then directions (float64)")
    ap.add_argument("--hits", required=True, help="where to write the last call's hits")
    ap.add_argument("--max-range", type=float, default=120.0)
    args = ap.parse_args()

    rays = np.fromfile(args.rays, dtype="<f8")
    if rays.size % 6 != 0 or rays.size == 0:
        print(f"bench_e2e: {args.rays} holds {rays.size} values, not 6 per ray", file=sys.stderr)
        return 2
    n = rays.size // 6
    origins = rays[: 3 * n].reshape(n, 3)
    directions = rays[3 * n:].reshape(n, 3)

    with sensim.Client("127.0.0.1", args.port, environment=args.environment, role="observer",
                       client_name="bench_e2e", timeout=120.0) as c:
        hits = c.raycast(origins, directions, max_range=args.max_range)  # warm-up
        print("ready", flush=True)
        for line in sys.stdin:
            if line.strip() != "go":
                break
            t0 = time.perf_counter()
            hits = c.raycast(origins, directions, max_range=args.max_range)
            dt = time.perf_counter() - t0
            print(f"e2e_seconds {dt:.9f}", flush=True)
    if len(hits) != n:
        print(f"bench_e2e: got {len(hits)} hits for {n} rays", file=sys.stderr)
        return 1
    # the records by field name (a client with another record layout can be measured too)
    records = np.zeros(n, dtype=_RECORD)
    for name in _RECORD.names:
        records[name] = hits[name]
    records.tofile(args.hits)
    return 0


# RaycastResult.hits_bytes (proto/README.md, "Bulk arrays"), named as the client names them
_RECORD = np.dtype({"names": ["distances", "normals", "object_ids", "labels"],
                    "formats": ["<f8", ("<f8", (3,)), "<u4", "<u4"],
                    "offsets": [0, 8, 32, 36], "itemsize": 48})


if __name__ == "__main__":
    sys.exit(main())
