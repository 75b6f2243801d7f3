# SPDX-License-Identifier: MIT
"""Connections that send small requests as fast as they can and never read a reply (README,
"Memory and time bounds"): the daemon stops reading them once their unsent replies hold their
share of --max-held-bytes, GetInfo's held_bytes counts what those replies really take (write
records and allocator overhead, not just their bytes), a client of another environment keeps
being served meanwhile, and the memory goes back to the system once the flooders leave."""

from __future__ import annotations

import subprocess
import sys
import time

import numpy as np

from sensim import pb

from rawwire import frame, hello

MIB = 1 << 20
BUDGET = 32 * MIB
FLOODERS = 3
FLOOD_MAX_SECONDS = 60.0

# The flooders run in a process of their own, so that their sending does not slow the
# witness's client (Python's global lock) and the latencies measured are the daemon's.
FLOOD_SCRIPT = r"""
import socket, sys, threading, time
port, n, seconds = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
hello_frame, ping_frame = bytes.fromhex(sys.argv[4]), bytes.fromhex(sys.argv[5])
blob = ping_frame * 20000
sent = [0] * n
stop = threading.Event()
threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
def flood(i):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # the kernel takes few replies
    s.connect(("127.0.0.1", port))
    s.sendall(hello_frame)
    s.settimeout(0.2)
    view, off, end = memoryview(blob), 0, time.monotonic() + seconds
    while time.monotonic() < end and not stop.is_set():
        try:
            k = s.send(view[off:])
        except socket.timeout:
            continue
        sent[i] += k
        off = (off + k) % len(blob)
    s.close()
threads = [threading.Thread(target=flood, args=(i,)) for i in range(n)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(sum(sent))
"""


def proc_status(pid: int) -> dict:
    """VmRSS and VmHWM of a process, in bytes."""
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(value.split()[0]) * 1024
    return out


def sanitized(pid: int) -> bool:
    """AddressSanitizer's quarantine and shadow memory make the resident size meaningless."""
    with open(f"/proc/{pid}/maps") as f:
        return any("libasan" in line for line in f)


def reset_peak(pid: int) -> bool:
    """Reset the process's VmHWM to its current resident size (proc(5), clear_refs 5)."""
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def test_ping_flood_stays_within_the_budget_and_its_memory_is_returned(sensimd_factory):
    d = sensimd_factory("--max-held-bytes", str(BUDGET))
    pid = d.proc.pid
    measured = not sanitized(pid)

    # the witness: a sphere of radius 1 around the origin in its own environment
    witness = d.client(environment="witness", timeout=30)
    witness.create_primitive(1, "sphere", radius=1.0)
    witness.create_object(1, 1)
    origin, east = np.zeros((1, 3)), np.array([[1.0, 0.0, 0.0]])
    assert witness.raycast(origin, east).distances[0] == 1.0
    frames0 = witness.get_info().counters.frames_in
    rss0 = proc_status(pid)["VmRSS"]
    peak_reset = reset_peak(pid)

    # Flood until the replies fill half the budget (the kernel's socket buffers take the
    # first few hundred thousand), then one second more; each witness round trip checks the
    # bound on the way.
    # (Empty pings; under the sanitizer, where resident sizes are not checked, pings of 2000
    # bytes: the much slower daemon handles a few hundred frames a second on a loaded machine,
    # and the budget fills in as many bytes with a tenth of the frames of 200-byte pings.)
    ping = pb.Envelope(id=2, ping=pb.Ping(payload=b"" if measured else b"p" * 2000))
    flood = subprocess.Popen(
        [sys.executable, "-c", FLOOD_SCRIPT, str(d.port), str(FLOODERS), str(FLOOD_MAX_SECONDS),
         frame(hello(environment="flood")).hex(), frame(ping).hex()],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    latencies, peak_held, peak_rss, filled = [], 0, rss0, None
    try:
        t_start = time.monotonic()
        while filled is None or time.monotonic() - filled < 1.0:
            assert time.monotonic() - t_start < FLOOD_MAX_SECONDS, \
                f"the replies never filled half the budget (held_bytes peak {peak_held})"
            t0 = time.monotonic()
            assert witness.ping(b"w").payload == b"w"
            assert witness.raycast(origin, east).distances[0] == 1.0
            held = witness.get_info().counters.held_bytes
            latencies.append(time.monotonic() - t0)
            peak_held = max(peak_held, held)
            peak_rss = max(peak_rss, proc_status(pid)["VmRSS"])
            if measured:
                assert peak_rss - rss0 <= 1.5 * BUDGET + 16 * MIB, (peak_rss - rss0, held)
            if filled is None and peak_held > BUDGET // 2:
                filled = time.monotonic()
            time.sleep(0.02)
        flood.stdin.close()
        sent = int(flood.stdout.read())
        flood.wait(timeout=60)
    finally:
        flood.kill()
        flood.wait()
    status = proc_status(pid)
    peak_rss = max(peak_rss, status["VmHWM"] if peak_reset else status["VmRSS"])
    frames = witness.get_info().counters.frames_in - frames0
    growth = peak_rss - rss0
    median = sorted(latencies)[len(latencies) // 2]
    print(f"{sent >> 20} MiB of pings sent, {frames} frames read; RSS growth {growth / MIB:.1f} "
          f"MiB, peak held_bytes {peak_held / MIB:.1f} MiB; witness round trips: max "
          f"{max(latencies) * 1e3:.1f} ms, median {median * 1e3:.1f} ms over {len(latencies)}")

    # What is held stays within the budget, and the daemon's memory grew by about that much:
    # the accounting misses no multiple of it (allowance: read buffers, the flooders'
    # environment).
    assert peak_held <= BUDGET, peak_held
    if measured:
        assert growth <= 1.5 * peak_held + 16 * MIB, (growth, peak_held)
        assert growth <= 1.5 * BUDGET + 16 * MIB, (growth, BUDGET)
    # the witness was served throughout: each round trip (ping, raycast, GetInfo) well under a
    # second while the flooders were at it (under the sanitizer, which slows every frame the
    # daemon handles many times over, only its answers are checked)
    if measured:
        assert max(latencies) < 1.0, latencies

    # the flooders gone, the bytes held drop and the memory goes back to the system
    deadline = time.monotonic() + 20
    while True:
        info = witness.get_info()
        rss = proc_status(pid)["VmRSS"]
        if info.connections == 1 and info.counters.held_bytes < MIB and (
                not measured or rss <= rss0 + 16 * MIB):
            break
        assert time.monotonic() < deadline, (info.connections, info.counters.held_bytes,
                                             rss - rss0)
        time.sleep(0.1)
    assert witness.raycast(origin, east).distances[0] == 1.0
    witness.close()
