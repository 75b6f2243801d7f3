# SPDX-License-Identifier: MIT
"""The live view of `./run.sh demo --view`: sensim-mujoco drives the shipped vehicle in real
time while the Foxglove bridge, told nothing but the environment's name, finds its sensors and
bodies through Describe and serves them. A viewer receives the roof lidars' clouds and, on /tf,
the vehicle's pose, which must be MuJoCo's own at the same simulated time (sensim-mujoco
--trace writes it) and each sensor's mount on the vehicle."""

from __future__ import annotations

import csv
import math
import os
import re
import subprocess
import sys

import pytest

import sensim
from foxglove_support import REPO, Viewer, read_cloud2
from test_foxglove_demo import tf_of

SCENE = REPO / "client-c" / "mujoco" / "scenes" / "vehicle.xml"


@pytest.fixture
def program(examples_dir):
    exe = examples_dir / "sensim-mujoco"
    if not exe.exists():
        pytest.skip("sensim-mujoco was not built (MuJoCo not installed)")
    return exe


def start_bridge(port: int) -> tuple[subprocess.Popen, str]:
    bridge = subprocess.Popen([sys.executable, "-m", "sensim.foxglove", "--port", str(port),
                               "--environment", "live", "--listen", "127.0.0.1:0",
                               "--log-level", "warning"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=dict(os.environ))
    for line in bridge.stdout:
        m = re.search(r"bridge on (ws://\S+)", line)
        if m:
            return bridge, m.group(1)
    bridge.kill()
    raise AssertionError("the bridge did not start: " + bridge.stderr.read())


def test_live_mujoco_vehicle_is_served_without_naming_anything(program, sensimd, tmp_path):
    # the bridge first, as run.sh starts it: it must find sensors created after it started
    bridge, url = start_bridge(sensimd.port)
    trace = tmp_path / "car.csv"
    sim = subprocess.Popen([str(program), str(SCENE), "--port", str(sensimd.port),
                            "--environment", "live", "--realtime", "1", "--seconds", "60",
                            "--trace", f"car:{trace}"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ids = {}
        for line in sim.stdout:
            m = re.match(r"sensim-mujoco: sensor (\d+) (\S+)$", line.rstrip("\n"))
            if m:
                ids[m.group(2)] = int(m.group(1))
            if {"vlp16", "os1", "imu"} <= ids.keys():
                break
        assert {"vlp16", "os1", "imu"} <= ids.keys(), sim.stderr.read()

        # the vehicle's body id, as an observer of the environment finds it
        with sensim.Client("127.0.0.1", sensimd.port, environment="live",
                           role="observer") as obs:
            desc = obs.describe()
        bodies = {b.name: b.id for b in desc.bodies}
        assert "car" in bodies, bodies
        car = f"body_{bodies['car']}"
        # the frame the VLP-16's points are in: its own or the world, as it was created
        vlp_desc = next(d for d in desc.sensors if d.id == ids["vlp16"])
        vlp_frame = ("world" if vlp_desc.lidar.frame == sensim.pb.FRAME_WORLD
                     else f"sensor_{ids['vlp16']}")

        with Viewer(url) as v:
            tf = v.channel("/tf")
            vlp = v.channel(f"/sensor_{ids['vlp16']}/points")
            v.channel(f"/sensor_{ids['os1']}/points")
            v.channel(f"/sensor_{ids['imu']}/imu")
            v.subscribe([(1, tf["id"]), (2, vlp["id"])])
            v.wait(lambda: sum(d[0] == 2 for d in v.data) >= 3 and
                   any(d[0] == 1 and car in tf_of(d[2]) for d in v.data),
                   "VLP-16 clouds and the vehicle's transform", timeout=60)
            data = list(v.data)
    finally:
        sim.terminate()
        sim.communicate(timeout=60)
        bridge.terminate()
        bridge.communicate(timeout=60)

    # MuJoCo's pose of the car at each sensor step: t -> (x y z qx qy qz qw)
    with open(trace) as f:
        truth = {round(float(r["t"]), 6): [float(r[k]) for k in ("x", "y", "z", "qx", "qy",
                                                                 "qz", "qw")]
                 for r in csv.DictReader(f)}
    poses = 0
    for sub, ts, payload, _ in data:
        if sub == 2:
            cloud = read_cloud2(payload)
            assert cloud["frame_id"] == vlp_frame and cloud["stamp"] == ts
            assert cloud["width"] * cloud["height"] > 1000
            continue
        frames = tf_of(payload)
        # every sensor's mount hangs on a body or on the world
        for name in ("vlp16", "os1", "imu"):
            assert frames.get(f"sensor_{ids[name]}", (0, car))[1] in (car, "world"), frames
        if car not in frames:
            continue
        stamp, parent, pose = frames[car]
        assert parent == "world"
        want = truth.get(round(stamp * 1e-9, 6))
        assert want is not None, f"no MuJoCo pose at t = {stamp * 1e-9}"
        assert all(abs(a - b) < 1e-6 for a, b in zip(pose[:3], want[:3])), (pose, want)
        # the same rotation (q and -q alike)
        dot = abs(sum(a * b for a, b in zip(pose[3:], want[3:])))
        assert dot > 1 - 1e-9 and abs(math.hypot(*pose[3:]) - 1) < 1e-9, (pose, want)
        poses += 1
    assert poses >= 1
