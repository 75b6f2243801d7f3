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
