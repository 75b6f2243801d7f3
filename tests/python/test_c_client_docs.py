# SPDX-License-Identifier: MIT
"""The C programs of README.md and client-c/README.md are tests: each is compiled as C11 against
the built client, run against the real daemon, and prints what its README says it prints."""

from __future__ import annotations

import os
import pathlib
import re
import subprocess

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]


def c_block(readme: pathlib.Path) -> str:
    blocks = re.findall(r"```c\n(.*?)```", readme.read_text(), flags=re.S)
    programs = [b for b in blocks if "int main(" in b]
    assert programs, f"{readme} has no C program"
    return programs[0]


def build_and_run(tmp_path, examples_dir, source: str, port: int) -> str:
    src = tmp_path / "readme.c"
    src.write_text(source.replace("7700", str(port)))
    exe = tmp_path / "readme"
    lib = examples_dir / "libsensim.so"
    if not lib.is_file():
        pytest.fail(f"{lib} is missing: build the client", pytrace=False)
    cache = (examples_dir.parent / "CMakeCache.txt").read_text()
    flags = ["-fsanitize=address,undefined"] if "SENSIM_SANITIZE:BOOL=ON" in cache else []
    r = subprocess.run(["cc", "-std=c11", "-Wall", "-Wextra", "-Werror", *flags, str(src),
                        f"-I{REPO / 'client-c' / 'include'}", str(lib),
                        f"-Wl,-rpath,{examples_dir}", "-o", str(exe)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ))
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def test_readme_c_program_prints_two_revolutions(sensimd, examples_dir, tmp_path):
    out = build_and_run(tmp_path, examples_dir, c_block(REPO / "README.md"), sensimd.port)
    revolutions = re.findall(r"^t = (\S+) s: a revolution of (\d+) points$", out, re.M)
    assert len(revolutions) == 2, out
    for t, n in revolutions:
        # eight lasers on the ground per firing sequence, and a few returns from the air
        assert 8 * 1808 <= int(n) <= 8 * 1809 + 16, out


def test_client_readme_program_prints_its_step_and_hit(sensimd, examples_dir, tmp_path):
    out = build_and_run(tmp_path, examples_dir, c_block(REPO / "client-c" / "README.md"),
                        sensimd.port)
    assert out.splitlines() == ["step 1: 1 records, accel z 9.80665", "hit object 1 at 4.000 m"]
