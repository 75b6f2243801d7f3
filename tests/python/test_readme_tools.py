# SPDX-License-Identifier: MIT
"""The READMEs' tool examples are tests: every Python example of client-python/README.md from
"Lidar presets" on runs against the real daemon and prints what its comments say, and the
command-line sessions of both READMEs (record while a simulation steps, then rosbag info,
export, plot, info) run as written and leave files other tools read."""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
CLIENT_README = REPO / "client-python" / "README.md"

# what the scripts named in the command-line sessions stand for: a simulation creating lidar
# 5 and IMU 7 in environment "demo", waiting for the recorder, then stepping 0.3 s
SIMULATION = """
import sensim
from sensim.record import wait_for_subscribers

with sensim.Client("127.0.0.1", {port}, environment="demo") as c:
    c.create_primitive(1, "plane")
    c.create_object(1, 1)
    c.create_primitive(2, "box", half_extents=(1.0, 1.0, 1.0))
    c.create_object(2, 2, local_pose=((6.0, 0, 1.0), None))
    c.create_body(1, pose=((0, 0, 0.5), None))
    c.create_lidar(5, body_id=1, mount=((0, 0, 1.0), None), preset="os1-16-512",
                   misses="nan")
    c.create_imu(7, body_id=1, accelerometer=True, gyroscope=True, sample_rate=100.0)
    wait_for_subscribers(c, [5, 7])
    with sensim.LockStep(c) as sim:
        list(sim.run([k * 0.01 for k in range(31)]))
"""


def section(text: str, start: str, end: str) -> str:
    a = text.index(start)
    return text[a:text.index(end, a)]


def blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", text, flags=re.S)


def run_py(code: str, port: int, cwd: pathlib.Path) -> list[str]:
    out = subprocess.run([sys.executable, "-c", code.replace("7700", str(port))], cwd=cwd,
                         capture_output=True, text=True, timeout=300, env=dict(os.environ))
    assert out.returncode == 0, f"{code}\n{out.stderr}"
    return out.stdout.splitlines()


def test_client_readme_tool_examples_run(sensimd, tmp_path):
    text = section(CLIENT_README.read_text(), "## Lidar presets", "## Lower level")
    examples = blocks(text, "python")
    assert len(examples) == 5
    presets, lockstep, streams, tools, mesh = examples

    lines = run_py(presets, sensimd.port, tmp_path)
    assert "os1-128-2048" in lines[0] and "vlp16" in lines[0]
    assert lines[1] == "{'channels': 128, 'columns': 2048, 'frequency': 20.0}"

    lines = run_py(lockstep, sensimd.port, tmp_path)
    # revolutions of the VLP-16 end near 0.1, 0.2 and 0.3 s; at constant speed the IMU
    # reads gravity's reaction
    assert len(lines) == 3 + 1
    assert all(re.fullmatch(r"t = 0\.[123]0\d s: \d+ points", line) for line in lines[:3])
    assert lines[3] == "[0.      0.      9.80665]"

    lines = run_py(streams, sensimd.port, tmp_path)
    assert lines and [int(line.split()[0]) for line in lines] == list(range(1, len(lines) + 1))
    assert all(line.endswith("[0.      0.      9.80665]") for line in lines)

    lines = run_py(tools, sensimd.port, tmp_path)
    assert lines == ["8192 points, 10 IMU samples"]
    import open3d as o3d
    pc = o3d.io.read_point_cloud(str(tmp_path / "os1.pcd"), remove_nan_points=False)
    assert len(pc.points) == 8192
    assert len((tmp_path / "os1.xyz").read_text().splitlines()) == 8192
    assert len((tmp_path / "imu.csv").read_text().splitlines()) == 11
    import rosbag
    with rosbag.Bag(str(tmp_path / "run.bag")) as bag:
        topics = bag.get_type_and_topic_info().topics
    assert topics["/os1/points"].message_count == 1
    assert topics["/sensim/sensor_7/data"].message_count == 10
    from PIL import Image
    for png in ("top.png", "range.png", "imu.png"):
        assert Image.open(tmp_path / png).format == "PNG"

    assert run_py(mesh, sensimd.port, tmp_path) == ["[2.]"]


def shell_session(block: str) -> str:
    """The session as a bash script: `python` is this interpreter, comments dropped."""
    lines = []
    for line in block.splitlines():
        line = re.sub(r"\s+#.*$", "", line)
        line = re.sub(r"^python ", f"{sys.executable} ", line)
        lines.append(line)
    return "set -e\n" + "\n".join(lines) + "\n"


@pytest.mark.parametrize("readme", ["README.md", "client-python/README.md"])
def test_readme_command_line_sessions_run(sensimd, tmp_path, readme):
    text = (REPO / readme).read_text()
    sessions = [b for b in blocks(text, "sh") if "sensim record" in b]
    assert len(sessions) == 1
    script = shell_session(sessions[0])
    for name in ("simulation.py", "my_simulation.py"):
        (tmp_path / name).write_text(SIMULATION.format(port=sensimd.port))
    env = dict(os.environ, SENSIM_PORT=str(sensimd.port))
    out = subprocess.run(["bash", "-c", script], cwd=tmp_path, capture_output=True, text=True,
                         timeout=300, env=env)
    assert out.returncode == 0, f"{script}\n{out.stdout}\n{out.stderr}"
    # what the recorder wrote: 0.3 s of a 10 Hz lidar and a 100 Hz IMU
    assert re.search(r"sensor 5: 3 records \(24576 points\)", out.stdout), out.stdout
    assert re.search(r"sensor 7: 30 records \(imu\)", out.stdout), out.stdout
    import rosbag
    with rosbag.Bag(str(tmp_path / "run.bag")) as bag:
        assert bag.get_message_count() == 3 + 30 + 0    # clouds, IMU data (no magnetometer)
    assert sorted(os.listdir(tmp_path / "clouds")) == [f"sensor5_{k:06d}.pcd" for k in range(3)]
    import open3d as o3d
    pc = o3d.io.read_point_cloud(str(tmp_path / "clouds" / "sensor5_000002.pcd"),
                                 remove_nan_points=True)
    assert 0 < len(pc.points) < 8192 and np.isfinite(np.asarray(pc.points)).all()
    pictures = sorted(os.listdir(tmp_path / "pictures"))
    assert pictures == ["sensor5_000002_range.png", "sensor5_000002_side.png",
                        "sensor5_000002_top.png", "sensor7_imu.png"]
    if readme == "README.md":
        assert "topics:" in out.stdout and "/sensim/sensor_5/points" in out.stdout
        assert len(os.listdir(tmp_path / "ply")) == 3
        assert "counters:" in out.stdout                 # sensim info
        assert sorted(os.listdir(tmp_path / "bag-pictures")) == pictures   # from the bag
    else:
        assert (tmp_path / "csv" / "sensor7.csv").is_file()
