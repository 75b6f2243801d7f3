# SPDX-License-Identifier: MIT
"""The messages of the ``foxglove.websocket.v1`` protocol that the bridge speaks, built and
parsed without any I/O.

Server to viewer: JSON text messages (``serverInfo``, ``status``, ``advertise``,
``unadvertise``) and binary ones: Message Data (opcode 0x01, uint32 subscription id, uint64
receive timestamp in ns, payload) and Time (0x02, uint64 ns); integers little-endian. Viewer
to server: ``subscribe`` and ``unsubscribe``. The bridge declares the ``time`` capability only:
viewers cannot publish, call services or set parameters, and are told so in a status message
when they try.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from typing import Any

__all__ = ["SUBPROTOCOL", "INFO", "WARNING", "ERROR", "Channel", "ClientError", "server_info",
           "status", "advertise", "unadvertise", "message_data_header", "time_message",
           "parse_client_text", "MESSAGE_DATA_HEADER_BYTES"]

SUBPROTOCOL = "foxglove.websocket.v1"
INFO, WARNING, ERROR = 0, 1, 2                  # status levels
_OP_MESSAGE_DATA, _OP_TIME = 0x01, 0x02          # server binary opcodes
_MESSAGE_DATA = struct.Struct("<BIQ")
_TIME = struct.Struct("<BQ")
MESSAGE_DATA_HEADER_BYTES = _MESSAGE_DATA.size   # 13
_U32_MAX = 2**32 - 1
_U64_MAX = 2**64 - 1


@dataclass(frozen=True)
class Channel:
    """One advertised channel: its id, topic and how its messages are encoded."""

    id: int
    topic: str
    encoding: str           # "ros1" or "json"
    schema_name: str
    schema: str             # ros1msg text, or a JSON schema
    schema_encoding: str    # "ros1msg" or "jsonschema"

    def to_json(self) -> dict:
        return {"id": self.id, "topic": self.topic, "encoding": self.encoding,
                "schemaName": self.schema_name, "schema": self.schema,
                "schemaEncoding": self.schema_encoding}


class ClientError(ValueError):
    """A viewer's message that the bridge refuses; the text names the field."""


def _dump(obj: dict) -> str:
    return json.dumps(obj, separators=(",", ":"))


def server_info(name: str, session_id: str, metadata: dict[str, str]) -> str:
    return _dump({"op": "serverInfo", "name": name, "capabilities": ["time"],
                  "metadata": metadata, "sessionId": session_id})


def status(level: int, message: str) -> str:
    return _dump({"op": "status", "level": level, "message": message})


def advertise(channels: list[Channel]) -> str:
    return _dump({"op": "advertise", "channels": [c.to_json() for c in channels]})


def unadvertise(channel_ids: list[int]) -> str:
    return _dump({"op": "unadvertise", "channelIds": list(channel_ids)})


def message_data_header(subscription_id: int, timestamp_ns: int) -> bytes:
    """The 13 bytes that precede a payload in a Message Data message."""
    return _MESSAGE_DATA.pack(_OP_MESSAGE_DATA, subscription_id, timestamp_ns)


def time_message(timestamp_ns: int) -> bytes:
    return _TIME.pack(_OP_TIME, timestamp_ns)


def _uint32(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _U32_MAX:
        raise ClientError(f"{what}: expected an integer in [0, {_U32_MAX}], got {value!r}")
    return value


def _list(obj: dict, key: str, op: str) -> list:
    value = obj.get(key)
    if not isinstance(value, list):
        raise ClientError(f"{op}.{key}: expected an array, got {value!r}")
    return value


def parse_client_text(text: str) -> tuple[str, list]:
    """Parse a viewer's JSON message. Returns ("subscribe", [(subscription id, channel id)])
    or ("unsubscribe", [subscription id]); raises ClientError naming the field otherwise
    (malformed JSON, an op the bridge does not serve, a missing or out-of-range field)."""
    try:
        obj = json.loads(text)
    except ValueError as exc:
        raise ClientError(f"message: not JSON ({exc})") from None
    if not isinstance(obj, dict):
        raise ClientError("message: expected a JSON object")
    op = obj.get("op")
    if op == "subscribe":
        subs = []
        for i, s in enumerate(_list(obj, "subscriptions", op)):
            what = f"subscribe.subscriptions[{i}]"
            if not isinstance(s, dict):
                raise ClientError(f"{what}: expected an object")
            subs.append((_uint32(s.get("id"), what + ".id"),
                         _uint32(s.get("channelId"), what + ".channelId")))
        return op, subs
    if op == "unsubscribe":
        ids = [_uint32(v, f"unsubscribe.subscriptionIds[{i}]")
               for i, v in enumerate(_list(obj, "subscriptionIds", op))]
        return op, ids
    if not isinstance(op, str):
        raise ClientError(f"op: expected a string, got {op!r}")
    raise ClientError(f"op: {op!r} is not served by this bridge (it serves subscribe and "
                      "unsubscribe; capabilities: time)")
