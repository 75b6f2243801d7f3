#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A 1 kHz physics loop through the Python client's lock-step helper against the same loop in
C, through a real sensimd.

A vehicle (body 1) drives a circle of 10 m at 5 m/s past a row of boxes with a VLP-16 at 10 Hz
(sensim.presets "vlp16", velodyne layout) and an IMU (accelerometer and gyroscope), stepped at
1 kHz for `--steps` steps. The Python loop computes each pose, submits it through
sensim.LockStep (UpdateState and Step in one write, 4 steps in flight) and decodes every
output (clouds to NumPy, IMU samples); the C loop (the program bench_pipelined, protobuf-c, no
client library) does the same with the same depth. Rounds alternate between the two in fresh
environments of one daemon; each prints its wall time of the loop alone, and the clouds,
points and IMU samples must agree. Prints

    BENCH python_pipelined_1khz_wall_per_sim_s <median Python wall / median C wall> x  (goal <= 2)

and for reference the Python loop with one step in flight (no pipelining), with a
subscription thread in the same process decoding the same sensors (the interpreter lock is
shared), and with a `python -m sensim record` process writing them to a ROS bag:

    BENCH python_lockstep_depth1_over_depth4 <ratio> x
    BENCH python_pipelined_with_subscription_thread_over_alone <ratio> x
    BENCH python_pipelined_with_record_process_over_alone <ratio> x

    bench_pipelined.py --c-loop PATH [--sensimd PATH] [--steps N] [--rounds N] [--quick]
"""

from __future__ import annotations

import argparse
import math
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

import sensim
from sensim.testing import Daemon

DT = 1e-3


def scene(c: sensim.Client) -> None:
    """What bench_pipelined.c builds, through the client."""
    c.set_ambient("custom", return_probability_scaling=0.0)
    c.create_primitive(1, "plane")
    c.create_primitive(2, "box", half_extents=(1.0, 1.0, 1.0))
    c.create_object(1, 1)
    for i in range(1, 13):
        c.create_object(1 + i, 2, local_pose=((-30.0 + 5.0 * i, 16.0, 1.0), None))
    c.create_body(1)
    c.create_lidar(5, body_id=1, mount=((0, 0, 1.8), None), preset="vlp16")
    c.create_imu(7, body_id=1, accelerometer=True, gyroscope=True)


def vehicle(t: float) -> tuple[list, list]:
    r, w = 10.0, 0.5
    a = w * t
    return ([r * math.sin(a), r - r * math.cos(a), 0.0, 0.0, 0.0, math.sin(a / 2),
             math.cos(a / 2)],
            [r * w * math.cos(a), r * w * math.sin(a), 0.0, 0.0, 0.0, w])


def subscribed(c: sensim.Client, name: str, n: int) -> None:
    """Wait until environment `name` has n subscriptions."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if sum(s.environment == name for s in c.get_info().subscribers) >= n:
            return
        time.sleep(0.02)
    sys.exit(f"bench_pipelined: no subscriber came to {name}")


def python_loop(port: int, name: str, steps: int, depth: int,
                subscribers: int = 0) -> tuple[float, tuple]:
    """The Python loop in environment `name`, once it has `subscribers` subscriptions: (wall
    seconds of the loop, (clouds, points, imu samples))."""
    clouds = points = imu = 0
    with sensim.Client(port=port, environment=name, timeout=60.0) as c:
        scene(c)
        pose, vel = vehicle(0.0)
        c.update_state(0.0, [1], [pose], [vel])
        c.step(0.0)
        subscribed(c, name, subscribers)
        sim = sensim.LockStep(c, depth=depth)
        start = time.perf_counter()
        results = []
        for k in range(1, steps + 1):
            t = k * DT
            pose, vel = vehicle(t)
            results = sim.submit(t, body_ids=[1], body_poses=[pose], body_velocities=[vel])
            for r in results:
                for out in r[5]:
                    clouds += 1
                    points += len(out.value)
                imu += len(r[7])
        for r in sim.drain():
            for out in r[5]:
                clouds += 1
                points += len(out.value)
            imu += len(r[7])
        wall = time.perf_counter() - start
    return wall, (clouds, points, imu)


def c_loop(exe: str, port: int, name: str, steps: int, depth: int) -> tuple[float, tuple]:
    out = subprocess.run([exe, "--port", str(port), "--environment", name, "--steps",
                          str(steps), "--depth", str(depth)], capture_output=True, text=True,
                         timeout=600)
    if out.returncode != 0:
        sys.exit(f"bench_pipelined: the C loop failed: {out.stderr}")
    f = out.stdout.split()
    values = dict(zip(f[::2], f[1::2]))
    return float(values["wall_s"]), (int(values["clouds"]), int(values["points"]),
                                     int(values["imu"]))


def with_subscription(port: int, name: str, steps: int) -> float:
    """The Python loop while a Subscription in this process decodes the same sensors."""
    import threading
    holder: dict = {}

    def consume() -> None:
        holder["sub"] = sensim.Subscription(port=port, environment=name, sensors=[5, 7],
                                            wait=60.0)
        for _ in holder["sub"]:
            pass

    th = threading.Thread(target=consume, daemon=True)
    th.start()
    wall, _ = python_loop(port, name, steps, 4, subscribers=2)
    holder["sub"].close()
    th.join(10)
    return wall


def with_record(port: int, name: str, steps: int, bag: str) -> float:
    """The Python loop while `python -m sensim record` writes the same sensors to a bag."""
    rec = subprocess.Popen([sys.executable, "-m", "sensim", "record", "--port", str(port),
                            "-e", name, "-s", "5", "-s", "7", "--bag", bag, "--idle", "0",
                            "--wait", "60", "-q"], stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True)
    try:
        wall, _ = python_loop(port, name, steps, 4, subscribers=2)
        rec.send_signal(signal.SIGTERM)
        _, err = rec.communicate(timeout=120)
        if rec.returncode != 0:
            sys.exit(f"bench_pipelined: sensim record failed: {err}")
    finally:
        rec.kill()
    return wall


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--c-loop", required=True, help="the bench_pipelined program")
    ap.add_argument("--sensimd", default=None, help="daemon executable (default: $SENSIMD)")
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--quick", action="store_true", help="a smoke test: few steps, one round")
    args = ap.parse_args()
    steps, rounds = (200, 1) if args.quick else (args.steps, args.rounds)
    sim_s = steps * DT

    py, cc, py1, py_sub, py_rec = [], [], [], [], []
    with Daemon(executable=args.sensimd) as d, tempfile.TemporaryDirectory() as tmp:
        for k in range(rounds):
            wall_c, tot_c = c_loop(args.c_loop, d.port, f"c{k}", steps, 4)
            wall_p, tot_p = python_loop(d.port, f"py{k}", steps, 4)
            if tot_c != tot_p:
                print(f"bench_pipelined: the loops disagree: C {tot_c}, Python {tot_p} "
                      "(clouds, points, imu samples)", file=sys.stderr)
                return 1
            if tot_p[0] < 1 or tot_p[2] != steps:
                print(f"bench_pipelined: unexpected outputs {tot_p}", file=sys.stderr)
                return 1
            cc.append(wall_c / sim_s)
            py.append(wall_p / sim_s)
            py1.append(python_loop(d.port, f"d1_{k}", steps, 1)[0] / sim_s)
            if not args.quick:
                py_sub.append(with_subscription(d.port, f"sub{k}", steps) / sim_s)
                py_rec.append(with_record(d.port, f"rec{k}", steps,
                                          os.path.join(tmp, f"{k}.bag")) / sim_s)
        print(f"loop over {sim_s:.3f} s of simulation at 1 kHz ({tot_p[0]} clouds, "
              f"{tot_p[1]} points, {tot_p[2]} IMU samples): wall per simulated second, "
              f"median of {rounds}: C {statistics.median(cc):.3f} s, Python "
              f"{statistics.median(py):.3f} s (4 in flight), {statistics.median(py1):.3f} s "
              "(1 in flight)")
        print(f"BENCH python_pipelined_1khz_wall_per_sim_s "
              f"{statistics.median(py) / statistics.median(cc):.2f} x")
        print(f"BENCH python_lockstep_depth1_over_depth4 "
              f"{statistics.median(py1) / statistics.median(py):.2f} x")
        if py_sub:
            print(f"BENCH python_pipelined_with_subscription_thread_over_alone "
                  f"{statistics.median(py_sub) / statistics.median(py):.2f} x")
            print(f"BENCH python_pipelined_with_record_process_over_alone "
                  f"{statistics.median(py_rec) / statistics.median(py):.2f} x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
