# SPDX-License-Identifier: MIT
"""The Foxglove bridge: an observer of one sensimd environment (source.py, on a thread of its
own) feeding a foxglove.websocket.v1 server and the built-in page (hub.py, on an asyncio loop
thread). This module composes the two, owns both threads, and takes the transforms a
controller publishes (an observer cannot see body poses: the controller that sends them to the
daemon hands them to the bridge as well).

    from sensim.foxglove import Bridge

    with Bridge(port=7700, environment="demo", listen="127.0.0.1:8765") as bridge:
        print(bridge.page_url)                       # the built-in page; Foxglove: bridge.url
        bridge.set_frame("sensor_10", "body_1", ((0, 0, 1.5), (0, 0, 0, 1)))
        ...
        bridge.publish_body_poses(t, [1], [[x, y, 0, 0, 0, qz, qw]])   # every step
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import ipaddress
import logging
import math
import threading
import uuid
from typing import Any, Iterable, Optional, Sequence

import numpy as np

from . import ros1
from .hub import Hub
from .protocol import Channel
from .source import Source, SourceConfig, body_frame, sensor_frame

__all__ = ["Bridge", "body_frame", "sensor_frame", "parse_address"]

log = logging.getLogger("sensim.foxglove")

TF_TOPIC = "/tf"


def parse_address(text: str, what: str = "listen") -> tuple[str, int]:
    """'HOST:PORT' or '[IPv6]:PORT' -> (host, port); ValueError naming `what` otherwise."""
    host, sep, port = text.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"{what}: expected HOST:PORT (port 0..65535), got {text!r}")
    return host, int(port)


def _pose(value: Any, what: str) -> np.ndarray:
    """A pose as 7 floats px py pz qx qy qz qw, from 7 numbers or (position, orientation); a
    missing orientation is the identity. A quaternion that is not of unit length (within
    1e-9) is normalised; a unit one passes unchanged, bit for bit."""
    if isinstance(value, (tuple, list)) and len(value) == 2:
        position, orientation = value
        orientation = (0.0, 0.0, 0.0, 1.0) if orientation is None else orientation
        try:
            p = np.concatenate([np.asarray(position, dtype=np.float64).reshape(3),
                                np.asarray(orientation, dtype=np.float64).reshape(4)])
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{what}: expected (position (3), orientation (4)): {exc}") from None
    else:
        try:
            p = np.asarray(value, dtype=np.float64).reshape(7).copy()
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{what}: expected 7 numbers px py pz qx qy qz qw: {exc}") from None
    if not np.isfinite(p).all():
        raise ValueError(f"{what}: not finite: {p.tolist()}")
    norm = math.sqrt(float(np.dot(p[3:], p[3:])))
    if norm < 1e-9:
        raise ValueError(f"{what}: the quaternion {p[3:].tolist()} is zero")
    if abs(norm - 1.0) > 1e-9:
        p[3:] /= norm
    return p


def _frame_name(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value or len(value.encode()) > 256:
        raise ValueError(f"{what}: expected a frame name of 1 to 256 bytes, got {value!r}")
    return value


def _positive(value: Any, what: str, least: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ValueError(f"{what}: expected an integer >= {least}, got {value!r}")
    return value


class Bridge:
    """Serve one environment of a running sensimd to Foxglove and to the built-in page.

    host, port, environment, token: the daemon and the environment to observe.
    sensors: the sensor ids to serve, or None for every sensor of the environment (listed by
    Describe; a daemon without Describe is probed among ids 1..probe_ids). The sensors'
    mounts and the bodies' poses go on /tf as the daemon describes them.
    listen: "HOST:PORT" (or a (host, port) pair) of the WebSocket and page server; port 0
    picks a free one (see .address). Loopback by default: the protocol has no authentication.
    encoding: how the daemon sends clouds to the bridge: "raw" (default, fastest over
    loopback), "zstd" or "quantized_zstd" (a remote daemon); viewers always get the decoded
    points.
    viewer_max_bytes, viewer_max_frames: the bound of each viewer's queue; past it the oldest
    data messages are dropped and counted. pending_max_bytes: converted messages on their way
    from the daemon thread to the viewers' loop; past it new ones are dropped (counted).
    max_viewers: simultaneous viewers. poll_interval: s between the environment checks (new
    sensors, the last client). timeout: s for each request to the daemon.
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 7700, *,
                 environment: str = "default", token: Optional[str] = None,
                 sensors: Optional[Iterable[int]] = None,
                 listen: Any = "127.0.0.1:8765", encoding: str = "raw",
                 viewer_max_bytes: int = 16 << 20, viewer_max_frames: int = 4096,
                 pending_max_bytes: int = 64 << 20, max_viewers: int = 16,
                 probe_ids: int = 256, poll_interval: float = 1.0, timeout: float = 10.0,
                 name: str = "sensim-foxglove"):
        self.listen = parse_address(listen) if isinstance(listen, str) else \
            (str(listen[0]), int(listen[1]))
        if sensors is not None:
            sensors = [_positive(int(s) if isinstance(s, (np.integer,)) else s,
                                 f"sensors[{i}]") for i, s in enumerate(sensors)]
        for what, value in (("viewer_max_bytes", viewer_max_bytes),
                            ("viewer_max_frames", viewer_max_frames),
                            ("pending_max_bytes", pending_max_bytes),
                            ("max_viewers", max_viewers), ("probe_ids", probe_ids)):
            _positive(value, what)
        if not poll_interval > 0 or not timeout > 0:
            raise ValueError(f"poll_interval, timeout: expected > 0 s, got {poll_interval}, "
                             f"{timeout}")
        self.pending_max_bytes = pending_max_bytes
        self.hub = Hub(name=name, viewer_max_bytes=viewer_max_bytes,
                       viewer_max_frames=viewer_max_frames, max_viewers=max_viewers,
                       metadata={"environment": environment, "daemon": f"{host}:{port}"},
                       stats=self._stats_extra)
        self.hub.session_id = uuid.uuid4().hex
        self.source = Source(
            SourceConfig(host, port, environment, token, sensors, encoding, probe_ids,
                         poll_interval, name, timeout),
            channel_id=self.hub.channel_id, advertise=self._advertise,
            withdraw=self._withdraw, publish=self._publish, wanted=self.hub.wanted,
            described=self._described)
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._server: Any = None
        self._loop_thread: Optional[threading.Thread] = None
        self._source_thread: Optional[threading.Thread] = None
        self._stop = threading.Event()
        self._lock = threading.Lock()       # guards _pending and pending_dropped
        # Guards the transforms' state and orders their messages: held while one is built and
        # posted, so the channel's advertisement precedes its first message.
        self._tf_lock = threading.Lock()
        self._pending = 0                   # bytes posted to the loop, not delivered yet
        self.pending_dropped = 0            # messages refused past pending_max_bytes
        self._frames: dict[str, tuple[str, np.ndarray]] = {}  # child -> (parent, pose): static
        # the sensors' mounts as the daemon describes them: child -> (parent, pose); a frame
        # given to set_frame (--frame) takes precedence
        self._mounts: dict[str, tuple[str, np.ndarray]] = {}
        self._tf_advertised = False
        self._last_tf_ns = 0
        self.address: Optional[tuple[str, int]] = None

    # ---------------------------------------------------------------- lifetime

    def start(self) -> "Bridge":
        """Start listening and observing; returns once the server listens (raises OSError if
        it cannot)."""
        if self._loop is not None:
            raise RuntimeError("the bridge is started already")
        host = self.listen[0]
        try:
            loopback = ipaddress.ip_address(host).is_loopback
        except ValueError:
            loopback = host == "localhost"
        if not loopback:
            log.warning("listening on %s: anyone who can reach it sees the simulation (the "
                        "Foxglove protocol has no authentication)", host)
        ready: concurrent.futures.Future = concurrent.futures.Future()
        self._loop = asyncio.new_event_loop()
        self._loop_thread = threading.Thread(target=self._loop_main, args=(ready,),
                                             name="sensim-foxglove-ws", daemon=True)
        self._loop_thread.start()
        try:
            self.address = ready.result()
        except BaseException:
            self._loop_thread.join()
            self._loop.close()
            self._loop = None
            raise
        self._source_thread = threading.Thread(target=self.source.run, args=(self._stop,),
                                               name="sensim-foxglove-daemon", daemon=True)
        self._source_thread.start()
        return self

    def _loop_main(self, ready: concurrent.futures.Future) -> None:
        loop = self._loop
        asyncio.set_event_loop(loop)
        try:
            self._server = loop.run_until_complete(self.hub.serve(*self.listen))
        except BaseException as exc:  # the address is taken, or not ours
            ready.set_exception(exc)
            return
        ready.set_result(self._server.sockets[0].getsockname()[:2])
        loop.run_forever()
        # the viewers' writers and the library's keepalives end with their connections
        pending = asyncio.all_tasks(loop)
        for task in pending:
            task.cancel()
        loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        loop.run_until_complete(loop.shutdown_asyncgens())

    async def _shutdown(self) -> None:
        self._server.close()
        await self.hub.close_viewers()
        try:
            await asyncio.wait_for(self._server.wait_closed(), 10)
        except asyncio.TimeoutError:
            log.warning("viewers did not close within 10 s")

    def close(self) -> None:
        """Stop observing, close the viewers' connections and the server; idempotent."""
        self._stop.set()
        if self._source_thread is not None:
            self._source_thread.join()
            self._source_thread = None
        loop = self._loop
        if loop is None:
            return
        if self._server is not None:
            asyncio.run_coroutine_threadsafe(self._shutdown(), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        self._loop_thread.join()
        loop.close()
        self._loop = None

    def __enter__(self) -> "Bridge":
        return self.start() if self._loop is None else self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @property
    def url(self) -> str:
        """ws://HOST:PORT, the address to open in Foxglove ("Foxglove WebSocket")."""
        return f"ws://{self._host_port()}"

    @property
    def page_url(self) -> str:
        """http://HOST:PORT/, the built-in page."""
        return f"http://{self._host_port()}/"

    def _host_port(self) -> str:
        if self.address is None:
            raise RuntimeError("the bridge is not started")
        host, port = self.address
        return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"

    # ---------------------------------------------------------------- to the loop

    def _call(self, fn: Any, *args: Any, size: int = 0) -> bool:
        """Run fn(*args) on the loop thread; a data message (size > 0) is refused past
        pending_max_bytes, so a loop that falls behind cannot make memory grow."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return False
        with self._lock:
            if size and self._pending + size > self.pending_max_bytes:
                self.pending_dropped += 1
                return False
            self._pending += size
        try:
            loop.call_soon_threadsafe(self._deliver, fn, args, size)
        except RuntimeError:  # the loop closed meanwhile
            with self._lock:
                self._pending -= size
            return False
        return True

    def _deliver(self, fn: Any, args: tuple, size: int) -> None:
        try:
            fn(*args)
        finally:
            if size:
                with self._lock:
                    self._pending -= size

    def _advertise(self, ch: Channel, latch: bool = False) -> None:
        self._call(self.hub.advertise, ch, latch)

    def _withdraw(self, channel_id: int) -> None:
        self._call(self.hub.withdraw, channel_id)

    def _publish(self, channel_id: int, timestamp_ns: int, payload: Any) -> None:
        size = sum(memoryview(p).nbytes for p in payload) if isinstance(payload, tuple) \
            else len(payload)
        self._call(self.hub.publish, channel_id, timestamp_ns, payload, size=max(size, 1))

    # ---------------------------------------------------------------- transforms

    def set_frame(self, child: str, parent: str, pose: Any) -> None:
        """A fixed transform (a sensor's mount on its body, a static sensor's place in the
        world): child's pose in parent, 7 numbers px py pz qx qy qz qw or (position,
        orientation). Sent at once and with every later transforms message on /tf."""
        child = _frame_name(child, "child")
        parent = _frame_name(parent, "parent")
        p = _pose(pose, "pose")
        with self._tf_lock:
            self._frames[child] = (parent, p)
            self._send_tf(self._last_tf_ns, [])

    def publish_transforms(self, time: float, transforms: Iterable[Any]) -> None:
        """Publish moving frames at simulation time `time` (s) on /tf, with the fixed frames
        of set_frame: transforms are (parent, child, pose) triples."""
        items = []
        for i, tr in enumerate(transforms):
            try:
                parent, child, pose = tr
            except (TypeError, ValueError):
                raise ValueError(f"transforms[{i}]: expected (parent, child, pose)") from None
            items.append((_frame_name(parent, f"transforms[{i}].parent"),
                          _frame_name(child, f"transforms[{i}].child"),
                          _pose(pose, f"transforms[{i}].pose")))
        if not math.isfinite(time):
            raise ValueError(f"time: not finite: {time}")
        t_ns = ros1.stamp(time)
        with self._tf_lock:
            self._last_tf_ns = max(self._last_tf_ns, t_ns)
            self._send_tf(t_ns, items)

    def publish_body_poses(self, time: float, body_ids: Sequence[int], poses: Any) -> None:
        """Publish the world poses of bodies (as sent in UpdateState: N x 7, px py pz qx qy qz
        qw) as the frames body_<id> at simulation time `time`."""
        poses = np.asarray(poses, dtype=np.float64)
        if poses.ndim != 2 or poses.shape[1] != 7 or len(poses) != len(body_ids):
            raise ValueError(f"poses: expected {len(body_ids)} x 7 numbers, got shape "
                             f"{poses.shape}")
        self.publish_transforms(time, [("world", body_frame(_positive(int(b), f"body_ids[{i}]")),
                                        poses[i]) for i, b in enumerate(body_ids)])

    def _described(self, time: Optional[float], mounts: list, bodies: list) -> None:
        """From the source: the sensors' mounts (parent, child, pose) and the bodies' world
        poses (id, pose) at simulation time `time` (None before the first state), as the
        daemon describes them. Published on /tf like publish_body_poses and set_frame."""
        with self._tf_lock:
            self._mounts = {child: (parent, pose) for parent, child, pose in mounts}
            if time is None or not math.isfinite(time):
                self._send_tf(self._last_tf_ns, [])
                return
            t_ns = ros1.stamp(time)
            self._last_tf_ns = max(self._last_tf_ns, t_ns)
            self._send_tf(t_ns, [("world", body_frame(b), pose) for b, pose in bodies])

    def _send_tf(self, t_ns: int, items: list) -> None:
        """Post one TFMessage of the moving frames `items` and every fixed frame (the mounts
        described, then set_frame's); called with _tf_lock held."""
        fixed = [(parent, child, pose) for child, (parent, pose) in self._mounts.items()
                 if child not in self._frames]
        fixed += [(parent, child, pose) for child, (parent, pose) in self._frames.items()]
        advertise = not self._tf_advertised
        self._tf_advertised = True
        ch = Channel(self.hub.channel_id(TF_TOPIC, ros1.TF_MESSAGE), TF_TOPIC, "ros1",
                     ros1.TF_MESSAGE, ros1.SCHEMAS[ros1.TF_MESSAGE], "ros1msg")
        if advertise:
            self._advertise(ch, True)
        payload = ros1.tf_message([(t_ns, parent, child, pose)
                                   for parent, child, pose in items + fixed])
        self._publish(ch.id, t_ns, payload)

    # ---------------------------------------------------------------- counters

    def _stats_extra(self) -> dict:
        with self._lock:
            pending, dropped = self._pending, self.pending_dropped
        return {"daemon": self.source.stats(), "pending_bytes": pending,
                "pending_dropped": dropped}

    def stats(self, timeout: float = 5.0) -> dict:
        """Counters: the daemon side (sensors, records, drops), the channels and their
        subscribers, each viewer's messages sent and dropped, queued bytes."""
        loop = self._loop
        if loop is None:
            return {"daemon": self.source.stats()}
        fut: concurrent.futures.Future = concurrent.futures.Future()
        loop.call_soon_threadsafe(lambda: fut.set_result(self.hub.stats()))
        return fut.result(timeout)

    def request_stop(self) -> None:
        """Ask wait() to return (safe in a signal handler); close() does the stopping."""
        self._stop.set()

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Block until close() (from another thread or a signal handler) or the timeout;
        True once stopped."""
        return self._stop.wait(timeout)

