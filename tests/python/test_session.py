# SPDX-License-Identifier: MIT
"""Session behaviour of the real sensimd: handshake, info, ping, framing errors, limits,
pipelining and shutdown (proto/README.md)."""

from __future__ import annotations

import signal
import struct
import time

import pytest

import sensim
from sensim import errors, pb

from rawwire import frame


def ping_env(id_: int, payload: bytes = b"") -> "pb.Envelope":
    env = pb.Envelope(id=id_)
    env.ping.payload = payload
    return env


def hello_env(id_: int, version: int = sensim.PROTOCOL_VERSION, **fields) -> "pb.Envelope":
    env = pb.Envelope(id=id_)
    env.hello.protocol_version = version
    for key, value in fields.items():
        setattr(env.hello, key, value)
    return env


def assert_closed(client: sensim.Client) -> None:
    """The daemon has closed this connection: the next read sees end of stream."""
    with pytest.raises(errors.ConnectionClosed):
        env = client.recv(timeout=10)
        pytest.fail(f"expected the connection to be closed, got {env}")


def expect_error(client: sensim.Client, code: int, words: tuple[str, ...] = ()) -> "pb.Envelope":
    env = client.recv(timeout=10)
    assert env.HasField("status"), env
    assert env.status.code == code, (pb.StatusCode.Name(env.status.code), env.status.message)
    for word in words:
        assert word in env.status.message, env.status.message
    return env


# ---------------------------------------------------------------- handshake and info

def test_session_handshake_reports_version_and_limits(sensimd):
    with sensimd.client(client_name="test_session") as c:
        reply = c.hello_reply
        assert reply.server_version
        assert reply.protocol_version == sensim.PROTOCOL_VERSION
        assert reply.environment == "default"
        assert reply.limits.max_frame_bytes > 0
        assert reply.session_id > 0


def test_session_empty_environment_is_default(sensimd):
    with sensimd.client(environment="") as c:
        assert c.hello_reply.environment == "default"


def test_session_get_info(sensimd):
    with sensimd.client() as a, sensimd.client() as b:
        info = a.get_info()
        assert info.server_version == a.server_version
        assert info.protocol_version == sensim.PROTOCOL_VERSION
        assert info.uptime_s >= 0
        assert info.connections >= 2
        assert info.threads >= 1
        assert "default" in [e.name for e in info.environments]
        assert info.counters.frames_in >= 3          # two Hellos and this GetInfo
        assert info.counters.connections_total >= 2
        assert info.limits.max_frame_bytes == a.limits.max_frame_bytes
        b.ping()


def test_session_ping_echoes_payload(sensimd):
    with sensimd.client() as c:
        for payload in (b"", b"x", bytes(range(256)), b"\0" * 4000):
            pong = c.ping(payload)
            assert pong.payload == payload


# ---------------------------------------------------------------- handshake failures

@pytest.mark.parametrize("version", [0, 2, 1000])
def test_session_wrong_protocol_version_is_refused_and_closed(sensimd, version):
    c = sensimd.raw()
    with pytest.raises(errors.FailedPrecondition) as exc:
        c.hello(protocol_version=version)
    assert "protocol_version" in exc.value.message
    assert_closed(c)
    with sensimd.client() as ok:
        ok.ping(b"still fine")


def test_session_token_required_wrong_and_right(sensimd_factory):
    d = sensimd_factory("--token", "s3cret")

    # missing and wrong tokens: UNAUTHENTICATED, then closed
    for token in (None, "", "wrong", "s3cret "):
        c = d.raw(token=token)
        with pytest.raises(errors.Unauthenticated):
            c.hello()
        assert_closed(c)

    # the constructor raises the same error
    with pytest.raises(errors.Unauthenticated):
        d.client(token="nope")

    with d.client(token="s3cret") as c:
        assert c.ping(b"in").payload == b"in"


@pytest.mark.parametrize("first", ["ping", "get_info", "step"])
def test_session_request_before_hello_is_refused_and_closed(sensimd, first):
    c = sensimd.raw()
    env = pb.Envelope(id=5)
    getattr(env, first).SetInParent()
    c.send_raw(frame(env))
    reply = expect_error(c, pb.FAILED_PRECONDITION, ("hello",))
    assert reply.id in (0, 5)
    assert_closed(c)


# ---------------------------------------------------------------- bad frames

def test_session_oversize_frame_is_refused_and_closed_others_unaffected(sensimd_factory):
    d = sensimd_factory("--max-frame-bytes", "1024")
    with d.client() as good:
        assert good.limits.max_frame_bytes == 1024

        # announce one byte over the limit: the daemon answers before reading the body
        bad = d.client()
        bad.send_raw(struct.pack("<I", 1025))
        env = expect_error(bad, pb.RESOURCE_EXHAUSTED, ("max_frame_bytes",))
        assert env.id == 0
        assert_closed(bad)

        # a huge announced length from a client that never said Hello
        bad = d.raw()
        bad.send_raw(struct.pack("<I", 0xFFFFFFFF))
        expect_error(bad, pb.RESOURCE_EXHAUSTED, ("max_frame_bytes",))
        assert_closed(bad)

        # the first client keeps working, up to the limit
        assert good.ping(b"p" * 900).payload == b"p" * 900

        # the client refuses to send what the daemon would refuse, and stays usable
        with pytest.raises(errors.ResourceExhausted):
            good.ping(b"q" * 2000)
        assert good.ping(b"ok").payload == b"ok"


@pytest.mark.parametrize("garbage", [b"\xff" * 16, b"\x0f\x01\x02\x03", b"\x52\x05abc"])
def test_session_undecodable_frame_is_refused_and_closed_others_unaffected(sensimd, garbage):
    with sensimd.client() as good:
        bad = sensimd.client()
        bad.send_raw(struct.pack("<I", len(garbage)) + garbage)
        env = expect_error(bad, pb.INVALID_ARGUMENT, ("decode",))
        assert env.id == 0
        assert_closed(bad)
        assert good.ping(b"alive").payload == b"alive"


def test_session_zero_length_frame_is_refused_and_closed(sensimd):
    with sensimd.client() as good:
        bad = sensimd.client()
        bad.send_raw(b"\0\0\0\0")
        expect_error(bad, pb.INVALID_ARGUMENT)
        assert_closed(bad)
        assert good.ping().payload == b""


def test_session_non_protocol_bytes_are_refused_and_closed(sensimd):
    # An HTTP request read as a frame: its first four bytes announce about 540 MB.
    with sensimd.client() as good:
        bad = sensimd.raw()
        bad.send_raw(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
        env = bad.recv(timeout=10)
        assert env.status.code in (pb.RESOURCE_EXHAUSTED, pb.INVALID_ARGUMENT), env
        assert_closed(bad)
        good.ping()


def test_session_frames_split_byte_by_byte(sensimd):
    c = sensimd.raw()
    with c:
        for env in (hello_env(1, client_name="bytewise"), ping_env(2, b"one byte at a time")):
            for byte in frame(env):
                c.send_raw(bytes([byte]))
                time.sleep(0.001)
            reply = c.recv(timeout=10)
            assert reply.id == env.id
            assert reply.status.code == pb.OK, reply.status.message
        assert reply.pong.payload == b"one byte at a time"


def test_session_two_frames_in_one_write_and_split_across_writes(sensimd):
    with sensimd.client() as c:
        data = frame(ping_env(100, b"a")) + frame(ping_env(101, b"b"))
        cut = len(data) // 2 + 1
        c.send_raw(data[:cut])
        time.sleep(0.02)
        c.send_raw(data[cut:])
        assert [c.recv().pong.payload for _ in range(2)] == [b"a", b"b"]


# ---------------------------------------------------------------- pipelining

def pipeline(client: sensim.Client, bodies: list[str]) -> list[int]:
    """Send one request per body in a single write; return the reply ids in arrival order."""
    envs = []
    for i, body in enumerate(bodies):
        env = ping_env(1000 + i, str(i).encode()) if body == "ping" else pb.Envelope(id=1000 + i)
        getattr(env, body).SetInParent()
        envs.append(env)
    client.send_raw(b"".join(frame(e) for e in envs))
    replies = [client.recv(timeout=10) for _ in envs]
    for reply in replies:
        assert reply.status.code == pb.OK, reply.status.message
        if reply.WhichOneof("body") == "pong":
            assert reply.pong.payload == str(reply.id - 1000).encode()
    return [r.id for r in replies]


def test_session_pipelined_requests_are_answered_in_order(sensimd):
    bodies = ["ping", "ping", "get_info", "ping", "raycast", "ping"] * 8
    with sensimd.client() as c:
        assert pipeline(c, bodies) == list(range(1000, 1000 + len(bodies)))


def test_session_pipelined_environment_requests_keep_order(sensimd):
    bodies = ["get_info", "raycast"] * 20
    with sensimd.client() as c:
        assert pipeline(c, bodies) == list(range(1000, 1000 + len(bodies)))


def test_session_client_correlates_out_of_order_waits(sensimd):
    with sensimd.client() as c:
        ids = [c.send_request("ping", pb.Ping(payload=bytes([i]))) for i in range(10)]
        for i in reversed(range(10)):
            assert c.wait_reply(ids[i]).pong.payload == bytes([i])


# ---------------------------------------------------------------- limits

def test_session_max_clients(sensimd_factory):
    d = sensimd_factory("--max-clients", "2")
    a = d.client()
    b = d.client()

    # a third connection is told why and closed, without sending anything
    extra = d.raw()
    env = expect_error(extra, pb.RESOURCE_EXHAUSTED, ("max_clients",))
    assert env.id == 0
    assert_closed(extra)

    # the client constructor reports the same refusal
    with pytest.raises(errors.ResourceExhausted) as exc:
        d.client()
    assert "max_clients" in exc.value.message

    a.ping()
    b.ping()
    assert a.get_info().counters.connections_rejected >= 2

    # a freed slot can be taken again (the daemon notices the close asynchronously)
    b.close()
    deadline = time.monotonic() + 10
    while True:
        try:
            c = d.client()
            break
        except errors.ResourceExhausted:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    c.ping()
    a.close()
    c.close()


# ---------------------------------------------------------------- unknown ids

def test_session_subscribe_to_no_sensor_names_the_field(sensimd):
    with sensimd.client() as c:
        with pytest.raises(errors.NotFound) as exc:
            c.subscribe(1)
        assert exc.value.code == pb.NOT_FOUND
        assert "subscribe.sensor_id" in exc.value.message
        assert c.ping(b"after").payload == b"after"


# ---------------------------------------------------------------- shutdown

@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_session_signal_shuts_down_cleanly_with_clients(sensimd_factory, sig):
    d = sensimd_factory()
    idle = d.client()
    busy = d.client()
    busy.ping(b"x")
    raw = d.raw()
    raw.send_raw(frame(hello_env(1))[:3])       # a connection stuck inside a frame

    assert d.stop(sig) == 0
    for c in (idle, busy, raw):
        assert_closed(c)


# ---------------------------------------------------------------- info is real

def raw_call(client: sensim.Client, env: "pb.Envelope") -> tuple[int, "pb.Envelope"]:
    """Send env as one frame below the client library; return the frame's size and the reply."""
    data = frame(env)
    client.send_raw(data)
    reply = client.recv(timeout=10)
    assert reply.id == env.id
    assert reply.status.code == pb.OK, reply.status.message
    return len(data), reply


def get_info_env(id_: int) -> "pb.Envelope":
    env = pb.Envelope(id=id_)
    env.get_info.SetInParent()
    return env


def test_session_info_uptime_advances_with_the_clock(sensimd):
    with sensimd.client() as c:
        before = time.monotonic()
        first = c.get_info().uptime_s
        time.sleep(0.2)
        second = c.get_info().uptime_s
        elapsed = time.monotonic() - before
        assert first > 0
        # at least the sleep (less a margin), at most the time both calls took (seconds, not ms)
        assert second - first >= 0.15, (first, second)
        assert second - first <= elapsed + 1e-3, (first, second, elapsed)


def connections_now(client: sensim.Client) -> int:
    return client.get_info().connections


def test_session_info_connections_counts_open_connections(sensimd):
    with sensimd.client() as a:
        assert connections_now(a) == 1
        b = sensimd.client()
        c = sensimd.client()
        assert connections_now(a) == 3
        b.ping()
        c.ping()
        b.close()
        c.close()
        # the daemon finishes a close after it has read the peer's end of stream
        deadline = time.monotonic() + 2.0
        while (n := connections_now(a)) != 1 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert n == 1


def test_session_info_counts_frames_and_bytes_exactly(sensimd):
    with sensimd.client() as c:
        _, reply = raw_call(c, get_info_env(500))
        first = reply.info.counters
        info_reply_size = len(frame(reply))

        sent = 0
        pong_sizes = 0
        for i in range(5):
            size, pong = raw_call(c, ping_env(501 + i, b"x" * (i * 7)))
            assert pong.pong.payload == b"x" * (i * 7)
            sent += size
            pong_sizes += len(frame(pong))
        size, reply = raw_call(c, get_info_env(506))
        sent += size
        second = reply.info.counters

        # in: 5 pings and the second get_info (each Info is taken after its request was read)
        assert second.frames_in - first.frames_in == 6
        assert second.bytes_in - first.bytes_in == sent
        # out: the first Info reply (sent after its own counters were taken) and 5 pongs; the
        # second Info reply is not yet counted in itself
        assert second.frames_out - first.frames_out == 6
        assert second.bytes_out - first.bytes_out == info_reply_size + pong_sizes
        assert second.requests_failed == first.requests_failed
        assert second.frames_rejected == first.frames_rejected
        assert second.connections_total == first.connections_total == 1


def test_session_info_counts_each_failed_request_once(sensimd):
    with sensimd.client() as c:
        first = c.get_info().counters

        # an environment request the core refuses
        with pytest.raises(errors.InvalidArgument):
            c.set_material(3, "lambertian", reflectance=1.5)
        assert c.ping(b"still here").payload == b"still here"
        second = c.get_info().counters
        assert second.requests_failed - first.requests_failed == 1

        # a request naming no sensor
        with pytest.raises(errors.NotFound):
            c.subscribe(1)
        third = c.get_info().counters
        assert third.requests_failed - second.requests_failed == 1

        # successful requests do not count
        c.set_material(3, "lambertian", reflectance=0.5)
        c.ping()
        fourth = c.get_info().counters
        assert fourth.requests_failed == third.requests_failed
        assert fourth.frames_rejected == first.frames_rejected
