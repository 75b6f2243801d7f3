#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A 1 kHz physics loop through the Python client's lock-step helper against the same loop in
C, through a real sensimd.

A vehicle (body 1) drives a circle of 10 m at 5 m/s past a row of boxes with a VLP-16 at 10 Hz
(sensim.presets "vlp16", velodyne layout) and an IMU (accelerometer and gyroscope), stepped at
1 kHz for `--steps` steps. The Python loop computes each pose, submits it through
sensim.LockStep (UpdateState and Step in one write, 4 steps in flight) and decodes every
output (clouds to NumPy, IMU samples); the C loop (the program bench_pipelined, through the C
client: sensim_update_and_step_send, sensim_step_wait) does the same with the same depth. Each round runs every variant once in a
fresh environment of one daemon (rotated order, after a warm-up round); each times its loop
alone, and the clouds, points and IMU samples must agree. Prints

    BENCH python_pipelined_1khz_wall_per_sim_s <median over rounds of Python wall / C wall> x
                                                                                 (goal <= 2)

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
CPU: list[float] = []   # CPU seconds of the last loops (the client's own process)


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
        cpu = time.process_time()
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
        CPU.append(time.process_time() - cpu)
    return wall, (clouds, points, imu)


def c_loop(exe: str, port: int, name: str, steps: int, depth: int) -> tuple[float, tuple]:
    out = subprocess.run([exe, "--port", str(port), "--environment", name, "--steps",
                          str(steps), "--depth", str(depth)], capture_output=True, text=True,
                         timeout=600)
    if out.returncode != 0:
        sys.exit(f"bench_pipelined: the C loop failed: {out.stderr}")
    f = out.stdout.split()
    values = dict(zip(f[::2], f[1::2]))
    CPU.append(float(values["cpu_s"]))
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

    # each round runs every variant once, in a rotated order, after a warm-up round; the
    # figures are medians over the rounds of the ratios within a round, which a machine whose
    # load drifts over minutes moves less than ratios of separate medians
    variants = ["c", "py", "py1"] + ([] if args.quick else ["sub", "rec"])
    walls: dict[str, list[float]] = {v: [] for v in variants}
    cpus: dict[str, list[float]] = {v: [] for v in ("c", "py")}
    with Daemon(executable=args.sensimd) as d, tempfile.TemporaryDirectory() as tmp:
        totals = None
        for k in range(-1, rounds):
            order = variants[k % len(variants):] + variants[:k % len(variants)]
            for v in order:
                name = f"{v}{k + 1}"
                if v == "c":
                    wall, tot = c_loop(args.c_loop, d.port, name, steps, 4)
                elif v == "py":
                    wall, tot = python_loop(d.port, name, steps, 4)
                elif v == "py1":
                    wall, tot = python_loop(d.port, name, steps, 1)
                elif v == "sub":
                    wall, tot = with_subscription(d.port, name, steps), None
                else:
                    wall, tot = with_record(d.port, name, steps,
                                            os.path.join(tmp, f"{k}.bag")), None
                if tot is not None:
                    if totals is None:
                        totals = tot
                    if tot != totals:
                        print(f"bench_pipelined: the loops disagree: {v} gave {tot}, another "
                              f"{totals} (clouds, points, imu samples)", file=sys.stderr)
                        return 1
                if k >= 0:
                    walls[v].append(wall / sim_s)
                    if v in cpus:
                        cpus[v].append(CPU[-1] / sim_s)
        if totals[0] < 1 or totals[2] != steps:
            print(f"bench_pipelined: unexpected outputs {totals}", file=sys.stderr)
            return 1

    def ratio(a: str, b: str) -> float:
        return statistics.median(x / y for x, y in zip(walls[a], walls[b]))

    med = {v: statistics.median(w) for v, w in walls.items()}
    print(f"loop over {sim_s:.3f} s of simulation at 1 kHz ({totals[0]} clouds, "
          f"{totals[1]} points, {totals[2]} IMU samples): wall per simulated second, median of "
          f"{rounds}: C {med['c']:.3f} s, Python {med['py']:.3f} s (4 in flight), "
          f"{med['py1']:.3f} s (1 in flight)")
    print(f"client CPU per simulated second: C {statistics.median(cpus['c']):.3f} s, Python "
          f"{statistics.median(cpus['py']):.3f} s")
    print(f"BENCH python_pipelined_1khz_wall_per_sim_s {ratio('py', 'c'):.2f} x")
    print(f"BENCH python_lockstep_depth1_over_depth4 {ratio('py1', 'py'):.2f} x")
    if "sub" in walls:
        print(f"BENCH python_pipelined_with_subscription_thread_over_alone "
              f"{ratio('sub', 'py'):.2f} x")
        print(f"BENCH python_pipelined_with_record_process_over_alone "
              f"{ratio('rec', 'py'):.2f} x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
