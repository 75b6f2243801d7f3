# SPDX-License-Identifier: MIT
"""sensim-mujoco, the program: its options, its refusals (a clear message and a non-zero
status), and a short run against the real daemon that prints the summary line."""

from __future__ import annotations

import pathlib
import re
import signal
import subprocess

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
SCENE = REPO / "client-c" / "mujoco" / "scenes" / "vehicle.xml"


@pytest.fixture
def program(examples_dir):
    exe = examples_dir / "sensim-mujoco"
    if not exe.exists():
        pytest.skip("sensim-mujoco was not built (MuJoCo not installed)")

    def run(*args: str, timeout: float = 300):
        return subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=timeout)
    return run


def test_usage_and_refusals(program, tmp_path):
    out = program("--help")
    assert out.returncode == 0 and "usage: sensim-mujoco MODEL.xml" in out.stdout
    assert "--ratio K" in out.stdout and "--realtime X" in out.stdout
    out = program()
    assert out.returncode == 2 and "usage:" in out.stderr
    out = program(str(SCENE), "--ratio", "0")
    assert out.returncode == 2 and "--ratio '0' is not valid" in out.stderr
    out = program(str(SCENE), "--depth", "17")
    assert out.returncode == 2 and "--depth '17' is not valid" in out.stderr
    out = program(str(SCENE), "--frobnicate", "1")
    assert out.returncode == 2 and "unknown option --frobnicate" in out.stderr
    out = program(str(SCENE), "--seconds")
    assert out.returncode == 2 and "--seconds needs a value" in out.stderr
    out = program(str(tmp_path / "missing.xml"))
    assert out.returncode == 1 and "missing.xml" in out.stderr
    out = program(str(SCENE), "--trace", "nobody:" + str(tmp_path / "t.csv"))
    assert out.returncode == 2 and "the model has no body 'nobody'" in out.stderr
    out = program(str(SCENE), "--key", "3")
    assert out.returncode == 2 and "--key 3: the model has 1 keyframes" in out.stderr
    out = program(str(SCENE), "--map", str(tmp_path / "none.map"))
    assert out.returncode == 1 and "none.map" in out.stderr


def test_refusals_against_the_daemon(program, sensimd, tmp_path):
    # nothing listening
    out = program(str(SCENE), "--port", "1")
    assert out.returncode == 1 and "connecting to 127.0.0.1:1" in out.stderr
    # a side file with a value the daemon refuses: its message, naming the field
    side = tmp_path / "bad.map"
    side.write_text("sensim.sensor.vlp16 lidar site=vlp16 pattern=vlp16 frequency=50\n")
    out = program(str(SCENE), "--port", str(sensimd.port), "--map", str(side))
    assert out.returncode == 1, out.stdout
    assert "sensim.sensor.vlp16" in out.stderr and "lidar.vlp16.frequency = 50" in out.stderr


def test_a_short_run_prints_the_summary(program, sensimd, tmp_path):
    trace = tmp_path / "car.csv"
    out = program(str(SCENE), "--port", str(sensimd.port), "--seconds", "0.05", "--ratio", "5",
                  "--quiet", "--trace", f"car:{trace}")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert len(lines) == 1, out.stdout         # --quiet: the summary alone
    stats = dict(re.findall(r"(\w+)=([\d.]+)", lines[0]))
    assert int(stats["physics_steps"]) == 50 and int(stats["sensor_steps"]) == 10
    assert float(stats["sim_s"]) == pytest.approx(0.05)
    rows = trace.read_text().splitlines()
    assert rows[0] == "t,x,y,z,qx,qy,qz,qw" and len(rows) == 1 + 10
    t, x, y, z, qx, qy, qz, qw = map(float, rows[-1].split(","))
    assert t == pytest.approx(0.05) and abs(x - 8.0) < 0.2 and abs(qz - qw) < 0.05  # heading +y


def test_unreadable_map_and_unnamed_trace_body_are_refused(program, tmp_path):
    # a directory opens as a file, then fails to read: not an empty side file
    out = program(str(SCENE), "--map", str(tmp_path))
    assert out.returncode == 1 and "Is a directory" in out.stderr, out.stderr
    # no body name: MuJoCo would answer the first unnamed body
    model = tmp_path / "unnamed.xml"
    model.write_text("<mujoco><worldbody><body><freejoint/><geom size='.1'/></body>"
                     "</worldbody></mujoco>")
    out = program(str(model), "--trace", ":" + str(tmp_path / "t.csv"))
    assert out.returncode == 2 and "the model has no body ''" in out.stderr, out.stderr
    assert not (tmp_path / "t.csv").exists()


def test_sigterm_stops_a_slow_pace(examples_dir, sensimd):
    """At 1e-6 simulated seconds per wall second a tick of 1 ms is a pause of 1000 s: a
    SIGTERM during it ends the run (the summary, the sensors removed), as between ticks."""
    exe = examples_dir / "sensim-mujoco"
    if not exe.exists():
        pytest.skip("sensim-mujoco was not built (MuJoCo not installed)")
    proc = subprocess.Popen([str(exe), str(SCENE), "--port", str(sensimd.port), "--realtime",
                             "1e-6", "--seconds", "1"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        for line in proc.stdout:                  # mirrored: the loop starts after the last
            if line.startswith("sensim-mujoco: sensor 8 "):
                break
        # at once: most likely before the first pause begins, so the pause must look at the
        # flag the handler set, not only wake up for a signal
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    stats = dict(re.findall(r"(\w+)=([\d.]+)", out))
    assert int(stats["physics_steps"]) < 10, out
