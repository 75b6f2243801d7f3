# SPDX-License-Identifier: MIT
"""Exceptions of the sensim client: one class per sensim.v1.StatusCode, plus client-side ones.

The numeric codes are the same as the C client's ``sensim_status_t``: the wire codes below 100
and the client codes (``EIO`` 101, ``ECLOSED`` 102, ``ETIMEDOUT`` 103, ``EPROTO`` 104) above, so
both clients share one error vocabulary.
"""

from __future__ import annotations

__all__ = [
    "SensimError",
    "InvalidArgument",
    "DeadlineExceeded",
    "NotFound",
    "AlreadyExists",
    "ResourceExhausted",
    "FailedPrecondition",
    "Unimplemented",
    "Internal",
    "Unauthenticated",
    "UnknownStatus",
    "TransportError",
    "ConnectionClosed",
    "Timeout",
    "ProtocolError",
    "error_for",
]


class SensimError(Exception):
    """Base of every sensim error. ``code`` is the status number, ``message`` the detail text
    (for daemon errors, the daemon's message naming the offending field)."""

    code: int = -1
    name: str = "UNKNOWN"

    def __init__(self, message: str = "", code: int | None = None, request_id: int | None = None):
        if code is not None:
            self.code = code
        self.message = message
        self.request_id = request_id
        super().__init__(f"{self.name}: {message}" if message else self.name)


class InvalidArgument(SensimError):
    """A field is malformed or out of range; the message names it."""
    code, name = 3, "INVALID_ARGUMENT"


class DeadlineExceeded(SensimError):
    """The request ran out of its time (the daemon's --max-request-seconds) and was stopped;
    it changed nothing. Also the status of a connection closed by a handshake, idle or I/O
    deadline."""
    code, name = 4, "DEADLINE_EXCEEDED"


class NotFound(SensimError):
    """An id does not exist."""
    code, name = 5, "NOT_FOUND"


class AlreadyExists(SensimError):
    """An id is taken."""
    code, name = 6, "ALREADY_EXISTS"


class ResourceExhausted(SensimError):
    """A limit was hit (frame bytes, counts, clients, queue)."""
    code, name = 8, "RESOURCE_EXHAUSTED"


class FailedPrecondition(SensimError):
    """The request is valid but not now (no Hello, time not increasing, wrong version)."""
    code, name = 9, "FAILED_PRECONDITION"


class Unimplemented(SensimError):
    """The message is defined by the protocol but not served by this daemon yet."""
    code, name = 12, "UNIMPLEMENTED"


class Internal(SensimError):
    """A bug or a backend failure inside the daemon."""
    code, name = 13, "INTERNAL"


class Unauthenticated(SensimError):
    """The token is missing or wrong."""
    code, name = 16, "UNAUTHENTICATED"


class UnknownStatus(SensimError):
    """A status code this client does not know (a newer daemon)."""
    name = "UNKNOWN"


class TransportError(SensimError, OSError):
    """The connection failed (socket error); the client is closed."""
    code, name = 101, "EIO"


class ConnectionClosed(TransportError, ConnectionError):
    """The daemon closed the connection, or the client was closed."""
    code, name = 102, "ECLOSED"


class Timeout(TransportError, TimeoutError):
    """No complete reply within the client's timeout."""
    code, name = 103, "ETIMEDOUT"


class ProtocolError(TransportError):
    """The daemon sent something this client cannot decode or did not expect: a frame it
    cannot parse or that passes max_frame_bytes (the connection is closed), an unexpected
    reply, or a record that does not decode (point_cloud_to_numpy, outputs: a malformed field
    layout, sizes that disagree, corrupt or oversized compressed data; the message names the
    field, and nothing else changes)."""
    code, name = 104, "EPROTO"


_BY_CODE = {
    cls.code: cls
    for cls in (InvalidArgument, DeadlineExceeded, NotFound, AlreadyExists, ResourceExhausted, FailedPrecondition,
                Unimplemented, Internal, Unauthenticated)
}


def error_for(code: int, message: str = "", request_id: int | None = None) -> SensimError:
    """Return the exception instance for a non-OK status code."""
    cls = _BY_CODE.get(int(code))
    if cls is None:
        return UnknownStatus(message, code=int(code), request_id=request_id)
    return cls(message, request_id=request_id)
