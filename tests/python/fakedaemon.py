# SPDX-License-Identifier: MIT
"""A stand-in for sensimd in tests of the Python client against a daemon that misbehaves: a
loopback socket server speaking the framing (u32 little-endian length, then an Envelope) with
Google's protobuf module (sensim_pb2) and none of the client's own code. It records every frame
a client sends, byte for byte, and answers each request through a function the test chooses:
the frames it returns (pushed frames first, then the reply, or nothing) are sent in order, in
one write (a list) or each as a generator yields it (which may go on without end)."""

from __future__ import annotations

import socket
import struct
import threading
from typing import Callable, Iterable

from sensim import pb

Answer = Callable[["pb.Envelope"], Iterable]


def frame(env) -> bytes:
    """One frame: the Envelope (or bytes already serialized) with its length prefix."""
    payload = env if isinstance(env, (bytes, bytearray)) else env.SerializeToString()
    return struct.pack("<I", len(payload)) + bytes(payload)


def pushed(data, sequence: int | None = None) -> "pb.Envelope":
    """A pushed SensorData frame (id 0), as the daemon sends it to a subscriber."""
    env = pb.Envelope(id=0)
    if sequence is not None:
        env.sequence = sequence
    env.sensor_data.CopyFrom(data)
    return env


def ok_reply(env) -> list:
    """The answer of a daemon that takes every request: HelloReply, Pong, a RaycastResult of
    one miss per ray (hits_bytes, world_serial 1), otherwise a bare OK."""
    kind = env.WhichOneof("body")
    out = pb.Envelope(id=env.id)
    if kind == "hello":
        out.hello_reply.protocol_version = pb.PROTOCOL_VERSION
        out.hello_reply.server_version = "fake"
        out.hello_reply.session_id = 1
    elif kind == "ping":
        out.pong.payload = env.ping.payload
    elif kind == "raycast":
        rc = env.raycast
        n = len(rc.origins_bytes) // 24 if rc.origins_bytes else len(rc.origins) // 3
        miss = struct.pack("<d", float("inf")) + bytes(40)
        out.raycast_result.hits_bytes = miss * n
        out.raycast_result.world_serial = 1
    return [out]


def _recv_exact(sock: socket.socket, n: int) -> bytes | None:
    data = bytearray()
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            return None
        data += chunk
    return bytes(data)


class FakeDaemon:
    """Listens on 127.0.0.1 (a free port) and serves each connection on a thread of its own.
    ``frames`` holds every frame body received (all connections, in arrival order);
    ``answer(envelope) -> frames`` decides the reply (default ok_reply). A failure inside the
    server is kept in ``errors`` and raised again by close()."""

    def __init__(self, answer: Answer = ok_reply):
        self.answer = answer
        self.frames: list[bytes] = []
        self.errors: list[BaseException] = []
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._threads: list[threading.Thread] = []
        self._conns: list[socket.socket] = []
        accept = threading.Thread(target=self._accept, daemon=True)
        accept.start()
        self._threads.append(accept)

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return  # closed
            with self._lock:
                self._conns.append(conn)
            t = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            t.start()
            with self._lock:
                self._threads.append(t)

    def _serve(self, conn: socket.socket) -> None:
        try:
            while True:
                head = _recv_exact(conn, 4)
                if head is None:
                    return
                body = _recv_exact(conn, struct.unpack("<I", head)[0])
                if body is None:
                    return
                with self._lock:
                    self.frames.append(body)
                env = pb.Envelope()
                env.ParseFromString(body)
                answer = self.answer(env)
                if isinstance(answer, (list, tuple)):
                    out = b"".join(frame(e) for e in answer)
                    if out:
                        conn.sendall(out)
                else:
                    for e in answer:   # a generator: each frame sent as it comes, without end
                        conn.sendall(frame(e))
        except (ConnectionResetError, BrokenPipeError):
            return  # the client went away
        except BaseException as exc:  # reported by close()
            self.errors.append(exc)
        finally:
            conn.close()

    def requests(self, kind: str) -> list[bytes]:
        """The received frame bodies whose Envelope body is `kind` (e.g. "raycast")."""
        out = []
        for body in list(self.frames):
            env = pb.Envelope()
            env.ParseFromString(body)
            if env.WhichOneof("body") == kind:
                out.append(body)
        return out

    def close(self) -> None:
        try:
            self._listener.shutdown(socket.SHUT_RDWR)   # wakes the thread in accept()
        except OSError:
            pass
        self._listener.close()
        with self._lock:
            for conn in self._conns:
                try:
                    conn.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        for t in list(self._threads):
            t.join(timeout=10)
        if self.errors:
            raise self.errors[0]

    def __enter__(self) -> "FakeDaemon":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
