#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The cost of recording an OS1-128 stream to a ROS bag while a simulation steps.

A controller steps an OS1-128 (2048 x 10, sensim.presets "os1-128-2048", ouster layout, about
12 MB a revolution) in a street of boxes on a vehicle at 10 m/s, 10 ms steps through
sensim.LockStep (2 in flight), for `--seconds` of simulated time. Alone, and while
`python -m sensim record --bag` (another process, as a user would run it) subscribes to the
lidar and writes every revolution into a bag; rounds alternate. Prints

    BENCH record_bag_overhead <median wall with the recorder / median wall alone> x  (goal <= 1.2)

and, for reference, how long after the last step the recorder had written everything
(`record_bag_lag_s`) and the bag's size. The daemon gets a subscription budget of 512 MiB so
that a recorder lagging behind loses nothing; the bags are checked with rosbag: every
revolution is in them.

    bench_record.py [--sensimd PATH] [--seconds S] [--rounds N] [--quick]
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Callable, Optional

import sensim
from sensim.testing import Daemon

DT = 0.01
CPU: dict[str, list[float]] = {"recorder": [], "daemon": []}  # CPU s per revolution


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process, from /proc."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def scene(c: sensim.Client) -> None:
    c.create_primitive(1, "plane")
    c.create_object(1, 1)
    c.create_primitive(2, "box", half_extents=(2.0, 4.0, 3.0))
    for i in range(40):
        side = 1 if i % 2 else -1
        c.create_object(2 + i, 2, local_pose=((-50.0 + 5.0 * i, side * 9.0, 3.0), None))
    c.create_body(1, pose=((-40.0, 0, 0), None))
    c.create_lidar(5, body_id=1, mount=((0, 0, 2.0), None), preset="os1-128-2048")


def step_loop(port: int, name: str, seconds: float, subscribers: int,
              on_ready: Optional[Callable[[], None]] = None) -> tuple[float, int]:
    """Step environment `name` once it has `subscribers` subscriptions; (wall seconds of the
    stepping, revolutions the controller received)."""
    clouds = 0
    with sensim.Client(port=port, environment=name, timeout=120.0) as c:
        scene(c)
        c.update_state(0.0, [1], [[-40.0, 0, 0, 0, 0, 0, 1]], [[10.0, 0, 0, 0, 0, 0]])
        c.step(0.0)
        deadline = time.monotonic() + 60
        while sum(s.environment == name for s in c.get_info().subscribers) < subscribers:
            if time.monotonic() > deadline:
                sys.exit("bench_record: the recorder did not subscribe")
            time.sleep(0.02)
        if on_ready is not None:
            on_ready()
        start = time.perf_counter()
        with sensim.LockStep(c, depth=2) as sim:
            n = int(round(seconds / DT))
            for k in range(1, n + 1):
                t = k * DT
                for r in sim.submit(t, body_ids=[1], body_poses=[[-40 + 10 * t, 0, 0, 0, 0, 0, 1]],
                                    body_velocities=[[10.0, 0, 0, 0, 0, 0]]):
                    clouds += len(r[5])
            for r in sim.drain():
                clouds += len(r[5])
        wall = time.perf_counter() - start
    return wall, clouds


def recorded(port: int, name: str, seconds: float, bag: str) -> tuple[float, float, int]:
    """step_loop while `sensim record` writes the lidar to `bag`: (wall of the stepping,
    seconds from the last step until the recorder had written everything, revolutions in the
    bag)."""
    rec = subprocess.Popen([sys.executable, "-m", "sensim", "record", "--port", str(port),
                            "-e", name, "-s", "5", "--bag", bag, "--idle", "0", "--wait", "60",
                            "-q"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ready = []
        wall, clouds = step_loop(port, name, seconds, 1,
                                 lambda: ready.append(cpu_seconds(rec.pid)))
        done = time.perf_counter()
        # the recorder has everything once its subscription's queue is empty and the last
        # revolution is in its summary; SIGTERM makes it write what has arrived and close
        dropped = 0
        with sensim.Client(port=port, environment=name, role="observer") as o:
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline:
                subs = [s for s in o.get_info().subscribers if s.environment == name]
                if not subs:
                    break
                dropped = subs[0].frames_dropped
                if subs[0].queued_frames == 0 and subs[0].frames_sent + dropped >= clouds:
                    break
                time.sleep(0.01)
            # its CPU since it subscribed: receiving, decoding, writing the bag
            CPU["recorder"].append((cpu_seconds(rec.pid) - ready[0]) / max(clouds, 1))
            rec.send_signal(signal.SIGTERM)
            out, err = rec.communicate(timeout=300)
        lag = time.perf_counter() - done
        if rec.returncode != 0:
            sys.exit(f"bench_record: sensim record failed: {err}")
    finally:
        rec.kill()
    import rosbag
    with rosbag.Bag(bag) as b:
        n = b.get_message_count()
    if n + dropped != clouds:
        sys.exit(f"bench_record: the bag holds {n} revolutions and {dropped} were dropped, "
                 f"the controller got {clouds}")
    return wall, lag, n


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sensimd", default=None, help="daemon executable (default: $SENSIMD)")
    ap.add_argument("--seconds", type=float, default=1.0, help="simulated seconds per run")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="a smoke test: 0.25 s, one round")
    args = ap.parse_args()
    seconds, rounds = (0.25, 1) if args.quick else (args.seconds, args.rounds)

    # a warm-up round, then rounds in alternating order; the figure is the median over the
    # rounds of the ratio within a round (a machine whose load drifts moves it less)
    alone, with_rec, lags = [], [], []
    # room for the recorder to lag a few seconds behind without losing a revolution (12 MB
    # each; the default subscription budget, 32 MiB, holds two)
    budget = ["--subscriber-max-bytes", str(512 << 20), "--subscriber-soft-bytes",
              str(512 << 20)]
    with Daemon(budget, executable=args.sensimd) as d, tempfile.TemporaryDirectory() as tmp:
        for k in range(-1, rounds):
            for v in (("alone", "rec") if k % 2 else ("rec", "alone")):
                if v == "alone":
                    cpu = cpu_seconds(d.proc.pid)
                    wall, clouds = step_loop(d.port, f"alone{k + 1}", seconds, 0)
                    CPU["daemon"].append((cpu_seconds(d.proc.pid) - cpu) / clouds)
                    if k >= 0:
                        alone.append(wall)
                    continue
                bag = os.path.join(tmp, f"{k + 1}.bag")
                wall_r, lag, n = recorded(d.port, f"rec{k + 1}", seconds, bag)
                size = os.path.getsize(bag)
                os.remove(bag)
                if k >= 0:
                    with_rec.append(wall_r)
                    lags.append(lag)
            if n != clouds or clouds < 1:
                print(f"bench_record: {n} revolutions recorded, {clouds} stepped (the "
                      "recorder fell behind its subscription budget)", file=sys.stderr)
                return 1
    print(f"OS1-128 2048 x 10, {seconds:.2f} s simulated ({clouds} revolutions, bag of "
          f"{size / 1e6:.1f} MB): stepping {statistics.median(alone):.3f} s alone, "
          f"{statistics.median(with_rec):.3f} s while recording (medians of {rounds})")
    print(f"CPU per revolution: the daemon {statistics.median(CPU['daemon']) * 1e3:.0f} ms "
          f"(tracing, encoding, sending to the controller), the recorder "
          f"{statistics.median(CPU['recorder']) * 1e3:.0f} ms (receiving, decoding, writing)")
    ratio = statistics.median(r / a for r, a in zip(with_rec, alone))
    print(f"BENCH record_bag_overhead {ratio:.2f} x")
    print(f"BENCH record_bag_lag_s {statistics.median(lags):.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
