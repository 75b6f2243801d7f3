# SPDX-License-Identifier: MIT
"""Driver layouts against the ROS drivers' own readers: clouds of the Velodyne and Ouster point
types from the real sensimd, turned into sensor_msgs/PointCloud2 messages and read back with
ROS's point_cloud2.read_points (Debian's python3-sensor-msgs), give the values the Python
client decodes; the point types' fields are those of velodyne_pointcloud's PointXYZIRT and
ouster_ros's Point; Velodyne rings ascend with elevation; an organised Ouster cloud reshaped to
(height, width) has each row at one beam's elevation, its columns in the driver's order, a
pixel per ray with misses at NaN; subscriptions keep the organisation unless points go."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sensim import errors, point_cloud_to_numpy
from sensim._proto import pb

point_cloud2 = pytest.importorskip("sensor_msgs.point_cloud2")
ros_msg = pytest.importorskip("sensor_msgs.msg")

F32, U16, U32 = 7, 4, 6       # sensor_msgs/PointField datatypes

# (name, offset, datatype) of the drivers' point types: velodyne_pointcloud's PointXYZIRT
# (PointCloud2Modifier, packed) and ouster_ros::Point (PCL's 16-byte x y z, then its members)
VELODYNE = [("x", 0, F32), ("y", 4, F32), ("z", 8, F32), ("intensity", 12, F32),
            ("ring", 16, U16), ("time", 18, F32)]
OUSTER = [("x", 0, F32), ("y", 4, F32), ("z", 8, F32), ("intensity", 16, F32), ("t", 20, U32),
          ("reflectivity", 24, U16), ("ring", 26, U16), ("ambient", 28, U16),
          ("range", 32, U32)]


def _clear(c):
    """Vacuum-like air: optical path = distance, no atmospheric returns."""
    c.set_ambient("custom", return_probability_scaling=0.0, refractive_index=1.0)


def _room(c, radius=12.0):
    _clear(c)
    c.create_primitive(1, "sphere", radius=radius)
    c.create_object(1, geometry_id=1)


def _ground(c):
    """An unbounded ground 1 m below the sensor: beams below the horizon hit, the rest miss."""
    _clear(c)
    c.create_primitive(1, "plane")
    c.create_object(1, geometry_id=1, local_pose=((0, 0, -1), (0, 0, 0, 1)))


def _revolution(c, sensor):
    """The cloud (PointCloud message) of the first revolution (0.1 s: a VLP-16's ends with
    the first sequence after it)."""
    for t in (0.0, 0.15):
        c.update_state(t)
        done = c.step(t)
    clouds = [d.point_cloud for d in done.outputs if d.sensor_id == sensor]
    assert len(clouds) == 1 and clouds[0].complete
    return clouds[0]


def _ros(cloud):
    """The cloud as a sensor_msgs/PointCloud2, byte for byte (the drivers' message)."""
    return ros_msg.PointCloud2(
        height=cloud.height, width=cloud.width,
        fields=[ros_msg.PointField(name=f.name, offset=f.offset, datatype=f.datatype,
                                   count=f.count) for f in cloud.fields],
        is_bigendian=False, point_step=cloud.point_step,
        row_step=cloud.point_step * cloud.width, data=cloud.data, is_dense=False)


def _same(a, b):
    """Equal values, NaN equal to NaN."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return a.shape == b.shape and bool(np.all((a == b) | (np.isnan(a) & np.isnan(b))))


def _read_back(cloud):
    """Every field read by ROS's reader equals the client's decoding, point by point."""
    points = point_cloud_to_numpy(cloud)
    names = [f.name for f in cloud.fields]
    rows = list(point_cloud2.read_points(_ros(cloud)))
    assert len(rows) == cloud.count
    for k, name in enumerate(names):
        assert _same([r[k] for r in rows], points[name]), name
    return points


def _elevation(p):
    return np.degrees(np.arctan2(p["z"].astype(float), np.hypot(p["x"], p["y"])))


@pytest.mark.parametrize("pattern,lasers", [({"vlp16": {"frequency": 10.0}}, 16),
                                            ({"hdl64e": {"columns": 500}}, 64)])
def test_velodyne_layout_as_velodyne_pointcloud(sensimd, pattern, lasers):
    with sensimd.client() as c:
        _room(c)
        c.create_lidar(5, layout="velodyne", **pattern)
        cloud = _revolution(c, 5)
        assert [(f.name, f.offset, f.datatype, f.count) for f in cloud.fields] == \
            [v + (1,) for v in VELODYNE]
        assert cloud.point_step == 22
        assert (cloud.height, cloud.width) == (1, cloud.count)
        p = _read_back(cloud)

        # rings 0 .. lasers - 1 from the lowest laser up (velodyne_pointcloud's laser_ring)
        el = _elevation(p)
        assert sorted(set(p["ring"].tolist())) == list(range(lasers))
        by_ring = np.array([el[p["ring"] == r].mean() for r in range(lasers)])
        spread = np.array([np.ptp(el[p["ring"] == r]) for r in range(lasers)])
        assert np.all(np.diff(by_ring) > 0.1) and spread.max() < 1e-3
        if lasers == 16:
            np.testing.assert_allclose(by_ring, np.arange(-15, 16, 2), atol=1e-4)
            # firing order kept: laser 0 (-15 degrees), then laser 1 (+1 degree) at ring 8
            assert p["ring"][:4].tolist() == [0, 8, 1, 9]


def test_ouster_layout_as_ouster_ros(sensimd):
    # an OS1-32 over the ground: a pixel per beam and column, row-major, rows from the top beam,
    # the lower beams on the ground and the upper ones missing at NaN (ouster_ros since 0.13)
    with sensimd.client() as c:
        _ground(c)
        c.create_lidar(5, layout="ouster", ouster={"channels": 32, "columns": 512,
                                                   "frequency": 10.0})
        cloud = _revolution(c, 5)
        assert [(f.name, f.offset, f.datatype, f.count) for f in cloud.fields] == \
            [v + (1,) for v in OUSTER]
        assert cloud.point_step == 48
        assert (cloud.height, cloud.width, cloud.count) == (32, 512, 32 * 512)
        p = _read_back(cloud).reshape(cloud.height, cloud.width)

        beam = np.radians(22.5 - 45.0 * np.arange(32) / 31)   # uniform, from the top
        below = beam < 0
        assert np.array_equal(p["ring"], np.repeat(np.arange(32), 512).reshape(32, 512))
        hit = ~np.isnan(p["x"])
        assert np.array_equal(hit, np.repeat(below, 512).reshape(32, 512))
        assert np.all(p["range"][~hit] == 0) and np.all(p["intensity"][~hit] == 0)

        # each row at its beam's elevation, on the ground, at 1 / sin(-elevation)
        el = np.radians(_elevation(p))
        for u in np.flatnonzero(below):
            np.testing.assert_allclose(el[u], beam[u], atol=2e-5)
            np.testing.assert_allclose(p["z"][u], -1.0, atol=1e-4)
            np.testing.assert_allclose(p["range"][u], 1e3 / np.sin(-beam[u]), atol=1.0)

        # columns in measurement order: column v at azimuth pi - 2 pi v / W (column 0 at the
        # back, clockwise), fired v / (f W) after the scan's start (t, ns); every row alike
        v = np.arange(512)
        az = np.arctan2(p["y"][below], p["x"][below])
        want = np.pi - 2 * np.pi * v / 512
        np.testing.assert_allclose(np.angle(np.exp(1j * (az - want))), 0.0, atol=1e-5)
        np.testing.assert_allclose(p["t"], np.broadcast_to(v * 1e9 / 5120, (32, 512)), atol=1)

        # ROS's reader by pixel (u = column, v = row), as a range-image consumer reads it
        row, col = 20, 100
        (pixel,) = point_cloud2.read_points(_ros(cloud), field_names=["t", "ring", "range"],
                                            uvs=[(col, row)])
        assert pixel == (p["t"][row, col], row, p["range"][row, col])


def test_ouster_layout_subscriptions_keep_the_organisation(sensimd):
    with sensimd.client() as c, sensimd.client() as s, sensimd.client() as q:
        _ground(c)
        c.create_lidar(5, layout="ouster", ouster={"channels": 16, "columns": 512,
                                                   "frequency": 10.0})
        c.create_lidar(6, layout="ouster", misses="remove",
                       ouster={"channels": 16, "columns": 512, "frequency": 10.0})
        s.subscribe(5, "raw", fields=["ring", "x", "t"])
        q.subscribe(5, "quantized_zstd")
        cloud = _revolution(c, 5)
        full = point_cloud_to_numpy(cloud)

        # a subset of the fields: the same pixels, organised
        sub = s.next_sensor_data(timeout=10).point_cloud
        assert (sub.height, sub.width) == (16, 512)
        got = point_cloud_to_numpy(sub)
        assert got.dtype.names == ("ring", "x", "t")
        for name in got.dtype.names:
            assert _same(got[name], full[name])
        _read_back(sub)

        # quantized: organised, the misses at NaN where they were, positions within the bound
        qc = q.next_sensor_data(timeout=10).point_cloud
        assert (qc.height, qc.width) == (16, 512)
        dq = point_cloud_to_numpy(qc)
        assert np.array_equal(np.isnan(dq["x"]), np.isnan(full["x"]))
        hit = ~np.isnan(full["x"])
        xyz = np.stack([full[k][hit] for k in "xyz"], axis=1).astype(float)
        qxyz = np.stack([dq[k][hit] for k in "xyz"], axis=1).astype(float)
        assert np.linalg.norm(qxyz - xyz, axis=1).max() <= qc.max_error <= 0.001

        # misses removed: one row of the points (ouster_ros's organized:=false drops them too)
        c.update_state(0.25)
        (removed,) = [d.point_cloud for d in c.step(0.25).outputs if d.sensor_id == 6]
        assert removed.count == 8 * 512
        assert (removed.height, removed.width) == (1, removed.count)


def test_point_cloud_to_numpy_refuses_a_grid_of_other_points():
    cloud = pb.PointCloud(point_step=4, count=6, height=4, width=2, data=bytes(24),
                          fields=[pb.PointField(name="x", offset=0, datatype=F32, count=1)])
    with pytest.raises(errors.ProtocolError) as exc:
        point_cloud_to_numpy(cloud)
    assert "point_cloud.height" in str(exc.value)
    cloud.height, cloud.width = 2, 3
    assert point_cloud_to_numpy(cloud).shape == (6,)
    assert math.isclose(point_cloud_to_numpy(cloud)["x"].sum(), 0.0)
