# SPDX-License-Identifier: MIT
"""ROS 1 messages of the Foxglove bridge: their definitions (the ``ros1msg`` schema text a
viewer decodes with) and their serialization, for the records sensimd streams.

ROS 1 serialization is little-endian and unpadded: integers and floats as they are, ``bool`` one
byte, ``time`` two uint32 (seconds, nanoseconds), a string or a variable-length array a uint32
count then the elements, a fixed-length array its elements alone. sensim's point layouts are
already those of ``sensor_msgs/PointCloud2`` (same datatype numbers, little-endian packed
points), so a raw cloud's bytes are sent as they arrived.
"""

from __future__ import annotations

import struct
from typing import Any, Iterable, Sequence

import numpy as np

__all__ = ["POINT_CLOUD2", "IMU", "MAGNETIC_FIELD", "TF_MESSAGE", "SCHEMAS", "stamp",
           "header", "point_cloud2", "point_cloud2_parts", "imu", "magnetic_field",
           "tf_message"]

POINT_CLOUD2 = "sensor_msgs/PointCloud2"
IMU = "sensor_msgs/Imu"
MAGNETIC_FIELD = "sensor_msgs/MagneticField"
TF_MESSAGE = "tf2_msgs/TFMessage"

# Definitions as ROS 1 concatenates them for a message with dependencies (the form rosbag and
# ROS 1 bridges send): the message itself, then each type it uses after a line of 80 '='
# and "MSG: package/Type".
_SEP = "=" * 80 + "\n"
_HEADER = "MSG: std_msgs/Header\nuint32 seq\ntime stamp\nstring frame_id\n"
_VECTOR3 = "MSG: geometry_msgs/Vector3\nfloat64 x\nfloat64 y\nfloat64 z\n"
_QUATERNION = "MSG: geometry_msgs/Quaternion\nfloat64 x\nfloat64 y\nfloat64 z\nfloat64 w\n"

SCHEMAS = {
    POINT_CLOUD2: (
        "std_msgs/Header header\n"
        "uint32 height\n"
        "uint32 width\n"
        "sensor_msgs/PointField[] fields\n"
        "bool is_bigendian\n"
        "uint32 point_step\n"
        "uint32 row_step\n"
        "uint8[] data\n"
        "bool is_dense\n"
        + _SEP + _HEADER + _SEP +
        "MSG: sensor_msgs/PointField\n"
        "uint8 INT8=1\nuint8 UINT8=2\nuint8 INT16=3\nuint8 UINT16=4\n"
        "uint8 INT32=5\nuint8 UINT32=6\nuint8 FLOAT32=7\nuint8 FLOAT64=8\n"
        "string name\n"
        "uint32 offset\n"
        "uint8 datatype\n"
        "uint32 count\n"),
    IMU: (
        "std_msgs/Header header\n"
        "geometry_msgs/Quaternion orientation\n"
        "float64[9] orientation_covariance\n"
        "geometry_msgs/Vector3 angular_velocity\n"
        "float64[9] angular_velocity_covariance\n"
        "geometry_msgs/Vector3 linear_acceleration\n"
        "float64[9] linear_acceleration_covariance\n"
        + _SEP + _HEADER + _SEP + _QUATERNION + _SEP + _VECTOR3),
    MAGNETIC_FIELD: (
        "std_msgs/Header header\n"
        "geometry_msgs/Vector3 magnetic_field\n"
        "float64[9] magnetic_field_covariance\n"
        + _SEP + _HEADER + _SEP + _VECTOR3),
    TF_MESSAGE: (
        "geometry_msgs/TransformStamped[] transforms\n"
        + _SEP +
        "MSG: geometry_msgs/TransformStamped\n"
        "std_msgs/Header header\n"
        "string child_frame_id\n"
        "geometry_msgs/Transform transform\n"
        + _SEP + _HEADER + _SEP +
        "MSG: geometry_msgs/Transform\n"
        "geometry_msgs/Vector3 translation\n"
        "geometry_msgs/Quaternion rotation\n"
        + _SEP + _VECTOR3 + _SEP + _QUATERNION),
}

_U32 = struct.Struct("<I")
_STAMP_MAX_NS = (2**32 - 1) * 10**9 + 999_999_999  # the last instant a ROS 1 time can hold


def stamp(t: float) -> int:
    """Simulation time t (s) as whole nanoseconds, rounded, clamped to what ROS 1 time holds:
    [0, 2^32 s). sensim's times may be negative; ROS 1 times may not."""
    if not t > 0.0:  # negative, zero or NaN
        return 0
    return min(int(round(t * 1e9)), _STAMP_MAX_NS)


def _string(s: str) -> bytes:
    b = s.encode("utf-8")
    return _U32.pack(len(b)) + b


def header(seq: int, t_ns: int, frame_id: str) -> bytes:
    """std_msgs/Header: seq (taken modulo 2^32), stamp, frame_id."""
    sec, nsec = divmod(t_ns, 10**9)
    return struct.pack("<III", seq & 0xFFFFFFFF, sec, nsec) + _string(frame_id)


def point_cloud2_parts(seq: int, t_ns: int, frame_id: str, height: int, width: int,
                       fields: Iterable[tuple[str, int, int, int]], point_step: int,
                       data: Any, is_dense: bool) -> tuple[bytes, Any, bytes]:
    """sensor_msgs/PointCloud2 of `height` x `width` little-endian points of `point_step` bytes
    (row-major), fields as (name, offset, datatype, count) with sensim's (= ROS's) datatype
    numbers, as three parts whose concatenation is the message: the bytes before the points,
    `data` itself (any bytes-like object of height * width * point_step bytes, not copied),
    and the byte after. Sent as fragments of one WebSocket message, a cloud is never copied
    to be framed."""
    fields = list(fields)
    size = memoryview(data).nbytes
    if size != height * width * point_step:
        raise ValueError(f"data: {size} bytes for {height} x {width} points of "
                         f"{point_step} bytes")
    head = [header(seq, t_ns, frame_id), struct.pack("<III", height, width, len(fields))]
    for name, offset, datatype, count in fields:
        head.append(_string(name) + struct.pack("<IBI", offset, datatype, count))
    head.append(struct.pack("<BIII", 0, point_step, width * point_step, size))
    return b"".join(head), data, (b"\x01" if is_dense else b"\x00")


def point_cloud2(*args: Any, **kwargs: Any) -> bytes:
    """The message of point_cloud2_parts as one bytes object."""
    return b"".join(point_cloud2_parts(*args, **kwargs))


def _vec3(v: Sequence[float] | None) -> bytes:
    return struct.pack("<3d", *(v if v is not None else (0.0, 0.0, 0.0)))


def _covariance(known: bool) -> bytes:
    # REP-145 / sensor_msgs: all zeros = covariance unknown; element 0 = -1: no such data.
    return struct.pack("<9d", *([0.0] * 9 if known else [-1.0] + [0.0] * 8))


def imu(seq: int, t_ns: int, frame_id: str, angular_velocity: Sequence[float] | None,
        linear_acceleration: Sequence[float] | None) -> bytes:
    """sensor_msgs/Imu. An IMU reports no orientation, so orientation_covariance[0] is -1 (as
    sensor_msgs says for "no orientation estimate"); a missing gyroscope or accelerometer gets
    zeros and -1 in its covariance likewise. Known covariances are unknown to an observer:
    zeros."""
    return b"".join((header(seq, t_ns, frame_id),
                     struct.pack("<4d", 0.0, 0.0, 0.0, 1.0), _covariance(False),
                     _vec3(angular_velocity), _covariance(angular_velocity is not None),
                     _vec3(linear_acceleration), _covariance(linear_acceleration is not None)))


def magnetic_field(seq: int, t_ns: int, frame_id: str, field: Sequence[float]) -> bytes:
    """sensor_msgs/MagneticField in tesla, covariance unknown (zeros)."""
    return header(seq, t_ns, frame_id) + _vec3(field) + _covariance(True)


def tf_message(transforms: Sequence[tuple[int, str, str, Sequence[float]]]) -> bytes:
    """tf2_msgs/TFMessage of (stamp ns, parent frame, child frame, pose) transforms; a pose is
    px py pz qx qy qz qw: the child frame's origin and orientation in the parent frame."""
    parts = [_U32.pack(len(transforms))]
    for t_ns, parent, child, pose in transforms:
        p = np.asarray(pose, dtype=np.float64).reshape(7)
        parts.append(header(0, t_ns, parent) + _string(child) + struct.pack("<7d", *p))
    return b"".join(parts)
