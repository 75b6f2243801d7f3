# SPDX-License-Identifier: MIT
"""Limits and the daemon's promises at them (proto/README.md, README.md): replies keep request
order across back-pressure pauses, replies still owed are sent before a protocol error closes the
connection, decoding is bounded, environments are limited and released as documented, names are
UTF-8, and the command line refuses bad options."""

from __future__ import annotations

import socket
import struct
import subprocess
import time
from pathlib import Path

import numpy as np

import pytest

from sensim import errors, pb

from rawwire import frame, hello, read_all


def test_order_is_kept_across_a_backpressure_pause(sensimd):
    # more pending replies than the daemon accepts before it pauses reading (4096), with
    # environment requests before and after the pings
    batch = [hello()]
    body = pb.Envelope(id=2)
    body.create_body.id = 1
    batch.append(body)
    batch += [pb.Envelope(id=3 + i, ping=pb.Ping(payload=b"x")) for i in range(5000)]
    body2 = pb.Envelope(id=5003)
    body2.create_body.id = 2
    batch.append(body2)
    batch.append(pb.Envelope(id=5004, ping=pb.Ping()))
    with socket.create_connection(("127.0.0.1", sensimd.port)) as sock:
        sock.sendall(b"".join(frame(e) for e in batch))
        sock.shutdown(socket.SHUT_WR)
        replies = read_all(sock)
    assert [r.id for r in replies] == list(range(1, 5005))
    assert all(r.status.code == pb.OK for r in replies)


def test_replies_owed_are_sent_before_a_protocol_error_closes(sensimd):
    body = pb.Envelope(id=2)
    body.create_body.id = 1
    with sensimd.client() as witness, socket.create_connection(("127.0.0.1",
                                                                 sensimd.port)) as sock:
        sock.sendall(frame(hello()) + frame(body) + b"\x03\x00\x00\x00\xff\xff\xff")
        replies = read_all(sock)
        assert [r.id for r in replies] == [1, 2, 0]
        assert replies[1].status.code == pb.OK
        assert replies[2].status.code == pb.INVALID_ARGUMENT
        assert "does not decode" in replies[2].status.message
        # the request was applied and answered: the other client sees the body
        assert witness.get_info().environments[0].bodies == 1


def test_frames_that_decode_to_far_more_than_their_size_are_refused(sensimd):
    # 2M unknown fields of 3 bytes: 6 MB on the wire, about 50 MB once decoded
    junk = b"\x98\x06\x01" * 2_000_000  # field 99, varint 1
    env = pb.Envelope(id=2)
    payload = env.SerializeToString() + junk
    with sensimd.client() as witness, socket.create_connection(("127.0.0.1",
                                                                 sensimd.port)) as sock:
        sock.sendall(frame(hello()) + struct.pack("<I", len(payload)) + payload)
        replies = read_all(sock)
        assert [r.id for r in replies] == [1, 0]
        assert replies[1].status.code == pb.RESOURCE_EXHAUSTED
        assert "decodes to more than" in replies[1].status.message
        assert witness.ping(b"alive").payload == b"alive"


def test_kept_environment_is_released_by_a_controller(sensimd):
    with sensimd.client(environment="k", retention="keep") as c:
        c.create_primitive(1, "sphere", radius=1.0)
    with sensimd.client(environment="k") as c:
        assert c.get_info().environments[0].geometries == 1
        c.remove("environment")
    # released: gone with its last client, so the name starts empty again
    with sensimd.client(environment="k") as c:
        infos = {e.name: e for e in c.get_info().environments}
        assert infos["k"].geometries == 0


def test_observers_never_keep_environments(sensimd):
    with pytest.raises(errors.InvalidArgument, match="retention"):
        sensimd.client(environment="o", role="observer", retention="keep")
    with sensimd.client(environment="o", role="observer") as obs:
        with pytest.raises(errors.FailedPrecondition, match="controller"):
            obs.remove("environment")
    with sensimd.client(environment="p") as c:
        assert "o" not in {e.name for e in c.get_info().environments}


def test_environment_names_must_be_utf8(sensimd):
    # Hello with environment = b"\xff\xfe" (field 3), wrapped by hand in Envelope field 10
    inner = pb.Hello(protocol_version=pb.PROTOCOL_VERSION).SerializeToString()
    inner += b"\x1a\x02\xff\xfe"
    payload = b"\x08\x01" + b"\x52" + bytes([len(inner)]) + inner
    with socket.create_connection(("127.0.0.1", sensimd.port)) as sock:
        sock.sendall(struct.pack("<I", len(payload)) + payload)
        replies = read_all(sock)
    assert [r.id for r in replies] == [1]
    assert replies[0].status.code == pb.INVALID_ARGUMENT
    assert "UTF-8" in replies[0].status.message


def test_unread_input_does_not_reset_away_owed_replies(sensimd):
    """After a bad frame the daemon answers what it owes, then closes; input it never reads
    (here 2 MiB behind the bad frame) must not turn the close into a reset that discards
    replies still in flight."""
    batch = [hello()] + [pb.Envelope(id=2 + i, ping=pb.Ping(payload=bytes(1 << 20)))
                         for i in range(40)]
    data = b"".join(frame(e) for e in batch) + b"\x03\x00\x00\x00\xff\xff\xff"
    data += bytes(2 << 20)
    with socket.create_connection(("127.0.0.1", sensimd.port)) as sock:
        sock.sendall(data)
        replies = read_all(sock)
    assert [r.id for r in replies] == list(range(1, 42)) + [0]
    assert replies[-1].status.code == pb.INVALID_ARGUMENT


def test_first_message_without_id_is_refused_and_closed(sensimd):
    with socket.create_connection(("127.0.0.1", sensimd.port)) as sock:
        sock.sendall(frame(pb.Envelope(ping=pb.Ping())))
        replies = read_all(sock)
    assert len(replies) == 1 and replies[0].status.code == pb.FAILED_PRECONDITION


def test_max_environments_is_enforced_and_freed(sensimd_factory):
    d = sensimd_factory("--max-environments", "2")
    a = d.client(environment="a")
    b = d.client(environment="b")
    with pytest.raises(errors.ResourceExhausted, match="max_environments"):
        d.client(environment="c")
    # joining an existing one still works, and a destroyed one frees its place
    d.client(environment="a").close()
    b.close()
    with d.client(environment="c") as c:
        names = sorted(e.name for e in c.get_info().environments)
        assert names == ["a", "c"]
    a.close()


def test_cli_rejects_bad_options(sensimd):
    exe = sensimd.args[0]
    for args, word in ((["--threads", "0"], "threads"), (["--listen", "nowhere"], "listen"),
                       (["--retention", "maybe"], "retention"), (["--bogus"], "bogus"),
                       (["--log-level", "loud"], "log-level")):
        r = subprocess.run([exe, *args], capture_output=True, text=True, timeout=10)
        assert r.returncode == 2 and word in r.stderr, (args, r.stderr)
    r = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=10)
    assert r.returncode == 0 and r.stdout.startswith("sensimd ")


def slow_scene(c, rng) -> "pb.Raycast":
    """A pathological scene (100k large random overlapping triangles: about 1 ms per ray here)
    and a raycast request that would take minutes to finish."""
    n = 100_000
    v = rng.uniform(-10, 10, size=(3 * n, 3)).astype(np.float32)
    c.create_mesh(1, v, np.arange(3 * n, dtype=np.uint32).reshape(n, 3))
    c.create_object(1, 1)
    return pb.Raycast(origins=[0.0] * (3 * 400_000),
                      directions=rng.normal(size=3 * 400_000).tolist())


def test_stopping_cancels_a_long_raycast(sensimd):
    rng = np.random.default_rng(1)
    with sensimd.client() as c:
        c.send_request("raycast", slow_scene(c, rng))
        time.sleep(0.5)
        t0 = time.monotonic()
        assert sensimd.stop(timeout=30) == 0
    assert time.monotonic() - t0 < 20, "SIGTERM waited for the whole raycast"


def test_a_vanished_client_cancels_its_raycast(sensimd):
    """A connection that breaks (reset) cancels its running raycast. (A client that closes
    normally is treated as a half close: its requests are still executed and answered.)"""
    rng = np.random.default_rng(2)
    c = sensimd.client(environment="heavy")
    c.send_request("raycast", slow_scene(c, rng))
    time.sleep(0.5)
    c._sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    c.close()  # with SO_LINGER 0: a reset, not an orderly close
    # the cancelled raycast ends soon: another environment is served
    with sensimd.client(environment="light", timeout=30) as other:
        t0 = time.monotonic()
        other.create_primitive(1, "sphere", radius=1.0)
        assert time.monotonic() - t0 < 20


def test_scene_memory_budget(sensimd_factory):
    d = sensimd_factory("--max-scene-bytes", "2000000")
    with d.client() as c:
        assert c.limits.max_scene_bytes == 2_000_000
        n = 200_000  # 2.4 MB of vertices alone in the backend's buffers
        v = np.zeros((3 * n, 3), dtype=np.float32)
        v[:, 0] = np.repeat(np.arange(n, dtype=np.float32), 3)
        v[1::3, 1] = 1.0
        v[2::3, 2] = 1.0
        with pytest.raises(errors.ResourceExhausted, match="max-scene-bytes"):
            c.create_mesh(1, v, np.arange(3 * n, dtype=np.uint32).reshape(n, 3))
        assert c.get_info().environments[0].geometries == 0
        # what fits still works
        c.create_primitive(2, "sphere", radius=1.0)
        c.create_object(1, 2)
        assert c.raycast([[-5, 0, 0]], [[1, 0, 0]]).distances[0] == pytest.approx(4.0, rel=1e-5)


def _writable_groups():
    """(cpu group parent, memory group parent, kind) where this process may create control
    groups with a CPU quota and a memory limit, or None (not root, or no such controllers)."""
    import os
    if os.geteuid() != 0:
        return None
    root = "/sys/fs/cgroup"
    if os.path.exists(f"{root}/cgroup.controllers"):            # v2
        try:
            enabled = open(f"{root}/cgroup.subtree_control").read().split()
        except OSError:
            return None
        if "cpu" in enabled and "memory" in enabled and os.access(root, os.W_OK):
            return root, root, "v2"
        return None
    cpu, mem = f"{root}/cpu", f"{root}/memory"
    if os.path.exists(f"{cpu}/cpu.cfs_quota_us") and os.path.exists(
            f"{mem}/memory.limit_in_bytes") and os.access(cpu, os.W_OK) and os.access(mem,
                                                                                    os.W_OK):
        return cpu, mem, "v1"
    return None


def test_default_threads_and_scene_bytes_follow_the_control_group(tmp_path):
    """In a container the machine's cores and memory are not the daemon's: under a CPU quota of
    one CPU and a memory limit of 1 GiB, the defaults are one worker thread and 512 MiB of
    scene memory (half the limit), as Hello reports them."""
    import os
    from sensim.testing import Daemon, find_sensimd
    groups = _writable_groups()
    if groups is None:
        pytest.skip("needs root and writable cpu and memory control groups")
    if (os.cpu_count() or 1) < 2:
        pytest.skip("one CPU: a quota of one would not change the default")
    cpu_parent, mem_parent, kind = groups
    name = f"sensim-test-{os.getpid()}"
    cpu_dir, mem_dir = f"{cpu_parent}/{name}", f"{mem_parent}/{name}"
    os.makedirs(cpu_dir, exist_ok=True)
    os.makedirs(mem_dir, exist_ok=True)
    limit = 1 << 30
    try:
        if kind == "v2":
            settings = {f"{cpu_dir}/cpu.max": "100000 100000\n",
                        f"{cpu_dir}/memory.max": f"{limit}\n"}
            join = f"echo $$ > {cpu_dir}/cgroup.procs"
        else:
            settings = {f"{cpu_dir}/cpu.cfs_period_us": "100000\n",
                        f"{cpu_dir}/cpu.cfs_quota_us": "100000\n",
                        f"{mem_dir}/memory.limit_in_bytes": f"{limit}\n"}
            join = f"echo $$ > {cpu_dir}/cgroup.procs && echo $$ > {mem_dir}/cgroup.procs"
        for path, value in settings.items():
            try:
                Path(path).write_text(value)     # closed in the call: a refusal raises here
            except OSError as exc:
                pytest.skip(f"this machine refuses a limit of the groups it made: {exc}")
        # a machine may let root make groups but not move processes into them (delegation
        # in a container): probe with a shell first
        if subprocess.run(["sh", "-c", join], capture_output=True).returncode != 0:
            pytest.skip("this process may not move processes into the groups it made")
        wrapper = tmp_path / "sensimd-in-group"
        wrapper.write_text(f"#!/bin/sh\n{join} || exit 97\nexec {find_sensimd()} \"$@\"\n")
        wrapper.chmod(0o755)
        d = Daemon(executable=wrapper, log_dir=tmp_path)
        try:
            with d.client() as c:
                assert c.hello_reply.threads == 1
                assert c.hello_reply.limits.max_scene_bytes == limit // 2
        finally:
            d.close()
        # the same daemon outside the group: the machine's values (bounded by the groups this
        # test runs in, if any)
        d = Daemon(log_dir=tmp_path, name="sensimd-free")
        try:
            with d.client() as c:
                assert 1 <= c.hello_reply.threads <= len(os.sched_getaffinity(0))
                assert c.hello_reply.limits.max_scene_bytes > limit // 2
        finally:
            d.close()
    finally:
        for path in {cpu_dir, mem_dir}:
            for _ in range(50):              # the group empties when the daemon has exited
                try:
                    os.rmdir(path)
                    break
                except OSError:
                    time.sleep(0.1)
