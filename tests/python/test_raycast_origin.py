# SPDX-License-Identifier: MIT
"""Rays that all start at one point travel with one origin (Raycast.origin) to a daemon that
sets FEATURE_RAYCAST_ORIGIN in HelloReply.features: the hits are those of the same origin sent
once per ray, bit for bit (a request built here with Google's protobuf is the reference), and
the analytic sphere's. The frames the Python client sends are walked with Google's protobuf:
the origin once with its exact bits and no origins_bytes to a daemon that takes it, the
origins per ray to one that does not (a fake daemon). Both forms at once, and a bad origin,
are refused naming the field."""

from __future__ import annotations

import numpy as np
import pytest

import sensim
from fakedaemon import FakeDaemon, ok_reply
from sensim import errors, pb
from test_bulk_arrays import _bytes_raycast, _call, _check_sphere, _sphere_scene
from test_raycast_align import check_frame

AT = np.array([-9.5, 0.375, -0.25])


def fan(n: int) -> np.ndarray:
    """Directions from AT towards points within 3 m of the sphere's centre: some hit it."""
    rng = np.random.default_rng(n)
    return rng.uniform(-3.0, 3.0, size=(n, 3)) - AT


@pytest.mark.parametrize("n", [1000, sensim.client.PIPELINE_MIN_RAYS + 3])
def test_one_origin_gives_the_hits_of_the_origin_per_ray(sensimd, n):
    d = fan(n)
    o = np.tile(AT, (n, 1))
    with sensimd.client(timeout=60) as c:
        assert c.features & pb.FEATURE_RAYCAST_ORIGIN
        _sphere_scene(c)
        per_ray = _bytes_raycast(c, o, d).hits_bytes     # Google's serialization
        found = c.raycast(o, d)                           # all equal: sent once
        given = c.raycast(AT, d)                          # one origin given
        c.hello_reply.features = 0                        # as an older daemon's Hello
        written_out = c.raycast(AT, d)
        once = _call(c, "raycast", pb.Raycast(origin=pb.Vec3(x=AT[0], y=AT[1], z=AT[2]),
                                              directions_bytes=d.tobytes()))
    for hits in (found, given, written_out):
        assert np.asarray(hits).tobytes() == per_ray
    assert once.raycast_result.hits_bytes == per_ray
    assert 0.1 * n < _check_sphere(found, o, d) < 0.9 * n


def test_one_origin_refusals_name_the_field(sensimd):
    d = fan(10)
    with sensimd.client() as c:
        _sphere_scene(c)
        both = pb.Raycast(origin=pb.Vec3(x=1.0), origins_bytes=np.zeros((10, 3)).tobytes(),
                          directions_bytes=d.tobytes())
        with pytest.raises(errors.InvalidArgument,
                           match="origin and origins_bytes are both set"):
            _call(c, "raycast", both)
        with pytest.raises(errors.InvalidArgument, match=r"origin\.z = nan is not finite"):
            c.raycast([0.0, 0.0, np.nan], d)
        with pytest.raises(ValueError, match="origins: 2 rays but directions: 10"):
            c.raycast(np.zeros((2, 3)), d)
        assert len(c.raycast(AT, d)) == 10   # the connection goes on


def hello_with(features: int):
    """A fake daemon's answers, its HelloReply with `features`; a raycast's misses counted by
    its directions when it sent one origin."""
    def answer(env):
        out = ok_reply(env)
        if env.WhichOneof("body") == "hello":
            out[0].hello_reply.features = features
        elif env.WhichOneof("body") == "raycast" and env.raycast.HasField("origin"):
            n = len(env.raycast.directions_bytes) // 24
            out[0].raycast_result.hits_bytes = (np.float64(np.inf).tobytes() + bytes(40)) * n
        return out
    return answer


@pytest.mark.parametrize("n", [5, 700, sensim.client.PIPELINE_MIN_RAYS + 1])
def test_one_origin_frames_as_googles_protobuf_reads_them(n):
    d = fan(n)
    negzero = np.array([-0.0, 2.5, 1e-300])
    bodies = {}
    for features in (pb.FEATURE_RAYCAST_ORIGIN, 0):
        with FakeDaemon(hello_with(features)) as fake:
            with sensim.Client(port=fake.port, timeout=30) as c:
                assert c.features == features
                c.raycast(np.tile(negzero, (n, 1)), d)    # found equal
                c.raycast(negzero, d)                      # given
                other = np.tile(negzero, (n, 1))
                other[-1, 0] = 0.0                         # differs by the sign bit
                c.raycast(other, d)
            bodies[features] = fake.requests("raycast")

    # to a daemon that takes it: the origin once, its bits exact, the directions aligned
    sent = bodies[pb.FEATURE_RAYCAST_ORIGIN]
    parts = len(sent) // 3
    for body in sent[:2 * parts]:
        env = pb.Envelope.FromString(body)
        rc = env.raycast
        assert rc.HasField("origin") and not rc.HasField("origins_bytes")
        assert np.array([rc.origin.x, rc.origin.y, rc.origin.z]).tobytes() == negzero.tobytes()
        if len(body) > sensim.client.SMALL_BULK_BYTES:
            check_frame(body)
    rays = b"".join(pb.Envelope.FromString(b).raycast.directions_bytes for b in sent[:parts])
    assert rays == d.tobytes()
    per_ray = b"".join(pb.Envelope.FromString(b).raycast.origins_bytes for b in sent[2 * parts:])
    assert per_ray == other.tobytes()

    # to an older daemon: the origins per ray, the one given written out
    old = bodies[0]
    assert len(old) == 3 * parts
    for k in range(3):
        got = b"".join(pb.Envelope.FromString(b).raycast.origins_bytes
                       for b in old[k * parts:(k + 1) * parts])
        assert got == (other if k == 2 else np.tile(negzero, (n, 1))).tobytes()
        assert not any(pb.Envelope.FromString(b).raycast.HasField("origin")
                       for b in old[k * parts:(k + 1) * parts])
