# SPDX-License-Identifier: MIT
"""Raw protocol helpers for tests that talk to sensimd below the client library: framing of
Envelopes and reading every reply until the daemon closes the connection."""

from __future__ import annotations

import socket
import struct

from sensim import pb


def frame(env) -> bytes:
    """One frame: 4-byte little-endian length, then the serialized Envelope."""
    payload = env.SerializeToString()
    return struct.pack("<I", len(payload)) + payload


def hello(id_: int = 1, **fields) -> "pb.Envelope":
    env = pb.Envelope(id=id_)
    env.hello.protocol_version = pb.PROTOCOL_VERSION
    for key, value in fields.items():
        setattr(env.hello, key, value)
    return env


def read_all(sock: socket.socket, timeout: float = 30.0) -> list:
    """Every reply until the daemon closes the connection."""
    sock.settimeout(timeout)
    data = b""
    while True:
        chunk = sock.recv(1 << 20)
        if not chunk:
            break
        data += chunk
    out = []
    while data:
        (n,) = struct.unpack_from("<I", data)
        env = pb.Envelope()
        env.ParseFromString(data[4:4 + n])
        out.append(env)
        data = data[4 + n:]
    return out
