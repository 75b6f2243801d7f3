# SPDX-License-Identifier: MIT
"""Describe over TCP: any client (an observer too) lists an environment's sensors (id, kind,
name, body, mount, a lidar's point layout and frame) and its bodies (id, name, pose at the last
state), in id order and in bounded pages. Truth: what the controller created and sent, and the
layout of the clouds the lidar actually produces."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sensim import errors
from sensim.client import pb


def _pose7(p):
    return [p.position.x, p.position.y, p.position.z,
            p.orientation.x, p.orientation.y, p.orientation.z, p.orientation.w]


def _scene(c):
    c.create_primitive(1, "box", half_extents=(0.5, 5, 5))
    c.create_object(1, 1, local_pose=(6, 0, 0))
    c.create_body(2, (1, 2, 3, 0, 0, 0, 1), name="cart")
    c.create_body(7, (0, 0, 0, 0, 0, 0, 1))
    c.create_joint(3, "revolute")
    # a quaternion that is not unit: the description carries the normalised mount
    c.create_lidar(5, body_id=2, mount=(0.1, 0, 1.5, 0, 0, 2, 2), name="roof",
                   vlp16={"frequency": 10.0}, layout="velodyne", publish="per_step")
    c.create_lidar(9, mount=(0, 0, 1, 0, 0, 0, 1), vlp16={"frequency": 10.0},
                   fields=["x", "y", "z", "distance", "ring"], frame="world",
                   publish="per_step")
    c.create_imu(6, body_id=7, accelerometer=True, name="imu")
    c.create_encoder(4, 3)


def test_observer_lists_sensors_and_bodies(sensimd):
    with sensimd.client(environment="d") as c, \
            sensimd.client(environment="d", role="observer") as obs:
        _scene(c)
        before = obs.describe()
        assert not before.HasField("time") and before.steps == 0
        # body poses before any state: as created
        assert [b.id for b in before.bodies] == [2, 7]
        assert np.allclose(_pose7(before.bodies[0].pose), [1, 2, 3, 0, 0, 0, 1])

        pose2 = [4.0, -1.0, 0.5, 0.0, 0.0, math.sin(0.3), math.cos(0.3)]
        c.update_state(0.0, [2, 7], [pose2, [0, 0, 0, 0, 0, 0, 1]])
        c.update_state(0.1, [2, 7], [pose2, [1, 1, 0, 0, 0, 0, 1]])
        done = c.step(0.1)

        d = obs.describe()
        assert d.environment == "d"
        assert d.time == 0.1 and d.steps == 1
        assert d.sensor_count == 4 and d.body_count == 2
        assert [s.id for s in d.sensors] == [4, 5, 6, 9]
        kinds = {s.id: s.kind for s in d.sensors}
        assert kinds == {4: pb.SENSOR_KIND_ENCODER, 5: pb.SENSOR_KIND_LIDAR,
                         6: pb.SENSOR_KIND_IMU, 9: pb.SENSOR_KIND_LIDAR}
        by_id = {s.id: s for s in d.sensors}
        roof = by_id[5]
        assert roof.name == "roof" and roof.body_id == 2
        h = math.sqrt(0.5)
        assert np.allclose(_pose7(roof.mount), [0.1, 0, 1.5, 0, 0, h, h])
        assert by_id[4].joint_id == 3 and not by_id[4].HasField("lidar")
        assert by_id[6].body_id == 7 and by_id[6].name == "imu"
        assert not by_id[9].HasField("name") and by_id[9].body_id == 0
        assert roof.lidar.pattern == "vlp16" and roof.lidar.layout == pb.LAYOUT_VELODYNE
        assert roof.lidar.frame == pb.FRAME_SENSOR and by_id[9].lidar.frame == pb.FRAME_WORLD

        # the layout is the one the clouds carry (the lidar's own description of its points)
        clouds = {o.sensor_id: o.point_cloud for o in done.outputs if o.HasField("point_cloud")}
        assert set(clouds) == {5, 9}
        for sid, cloud in clouds.items():
            lid = by_id[sid].lidar
            assert lid.point_step == cloud.point_step
            assert [(f.name, f.offset, f.datatype, f.count) for f in lid.fields] == \
                [(f.name, f.offset, f.datatype, f.count) for f in cloud.fields]
        assert [f.name for f in by_id[9].lidar.fields] == ["x", "y", "z", "distance", "ring"]

        # bodies at the last state
        assert [b.id for b in d.bodies] == [2, 7]
        assert d.bodies[0].name == "cart" and not d.bodies[1].HasField("name")
        assert np.allclose(_pose7(d.bodies[0].pose), pose2)
        assert np.allclose(_pose7(d.bodies[1].pose), [1, 1, 0, 0, 0, 0, 1])
        # a state not stepped yet is the last state
        pose3 = [5.0, -1.0, 0.5, 0.0, 0.0, 0.0, 1.0]
        c.update_state(0.2, [2], [pose3])
        d = obs.describe()
        assert d.time == pytest.approx(0.2) and d.steps == 1
        assert np.allclose(_pose7(d.bodies[0].pose), pose3)

        # a removed sensor is gone from the list; the same answer for the controller
        c.remove("sensor", 6)
        d2 = c.describe()
        assert [s.id for s in d2.sensors] == [4, 5, 9] and d2.sensor_count == 3
        # partial lists
        only_bodies = obs.describe(sensors=False)
        assert len(only_bodies.sensors) == 0 and len(only_bodies.bodies) == 2


def test_describe_pages_are_bounded_and_joined(sensimd):
    with sensimd.client(environment="p") as c:
        nb = 1500
        for i in range(1, nb + 1):
            c.create_body(i * 3, (i, 0, 0, 0, 0, 0, 1))
        for i in range(1, 301):
            c.create_imu(1000 - i, accelerometer=True)   # created in decreasing id order
        # one raw page: at most 256 sensors and 1024 bodies, the smallest ids, with `more`
        page = c._call("describe", pb.Describe(), "description")
        assert len(page.sensors) == 256 and page.more_sensors
        assert len(page.bodies) == 1024 and page.more_bodies
        assert [s.id for s in page.sensors] == list(range(700, 956))
        nxt = c._call("describe", pb.Describe(sensors_after=955, bodies_after=3 * 1024,
                                              no_bodies=True), "description")
        assert [s.id for s in nxt.sensors] == list(range(956, 1000))
        assert not nxt.more_sensors and len(nxt.bodies) == 0
        # the client joins the pages into whole lists
        d = c.describe()
        assert [s.id for s in d.sensors] == list(range(700, 1000))
        assert [b.id for b in d.bodies] == [3 * i for i in range(1, nb + 1)]
        assert [b.pose.position.x for b in d.bodies] == list(range(1, nb + 1))
        assert d.body_count == nb and d.sensor_count == 300


def test_describe_changes_nothing(sensimd):
    """Describe is a read: a raycast's world_serial does not move across it."""
    with sensimd.client() as c:
        _scene(c)
        c.update_state(0.0)
        ray = pb.Raycast(origins=[0, 0, 1], directions=[1, 0, 0])
        before = c._call("raycast", ray, "raycast_result")
        c.describe()
        after = c._call("raycast", ray, "raycast_result")
        assert before.distances[0] == pytest.approx(5.5)
        assert before.world_serial == after.world_serial


def test_describe_needs_hello(sensimd):
    c = sensimd.raw()
    try:
        with pytest.raises(errors.SensimError):
            c._call("describe", pb.Describe(), "description")
    finally:
        c.close()
