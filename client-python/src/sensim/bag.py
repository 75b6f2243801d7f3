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
"""

from __future__ import annotations

import os
from typing import Any, Mapping, Optional, Union

import numpy as np

from .outputs import SensorOutput

__all__ = ["BagWriter", "point_cloud2", "imu_message", "import_ros"]

PathLike = Union[str, "os.PathLike[str]"]

# sensor_msgs/PointField datatypes by (numpy kind, size): the protocol's numbers too.
_DATATYPES = {("i", 1): 1, ("u", 1): 2, ("i", 2): 3, ("u", 2): 4, ("i", 4): 5, ("u", 4): 6,
              ("f", 4): 7, ("f", 8): 8}


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
    msg.is_dense = dense
    return msg


def _own_bytes(arr: np.ndarray, le: np.dtype) -> bytes:
    """The points as little-endian records of dtype `le`: when `arr` already is such an array
    viewing the whole of a bytes object (a cloud decoded from the daemon's message), that
    object itself; else a copy whose padding bytes are zero, so that a file written twice is
    the same."""
    base = arr
    while isinstance(base, np.ndarray) and base.base is not None:
        base = base.base
    if (arr.dtype == le and isinstance(base, bytes) and arr.flags.c_contiguous
            and len(base) == arr.nbytes
            and np.frombuffer(base, np.uint8).ctypes.data == arr.ctypes.data):
        return base
    out = np.zeros(len(arr), dtype=le)
    for name in arr.dtype.names:
        out[name] = arr[name]
    return out.tobytes()


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
            items.append(("points", point_cloud2(out.value, stamp=stamp, frame_id=frame,
                                                 shape=meta.shape if meta else None)))
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
