# SPDX-License-Identifier: MIT
"""Arrays in, any layout: every function of the Python client that takes arrays accepts any
array-like (broadcast, sliced, reversed, Fortran-ordered, big-endian, float16/float32 or integer
values that convert exactly, nested lists) and puts on the wire exactly the bytes of the
contiguous little-endian float64 (or uint32) input: the frames a fake daemon (fakedaemon.py)
records are compared byte for byte. What is not numbers is refused naming the argument, before
anything is sent. Against the real daemon, rays and meshes given in those layouts hit where
geometry says."""

from __future__ import annotations

import numpy as np
import pytest

import sensim
from fakedaemon import FakeDaemon
from sensim import pb
from sensim.client import PIPELINE_MIN_RAYS


def sent(call) -> list[bytes]:
    """The frames a new client sends for call(client) after its Hello (their ids are the same
    for every call)."""
    with FakeDaemon() as d:
        with sensim.Client(port=d.port) as c:
            call(c)
        frames = list(d.frames)
    assert pb.Envelope.FromString(frames[0]).WhichOneof("body") == "hello"
    assert len(frames) > 1
    return frames[1:]


def layouts(a: np.ndarray) -> dict:
    """a (2-D, values exact in float16) in other layouts with the same values: name -> array."""
    big = np.zeros((2 * a.shape[0] + 1, a.shape[1] + 3), a.dtype)
    big[1::2, 2:2 + a.shape[1]] = a
    rev = np.ascontiguousarray(a[::-1])
    return {
        "sliced": big[1::2, 2:2 + a.shape[1]],
        "reversed": rev[::-1],
        "fortran": np.asfortranarray(a),
        "transposed view": np.ascontiguousarray(a.T).T,
        "big-endian": a.astype(a.dtype.newbyteorder(">")),
        "big-endian fortran": np.asfortranarray(a.astype(a.dtype.newbyteorder(">"))),
        "float32": a.astype(np.float32),
        "float16": a.astype(np.float16),
        "nested lists": a.tolist(),
    }


def broadcast(row) -> tuple:
    """(a broadcast array of 5 copies of row: no memory of its own, its contiguous copy)."""
    b = np.broadcast_to(np.asarray(row, dtype=float), (5, len(row)))
    return b, np.array(b)


def check_layouts(call, a: np.ndarray) -> None:
    """call(client, array) sends the same bytes for every layout of a as for a itself."""
    truth = sent(lambda c: call(c, np.ascontiguousarray(a, dtype="<f8")))
    for name, arr in layouts(a).items():
        assert sent(lambda c: call(c, arr)) == truth, name


POSES = np.array([[1.0, 2.0, 3.0, 0.0, 0.0, 0.0, 1.0],
                  [-4.5, 0.25, 7.0, 0.0, 0.5, 0.0, 0.75],
                  [0.125, -1.0, 2.5, 0.5, 0.5, 0.5, 0.5]])
VELOCITIES = np.array([[1.0, 0.0, 0.0, 0.0, 0.0, 0.5],
                       [0.0, -2.0, 0.5, 0.25, 0.0, 0.0],
                       [3.0, 0.0, 0.0, 0.0, -1.0, 0.0]])


def test_arrays_update_state_any_layout():
    check_layouts(lambda c, a: c.update_state(0.5, [1, 2, 3], a, VELOCITIES), POSES)
    check_layouts(lambda c, a: c.update_state(0.5, [1, 2, 3], POSES, a), VELOCITIES)
    check_layouts(lambda c, a: c.update_state(0.5, joint_ids=[4, 5, 6], joint_positions=a),
                  np.array([[0.5], [-1.25], [3.0]]))
    truth = sent(lambda c: c.update_state(0.5, np.array([1, 2, 3], "<u4"), POSES))
    ids = np.array([[9, 3, 9, 2, 9, 1]], dtype=np.int64)[0, ::-2]
    for name, value in {"big-endian": np.array([1, 2, 3], ">u4"), "int64 reversed": ids,
                        "float": np.array([1.0, 2.0, 3.0]), "list": [1, 2, 3],
                        "int16 big-endian": np.array([1, 2, 3], ">i2")}.items():
        assert sent(lambda c: c.update_state(0.5, value, POSES)) == truth, name
    b, contiguous = broadcast([1.0, 2.0, 3.0, 0.0, 0.0, 0.0, 1.0])
    assert (sent(lambda c: c.update_state(0.5, [1, 2, 3, 4, 5], b))
            == sent(lambda c: c.update_state(0.5, [1, 2, 3, 4, 5], contiguous)))


ORIGINS = np.array([[0.0, 0.0, 0.0], [1.0, -2.0, 0.5], [0.25, 0.125, -3.0], [4.0, 4.0, 4.0]])
DIRECTIONS = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, -1.0], [-0.5, 0.5, 0.75]])


def test_arrays_raycast_any_layout():
    check_layouts(lambda c, a: c.raycast(a, DIRECTIONS, max_range=50.0), ORIGINS)
    check_layouts(lambda c, a: c.raycast(ORIGINS, a, times=[0.5, 0.25, 0.125, 1.0]), DIRECTIONS)
    check_layouts(lambda c, a: c.raycast(ORIGINS, DIRECTIONS, times=a),
                  np.array([[0.5, 0.25, 0.125, 1.0]]))
    b, contiguous = broadcast([0.5, -1.0, 2.0])
    assert (sent(lambda c: c.raycast(b, np.array(DIRECTIONS[:1].repeat(5, 0))))
            == sent(lambda c: c.raycast(contiguous, np.array(DIRECTIONS[:1].repeat(5, 0)))))
    truth = sent(lambda c: c.raycast(ORIGINS, DIRECTIONS, exclude_bodies=[3, 7]))
    for value in (np.array([3, 7], ">u4"), np.array([7, 3])[::-1], np.array([3.0, 7.0])):
        assert sent(lambda c: c.raycast(ORIGINS, DIRECTIONS, exclude_bodies=value)) == truth


def test_arrays_pipelined_raycast_from_one_broadcast_origin():
    """PIPELINE_MIN_RAYS rays and more travel as several requests: one origin broadcast to all
    of them and Fortran-ordered big-endian directions send the parts of the contiguous input."""
    n = PIPELINE_MIN_RAYS + 1000
    angle = np.linspace(0, 2 * np.pi, n, endpoint=False)
    d = np.stack([np.cos(angle), np.sin(angle), np.zeros(n)], axis=1)
    o = np.broadcast_to(np.array([0.5, -0.25, 1.0]), (n, 3))
    truth = sent(lambda c: c.raycast(np.array(o), d))
    assert len(truth) > 1
    odd = np.asfortranarray(d.astype(">f8"))
    assert sent(lambda c: c.raycast(o, odd)) == truth


VERTICES = np.array([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [1.0, 1.0, 0.5]])
TRIANGLES = np.array([[0, 1, 2], [1, 3, 2]], dtype=np.uint32)


def test_arrays_create_mesh_any_layout():
    check_layouts(lambda c, a: c.create_mesh(1, a, TRIANGLES, [1, 2]), VERTICES)
    truth = sent(lambda c: c.create_mesh(1, VERTICES, TRIANGLES, np.array([1, 2], "<u4")))
    tri = TRIANGLES.astype(np.int64)
    for name, (idx, mat) in {
            "big-endian": (TRIANGLES.astype(">u4"), np.array([1, 2], ">u4")),
            "fortran int64": (np.asfortranarray(tri), np.array([[1, 2]]).T),
            "sliced": (np.pad(tri, 1)[1:-1, 1:-1], np.array([0, 1, 0, 2])[1::2]),
            "float": (tri.astype(float), [1.0, 2.0]),
            "lists": (tri.tolist(), [1, 2]),
            "bytes": (TRIANGLES.astype("<u4").tobytes(), np.array([1, 2], "<u4").tobytes())
    }.items():
        assert sent(lambda c: c.create_mesh(1, VERTICES, idx, mat)) == truth, name
    vertex_bytes = VERTICES.astype("<f4").tobytes()
    assert sent(lambda c: c.create_mesh(1, vertex_bytes, TRIANGLES, [1, 2])) == truth


def test_arrays_scene_and_sensor_configs_any_layout():
    """Poses, vectors, scales, a custom lidar pattern and a 3x3 matrix of an IMU, given as
    keyword arguments or inside configs in protobuf JSON form."""
    pose = np.array([[1.0, 2.0, 3.0, 0.0, 0.0, 0.0, 1.0]])
    check_layouts(lambda c, a: c.create_body(1, pose=a[0]), pose)
    check_layouts(lambda c, a: c.create_body(1, linear_velocity=a[0]),
                  np.array([[0.5, -1.0, 2.0]]))
    check_layouts(lambda c, a: c.create_object(2, 1, local_pose=(a[0], (0, 0, 0, 1)),
                                               scale=a[1]),
                  np.array([[1.0, 2.0, 3.0], [0.5, 0.5, 0.5]]))
    check_layouts(lambda c, a: c.set_environment(gravity=a[0], magnetic_field=a[1],
                                                 dipoles=[(a[0], a[1])]),
                  np.array([[0.0, 0.0, -9.75], [2.0 ** -16, 0.0, -(2.0 ** -15)]]))
    check_layouts(lambda c, a: c.create_primitive(1, "box", half_extents=a[0]),
                  np.array([[0.5, 1.0, 2.0]]))
    pattern = np.array([[0.0, 0.5, 1.0, 1.5], [-0.25, 0.0, 0.25, 0.5]])
    check_layouts(lambda c, a: c.create_lidar(
        5, custom={"azimuths": a[0], "elevations": a[1], "frameRate": 10.0}), pattern)
    check_layouts(lambda c, a: c.create_sensor(
        5, lidar={"custom": {"azimuths": a[0], "elevations": a[1], "frameRate": 10.0},
                  "excludeBodies": [1, 2]}), pattern)
    matrix = np.array([[1.0, 0.125, 0.0], [0.0, 1.0, 0.25], [0.5, 0.0, 1.0]])
    check_layouts(lambda c, a: c.create_imu(
        7, accelerometer={"chain": {"crossAxisMatrix": {"m": a}, "bias": a[1]}},
        gyroscope={"laeMatrix": a}), matrix)
    check_layouts(lambda c, a: c.create_imu(
        7, accelerometer={"chain": {"crossAxisMatrix": a, "noiseStddev": a[0]}}), matrix)


def test_arrays_json_form_still_reads_json():
    """Configs in protobuf JSON form keep their JSON spellings: messages as objects, enums by
    full name, numbers as strings; the same bytes as the keyword form."""
    truth = sent(lambda c: c.create_imu(7, accelerometer={"chain": {"bias": [0.5, 0.0, -1.0]}},
                                        sample_rate=100.0))
    assert sent(lambda c: c.create_sensor(7, imu={
        "accelerometer": {"chain": {"bias": {"x": 0.5, "y": 0.0, "z": -1.0}}},
        "sampleRate": "100"})) == truth
    env = pb.Envelope.FromString(truth[0])
    assert env.create_sensor.imu.accelerometer.chain.bias.z == -1.0
    assert env.create_sensor.imu.sample_rate == 100.0


@pytest.mark.parametrize("call, message", [
    (lambda c: c.raycast([[0, 0, 1j]], [[1, 0, 0]]), "origins"),
    (lambda c: c.raycast([[0, 0, 0]], [["a", "b", "c"]]), "directions"),
    (lambda c: c.raycast([[0, 0, 0], [1, 2]], [[1, 0, 0]] * 2), "origins"),
    (lambda c: c.raycast([[0, 0, 0]], [[1, 0, 0]], times=[None]), "times"),
    (lambda c: c.update_state(0.1, [1], [[0, 0, 0, 0, 0, 0, "1"]]), "body_poses"),
    (lambda c: c.update_state(0.1, [1.5], [[0, 0, 0, 0, 0, 0, 1]]), "body_ids"),
    (lambda c: c.create_mesh(1, [[0, 0, 0]] * 3, [[0, 1, 2.5]]), "indices"),
    (lambda c: c.create_mesh(1, [[0, 0, 0]] * 3, [[0, 1, -2]]), "indices"),
    (lambda c: c.create_body(1, pose=np.array([1, 2, 3j])), "pose"),
    (lambda c: c.create_lidar(5, custom={"azimuths": np.array([0.1, 0.2j])}), "azimuths"),
    (lambda c: c.create_imu(7, accelerometer={"chain": {"crossAxisMatrix": "eye"}}),
     "crossAxisMatrix|cross_axis_matrix"),
])
def test_arrays_not_numbers_are_refused_before_sending(call, message):
    with FakeDaemon() as d:
        with sensim.Client(port=d.port) as c:
            with pytest.raises((ValueError, TypeError), match=message):
                call(c)
            assert c.ping().payload == b""
        kinds = [pb.Envelope.FromString(f).WhichOneof("body") for f in d.frames]
    assert kinds == ["hello", "ping"]


# ---------------------------------------------------------------- the real daemon

def test_arrays_real_daemon_hits_where_geometry_says(sensimd):
    """A unit sphere on a body moved to (2, 0, 0) by a pose given Fortran-ordered and
    big-endian; rays from one origin broadcast to all of them, in directions given as a
    reversed big-endian view, hit it where the line meets the sphere, the same records as the
    contiguous input; a triangle given as sliced float32 vertices and big-endian indices is hit
    at its plane."""
    with sensimd.client() as c:
        c.create_primitive(1, "sphere", radius=1.0)
        c.create_body(1, pose=np.asfortranarray(np.array([[0.0, 0, 0, 0, 0, 0, 1]])).reshape(-1))
        c.create_object(1, geometry_id=1, body_id=1)
        poses = np.asfortranarray(np.array([[2.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0]]).astype(">f8"))
        c.update_state(0.1, np.array([1], ">u4"), poses)

        n = 1000
        angle = np.linspace(-0.4, 0.4, n)
        d = np.stack([np.cos(angle), np.sin(angle), np.zeros(n)], axis=1)
        odd = np.ascontiguousarray(d[::-1].astype(">f8"))[::-1]
        o = np.broadcast_to(np.zeros(3), (n, 3))
        hits = c.raycast(o, odd)
        # ray from the origin along u meets the sphere |p - (2,0,0)| = 1 at t = 2 u_x - sqrt(..)
        ux = d[:, 0]
        truth = 2 * ux - np.sqrt(4 * ux ** 2 - 3)
        assert np.allclose(hits.distances, truth, atol=1e-5)
        assert hits.object_ids.tolist() == [1] * n
        assert c.raycast(np.zeros((n, 3)), d).tobytes() == hits.tobytes()

        # a triangle in the plane z = 0.5, vertices from a sliced float32 view
        big = np.zeros((6, 5), np.float32)
        big[::2, 1:4] = [[-5, -5, 0.5], [5, -5, 0.5], [0, 5, 0.5]]
        c.create_mesh(2, big[::2, 1:4], np.array([[0, 1, 2]], ">u4"))
        c.create_object(2, geometry_id=2)
        down = c.raycast(np.broadcast_to([0.0, 0.0, 3.0], (4, 3)),
                         np.broadcast_to([0.0, 0.0, -1.0], (4, 3)))
        assert down.distances.tolist() == [2.5] * 4 and down.object_ids.tolist() == [2] * 4
