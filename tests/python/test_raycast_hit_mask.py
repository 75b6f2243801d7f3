# SPDX-License-Identifier: MIT
"""A raycast without its misses: a daemon that sets FEATURE_RAYCAST_HIT_MASK is asked for the
hits alone (Raycast.omit_misses) and answers with RaycastResult.hit_mask and the 40-byte records
of the hits. The Python client spreads them into the same RAYCAST_DTYPE records as the full form,
bit for bit: against a full-form request read with Google's protobuf (the reference), for many
rays, all misses, all hits, counts not a multiple of 8 and a raycast in parts. The masked reply
itself is read with Google's protobuf and checked against the full one; a fake daemon's
malformed replies are refused naming the field."""

from __future__ import annotations

import numpy as np
import pytest

import sensim
from fakedaemon import FakeDaemon, ok_reply
from sensim import errors, pb
from test_bulk_arrays import _bytes_raycast, _call, _check_sphere, _sphere_scene

MISS = np.float64(np.inf).tobytes() + bytes(40)   # a full-form miss record


def rays(n: int, kind: str) -> tuple[np.ndarray, np.ndarray]:
    """n rays from 10 m out towards the sphere (radius 2 at the origin): `some` within 3 m of
    its centre (some hit), `all` within 1 m (every one hits), `none` pointing away."""
    rng = np.random.default_rng(n)
    o = rng.normal(size=(n, 3))
    o *= 10.0 / np.linalg.norm(o, axis=1, keepdims=True)
    spread = {"some": 3.0, "all": 1.0, "none": 3.0}[kind]
    d = rng.uniform(-spread, spread, size=(n, 3)) - o
    return o, (-d if kind == "none" else d)


def masked_reference(full: bytes, n: int) -> tuple[bytes, bytes]:
    """The hit_mask and hits_bytes a masked reply must hold, from the full form's records:
    a bit per record that is not the miss record, the first 40 bytes of those records."""
    recs = [full[48 * i:48 * (i + 1)] for i in range(n)]
    hit = [r != MISS for r in recs]
    mask = bytearray((n + 7) // 8)
    for i, h in enumerate(hit):
        if h:
            mask[i // 8] |= 1 << (i % 8)
    return bytes(mask), b"".join(r[:40] for r, h in zip(recs, hit) if h)


@pytest.mark.parametrize("n,kind", [(1, "some"), (13, "some"), (1001, "some"), (1003, "all"),
                                    (1005, "none"), (30000, "all"),
                                    (sensim.client.PIPELINE_MIN_RAYS + 3, "some")])
def test_hit_mask_gives_the_records_of_the_full_form(sensimd, n, kind):
    o, d = rays(n, kind)
    with sensimd.client(timeout=60) as c:
        assert c.features & pb.FEATURE_RAYCAST_HIT_MASK
        _sphere_scene(c)
        full = _bytes_raycast(c, o, d).hits_bytes           # Google's parse, every record
        masked = c.raycast(o, d)                             # the hits alone, spread
        reply = _call(c, "raycast", pb.Raycast(origins_bytes=o.tobytes(),
                                               directions_bytes=d.tobytes(),
                                               omit_misses=True)).raycast_result
        packed = pb.Raycast(omit_misses=True)
        packed.origins.extend(o[:50].reshape(-1).tolist())
        packed.directions.extend(d[:50].reshape(-1).tolist())
        reply_packed = _call(c, "raycast", packed).raycast_result
        c.hello_reply.features &= ~pb.FEATURE_RAYCAST_HIT_MASK   # as an older daemon's Hello
        older = c.raycast(o, d)
    assert len(full) == 48 * n
    assert np.asarray(masked).tobytes() == full
    assert np.asarray(older).tobytes() == full
    hits = _check_sphere(masked, o, d)
    assert hits == {"all": n, "none": 0}.get(kind, hits)
    if kind == "some" and n > 100:
        assert 0.1 * n < hits < 0.9 * n
    # the reply as Google's protobuf reads it: the mask and the hits' records, nothing else
    mask, records = masked_reference(full, n)
    assert reply.hit_mask == mask and reply.hits_bytes == records
    assert len(reply.distances) == 0 and reply.HasField("world_serial")
    assert len(records) == 40 * {"all": n, "none": 0}.get(kind, len(records) // 40)
    # the packed form of the rays is answered in the same form when asked
    mask50, records50 = masked_reference(full[:48 * 50], min(n, 50))
    assert reply_packed.hit_mask == mask50 and reply_packed.hits_bytes == records50


def test_hit_mask_requests_only_to_a_daemon_that_answers_so():
    o, d = rays(20, "some")
    sent = {}
    for features in (pb.FEATURE_RAYCAST_HIT_MASK, 0):
        with FakeDaemon(answer_with(features, lambda n: None)) as fake:
            with sensim.Client(port=fake.port, timeout=30) as c:
                c.raycast(o, d)
            sent[features] = [pb.Envelope.FromString(b).raycast
                              for b in fake.requests("raycast")]
    assert [r.omit_misses for r in sent[pb.FEATURE_RAYCAST_HIT_MASK]] == [True]
    assert [r.HasField("omit_misses") for r in sent[0]] == [False]


def answer_with(features: int, result):
    """A fake daemon's answers: its HelloReply with `features`, a raycast of n rays answered
    with result(n) (a RaycastResult; None: n misses, masked when asked)."""
    def answer(env):
        out = ok_reply(env)
        if env.WhichOneof("body") == "hello":
            out[0].hello_reply.features = features
        elif env.WhichOneof("body") == "raycast":
            n = len(env.raycast.directions_bytes) // 24
            r = result(n)
            if r is None:
                r = pb.RaycastResult(world_serial=1)
                if env.raycast.omit_misses:
                    r.hit_mask = bytes((n + 7) // 8)
                    r.hits_bytes = b""
                else:
                    r.hits_bytes = MISS * n
            out[0].raycast_result.CopyFrom(r)
        return out
    return answer


def test_hit_mask_spread_by_hand():
    # 13 rays, hits at 0, 7, 8 and 12 (set by hand), the others misses
    hit_at = [0, 7, 8, 12]
    recs = b"".join(np.float64(1.5 + i).tobytes() + np.array([0.0, -0.0, -1.0]).tobytes()
                    + np.array([100 + i, 7 * i], "<u4").tobytes() for i in hit_at)
    reply = pb.RaycastResult(world_serial=1, hit_mask=bytes([0x81, 0x11]), hits_bytes=recs)
    features = pb.FEATURE_RAYCAST_ORIGIN | pb.FEATURE_RAYCAST_HIT_MASK
    with FakeDaemon(answer_with(features, lambda n: reply)) as fake:
        with sensim.Client(port=fake.port, timeout=30) as c:
            got = c.raycast(np.zeros((13, 3)), np.ones((13, 3)))
    raw = np.asarray(got).tobytes()
    for i in range(13):
        if i in hit_at:
            k = hit_at.index(i)
            assert raw[48 * i:48 * i + 48] == recs[40 * k:40 * k + 40] + bytes(8)
        else:
            assert raw[48 * i:48 * i + 48] == MISS
    assert got.object_ids.tolist() == [100 + i if i in hit_at else 0 for i in range(13)]


@pytest.mark.parametrize("mask,records,match", [
    (bytes(1), b"", "hit_mask has 1 bytes for 13 rays, expected 2"),
    (bytes(3), b"", "hit_mask has 3 bytes for 13 rays, expected 2"),
    (bytes([0x07, 0x00]), bytes(80), "hits_bytes has 80 bytes but hit_mask sets 3 bits"),
    (bytes([0x03, 0x00]), bytes(120), "hits_bytes has 120 bytes but hit_mask sets 2 bits"),
    (bytes([0x01, 0x00]), bytes(41), "hits_bytes has 41 bytes but hit_mask sets 1 bits"),
    (bytes([0x00, 0x20]), bytes(40), "hit_mask sets bits past the last ray"),
    (None, b"", "the reply to omit_misses has no hit_mask"),
])
def test_hit_mask_malformed_replies_are_refused_naming_the_field(mask, records, match):
    reply = pb.RaycastResult(world_serial=1, hits_bytes=records)
    if mask is not None:
        reply.hit_mask = mask
    with FakeDaemon(answer_with(pb.FEATURE_RAYCAST_HIT_MASK, lambda n: reply)) as fake:
        with sensim.Client(port=fake.port, timeout=30) as c:
            with pytest.raises(errors.ProtocolError, match=match):
                c.raycast(np.zeros((13, 3)), np.ones((13, 3)))
