# SPDX-License-Identifier: MIT
"""The README is a test: its Python example runs against the real daemon and prints what the
README says it prints."""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys
import os

REPO = pathlib.Path(__file__).resolve().parents[2]


def readme_python_blocks() -> list[str]:
    text = (REPO / "README.md").read_text()
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def test_readme_python_example_runs(sensimd):
    blocks = readme_python_blocks()
    assert blocks, "README.md has no python example"
    code = blocks[0].replace("7700", str(sensimd.port))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, env=dict(os.environ))
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "0.1.0" or re.fullmatch(r"\d+\.\d+\.\d+", lines[0])
    assert lines[1] == "[2.]"
    # one VLP-16 revolution at 10 Hz: 1808 or 1809 firing sequences of 16 lasers, every point
    # at the radius times the refractive index of the default air (the optical path)
    n, rmin, rmax = lines[2].split()
    assert int(n) in (1808 * 16, 1809 * 16)
    assert abs(float(rmin) - 2 * 1.000273) <= 2e-6 and abs(float(rmax) - 2 * 1.000273) <= 2e-6


def test_readme_observer_snippet_runs(sensimd):
    """The observer of "Streams": describes the environment, subscribes to lidar 5 and
    decodes the cloud a controller's step pushes (the controller steps in this process)."""
    code = re.findall(r"```py\n(.*?)```", (REPO / "README.md").read_text(), flags=re.S)
    assert len(code) == 1
    script = ("import sensim\n"
              # (a longer wait than the snippet's 1 s: a sanitizer build on a loaded machine)
              + code[0].replace("7700", str(sensimd.port)).replace("timeout=1.0",
                                                                   "timeout=60.0")
              + "print(lidars, points.dtype.names, len(points))\n")
    with sensimd.client() as c:
        c.create_primitive(1, "sphere", radius=3.0)
        c.create_object(1, 1)
        c.create_lidar(5, vlp16={})
        c.update_state(0.0)
        c.step(0.0)
        viewer = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, env=dict(os.environ))
        # step once the observer has subscribed: its 1 s wait then sees the revolution
        import time
        deadline = time.monotonic() + 60
        while not c.get_info().subscribers and time.monotonic() < deadline:
            time.sleep(0.02)
        c.update_state(0.15)
        c.step(0.15)
        out, err = viewer.communicate(timeout=60)
    assert viewer.returncode == 0, err
    lidars, rest = out.strip().split("] ", 1)
    assert lidars == "[5" and rest.startswith("('x', 'y', 'z', 'intensity'")
    assert int(rest.rsplit(" ", 1)[1]) == 1808 * 16 or int(rest.rsplit(" ", 1)[1]) == 1809 * 16
