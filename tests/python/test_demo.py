# SPDX-License-Identifier: MIT
"""The demo of the README quick start (client-python/examples/mujoco_demo.py driving
sensim-mujoco on the shipped vehicle scene) runs against the real daemon and writes pictures and
clouds that hold what the scene holds; the Python tour (demo.py) prints the wall ranges that
constant-velocity motion predicts."""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]


def test_python_demo_runs_and_sees_the_moving_wall(sensimd):
    out = subprocess.run([sys.executable, str(REPO / "client-python" / "examples" / "demo.py"),
                          "--port", str(sensimd.port)], capture_output=True, text=True,
                         timeout=60, env=dict(os.environ))
    assert out.returncode == 0, out.stderr
    rows = re.findall(r"t = ([\d.]+) s: ([\d.]+) m \(expected ([\d.]+)\)", out.stdout)
    assert len(rows) == 5, out.stdout
    for t, got, _ in rows:
        assert abs(float(got) - (10 - 5 * float(t) - 0.1)) < 1e-4
    assert "tetrahedron" in out.stdout and "wall" in out.stdout
    # the lidar's first revolution (10 Hz: 0.1 s) sees the wall ahead where it was when those
    # rays fired (10 - 5 t - 0.1 m for t in the revolution)
    laps = re.findall(r"lidar 10: revolution (\d+) complete at t = ([\d.]+) s: (\d+) points, "
                      r"straight ahead ([\d.]+) m", out.stdout)
    assert laps and laps[0][0] == "0" and 0.1 <= float(laps[0][1]) <= 0.12, out.stdout
    assert int(laps[0][2]) > 10000
    assert 9.35 <= float(laps[0][3]) <= 9.9
    # an IMU moving at constant velocity reads the reaction to gravity: +9.81 up
    assert "acceleration (0.00, 0.00, 9.81) m/s^2" in out.stdout, out.stdout


def test_mujoco_demo_writes_its_pictures_and_clouds(sensimd, examples_dir, tmp_path):
    bridge = examples_dir / "sensim-mujoco"
    if not bridge.exists():
        pytest.skip("sensim-mujoco was not built (MuJoCo not installed)")
    out = subprocess.run([sys.executable, str(REPO / "client-python" / "examples" /
                                              "mujoco_demo.py"),
                          "--port", str(sensimd.port), "--bridge", str(bridge), "--seconds", "1",
                          "--out", str(tmp_path)], capture_output=True, text=True, timeout=600,
                         env=dict(os.environ))
    assert out.returncode == 0, out.stdout + out.stderr
    wrote = re.findall(r"^wrote (.+)$", out.stdout, re.M)
    names = sorted(pathlib.Path(w).name for w in wrote)
    assert names == ["birdseye.png", "imu.png", "os1.pcd", "ouster_range.png", "path.csv",
                     "vlp16.pcd"], out.stdout
    m = re.search(r"^summary: VLP-16 ([\d,]+) points per revolution \((\d+) revolutions\), "
                  r"OS1-64 ([\d,]+) of 65,536; IMU (\d+) samples, mean specific force z "
                  r"([\d.]+) m/s\^2; ([\d,]+) physics steps per second, real-time factor "
                  r"([\d.]+) .*last clouds ([\d,]+) \+ ([\d,]+) points$", out.stdout, re.M)
    assert m, out.stdout
    vlp, revs, os1, nimu, fz, steps_s, rtf, last_vlp, last_os1 = (
        float(g.replace(",", "")) for g in m.groups())

    # one simulated second at 1 kHz: 9 or 10 whole revolutions of each 10 Hz lidar (the last
    # may end with the run), 1000 IMU samples; a VLP-16 fires 28,800 rays a revolution and
    # about half meet the terrain and obstacles
    assert 9 <= revs <= 10 and nimu == 1000
    assert 8000 < vlp < 28800 and 15000 < os1 < 65536
    assert 9.0 < fz < 10.6        # the vehicle on the ground: about +g up
    assert steps_s > 0 and rtf > 0

    # the pictures are pictures, the clouds hold the last revolutions, in the scene
    import matplotlib.image
    import open3d as o3d
    for name in ("birdseye.png", "imu.png", "ouster_range.png"):
        img = matplotlib.image.imread(tmp_path / name)
        assert img.ndim == 3 and img.shape[0] > 300 and img.shape[1] > 600
        assert img[..., :3].std() > 0.05
    vlp_pts = np.asarray(o3d.io.read_point_cloud(str(tmp_path / "vlp16.pcd")).points)
    os1_pts = np.asarray(o3d.io.read_point_cloud(str(tmp_path / "os1.pcd")).points)
    assert len(vlp_pts) == last_vlp and len(os1_pts) == last_os1
    # the VLP-16 reports world coordinates: the 40 m terrain, up to 2 m obstacles
    assert np.abs(vlp_pts[:, :2]).max() <= 20.5 and -0.6 < vlp_pts[:, 2].min()
    assert vlp_pts[:, 2].max() < 2.5
    # the vehicle left (8, 0) on its circle of about 8 m around the origin
    path = np.loadtxt(tmp_path / "path.csv", delimiter=",", skiprows=1)
    assert len(path) == 1000 and path[0, 0] == pytest.approx(0.001)
    assert 1.0 < np.hypot(*(path[-1, 1:3] - path[0, 1:3])) < 4.0
    assert np.all(np.abs(np.hypot(path[:, 1], path[:, 2]) - 8.0) < 1.0)
