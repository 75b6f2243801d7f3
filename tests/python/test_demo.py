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
