# SPDX-License-Identifier: MIT
"""The Python client sends a raycast's origins_bytes, directions_bytes and times_bytes each at
a multiple of 8 bytes from the start of the frame (its 4-byte length prefix included), with
Raycast.padding (zeros) before an array when needed, so that the daemon traces the rays where
they lie in the frame. The frames a fake daemon records are walked with Google's protobuf
(its wire decoder, none of the client's code) for many ray counts, with and without times and
max_range, and request ids of every varint length. A raycast of at most SMALL_BULK_BYTES of
arrays goes as before, one protobuf serialization without padding (aligning it would cost the
client more than the daemon's copy of a few kB)."""

from __future__ import annotations

import numpy as np
import pytest
from google.protobuf.internal import decoder

import sensim
from fakedaemon import FakeDaemon
from sensim import pb
from sensim.client import PIPELINE_MIN_RAYS, PIPELINE_RAYS, SMALL_BULK_BYTES

PREFIX = 4  # the frame's length prefix: offsets count from the frame's start
ARRAYS = ("origins_bytes", "directions_bytes", "times_bytes")


def fields(buf: bytes, pos: int, end: int) -> list:
    """(number, value offset, value length) of each length-delimited field of buf[pos:end];
    other fields skipped."""
    out = []
    while pos < end:
        tag, pos = decoder._DecodeVarint(buf, pos)
        kind = tag & 7
        if kind == 0:
            _, pos = decoder._DecodeVarint(buf, pos)
        elif kind == 1:
            pos += 8
        elif kind == 5:
            pos += 4
        elif kind == 2:
            length, pos = decoder._DecodeVarint(buf, pos)
            out.append((tag >> 3, pos, length))
            pos += length
        else:
            raise AssertionError(f"wire type {kind} in a request")
    assert pos == end
    return out


def check_frame(body: bytes) -> pb.Envelope:
    """A raycast frame body: each array (non-empty) at a multiple of 8 of the frame, every
    padding made of zeros and just before an array. Returns the parsed Envelope."""
    env = pb.Envelope.FromString(body)
    assert env.WhichOneof("body") == "raycast"
    number = pb.Envelope.DESCRIPTOR.fields_by_name["raycast"].number
    (at, length), = [(a, n) for num, a, n in fields(body, 0, len(body)) if num == number]
    by_number = {f.number: f.name for f in pb.Raycast.DESCRIPTOR.fields}
    inner = fields(body, at, at + length)
    for i, (num, value, n) in enumerate(inner):
        name = by_number[num]
        if name in ARRAYS and n:
            assert (PREFIX + value) % 8 == 0, f"{name} at {PREFIX + value} of the frame"
        if name == "padding":
            assert body[value:value + n] == bytes(n)
            assert i + 1 < len(inner) and by_number[inner[i + 1][0]] in ARRAYS
    return env


def rays(n: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(n)
    return rng.uniform(-5, 5, (n, 3)), rng.normal(size=(n, 3)) + [0.0, 0.0, 3.0]


def sent_raycasts(calls) -> list[bytes]:
    """The raycast frame bodies a fake daemon receives for each call(client) in calls."""
    with FakeDaemon() as d:
        with sensim.Client(port=d.port) as c:
            for call in calls:
                call(c)
        return d.requests("raycast")


def at_id(first: int, n: int, **kw):
    """A call raycasting n rays as the request of id first + 1."""
    def call(c):
        c._next_id = first
        o, d = rays(n)
        c.raycast(o, d, **kw)
    return call


# ray counts on both sides of SMALL_BULK_BYTES (341 rays), none within a few rays of it
SMALL = [1, 2, 3, 5, 7, 100, 170, 171, 172, 336]
LARGE = [347, 681, 682, 683, 1000, 5461, 5462, 43690, 43691]


def small(n: int, t=None) -> bool:
    size = 48 * n + (0 if t is None else 8 * len(t))
    assert abs(size - SMALL_BULK_BYTES) > 64, "a count too close to SMALL_BULK_BYTES"
    return size <= SMALL_BULK_BYTES


def unpadded(body: bytes, o, d, t, kw) -> bytes:
    """What the frame body of a small raycast is: Google's serialization of its Envelope."""
    env = pb.Envelope(id=pb.Envelope.FromString(body).id)
    env.raycast.max_range = kw.get("max_range", 0.0)
    env.raycast.exclude_bodies.extend(kw.get("exclude_bodies", []))
    if kw.get("group_mask"):
        env.raycast.group_mask = kw["group_mask"]
    env.raycast.origins_bytes = o.astype("<f8").tobytes()
    env.raycast.directions_bytes = d.astype("<f8").tobytes()
    if t is not None:
        env.raycast.times_bytes = np.asarray(t, "<f8").tobytes()
    return env.SerializeToString()


@pytest.mark.parametrize("kw", [{}, {"max_range": 25.0}, {"times": [0.0]},
                                {"max_range": 7.5, "exclude_bodies": [3, 99999],
                                 "group_mask": 5}])
def test_raycast_arrays_aligned_for_every_count(kw):
    counts = SMALL + LARGE
    calls = [at_id(first, n, **kw) for n in counts for first in (0, 126, 16382)]
    frames = sent_raycasts(calls)
    assert len(frames) == len(calls)
    for body, n in zip(frames, [n for n in counts for _ in range(3)]):
        o, d = rays(n)
        if small(n):
            assert body == unpadded(body, o, d, kw.get("times"), kw)
            continue
        env = check_frame(body)
        assert env.raycast.origins_bytes == o.astype("<f8").tobytes()
        assert env.raycast.directions_bytes == d.astype("<f8").tobytes()
        assert env.raycast.max_range == kw.get("max_range", 0.0)
        assert list(env.raycast.exclude_bodies) == kw.get("exclude_bodies", [])


def test_raycast_times_per_ray_aligned():
    calls, sizes = [], []
    for n in (1, 3, 170, 683, 4097):  # both sides of SMALL_BULK_BYTES
        for first in (0, 127, 16383, 2097151):
            o, d = rays(n)
            t = np.linspace(0.0, 1.0, n)

            def call(c, first=first, o=o, d=d, t=t):
                c._next_id = first
                c.raycast(o, d, times=t)
            calls.append(call)
            sizes.append((n, t))
    frames = sent_raycasts(calls)
    for body, (n, t) in zip(frames, sizes):
        if small(n, t):
            o, d = rays(n)
            assert body == unpadded(body, o, d, t, {})
            continue
        env = check_frame(body)
        assert env.raycast.times_bytes == t.astype("<f8").tobytes()
        assert len(env.raycast.origins_bytes) == 24 * n


def test_raycast_body_length_across_a_varint_boundary():
    """Bodies whose length sweeps across 2^21 (where its varint grows: the padding changes the
    length that says where the body starts): every array still aligned."""
    o, d = rays(43689)
    calls = [lambda c, k=k: c.raycast(o, d, max_range=1.0, exclude_bodies=list(range(1, k + 1)))
             for k in range(64)]
    frames = sent_raycasts(calls)
    assert len(frames) == len(calls)
    number = pb.Envelope.DESCRIPTOR.fields_by_name["raycast"].number
    lengths = []
    for body in frames:
        check_frame(body)
        lengths += [n for num, _, n in fields(body, 0, len(body)) if num == number]
    assert min(lengths) < 1 << 21 <= max(lengths)


def test_raycast_pipelined_parts_aligned():
    n = PIPELINE_MIN_RAYS + 3
    frames = sent_raycasts([at_id(120, n)])
    assert len(frames) == -(-n // PIPELINE_RAYS)
    total = 0
    for body in frames:
        total += len(check_frame(body).raycast.origins_bytes) // 24
    assert total == n
