# SPDX-License-Identifier: MIT
"""The Sensor Environment through the real daemon and the Python client: geometry, objects on
moving bodies, the time line, raycasts against analytic answers, validation that changes
nothing, named environments and retention (docs/time.md, proto/README.md)."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

import sensim
from sensim import errors, pb

# Embree traces in float32: distances are good to ~1e-5 relative at these scales.
TOL = 2e-5


def quat_z(angle: float) -> tuple[float, float, float, float]:
    """(x, y, z, w) of a rotation by `angle` about +z."""
    return (0.0, 0.0, math.sin(angle / 2), math.cos(angle / 2))


def quat_x(angle: float) -> tuple[float, float, float, float]:
    return (math.sin(angle / 2), 0.0, 0.0, math.cos(angle / 2))


def cube_mesh(half: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """A closed cube of half side `half` centred on the origin (8 vertices, 12 triangles)."""
    v = np.array([[x, y, z] for x in (-half, half) for y in (-half, half) for z in (-half, half)],
                 dtype=np.float32)
    faces = [(0, 1, 3, 2), (4, 6, 7, 5), (0, 4, 5, 1), (2, 3, 7, 6), (0, 2, 6, 4), (1, 5, 7, 3)]
    tris = []
    for a, b, c, d in faces:
        tris += [(a, b, c), (a, c, d)]
    return v, np.array(tris, dtype=np.uint32)


def ray(c: sensim.Client, origin, direction, **kw) -> np.record:
    return c.raycast([origin], [direction], **kw)[0]


def scene_counts(c: sensim.Client, name: str = "default") -> dict:
    info = c.get_info()
    for env in info.environments:
        if env.name == name:
            return {k: getattr(env, k) for k in
                    ("geometries", "materials", "bodies", "objects", "joints", "time", "steps")}
    raise AssertionError(f"environment {name!r} not in {[e.name for e in info.environments]}")


# ---------------------------------------------------------------- analytic raycasts

def test_sphere_seen_from_inside_and_outside(sensimd):
    with sensimd.client() as c:
        c.create_primitive(1, "sphere", radius=2.0)
        c.create_object(10, 1, label=7)
        hits = c.raycast([[0, 0, 0], [-5, 0, 0], [-5, 0, 1]], [[1, 0, 0], [1, 0, 0], [1, 0, 0]])
        # from the centre every direction leaves at the radius
        assert hits.distances[0] == pytest.approx(2.0, rel=TOL)
        np.testing.assert_allclose(hits.normals[0], [-1, 0, 0], atol=TOL)
        # from outside the front surface is at 5 - 2
        assert hits.distances[1] == pytest.approx(3.0, rel=TOL)
        np.testing.assert_allclose(hits.normals[1], [-1, 0, 0], atol=TOL)
        # a chord at height 1: x = -sqrt(3), so the distance is 5 - sqrt(3)
        assert hits.distances[2] == pytest.approx(5 - math.sqrt(3), rel=TOL)
        np.testing.assert_allclose(hits.normals[2], [-math.sqrt(3) / 2, 0, 0.5], atol=1e-5)
        assert list(hits.object_ids) == [10, 10, 10]
        assert list(hits.labels) == [7, 7, 7]
        # random directions from the centre all see the radius
        rng = np.random.default_rng(1)
        d = rng.normal(size=(500, 3))
        hits = c.raycast(np.zeros((500, 3)), d)
        np.testing.assert_allclose(hits.distances, 2.0, rtol=TOL)


def test_tilted_plane(sensimd):
    with sensimd.client() as c:
        c.create_primitive(1, "plane", half_size=50.0)
        # the plane z = 0 rotated 30 degrees about x, then lifted to z = -3
        tilt = math.radians(30)
        c.create_object(1, 1, local_pose=((0, 0, -3), quat_x(tilt)))
        h = ray(c, (0, 0, 0), (0, 0, -1))
        # vertical distance to a plane through (0,0,-3): 3 (the plane contains the x axis line
        # through that point, and the ray meets it there)
        assert h.distances == pytest.approx(3.0, rel=TOL)
        # its normal is R_x(30 deg) * z, facing the ray (upwards)
        np.testing.assert_allclose(h.normals, [0, -math.sin(tilt), math.cos(tilt)], atol=1e-5)
        # a ray offset by y = 1: the plane height there is -3 + tan(30 deg)
        h = ray(c, (0, 1, 0), (0, 0, -1))
        assert h.distances == pytest.approx(3 - math.tan(tilt), rel=TOL)


def test_box_faces_edges_and_corners(sensimd):
    with sensimd.client() as c:
        c.create_primitive(1, "box", half_extents=(1, 2, 3))
        c.create_object(1, 1)
        face = ray(c, (-10, 0, 0), (1, 0, 0))
        assert face.distances == pytest.approx(9.0, rel=TOL)
        np.testing.assert_allclose(face.normals, [-1, 0, 0], atol=TOL)
        # aimed exactly at the edge x = -1, y = -2 along the diagonal of the xy plane
        d = np.array([1, 1, 0]) / math.sqrt(2)
        edge = ray(c, (-1 - 5, -2 - 5, 0), d)
        assert edge.distances == pytest.approx(5 * math.sqrt(2), rel=TOL)
        assert edge.object_ids == 1
        # and at the corner (1, 2, 3) from outside along (-1, -1, -1)
        d = -np.ones(3) / math.sqrt(3)
        corner = ray(c, (1 + 4, 2 + 4, 3 + 4), d)
        assert corner.distances == pytest.approx(4 * math.sqrt(3), rel=TOL)
        # rays along x just inside and just outside the face y = 2 hit and miss
        inside = ray(c, (-10, 2 - 1e-3, 0), (1, 0, 0))
        assert inside.distances == pytest.approx(9.0, rel=TOL)
        miss = ray(c, (-10, 2 + 1e-3, 0), (1, 0, 0))
        assert math.isinf(miss.distances) and miss.object_ids == 0


def test_scaled_and_rotated_mesh_instance(sensimd):
    with sensimd.client() as c:
        v, f = cube_mesh(1.0)
        c.create_mesh(5, v, f)
        # scale (2, 1, 0.5), then rotate 90 degrees about z, then move to (10, 0, 0)
        c.create_object(3, 5, local_pose=((10, 0, 0), quat_z(math.pi / 2)), scale=(2, 1, 0.5),
                        label=4)
        # after the rotation the long (2) axis lies along y: seen from -x the face is at 10 - 1
        h = ray(c, (0, 0, 0), (1, 0, 0))
        assert h.distances == pytest.approx(9.0, rel=TOL)
        np.testing.assert_allclose(h.normals, [-1, 0, 0], atol=1e-5)
        # from -y along +y the face is at y = -2
        h = ray(c, (10, -10, 0), (0, 1, 0))
        assert h.distances == pytest.approx(8.0, rel=TOL)
        np.testing.assert_allclose(h.normals, [0, -1, 0], atol=1e-5)
        # from above, z half extent 0.5
        h = ray(c, (10, 0, 10), (0, 0, -1))
        assert h.distances == pytest.approx(9.5, rel=TOL)
        assert (h.object_ids, h.labels) == (3, 4)


# ---------------------------------------------------------------- moving bodies and time

def moving_wall(c: sensim.Client, freeze: bool | None = None) -> None:
    """Body 1 carries a wall 0.2 m thick whose face is at x - 0.1; it moves from x = 10 at t = 0
    to x = 8 at t = 0.1 (constant velocity -20 m/s)."""
    c.create_primitive(1, "box", half_extents=(0.1, 5, 5))
    c.create_body(1, (10, 0, 0))
    c.create_object(1, 1, body_id=1)
    if freeze is not None:
        c.set_environment(freeze_objects=freeze)
    c.update_state(0.0, [1], [[10, 0, 0, 0, 0, 0, 1]], [[-20, 0, 0, 0, 0, 0]])
    c.step(0.0)
    c.update_state(0.1, [1], [[8, 0, 0, 0, 0, 0, 1]], [[-20, 0, 0, 0, 0, 0]])


def test_body_at_constant_velocity_is_seen_at_each_ray_time(sensimd):
    with sensimd.client() as c:
        moving_wall(c)
        times = np.array([0.0, 0.025, 0.05, 0.075, 0.1])
        hits = c.raycast(np.zeros((5, 3)), np.tile([1.0, 0, 0], (5, 1)), times=times)
        # docs/time.md, "Interpolation inside a step": the range of a ray fired at t is d0 - v t
        np.testing.assert_allclose(hits.distances, 10 - 20 * times - 0.1, rtol=TOL)
        # without times the rays see the end of the interval
        assert ray(c, (0, 0, 0), (1, 0, 0)).distances == pytest.approx(7.9, rel=TOL)
        done = c.step(0.1)
        assert done.time == pytest.approx(0.1) and done.step == 2


def test_freeze_objects_sees_the_end_of_step_pose(sensimd):
    with sensimd.client() as c:
        moving_wall(c, freeze=True)
        times = np.array([0.0, 0.05, 0.1])
        hits = c.raycast(np.zeros((3, 3)), np.tile([1.0, 0, 0], (3, 1)), times=times)
        np.testing.assert_allclose(hits.distances, 7.9, rtol=TOL)


def test_rotating_body_carries_its_objects_on_the_arc(sensimd):
    with sensimd.client() as c:
        # a thin plate along the body's x axis, 1..3 m from the body origin
        c.create_primitive(1, "box", half_extents=(1, 0.01, 1))
        c.create_body(1)
        c.create_object(1, 1, body_id=1, local_pose=(2, 0, 0))
        c.update_state(0.0, [1], [[0, 0, 0, 0, 0, 0, 1]])
        c.step(0.0)
        c.update_state(1.0, [1], [[0, 0, 0, *quat_z(math.pi / 2)]])
        # docs/time.md: the body is interpolated (its origin lerped, its orientation slerped)
        # and the object carried rigidly, so at mid-step the body is turned 45 degrees and the
        # plate lies on the bisector from 1 to 3 m. (Interpolating the object's own world pose
        # would put its centre on the chord, at (1, 1, 0), and the plate from sqrt(2) - 1.)
        d45 = [math.cos(math.pi / 4), math.sin(math.pi / 4), 0]
        h = ray(c, (0, 0, 0), d45, times=[0.5])
        assert h.distances == pytest.approx(1.0, abs=1e-4)
        assert math.isinf(ray(c, (0, 0, 0), (1, 0, 0), times=[0.5]).distances)
        # at the interval's ends it lies along +x and along +y
        assert ray(c, (0, 0, 0), (1, 0, 0), times=[0.0]).distances == pytest.approx(1.0, abs=1e-4)
        assert ray(c, (0, 0, 0), (0, 1, 0), times=[1.0]).distances == pytest.approx(1.0, abs=1e-4)
        # slerp, not a linear blend of matrices: at s = 0.25 the plate is turned 22.5 degrees
        # with its centre on the arc at 2 (cos 22.5, sin 22.5, 0); a ray from that centre along
        # the plate's normal (rotated +y) reaches the face at its half thickness
        a = math.radians(22.5)
        n = [-math.sin(a), math.cos(a), 0]
        h = ray(c, (2 * math.cos(a), 2 * math.sin(a), 0), n, times=[0.25])
        assert h.distances == pytest.approx(0.01, abs=1e-4)
        np.testing.assert_allclose(h.normals, [-x for x in n], atol=1e-4)


def test_time_must_increase_and_step_matches_the_state(sensimd):
    with sensimd.client() as c:
        c.create_body(1)
        with pytest.raises(errors.FailedPrecondition):
            c.step(0.0)  # no state yet
        c.update_state(1.0, [1], [[0, 0, 0, 0, 0, 0, 1]])
        with pytest.raises(errors.FailedPrecondition):
            c.step(2.0)  # not the time of the last state
        c.step(1.0)
        for t in (1.0, 0.5):
            with pytest.raises(errors.FailedPrecondition, match="time"):
                c.update_state(t, [1], [[0, 0, 0, 0, 0, 0, 1]])
        with pytest.raises(errors.InvalidArgument, match="time"):
            c.update_state(float("nan"), [1], [[0, 0, 0, 0, 0, 0, 1]])
        assert scene_counts(c)["time"] == 1.0


def test_pipelined_steps_are_answered_in_order(sensimd):
    with sensimd.client() as c:
        c.create_primitive(1, "sphere", radius=0.5)
        c.create_body(1)
        c.create_object(1, 1, body_id=1)
        ids = []
        for k in range(50):
            t = 0.01 * k
            msg = pb.UpdateState(time=t, body_ids=[1], body_poses=[t, 0, 0, 0, 0, 0, 1])
            ids.append(("update", c.send_request("update_state", msg)))
            ids.append(("step", c.send_request("step", pb.Step(time=t))))
        for kind, rid in ids:
            env = c.wait_reply(rid)
            assert env.status.code == pb.OK, env.status.message
            if kind == "step":
                assert env.HasField("step_done")
        assert scene_counts(c)["steps"] == 50


# ---------------------------------------------------------------- validation changes nothing

def snapshot(c: sensim.Client) -> tuple:
    hits = c.raycast([[0, 0, 0], [0, 0, 0]], [[1, 0, 0], [0, 1, 0]])
    return scene_counts(c), hits.distances.tolist(), hits.object_ids.tolist()


def validation_scene(c: sensim.Client) -> tuple:
    """A cube mesh (geometry 1) as object 1 on body 1 at x = 5, joint 1, a first state; the
    cube's vertices and faces."""
    v, f = cube_mesh(1.0)
    c.create_mesh(1, v, f)
    c.create_body(1, (5, 0, 0))
    c.create_object(1, 1, body_id=1)
    c.create_joint(1, "revolute", 0.0)
    c.update_state(0.0, [1], [[5, 0, 0, 0, 0, 0, 1]], joint_ids=[1], joint_positions=[0.0])
    return v, f


def test_bad_input_is_rejected_naming_the_field_and_changes_nothing(sensimd):
    with sensimd.client() as c:
        v, f = validation_scene(c)
        before = snapshot(c)

        bad_v = v.copy()
        bad_v[1, 1] = np.nan
        cases = [
            (errors.InvalidArgument, r"vertices\[1\]\.y", lambda: c.create_mesh(2, bad_v, f)),
            (errors.InvalidArgument, r"indices\[", lambda: c.create_mesh(2, v, f + 8)),
            (errors.InvalidArgument, "multiple of 12", lambda: c.wait_reply(c.send_request(
                "create_mesh", pb.CreateMesh(id=2, vertices=v.tobytes() + b"\0",
                                             indices=f.tobytes())))),
            (errors.AlreadyExists, "1", lambda: c.create_mesh(1, v, f)),
            (errors.InvalidArgument, "id", lambda: c.create_mesh(0, v, f)),
            (errors.NotFound, "geometry", lambda: c.create_object(2, 99)),
            (errors.NotFound, "body", lambda: c.create_object(2, 1, body_id=42)),
            (errors.InvalidArgument, "scale", lambda: c.create_object(2, 1, scale=(1, 0, 1))),
            (errors.InvalidArgument, "radius", lambda: c.create_primitive(3, "sphere",
                                                                          radius=-1.0)),
            (errors.InvalidArgument, "diffuse_reflectance",
             lambda: c.set_material(1, "two_layer", diffuse_reflectance=1.2)),
            (errors.InvalidArgument, "visibility", lambda: c.set_ambient("fog", visibility=0.0)),
            (errors.InvalidArgument, "gravity",
             lambda: c.set_environment(gravity=(0, 0, float("inf")))),
            # one unknown body among good ones: nothing of the update is applied
            (errors.NotFound, "7", lambda: c.update_state(
                1.0, [1, 7], [[0, 0, 0, 0, 0, 0, 1], [0, 0, 0, 0, 0, 0, 1]])),
            (errors.InvalidArgument, "quaternion|orientation",
             lambda: c.update_state(1.0, [1], [[0, 0, 0, 0, 0, 0, 0]])),
            (errors.InvalidArgument, "finite",
             lambda: c.update_state(1.0, [1], [[float("nan"), 0, 0, 0, 0, 0, 1]])),
            (errors.NotFound, "joint", lambda: c.update_state(1.0, joint_ids=[9],
                                                              joint_positions=[1.0])),
            (errors.FailedPrecondition, "object", lambda: c.remove("geometry", 1)),
            (errors.FailedPrecondition, "object", lambda: c.remove("body", 1)),
            (errors.NotFound, "5", lambda: c.remove("object", 5)),
            (errors.InvalidArgument, "direction",
             lambda: c.raycast([[0, 0, 0]], [[0, 0, 0]])),
            # denormal: non-zero for validation, zero under the tracer's flush-to-zero mode
            (errors.InvalidArgument, "direction",
             lambda: c.raycast([[0, 0, 0]], [[1e-310, 0, 0]])),
            (errors.InvalidArgument, "scale",
             lambda: c.create_object(2, 1, scale=(1e12, 1, 1))),
            (errors.InvalidArgument, "radius", lambda: c.create_primitive(3, "sphere",
                                                                          radius=1e30)),
            # one lower bound for every size (1e-6 m): 1e-320 used to be accepted
            (errors.InvalidArgument, r"cylinder\.radius = \S+ is below the smallest size 1e-06 m",
             lambda: c.create_primitive(3, "cylinder", radius=1e-320, half_length=1.0)),
            (errors.InvalidArgument, r"capsule\.half_length",
             lambda: c.create_primitive(3, "capsule", radius=1.0, half_length=5e-7)),
        ]
        for exc, pattern, call in cases:
            with pytest.raises(exc, match=pattern):
                call()
            assert snapshot(c) == before, f"state changed after a rejected call ({pattern})"
        # the body did not move: the cube face is still at 5 - 1
        assert ray(c, (0, 0, 0), (1, 0, 0)).distances == pytest.approx(4.0, rel=TOL)


def test_id_0_is_invalid_argument_for_every_request_that_names_an_entity(sensimd):
    """Id 0 names no geometry, object, joint or sensor, and body 0 is the world frame: creating,
    moving, removing, referring to (an object's geometry) or subscribing to any of them by id 0
    is INVALID_ARGUMENT saying so (never NOT_FOUND), and changes nothing; material 0 and
    medium 0 are the defaults and are not removed either."""
    with sensimd.client() as c:
        validation_scene(c)
        before = snapshot(c)
        pose = [[0, 0, 0, 0, 0, 0, 1]]
        cases = [
            ("body 0 is the world frame and cannot be removed", lambda: c.remove("body", 0)),
            (r"id = 0 is reserved \(geometry ids are > 0\)", lambda: c.remove("geometry", 0)),
            (r"id = 0 is reserved \(object ids are > 0\)", lambda: c.remove("object", 0)),
            (r"id = 0 is reserved \(joint ids are > 0\)", lambda: c.remove("joint", 0)),
            (r"id = 0 is reserved \(sensor ids are > 0\)", lambda: c.remove("sensor", 0)),
            ("material 0 is the default material", lambda: c.remove("material", 0)),
            ("medium 0 is the environment's ambient", lambda: c.remove("medium", 0)),
            (r"id = 0 is reserved \(body ids are > 0\)", lambda: c.create_body(0)),
            (r"id = 0 is reserved \(object ids are > 0\)", lambda: c.create_object(0, 1)),
            (r"id = 0 is reserved \(joint ids are > 0\)", lambda: c.create_joint(0)),
            (r"id = 0 is reserved \(sensor ids are > 0\)",
             lambda: c.create_imu(0, accelerometer=True)),
            # a reference that must name an entity
            (r"create_object: geometry_id = 0 must name a geometry \(> 0\)",
             lambda: c.create_object(2, 0)),
            (r"subscribe.sensor_id = 0 must name a sensor \(> 0\)", lambda: c.subscribe(0)),
            (r"unsubscribe.sensor_id = 0 must name a sensor \(> 0\)", lambda: c.unsubscribe(0)),
            # (the client sends the bytes forms of the arrays)
            (r"body_ids_bytes\[1\] = 0 is the world frame, which does not move",
             lambda: c.update_state(1.0, [1, 0], pose * 2)),
            (r"joint_ids_bytes\[0\] = 0 is reserved \(joint ids are > 0\)",
             lambda: c.update_state(1.0, joint_ids=[0], joint_positions=[1.0])),
        ]
        wrong = []      # every case is tried: the answers that were not as expected
        for pattern, call in cases:
            try:
                call()
                wrong.append((pattern, "accepted"))
            except errors.SensimError as exc:
                if not (isinstance(exc, errors.InvalidArgument) and re.search(pattern, str(exc))):
                    wrong.append((pattern, str(exc)))
            assert snapshot(c) == before, f"state changed after a rejected call ({pattern})"
        assert not wrong


def test_malformed_packed_arrays_are_rejected(sensimd):
    with sensimd.client() as c:
        c.create_body(1)
        rid = c.send_request("update_state", pb.UpdateState(time=0.0, body_ids=[1],
                                                            body_poses=[0, 0, 0, 0, 0, 0]))
        with pytest.raises(errors.InvalidArgument, match="body_poses has 6 values.*7 per body"):
            c.wait_reply(rid)
        rid = c.send_request("raycast", pb.Raycast(origins=[0, 0, 0, 1], directions=[1, 0, 0]))
        with pytest.raises(errors.InvalidArgument, match="origins"):
            c.wait_reply(rid)
        rid = c.send_request("raycast", pb.Raycast(origins=[0, 0, 0], directions=[1, 0, 0],
                                                   times=[0.0, 1.0]))
        with pytest.raises(errors.InvalidArgument, match="times"):
            c.wait_reply(rid)


# ---------------------------------------------------------------- counters

def test_hundred_moving_objects_never_rebuild_geometry(sensimd):
    with sensimd.client() as c:
        v, f = cube_mesh(0.2)
        c.create_mesh(1, v, f)
        n = 100
        for i in range(1, n + 1):
            c.create_body(i, (i, 0, 0))
            c.create_object(i, 1, body_id=i)
        ids = np.arange(1, n + 1)
        before = c.get_info().environments[0].counters
        for k in range(5):
            poses = np.zeros((n, 7))
            poses[:, 0] = ids
            poses[:, 1] = 0.1 * k
            poses[:, 6] = 1
            c.update_state(0.01 * k, ids, poses)
            c.step(0.01 * k)
        after = c.get_info().environments[0].counters
        assert after.mesh_builds == before.mesh_builds == 1
        assert after.instance_updates - before.instance_updates >= 5 * n
        assert after.scene_commits > before.scene_commits
        # and the last poses are the ones traced: object 50 sits at (50, 0.4, 0)
        h = ray(c, (50, 0.4, 5), (0, 0, -1))
        assert h.object_ids == 50 and h.distances == pytest.approx(4.8, rel=TOL)


# ---------------------------------------------------------------- environments

def test_two_environments_never_see_each_other(sensimd):
    with sensimd.client(environment="a") as a, sensimd.client(environment="b") as b:
        a.create_primitive(1, "sphere", radius=1.0)
        a.create_object(1, 1)
        b.create_primitive(1, "box", half_extents=(1, 1, 1))  # same ids, other environment
        b.create_object(1, 1, local_pose=(0, 0, 10))
        assert ray(a, (-5, 0, 0), (1, 0, 0)).distances == pytest.approx(4.0, rel=TOL)
        assert math.isinf(ray(b, (-5, 0, 0), (1, 0, 0)).distances)
        assert ray(b, (0, 0, 0), (0, 0, 1)).distances == pytest.approx(9.0, rel=TOL)
        assert math.isinf(ray(a, (0, 0, 5), (0, 0, 1)).distances)
        names = sorted(e.name for e in a.get_info().environments)
        assert names == ["a", "b"]


def test_retention_destroy_and_keep(sensimd):
    # default (destroy): the environment goes with its last client
    with sensimd.client(environment="temp") as c:
        c.create_primitive(1, "sphere", radius=1.0)
        c.create_object(1, 1)
    with sensimd.client(environment="temp") as c:
        assert math.isinf(ray(c, (-5, 0, 0), (1, 0, 0)).distances)
    # keep: a controller can reconnect and find its scene
    with sensimd.client(environment="kept", retention="keep") as c:
        c.create_primitive(1, "sphere", radius=1.0)
        c.create_object(1, 1)
    with sensimd.client(environment="kept") as c:
        assert ray(c, (-5, 0, 0), (1, 0, 0)).distances == pytest.approx(4.0, rel=TOL)
        envs = {e.name: e for e in c.get_info().environments}
        assert envs["kept"].retention == pb.RETENTION_KEEP
        assert "temp" not in envs


def test_daemon_wide_retention_keep(sensimd_factory):
    d = sensimd_factory("--retention", "keep")
    with d.client(environment="w") as c:
        c.create_primitive(1, "sphere", radius=1.0)
    with d.client(environment="w") as c:
        with pytest.raises(errors.AlreadyExists):
            c.create_primitive(1, "sphere", radius=1.0)


def test_observer_reads_but_cannot_change(sensimd):
    with sensimd.client(environment="shared") as ctl, \
            sensimd.client(environment="shared", role="observer") as obs:
        ctl.create_primitive(1, "sphere", radius=1.0)
        ctl.create_object(1, 1)
        assert ray(obs, (-5, 0, 0), (1, 0, 0)).distances == pytest.approx(4.0, rel=TOL)
        with pytest.raises(errors.FailedPrecondition, match="observer"):
            obs.create_object(2, 1)
        assert scene_counts(obs, "shared")["objects"] == 1


def test_raycasts_are_bit_identical_at_any_thread_count(sensimd_factory):
    """Same scene, same rays: the reply does not depend on --threads."""
    results = []
    for threads in ("1", "2", "4"):
        rng = np.random.default_rng(7)
        origins = rng.uniform(-3, 3, size=(20000, 3))
        directions = rng.normal(size=(20000, 3))
        d = sensimd_factory("--threads", threads)
        with d.client() as c:
            v, f = cube_mesh(0.5)
            c.create_mesh(1, v, f)
            c.create_primitive(2, "capsule", radius=0.4, half_length=0.8)
            for i in range(20):
                c.create_object(i + 1, 1 + i % 2, local_pose=rng.uniform(-4, 4, 3).tolist())
            results.append(c.raycast(origins, directions))
    for other in results[1:]:
        assert results[0].tobytes() == other.tobytes()
    assert np.isfinite(results[0].distances).sum() > 1000


def test_degenerate_but_valid_primitives(sensimd):
    with sensimd.client() as c:
        # a capsule of half length 0 is a sphere
        c.create_primitive(1, "capsule", radius=1.5, half_length=0.0)
        c.create_object(1, 1)
        assert ray(c, (-5, 0, 0), (1, 0, 0)).distances == pytest.approx(3.5, rel=TOL)
        assert ray(c, (0, 0, 5), (0, 0, -1)).distances == pytest.approx(3.5, rel=TOL)
        # a plane without half_size is unbounded: hit far from its origin
        c.create_primitive(2, "plane")
        c.create_object(2, 2, local_pose=(0, 0, -10))
        h = ray(c, (5000, -7000, 0), (0, 0, -1))
        assert h.distances == pytest.approx(10.0, rel=TOL) and h.object_ids == 2
