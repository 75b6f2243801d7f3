# SPDX-License-Identifier: MIT
"""ROS 1 bags of the daemon's outputs, read back with ROS's own tools: rosbag (the library and
the `rosbag info` command) and sensor_msgs.point_cloud2.read_points. Clouds keep the driver
layouts byte for byte (fields, offsets, datatypes as the daemon declared them), stamps and
frame ids are the sensors'; IMU, magnetometer, encoder and cone samples become the standard
messages with their values."""

from __future__ import annotations

import dataclasses
import shutil
import subprocess

import numpy as np
import pytest

import sensim
from sensim.bag import BagWriter

rosbag = pytest.importorskip("rosbag")
pc2 = pytest.importorskip("sensor_msgs.point_cloud2")


def run(c):
    """A VLP-16 (velodyne layout), an OS1-16 (ouster layout, NaN misses), an IMU with a
    magnetometer, an encoder and a cone sensor looking at a box; the raw SensorData and their
    decoded records over 0.2 s."""
    c.set_ambient("custom", return_probability_scaling=0.0)
    c.set_environment(magnetic_field=(2e-5, 0, -4e-5))
    c.create_primitive(1, "box", half_extents=(1.0, 1.0, 1.0))
    c.create_object(1, 1, local_pose=((5.0, 0, 0), None))
    c.create_primitive(2, "plane")
    c.create_object(2, 2, local_pose=((0, 0, -1.2), None))
    c.create_lidar(5, preset="vlp16")
    c.create_lidar(6, preset="os1-16-512", misses="nan")
    c.create_imu(7, accelerometer=True, gyroscope=True, magnetometer=True)
    c.create_joint(1, "revolute")
    c.create_encoder(8, 1)
    c.create_cone(9, range=10.0)
    raw = []
    for k, t in enumerate((0.0, 0.05, 0.1001, 0.15, 0.2002)):
        c.update_state(t, joint_ids=[1], joint_positions=[0.1 * k])
        raw += list(c.step(t).outputs)
    return raw, [sensim.outputs([d])[0] for d in raw]


@pytest.fixture(scope="module")
def recorded():
    from sensim.testing import Daemon
    with Daemon() as d, d.client() as c:
        yield run(c)


def write(path, outs, **kw):
    with BagWriter(path, **kw) as bag:
        for o in outs:
            bag.write(o)
    return bag.messages


def read(path):
    with rosbag.Bag(str(path)) as bag:
        return [(topic, msg, t) for topic, msg, t in bag.read_messages()]


def test_bag_clouds_keep_the_driver_layouts_byte_for_byte(recorded, tmp_path):
    raw, outs = recorded
    path = tmp_path / "run.bag"
    write(path, outs, namespaces={5: "/velodyne"}, frame_ids={5: "velodyne", 6: "os_lidar"})
    msgs = read(path)
    clouds = [(d, o) for d, o in zip(raw, outs) if o.kind == "point_cloud"]
    assert len(clouds) == 4                      # two revolutions of each lidar
    got = [(topic, m, t) for topic, m, t in msgs if topic.endswith("/points")]
    assert [topic for topic, _, _ in got] == ["/velodyne/points" if d.sensor_id == 5
                                              else "/sensim/sensor_6/points" for d, _ in clouds]
    for (topic, m, t), (d, o) in zip(got, clouds):
        pc = d.point_cloud
        # the fields exactly as the daemon declared them
        assert [(f.name, f.offset, f.datatype, f.count) for f in m.fields] == \
            [(f.name, f.offset, f.datatype, f.count) for f in pc.fields]
        assert m.point_step == pc.point_step and m.width * m.height == pc.count
        assert bytes(m.data) == pc.data            # RAW encoding: the very bytes
        assert m.header.frame_id == ("velodyne" if d.sensor_id == 5 else "os_lidar")
        assert m.header.stamp.to_sec() == pytest.approx(pc.frame_start_time, abs=1e-9)
        assert t.to_sec() == pytest.approx(d.time, abs=1e-9)
        assert m.is_dense == (d.sensor_id == 5)    # the OS1 keeps its misses as NaN
        # read_points gives back every record
        names = [f.name for f in pc.fields]
        rows = list(pc2.read_points(m, field_names=names, skip_nans=False))
        assert len(rows) == pc.count
        want = list(zip(*(o.value[n].tolist() for n in names)))
        np.testing.assert_array_equal(np.array(rows, dtype=np.float64),
                                      np.array(want, dtype=np.float64))
    vlp = got[0][1]
    assert [f.name for f in vlp.fields] == ["x", "y", "z", "intensity", "ring", "time"]
    rings = {r[0] for r in pc2.read_points(vlp, field_names=["ring"])}
    assert rings <= set(range(16)) and len(rings) >= 12   # the highest beams see nothing


def test_bag_is_the_file_rosbag_writes_from_the_messages(recorded, tmp_path):
    """BagWriter writes clouds as raw records (to spare copies of their data); the file is
    byte for byte the one rosbag writes from the same PointCloud2 messages given as
    messages (genpy's own serialization)."""
    from sensim.bag import point_cloud2
    rospy = pytest.importorskip("rospy")
    _, outs = recorded
    clouds = [o for o in outs if o.kind == "point_cloud"]
    assert len(clouds) == 4 and any(o.meta.organised for o in clouds)
    mine = tmp_path / "mine.bag"
    assert write(mine, clouds) == 4
    ref = tmp_path / "ref.bag"
    with rosbag.Bag(str(ref), "w") as bag:
        for o in clouds:
            m = point_cloud2(o.value, stamp=rospy.Time.from_sec(o.meta.frame_start_time),
                             frame_id=f"sensor_{o.sensor_id}", shape=o.meta.shape)
            bag.write(f"/sensim/sensor_{o.sensor_id}/points", m, rospy.Time.from_sec(o.time))
    assert mine.read_bytes() == ref.read_bytes()


def test_bag_imu_magnetometer_encoder_and_cone(recorded, tmp_path):
    raw, outs = recorded
    path = tmp_path / "run.bag"
    n = write(path, outs, time_offset=1000.0)
    msgs = read(path)
    assert n == len(msgs)
    by_topic = {}
    for topic, m, t in msgs:
        by_topic.setdefault(topic, []).append((m, t))
    imus = [o for o in outs if o.kind == "imu"]
    assert len(by_topic["/sensim/sensor_7/data"]) == len(imus) == 5
    for (m, t), o in zip(by_topic["/sensim/sensor_7/data"], imus):
        assert m._type == "sensor_msgs/Imu" and m.header.frame_id == "sensor_7"
        assert m.header.stamp.to_sec() == pytest.approx(o.time + 1000.0, abs=1e-6)
        assert t == m.header.stamp
        assert m.orientation_covariance[0] == -1.0
        assert (m.linear_acceleration.x, m.linear_acceleration.y, m.linear_acceleration.z) \
            == tuple(o.value.acceleration)
        assert (m.angular_velocity.x, m.angular_velocity.y, m.angular_velocity.z) \
            == tuple(o.value.angular_velocity)
    mags = by_topic["/sensim/sensor_7/mag"]
    assert mags[0][0]._type == "sensor_msgs/MagneticField"
    b = mags[-1][0].magnetic_field
    assert (b.x, b.y, b.z) == pytest.approx((2e-5, 0.0, -4e-5), abs=1e-15)
    joints = by_topic["/sensim/sensor_8/joint_states"]
    assert [m.position[0] for m, _ in joints] == pytest.approx([0.0, 0.1, 0.2, 0.3, 0.4],
                                                               abs=1e-12)
    assert joints[0][0].name == ["sensor_8"]
    ranges = by_topic["/sensim/sensor_9/range"]
    cones = [o for o in outs if o.kind == "cone"]
    assert all(o.value.detected for o in cones)
    for (m, _), o in zip(ranges, cones):
        assert m.range == pytest.approx(o.value.range) and m.range == pytest.approx(4.0,
                                                                                    abs=1e-3)


def test_bag_read_by_the_rosbag_command(recorded, tmp_path):
    if shutil.which("rosbag") is None:
        pytest.skip("the rosbag command is not installed")
    _, outs = recorded
    path = tmp_path / "run.bag"
    write(path, outs, compression="lz4")
    info = subprocess.run(["rosbag", "info", "--yaml", str(path)], capture_output=True,
                          text=True, check=True).stdout
    import yaml
    doc = yaml.safe_load(info)
    counts = {t["topic"]: t["messages"] for t in doc["topics"]}
    assert counts == {"/sensim/sensor_5/points": 2, "/sensim/sensor_6/points": 2,
                      "/sensim/sensor_7/data": 5, "/sensim/sensor_7/mag": 5,
                      "/sensim/sensor_8/joint_states": 5, "/sensim/sensor_9/range": 5}
    types = {t["topic"]: t["type"] for t in doc["topics"]}
    assert types["/sensim/sensor_5/points"] == "sensor_msgs/PointCloud2"
    assert doc["compression"] == "lz4"


def test_bag_organised_cloud_and_world_frame(recorded, tmp_path):
    _, outs = recorded
    os1 = [o for o in outs if o.sensor_id == 6][0]
    # an organised 16 x 512 cloud (as the daemon sends it once it fills height and width)
    organised = dataclasses.replace(os1, meta=dataclasses.replace(os1.meta, height=16,
                                                                  width=512, frame="world"))
    path = tmp_path / "org.bag"
    write(path, [organised], world_frame="map")
    (_, m, _), = read(path)
    assert (m.height, m.width, m.row_step) == (16, 512, 512 * m.point_step)
    assert m.header.frame_id == "map"
    with pytest.raises(ValueError, match="not a valid ROS time"):
        write(tmp_path / "neg.bag", [os1], time_offset=-10.0)
    bad = dataclasses.replace(os1, meta=dataclasses.replace(os1.meta, height=3, width=5))
    with pytest.raises(ValueError, match="shape 3 x 5"):
        write(tmp_path / "bad.bag", [bad])


def test_bag_any_layout_of_a_cloud_gives_the_same_message(recorded):
    from sensim.bag import point_cloud2
    import rospy
    _, outs = recorded
    cloud = [o for o in outs if o.sensor_id == 6][0].value
    stamp = rospy.Time.from_sec(1.0)
    plain = point_cloud2(cloud, stamp=stamp, frame_id="f")
    for other in (cloud.astype(cloud.dtype.newbyteorder(">")),      # big-endian fields
                  np.repeat(cloud, 2)[::2],                          # every other record
                  cloud.copy()):                                     # an array of its own
        m = point_cloud2(other, stamp=stamp, frame_id="f")
        assert m.data == plain.data and m.fields == plain.fields
        assert m.point_step == plain.point_step


def test_read_bag_gives_back_the_clouds_and_imu_samples(recorded, tmp_path):
    from sensim.bag import read_bag
    _, outs = recorded
    # the OS1's whole revolutions as the organised 16 x 512 clouds the daemon sends once it
    # fills height and width
    outs = [dataclasses.replace(o, meta=dataclasses.replace(o.meta, height=16, width=512))
            if o.sensor_id == 6 and len(o.value) == 16 * 512 else o for o in outs]
    write(tmp_path / "run.bag", outs)
    with read_bag(tmp_path / "run.bag") as r:
        assert r.sensors == {"/sensim/sensor_5/points": 5, "/sensim/sensor_6/points": 6,
                             "/sensim/sensor_7/data": 7}
        # magnetometer, encoder and cone messages are not read
        assert r.skipped == sum(o.sensor_id in (8, 9) for o in outs) + \
            sum(o.sensor_id == 7 for o in outs)
        got = list(r.outputs())
        assert [o.kind for o in r.outputs({7})] == ["imu"] * sum(o.sensor_id == 7 for o in outs)
    for sid in (5, 6, 7):
        a = [o for o in got if o.sensor_id == sid]
        b = [o for o in outs if o.sensor_id == sid]
        assert len(a) == len(b) > 0
        for k, (x, y) in enumerate(zip(a, b)):
            assert x.kind == y.kind and x.frame == k
            assert x.time == pytest.approx(y.time, abs=1e-9)
            if x.kind == "point_cloud":
                assert x.value.dtype == y.value.dtype          # fields, offsets, point size
                assert x.value.tobytes() == y.value.tobytes()
                assert x.meta.shape == y.meta.shape
                assert x.meta.frame_start_time == pytest.approx(y.meta.frame_start_time,
                                                                abs=1e-9)
            else:
                np.testing.assert_array_equal(x.value.acceleration, y.value.acceleration)
                np.testing.assert_array_equal(x.value.angular_velocity,
                                              y.value.angular_velocity)
    assert any(o.meta.organised for o in got if o.sensor_id == 6)


def test_read_bag_of_another_writer(tmp_path):
    """Clouds written by ROS's own point_cloud2.create_cloud and by hand (big-endian, rows
    padded), topics that name no sensor, a message shorter than its header says."""
    from rospy import Time
    from sensor_msgs.msg import Imu, PointCloud2, PointField
    from std_msgs.msg import Header
    from sensim.bag import cloud_from_message, read_bag
    pts = [(1.0, 2.0, 3.0, 7), (-4.5, 0.25, 9.0, 65535)]
    fields = [PointField("x", 0, PointField.FLOAT32, 1), PointField("y", 4, PointField.FLOAT32, 1),
              PointField("z", 8, PointField.FLOAT32, 1),
              PointField("intensity", 12, PointField.UINT16, 1)]
    a = pc2.create_cloud(Header(frame_id="velodyne", stamp=Time(3, 500)), fields, pts)
    # 2 rows of 3 points of 16 bytes (x y z big-endian, 4 unused), each row padded to 52 bytes
    xyz = np.arange(18, dtype=">f4").reshape(2, 3, 3)
    data = b"".join(b"".join(p.tobytes() + b"\xee" * 4 for p in row) + b"\xff" * 4
                    for row in xyz)
    b = PointCloud2(header=Header(frame_id="front"), height=2, width=3, fields=fields[:3],
                    is_bigendian=True, point_step=16, row_step=52, data=data)
    imu = Imu(header=Header(frame_id="imu_link"))
    imu.linear_acceleration.z = 9.81
    imu.angular_velocity_covariance[0] = -1.0          # no gyroscope
    with rosbag.Bag(str(tmp_path / "other.bag"), "w") as bag:
        bag.write("/velodyne_points", a, Time(4))
        bag.write("/front/points", b, Time(5))
        bag.write("/sensor_3/imu", imu, Time(6))
    with read_bag(tmp_path / "other.bag") as r:
        assert r.sensors == {"/sensor_3/imu": 3, "/front/points": 1, "/velodyne_points": 2}
        got = {o.sensor_id: o for o in r.outputs()}
    cloud = got[2].value
    assert [tuple(p) for p in cloud.tolist()] == pts and got[2].time == 4.0
    assert got[2].start_time == pytest.approx(3.0000005)
    front = got[1].value
    assert got[1].meta.shape == (2, 3)
    np.testing.assert_array_equal(np.stack([front[n] for n in "xyz"], -1),
                                  xyz.reshape(6, 3))
    assert got[3].value.angular_velocity is None
    np.testing.assert_array_equal(got[3].value.acceleration, [0, 0, 9.81])
    b.data = data[:-5]
    with pytest.raises(ValueError, match="row_step 52"):
        cloud_from_message(b)
    (tmp_path / "junk.bag").write_bytes(b"#ROSBAG V2.0\nnot really")
    with pytest.raises(ValueError, match="not a readable ROS 1 bag"):
        read_bag(tmp_path / "junk.bag")
