#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""IMU / encoder / cone step benchmark through a real sensimd and the Python client (the C
program bench_imu measures the same round trips without a client library).

Prints
    BENCH imu_step_rtt_over_ping_python <ratio> x
the median round trip of UpdateState + Step (both sent at once, both replies awaited: one
round trip; the requests are built before the clock starts) for an environment with one IMU
(accelerometer, gyroscope, magnetometer, with noise), one encoder and one cone sensor (EXACT
mode, a box and a sphere in view), divided by the median Ping round trip measured alternately
in the same run (goal <= 2); the sequential form
(UpdateState, wait, Step, wait) for reference; and
    BENCH imu_daemon_samples_per_cpu_second <n>
the IMU samples produced per CPU second of the daemon (utime + stime from /proc) by an IMU at a
fixed 20 kHz sample rate over 0.1 s steps, including their encoding and transmission.

    bench_imu.py [--sensimd PATH] [--quick]
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time

import sensim
from sensim import pb
from sensim.testing import Daemon


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def state_msg(t: float) -> pb.UpdateState:
    import numpy as np
    msg = pb.UpdateState(time=t)
    msg.body_ids_bytes = np.array([1], dtype="<u4").tobytes()
    a = 0.5 * t
    msg.body_poses_bytes = np.array([0.1 * t, 0, 0, 0, 0, math.sin(a / 2), math.cos(a / 2)],
                                    dtype="<f8").tobytes()
    msg.body_velocities_bytes = np.array([0.1, 0, 0, 0, 0, 0.5], dtype="<f8").tobytes()
    msg.joint_ids_bytes = np.array([1], dtype="<u4").tobytes()
    msg.joint_positions_bytes = np.array([2.0 * t], dtype="<f8").tobytes()
    return msg


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sensimd", default=None, help="daemon executable (default: $SENSIMD)")
    ap.add_argument("--quick", action="store_true", help="few iterations (a smoke test)")
    args = ap.parse_args()
    n = 30 if args.quick else 2000

    with Daemon(executable=args.sensimd) as d, d.client(timeout=60.0) as c:
        c.set_environment(magnetic_field=(2e-5, 0, -4.5e-5), seed=1)
        c.create_primitive(1, "box", half_extents=(0.5, 0.5, 0.5))
        c.create_primitive(2, "sphere", radius=0.7)
        c.create_object(10, 1, local_pose=(6, 1, 0))
        c.create_object(11, 2, local_pose=(9, -2, 0.5))
        c.create_body(1)
        c.create_joint(1)
        noise = {"noiseStddev": {"x": 0.01, "y": 0.01, "z": 0.01}}
        c.create_imu(1, body_id=1, accelerometer={"chain": noise}, gyroscope={"chain": noise},
                     magnetometer=True)
        c.create_encoder(2, 1, resolution=0.001)
        c.create_cone(3, body_id=1, range=20.0)

        # warm-up and a check that every sensor reports
        t = 0.0
        c.update_state(t, [1], [[0, 0, 0, 0, 0, 0, 1]], joint_ids=[1], joint_positions=[0.0])
        kinds = sorted(o.kind for o in sensim.outputs(c.step(t)))
        if kinds != ["cone", "imu", "scalar"]:
            print(f"bench_imu: unexpected outputs {kinds}", file=sys.stderr)
            return 1

        ping, piped, seq = [], [], []
        for _ in range(n):
            t += 0.01
            t0 = time.perf_counter()
            c.ping()
            ping.append(time.perf_counter() - t0)
            m1, m2 = state_msg(t), pb.Step(time=t)
            t0 = time.perf_counter()
            a = c.send_request("update_state", m1)
            b = c.send_request("step", m2)
            c.wait_reply(a)
            done = c.wait_reply(b)
            piped.append(time.perf_counter() - t0)
            if len(done.step_done.outputs) != 3:
                print("bench_imu: a step lost its outputs", file=sys.stderr)
                return 1
            t += 0.01
            m1, m2 = state_msg(t), pb.Step(time=t)
            t0 = time.perf_counter()
            c._call("update_state", m1)
            c._call("step", m2, "step_done")
            seq.append(time.perf_counter() - t0)
        p = statistics.median(ping)
        print(f"ping_rtt_us {p * 1e6:.1f}")
        print(f"update_step_rtt_us {statistics.median(piped) * 1e6:.1f} (pipelined), "
              f"{statistics.median(seq) * 1e6:.1f} (sequential)")
        print(f"BENCH imu_step_rtt_over_ping_python {statistics.median(piped) / p:.2f} x")

    # throughput: an IMU alone at 20 kHz, 0.1 s steps (2000 samples per step)
    steps = 5 if args.quick else 50
    with Daemon(executable=args.sensimd) as d, d.client(timeout=120.0) as c:
        c.create_body(1)
        noise = {"noiseStddev": {"x": 0.01, "y": 0.01, "z": 0.01}}
        c.create_imu(1, body_id=1, accelerometer={"chain": noise}, gyroscope={"chain": noise},
                     magnetometer=True, sample_rate=20000.0)
        c.update_state(0.0, [1], [[0, 0, 0, 0, 0, 0, 1]])
        c.step(0.0)
        cpu0 = cpu_seconds(d.proc.pid)
        samples = 0
        for k in range(1, steps + 1):
            t = 0.1 * k
            c.update_state(t, [1], [[0, 0, 0, 0, 0, math.sin(t / 4), math.cos(t / 4)]])
            samples += len(c.step(t).outputs)
        cpu = cpu_seconds(d.proc.pid) - cpu0
        if samples != 2000 * steps:
            print(f"bench_imu: {samples} samples, expected {2000 * steps}", file=sys.stderr)
            return 1
        print(f"imu_samples {samples} daemon_cpu_s {cpu:.3f}")
        print(f"BENCH imu_daemon_samples_per_cpu_second {samples / max(cpu, 1e-3):.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
