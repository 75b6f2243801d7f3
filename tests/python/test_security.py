# SPDX-License-Identifier: MIT
"""The daemon under attack (README.md "Running the daemon", proto/README.md "Limits"): slots are
freed by the handshake, idle and I/O deadlines, everything queued for connections is bounded by
one memory budget, strings are bytes with a length (no NUL, no control characters, at most
256 bytes), logs cannot be forged, and one request cannot run forever. Every test starts the real
sensimd and talks to it over loopback only."""

from __future__ import annotations

import os
import select
import socket
import struct
import threading
import time

import numpy as np

import pytest

from sensim import errors, pb

from rawwire import frame, hello

MIB = 1 << 20


# ---------------------------------------------------------------- helpers

def connect(d, timeout: float = 10.0) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", d.port), timeout=timeout)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def recv_frame(sock: socket.socket, timeout: float = 10.0):
    """The next Envelope, or None when the daemon closed the connection."""
    got = recv_sized(sock, timeout)
    return None if got is None else got[0]


def recv_sized(sock: socket.socket, timeout: float = 10.0):
    """(next Envelope, its payload size), or None when the daemon closed the connection."""
    sock.settimeout(timeout)
    head = b""
    while len(head) < 4:
        chunk = sock.recv(4 - len(head))
        if not chunk:
            return None
        head += chunk
    (n,) = struct.unpack("<I", head)
    body = b""
    while len(body) < n:
        chunk = sock.recv(min(n - len(body), 1 << 20))
        if not chunk:
            return None
        body += chunk
    env = pb.Envelope()
    env.ParseFromString(body)
    return env, n


def assert_closed(sock: socket.socket, timeout: float = 10.0) -> None:
    sock.settimeout(timeout)
    try:
        while sock.recv(1 << 16):
            pass
    except ConnectionResetError:
        pass


def raw_hello(sock: socket.socket, **fields):
    sock.sendall(frame(hello(**fields)))
    reply = recv_frame(sock)
    assert reply is not None and reply.status.code == pb.OK, reply
    return reply


def info(d):
    with d.client() as c:
        return c.get_info()


def rss_bytes(pid: int, field: str = "VmRSS") -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise AssertionError(f"{field} not in /proc/{pid}/status")


def varint(v: int) -> bytes:
    out = b""
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def with_raw_string(env, path: str, value: bytes) -> bytes:
    """One frame of env with the string field at path ("hello.token") set to the raw bytes
    value, which the protobuf library would refuse to encode (NUL, invalid UTF-8)."""
    def encode(msg, names):
        head, rest = names[0], names[1:]
        num = msg.DESCRIPTOR.fields_by_name[head].number
        data = encode(getattr(msg, head), rest) if rest else value
        msg.ClearField(head)
        return msg.SerializeToString() + varint(num << 3 | 2) + varint(len(data)) + data
    payload = encode(env, path.split("."))
    return struct.pack("<I", len(payload)) + payload


def sanitized(pid: int) -> bool:
    """The daemon runs under AddressSanitizer, whose quarantine and shadow memory make its
    resident size say nothing about the daemon's own bounds."""
    with open(f"/proc/{pid}/maps") as f:
        return any("libasan" in line for line in f)


def ping_frame(id_: int, payload: bytes) -> bytes:
    return frame(pb.Envelope(id=id_, ping=pb.Ping(payload=payload)))


# ---------------------------------------------------------------- 1. handshake and idle

def test_defaults_are_announced(sensimd):
    with sensimd.client() as c:
        lim = c.limits
        assert lim.handshake_timeout_ms == 5000
        assert lim.idle_timeout_ms == 0
        assert lim.io_timeout_ms == 30000
        assert lim.max_request_ms == 60000
        assert lim.max_hello_bytes == 65536
        assert lim.max_name_bytes == 256
        assert lim.max_held_bytes >= 256 * MIB
        # a sixteenth of the physical memory, at least 256 MiB
        ram = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGESIZE")
        assert lim.max_held_bytes == max(256 * MIB, ram // 2 // 8)


def test_connections_that_never_say_hello_lose_their_slot(sensimd_factory):
    d = sensimd_factory("--max-clients", "4", "--handshake-timeout", "0.5")
    bare = [connect(d) for _ in range(4)]
    # every slot is taken by a connection that sent nothing. Connected at once: the daemon
    # accepts in the order of connecting, so the late one comes after the four, well within
    # their 0.5 s (a pause here would spend it)
    late = connect(d)
    refused = recv_frame(late)
    assert refused.status.code == pb.RESOURCE_EXHAUSTED and "max_clients" in \
        refused.status.message
    late.close()
    t0 = time.monotonic()
    for sock in bare:
        env = recv_frame(sock)
        assert env is not None and env.status.code == pb.DEADLINE_EXCEEDED, env
        assert "hello" in env.status.message and "handshake_timeout_ms 500" in \
            env.status.message
        assert_closed(sock)
        sock.close()
    assert time.monotonic() - t0 < 3.0
    # the slots are free again
    deadline = time.monotonic() + 5
    while True:
        try:
            with d.client() as c:
                assert c.ping(b"in").payload == b"in"
            break
        except errors.ResourceExhausted:
            assert time.monotonic() < deadline
            time.sleep(0.05)
    assert info(d).counters.connections_timed_out >= 4


def test_a_slow_hello_is_still_refused_after_the_deadline(sensimd_factory):
    # trickling the Hello byte by byte does not extend the deadline
    d = sensimd_factory("--handshake-timeout", "0.5")
    sock = connect(d)
    data = frame(hello())
    t0 = time.monotonic()
    got = None
    for b in data[:-1]:
        try:
            sock.sendall(bytes([b]))
        except OSError:
            break
        time.sleep(0.05)
        if time.monotonic() - t0 > 1.5:
            break
    got = recv_frame(sock)
    assert got is not None and got.status.code == pb.DEADLINE_EXCEEDED, got
    sock.close()


def test_before_hello_only_small_frames_are_accepted(sensimd):
    sock = connect(sensimd)
    # 1 MiB announced: far below max_frame_bytes, far above what a Hello needs
    sock.sendall(struct.pack("<I", MIB) + b"\x00" * 1000)
    env = recv_frame(sock, timeout=5)
    assert env is not None and env.status.code == pb.RESOURCE_EXHAUSTED, env
    assert "max_hello_bytes 65536" in env.status.message
    assert_closed(sock)
    sock.close()
    # after Hello the same frame size is fine
    with sensimd.client() as c:
        assert c.ping(b"y" * MIB).payload == b"y" * MIB


def test_idle_timeout_closes_silent_connections_only(sensimd_factory):
    d = sensimd_factory("--idle-timeout", "0.6")
    silent = connect(d)
    raw_hello(silent)
    with d.client() as talker:
        t0 = time.monotonic()
        while time.monotonic() - t0 < 1.5:
            assert talker.ping(b"x").payload == b"x"
            time.sleep(0.1)
        env = recv_frame(silent, timeout=5)
        assert env is not None and env.status.code == pb.DEADLINE_EXCEEDED, env
        assert "idle_timeout_ms 600" in env.status.message
        assert_closed(silent)
        silent.close()
        assert talker.ping(b"still").payload == b"still"


def ping_a_new_client(d, within: float, poll: float) -> None:
    """A new client gets a slot within `within` seconds (refused ones retry every `poll` s)
    and its ping is answered."""
    t0 = time.monotonic()
    while True:
        try:
            with d.client(timeout=2.0) as c:
                assert c.ping(b"z").payload == b"z"
            return
        except errors.ResourceExhausted:
            assert time.monotonic() - t0 < within, "the slot was not given back"
            time.sleep(poll)


# Without noticing the reset, the daemon would free a slot when the connection's unsent pongs
# had not moved for the io timeout: the bound on a slot given back "at once" is a fraction of
# it, not a figure of this machine's speed.
IO_TIMEOUT = 30.0
AT_ONCE = IO_TIMEOUT / 6


def test_a_reset_frees_the_slot_at_once(sensimd_factory):
    d = sensimd_factory("--max-clients", "2", "--io-timeout", str(IO_TIMEOUT))
    with d.client() as keep:
        for _ in range(20):
            sock = connect(d)
            raw_hello(sock)
            # pipeline pings the peer never reads, then reset
            sock.sendall(b"".join(ping_frame(2 + i, b"p" * 60000) for i in range(40)))
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            sock.close()
            # the next client gets the slot (a connection arriving in the same turn of the
            # daemon's loop as the reset may still be counted against it: retry briefly)
            ping_a_new_client(d, within=AT_ONCE, poll=0.01)
            # (a normal close takes a few loop turns: wait for it before the next round)
            deadline = time.monotonic() + 5
            while keep.get_info().connections != 1:
                assert time.monotonic() < deadline
                time.sleep(0.01)
        assert keep.ping(b"k").payload == b"k"


def slow_scene(c, n: int = 4000) -> None:
    """A mesh of n large triangles that all overlap around the origin: every ray from the origin
    meets most of them, so tracing costs about n triangle tests per ray."""
    rng = np.random.default_rng(11)
    verts = rng.uniform(-50, 50, size=(3 * n, 3)).astype("<f4")
    tris = np.arange(3 * n, dtype="<u4").reshape(n, 3)
    c.create_mesh(1, verts, tris)
    c.create_object(10, geometry_id=1)


def raycast_frame(id_: int, n: int) -> bytes:
    rng = np.random.default_rng(5)
    dirs = rng.normal(size=(n, 3))
    msg = pb.Raycast(origins_bytes=np.zeros((n, 3), "<f8").tobytes(),
                     directions_bytes=dirs.astype("<f8").tobytes())
    return frame(pb.Envelope(id=id_, raycast=msg))


def test_a_reset_frees_the_slot_of_a_connection_that_is_not_reading(sensimd_factory):
    # the connection is paused (a long raycast, then more pings than the daemon queues behind
    # it) when its peer resets: its slot comes back at once, and its raycast stops
    d = sensimd_factory("--max-clients", "2", "--threads", "1", "--io-timeout", str(IO_TIMEOUT))
    with d.client(timeout=30) as keep:
        bad = d.client(environment="slow", timeout=30)
        slow_scene(bad)
        sock = bad._sock
        sock.sendall(raycast_frame(1000, 200_000))
        sock.sendall(b"".join(ping_frame(2000 + i, b"") for i in range(5000)))
        time.sleep(0.5)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        bad.close()
        ping_a_new_client(d, within=AT_ONCE, poll=0.05)
        assert keep.ping(b"k").payload == b"k"


# ---------------------------------------------------------------- 2. memory budget

def test_a_half_sent_frame_is_dropped_after_the_io_timeout(sensimd_factory):
    d = sensimd_factory("--io-timeout", "0.8")
    # connected before the frame starts: the frame's 0.8 s are not spent on a new connection
    witness = d.client()
    sock = connect(d)
    raw_hello(sock)
    sock.sendall(struct.pack("<I", 8 * MIB) + b"\x00" * (4 * MIB))
    # held from its header on (polled: the daemon reads the header in its own time, and the
    # frame is dropped 0.8 s later)
    held = witness.get_info().counters.held_bytes
    while held < 8 * MIB and not select.select([sock], [], [], 0)[0]:   # no answer yet
        held = witness.get_info().counters.held_bytes
    assert held >= 8 * MIB, held
    env = recv_frame(sock, timeout=5)
    assert env is not None and env.status.code == pb.DEADLINE_EXCEEDED, env
    assert "io_timeout_ms 800" in env.status.message
    assert_closed(sock)
    sock.close()
    deadline = time.monotonic() + 10
    while witness.get_info().counters.held_bytes >= MIB:
        assert time.monotonic() < deadline, "the dropped frame stayed counted"
        time.sleep(0.05)
    witness.close()


def test_replies_nobody_reads_are_dropped_after_the_io_timeout(sensimd_factory):
    d = sensimd_factory("--io-timeout", "0.8")
    sock = connect(d)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    raw_hello(sock)
    sock.settimeout(10)
    pings = b"".join(ping_frame(2 + i, b"u" * (8 * MIB)) for i in range(6))

    def send() -> None:
        # the daemon stops reading this connection once its pongs pile up, and may close it
        # (the point of the test) before every byte is sent: a reset is expected here
        try:
            sock.sendall(pings)
        except OSError:
            pass

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    # generous bounds: 48 MiB of pings to send and echo on a loaded machine
    deadline = time.monotonic() + 30
    while info(d).counters.held_bytes < 16 * MIB:
        assert time.monotonic() < deadline, "the unread pongs were never held"
        time.sleep(0.02)
    deadline = time.monotonic() + 30
    while info(d).counters.held_bytes > MIB:
        assert time.monotonic() < deadline, "unread replies are still held"
        time.sleep(0.1)
    assert info(d).connections == 1  # the one asking
    sender.join(timeout=15)
    sock.close()
    assert d.stop() == 0
    assert "did not move for 800 ms; closing" in d.stderr()


def test_frames_past_the_memory_budget_are_refused(sensimd_factory):
    d = sensimd_factory("--max-held-bytes", str(64 * MIB))
    with d.client() as witness:
        assert witness.limits.max_held_bytes == 64 * MIB
        hog = connect(d)
        raw_hello(hog)
        hog.sendall(struct.pack("<I", 48 * MIB) + b"\x00" * (40 * MIB))
        deadline = time.monotonic() + 5
        while witness.get_info().counters.held_bytes < 48 * MIB:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        # a second large frame does not fit: refused with a status, the connection closed
        other = connect(d)
        raw_hello(other)
        other.sendall(ping_frame(2, b"o" * (32 * MIB)))
        env = recv_frame(other)
        assert env is not None and env.status.code == pb.RESOURCE_EXHAUSTED, env
        assert "memory budget" in env.status.message and "max_held_bytes 67108864" in \
            env.status.message
        assert_closed(other)
        other.close()
        # small requests still pass
        assert witness.ping(b"w").payload == b"w"
        hog.close()
        deadline = time.monotonic() + 5
        while witness.get_info().counters.held_bytes > MIB:
            assert time.monotonic() < deadline
            time.sleep(0.05)


def test_a_large_request_that_keeps_its_frame_counts_it_once(sensimd_factory):
    # An UpdateState of 7 MiB of arrays is read in place and kept, frame and all, by its request
    # (its arrays are not copied); on an idle environment it runs at once and is answered while
    # its frame is being delivered. Counted as the connection's input and as the request, it
    # would take 14 MiB of the budget of 12, and its answer would be refused for want of room.
    d = sensimd_factory("--max-held-bytes", str(12 * MIB))
    with d.client(environment="kept", timeout=30) as c:
        # quick state updates first: the environment's requests run at once from then on (on
        # a machine too slow for that the answer comes later, when the frame no longer counts
        # as input, and this checks less)
        for k in range(1, 21):
            c._sock.sendall(frame(pb.Envelope(id=k << 40, update_state=pb.UpdateState(
                time=0.01 * k))))
            env = recv_frame(c._sock)
            assert env is not None and env.status.code == pb.OK, env
        n = 7 * MIB // 60
        msg = pb.UpdateState(time=1.0,
                             body_ids_bytes=np.arange(1000, 1000 + n, dtype="<u4").tobytes(),
                             body_poses_bytes=np.zeros((n, 7), "<f8").tobytes())
        c._sock.sendall(frame(pb.Envelope(id=1 << 50, update_state=msg)))
        env = recv_frame(c._sock)
        assert env is not None and env.id == 1 << 50, env
        assert "memory budget" not in env.status.message, env.status.message
        assert env.status.code == pb.NOT_FOUND and "1000" in env.status.message, env.status
    deadline = time.monotonic() + 5
    while info(d).counters.held_bytes > MIB:
        assert time.monotonic() < deadline, "the request's memory stayed counted"
        time.sleep(0.05)


def test_a_reply_that_can_never_fit_is_refused_with_a_status(sensimd_factory):
    # a 300 MB ping is a valid request under a 1 GiB frame limit, but its pong could never fit
    # the 256 MiB queue of one connection
    d = sensimd_factory("--max-frame-bytes", str(1 << 30))
    with d.client(timeout=60) as c:
        with pytest.raises(errors.ResourceExhausted) as exc:
            c.ping(b"\x00" * 300_000_000)
        assert "max_queue_bytes" in exc.value.message
        # the connection goes on
        assert c.ping(b"after").payload == b"after"


def test_the_pong_of_the_largest_ping_fits_max_frame_bytes(sensimd_factory):
    d = sensimd_factory("--max-frame-bytes", "4096")
    with d.client() as c:
        sock = connect(d)
        raw_hello(sock)
        # the largest ping: its frame is exactly max_frame_bytes
        n = 4096 - 8  # envelope id (2 bytes), ping tag and length (3), payload tag and length (3)
        env = pb.Envelope(id=2, ping=pb.Ping(payload=b"m" * n))
        assert len(env.SerializeToString()) == 4096
        sock.sendall(frame(env))
        reply, size = recv_sized(sock)
        assert size <= 4096
        assert reply.id == 2 and reply.status.code == pb.RESOURCE_EXHAUSTED, reply
        assert "max_frame_bytes 4096" in reply.status.message
        # a smaller one still echoes
        sock.sendall(ping_frame(3, b"s" * 4000))
        reply, size = recv_sized(sock)
        assert reply.status.code == pb.OK and reply.pong.payload == b"s" * 4000
        assert size <= 4096
        sock.close()
        assert c.ping(b"ok").payload == b"ok"


# ---------------------------------------------------------------- 3. strings

def test_a_token_is_compared_over_its_full_length(sensimd_factory):
    d = sensimd_factory("--token", "s3cret")
    for token, code in ((b"s3cret\x00junk", pb.INVALID_ARGUMENT), (b"s3cre", pb.UNAUTHENTICATED),
                        (b"s3cretx", pb.UNAUTHENTICATED), (b"", pb.UNAUTHENTICATED)):
        sock = connect(d)
        sock.sendall(with_raw_string(hello(), "hello.token", token))
        reply = recv_frame(sock)
        assert reply is not None and reply.status.code == code, (token, reply)
        if code == pb.INVALID_ARGUMENT:
            assert "hello.token" in reply.status.message
        assert_closed(sock)
        sock.close()
    with d.client(token="s3cret") as c:
        assert c.ping(b"t").payload == b"t"


def test_a_token_file_gives_the_token_and_keeps_it_out_of_the_command_line(sensimd_factory,
                                                                             tmp_path):
    path = tmp_path / "token"
    path.write_bytes(b"f1le-s3cret\n")              # as `echo TOKEN > file` leaves it
    d = sensimd_factory("--token-file", str(path))
    with open(f"/proc/{d.proc.pid}/cmdline", "rb") as f:
        assert b"f1le-s3cret" not in f.read()
    with d.client(token="f1le-s3cret") as c:
        assert c.ping(b"t").payload == b"t"
    with pytest.raises(errors.Unauthenticated):
        d.client(token="f1le-s3cre").close()


@pytest.mark.parametrize("content", [b"", b"\n", b"two\nlines\n", b"nul\x00byte", b"x" * 128,
                                     b"bell\x07"])
def test_a_bad_token_file_stops_the_daemon_at_start(tmp_path, content):
    import subprocess
    path = tmp_path / "token"
    path.write_bytes(content)
    for args in (["--token-file", str(path)], ["--token-file", str(tmp_path / "missing")],
                 ["--token", "a", "--token-file", str(path)]):
        r = subprocess.run([os.environ["SENSIMD"], "--listen", "127.0.0.1:0", *args],
                           capture_output=True, timeout=30)
        assert r.returncode == 2 and b"--token" in r.stderr, (args, r)


@pytest.mark.parametrize("name", [b"ab\x00cd", b"a\nb", b"\x1b[31mred", b"tab\there",
                                  b"del\x7f", b"c1\xc2\x9bx"])
def test_control_characters_in_names_are_refused(sensimd, name):
    # environment name in Hello (field 3)
    sock = connect(sensimd)
    sock.sendall(with_raw_string(hello(), "hello.environment", name))
    reply = recv_frame(sock)
    assert reply is not None and reply.status.code == pb.INVALID_ARGUMENT, reply
    assert "hello.environment" in reply.status.message
    assert_closed(sock)
    sock.close()
    # an entity name: refused, the connection goes on, nothing created
    with sensimd.client() as c:
        body = pb.Envelope(id=0x63)
        body.create_body.id = 7
        c.send_raw(with_raw_string(body, "create_body.name", name))
        reply = c.recv()
        assert reply.id == 0x63 and reply.status.code == pb.INVALID_ARGUMENT, reply
        assert "create_body.name" in reply.status.message
        assert c.get_info().environments[0].bodies == 0


def test_names_are_at_most_256_bytes(sensimd):
    with sensimd.client() as c:
        c.create_body(1, name="n" * 256)
        with pytest.raises(errors.InvalidArgument) as exc:
            c.create_body(2, name="n" * 257)
        assert "create_body.name" in exc.value.message and "256" in exc.value.message
        with pytest.raises(errors.InvalidArgument):
            c.create_primitive(3, "sphere", radius=1.0, name="é" * 200)
        assert c.get_info().environments[0].bodies == 1


# ---------------------------------------------------------------- 4. logs

def test_logs_cannot_be_forged(sensimd_factory):
    d = sensimd_factory("--log-level", "debug")
    # a newline in client_name is refused before anything is logged with it
    sock = connect(d)
    name = b"x\n00:00:00.000 sensimd error forged line"
    sock.sendall(with_raw_string(hello(), "hello.client_name", name))
    reply = recv_frame(sock)
    assert reply.status.code == pb.INVALID_ARGUMENT and "hello.client_name" in \
        reply.status.message
    sock.close()
    # bytes that are not UTF-8 are refused too (a protobuf string must be valid UTF-8), and
    # never reach the log raw
    sock = connect(d)
    name = b"bad\xff\xfe\xc2"
    sock.sendall(with_raw_string(hello(), "hello.client_name", name))
    reply = recv_frame(sock)
    assert reply.status.code == pb.INVALID_ARGUMENT and "invalid UTF-8" in reply.status.message
    sock.close()
    assert d.stop() == 0
    raw = d.log_path.read_bytes()
    assert b"forged line" not in raw
    assert b"\xff" not in raw and b"\x1b" not in raw


# ---------------------------------------------------------------- 5. scene memory

def test_max_scene_bytes_counts_the_core_copies_too(sensimd_factory):
    # meshes of many vertices and one triangle: almost all of their memory is the daemon's own
    # copy of the vertices, which the ray-tracing backend never allocates
    budget = 64 * MIB
    d = sensimd_factory("--max-scene-bytes", str(budget))
    pid = d.proc.pid
    nv = 1_000_000  # 12 MB of float32 vertices
    verts = np.random.default_rng(3).uniform(-1, 1, size=(nv, 3)).astype("<f4")
    tris = np.array([[0, 1, 2]], dtype="<u4")
    with d.client(timeout=60) as c:
        rss0 = rss_bytes(pid)
        created = 0
        with pytest.raises(errors.ResourceExhausted) as exc:
            for i in range(20):
                c.create_mesh(1 + i, verts, tris)
                created += 1
        assert "max_scene_bytes 67108864" in exc.value.message
        # each mesh costs about twice its vertices: the daemon's copy and the backend's; the
        # requests are refused once both pass the budget, at most one mesh beyond it
        mesh = 2 * nv * 12
        assert created * mesh <= budget + mesh, created
        if not sanitized(pid):
            assert rss_bytes(pid) - rss0 <= budget + mesh
        # removing makes room again
        c.remove("geometry", 1)
        c.remove("geometry", 2)
        c.create_mesh(100, verts, tris)


# ---------------------------------------------------------------- 6. work per request

def test_a_request_past_its_deadline_is_stopped(sensimd_factory):
    d = sensimd_factory("--max-request-seconds", "0.2", "--threads", "1")
    with d.client(timeout=60) as c:
        assert c.limits.max_request_ms == 200
        slow_scene(c)
        # about 2 s of tracing: stopped after 0.2 s
        n = 50_000
        dirs = np.random.default_rng(7).normal(size=(n, 3))
        t0 = time.monotonic()
        with pytest.raises(errors.DeadlineExceeded) as exc:
            c.raycast(origins=np.zeros((n, 3)), directions=dirs)
        assert time.monotonic() - t0 < 1.5
        assert exc.value.code == 4
        assert "raycast" in exc.value.message and "max_request_ms 200" in exc.value.message
        # a small one fits the deadline
        hits = c.raycast(origins=np.zeros((10, 3)), directions=dirs[:10])
        assert np.isfinite(hits.distances).all()
        counters = c.get_info().counters
        assert counters.requests_timed_out == 1


# ---------------------------------------------------------------- everything at once

def test_64_connections_attacking_stay_within_the_memory_bound(sensimd):
    """At default settings, 63 attackers (plus one witness: the 64 slots) each stall before
    Hello, then leave a frame half sent and replies unread. The bytes held never exceed
    max_held_bytes, the resident memory stays below start + max_held_bytes + 256 MiB, and the
    deadlines give every slot back."""
    pid = sensimd.proc.pid
    witness = sensimd.client(timeout=30)
    budget = witness.limits.max_held_bytes
    rss0 = rss_bytes(pid)
    attackers = []
    # item 1: bare connections that send nothing
    for _ in range(63):
        attackers.append(connect(sensimd, timeout=2.0))
    time.sleep(0.5)
    # item 2: twice the budget in total, split between a half-sent frame and unread pongs
    per = min(2 * budget // 63, 48 * MIB)
    ping_size = 8 * MIB
    npings = max(1, per // 2 // ping_size)
    partial = per - npings * ping_size
    pings = b"".join(ping_frame(2 + i, b"a" * ping_size) for i in range(npings))
    peak_held = 0
    for sock in attackers:
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.sendall(frame(hello()))
            sock.sendall(pings)
            sock.sendall(struct.pack("<I", 60 * MIB) + b"\x00" * partial)
        except OSError:
            pass  # refused or closed by the budget: that is the point
        peak_held = max(peak_held, witness.get_info().counters.held_bytes)
    rss_peak = rss_bytes(pid, "VmHWM")
    assert peak_held <= budget
    if not sanitized(pid):
        assert rss_peak <= rss0 + budget + 256 * MIB, (rss0, rss_peak, budget)
    # the witness is served throughout, and the deadlines (30 s) free every slot
    assert witness.ping(b"alive").payload == b"alive"
    deadline = time.monotonic() + 60
    while True:
        i = witness.get_info()
        if i.connections == 1 and i.counters.held_bytes < MIB:
            break
        assert time.monotonic() < deadline, (i.connections, i.counters.held_bytes)
        time.sleep(0.5)
    for sock in attackers:
        sock.close()
    if not sanitized(pid):
        assert rss_bytes(pid, "VmHWM") <= rss0 + budget + 256 * MIB
    witness.close()
    print(f"budget {budget >> 20} MiB; RSS at start {rss0 >> 20} MiB, peak "
          f"{rss_bytes(pid, 'VmHWM') >> 20} MiB; peak held {peak_held >> 20} MiB")
