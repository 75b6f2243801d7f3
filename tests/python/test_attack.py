# SPDX-License-Identifier: MIT
"""Attacks of an adversarial client on the real sensimd, each one that once got a wrong answer:
raw frames where the client library would refuse to send the bad thing, and the daemon's answer
checked against what the protocol (proto/README.md) promises: the right status, a message
naming the field or the limit, nothing changed, the daemon alive for the next request."""

from __future__ import annotations

import socket
import struct

from sensim import pb


def _connect(daemon, environment: str = "attack") -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", daemon.port))
    sock.settimeout(30)
    env = pb.Envelope(id=1)
    env.hello.protocol_version = pb.PROTOCOL_VERSION
    env.hello.environment = environment
    _send(sock, env)
    reply = _read(sock)
    assert reply.status.code == pb.OK, reply
    return sock


def _send(sock: socket.socket, env) -> None:
    payload = env.SerializeToString()
    sock.sendall(struct.pack("<I", len(payload)) + payload)


def _read_exact(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            return b""
        data += chunk
    return data


def _read(sock: socket.socket):
    """The next Envelope, or None once the daemon has closed the connection."""
    head = _read_exact(sock, 4)
    if not head:
        return None
    env = pb.Envelope()
    env.ParseFromString(_read_exact(sock, struct.unpack("<I", head)[0]))
    return env


def test_a_frame_header_cut_short_is_named_when_it_times_out(sensimd_factory):
    # two of the four length bytes, then silence: the deadline's message said "2 of 0 bytes"
    daemon = sensimd_factory("--io-timeout", "0.5")
    sock = _connect(daemon)
    sock.sendall(b"\x05\x00")
    reply = _read(sock)
    assert reply.id == 0 and reply.status.code == pb.DEADLINE_EXCEEDED
    assert "2 of the 4 bytes of its length" in reply.status.message, reply.status.message
    assert _read(sock) is None
    # a frame whose length arrived and whose payload did not still counts its bytes
    sock = _connect(daemon)
    sock.sendall(struct.pack("<I", 100) + b"\x08")
    reply = _read(sock)
    assert reply.status.code == pb.DEADLINE_EXCEEDED
    assert "(5 of 104 bytes)" in reply.status.message, reply.status.message
