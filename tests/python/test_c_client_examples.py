# SPDX-License-Identifier: MIT
"""The C client's examples (client-c/examples) run against the real sensimd, their output checked
against independent truth: the lock-step loop's IMU against the circle it drives (centripetal
acceleration v^2 / R, gravity, yaw rate v / R); the subscriber's PCD files, read back by Open3D,
against the cloud the Python client received in the same step; the raycast against the
analytic distances of its scene."""

from __future__ import annotations

import math
import os
import re
import subprocess

import numpy as np
import pytest

import sensim


def exe(examples_dir, name):
    path = examples_dir / name
    if not path.is_file():
        pytest.fail(f"{path} is missing: build the {name} target", pytrace=False)
    return str(path)


def run(examples_dir, name, *args, timeout=120):
    r = subprocess.run([exe(examples_dir, name), *map(str, args)], capture_output=True,
                       text=True, timeout=timeout)
    assert r.returncode == 0, f"{name} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}"
    return r.stdout


def test_lockstep_imu_reads_the_circle(sensimd, examples_dir):
    radius, speed = 20.0, 5.0
    out = run(examples_dir, "sensim_lockstep", "--port", sensimd.port, "--seconds", 0.5,
              "--radius", radius, "--speed", speed)
    summary = re.search(r"^ticks (\d+) clouds (\d+) imu_samples (\d+)", out, re.M)
    assert summary, out
    ticks, clouds, samples = map(int, summary.groups())
    assert ticks == 501 and samples == 500
    # a VLP-16 at 10 Hz completes 4 revolutions by t = 0.5 s (the fifth at 0.5 + a ray)
    assert clouds == 4
    counts = [int(m) for m in re.findall(r"^cloud \d+: (\d+) points of 22 bytes", out, re.M)]
    assert len(counts) == 4
    # the eight lasers below the horizon meet the ground in every one of the 1808.4 firing
    # sequences of a revolution (1.5 m up, range 100 m); those above it only the boxes
    for n in counts:
        assert 8 * 1808 <= n <= 8 * 1809 + 3000, counts
    acc = [float(x) for x in re.search(r"^imu_mean_accel (\S+) (\S+) (\S+)", out, re.M).groups()]
    gyro = [float(x) for x in re.search(r"^imu_mean_gyro (\S+) (\S+) (\S+)", out, re.M).groups()]
    # specific force in the body frame: v^2 / R towards the centre (the body's +y, left of its
    # heading), +g up; the yaw rate v / R
    assert acc[0] == pytest.approx(0.0, abs=1e-3)
    assert acc[1] == pytest.approx(speed ** 2 / radius, rel=1e-4)
    assert acc[2] == pytest.approx(9.80665, rel=1e-9)
    assert gyro == pytest.approx([0.0, 0.0, speed / radius], abs=1e-9)


@pytest.mark.parametrize("encoding", ["raw", "zstd", "quantized_zstd"])
def test_subscriber_writes_the_clouds_the_step_produced(sensimd, examples_dir, tmp_path,
                                                        encoding):
    o3d = pytest.importorskip("open3d")
    with sensimd.client(environment="subscribed") as c:
        c.create_primitive(1, "box", half_extents=(15.0, 12.0, 4.0))
        c.create_object(1, 1)
        c.create_primitive(2, "sphere", radius=1.0)
        c.create_object(2, 2, local_pose=(4.0, 2.0, 0.5))
        c.create_lidar(3, vlp16={"frequency": 10.0}, layout="velodyne")
        proc = subprocess.Popen(
            [exe(examples_dir, "sensim_subscriber"), "--port", str(sensimd.port),
             "--environment", "subscribed", "--sensor", "3", "--out", str(tmp_path),
             "--encoding", encoding, "--count", "2", "--timeout-ms", "30000"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert proc.stdout.readline().startswith("subscribed"), proc.stderr.read()
            clouds = []  # revolutions complete at 0.1 and 0.2 s
            for k in range(6):
                c.update_state(0.05 * k)
                clouds += sensim.Client.lidar_clouds(c.step(0.05 * k), 3)
            out, err = proc.communicate(timeout=60)
        finally:
            proc.kill()
    assert proc.returncode == 0, err
    assert len(clouds) == 2
    lines = [l for l in out.splitlines() if l.endswith(" m")]
    assert len(lines) == 2, out
    for k, cloud in enumerate(clouds):
        path = tmp_path / f"cloud_{k:06d}.pcd"
        pcd = o3d.io.read_point_cloud(str(path))
        xyz = np.asarray(pcd.points)
        want = np.stack([cloud["x"], cloud["y"], cloud["z"]], axis=1).astype(np.float64)
        assert xyz.shape == want.shape
        max_error = float(re.search(r"max_error (\S+) m", lines[k]).group(1))
        if encoding == "quantized_zstd":
            assert 0 < max_error <= 0.001
            assert np.max(np.linalg.norm(xyz - want, axis=1)) <= max_error * (1 + 1e-6) + 1e-7
        else:
            assert max_error == 0.0
            assert np.array_equal(xyz, want)
        # the other fields, packed in the file after its header, losslessly
        data = path.read_bytes()
        body = data[data.index(b"DATA binary\n") + len(b"DATA binary\n"):]
        packed = np.frombuffer(body, dtype=[("x", "<f4"), ("y", "<f4"), ("z", "<f4"),
                                            ("intensity", "<f4"), ("ring", "<u2"),
                                            ("time", "<f4")])
        assert np.array_equal(packed["ring"], cloud["ring"])
        assert np.array_equal(packed["intensity"], cloud["intensity"])
        assert np.array_equal(packed["time"], cloud["time"])


def test_raycast_example_meets_its_scene(sensimd, examples_dir):
    out = run(examples_dir, "sensim_raycast", "--port", sensimd.port, "--extra", 100000)
    rays = {m[0]: (float(m[1]), int(m[2]), int(m[3]), tuple(map(float, m[4:7])))
            for m in re.findall(r"^ray (\w+) distance (\S+) object (\d+) label (\d+) normal "
                                r"(\S+) (\S+) (\S+)$", out, re.M)}
    # from (0, 0, 1): the sphere of radius 1 centred 5 m ahead, the cube of side 1 centred
    # 5 m to the left, the ground 1 m below, nothing above
    assert rays["sphere"][:3] == (pytest.approx(4.0, abs=1e-6), 2, 2)
    assert rays["sphere"][3] == pytest.approx((-1, 0, 0), abs=1e-6)
    assert rays["box"][:3] == (pytest.approx(4.5, abs=1e-6), 3, 3)
    assert rays["ground"][:3] == (pytest.approx(1.0, abs=1e-6), 1, 1)
    assert rays["ground"][3] == pytest.approx((0, 0, 1), abs=1e-6)
    assert math.isinf(rays["sky"][0]) and rays["sky"][1] == 0
    grid = re.search(r"^grid (\d+) rays, (\d+) on the ground at 1 m", out, re.M)
    assert grid and grid.groups() == ("100000", "100000"), out


def test_examples_refuse_bad_arguments(examples_dir):
    for name, args in (("sensim_lockstep", ["--seconds", "-1"]),
                       ("sensim_subscriber", ["--sensor", "3"]),
                       ("sensim_raycast", ["--extra", "many"]),
                       ("sensim_lockstep", ["--speed", "inf"]),
                       ("sensim_lockstep", ["--seconds", "inf"]),
                       ("sensim_lockstep", ["--depth", "1.5"]),
                       ("sensim_decode_cloud", ["1", "many", "12", "in", "out"]),
                       ("sensim_decode_cloud", ["7", "1", "12", "in", "out"]),
                       ("sensim_decode_cloud", ["0", "-1", "12", "in", "out"]),
                       ("sensim_decode_cloud", ["0", "4294967296", "1", "in", "out"])):
        r = subprocess.run([exe(examples_dir, name), *args], capture_output=True, text=True,
                           timeout=30)
        assert r.returncode == 2, (name, r.stdout, r.stderr)
        assert r.stderr


def test_decode_cloud_names_what_it_cannot_read(examples_dir, tmp_path):
    # a directory opens as a file, then fails to read: not an empty cloud
    r = subprocess.run([exe(examples_dir, "sensim_decode_cloud"), "0", "0", "12", str(tmp_path),
                        str(tmp_path / "out")], capture_output=True, text=True, timeout=30)
    assert r.returncode == 1 and f"cannot read {tmp_path}" in r.stderr, (r.stdout, r.stderr)
    assert not (tmp_path / "out").exists()
