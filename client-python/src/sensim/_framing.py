# SPDX-License-Identifier: MIT
"""Frame codec of the sensim protocol: each frame is a 4-byte little-endian length followed by
that many bytes (one serialized Envelope). Pure functions and an incremental decoder; no I/O."""

from __future__ import annotations

import struct

HEADER = struct.Struct("<I")
HEADER_SIZE = HEADER.size
MAX_LENGTH = 0xFFFFFFFF
# Largest frame this client accepts from the daemon unless told otherwise (point clouds can be
# large; the daemon bounds what it sends by its own limits).
DEFAULT_MAX_FRAME_BYTES = 256 << 20


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


class FrameDecoder:
    """Accumulates received bytes and yields whole frames, keeping any partial remainder.

    The length prefix is checked against ``max_frame_bytes`` before any byte of the body is
    buffered, so a hostile length cannot make the client allocate.
    """

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES):
        self.max_frame_bytes = max_frame_bytes
        self._buf = bytearray()

    def __len__(self) -> int:
        return len(self._buf)

    def feed(self, data: bytes) -> None:
        self._buf += data

    def next_frame(self) -> bytes | None:
        """Return the next complete frame body, or None if more bytes are needed."""
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
