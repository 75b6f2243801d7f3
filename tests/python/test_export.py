# SPDX-License-Identifier: MIT
"""Exported files read back by independent readers: clouds from the real daemon written as
PCD (binary and ASCII, organised kept), PLY and XYZ are read by Open3D and by PCL's
command-line tools (pcl_convert_pcd_ascii_binary, pcl_pcd2ply), IMU samples as CSV by the csv
module; every value comes back; arrays of any layout give the same bytes."""

from __future__ import annotations

import csv
import math
import shutil
import subprocess

import numpy as np
import pytest

import sensim
from sensim import export

o3d = pytest.importorskip("open3d")
PCL = shutil.which("pcl_convert_pcd_ascii_binary")
needs_pcl = pytest.mark.skipif(PCL is None, reason="pcl-tools not installed (setup.sh)")


def room_clouds(c):
    """One revolution of an OS1-16-512 (ouster layout, misses NaN: 16 x 512), a VLP-16
    (velodyne layout, misses removed), a flash grid with normals, and the IMU samples of the
    same 0.1 s, in a half-open room: a sphere of 6 m cut by a box that leaves a gap."""
    c.set_ambient("custom", return_probability_scaling=0.0)
    c.create_primitive(1, "box", half_extents=(20.0, 0.5, 20.0))
    c.create_object(1, 1, local_pose=((0, 4.0, 0), None))
    c.create_primitive(2, "plane")
    c.create_object(2, 2, local_pose=((0, 0, -1.5), None))
    c.create_lidar(5, preset="os1-16-512", misses="nan")
    c.create_lidar(6, preset="vlp16")
    c.create_lidar(8, flash={"columns": 16, "rows": 8, "fov_horizontal": 1.0,
                             "fov_vertical": 0.5, "frame_rate": 10.0},
                   mount=((0, 0, 0), (0, 0, math.sin(math.pi / 4), math.cos(math.pi / 4))),
                   fields=["x", "y", "z", "intensity", "normal", "ring"], misses="zero")
    c.create_imu(7, accelerometer=True, gyroscope=True, magnetometer=True, sample_rate=200.0)
    c.set_environment(magnetic_field=(2e-5, 0, -4e-5))
    outs = []
    for t in (0.0, 0.05, 0.1001):
        c.update_state(t)
        outs += sensim.outputs(c.step(t))
    by = {}
    for o in outs:
        by.setdefault(o.sensor_id, []).append(o)
    return by


@pytest.fixture(scope="module")
def clouds():
    from sensim.testing import Daemon
    with Daemon() as d, d.client() as c:
        yield room_clouds(c)


def pcl_ascii(src, dst):
    """PCL converts src to ASCII; returns (header dict, rows as float arrays)."""
    subprocess.run([PCL, str(src), str(dst), "0", "9"], check=True, capture_output=True)
    lines = dst.read_text().splitlines()
    head = {}
    for i, line in enumerate(lines):
        if line.startswith("#"):
            continue
        k, _, v = line.partition(" ")
        head[k] = v
        if k == "DATA":
            rows = [list(map(float, r.split())) for r in lines[i + 1:]]
            return head, np.array(rows)
    raise AssertionError("PCL wrote no DATA line")


def xyz64(cloud):
    return np.column_stack([cloud[a].astype(np.float64) for a in "xyz"])


def same_floats(got, want):
    """Values read back equal the float32 ones they were written from: exactly for binary
    files; text holds 9 significant digits, which round to the same float32."""
    got = np.asarray(got)
    np.testing.assert_array_equal(got.astype(np.float32), np.asarray(want).astype(np.float32))


@pytest.mark.parametrize("binary", [True, False])
def test_pcd_read_by_open3d_organised_and_exact(clouds, tmp_path, binary):
    out = clouds[5][0]
    cloud = out.value
    assert len(cloud) == 16 * 512 and np.isnan(cloud["x"]).any() and (~np.isnan(cloud["x"])).any()
    path = tmp_path / "os1.pcd"
    export.write_pcd(path, cloud, binary=binary, shape=(16, 512))
    pc = o3d.io.read_point_cloud(str(path), remove_nan_points=False)
    if binary:
        np.testing.assert_array_equal(np.asarray(pc.points), xyz64(cloud))  # NaN equal NaN
    else:
        same_floats(pc.points, xyz64(cloud))


@needs_pcl
@pytest.mark.parametrize("binary", [True, False])
def test_pcd_read_by_pcl_every_field(clouds, tmp_path, binary):
    cloud = clouds[5][0].value
    path = tmp_path / "os1.pcd"
    export.write_pcd(path, cloud, binary=binary, shape=(16, 512))
    head, rows = pcl_ascii(path, tmp_path / "pcl.pcd")
    assert head["FIELDS"].split() == list(cloud.dtype.names)
    assert (head["WIDTH"], head["HEIGHT"], head["POINTS"]) == ("512", "16", str(16 * 512))
    assert head["TYPE"].split() == ["F", "F", "F", "F", "U", "U", "U", "U", "U"]
    for i, name in enumerate(cloud.dtype.names):
        np.testing.assert_allclose(rows[:, i], cloud[name].astype(np.float64), rtol=1e-7,
                                   err_msg=name)


@needs_pcl
def test_pcd_through_pcl_to_ply_read_by_open3d(clouds, tmp_path):
    cloud = clouds[6][0].value                       # velodyne layout, 22-byte points
    assert cloud.dtype.itemsize == 22 and len(cloud) > 10000
    export.write_pcd(tmp_path / "vlp.pcd", cloud)
    subprocess.run(["pcl_pcd2ply", "-format", "1", str(tmp_path / "vlp.pcd"),
                    str(tmp_path / "vlp.ply")], check=True, capture_output=True)
    pc = o3d.io.read_point_cloud(str(tmp_path / "vlp.ply"))
    np.testing.assert_array_equal(np.asarray(pc.points), xyz64(cloud))


@pytest.mark.parametrize("binary", [True, False])
def test_ply_read_by_open3d_with_normals(clouds, tmp_path, binary):
    out = clouds[8][0]
    cloud = out.value
    hit = cloud["ring"] >= 0
    normals = cloud["normal"].astype(np.float64)
    # the flash looks along +y at the box face at y = 3.5 and the floor
    assert np.all(np.isin(np.round(normals[(normals != 0).any(axis=1)], 6),
                          [0.0, 1.0, -1.0]))
    path = tmp_path / "flash.ply"
    export.write_ply(path, cloud, binary=binary)
    pc = o3d.io.read_point_cloud(str(path), remove_nan_points=False,
                                 remove_infinite_points=False)
    same_floats(pc.points, xyz64(cloud)[hit])
    same_floats(pc.normals, normals[hit])
    if binary:
        np.testing.assert_array_equal(np.asarray(pc.points), xyz64(cloud)[hit])
    text = path.read_bytes().split(b"end_header\n")[0].decode()
    assert "property float nx" in text and "property ushort ring" in text


def test_xyz_misses_as_zeros_or_left_out(clouds, tmp_path):
    cloud = clouds[5][0].value
    miss = np.isnan(cloud["x"])
    assert export.write_xyz(tmp_path / "all.xyz", cloud) == len(cloud)
    lines = (tmp_path / "all.xyz").read_text().splitlines()
    assert len(lines) == 16 * 512
    assert all(lines[i] == "0 0 0" for i in np.flatnonzero(miss))
    pc = o3d.io.read_point_cloud(str(tmp_path / "all.xyz"), format="xyz")
    want = np.where(miss[:, None], 0.0, xyz64(cloud))
    same_floats(pc.points, want)
    assert export.write_xyz(tmp_path / "hits.xyz", cloud, keep_misses=False) == (~miss).sum()
    pc = o3d.io.read_point_cloud(str(tmp_path / "hits.xyz"), format="xyz")
    same_floats(pc.points, xyz64(cloud)[~miss])


def test_csv_of_imu_samples(clouds, tmp_path):
    samples = clouds[7]
    assert len(samples) == 20          # 200 Hz over 0.1 s
    assert export.write_csv(tmp_path / "imu.csv", samples) == 20
    with open(tmp_path / "imu.csv", newline="") as f:
        rows = list(csv.reader(f))
    assert rows[0] == ["time [s]", "sensor_id"] + [
        f"{name}_{axis} [{unit}]" for name, unit in (("acceleration", "m/s^2"),
                                                     ("angular_velocity", "rad/s"),
                                                     ("magnetic_field", "T"))
        for axis in "xyz"]
    for row, s in zip(rows[1:], samples):
        assert float(row[0]) == s.time and int(row[1]) == 7
        got = np.array(row[2:], dtype=float)
        want = np.concatenate([s.value.acceleration, s.value.angular_velocity,
                               s.value.magnetic_field])
        np.testing.assert_array_equal(got, want)
    # the field in the IMU frame at rest: the environment's, gravity's reaction upwards
    np.testing.assert_allclose(np.array(rows[5][-3:], dtype=float), [2e-5, 0, -4e-5])
    np.testing.assert_allclose(np.array(rows[5][2:5], dtype=float), [0, 0, 9.80665])
    with pytest.raises(ValueError, match="one kind per file"):
        export.write_csv(tmp_path / "mixed.csv", samples[:1] + clouds[6][:1])


LAYOUTS = {
    "fortran": np.asfortranarray,
    "sliced": lambda a: np.repeat(a, 2, axis=0)[::2],
    "big_endian": lambda a: a.astype(a.dtype.newbyteorder(">")),
    "transposed_view": lambda a: np.ascontiguousarray(a.T).T,
}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_any_array_layout_writes_the_same_files(clouds, tmp_path, layout):
    cloud = clouds[6][0].value
    plain = np.column_stack([cloud[a] for a in ("x", "y", "z", "intensity")]).astype("<f4")
    other = LAYOUTS[layout](plain)
    assert not (other.flags.c_contiguous and other.dtype == plain.dtype)
    for name, write in (("pcd", export.write_pcd), ("ply", export.write_ply),
                        ("xyz", export.write_xyz)):
        write(tmp_path / f"a.{name}", plain)
        write(tmp_path / f"b.{name}", other)
        assert (tmp_path / f"a.{name}").read_bytes() == (tmp_path / f"b.{name}").read_bytes()
    # and a broadcast row: every point the same
    export.write_pcd(tmp_path / "c.pcd", np.broadcast_to(plain[:1], (5, 4)))
    pc = o3d.io.read_point_cloud(str(tmp_path / "c.pcd"))
    np.testing.assert_array_equal(np.asarray(pc.points), np.repeat(plain[:1, :3], 5, axis=0))
    # a big-endian structured cloud writes the same bytes as the little-endian one
    be = cloud.astype(cloud.dtype.newbyteorder(">"))
    export.write_pcd(tmp_path / "le.pcd", cloud)
    export.write_pcd(tmp_path / "be.pcd", be)
    assert (tmp_path / "le.pcd").read_bytes() == (tmp_path / "be.pcd").read_bytes()


def test_bad_inputs_name_what_is_wrong(tmp_path):
    with pytest.raises(ValueError, match=r"shape \(N, 3\) or \(N, 4\), got shape \(2, 5\)"):
        export.write_pcd(tmp_path / "x.pcd", np.zeros((2, 5)))
    with pytest.raises(ValueError, match="shape: 3 x 3 does not hold the cloud's 4 points"):
        export.write_pcd(tmp_path / "x.pcd", np.zeros((4, 3)), shape=(3, 3))
    with pytest.raises(ValueError, match="real numbers"):
        export.write_ply(tmp_path / "x.ply", np.array([["a", "b", "c"]]))
    # float64 that float32 cannot hold exactly is kept as float64 (PCD SIZE 8)
    export.write_pcd(tmp_path / "d.pcd", np.array([[0.1, 0.2, 0.3]]), binary=False)
    text = (tmp_path / "d.pcd").read_text()
    assert "SIZE 8 8 8" in text and text.endswith("0.10000000000000001 0.20000000000000001 "
                                                  "0.29999999999999999\n")
