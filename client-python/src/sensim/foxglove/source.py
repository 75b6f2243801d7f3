# SPDX-License-Identifier: MIT
"""The bridge's side facing sensimd: one observer connection of an environment, run on a thread
of its own. It subscribes to the sensors (those named, or all it can find), turns each pushed
record into the message of its channel (ROS 1 for clouds and IMU samples, JSON for encoders,
odometers and cone sensors) and hands it to the viewers' side, but only for channels some
viewer subscribed to: a record nobody watches is not converted.

Finding "all" sensors and the frames: the source asks the daemon to describe the environment
(Describe: every sensor with its body and mount, every body with its pose at the last state)
at each poll, subscribes to the sensors it has not yet, and hands the sensors' mounts and the
bodies' poses to the bridge for /tf (the bodies' again every _TF_INTERVAL while records
arrive). A daemon too old to describe is probed instead: ids 1..probe_ids whenever GetInfo's
sensor count exceeds what was found, and no transforms.

The connection is made again when it breaks (the daemon restarts) and when the bridge finds
itself the environment's last client after others were there: leaving lets an environment of
`--retention destroy` go, so the next simulation starts in a fresh one instead of meeting the
old one's entities.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from typing import Any, Callable, Optional, Sequence

import numpy as np

from .. import errors
from .._framing import DEFAULT_MAX_FRAME_BYTES
from .._proto import pb
from ..client import Client, point_cloud_to_numpy
from ..stream import lacks_describe
from . import ros1
from .protocol import Channel

__all__ = ["Source", "SourceConfig", "cloud_message"]

log = logging.getLogger("sensim.foxglove")

_ENCODINGS = {"raw": pb.ENCODING_RAW, "zstd": pb.ENCODING_ZSTD,
              "quantized_zstd": pb.ENCODING_QUANTIZED_ZSTD}
_PROBE_BATCH = 64          # Subscribe requests in flight while probing
_REJOIN_DELAY = 0.5        # s between leaving an environment and joining it again
_RETRY_MAX = 5.0           # s, longest wait between connection attempts
_TF_INTERVAL = 0.1         # s between body pose polls while records arrive

_SCALAR_SCHEMA = json.dumps({
    "title": "sensim.ScalarSample",
    "description": "An encoder's or odometer's sample (docs/models/joint_sensors.md)",
    "type": "object",
    "properties": {
        "time": {"type": "number", "description": "s, end of the step"},
        "frame": {"type": "integer"},
        "position": {"type": "number", "description": "encoder: rad or m; odometer: m"},
        "speed": {"type": ["number", "null"], "description": "rad/s or m/s; null if none"}}})
_CONE_SCHEMA = json.dumps({
    "title": "sensim.ConeReading",
    "description": "A cone sensor's reading (docs/models/cone.md)",
    "type": "object",
    "properties": {
        "time": {"type": "number", "description": "s"},
        "frame": {"type": "integer"},
        "detected": {"type": "boolean"},
        "range": {"type": "number", "description": "m"},
        "azimuth": {"type": "number", "description": "rad"},
        "elevation": {"type": "number", "description": "rad"},
        "speed": {"type": ["number", "null"], "description": "m/s"},
        "object_id": {"type": "integer"},
        "point": {"type": ["array", "null"], "items": {"type": "number"},
                  "description": "closest point, world frame, m"}}})


def _same_frames(a: Any, b: Any) -> bool:
    """Whether two (time, mounts, bodies) tell the same frames."""
    if a is None or b is None or a[0] != b[0] or len(a[1]) != len(b[1]) \
            or len(a[2]) != len(b[2]):
        return False
    return all(x[0] == y[0] and x[1] == y[1] and np.array_equal(x[2], y[2])
               for x, y in zip(a[1], b[1])) and \
        all(x[0] == y[0] and np.array_equal(x[1], y[1]) for x, y in zip(a[2], b[2]))


class SourceConfig:
    """What the source connects to and how (see Bridge for the meaning of each)."""

    def __init__(self, host: str, port: int, environment: str, token: Optional[str],
                 sensors: Optional[Sequence[int]], encoding: str, probe_ids: int,
                 poll_interval: float, client_name: str, timeout: float):
        if encoding not in _ENCODINGS:
            raise ValueError(f"encoding: {encoding!r} is not one of {sorted(_ENCODINGS)}")
        self.host, self.port, self.environment, self.token = host, port, environment, token
        self.sensors = None if sensors is None else sorted({int(s) for s in sensors})
        self.encoding = encoding
        self.probe_ids = probe_ids
        self.poll_interval = poll_interval
        self.client_name = client_name
        self.timeout = timeout


def sensor_frame(sensor_id: int) -> str:
    """The frame id of a sensor's own frame in the messages (its mount on its body)."""
    return f"sensor_{sensor_id}"


def body_frame(body_id: int) -> str:
    """The frame id of a body (body 0 is the world)."""
    return "world" if body_id == 0 else f"body_{body_id}"


def _pose7(p: Any) -> np.ndarray:
    """A wire Pose as px py pz qx qy qz qw."""
    return np.array([p.position.x, p.position.y, p.position.z, p.orientation.x,
                     p.orientation.y, p.orientation.z, p.orientation.w], dtype=np.float64)


def cloud_message(data: Any, max_bytes: int) -> tuple[bytes, Any, bytes]:
    """sensor_msgs/PointCloud2 of one SensorData's point cloud: its points as they arrived (a
    compressed cloud decoded first), its fields, height x width when the daemon sent them
    (organised clouds) and 1 x count otherwise; header seq = the sensor's frame counter, stamp =
    the end of the step that completed it, frame_id sensor_<id> or world; in the three parts
    of ros1.point_cloud2_parts, the points not copied. Raises errors.ProtocolError naming the
    field of a cloud that does not decode."""
    pc = data.point_cloud
    points = point_cloud_to_numpy(pc, max_bytes)
    count = pc.count
    height, width = 1, count
    if pc.HasField("height") or pc.HasField("width"):
        if pc.height * pc.width != count:
            raise errors.ProtocolError(f"point_cloud.height x width: {pc.height} x {pc.width} "
                                       f"for count {count}")
        height, width = pc.height, pc.width
    fields = [(f.name, f.offset, f.datatype, max(f.count, 1)) for f in pc.fields]
    # dense: no point is NaN (misses as NaN make an organised cloud sparse)
    dense = True
    names = points.dtype.names or ()
    for axis in ("x", "y", "z"):
        if axis in names and points.dtype[axis].kind == "f" and count:
            if np.isnan(points[axis]).any():
                dense = False
                break
    frame = "world" if pc.frame == pb.FRAME_WORLD else sensor_frame(data.sensor_id)
    raw = memoryview(points.view(np.uint8).reshape(-1)) if count else b""
    return ros1.point_cloud2_parts(data.frame, ros1.stamp(data.time), frame, height, width, fields,
                             pc.point_step, raw, dense)


def _vec(msg: Any, field: str) -> Optional[tuple]:
    if not msg.HasField(field):
        return None
    v = getattr(msg, field)
    return (v.x, v.y, v.z)


def _num(x: float) -> Optional[float]:
    return x if math.isfinite(x) else None   # JSON has no NaN or infinity


class Source:
    """The observer of one environment; run() until stop is set. Callbacks (any thread-safe
    callables): channel_id(topic, schema_name) -> int, advertise(Channel), withdraw(channel
    id), publish(channel id, timestamp ns, payload: bytes or a tuple of bytes-like parts) and
    wanted(channel id) -> bool."""

    def __init__(self, config: SourceConfig, *, channel_id: Callable[[str, str], int],
                 advertise: Callable[[Channel], None], withdraw: Callable[[int], None],
                 publish: Callable[[int, int, Any], None], wanted: Callable[[int], bool],
                 described: Optional[Callable[[Optional[float], list, list], None]] = None):
        self.config = config
        # described(time, mounts, bodies): the sensors' mounts as (parent, child, pose) and
        # the bodies' world poses as (body id, pose) at `time` (None before any state)
        self._described = described
        self._channel_id = channel_id
        self._advertise = advertise
        self._withdraw = withdraw
        self._publish = publish
        self._wanted = wanted
        self._channels: dict[str, Channel] = {}        # topic -> channel advertised
        # counters, read by stats() from other threads (plain attributes: each read is atomic)
        self.connected = False
        self.subscribed: list[int] = []
        self.records = 0            # records received
        self.converted = 0          # records converted for a viewer
        self.decode_errors = 0
        self.client_drops = 0       # frames dropped by the client's own queue
        self.daemon_gaps = 0        # frames the daemon dropped for us (sequence gaps)
        self.last_error = ""

    # ---------------------------------------------------------------- lifetime

    def run(self, stop: threading.Event) -> None:
        delay = 0.1
        while not stop.is_set():
            try:
                with Client(self.config.host, self.config.port,
                            environment=self.config.environment, token=self.config.token,
                            role="observer", client_name=self.config.client_name,
                            timeout=self.config.timeout) as client:
                    self.connected = True
                    delay = 0.1
                    log.info("joined environment %r of sensimd %s at %s:%d",
                             self.config.environment, client.server_version,
                             self.config.host, self.config.port)
                    self._session(client, stop)
            except errors.SensimError as exc:
                self.last_error = str(exc)
                log.warning("sensimd %s:%d: %s", self.config.host, self.config.port, exc)
            except OSError as exc:
                self.last_error = str(exc)
                log.warning("sensimd %s:%d: %s", self.config.host, self.config.port, exc)
            finally:
                self.connected = False
                self.subscribed = []
                for ch in self._channels.values():
                    self._withdraw(ch.id)
                self._channels.clear()
            stop.wait(delay)
            delay = min(delay * 2, _RETRY_MAX)

    def _session(self, client: Client, stop: threading.Event) -> None:
        subscribed: dict[int, int] = {}   # sensor id -> last sequence seen (0: none yet)
        seen_others = False
        probed_at = -1                    # sensor count of the environment at the last probe
        env_name = client.hello_reply.environment or self.config.environment
        next_poll = 0.0
        next_tf = 0.0
        records_at_tf = -1                # self.records at the last body pose poll
        self._can_describe = True
        self._told: Any = None            # what was last handed to described()
        while not stop.is_set():
            now = time.monotonic()
            if (now >= next_tf and now < next_poll and self._can_describe
                    and self.records != records_at_tf):
                next_tf = now + _TF_INTERVAL
                records_at_tf = self.records
                self._describe(client, sensors=False)
            if now >= next_poll:
                next_poll = now + self.config.poll_interval
                env = next((e for e in client.get_info().environments if e.name == env_name),
                           None)
                if env is None:
                    return
                if env.clients > 1:
                    seen_others = True
                elif seen_others:
                    log.info("the bridge is the last client of %r: leaving it", env_name)
                    stop.wait(_REJOIN_DELAY)
                    return
                listed = self._describe(client) if self._can_describe else None
                next_tf = now + _TF_INTERVAL
                records_at_tf = self.records
                if self.config.sensors is not None:
                    missing = [s for s in self.config.sensors if s not in subscribed]
                    if missing:
                        self._subscribe(client, missing, subscribed)
                elif listed is not None:
                    missing = [s for s in listed if s not in subscribed]
                    if missing:
                        self._subscribe(client, missing, subscribed)
                elif env.sensors > len(subscribed) and env.sensors != probed_at:
                    probed_at = env.sensors
                    self._subscribe(client, range(1, self.config.probe_ids + 1), subscribed)
                    if env.sensors > len(subscribed):
                        log.warning("found %d of the %d sensors of %r among ids 1..%d; name "
                                    "the others (--sensor ID)", len(subscribed), env.sensors,
                                    env_name, self.config.probe_ids)
                self.subscribed = sorted(subscribed)
            data = client.next_sensor_data(timeout=max(0.0, min(0.05, next_poll - now)))
            self.client_drops = client.frames_dropped
            if data is None:
                continue
            self.records += 1
            last = subscribed.get(data.sensor_id)
            if last is not None:
                if last and data.sequence > last + 1:
                    self.daemon_gaps += data.sequence - last - 1
                subscribed[data.sensor_id] = data.sequence
            if data.end_of_stream:
                subscribed.pop(data.sensor_id, None)
                self.subscribed = sorted(subscribed)
                self._drop_sensor(data.sensor_id)
                probed_at = -1
                continue
            self._record(data)

    def _describe(self, client: Client, sensors: bool = True) -> Optional[list[int]]:
        """Describe the environment; hand the frames to the bridge when they changed. Returns
        the sensor ids (None when not asked, or when the daemon cannot describe: it is then
        probed from now on)."""
        try:
            d = client.describe(sensors=sensors)
        except (errors.InvalidArgument, errors.Unimplemented) as exc:
            if not lacks_describe(exc):
                raise
            # a daemon older than Describe sees an Envelope without a body it knows
            log.warning("sensimd cannot describe the environment (%s): probing sensor ids "
                        "1..%d, no transforms", exc, self.config.probe_ids)
            self._can_describe = False
            return None
        time_s = d.time if d.HasField("time") else None
        bodies = [(b.id, _pose7(b.pose)) for b in d.bodies]
        if sensors:
            mounts = [(body_frame(s.body_id), sensor_frame(s.id), _pose7(s.mount))
                      for s in d.sensors]
        else:
            mounts = self._told[1] if self._told is not None else []
        told = (time_s, mounts, bodies)
        if self._described is not None and not _same_frames(told, self._told):
            self._described(time_s, mounts, bodies)
        self._told = told
        return [s.id for s in d.sensors] if sensors else None

    def _subscribe(self, client: Client, ids: Any, subscribed: dict[int, int]) -> None:
        """Subscribe to the ids not subscribed yet, _PROBE_BATCH requests in flight; a sensor
        that does not exist (NOT_FOUND) is left for a later poll."""
        todo = [i for i in ids if i not in subscribed]
        encoding = _ENCODINGS[self.config.encoding]
        for k in range(0, len(todo), _PROBE_BATCH):
            batch = todo[k:k + _PROBE_BATCH]
            rids = [client.send_request("subscribe", pb.Subscribe(sensor_id=i, encoding=encoding))
                    for i in batch]
            for sensor_id, rid in zip(batch, rids):
                try:
                    client.wait_reply(rid)
                except (errors.NotFound, errors.AlreadyExists):
                    # AlreadyExists: subscribed before a reconnection we did not notice
                    continue
                subscribed[sensor_id] = 0
                log.info("subscribed to sensor %d", sensor_id)

    # ---------------------------------------------------------------- records

    def _channel(self, topic: str, encoding: str, schema_name: str, schema: str,
                 schema_encoding: str) -> Channel:
        ch = self._channels.get(topic)
        if ch is None:
            ch = Channel(self._channel_id(topic, schema_name), topic, encoding, schema_name,
                         schema, schema_encoding)
            self._channels[topic] = ch
            self._advertise(ch)
        return ch

    def _ros(self, topic: str, schema_name: str) -> Channel:
        return self._channel(topic, "ros1", schema_name, ros1.SCHEMAS[schema_name], "ros1msg")

    def _drop_sensor(self, sensor_id: int) -> None:
        prefix = f"/{sensor_frame(sensor_id)}/"
        for topic in [t for t in self._channels if t.startswith(prefix)]:
            self._withdraw(self._channels.pop(topic).id)

    def _record(self, data: Any) -> None:
        kind = data.WhichOneof("payload")
        sid = data.sensor_id
        t_ns = ros1.stamp(data.time)
        base = f"/{sensor_frame(sid)}"
        try:
            if kind == "point_cloud":
                ch = self._ros(base + "/points", ros1.POINT_CLOUD2)
                if self._wanted(ch.id):
                    self._publish(ch.id, t_ns, cloud_message(data, DEFAULT_MAX_FRAME_BYTES))
                    self.converted += 1
            elif kind == "imu":
                s = data.imu
                gyro, acc = _vec(s, "angular_velocity"), _vec(s, "acceleration")
                if gyro is not None or acc is not None:
                    ch = self._ros(base + "/imu", ros1.IMU)
                    if self._wanted(ch.id):
                        self._publish(ch.id, t_ns, ros1.imu(data.frame, t_ns, sensor_frame(sid),
                                                            gyro, acc))
                        self.converted += 1
                mag = _vec(s, "magnetic_field")
                if mag is not None:
                    ch = self._ros(base + "/magnetic_field", ros1.MAGNETIC_FIELD)
                    if self._wanted(ch.id):
                        self._publish(ch.id, t_ns, ros1.magnetic_field(
                            data.frame, t_ns, sensor_frame(sid), mag))
                        self.converted += 1
            elif kind == "scalar":
                ch = self._channel(base + "/scalar", "json", "sensim.ScalarSample",
                                   _SCALAR_SCHEMA, "jsonschema")
                if self._wanted(ch.id):
                    s = data.scalar
                    self._publish(ch.id, t_ns, json.dumps({
                        "time": data.time, "frame": data.frame, "position": _num(s.position),
                        "speed": _num(s.speed) if s.HasField("speed") else None}).encode())
                    self.converted += 1
            elif kind == "cone":
                ch = self._channel(base + "/cone", "json", "sensim.ConeReading", _CONE_SCHEMA,
                                   "jsonschema")
                if self._wanted(ch.id):
                    s = data.cone
                    point = _vec(s, "point")
                    self._publish(ch.id, t_ns, json.dumps({
                        "time": data.time, "frame": data.frame, "detected": s.detected,
                        "range": _num(s.range), "azimuth": _num(s.azimuth),
                        "elevation": _num(s.elevation),
                        "speed": _num(s.speed) if s.HasField("speed") else None,
                        "object_id": s.object_id,
                        "point": None if point is None else [_num(v) for v in point]}).encode())
                    self.converted += 1
        except errors.ProtocolError as exc:
            self.decode_errors += 1
            self.last_error = f"sensor {sid} frame {data.frame}: {exc}"
            if self.decode_errors <= 10 or self.decode_errors % 1000 == 0:
                log.warning("sensor %d frame %d not converted (%d so far): %s", sid, data.frame,
                            self.decode_errors, exc)

    def stats(self) -> dict:
        return {"connected": self.connected, "host": self.config.host,
                "port": self.config.port, "environment": self.config.environment,
                "encoding": self.config.encoding, "sensors": list(self.subscribed),
                "records": self.records, "converted": self.converted,
                "decode_errors": self.decode_errors, "client_frames_dropped": self.client_drops,
                "daemon_frames_dropped": self.daemon_gaps, "last_error": self.last_error}
