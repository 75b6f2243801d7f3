# SPDX-License-Identifier: MIT
"""ROS 1 bags of sensor outputs, written with ROS's own ``rosbag`` library (Debian packages
``python3-rosbag``, ``python3-sensor-msgs`` and ``python3-roslib``).

Each sensor gets a namespace (default ``/sensim/sensor_<id>``) and a frame id (default
``sensor_<id>``); its records become the messages ROS drivers publish:

* point cloud -> ``<ns>/points``, ``sensor_msgs/PointCloud2``: the cloud's own fields,
  offsets and ``point_step`` (``layout="velodyne"`` / ``"ouster"`` are the
  ``velodyne_pointcloud`` / ``ouster_ros`` point types), ``height`` x ``width`` of an
  organised cloud; stamp = ``frame_start_time``, which the time fields count from;
* IMU -> ``<ns>/data``, ``sensor_msgs/Imu`` (no orientation: ``orientation_covariance[0] =
  -1``; covariances unknown, i.e. zero) and ``<ns>/mag``, ``sensor_msgs/MagneticField``;
* encoder, odometer -> ``<ns>/joint_states``, ``sensor_msgs/JointState`` named
  ``sensor_<id>``;
* cone -> ``<ns>/range``, ``sensor_msgs/Range``, ``+inf`` when nothing is detected (REP 117).

A cloud in the world frame (``frame="world"``) takes ``world_frame`` as its frame id. Message
times are the simulation's plus ``time_offset`` seconds (0 by default: a bag that starts near
1970, as with ``/use_sim_time``); each message is recorded at the end of the step that
produced it.

:func:`read_bag` reads such a bag back, or any ROS 1 bag's ``sensor_msgs/PointCloud2`` and
``sensor_msgs/Imu`` messages, as SensorOutput records (what ``sensim export`` and ``sensim
plot`` take besides recordings).
"""

from __future__ import annotations

import os
import re
import struct
from typing import Any, Iterator, Mapping, Optional, Union

import numpy as np

from .outputs import CloudMeta, ImuSample, SensorOutput

__all__ = ["BagWriter", "BagReading", "read_bag", "point_cloud2", "cloud_from_message",
           "imu_message", "import_ros"]

PathLike = Union[str, "os.PathLike[str]"]

# sensor_msgs/PointField datatypes by (numpy kind, size): the protocol's numbers too.
_DATATYPES = {("i", 1): 1, ("u", 1): 2, ("i", 2): 3, ("u", 2): 4, ("i", 4): 5, ("u", 4): 6,
              ("f", 4): 7, ("f", 8): 8}


# numpy types of the PointField datatypes (the inverse of _DATATYPES)
_NUMPY = {v: np.dtype(f"{k[0]}{k[1]}") for k, v in _DATATYPES.items()}


def import_ros() -> Any:
    """The ROS 1 Python modules (rosbag, rospy, sensor_msgs.msg), or an ImportError saying which
    Debian packages provide them."""
    try:
        import rosbag
        import rospy
        from sensor_msgs import msg as sensor_msgs
    except ImportError as exc:
        raise ImportError(
            f"sensim.bag needs ROS 1's Python libraries ({exc}); on Debian 12: apt-get install "
            "python3-rosbag python3-sensor-msgs python3-roslib") from exc
    return rosbag, rospy, sensor_msgs


def _stamp(rospy: Any, t: float) -> Any:
    if not np.isfinite(t) or t < 0:
        raise ValueError(f"bag: time {t} s is not a valid ROS time (>= 0); use time_offset")
    return rospy.Time.from_sec(float(t))


def point_cloud2(points: np.ndarray, *, stamp: Any, frame_id: str,
                 shape: Optional[tuple[int, int]] = None) -> Any:
    """A sensor_msgs/PointCloud2 holding the structured array `points` byte for byte (its
    fields at their offsets, its itemsize as point_step, little-endian); shape (height,
    width) of an organised cloud."""
    return _cloud_message(points, stamp, frame_id, shape, view=False)


def _cloud_message(points: np.ndarray, stamp: Any, frame_id: str,
                   shape: Optional[tuple[int, int]], view: bool) -> Any:
    """point_cloud2; view: its data may be a memoryview of the buffer the points were
    received in (for _serialized_cloud, not for genpy's serialize(), which takes bytes)."""
    _, _, sensor_msgs = import_ros()
    arr = np.asarray(points).reshape(-1)
    if not arr.dtype.names:
        raise ValueError("point_cloud2: expected a structured array (one record per point)")
    layout = arr.dtype.fields or {}        # name -> (dtype, offset), for a structured array
    fields = []
    little: list[tuple[str, Any]] = []
    for name in arr.dtype.names:
        dt, offset = layout[name][:2]
        base, count = (dt.base, int(np.prod(dt.shape))) if dt.subdtype else (dt, 1)
        key = (base.kind, base.itemsize)
        if key not in _DATATYPES:
            raise ValueError(f"point_cloud2: field {name!r} of type {base} has no PointField "
                             "datatype")
        fields.append(sensor_msgs.PointField(name=name, offset=offset,
                                             datatype=_DATATYPES[key], count=count))
        little.append((name, base.newbyteorder("<") if not dt.subdtype
                       else (base.newbyteorder("<"), dt.shape)))
    spec: dict[str, Any] = {"names": list(arr.dtype.names), "formats": [f for _, f in little],
                            "offsets": [layout[n][1] for n in arr.dtype.names],
                            "itemsize": arr.dtype.itemsize}
    le = np.dtype(spec)
    height, width = shape if shape is not None else (1, len(arr))
    if height * width != len(arr):
        raise ValueError(f"point_cloud2: shape {height} x {width} for {len(arr)} points")
    dense = True
    for name in ("x", "y", "z"):
        if name in arr.dtype.names and arr.dtype[name].kind == "f":
            dense = dense and bool(np.isfinite(arr[name]).all())
    msg = sensor_msgs.PointCloud2()
    msg.header.stamp = stamp
    msg.header.frame_id = frame_id
    msg.height, msg.width = int(height), int(width)
    msg.fields = fields
    msg.is_bigendian = False
    msg.point_step = arr.dtype.itemsize
    msg.row_step = arr.dtype.itemsize * int(width)
    msg.data = _own_bytes(arr, le)
    if isinstance(msg.data, memoryview) and not view:
        msg.data = bytes(msg.data)
    msg.is_dense = dense
    return msg


def _own_bytes(arr: np.ndarray, le: np.dtype) -> Union[bytes, memoryview]:
    """The points as little-endian records of dtype `le`: when `arr` already is such an array
    viewing the whole of a bytes object or memoryview (a cloud decoded from the daemon's
    message, or read in the frame it came in), that object itself; else a copy whose padding
    bytes are zero, so that a file written twice is the same."""
    base = arr
    while isinstance(base, np.ndarray) and base.base is not None:
        base = base.base
    if (arr.dtype == le and isinstance(base, (bytes, memoryview)) and arr.flags.c_contiguous
            and np.frombuffer(base, np.uint8).nbytes == arr.nbytes
            and np.frombuffer(base, np.uint8).ctypes.data == arr.ctypes.data):
        return base
    out = np.zeros(len(arr), dtype=le)
    for name in arr.dtype.names:
        out[name] = arr[name]
    return out.tobytes()


def _serialized_cloud(msg: Any) -> bytes:
    """A PointCloud2 message serialized exactly as its own serialize() does, with its data
    copied once (serialize() packs the data into a new bytes object and writes that into
    its buffer, two copies of a cloud that may take 12 MB). The message is serialized without
    its data, which ends it with data's length (u32) and is_dense (u8); the data goes in
    between."""
    from io import BytesIO
    data = msg.data
    msg.data = b""
    try:
        buf = BytesIO()
        msg.serialize(buf)
    finally:
        msg.data = data
    empty = buf.getvalue()
    return b"".join((empty[:-5], struct.pack("<I", len(data)), data, empty[-1:]))


def imu_message(sample: Any, *, stamp: Any, frame_id: str) -> Any:
    """A sensor_msgs/Imu from an ImuSample: no orientation estimate (orientation_covariance[0]
    = -1), an absent accelerometer or gyroscope marked the same way in its covariance."""
    _, _, sensor_msgs = import_ros()
    msg = sensor_msgs.Imu()
    msg.header.stamp = stamp
    msg.header.frame_id = frame_id
    msg.orientation_covariance = [-1.0] + [0.0] * 8
    for vec, target, cov in ((sample.angular_velocity, msg.angular_velocity,
                              "angular_velocity_covariance"),
                             (sample.acceleration, msg.linear_acceleration,
                              "linear_acceleration_covariance")):
        if vec is None:
            setattr(msg, cov, [-1.0] + [0.0] * 8)
        else:
            target.x, target.y, target.z = (float(v) for v in vec)
    return msg


class BagWriter:
    """Writes SensorOutput records into a ROS 1 bag (see the module text for the topics and
    message types). namespaces / frame_ids: per sensor id, overriding the defaults;
    world_frame: frame id of world-frame clouds; time_offset: s added to every time;
    compression: "none", "bz2" or "lz4". Use as a context manager, or call close()."""

    def __init__(self, path: PathLike, *, namespaces: Optional[Mapping[int, str]] = None,
                 frame_ids: Optional[Mapping[int, str]] = None, world_frame: str = "world",
                 time_offset: float = 0.0, compression: str = "none"):
        rosbag, self._rospy, self._msgs = import_ros()
        self.path = os.fspath(path)
        self.namespaces = dict(namespaces or {})
        self.frame_ids = dict(frame_ids or {})
        self.world_frame = world_frame
        self.time_offset = float(time_offset)
        self.messages = 0
        self._bag = rosbag.Bag(self.path, "w", compression=compression)

    def namespace(self, sensor_id: int) -> str:
        return self.namespaces.get(sensor_id, f"/sensim/sensor_{sensor_id}").rstrip("/")

    def frame_id(self, sensor_id: int) -> str:
        return self.frame_ids.get(sensor_id, f"sensor_{sensor_id}")

    def _time(self, t: float) -> Any:
        return _stamp(self._rospy, t + self.time_offset)

    def write(self, out: SensorOutput) -> int:
        """Write one record; returns the messages written (0 for an end-of-stream marker)."""
        ns, frame = self.namespace(out.sensor_id), self.frame_id(out.sensor_id)
        when = self._time(out.time)
        items = []
        if out.kind == "point_cloud":
            meta = out.meta
            stamp = self._time(meta.frame_start_time) if meta is not None else when
            if meta is not None and meta.frame == "world":
                frame = self.world_frame
            items.append(("points", _cloud_message(out.value, stamp, frame,
                                                   meta.shape if meta else None, view=True)))
        elif out.kind == "imu":
            items.append(("data", imu_message(out.value, stamp=when, frame_id=frame)))
            if out.value.magnetic_field is not None:
                mag = self._msgs.MagneticField()
                mag.header.stamp, mag.header.frame_id = when, frame
                b = mag.magnetic_field
                b.x, b.y, b.z = (float(v) for v in out.value.magnetic_field)
                items.append(("mag", mag))
        elif out.kind == "scalar":
            js = self._msgs.JointState()
            js.header.stamp, js.header.frame_id = when, frame
            js.name = [f"sensor_{out.sensor_id}"]
            js.position = [float(out.value.position)]
            js.velocity = [] if out.value.speed is None else [float(out.value.speed)]
            items.append(("joint_states", js))
        elif out.kind == "cone":
            r = self._msgs.Range()
            r.header.stamp, r.header.frame_id = when, frame
            r.radiation_type = self._msgs.Range.INFRARED
            r.min_range, r.max_range = 0.0, float("inf")
            r.range = float(out.value.range) if out.value.detected else float("inf")
            items.append(("range", r))
        for topic, msg in items:
            if topic == "points":
                # written as raw bytes: the same record, without rosbag's copies of the data
                self._bag.write(f"{ns}/{topic}", (msg._type, _serialized_cloud(msg),
                                                  msg._md5sum, type(msg)), when, raw=True)
            else:
                self._bag.write(f"{ns}/{topic}", msg, when)
        self.messages += len(items)
        return len(items)

    def close(self) -> None:
        """Write the bag's index and close it. Idempotent."""
        if self._bag is not None:
            self._bag.close()
            self._bag = None

    def __enter__(self) -> "BagWriter":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


# ------------------------------------------------------------------------------ reading

def cloud_from_message(msg: Any) -> np.ndarray:
    """The points of a sensor_msgs/PointCloud2 as a structured array in row order: its fields
    at their offsets, point_step bytes a point (padding kept as gaps), in the message's byte
    order; rows are read apart when row_step has padding. ValueError for a field type
    PointField does not define or data shorter than the header says."""
    names, formats, offsets = [], [], []
    for f in msg.fields:
        if f.datatype not in _NUMPY:
            raise ValueError(f"PointCloud2: field {f.name!r} has datatype {f.datatype} "
                             "(expected 1..8)")
        dt = _NUMPY[f.datatype].newbyteorder(">" if msg.is_bigendian else "<")
        names.append(f.name)
        formats.append(dt if f.count <= 1 else (dt, (int(f.count),)))
        offsets.append(int(f.offset))
    try:
        dtype = np.dtype({"names": names, "formats": formats, "offsets": offsets,
                          "itemsize": int(msg.point_step)})
    except ValueError as exc:
        raise ValueError(f"PointCloud2: fields do not fit point_step {msg.point_step}: "
                         f"{exc}") from None
    height, width, row = int(msg.height), int(msg.width), int(msg.row_step)
    data = msg.data if isinstance(msg.data, (bytes, bytearray)) else bytes(msg.data)
    if row < width * dtype.itemsize or len(data) < row * height:
        raise ValueError(f"PointCloud2: {len(data)} bytes of data for {height} rows of "
                         f"row_step {row} ({width} points of {dtype.itemsize} bytes)")
    if row == width * dtype.itemsize:
        return np.frombuffer(data, dtype, count=height * width)
    return np.concatenate([np.frombuffer(data, dtype, count=width, offset=r * row)
                           for r in range(height)])


def _vector(v: Any) -> np.ndarray:
    return np.array([v.x, v.y, v.z], dtype=np.float64)


def _imu_from_message(msg: Any) -> ImuSample:
    """An ImuSample from a sensor_msgs/Imu; a vector whose covariance[0] is -1 is absent."""
    acc = (None if msg.linear_acceleration_covariance[0] == -1.0
           else _vector(msg.linear_acceleration))
    gyro = (None if msg.angular_velocity_covariance[0] == -1.0
            else _vector(msg.angular_velocity))
    present = [v for v in (acc, gyro) if v is not None]
    return ImuSample(acceleration=acc, angular_velocity=gyro, magnetic_field=None,
                     values=np.concatenate(present) if present else np.zeros(0))


_SENSOR_ID = re.compile(r"(?:^|/)sensor_(\d+)(?:/|$)")


class BagReading:
    """A ROS 1 bag's point clouds and IMU samples as SensorOutput records (read_bag).

    Each topic of type sensor_msgs/PointCloud2 or sensor_msgs/Imu is one sensor: its id is the
    N of a ``sensor_N`` in the topic's namespace or in its messages' frame id (the names
    BagWriter gives), else the first id not taken, in topic order; ``sensors`` maps topic ->
    id. A record's time is the bag's receive time of the message, a cloud's start_time and
    meta.frame_start_time its header stamp, its frame its index on the topic; clouds are
    taken as complete. Other message types are left out (``skipped`` counts them)."""

    truncated = False      # as Recording's: a bag's index tells whether it is whole

    def __init__(self, path: PathLike):
        rosbag, _, _ = import_ros()
        self.path = os.fspath(path)
        try:
            self._bag = rosbag.Bag(self.path, "r")
        except Exception as exc:    # rosbag raises its own ROSBagException, and OSError
            hint = ("; a bag whose writer did not close it has no index: `rosbag reindex` "
                    "rebuilds it" if "Unindexed" in str(exc) else "")
            raise ValueError(f"{self.path}: not a readable ROS 1 bag ({exc}){hint}") from None
        try:
            self._index()
        except Exception as exc:    # a corrupt message or connection record
            self._bag.close()
            raise ValueError(f"{self.path}: not a readable ROS 1 bag ({type(exc).__name__}: "
                             f"{exc})") from None

    def _index(self) -> None:
        """The topics read (kinds), the messages skipped and each topic's sensor id."""
        info = self._bag.get_type_and_topic_info()
        kinds = {"sensor_msgs/PointCloud2": "point_cloud", "sensor_msgs/Imu": "imu"}
        self.kinds = {t: kinds[v.msg_type] for t, v in sorted(info.topics.items())
                      if v.msg_type in kinds}
        self.skipped = sum(v.message_count for t, v in info.topics.items()
                           if t not in self.kinds)
        self.sensors: dict[str, int] = {}
        unnamed = []
        for topic in self.kinds:
            m = _SENSOR_ID.search(topic)
            if m is None:
                for _, msg, _ in self._bag.read_messages(topics=[topic]):
                    m = _SENSOR_ID.search(msg.header.frame_id)
                    break
            if m is not None and int(m.group(1)) not in self.sensors.values():
                self.sensors[topic] = int(m.group(1))
            else:
                unnamed.append(topic)
        for topic in unnamed:
            taken = set(self.sensors.values())
            self.sensors[topic] = next(i for i in range(1, len(taken) + 2) if i not in taken)
        self.sensors = {t: self.sensors[t] for t in sorted(self.sensors)}

    def outputs(self, sensor_ids: Optional[set[int]] = None) -> Iterator[SensorOutput]:
        """The records (of the sensors in sensor_ids, when given), in the bag's time order."""
        topics = [t for t, i in self.sensors.items() if sensor_ids is None or i in sensor_ids]
        if not topics:
            return
        frames = dict.fromkeys(topics, 0)
        messages = self._bag.read_messages(topics=topics)
        read = 0
        while True:
            topic = ""
            try:
                item = next(messages, None)
                if item is None:
                    return
                topic, msg, when = item
                out = self._output(topic, msg, when, frames[topic])
            except Exception as exc:   # rosbag and genpy raise many types for corrupt bytes
                where = (f"topic {topic}, message {frames[topic]}" if topic in frames
                         else f"message {read} of the topics {', '.join(topics)}")
                raise ValueError(f"{self.path}: {where}: cannot read it "
                                 f"({type(exc).__name__}: {exc})") from None
            frames[topic] += 1
            read += 1
            yield out

    def _output(self, topic: str, msg: Any, when: Any, frame: int) -> SensorOutput:
        sid, kind = self.sensors[topic], self.kinds[topic]
        t = when.to_sec()
        if kind == "point_cloud":
            stamp = msg.header.stamp.to_sec()
            meta = CloudMeta(frame_start_time=stamp, complete=True,
                             frame="world" if msg.header.frame_id == "world" else "sensor",
                             encoding=0, max_error=0.0, height=int(msg.height),
                             width=int(msg.width))
            return SensorOutput(sid, t, frame, kind, cloud_from_message(msg), meta,
                                start_time=stamp)
        return SensorOutput(sid, t, frame, kind, _imu_from_message(msg))

    def __iter__(self) -> Iterator[SensorOutput]:
        return self.outputs()

    def close(self) -> None:
        self._bag.close()

    def __enter__(self) -> "BagReading":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def read_bag(path: PathLike) -> BagReading:
    """Open a ROS 1 bag for reading its clouds and IMU samples (BagReading); ValueError when
    it is not a readable bag."""
    return BagReading(path)
