# SPDX-License-Identifier: MIT
"""The Python demo of the README quick start runs against the real daemon and prints the wall
ranges that constant-velocity motion predicts."""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

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
