#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The fan-out of bench_shard through the Python client: sensim.ShardedClient over three real
sensimd against sensim.Client on a fourth, all on this host.

Prints
    BENCH shard_fanout_update_over_single_py <ratio> x
the median of paired ratios (measured alternately, which goes first alternating too) of an
UpdateState of 100 bodies through ShardedClient.update_state (sent to the three shards, then
every reply awaited) over Client.update_state to one daemon (goal <= 1.5; the C figure is
bench_shard's shard_fanout_update_over_single), with the client's own CPU per update beside it.
Like the C benchmark it pins this thread and the daemons' threads alike, in two placements:
one core (everything on the first CPU of the process's mask) and two cores (this thread on the
first, every daemon on the second), the headline; the C benchmark explains why and measures
the raw sockets' floor in each (bench_shard_fanout_raw_*). Checks that every shard holds the
last state afterwards.

    bench_shard.py [--sensimd PATH] [--quick]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

import sensim
from sensim.testing import Daemon

NBODY = 100
MASK = os.sched_getaffinity(0)


PIN_REFUSED = []


def pin(tid: int, cpu: int | None) -> None:
    """Thread tid (0: this one) on cpu, or back on the process's first mask (None). A sandbox
    that refuses sched_setaffinity leaves every placement to the scheduler, said once."""
    if PIN_REFUSED:
        return
    try:
        os.sched_setaffinity(tid, MASK if cpu is None else {cpu})
    except ProcessLookupError:  # the thread ended meanwhile
        pass
    except OSError as e:
        PIN_REFUSED.append(e)
        print(f"placements: not applied (sched_setaffinity refused: {e.strerror})")


def pin_process(pid: int, cpu: int | None) -> None:
    """Every thread of process pid on cpu (None: the first mask); later ones inherit it."""
    for tid in os.listdir(f"/proc/{pid}/task"):
        pin(int(tid), cpu)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sensimd", default=None, help="daemon executable (default: $SENSIMD)")
    ap.add_argument("--quick", action="store_true", help="few iterations (a smoke test)")
    args = ap.parse_args()
    n = 30 if args.quick else 2000
    daemons = [Daemon(executable=args.sensimd) for _ in range(4)]
    try:
        one = daemons[3].client(environment="bodies")
        shards = sensim.ShardedClient([f"127.0.0.1:{d.port}" for d in daemons[:3]],
                                      environment="bodies")
        for i in range(1, NBODY + 1):
            one.create_body(i)
            shards.create_body(i)
        ids = np.arange(1, NBODY + 1, dtype="<u4")
        poses = np.zeros((NBODY, 7))
        poses[:, 6] = 1.0
        mask = sorted(os.sched_getaffinity(0))
        places = [("one core", "one_core", mask[0], mask[0])]
        if len(mask) > 1:
            places.append(("two cores", "two_cores", mask[0], mask[1]))
        k = 0
        head = None
        for name, tag, own, peer in places:
            pin(0, own)
            for d in daemons:
                pin_process(d.proc.pid, peer)
            ratios, t1, t3, c1, c3 = [], [], [], 0.0, 0.0
            for _ in range(n):
                poses[:, 0] = 0.01 * k + np.arange(NBODY)
                t = 0.01 * k
                calls = [(one, t1), (shards, t3)]
                if k % 2:
                    calls.reverse()
                k += 1
                took = {}
                for client, times in calls:
                    # the CPU clock (a system call) read outside the timed span
                    ca = time.thread_time()
                    a = time.perf_counter()
                    client.update_state(t, ids, poses)
                    span = time.perf_counter() - a
                    took[id(times)] = (span, time.thread_time() - ca)
                    times.append(span)
                c1 += took[id(t1)][1]
                c3 += took[id(t3)][1]
                ratios.append(took[id(t3)][0] / took[id(t1)][0])
            ratio = statistics.median(ratios)
            print(f"UpdateState of {NBODY} bodies, {n} paired, Python client, {name}: one daemon "
                  f"{1e6 * statistics.median(t1):.1f} us, three shards "
                  f"{1e6 * statistics.median(t3):.1f} us; this thread's CPU {1e6 * c1 / n:.1f} "
                  f"us and {1e6 * c3 / n:.1f} us")
            print(f"BENCH shard_fanout_update_over_single_py_{tag} {ratio:.2f} x")
            head = (name, ratio)
        pin(0, None)
        for d in daemons:
            pin_process(d.proc.pid, None)
        last = 0.01 * (k - 1)
        times = [next(e for e in info.environments if e.name == "bodies").time
                 for info in shards.get_info()]
        ok = times == [last] * 3
        print(f"every shard at the last state: {ok}")
        print(f"BENCH shard_fanout_update_over_single_py {head[1]:.2f} x ({head[0]}; goal <= 1.5)")
        one.close()
        shards.close()
    finally:
        for d in daemons:
            d.close()
    print(f"checks: {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
