# SPDX-License-Identifier: MIT
"""Frame codec of the sensim protocol: each frame is a 4-byte little-endian length followed by
that many bytes (one serialized Envelope). Pure functions, an incremental decoder that can
receive a large frame straight into its own buffer, and the assembly of a request whose bulk
arrays are sent from the caller's buffers without copying them."""

from __future__ import annotations

import socket
import struct
import sys
from typing import Sequence

import numpy as np

HEADER = struct.Struct("<I")
HEADER_SIZE = HEADER.size
MAX_LENGTH = 0xFFFFFFFF
# Largest frame this client accepts from the daemon unless told otherwise (point clouds can be
# large; the daemon bounds what it sends by its own limits).
DEFAULT_MAX_FRAME_BYTES = 256 << 20
# A frame at least this large is received into a buffer of its own size (no re-copying).
LARGE_FRAME = 1 << 20
_RECV_BYTES = 1 << 16
# Received large frames whose buffers are kept for the next ones once nothing refers to them
# (a buffer used again costs no page faults), and the largest buffer kept.
KEEP_BUFFERS = 2
KEEP_BUFFER_BYTES = 64 << 20


class FrameTooLarge(ValueError):
    """A length prefix announces more bytes than the configured maximum."""

    def __init__(self, length: int, limit: int):
        super().__init__(f"frame of {length} bytes exceeds max_frame_bytes {limit}")
        self.length = length
        self.limit = limit


def encode(payload: bytes) -> bytes:
    """Return payload with its length prefix."""
    if len(payload) > MAX_LENGTH:
        raise ValueError(f"payload of {len(payload)} bytes does not fit a u32 length prefix")
    return HEADER.pack(len(payload)) + payload


def varint(value: int) -> bytes:
    """Protocol-buffers base-128 varint of a non-negative integer."""
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _length_delimited(number: int, length: int) -> bytes:
    """Tag and length of a length-delimited field (bytes or message) of `length` bytes."""
    return varint(number << 3 | 2) + varint(length)


def bulk_frame(envelope: bytes, body_number: int, body: bytes,
               arrays: Sequence[tuple[int, memoryview]], padding: int = 0) -> list:
    """The buffers of one frame, in order, for a scatter-gather send: an Envelope serialized
    without its body (`envelope`, e.g. just its id), then its body field `body_number` holding
    the body's serialized scalar fields (`body`) followed by the `bytes` fields `arrays`, each
    (field number, buffer) sent from the caller's buffer as it is. Protocol buffers read fields
    in any order, so this is the Envelope with those fields set.

    With `padding` (the number of a bytes field of the body whose value means nothing, such as
    Raycast.padding), a field of zeros goes before each array that would otherwise start off a
    multiple of 8 bytes from the frame's start (its length prefix included), so that a reader
    holding the frame in an aligned buffer can use the arrays where they lie."""
    heads = [_length_delimited(number, data.nbytes) for number, data in arrays]
    inner = len(body) + sum(len(h) + data.nbytes for h, (_, data) in zip(heads, arrays))
    pads = [b""] * len(arrays)
    if padding:
        pads = _paddings(len(envelope), body_number, len(body), padding, heads, arrays)
        inner += sum(len(p) for p in pads)
    prefix = envelope + _length_delimited(body_number, inner) + body
    total = len(prefix) + inner - len(body)
    if total > MAX_LENGTH:
        raise ValueError(f"payload of {total} bytes does not fit a u32 length prefix")
    parts: list = [HEADER.pack(total) + prefix]
    for pad, head, (_, data) in zip(pads, heads, arrays):
        parts.append(pad + head if pad else head)
        parts.append(data)
    return parts


def _paddings(envelope: int, body_number: int, body: int, number: int, heads: list,
              arrays: Sequence[tuple[int, memoryview]]) -> list[bytes]:
    """The padding fields (field `number`, zeros) that bulk_frame puts before each array so
    that it starts at a multiple of 8 bytes of the frame. Where the body starts depends on the
    varint of the body's length, which the paddings change: each guess of that varint's size is
    tried from the smallest, and when the body comes out too short for the guess, the first
    padding grows by 8 bytes (alignment kept) until it fits; so every array is aligned."""
    tag = varint(body_number << 3 | 2)
    unpadded = body + sum(len(h) + data.nbytes for h, (_, data) in zip(heads, arrays))
    size = len(varint(unpadded))
    key = len(varint(number << 3 | 2))
    while True:
        at = HEADER_SIZE + envelope + len(tag) + size + body
        lengths = []  # each padding's p, -1 for none
        for head, (_, data) in zip(heads, arrays):
            # a padding field is its key, its length p (< 128, one byte) and p zeros:
            # key + 1 + p = shift modulo 8 (an empty array needs none)
            shift = -(at + len(head)) % 8 if data.nbytes else 0
            p = (shift - 1 - key) % 8 if shift else -1
            lengths.append(p)
            at += (1 + key + p if p >= 0 else 0) + len(head) + data.nbytes
        total = unpadded + sum(1 + key + p for p in lengths if p >= 0)
        if len(varint(total)) > size:
            size += 1  # a longer varint: the body starts later, the paddings change
            continue
        while len(varint(total)) < size:
            # the guessed varint is too long for this body: 8 more bytes of padding before the
            # first array (a padding field of 8 when it had none) until the body needs it
            if lengths[0] >= 0:
                lengths[0] += 8
                total += 8
            else:
                lengths[0] = (-1 - key) % 8
                total += key + 1 + lengths[0]
        return [varint(number << 3 | 2) + varint(p) + bytes(p) if p >= 0 else b""
                for p in lengths]


def _read_varint(buf, pos: int, end: int) -> tuple[int, int]:
    value = shift = 0
    while pos < end:
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
    raise ValueError("truncated varint")


def _fields(buf, pos: int, end: int):
    """The top-level fields of buf[pos:end]: (start, number, head, value, next) for each:
    head the offset after the tag, value that of a length-delimited field's bytes (None for
    the other wire types), next the offset after the field (past end when it is truncated).
    Raises ValueError on an unknown wire type."""
    while pos < end:
        start = pos
        tag, head = _read_varint(buf, pos, end)
        kind = tag & 7
        value = None
        if kind == 0:
            _, pos = _read_varint(buf, head, end)
        elif kind == 1:
            pos = head + 8
        elif kind == 5:
            pos = head + 4
        elif kind == 2:
            length, value = _read_varint(buf, head, end)
            pos = value + length
        else:
            raise ValueError(f"unsupported wire type {kind}")
        yield start, tag >> 3, head, value, pos


def find_field(buf, path: Sequence[int]) -> tuple[int, int] | None:
    """Offset and length, in the serialized message buf, of the length-delimited field reached
    through path (field numbers, outermost first; the last occurrence of each); None when it
    is absent. Only the top-level fields of each level are read, so a large bytes field is
    found without being copied."""
    pos, end = 0, len(buf)
    for number in path:
        found = None
        for _, num, _, value, nxt in _fields(buf, pos, end):
            if value is not None and num == number:
                found = (value, nxt)
        if found is None or found[1] > end:
            return None
        pos, end = found
    return pos, end - pos


def without_field(buf, path: Sequence[int]) -> bytes | None:
    """The serialized message buf with the length-delimited field reached through path (field
    numbers, outermost first) left out, the messages around it re-sized; None when buf holds no
    such field. Only the small fields beside the path are copied: a reply whose bulk array is
    read in place is parsed without copying that array."""
    out = _without(memoryview(buf).cast("B"), 0, len(buf), path)
    return None if out is None else bytes(out)


def _without(buf: memoryview, pos: int, end: int, path: Sequence[int]) -> bytearray | None:
    out = bytearray()
    found = False
    for start, number, head, value, nxt in _fields(buf, pos, end):
        if value is not None and nxt > end:
            raise ValueError("truncated field")
        if value is not None and number == path[0]:
            if len(path) == 1:
                found = True
                continue
            inner = _without(buf, value, nxt, path[1:])
            if inner is not None:
                found = True
                out += buf[start:head]
                out += varint(len(inner))
                out += inner
                continue
        out += buf[start:nxt]
    return out if found else None


def send_parts(sock: socket.socket, parts: list) -> None:
    """Send every buffer of parts in order (sendmsg, resumed after partial sends)."""
    views = [memoryview(p).cast("B") for p in parts if len(p)]
    while views:
        sent = sock.sendmsg(views[:512])
        while sent:
            if sent >= views[0].nbytes:
                sent -= views[0].nbytes
                views.pop(0)
            else:
                views[0] = views[0][sent:]
                sent = 0


class FrameDecoder:
    """Accumulates received bytes and yields whole frames, keeping any partial remainder.

    The length prefix is checked against ``max_frame_bytes`` before any byte of the body is
    buffered, so a hostile length cannot make the client allocate.
    """

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES):
        self.max_frame_bytes = max_frame_bytes
        self._buf = bytearray()
        self._large: memoryview | None = None  # body of a large frame being received
        self._have = 0                         # bytes of it received
        self._kept: list[np.ndarray] = []      # buffers of earlier large frames

    def __len__(self) -> int:
        return len(self._buf) + self._have

    def feed(self, data: bytes) -> None:
        if self._large is not None:
            take = min(len(data), len(self._large) - self._have)
            self._large[self._have:self._have + take] = data[:take]
            self._have += take
            data = data[take:]  # the frames after the large one
        self._buf += data

    def recv_from(self, sock: socket.socket) -> int:
        """Receive once from sock (blocking as sock is set): a large frame goes straight into
        a buffer of its own size. Returns the bytes received, 0 at the end of the stream."""
        if self._large is None and len(self._buf) >= HEADER_SIZE:
            self._start_large()
        if self._large is not None:
            n = sock.recv_into(memoryview(self._large)[self._have:])
            self._have += n
            return n
        data = sock.recv(_RECV_BYTES)
        self.feed(data)
        return len(data)

    def _start_large(self) -> None:
        """Move a large frame's first bytes to a buffer of the frame's size."""
        (length,) = HEADER.unpack_from(self._buf)
        have = len(self._buf) - HEADER_SIZE
        if length < LARGE_FRAME or length > self.max_frame_bytes or have >= length:
            return  # next_frame returns it or refuses it
        self._large = memoryview(self._buffer(length))[:length]
        self._large[:have] = self._buf[HEADER_SIZE:]
        self._have = have
        self._buf.clear()

    def _buffer(self, length: int) -> np.ndarray:
        """A buffer of at least length bytes for a large frame: a kept one that nothing refers
        to any more (the frames handed out from it are gone), else a new one, kept in place
        of a smaller one."""
        for i in range(len(self._kept)):
            # references: the list's and getrefcount's argument; any view of a frame received
            # into the buffer (a memoryview, an array from np.frombuffer) adds one
            if self._kept[i].nbytes >= length and sys.getrefcount(self._kept[i]) == 2:
                return self._kept[i]
        # memory that is not cleared first: recv_into writes every byte once
        buf = np.empty(length, dtype=np.uint8)
        if length <= KEEP_BUFFER_BYTES:
            if len(self._kept) < KEEP_BUFFERS:
                self._kept.append(buf)
            else:
                free = [i for i in range(len(self._kept)) if sys.getrefcount(self._kept[i]) == 2]
                if free:
                    self._kept[min(free, key=lambda i: self._kept[i].nbytes)] = buf
        return buf

    def next_frame(self) -> bytes | memoryview | None:
        """Return the next complete frame body, or None if more bytes are needed. A large frame
        comes back as a writable memoryview of the buffer it was received into (no copy)."""
        if self._large is not None:
            if self._have < len(self._large):
                return None
            body, self._large, self._have = self._large, None, 0
            return body
        if len(self._buf) < HEADER_SIZE:
            return None
        (length,) = HEADER.unpack_from(self._buf)
        if length > self.max_frame_bytes:
            raise FrameTooLarge(length, self.max_frame_bytes)
        end = HEADER_SIZE + length
        if len(self._buf) < end:
            return None
        body = bytes(self._buf[HEADER_SIZE:end])
        del self._buf[:end]
        return body

    def clear(self) -> None:
        self._buf.clear()
        self._large = None
        self._have = 0
        self._kept.clear()
