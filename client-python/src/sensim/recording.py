# SPDX-License-Identifier: MIT
"""sensim recordings (``.srec``): the SensorData messages of a run exactly as the daemon sent
them (point clouds in their encoding), for ``sensim export`` and ``sensim plot`` and any
later decoding.

Byte format (little-endian):

    8 bytes   magic b"SNSMREC1"
    4 bytes   n, then n bytes of UTF-8 JSON: the recording's header (see RecordingWriter)
    records:  4 bytes m, then m bytes of one serialized sensim.v1.SensorData (its `sequence`
              field holds the subscription's frame number)

A recording cut short (the recorder killed) reads up to its last whole record
(``Recording.truncated`` is then True).
"""

from __future__ import annotations

import json
import os
import struct
from typing import Any, BinaryIO, Iterator, Optional, Union

from ._proto import pb
from .outputs import SensorOutput, decode

__all__ = ["MAGIC", "RecordingWriter", "Recording", "open_recording"]

MAGIC = b"SNSMREC1"
_LEN = struct.Struct("<I")

PathLike = Union[str, "os.PathLike[str]"]


class RecordingWriter:
    """Writes a recording. header: JSON-serialisable facts about the run (the recorder stores
    host, environment, sensors, encoding and start time)."""

    def __init__(self, path: PathLike, header: Optional[dict] = None):
        self.path = os.fspath(path)
        self.records = 0
        self.bytes = 0
        self._f: Optional[BinaryIO] = open(self.path, "wb")
        head = json.dumps({"format": "sensim recording", "version": 1, **(header or {})},
                          sort_keys=True).encode()
        self._f.write(MAGIC + _LEN.pack(len(head)) + head)

    def write(self, data: Any) -> None:
        """Append one SensorData (a message, or its serialized bytes)."""
        if self._f is None:
            raise ValueError("RecordingWriter: closed")
        raw = data if isinstance(data, (bytes, bytearray, memoryview)) \
            else data.SerializeToString()
        self._f.write(_LEN.pack(len(raw)))
        self._f.write(raw)
        self.records += 1
        self.bytes += 4 + len(raw)

    def flush(self) -> None:
        if self._f is not None:
            self._f.flush()

    def close(self) -> None:
        if self._f is not None:
            self._f.close()
            self._f = None

    def __enter__(self) -> "RecordingWriter":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class Recording:
    """A recording opened for reading: ``header`` (dict), then its records in order through
    ``messages()`` (SensorData) or ``outputs()`` (decoded SensorOutput)."""

    def __init__(self, path: PathLike):
        self.path = os.fspath(path)
        self.truncated = False
        with open(self.path, "rb") as f:
            magic = f.read(len(MAGIC))
            if magic != MAGIC:
                raise ValueError(f"{self.path}: not a sensim recording (magic {magic!r}, "
                                 f"expected {MAGIC!r})")
            n = f.read(4)
            if len(n) != 4:
                raise ValueError(f"{self.path}: recording header cut short")
            (length,) = _LEN.unpack(n)
            raw = f.read(length)
            if len(raw) != length:
                raise ValueError(f"{self.path}: recording header cut short")
            try:
                self.header = json.loads(raw)
            except ValueError as exc:
                raise ValueError(f"{self.path}: recording header is not JSON: {exc}") from None
            self._start = f.tell()

    def messages(self) -> Iterator[Any]:
        """The SensorData messages, in recording order."""
        with open(self.path, "rb") as f:
            f.seek(self._start)
            index = 0
            while True:
                n = f.read(4)
                if not n:
                    return
                if len(n) < 4:
                    self.truncated = True
                    return
                (length,) = _LEN.unpack(n)
                raw = f.read(length)
                if len(raw) < length:
                    self.truncated = True
                    return
                msg = pb.SensorData()
                try:
                    msg.ParseFromString(raw)
                except Exception as exc:
                    raise ValueError(f"{self.path}: record {index} is not a SensorData "
                                     f"({exc})") from None
                index += 1
                yield msg

    def outputs(self, sensor_ids: Optional[set[int]] = None) -> Iterator[SensorOutput]:
        """The decoded records (of the sensors in sensor_ids, when given), in order."""
        for msg in self.messages():
            if sensor_ids is None or msg.sensor_id in sensor_ids:
                yield decode(msg)

    def __iter__(self) -> Iterator[SensorOutput]:
        return self.outputs()


def open_recording(path: PathLike) -> Recording:
    """Open a .srec recording for reading (ValueError when it is not one)."""
    return Recording(path)
