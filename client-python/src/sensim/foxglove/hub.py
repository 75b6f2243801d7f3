# SPDX-License-Identifier: MIT
"""The bridge's side facing the viewers: a WebSocket server speaking foxglove.websocket.v1 and,
on the same port, the static files of the built-in page. Everything here runs on the bridge's
asyncio loop thread, except the two methods marked as callable from any thread.

Each viewer has one queue of outgoing messages, bounded in bytes (``viewer_max_bytes``) and in
messages (``viewer_max_frames``), and a writer task that sends them in order. A viewer that
reads slower than data arrives loses the oldest queued data messages (counted per viewer);
control messages (advertise, status) are never dropped. The newest message always stays, so
a cloud larger than the bound still reaches a viewer that keeps up. A viewer holds at most its
queue bound, plus one message inside the WebSocket library and the socket's buffer; a viewer
that stops reading altogether is closed by the library's keepalive (no pong within 20 s of a
ping sent every 20 s).
"""

from __future__ import annotations

import asyncio
import collections
import http
import json
import logging
import pathlib
import threading
from typing import Any, Optional

import websockets
import websockets.exceptions

from . import protocol
from .protocol import Channel

__all__ = ["Hub", "WEB_DIR"]

log = logging.getLogger("sensim.foxglove")

WEB_DIR = pathlib.Path(__file__).resolve().parent / "web"
# the page's files: request path -> (file under WEB_DIR, content type)
_FILES = {
    "/": ("index.html", "text/html; charset=utf-8"),
    "/index.html": ("index.html", "text/html; charset=utf-8"),
    "/view.js": ("view.js", "text/javascript; charset=utf-8"),
    "/vendor/three.module.js": ("vendor/three.module.js", "text/javascript; charset=utf-8"),
    "/vendor/three.core.js": ("vendor/three.core.js", "text/javascript; charset=utf-8"),
    "/vendor/OrbitControls.js": ("vendor/OrbitControls.js", "text/javascript; charset=utf-8"),
    "/vendor/LICENSE": ("vendor/LICENSE", "text/plain; charset=utf-8"),
}
_MAX_VIEWER_MESSAGE = 1 << 20   # bytes; a viewer only sends small JSON requests
# A payload given in parts (a cloud: the points apart from the bytes around them) of at least
# this size goes out as the fragments of one WebSocket message: its points are shared by every
# viewer's queue and never joined into a copy. Smaller ones are joined (fewer frames).
_FRAGMENT_MIN = 64 << 10


def _message_data(subscription_id: int, timestamp_ns: int, payload: Any) -> tuple[Any, int]:
    """A Message Data message for one subscription and its size: bytes, or a list of
    fragments for a large payload in parts (bytes, or a tuple of bytes-like parts)."""
    head = protocol.message_data_header(subscription_id, timestamp_ns)
    if not isinstance(payload, tuple):
        return head + payload, len(head) + len(payload)
    size = len(head) + sum(memoryview(p).nbytes for p in payload)
    if size < _FRAGMENT_MIN:
        return head + b"".join(payload), size
    return [head + payload[0], *payload[1:]], size


class _Viewer:
    """One connected viewer: its subscriptions and its bounded outgoing queue."""

    def __init__(self, ws: Any, max_bytes: int, max_frames: int):
        self.ws = ws
        self.peer = "%s:%d" % ws.remote_address[:2] if ws.remote_address else "?"
        self.max_bytes = max_bytes
        self.max_frames = max_frames
        self.subs: dict[int, int] = {}        # subscription id -> channel id
        self.by_channel: dict[int, int] = {}  # channel id -> subscription id
        self.queue: collections.deque = collections.deque()  # (message, droppable, size)
        self.queued_bytes = 0
        self.ready = asyncio.Event()
        self.sent = self.bytes_sent = 0
        self.dropped = self.bytes_dropped = 0

    def put(self, message: Any, droppable: bool, size: int = -1) -> None:
        """Queue a message (str, bytes, or a list of fragments of `size` bytes); past either
        bound drop the oldest droppable ones but the newest."""
        size = len(message) if size < 0 else size
        self.queue.append((message, droppable, size))
        self.queued_bytes += size
        if self.queued_bytes > self.max_bytes or len(self.queue) > self.max_frames:
            self._shed()
        self.ready.set()

    def _shed(self) -> None:
        kept: collections.deque = collections.deque()
        newest = self.queue.pop()
        while self.queue and (self.queued_bytes > self.max_bytes
                              or len(self.queue) + len(kept) + 1 > self.max_frames):
            entry = self.queue.popleft()
            if entry[1]:
                self.queued_bytes -= entry[2]
                self.dropped += 1
                self.bytes_dropped += entry[2]
            else:
                kept.append(entry)
        kept.extend(self.queue)
        kept.append(newest)
        self.queue = kept

    async def run(self) -> None:
        """Send the queue in order until the connection closes."""
        try:
            while True:
                while not self.queue:
                    self.ready.clear()
                    await self.ready.wait()
                message, _, size = self.queue.popleft()
                self.queued_bytes -= size
                await self.ws.send(message)
                self.sent += 1
                self.bytes_sent += size
        except websockets.exceptions.ConnectionClosed:
            pass

    def stats(self) -> dict:
        return {"peer": self.peer, "subscriptions": len(self.subs), "frames_sent": self.sent,
                "bytes_sent": self.bytes_sent, "frames_dropped": self.dropped,
                "bytes_dropped": self.bytes_dropped, "queued_frames": len(self.queue),
                "queued_bytes": self.queued_bytes}


class Hub:
    """Channels and viewers. Loop thread only, but for channel_id() and wanted()."""

    def __init__(self, *, name: str, viewer_max_bytes: int, viewer_max_frames: int,
                 max_viewers: int, metadata: dict[str, str], stats: Any):
        self.name = name
        self.viewer_max_bytes = viewer_max_bytes
        self.viewer_max_frames = viewer_max_frames
        self.max_viewers = max_viewers
        self.metadata = metadata
        self._stats_extra = stats                 # callable -> dict, the bridge's other parts
        self.channels: dict[int, Channel] = {}
        self._ids: dict[tuple[str, str], int] = {}  # (topic, schema) -> id, reused
        self._ids_lock = threading.Lock()
        self._wanted: dict[int, int] = {}          # channel id -> subscriptions
        self._latched: dict[int, tuple[int, bytes]] = {}  # channel id -> last message
        self._latch: set[int] = set()              # channels whose last message is latched
        self.viewers: set[_Viewer] = set()
        self.dropped_gone = 0                      # frames dropped for viewers that left
        self.time_ns = -1
        self.viewers_total = 0
        self.session_id = ""
        self._files: dict[str, bytes] = {}

    # ---------------------------------------------------------------- any thread

    def channel_id(self, topic: str, schema_name: str) -> int:
        """The id of a channel: stable for a topic and schema, so a channel that goes and comes
        back (a sensor removed and created again) keeps its id, as the protocol allows."""
        with self._ids_lock:
            key = (topic, schema_name)
            if key not in self._ids:
                self._ids[key] = len(self._ids) + 1
            return self._ids[key]

    def wanted(self, channel_id: int) -> bool:
        """Whether some viewer subscribed to the channel (a dict read: safe from any thread)."""
        return self._wanted.get(channel_id, 0) > 0

    # ---------------------------------------------------------------- channels

    def advertise(self, ch: Channel, latch: bool = False) -> None:
        if ch.id in self.channels:
            return
        self.channels[ch.id] = ch
        if latch:
            self._latch.add(ch.id)
        text = protocol.advertise([ch])
        for v in self.viewers:
            v.put(text, False)

    def withdraw(self, channel_id: int) -> None:
        if self.channels.pop(channel_id, None) is None:
            return
        self._latched.pop(channel_id, None)
        self._latch.discard(channel_id)
        self._wanted.pop(channel_id, None)
        text = protocol.unadvertise([channel_id])
        for v in self.viewers:
            sub = v.by_channel.pop(channel_id, None)
            if sub is not None:
                del v.subs[sub]
            v.put(text, False)

    def publish(self, channel_id: int, timestamp_ns: int, payload: bytes) -> None:
        """Send a message of a channel to the viewers subscribed to it, after a Time message
        when the timestamp is the latest yet."""
        if channel_id not in self.channels:
            return
        if channel_id in self._latch:
            self._latched[channel_id] = (timestamp_ns, payload)
        if timestamp_ns > self.time_ns:
            self.time_ns = timestamp_ns
            tick = protocol.time_message(timestamp_ns)
            for v in self.viewers:
                v.put(tick, True)
        for v in self.viewers:
            sub = v.by_channel.get(channel_id)
            if sub is not None:
                message, size = _message_data(sub, timestamp_ns, payload)
                v.put(message, True, size)

    # ---------------------------------------------------------------- viewers

    async def serve(self, host: str, port: int) -> Any:
        return await websockets.serve(
            self._handler, host, port, subprotocols=[protocol.SUBPROTOCOL],
            process_request=self._process_request, compression=None,
            max_size=_MAX_VIEWER_MESSAGE, max_queue=16, ping_interval=20, ping_timeout=20,
            close_timeout=5, logger=logging.getLogger("sensim.foxglove.websockets"))

    async def close_viewers(self) -> None:
        for v in list(self.viewers):
            await v.ws.close(1001, "the bridge is stopping")

    async def _process_request(self, path: str, headers: Any) -> Optional[tuple]:
        """Plain HTTP requests get the page's files; a WebSocket upgrade must offer the
        protocol and find room."""
        if headers.get("Upgrade", "").lower() != "websocket":
            return self._http_file(path)
        offered = [p.strip() for h in headers.get_all("Sec-WebSocket-Protocol")
                   for p in h.split(",")]
        if protocol.SUBPROTOCOL not in offered:
            return (http.HTTPStatus.BAD_REQUEST, [],
                    f"this server speaks the WebSocket subprotocol {protocol.SUBPROTOCOL} "
                    f"only; offered: {offered or 'none'}\n".encode())
        if len(self.viewers) >= self.max_viewers:
            return (http.HTTPStatus.SERVICE_UNAVAILABLE, [],
                    f"too many viewers: at most {self.max_viewers} (--max-viewers)\n".encode())
        return None

    def _http_file(self, path: str) -> tuple:
        path = path.split("?", 1)[0]
        if path == "/stats.json":
            body = json.dumps(self.stats(), indent=1).encode()
            return (http.HTTPStatus.OK, [("Content-Type", "application/json"),
                                         ("Cache-Control", "no-store")], body)
        entry = _FILES.get(path)
        if entry is None:
            return (http.HTTPStatus.NOT_FOUND, [], f"no such file: {path}\n".encode())
        name, ctype = entry
        body = self._files.get(name)
        if body is None:
            try:
                body = (WEB_DIR / name).read_bytes()
            except OSError:
                if name.startswith("vendor/"):
                    msg = (f"{name} is missing: three.js is vendored by the build; run "
                           "./setup.sh (or ./setup.sh --web-only) in the repository\n")
                else:
                    msg = f"{name} is missing from the installed package\n"
                log.error("%s", msg.strip())
                return (http.HTTPStatus.INTERNAL_SERVER_ERROR, [], msg.encode())
            self._files[name] = body
        return (http.HTTPStatus.OK, [("Content-Type", ctype), ("Cache-Control", "no-cache")],
                body)

    async def _handler(self, ws: Any) -> None:
        if len(self.viewers) >= self.max_viewers:  # several handshakes were in flight
            await ws.close(1013, f"too many viewers: at most {self.max_viewers}")
            return
        v = _Viewer(ws, self.viewer_max_bytes, self.viewer_max_frames)
        self.viewers.add(v)
        self.viewers_total += 1
        log.info("viewer %s connected", v.peer)
        v.put(protocol.server_info(self.name, self.session_id, self.metadata), False)
        v.put(protocol.advertise(list(self.channels.values())), False)
        writer = asyncio.ensure_future(v.run())
        try:
            async for message in ws:
                if isinstance(message, str):
                    self._request(v, message)
                else:
                    v.put(protocol.status(protocol.ERROR, "binary messages: this bridge does "
                                          "not accept client publishing or service calls"),
                          False)
        except websockets.exceptions.ConnectionClosed:
            pass
        finally:
            for ch in v.subs.values():
                self._wanted[ch] = self._wanted.get(ch, 1) - 1
            self.viewers.discard(v)
            self.dropped_gone += v.dropped
            writer.cancel()
            log.info("viewer %s left: %d messages sent, %d dropped", v.peer, v.sent, v.dropped)

    def _request(self, v: _Viewer, text: str) -> None:
        """Apply a subscribe or unsubscribe, or none of it: a request with any bad entry changes
        nothing and is answered with a status naming the entry."""
        try:
            op, items = protocol.parse_client_text(text)
            if op == "subscribe":
                ids, channels = set(), set()
                for i, (sub, ch) in enumerate(items):
                    what = f"subscribe.subscriptions[{i}]"
                    if sub in v.subs or sub in ids:
                        raise protocol.ClientError(f"{what}.id: subscription {sub} is in use")
                    if ch not in self.channels:
                        raise protocol.ClientError(
                            f"{what}.channelId: no channel {ch} (advertised: "
                            f"{sorted(self.channels) or 'none'})")
                    if ch in v.by_channel or ch in channels:
                        raise protocol.ClientError(
                            f"{what}.channelId: channel {ch} is subscribed already (one "
                            "subscription per channel)")
                    ids.add(sub)
                    channels.add(ch)
                for sub, ch in items:
                    v.subs[sub] = ch
                    v.by_channel[ch] = sub
                    self._wanted[ch] = self._wanted.get(ch, 0) + 1
                    last = self._latched.get(ch)
                    if last is not None:
                        message, size = _message_data(sub, last[0], last[1])
                        v.put(message, True, size)
            else:
                for i, sub in enumerate(items):
                    if sub not in v.subs:
                        raise protocol.ClientError(
                            f"unsubscribe.subscriptionIds[{i}]: no subscription {sub}")
                for sub in set(items):
                    ch = v.subs.pop(sub)
                    del v.by_channel[ch]
                    self._wanted[ch] -= 1
        except protocol.ClientError as exc:
            v.put(protocol.status(protocol.ERROR, str(exc)), False)

    # ---------------------------------------------------------------- counters

    def stats(self) -> dict:
        viewers = [v.stats() for v in self.viewers]
        return {"channels": [{"id": c.id, "topic": c.topic, "encoding": c.encoding,
                              "schemaName": c.schema_name,
                              "subscribers": self._wanted.get(c.id, 0)}
                             for c in self.channels.values()],
                "viewers": viewers, "viewers_total": self.viewers_total,
                "frames_dropped": self.dropped_gone + sum(v["frames_dropped"] for v in viewers),
                **self._stats_extra()}
