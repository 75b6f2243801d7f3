# SPDX-License-Identifier: MIT
"""Bulk arrays as little-endian bytes (Raycast *_bytes, UpdateState *_bytes,
RaycastResult.hits_bytes) against the packed repeated fields: the same rays and states give the
same hits bit for bit, a request is answered in the form it used, both forms of one array or a
length that is not whole records are refused naming the field and change nothing. Truth is
analytic: rays against a sphere of radius 2 traced in float64 here."""

from __future__ import annotations

import re

import numpy as np
import pytest

import sensim
from sensim import errors, pb

RADIUS = 2.0

# Tolerances: the daemon traces in float32, whose rounding moves a number x by at most
# U32 |x| (U32 = 2^-24, the unit roundoff). Before its hit a ray passes through ROUNDINGS such
# roundings at most, each of a coordinate no larger than L = max |origin coordinate| + distance:
# its origin and its direction (one each), the object's pose and the rotation built from its
# quaternion (one each), the transform into the object's frame (a sum of three products per
# coordinate: up to four). The traced ray thus lies within DELTA = ROUNDINGS U32 L of the true
# one, whatever the instruction set (AVX-512, AVX2 and SSE round differently within it). Along
# the ray that moves the hit by DELTA; across it, on a surface met at incidence angle theta, by
# DELTA tan(theta) along the ray, and its point on the sphere by DELTA / cos(theta), which turns
# the normal by DELTA / (RADIUS cos(theta)) (and the normal is rounded itself, twice). A ray
# passing within DELTA of the sphere's rim may hit it or miss.
U32 = 2.0 ** -24
ROUNDINGS = 8


def _delta(o, t):
    """DELTA of rays from o (n x 3, or one) whose hit (or closest approach) is t away."""
    return ROUNDINGS * U32 * (np.max(np.abs(np.asarray(o, float)), axis=-1) + np.abs(t))


def _sphere_scene(c: sensim.Client, body: int = 0) -> None:
    """Sphere geometry 1 of radius 2 as object 5 (label 23), on `body` when given."""
    c.create_primitive(1, "sphere", radius=RADIUS)
    if body:
        c.create_body(body)
    c.create_object(5, geometry_id=1, body_id=body, label=23)


def _rays(n: int, seed: int = 7) -> tuple[np.ndarray, np.ndarray]:
    """Rays from points 10 m from the origin towards points within 3 m of it: some hit the
    sphere, some miss."""
    rng = np.random.default_rng(seed)
    o = rng.normal(size=(n, 3))
    o *= 10.0 / np.linalg.norm(o, axis=1, keepdims=True)
    target = rng.uniform(-3.0, 3.0, size=(n, 3))
    d = target - o
    return o, d


def _sphere_truth(o: np.ndarray, d: np.ndarray, centre=(0.0, 0.0, 0.0)):
    """Distance (inf on a miss) and outward normal of the first hit on the sphere."""
    u = d / np.linalg.norm(d, axis=1, keepdims=True)
    oc = o - np.asarray(centre)
    b = np.sum(oc * u, axis=1)
    disc = b * b - (np.sum(oc * oc, axis=1) - RADIUS * RADIUS)
    t = np.where(disc >= 0, -b - np.sqrt(np.maximum(disc, 0.0)), np.inf)
    t = np.where(t > 0, t, np.inf)
    p = oc + u * np.where(np.isfinite(t), t, 0.0)[:, None]
    n = np.where(np.isfinite(t)[:, None], p / RADIUS, 0.0)
    return t, n


def _check_sphere(hits, o, d, centre=(0.0, 0.0, 0.0)) -> int:
    """hits are those of rays o, d against the sphere of RADIUS at centre, within DELTA (see
    above): the same rays hit, but for those passing within DELTA of the rim; distances within
    DELTA (1 + tan(theta)), normals within DELTA / (RADIUS cos(theta)) + 2 U32. Returns how many
    hits were compared."""
    t, n = _sphere_truth(o, d, centre)
    u = d / np.linalg.norm(d, axis=1, keepdims=True)
    oc = o - np.asarray(centre)
    closest = -np.sum(oc * u, axis=1)
    delta = _delta(o, np.where(np.isfinite(t), t, closest))
    rim = np.abs(np.linalg.norm(np.cross(oc, u), axis=1) - RADIUS) <= delta
    hit = np.isfinite(t)
    got = np.isfinite(hits.distances)
    assert np.array_equal(got[~rim], hit[~rim])
    both = hit & got
    cos = np.abs(np.sum(n * u, axis=1))[both]
    tan = np.sqrt(1.0 - cos ** 2) / cos
    assert np.all(np.abs(hits.distances[both] - t[both]) <= delta[both] * (1.0 + tan))
    turn = (delta[both] / (RADIUS * cos) + 2 * U32)[:, None]
    assert np.all(np.abs(hits.normals[both] - n[both]) <= turn)
    assert np.all(hits.object_ids[got] == 5) and np.all(hits.object_ids[~got] == 0)
    return int(both.sum())


def _call(c: sensim.Client, body: str, msg, check: bool = True):
    env = c.wait_reply(c.send_request(body, msg), check=check)
    return env


def _packed_raycast(c, o, d, times=None):
    msg = pb.Raycast()
    msg.origins.extend(o.reshape(-1).tolist())
    msg.directions.extend(d.reshape(-1).tolist())
    if times is not None:
        msg.times.extend(np.asarray(times, dtype=float).tolist())
    return _call(c, "raycast", msg).raycast_result


def _bytes_raycast(c, o, d, times=None):
    msg = pb.Raycast(origins_bytes=np.asarray(o, "<f8").tobytes(),
                     directions_bytes=np.asarray(d, "<f8").tobytes())
    if times is not None:
        msg.times_bytes = np.asarray(times, "<f8").tobytes()
    return _call(c, "raycast", msg).raycast_result


def _records_of_arrays(r, n: int) -> np.ndarray:
    """The four arrays of the packed form as hits_bytes records (reserved bytes zero)."""
    out = np.zeros(n, dtype=sensim.RAYCAST_DTYPE)
    out["distances"] = np.asarray(r.distances, dtype="<f8")
    out["normals"] = np.asarray(r.normals, dtype="<f8").reshape(n, 3)
    out["object_ids"] = np.asarray(r.object_ids, dtype="<u4")
    out["labels"] = np.asarray(r.labels, dtype="<u4")
    return out


def test_raycast_forms_give_identical_hits_that_match_the_sphere(sensimd):
    n = 2000
    o, d = _rays(n)
    with sensimd.client() as c:
        _sphere_scene(c)
        packed = _packed_raycast(c, o, d)
        raw = _bytes_raycast(c, o, d)
        hits = c.raycast(o, d)

    # each form answers in its own form
    assert not packed.HasField("hits_bytes") and len(packed.distances) == n
    assert raw.HasField("hits_bytes") and len(raw.distances) == 0 and len(raw.normals) == 0
    assert len(raw.object_ids) == 0 and len(raw.labels) == 0
    assert len(raw.hits_bytes) == 48 * n

    # bit for bit: the packed arrays, the raw records and the client's record array
    from_arrays = _records_of_arrays(packed, n).tobytes()
    assert raw.hits_bytes == from_arrays
    assert np.asarray(hits).tobytes() == from_arrays

    # against the analytic sphere
    assert 0.2 * n < _check_sphere(hits, o, d) < 0.8 * n
    hit = np.isfinite(hits.distances)
    assert np.all(hits.labels[hit] == 23)
    assert np.all(hits.normals[~hit] == 0) and np.all(np.isposinf(hits.distances[~hit]))


def test_client_raycast_returns_records(sensimd):
    with sensimd.client() as c:
        _sphere_scene(c)
        hits = c.raycast([[-10.0, 0.0, 0.0]], [[1.0, 0.0, 0.0]])
        none = c.raycast(np.zeros((0, 3)), np.zeros((0, 3)))
    assert sensim.RAYCAST_DTYPE.itemsize == 48
    assert hits.dtype == sensim.RAYCAST_DTYPE and len(hits) == 1
    assert hits.distances[0] == pytest.approx(8.0, abs=_delta([-10.0, 0, 0], 8.0))
    assert tuple(hits.normals[0]) == pytest.approx((-1.0, 0.0, 0.0), abs=2 * U32)
    assert (hits.object_ids[0], hits.labels[0]) == (5, 23)
    hits.distances[0] = 1.0  # the caller's array, as with the packed form
    assert hits.distances[0] == 1.0
    assert len(none) == 0 and none.dtype == sensim.RAYCAST_DTYPE


def test_client_raycast_large_result_is_writable_and_independent(sensimd):
    # a reply over 1 MiB is read in the frame it arrived in; each call gets its own array
    n = 40000
    o = np.tile([[-10.0, 0.0, 0.0]], (n, 1))
    d = np.tile([[1.0, 0.0, 0.0]], (n, 1))
    with sensimd.client() as c:
        _sphere_scene(c)
        first = c.raycast(o, d)
        first.distances[:] = -1.0
        second = c.raycast(o, d)
        packed = _packed_raycast(c, o[:3], d[:3])
    assert np.all(first.distances == -1.0)
    np.testing.assert_allclose(second.distances, 8.0, rtol=0, atol=_delta(o[0], 8.0))
    assert np.all(second.object_ids == 5) and np.all(second.labels == 23)
    assert np.asarray(second[:3]).tobytes() == _records_of_arrays(packed, 3).tobytes()


def test_client_raycast_large_results_stay_intact_while_held(sensimd):
    # the buffers of large replies are used again once nothing refers to them: results still
    # held (or views of them) never change, whatever is received after them
    n = 30000
    rays = [_rays(n, seed=s) for s in range(6)]
    with sensimd.client() as c:
        _sphere_scene(c)
        first = c.raycast(*rays[0])
        column = first.distances       # a view of the first result only
        kept = [c.raycast(*rays[k]) for k in (1, 2)]
        for k in (3, 4, 5):
            dropped = c.raycast(*rays[k])
            _check_sphere(dropped, *rays[k])
            del dropped                 # its buffer is free for the next call
        del first
        _check_sphere(kept[0], *rays[1])
        _check_sphere(kept[1], *rays[2])
        again = c.raycast(*rays[0])
        assert column.tobytes() == again.distances.tobytes()
        _check_sphere(again, *rays[0])


def test_raycast_leaves_another_pipelined_reply_whole(sensimd):
    # a large raycast reply to a request sent with send_request arrives while c.raycast waits
    # for its own: it is kept with its hits_bytes
    n = 30000
    o1, d1 = _rays(n, seed=11)
    o2, d2 = _rays(n, seed=12)
    with sensimd.client() as c:
        _sphere_scene(c)
        msg = pb.Raycast(origins_bytes=o1.astype("<f8").tobytes(),
                         directions_bytes=d1.astype("<f8").tobytes())
        other = c.send_request("raycast", msg)
        mine = c.raycast(o2, d2)
        env = c.wait_reply(other)
    _check_sphere(mine, o2, d2)
    first = np.frombuffer(env.raycast_result.hits_bytes, dtype=sensim.RAYCAST_DTYPE)
    _check_sphere(first.view(np.recarray), o1, d1)


def _serial(c) -> int:
    """The world_serial of a one-ray raycast, in each form (they must agree)."""
    o, d = np.array([[-10.0, 0.0, 0.0]]), np.array([[1.0, 0.0, 0.0]])
    packed, raw = _packed_raycast(c, o, d), _bytes_raycast(c, o, d)
    assert packed.HasField("world_serial") and raw.HasField("world_serial")
    assert packed.world_serial == raw.world_serial
    return packed.world_serial


def test_world_serial_grows_with_every_request_that_changes_the_environment(sensimd):
    with sensimd.client() as c:
        _sphere_scene(c, body=2)
        first = _serial(c)
        c.get_info()
        assert _serial(c) == first                # raycasts and GetInfo change nothing
        seen = [first]
        changes = [
            lambda: c.update_state(1.0, [2], [[0, 0, 0, 0, 0, 0, 1]]),
            lambda: c.step(1.0),
            lambda: c.create_primitive(2, "box", half_extents=[1, 1, 1]),
            lambda: c.create_object(6, geometry_id=2, body_id=0),
        ]
        for change in changes:
            change()
            seen.append(_serial(c))
        # a refused request counts too (a Step refused after its sensors ran has moved the
        # time line; counting one too many only makes a split raycast go again as one)
        with pytest.raises(errors.SensimError):
            c.create_object(6, geometry_id=2, body_id=0)
        assert _serial(c) == seen[-1] + 1
    assert all(b > a for a, b in zip(seen, seen[1:])), seen


def test_client_pipelined_raycast_matches_one_request_and_the_sphere(sensimd):
    # from PIPELINE_MIN_RAYS rays on, the client sends several requests back to back
    n = sensim.client.PIPELINE_MIN_RAYS + 1001
    o, d = _rays(n, seed=21)
    with sensimd.client(timeout=60) as c:
        _sphere_scene(c)
        hits = c.raycast(o, d)
        one = _bytes_raycast(c, o, d)
        again = c.raycast(o, d)
    assert len(hits) == n and hits.dtype == sensim.RAYCAST_DTYPE
    _check_sphere(hits, o, d)
    assert np.asarray(hits).tobytes() == one.hits_bytes
    assert np.asarray(again).tobytes() == one.hits_bytes
    assert hits.distances.ctypes.data != again.distances.ctypes.data  # a held result stays


def test_client_pipelined_raycast_splits_times_with_the_rays(sensimd):
    # body 2 carries the sphere from x = 0 at t = 1 to x = 4 at t = 3; one time per ray
    n = sensim.client.PIPELINE_MIN_RAYS + 7
    o = np.tile([[-10.0, 0.0, 0.0]], (n, 1))
    d = np.tile([[1.0, 0.0, 0.0]], (n, 1))
    times = 1.0 + 2.0 * (np.arange(n) % 5) / 4.0
    with sensimd.client(timeout=60) as c:
        _sphere_scene(c, body=2)
        c.update_state(1.0, [2], [[0, 0, 0, 0, 0, 0, 1]])
        c.step(1.0)
        c.update_state(3.0, [2], [[4, 0, 0, 0, 0, 0, 1]])
        hits = c.raycast(o, d, times=times)
        one_time = c.raycast(o, d, times=[2.0])
    want = 10.0 + 2.0 * (times - 1.0) - RADIUS
    assert np.all(np.abs(hits.distances - want) <= _delta(o, want))
    np.testing.assert_allclose(one_time.distances, 10.0, rtol=0, atol=_delta(o[0], 10.0))


def test_client_pipelined_raycast_error_names_the_ray_of_the_whole_request(sensimd):
    # a refused part is sent again as one request: the error names the ray by its index in
    # the caller's arrays (in the field the client sent), and the connection stays usable
    n = sensim.client.PIPELINE_MIN_RAYS + 5
    o, d = _rays(n, seed=3)
    bad = n - 2                                  # in the last part
    d[bad] = 0.0
    with sensimd.client(timeout=60) as c:
        _sphere_scene(c)
        with pytest.raises(errors.InvalidArgument, match=rf"directions_bytes\[{bad}\]"):
            c.raycast(o, d)
        hits = c.raycast(o[:10], _rays(10, seed=3)[1])
    assert len(hits) == 10


def test_client_pipelined_raycast_sees_one_world_while_a_controller_moves_it(sensimd):
    # an observer's large raycast while the controller moves the sphere state after state:
    # every result shows the sphere at one place (parts that saw different states are sent
    # again as one request)
    import threading

    n = 2 * sensim.client.PIPELINE_MIN_RAYS
    o = np.tile([[-10.0, 0.0, 0.0]], (n, 1))
    d = np.tile([[1.0, 0.0, 0.0]], (n, 1))
    stop = threading.Event()
    with sensimd.client(environment="moving", timeout=60) as c:
        _sphere_scene(c, body=2)
        c.update_state(0.0, [2], [[0, 0, 0, 0, 0, 0, 1]])
        c.step(0.0)

        def move() -> None:
            k = 0
            while not stop.is_set():
                k += 1
                c.update_state(0.01 * k, [2], [[0.01 * (k % 100), 0, 0, 0, 0, 0, 1]])
                c.step(0.01 * k)

        mover = threading.Thread(target=move)
        mover.start()
        try:
            with sensimd.client(environment="moving", role="observer", timeout=60) as obs:
                for _ in range(8):
                    hits = obs.raycast(o, d)
                    assert np.all(np.isfinite(hits.distances))
                    assert np.all(hits.distances == hits.distances[0])
        finally:
            stop.set()
            mover.join()


def test_without_field_drops_one_nested_bulk_field():
    from sensim import _framing
    env = pb.Envelope(id=7)
    env.status.code = pb.OK
    env.raycast_result.padding = b"\0\0\0"
    env.raycast_result.hits_bytes = bytes(range(256)) * 600
    env.raycast_result.distances.extend([1.5, 2.5])
    data = env.SerializeToString()
    path = (pb.Envelope.DESCRIPTOR.fields_by_name["raycast_result"].number,
            pb.RaycastResult.DESCRIPTOR.fields_by_name["hits_bytes"].number)
    small = _framing.without_field(memoryview(data), path)
    assert small is not None and len(small) < 100
    got = pb.Envelope()
    got.ParseFromString(small)
    env.raycast_result.ClearField("hits_bytes")
    assert got == env
    assert _framing.without_field(small, path) is None  # nothing (left) to drop
    assert _framing.without_field(pb.Envelope(id=3).SerializeToString(), path) is None


def test_one_array_in_bytes_form_is_answered_with_records(sensimd):
    o, d = _rays(50, seed=3)
    with sensimd.client() as c:
        _sphere_scene(c)
        msg = pb.Raycast(directions_bytes=d.astype("<f8").tobytes())
        msg.origins.extend(o.reshape(-1).tolist())
        mixed = _call(c, "raycast", msg).raycast_result
        packed = _packed_raycast(c, o, d)
    assert len(mixed.distances) == 0
    assert mixed.hits_bytes == _records_of_arrays(packed, 50).tobytes()


def test_raycast_times_in_bytes_form_select_the_instant(sensimd):
    # body 2 carries the sphere from x = 0 at t = 1 to x = 4 at t = 3
    o = np.array([[-10.0, 0.0, 0.0]] * 3)
    d = np.array([[1.0, 0.0, 0.0]] * 3)
    times = np.array([1.5, 2.0, 3.0])
    with sensimd.client() as c:
        _sphere_scene(c, body=2)
        c.update_state(1.0, [2], [[0, 0, 0, 0, 0, 0, 1]])
        c.step(1.0)
        c.update_state(3.0, [2], [[4, 0, 0, 0, 0, 0, 1]])
        by_bytes = c.raycast(o, d, times=times)
        packed = _packed_raycast(c, o, d, times=times)
    centre_x = 2.0 * (times - 1.0)
    want = 10.0 + centre_x - RADIUS
    assert np.all(np.abs(by_bytes.distances - want) <= _delta(o, want))
    assert np.asarray(by_bytes).tobytes() == _records_of_arrays(packed, 3).tobytes()


def _update(c, form: str, time: float, ids, poses, vels=None, jids=(), jpos=()):
    """UpdateState in the packed or the bytes form, sent as it is."""
    msg = pb.UpdateState(time=time)
    ids = np.asarray(ids, dtype="<u4")
    poses = np.asarray(poses, dtype="<f8").reshape(-1)
    if form == "packed":
        msg.body_ids.extend(ids.tolist())
        msg.body_poses.extend(poses.tolist())
        if vels is not None:
            msg.body_velocities.extend(np.asarray(vels, dtype=float).reshape(-1).tolist())
        msg.joint_ids.extend(list(jids))
        msg.joint_positions.extend(list(jpos))
    else:
        msg.body_ids_bytes = ids.tobytes()
        msg.body_poses_bytes = poses.tobytes()
        if vels is not None:
            msg.body_velocities_bytes = np.asarray(vels, dtype="<f8").tobytes()
        if len(jids):
            msg.joint_ids_bytes = np.asarray(jids, dtype="<u4").tobytes()
            msg.joint_positions_bytes = np.asarray(jpos, dtype="<f8").tobytes()
    _call(c, "update_state", msg)


def test_update_state_forms_move_bodies_identically(sensimd):
    # the same sequence of states in two environments, one per form: the sphere on body 2 is
    # seen bit for bit alike, where the poses put it
    q = np.array([0.1, -0.3, 0.5, 0.8])
    q /= np.linalg.norm(q)
    states = [(1.0, [1.0, 2.0, -0.5, *q]), (2.0, [3.0, -1.0, 0.25, 0.0, 0.0, 0.0, 1.0])]
    o, d = _rays(500, seed=11)
    seen = {}
    for form in ("packed", "bytes"):
        with sensimd.client(environment=f"state_{form}") as c:
            _sphere_scene(c, body=2)
            c.create_joint(7, "revolute", 0.0)
            for t, pose in states:
                _update(c, form, t, [2], [pose], vels=[[0.5, 0, 0, 0, 0, 0.1]], jids=[7],
                        jpos=[0.25 * t])
                c.step(t)
            seen[form] = np.asarray(c.raycast(o + pose[:3], d)).tobytes()
            info = c.get_info()
            env = next(e for e in info.environments if e.name == f"state_{form}")
            assert env.time == 2.0 and env.steps == 2
    assert seen["packed"] == seen["bytes"]
    # where the last state put it (a turning body: the rotation built from its quaternion
    # rounds too; one ray of these meets the sphere at 86 degrees, 13 float32 ulps of 8 m off)
    hits = np.frombuffer(seen["bytes"], dtype=sensim.RAYCAST_DTYPE).view(np.recarray)
    assert _check_sphere(hits, o + states[-1][1][:3], d, centre=states[-1][1][:3]) > 50


def _state_time(c) -> float | None:
    info = c.get_info()
    env = next(e for e in info.environments if e.name == c.environment)
    return env.time if env.HasField("time") else None


@pytest.mark.parametrize("fields, words", [
    # raycast: both forms of one array
    (dict(origins=[0.0, 0.0, 0.0], origins_bytes=bytes(24), directions_bytes=bytes(24)),
     "raycast: origins and origins_bytes are both set"),
    (dict(origins_bytes=bytes(24), directions=[1.0, 0.0, 0.0],
          directions_bytes=np.array([1.0, 0, 0]).tobytes()),
     "raycast: directions and directions_bytes are both set"),
    (dict(origins_bytes=bytes(24), directions_bytes=np.array([1.0, 0, 0]).tobytes(),
          times=[0.0], times_bytes=bytes(8)),
     "raycast: times and times_bytes are both set"),
    # raycast: lengths
    (dict(origins_bytes=bytes(25), directions_bytes=bytes(24)),
     "raycast: origins_bytes has 25 bytes, not a multiple of 24"),
    (dict(origins_bytes=bytes(48), directions_bytes=bytes(23)),
     "raycast: directions_bytes has 23 bytes, not a multiple of 24"),
    (dict(origins_bytes=bytes(48), directions_bytes=np.array([1.0, 0, 0]).tobytes()),
     "raycast: directions_bytes has 24 bytes, expected 48"),
    (dict(origins_bytes=bytes(24), directions_bytes=np.array([1.0, 0, 0]).tobytes(),
          times_bytes=bytes(4)),
     "raycast: times_bytes has 4 bytes, not a multiple of 8"),
    (dict(origins_bytes=bytes(48), directions_bytes=np.array([1.0, 0, 0] * 2).tobytes(),
          times_bytes=bytes(24)),
     "raycast: times_bytes has 24 bytes, expected 0, 8 or 16"),
])
def test_raycast_bulk_errors_name_the_field(sensimd, fields, words):
    with sensimd.client() as c:
        _sphere_scene(c)
        with pytest.raises(errors.InvalidArgument, match=re.escape(words)):
            c._call("raycast", pb.Raycast(**fields))
        # the connection and the scene are as they were
        assert c.raycast([[-10.0, 0.0, 0.0]], [[1.0, 0.0, 0.0]]).distances[0] == \
            pytest.approx(8.0, abs=_delta([-10.0, 0, 0], 8.0))


_POSE = np.array([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0])


@pytest.mark.parametrize("fields, words", [
    (dict(body_ids=[2], body_ids_bytes=np.array([2], "<u4").tobytes(),
          body_poses_bytes=_POSE.tobytes()),
     "update_state: body_ids and body_ids_bytes are both set"),
    (dict(body_ids_bytes=np.array([2], "<u4").tobytes(), body_poses=_POSE.tolist(),
          body_poses_bytes=_POSE.tobytes()),
     "update_state: body_poses and body_poses_bytes are both set"),
    (dict(body_ids_bytes=np.array([2], "<u4").tobytes(), body_poses_bytes=_POSE.tobytes(),
          body_velocities=[0.0] * 6, body_velocities_bytes=bytes(48)),
     "update_state: body_velocities and body_velocities_bytes are both set"),
    (dict(joint_ids=[7], joint_ids_bytes=np.array([7], "<u4").tobytes(),
          joint_positions_bytes=bytes(8)),
     "update_state: joint_ids and joint_ids_bytes are both set"),
    (dict(joint_ids_bytes=np.array([7], "<u4").tobytes(), joint_positions=[0.0],
          joint_positions_bytes=bytes(8)),
     "update_state: joint_positions and joint_positions_bytes are both set"),
    (dict(body_ids_bytes=bytes(5), body_poses_bytes=_POSE.tobytes()),
     "update_state: body_ids_bytes has 5 bytes, not a multiple of 4"),
    (dict(body_ids_bytes=np.array([2], "<u4").tobytes(), body_poses_bytes=bytes(57)),
     "update_state: body_poses_bytes has 57 bytes, not a multiple of 56"),
    (dict(body_ids_bytes=np.array([2], "<u4").tobytes(), body_poses_bytes=bytes(112)),
     "update_state: body_poses_bytes has 112 bytes, expected 56 per body (1 body_ids_bytes)"),
    (dict(body_ids_bytes=np.array([2], "<u4").tobytes(), body_poses_bytes=_POSE.tobytes(),
          body_velocities_bytes=bytes(96)),
     "update_state: body_velocities_bytes has 96 bytes, expected 0 or 48 per body"),
    (dict(body_ids_bytes=np.array([2], "<u4").tobytes(), body_poses_bytes=_POSE.tobytes(),
          body_velocities_bytes=bytes(47)),
     "update_state: body_velocities_bytes has 47 bytes, not a multiple of 48"),
    (dict(joint_ids_bytes=np.array([7, 7], "<u4").tobytes(), joint_positions_bytes=bytes(8)),
     "update_state: joint_positions_bytes has 8 bytes for 2 joint_ids_bytes"),
    (dict(joint_ids_bytes=np.array([7], "<u4").tobytes(), joint_positions_bytes=bytes(9)),
     "update_state: joint_positions_bytes has 9 bytes, not a multiple of 8"),
])
def test_update_state_bulk_errors_name_the_field_and_change_nothing(sensimd, fields, words):
    with sensimd.client() as c:
        _sphere_scene(c, body=2)
        c.create_joint(7, "revolute", 0.0)
        c.update_state(1.0, [2], [_POSE])
        with pytest.raises(errors.InvalidArgument, match=re.escape(words)):
            c._call("update_state", pb.UpdateState(time=2.0, **fields))
        assert _state_time(c) == 1.0
        # a valid update at the refused time is still accepted
        c.update_state(2.0, [2], [_POSE])
        assert _state_time(c) == 2.0


def _f64(*values) -> bytes:
    return np.array(values, "<f8").tobytes()


_RAY = [-10.0, 0.0, 0.0]
_DIR = [1.0, 0.0, 0.0]


@pytest.mark.parametrize("fields, words", [
    # a value the daemon refuses is named by the field that carried it: times[i] or
    # times_bytes[i] (i counting values), origins[i] or origins_bytes[i] (i counting rays)
    (dict(origins=_RAY, directions=_DIR, times=[float("nan")]),
     "raycast: times[0] = nan is not finite"),
    (dict(origins_bytes=_f64(*_RAY), directions_bytes=_f64(*_DIR), times_bytes=_f64(np.nan)),
     "raycast: times_bytes[0] = nan is not finite"),
    (dict(origins=_RAY, directions_bytes=_f64(*_DIR), times_bytes=_f64(5.0)),
     "raycast: times_bytes[0] = 5 is outside the interval"),
    (dict(origins=_RAY * 2, directions=_DIR * 2, times=[1.0, 5.0]),
     "raycast: times[1] = 5 is outside the interval"),
    (dict(origins_bytes=_f64(*_RAY, 0.0, np.inf, 0.0), directions=_DIR * 2),
     "raycast: origins_bytes[1].y = inf is not finite"),
    (dict(origins=_RAY + [0.0, np.inf, 0.0], directions_bytes=_f64(*_DIR * 2)),
     "raycast: origins[1].y = inf is not finite"),
    (dict(origins=_RAY, directions_bytes=_f64(0.0, 0.0, 0.0)),
     "raycast: directions_bytes[0] has length 0"),
    (dict(origins_bytes=_f64(*_RAY), directions=[0.0, np.nan, 0.0]),
     "raycast: directions[0].y = nan is not finite"),
    (dict(origin=pb.Vec3(x=np.nan), directions_bytes=_f64(*_DIR)),
     "raycast: origin.x = nan is not finite"),
])
def test_raycast_value_errors_name_the_field_sent(sensimd, fields, words):
    with sensimd.client() as c:
        _sphere_scene(c)
        c.update_state(1.0)
        with pytest.raises(errors.InvalidArgument, match=re.escape(words)):
            c._call("raycast", pb.Raycast(**fields))
        assert c.raycast([_RAY], [_DIR]).distances[0] == \
            pytest.approx(8.0, abs=_delta(_RAY, 8.0))


_IDS = np.array([2], "<u4").tobytes()


@pytest.mark.parametrize("fields, error, words", [
    (dict(body_ids_bytes=np.array([9], "<u4").tobytes(), body_poses_bytes=_POSE.tobytes()),
     errors.NotFound, "update_state: body_ids_bytes[0] = 9 is not a known body"),
    (dict(body_ids=[9], body_poses_bytes=_POSE.tobytes()),
     errors.NotFound, "update_state: body_ids[0] = 9 is not a known body"),
    (dict(body_ids=[2], body_poses_bytes=_f64(0, 0, np.nan, 0, 0, 0, 1)),
     errors.InvalidArgument, "update_state: body_poses_bytes[2] = nan (body 2) is not finite"),
    (dict(body_ids_bytes=_IDS, body_poses=[0, 0, np.nan, 0, 0, 0, 1]),
     errors.InvalidArgument, "update_state: body_poses[2] = nan (body 2) is not finite"),
    (dict(body_ids_bytes=_IDS, body_poses_bytes=_f64(0, 0, 0, 0, 0, 0, 0)),
     errors.InvalidArgument, "update_state: body_poses_bytes[3..6] (body 2): orientation norm"),
    (dict(body_ids_bytes=_IDS, body_poses_bytes=_POSE.tobytes(),
          body_velocities_bytes=_f64(0, 0, 0, 0, np.inf, 0)),
     errors.InvalidArgument, "update_state: body_velocities_bytes[4] = inf (body 2)"),
    (dict(joint_ids_bytes=np.array([8], "<u4").tobytes(), joint_positions_bytes=_f64(0.0)),
     errors.NotFound, "update_state: joint_ids_bytes[0] = 8 is not a known joint"),
    (dict(joint_ids_bytes=np.array([7], "<u4").tobytes(), joint_positions_bytes=_f64(np.nan)),
     errors.InvalidArgument, "update_state: joint_positions_bytes[0] = nan (joint 7)"),
    (dict(joint_ids_bytes=np.array([7], "<u4").tobytes(), joint_positions=[np.nan]),
     errors.InvalidArgument, "update_state: joint_positions[0] = nan (joint 7)"),
])
def test_update_state_value_errors_name_the_field_sent(sensimd, fields, error, words):
    with sensimd.client() as c:
        _sphere_scene(c, body=2)
        c.create_joint(7, "revolute", 0.0)
        c.update_state(1.0, [2], [_POSE])
        with pytest.raises(error, match=re.escape(words)):
            c._call("update_state", pb.UpdateState(time=2.0, **fields))
        assert _state_time(c) == 1.0


def test_client_update_state_sends_bytes_and_refuses_bad_ids(sensimd):
    with sensimd.client() as c:
        _sphere_scene(c, body=2)
        c.update_state(1.0, np.array([2], dtype=np.uint64), [[5.0, 0, 0, 0, 0, 0, 1]],
                       body_velocities=[[0.0] * 6])
        c.step(1.0)
        hits = c.raycast([[-10.0, 0.0, 0.0]], [[1.0, 0.0, 0.0]])
        assert hits.distances[0] == pytest.approx(13.0, abs=_delta([-10.0, 0, 0], 13.0))
        with pytest.raises(ValueError, match="body_ids"):
            c.update_state(2.0, [-1], [_POSE])
        with pytest.raises(ValueError, match="body_ids"):
            c.update_state(2.0, [2 ** 32], [_POSE])
        with pytest.raises(ValueError, match="body_ids"):
            c.update_state(2.0, [2.5], [_POSE])
        assert _state_time(c) == 1.0
        c.update_state(2.0, [2.0], [[6.0, 0, 0, 0, 0, 0, 1]])  # a whole number is an id
        c.step(2.0)
        assert c.raycast([[-10.0, 0.0, 0.0]], [[1.0, 0.0, 0.0]]).distances[0] == \
            pytest.approx(14.0, abs=_delta([-10.0, 0, 0], 14.0))


def test_client_raycast_too_large_for_one_request_is_refused_up_front(sensimd_factory):
    # the parts of a pipelined raycast would each fit, but the one request it falls back on
    # would not: the client refuses it before sending anything, and the connection stays
    # usable; below the limit the parts go PIPELINE_WINDOW at a time and the result is right
    d = sensimd_factory("--max-frame-bytes", str(4 << 20))
    with d.client() as c:
        _sphere_scene(c)
        c.update_state(0.0)
        c.step(0.0)
        n = 2 * sensim.client.PIPELINE_MIN_RAYS   # 6.3 MB of rays
        o, dirs = _rays(n)
        before = c.get_info().counters.frames_in
        with pytest.raises(errors.ResourceExhausted, match="max_frame_bytes"):
            c.raycast(o, dirs)
        assert c.get_info().counters.frames_in == before + 1   # only the GetInfo itself
        m = 70000   # 3.4 MB of rays: three parts
        hits = c.raycast(o[:m], dirs[:m])
        one = _bytes_raycast(c, o[:m], dirs[:m])
    _check_sphere(hits, o[:m], dirs[:m])
    assert np.asarray(hits).tobytes() == one.hits_bytes



def _frame_sizes(features: int, o: np.ndarray, dirs: np.ndarray, ks) -> list[int]:
    """The payload bytes of the frame of c.raycast(o, dirs, exclude_bodies=[1] * k) for each
    k, as a peer receives them (a fake daemon announcing `features` and no frame limit)."""
    from fakedaemon import FakeDaemon, ok_reply

    def answer(env):
        out = ok_reply(env)
        if env.WhichOneof("body") == "hello":
            out[0].hello_reply.features = features
        elif env.WhichOneof("body") == "raycast" and env.raycast.omit_misses:
            out[0].raycast_result.hits_bytes = b""   # the hits alone: none
            out[0].raycast_result.hit_mask = bytes((len(dirs) + 7) // 8)
        return out
    sizes = []
    with FakeDaemon(answer) as fake:
        for k in ks:
            # a connection each: the request's id (of a varint's size) is 2, as in the test's
            with sensim.Client(port=fake.port) as c:
                c.raycast(o, dirs, exclude_bodies=[1] * k)
            sizes.append(len(fake.frames[-1]))
    return sizes


@pytest.mark.parametrize("limit,n", [(4096, 80), (1 << 16, 1361)])
def test_client_raycast_limit_is_the_frame_as_sent(sensimd_factory, limit, n):
    """The client compared a raycast with max_frame_bytes counting its message and arrays but
    not the envelope, the body's tag and length and the paddings: one within those bytes over
    the limit was sent, and refused by the daemon instead. The frame as it goes is measured
    now: at limit - 1 and limit bytes (as a peer receives them) the daemon answers; at limit +
    1 the client refuses it, naming the limit, nothing sent. Sizes are stepped with
    exclude_bodies (a byte an id); a frame with arrays of more than SMALL_BULK_BYTES aligns
    them with paddings, so its sizes step by 8 (not always up): each size within 16 bytes of
    the limit is tried."""
    d = sensimd_factory("--max-frame-bytes", str(limit))
    o, dirs = _rays(n)
    with d.client() as c:
        _sphere_scene(c)
        c.update_state(0.0)
        c.step(0.0)
        ks = list(range(400))
        sizes = _frame_sizes(c.features, o, dirs, ks)
        near = {sizes[k]: k for k in reversed(ks) if abs(sizes[k] - limit) <= 16}
        if limit < sensim.client.SMALL_BULK_BYTES:   # byte by byte: limit - 1, limit, limit + 1
            assert {limit - 1, limit, limit + 1} <= set(near)
        assert min(near) <= limit < max(near)
        for size, k in sorted(near.items()):
            before = c.get_info().counters.frames_in
            assert c._next_id < 127   # ids of one byte, as in the peer's measurement
            if size > limit:
                with pytest.raises(errors.ResourceExhausted,
                                   match=f"request of (more than [0-9]+|{size}) "
                                         f"bytes exceeds the daemon's max_frame_bytes {limit}"):
                    c.raycast(o, dirs, exclude_bodies=[1] * k)
                assert c.get_info().counters.frames_in == before + 1   # the GetInfo alone
            else:
                hits = c.raycast(o, dirs, exclude_bodies=[1] * k)
                _check_sphere(hits, o, dirs)
                assert c.get_info().counters.frames_in == before + 2
