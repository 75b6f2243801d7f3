# SPDX-License-Identifier: MIT
"""sensim recordings (``.srec``): the SensorData messages of a run exactly as the daemon sent
them (point clouds in their encoding), for ``sensim export`` and ``sensim plot`` and any
later decoding.

Byte format (little-endian):

    8 bytes   magic b"SNSMREC1"
    4 bytes   n, then n bytes of UTF-8 JSON: the recording's header (see RecordingWriter)
    records:  4 bytes m, then m bytes of one serialized sensim.v1.SensorData (its `sequence`
              field holds the subscription's frame number)

The header holds "format": "sensim recording" and "version": 1; a reader refuses another
magic, format or version, a header past 1 MiB and a record longer than its max_record_bytes
(ValueError naming the file). A recording cut short (the recorder killed) reads up to its last
whole record (``Recording.truncated`` is then True).
"""

from __future__ import annotations

import json
import os
import struct
from typing import Any, BinaryIO, Iterator, Optional, Union

from . import errors
from ._framing import DEFAULT_MAX_FRAME_BYTES
from ._proto import pb
from .outputs import SensorOutput, decode

__all__ = ["MAGIC", "RecordingWriter", "Recording", "open_recording"]

MAGIC = b"SNSMREC1"
FORMAT = "sensim recording"     # the header's "format"
VERSION = 1                     # the header's "version": the one this module writes and reads
MAX_HEADER_BYTES = 1 << 20      # a header's JSON is a few hundred bytes
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
        head = json.dumps({**(header or {}), "format": FORMAT, "version": VERSION},
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
    ``messages()`` (SensorData) or ``outputs()`` (decoded SensorOutput).

    Every length is checked before anything is read: the header's against MAX_HEADER_BYTES,
    a record's against the bytes left in the file (past them: the file was cut short there,
    ``truncated``) and ``max_record_bytes`` (ValueError naming the file, the record and its
    byte offset), so a corrupt length costs no memory."""

    def __init__(self, path: PathLike, max_record_bytes: int = DEFAULT_MAX_FRAME_BYTES):
        self.path = os.fspath(path)
        self.max_record_bytes = int(max_record_bytes)
        self.truncated = False
        with open(self.path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            magic = f.read(len(MAGIC))
            if magic != MAGIC:
                raise ValueError(f"{self.path}: not a sensim recording (magic {magic!r}, "
                                 f"expected {MAGIC!r})")
            n = f.read(4)
            if len(n) != 4:
                raise ValueError(f"{self.path}: recording header cut short")
            (length,) = _LEN.unpack(n)
            if length > MAX_HEADER_BYTES:
                raise ValueError(f"{self.path}: recording header length {length} is past the "
                                 f"limit of {MAX_HEADER_BYTES} bytes (a corrupt file)")
            if length > size - f.tell():
                raise ValueError(f"{self.path}: recording header cut short")
            raw = f.read(length)
            try:
                header = json.loads(raw)
            except (ValueError, RecursionError) as exc:    # RecursionError: nested too deep
                raise ValueError(f"{self.path}: recording header is not JSON: {exc}") from None
            if not isinstance(header, dict):
                raise ValueError(f"{self.path}: recording header is not a JSON object")
            version = header.get("version", VERSION)
            if header.get("format", FORMAT) != FORMAT or version != VERSION:
                raise ValueError(f"{self.path}: recording format {header.get('format')!r} "
                                 f"version {version!r}; this reader reads {FORMAT!r} version "
                                 f"{VERSION}")
            self.header = header
            self._start = f.tell()

    def messages(self) -> Iterator[Any]:
        """The SensorData messages, in recording order."""
        with open(self.path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            f.seek(self._start)
            index = 0
            while True:
                offset = f.tell()
                n = f.read(4)
                if not n:
                    return
                if len(n) < 4:
                    self.truncated = True
                    return
                (length,) = _LEN.unpack(n)
                if length > size - offset - 4:
                    self.truncated = True       # cut short in this record
                    return
                if length > self.max_record_bytes:
                    raise ValueError(f"{self.path}: record {index} (byte {offset}) has a "
                                     f"length of {length} bytes, past the limit of "
                                     f"{self.max_record_bytes} (max_record_bytes)")
                raw = f.read(length)
                if len(raw) < length:
                    self.truncated = True
                    return
                msg = pb.SensorData()
                try:
                    msg.ParseFromString(raw)
                except Exception as exc:
                    raise ValueError(f"{self.path}: record {index} (byte {offset}) is not a "
                                     f"SensorData ({exc})") from None
                index += 1
                yield msg

    def outputs(self, sensor_ids: Optional[set[int]] = None) -> Iterator[SensorOutput]:
        """The decoded records (of the sensors in sensor_ids, when given), in order. A record
        that does not decode raises ValueError naming the file, the record and the field."""
        for index, msg in enumerate(self.messages()):
            if sensor_ids is None or msg.sensor_id in sensor_ids:
                try:
                    yield decode(msg, max(self.max_record_bytes, DEFAULT_MAX_FRAME_BYTES))
                except errors.ProtocolError as exc:
                    raise ValueError(f"{self.path}: record {index} (sensor {msg.sensor_id}) "
                                     f"does not decode: {exc.message}") from None

    def __iter__(self) -> Iterator[SensorOutput]:
        return self.outputs()


def open_recording(path: PathLike, max_record_bytes: int = DEFAULT_MAX_FRAME_BYTES
                   ) -> Recording:
    """Open a .srec recording for reading (ValueError when it is not one). max_record_bytes:
    the longest record accepted (the client's default frame bound; a recording made with a
    larger Client(max_frame_bytes=) is opened with that)."""
    return Recording(path, max_record_bytes)
