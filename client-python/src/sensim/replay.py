# SPDX-License-Identifier: MIT
"""Play a recording of ``sensimd --record FILE`` against a daemon and hash what it gives back.

    python -m sensim.replay FILE --connect HOST:PORT [--token T] [--save HASHES] [--compare HASHES]

Each recorded connection is opened again (same environment, role and client name; the token,
never recorded, is given here) and its requests are sent in the recorded order. Requests of one
connection are pipelined; before a request of another connection, every reply still owed is
awaited, so that each environment's queue takes the requests in the recorded order, which is what
determines the outputs. Printed: one line per sensor and kind of output with the number of
records and a SHA-256 of them (StepDone outputs per environment and sensor; pushed SensorData per
connection and sensor; raycast hits per connection). ``--save`` writes those lines, ``--compare``
checks them against a saved file (exit 1, the differing lines printed). The file format is
docs/recording.md.
"""

from __future__ import annotations

import argparse
import hashlib
import mmap
import os
import struct
import sys
import time
from typing import Any, Iterator, Optional, Sequence

from . import errors
from ._proto import pb
from .client import Client

MAGIC = b"SENSIMRC"
VERSION = 1
HELLO, REQUEST, CLOSE, END = 1, 2, 3, 4
_HEAD = struct.Struct("<IBBHQQ")      # length, type, role, name length, session, index

__all__ = ["read_recording", "Hasher", "replay", "main"]


def read_recording(path: str) -> Iterator[tuple[int, int, int, str, bytes]]:
    """The records of a recording: (type, role, session, environment, payload). Raises
    ValueError naming what is wrong with a file that is not a recording or is cut short: the
    magic, the version, and per record (by its byte offset) its length, type and role. The
    file is mapped, not read: a record's payload is copied when it is reached."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size < 16:
            raise ValueError(f"{path}: not a sensimd recording (no {MAGIC.decode()} header)")
        data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    with data:
        if data[:8] != MAGIC:
            raise ValueError(f"{path}: not a sensimd recording (no {MAGIC.decode()} header)")
        (version,) = struct.unpack_from("<I", data, 8)
        if version != VERSION:
            raise ValueError(f"{path}: recording version {version}, this tool reads {VERSION}")
        pos = 16
        while pos < size:
            if pos + _HEAD.size > size:
                raise ValueError(f"{path}: cut short inside the record at byte {pos}")
            length, kind, role, nlen, session, _index = _HEAD.unpack_from(data, pos)
            end = pos + 4 + length
            if length < _HEAD.size - 4 + nlen or end > size:
                raise ValueError(f"{path}: record at byte {pos} has a bad length {length}")
            if kind not in (HELLO, REQUEST, CLOSE, END):
                raise ValueError(f"{path}: record at byte {pos} has an unknown type {kind} "
                                 "(1 HELLO, 2 REQUEST, 3 CLOSE, 4 END)")
            if role not in (0, 1):
                raise ValueError(f"{path}: record at byte {pos} has an unknown role {role} "
                                 "(0 controller, 1 observer)")
            body = pos + _HEAD.size
            env = data[body:body + nlen].decode("utf-8", "replace")
            yield kind, role, session, env, data[body + nlen:end]
            pos = end


def _request(path: str, payload: bytes) -> tuple[str, Any]:
    """The request body of a recorded Envelope: (its field name, its message). ValueError
    when the bytes are not an Envelope carrying a request."""
    try:
        env = pb.Envelope.FromString(payload)
    except Exception as exc:     # google.protobuf's DecodeError
        raise ValueError(f"{path}: a recorded request is not an Envelope ({exc})") from None
    body = env.WhichOneof("body")
    if body is None:
        raise ValueError(f"{path}: a recorded request's Envelope carries no request")
    return body, getattr(env, body)


class Hasher:
    """SHA-256 of outputs by key, over each record's deterministic serialisation (a pushed
    record's `sequence` cleared: it counts frames of one subscription)."""

    def __init__(self) -> None:
        self._h: dict[str, Any] = {}
        self.count: dict[str, int] = {}

    def add(self, key: str, message: Any) -> None:
        h = self._h.get(key)
        if h is None:
            h = self._h[key] = hashlib.sha256()
            self.count[key] = 0
        h.update(message.SerializeToString(deterministic=True))
        self.count[key] += 1

    def add_sensor_data(self, key: str, data: Any) -> None:
        if data.HasField("sequence"):
            data = type(data).FromString(data.SerializeToString())
            data.ClearField("sequence")
        self.add(f"{key}/{data.sensor_id}", data)

    def lines(self) -> list[str]:
        return [f"{k} {self.count[k]} {self._h[k].hexdigest()}" for k in sorted(self._h)]


def _split(address: str) -> tuple[str, int]:
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"--connect: expected HOST:PORT, got {address!r}")
    return host.strip("[]") or "127.0.0.1", int(port)


def replay(path: str, host: str, port: int, token: Optional[str] = None,
           timeout: float = 60.0) -> Hasher:
    """Play the recording at path against host:port; returns the hashes of the outputs."""
    hashes = Hasher()
    conns: dict[int, tuple[Client, int]] = {}          # recorded session -> (client, number)
    pending: dict[int, list[tuple[int, str]]] = {}     # session -> [(request id, body)]
    env_of: dict[int, str] = {}
    subs: dict[str, set[tuple[int, int]]] = {}         # environment -> {(session, sensor)}
    expected: dict[tuple[int, int], int] = {}          # (session, sensor) -> pushed records due
    pushed: dict[tuple[int, int], int] = {}
    last = None

    def settle(session: int) -> None:
        client, n = conns[session]
        for rid, body in pending.pop(session, []):
            try:
                env = client.wait_reply(rid, timeout=timeout)
            except errors.SensimError as exc:
                hashes.add(f"conn{n}/refused", pb.Status(code=exc.code, message=exc.message))
                continue
            which = env.WhichOneof("body")
            if which == "step_done":
                for out in env.step_done.outputs:
                    hashes.add_sensor_data(f"{env_of[session]}/step", out)
                    for sess, sensor in subs.get(env_of[session], ()):
                        if sensor == out.sensor_id:
                            expected[(sess, sensor)] = expected.get((sess, sensor), 0) + 1
            elif which == "raycast_result":
                hashes.add(f"conn{n}/raycast", env.raycast_result)
            elif body == "subscribe":
                subs.setdefault(env_of[session], set()).add(
                    (session, _last_sensor[(session, rid)]))
            elif body == "unsubscribe":
                subs.get(env_of[session], set()).discard((session, _last_sensor[(session, rid)]))

    _last_sensor: dict[tuple[int, int], int] = {}

    def drain(session: int, wait: float) -> None:
        client, n = conns[session]
        while True:
            data = client.next_sensor_data(timeout=wait)
            if data is None:
                return
            if data.end_of_stream:
                continue
            pushed[(session, data.sensor_id)] = pushed.get((session, data.sensor_id), 0) + 1
            hashes.add_sensor_data(f"conn{n}/pushed", data)
            wait = 0.0

    try:
        for kind, role, session, env_name, payload in read_recording(path):
            if kind == HELLO:
                client = Client(host, port, environment=env_name, token=token,
                                role="observer" if role else "controller",
                                client_name=payload.decode("utf-8", "replace") or "replay",
                                timeout=timeout)
                conns[session] = (client, len(conns) + 1)
                env_of[session] = env_name
            elif kind == REQUEST:
                if session not in conns:
                    raise ValueError(f"{path}: a request of session {session} before its hello")
                if last is not None and last != session and last in conns:
                    settle(last)
                body, request = _request(path, payload)
                client = conns[session][0]
                rid = client.send_request(body, request)
                if body in ("subscribe", "unsubscribe"):
                    _last_sensor[(session, rid)] = request.sensor_id
                pending.setdefault(session, []).append((rid, body))
                last = session
            elif kind == CLOSE:
                if session in conns:
                    settle(session)
            elif kind == END:
                print("replay: the recording was stopped by the daemon (a limit or a write "
                      "error): what follows it was not recorded", file=sys.stderr)
                break
        for session in list(pending):
            settle(session)
        # pushed records: every one the steps owe each subscription, waited for
        deadline = time.monotonic() + timeout
        for session in conns:
            drain(session, 0.0)
        while any(pushed.get(k, 0) < v for k, v in expected.items()):
            if time.monotonic() > deadline:
                raise errors.Timeout("pushed records still missing after the replay")
            for session in {k[0] for k, v in expected.items() if pushed.get(k, 0) < v}:
                drain(session, 0.05)
    finally:
        for client, _ in conns.values():
            client.close()
    return hashes


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sensim.replay", description=__doc__.split(
        "\n\n")[0])
    ap.add_argument("recording", help="a file written by sensimd --record")
    ap.add_argument("--connect", required=True, metavar="HOST:PORT", help="the daemon")
    ap.add_argument("--token", default=None, help="the daemon's --token (never recorded)")
    ap.add_argument("--timeout", type=float, default=60.0, help="s per reply (default 60)")
    ap.add_argument("--save", metavar="HASHES", help="write the hash lines to this file")
    ap.add_argument("--compare", metavar="HASHES", help="compare with saved hash lines")
    args = ap.parse_args(argv)
    if not 0 < args.timeout < 1e9:     # NaN too
        print(f"replay: --timeout must be more than 0 s, got {args.timeout}", file=sys.stderr)
        return 2
    try:
        host, port = _split(args.connect)
        hashes = replay(args.recording, host, port, args.token, args.timeout)
    except (ValueError, OSError, errors.SensimError) as exc:
        print(f"replay: {exc}", file=sys.stderr)
        return 2
    lines = hashes.lines()
    for line in lines:
        print(line)
    try:
        if args.save:
            with open(args.save, "w") as f:
                f.write("".join(line + "\n" for line in lines))
        saved = []
        if args.compare:
            with open(args.compare) as f:
                saved = [line.rstrip("\n") for line in f if line.strip()]
    except (OSError, UnicodeDecodeError) as exc:
        print(f"replay: {exc}", file=sys.stderr)
        return 2
    if args.compare:
        if saved != lines:
            for line in sorted(set(saved) ^ set(lines)):
                print(("-" if line in saved else "+") + line, file=sys.stderr)
            print("replay: the outputs differ from the saved hashes", file=sys.stderr)
            return 1
        print("replay: identical to the saved hashes", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
