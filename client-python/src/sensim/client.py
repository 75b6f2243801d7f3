# SPDX-License-Identifier: MIT
"""The sensim Python client: one blocking TCP connection to sensimd speaking protocol v1.

Requests carry increasing ids; replies are matched by id, so requests may be pipelined
(``send_request`` several, then ``wait_reply`` each). Pushed sensor data (id 0) is kept in a
queue bounded in bytes and in frames whose oldest whole frames are dropped, and counted, when it
is full. A Client is used by one thread at a time.
"""

from __future__ import annotations

import collections
import os
import socket
import sys
import time
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

import numpy as np
from google.protobuf import json_format
from google.protobuf.message import DecodeError, Message

from . import _framing, errors, presets
from ._proto import pb

if TYPE_CHECKING:
    from .outputs import SensorOutput, StepDone

__all__ = ["Client", "PROTOCOL_VERSION", "RAYCAST_DTYPE", "point_cloud_to_numpy"]

PROTOCOL_VERSION = pb.PROTOCOL_VERSION

# Bytes of pushed frames a Client keeps unread unless told otherwise (Client(pushed_max_bytes=)):
# a few frames of the largest lidars (an OS1-128 frame of x y z intensity is 4 MiB), twice the
# daemon's default queue of one subscription (--subscriber-max-bytes).
DEFAULT_PUSHED_MAX_BYTES = 64 << 20

# What a Client keeps of the records sent ahead of one StepDone (docs/streams.md, "Outputs of a
# step"): at most this many frames, together at most this many bytes. The daemon sends one such
# frame per sensor (max_sensors, 1024) and keeps a whole reply within its max_queue_bytes
# (256 MiB); a peer that sends more does not speak the protocol (errors.ProtocolError naming the
# limit, the connection closed).
STEP_MAX_PARTS = 65536
STEP_MAX_PART_BYTES = 256 << 20

# The quantization steps the daemon takes in Subscribe.precision (m), whatever the encoding.
SUBSCRIBE_MIN_PRECISION = 1e-6
SUBSCRIBE_MAX_PRECISION = 1.0

# Result of Client.raycast: one record per ray, laid out like RaycastResult.hits_bytes (48 bytes:
# distance at 0, normal at 8, object id at 32, label at 36, 8 reserved bytes), so that the reply
# is read in place.
RAYCAST_DTYPE = np.dtype({
    "names": ["distances", "normals", "object_ids", "labels"],
    "formats": ["<f8", ("<f8", (3,)), "<u4", "<u4"],  # m, +inf on a miss; world frame, facing
    "offsets": [0, 8, 32, 36],                        # the ray, 0 on a miss; 0 on a miss; label
    "itemsize": 48,
})
# A hit's record in the reply to Raycast.omit_misses (RaycastResult.hit_mask): the first 40
# bytes of RAYCAST_DTYPE's, without the reserved ones.
_MASKED_HIT_BYTES = 40
# A miss as RAYCAST_DTYPE bytes: distance +inf, every other byte zero.
_MISS_ROW = np.zeros(1, dtype=RAYCAST_DTYPE)
_MISS_ROW["distances"] = np.inf
_MISS_ROW = _MISS_ROW.view(np.uint8)

_ROLES = {"controller": pb.ROLE_CONTROLLER, "observer": pb.ROLE_OBSERVER}
_RETENTIONS = {"default": pb.RETENTION_DEFAULT, "destroy": pb.RETENTION_DESTROY,
               "keep": pb.RETENTION_KEEP}
_ENTITIES = {"geometry": pb.ENTITY_GEOMETRY, "material": pb.ENTITY_MATERIAL,
             "medium": pb.ENTITY_MEDIUM, "body": pb.ENTITY_BODY, "object": pb.ENTITY_OBJECT,
             "joint": pb.ENTITY_JOINT, "sensor": pb.ENTITY_SENSOR,
             "environment": pb.ENTITY_ENVIRONMENT}
_JOINTS = {"revolute": pb.JOINT_REVOLUTE, "prismatic": pb.JOINT_PRISMATIC}
_ENCODINGS = {"raw": pb.ENCODING_RAW, "zstd": pb.ENCODING_ZSTD,
              "quantized_zstd": pb.ENCODING_QUANTIZED_ZSTD}
_PRIMITIVES = {"box": ("half_extents",), "sphere": ("radius",),
               "cylinder": ("radius", "half_length"), "capsule": ("radius", "half_length"),
               "plane": ("half_size",), "ellipsoid": ("radii",),
               "rectangle": ("half_size_x", "half_size_y", "one_sided"),
               "height_field": ("heights", "half_size_x", "half_size_y", "base_depth")}
_MATERIALS = ("lambertian", "two_layer")
_AMBIENTS = ("custom", "clear_air", "fog", "rain", "snow")
_SENSOR_CONFIGS = {"LidarConfig": "lidar", "ImuConfig": "imu", "EncoderConfig": "encoder",
                   "OdometerConfig": "odometer", "ConeConfig": "cone"}


_LIDAR_PATTERNS = ("spinning", "vlp16", "ouster", "flash", "hdl64e", "bpearl", "custom",
                   "livox")
# LidarConfig enums by lowercase name: field -> (wire prefix, names).
_LIDAR_ENUMS = {
    "return_mode": ("RETURN_", ("strongest", "first", "last", "dual", "all")),
    "frame": ("FRAME_", ("sensor", "world")),
    "publish": ("PUBLISH_", ("per_revolution", "per_step")),
    "misses": ("MISSES_", ("remove", "zero", "nan")),
    "layout": ("LAYOUT_", ("fields", "velodyne", "ouster", "xyzi")),
}


def _enum(value: Any, table: Mapping[str, int], what: str) -> int:
    """Map a lowercase name (or an enum number) to its wire value."""
    if isinstance(value, str):
        try:
            return table[value.lower()]
        except KeyError:
            raise ValueError(f"{what}: unknown value {value!r}; one of {sorted(table)}") from None
    return int(value)


def _numbers(value: Any, what: str) -> np.ndarray:
    """value as a numpy array of numbers, not converted yet: anything array-like in any memory
    layout (broadcast, sliced, reversed, Fortran-ordered), byte order and integer or floating
    type (nested lists too). Strings, complex or boolean values, ragged rows and other objects
    (None, which numpy would read as NaN) raise ValueError naming `what`."""
    try:
        arr = np.asarray(value)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{what}: expected numbers ({exc})") from None
    if arr.dtype.kind not in "iuf":
        raise ValueError(f"{what}: expected numbers, got {arr.dtype} values")
    return arr


def _flat(value: Any, what: str, dtype: str = "<f8") -> np.ndarray:
    """value (see _numbers) as a flat C-contiguous array of the wire type `dtype`, converted in
    one pass (itself when it already is one)."""
    return np.ascontiguousarray(_numbers(value, what), dtype=dtype).reshape(-1)


def _vec3(value: Any, what: str) -> Any:
    if isinstance(value, pb.Vec3):
        return value
    v = _flat(value, what)
    if v.shape != (3,):
        raise ValueError(f"{what}: expected 3 values (x, y, z), got shape {np.shape(value)}")
    return pb.Vec3(x=float(v[0]), y=float(v[1]), z=float(v[2]))


def _quat(value: Any, what: str) -> Any:
    if isinstance(value, pb.Quat):
        return value
    q = _flat(value, what)
    if q.shape != (4,):
        raise ValueError(f"{what}: expected a quaternion (x, y, z, w), got shape {np.shape(value)}")
    return pb.Quat(x=float(q[0]), y=float(q[1]), z=float(q[2]), w=float(q[3]))


def _pose(value: Any, what: str) -> Any:
    """Build a Pose from a Pose, a mapping {position, orientation}, 7 numbers (px py pz qx qy qz
    qw), 3 numbers (position only) or a pair (position, orientation)."""
    if isinstance(value, pb.Pose):
        return value
    pose = pb.Pose()
    if isinstance(value, Mapping):
        position, orientation = value.get("position"), value.get("orientation")
    elif len(value) == 2:
        position, orientation = value
    else:
        flat = _flat(value, what)
        if flat.shape == (7,):
            position, orientation = flat[:3], flat[3:]
        elif flat.shape == (3,):
            position, orientation = flat, None
        else:
            raise ValueError(f"{what}: expected (position, orientation), 7 or 3 numbers")
    if position is not None:
        pose.position.CopyFrom(_vec3(position, f"{what}.position"))
    if orientation is not None:
        pose.orientation.CopyFrom(_quat(orientation, f"{what}.orientation"))
    return pose


def _check_integers(arr: np.ndarray, what: str) -> None:
    """Refuse fractional or non-finite values of an array meant to hold integers."""
    if arr.dtype.kind == "f" and not (np.all(np.isfinite(arr)) and np.all(arr == np.floor(arr))):
        raise ValueError(f"{what}: expected integers, got fractional or non-finite values")


def _check_ids(arr: np.ndarray, what: str) -> None:
    """Refuse fractional, negative or too large values of an array of uint32 ids or indices."""
    if not arr.size:
        return
    _check_integers(arr, what)
    if arr.min() < 0 or arr.max() > 0xFFFFFFFF:
        raise ValueError(f"{what}: values must lie in [0, 2**32)")


def _packed(value: Any, dtype: str, width: int, what: str) -> np.ndarray:
    """The little-endian wire form of an array of `width` values per row (`dtype` "<f4" or
    "<u4"), as a flat C-contiguous array converted in one pass (itself when it already is one);
    bytes pass through as they are, viewed as uint8."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        data = np.frombuffer(value, np.uint8)
        if data.nbytes % (np.dtype(dtype).itemsize * width) != 0:
            raise ValueError(f"{what}: {data.nbytes} bytes is not a whole number of rows")
        return data
    arr = _numbers(value, what)
    if np.dtype(dtype).kind == "u":
        _check_ids(arr, what)
    if arr.size % width != 0 or (arr.ndim > 1 and arr.shape[-1] != width):
        raise ValueError(f"{what}: expected rows of {width} values, got shape {arr.shape}")
    return np.ascontiguousarray(arr, dtype=dtype).reshape(-1)


def _rows(value: Any, width: int, what: str, dtype: str = "<f8") -> np.ndarray:
    """An (N, width) C-contiguous array of the wire type `dtype` from anything array-like of N
    rows (or N * width values; see _numbers), converted in one pass: it is sent from its own
    memory, so an array that already is one is sent as it is, without a copy."""
    arr = _numbers(value, what)
    if arr.ndim == 1 and arr.size % width == 0:
        shape = (arr.size // width, width)
    elif arr.ndim == 2 and arr.shape[1] == width:
        shape = arr.shape
    else:
        raise ValueError(f"{what}: expected shape (N, {width}), got {arr.shape}")
    return np.ascontiguousarray(arr, dtype=dtype).reshape(shape)


def _ids(value: Any, what: str) -> np.ndarray:
    """Ids as a flat little-endian uint32 array (any array-like, see _numbers); fractional,
    negative or too large ids are refused."""
    arr = _numbers(value, what)
    _check_ids(arr, what)
    return np.ascontiguousarray(arr, dtype="<u4").reshape(-1)


# Envelope.raycast_result.hits_bytes, as field numbers
_HITS_PATH = (pb.Envelope.DESCRIPTOR.fields_by_name["raycast_result"].number,
              pb.RaycastResult.DESCRIPTOR.fields_by_name["hits_bytes"].number)
# Where a pushed cloud's points are in its frame (Client(pushed_in_place=True))
_PUSHED_CLOUD_PATH = (pb.Envelope.DESCRIPTOR.fields_by_name["sensor_data"].number,
                      pb.SensorData.DESCRIPTOR.fields_by_name["point_cloud"].number,
                      pb.PointCloud.DESCRIPTOR.fields_by_name["data"].number)

# A raycast of at least PIPELINE_MIN_RAYS rays travels as requests of about PIPELINE_RAYS rays
# sent back to back, PIPELINE_WINDOW of them in flight at a time, so that the daemon traces one
# while the next arrives and the last replies leave (see Client.raycast).
PIPELINE_MIN_RAYS = 1 << 16
# A request whose bulk arrays total at most this many bytes is serialized as one message (the
# arrays copied); larger ones are sent from the arrays' own memory.
SMALL_BULK_BYTES = 1 << 14
PIPELINE_RAYS = 1 << 15
PIPELINE_WINDOW = 4


def spread_hits(mask: bytes, records: Any, n: int) -> np.recarray:
    """The n RAYCAST_DTYPE records of a reply to Raycast.omit_misses: hit_mask (ray i at bit
    i % 8 of byte i / 8) and the 40-byte records of the set bits in ray order (any buffer),
    the others misses (distance +inf, every other byte 0). Refused (ProtocolError, naming the
    field) unless the mask has ceil(n / 8) bytes, no bit past the last ray and one bit per
    record."""
    if len(mask) != (n + 7) // 8:
        raise errors.ProtocolError(
            f"raycast: hit_mask has {len(mask)} bytes for {n} rays, expected {(n + 7) // 8}")
    bits = np.unpackbits(np.frombuffer(mask, dtype=np.uint8), bitorder="little")
    if bits[n:].any():
        raise errors.ProtocolError("raycast: hit_mask sets bits past the last ray")
    hit = bits[:n].view(bool)
    raw = np.frombuffer(records, dtype=np.uint8)
    count = int(np.count_nonzero(hit))
    if len(raw) != count * _MASKED_HIT_BYTES:
        raise errors.ProtocolError(
            f"raycast: hits_bytes has {len(raw)} bytes but hit_mask sets {count} bits "
            f"({_MASKED_HIT_BYTES} bytes a hit)")
    out = np.empty(n, dtype=RAYCAST_DTYPE)
    rows = out.view(np.uint8).reshape(n, RAYCAST_DTYPE.itemsize)
    rows[:] = _MISS_ROW
    rows[hit, :_MASKED_HIT_BYTES] = raw.reshape(count, _MASKED_HIT_BYTES)
    return out.view(np.recarray)


def raycast_hits(result: Any, n: int, omit_misses: bool = False) -> np.recarray:
    """The hits of a RaycastResult for n rays as a RAYCAST_DTYPE record array (a copy):
    from hit_mask and hits_bytes when the request had omit_misses (spread_hits), from
    hits_bytes, or from the four packed arrays of the old form."""
    if omit_misses:
        if not result.HasField("hit_mask"):
            raise errors.ProtocolError("raycast: the reply to omit_misses has no hit_mask")
        return spread_hits(result.hit_mask, result.hits_bytes, n)
    if result.HasField("hits_bytes"):
        data = result.hits_bytes
        if len(data) != n * RAYCAST_DTYPE.itemsize:
            raise errors.ProtocolError(f"raycast: {len(data)} bytes of hits_bytes for {n} rays")
        return np.frombuffer(bytearray(data), dtype=RAYCAST_DTYPE).view(np.recarray)
    out = np.zeros(n, dtype=RAYCAST_DTYPE).view(np.recarray)
    distances = np.asarray(result.distances, dtype=float)
    if distances.shape != (n,):
        raise errors.ProtocolError(f"raycast: {len(distances)} distances for {n} rays")
    out.distances = distances
    for name, got, width in (("object_ids", result.object_ids, 1),
                             ("labels", result.labels, 1), ("normals", result.normals, 3)):
        if len(got) == 0:
            continue
        if len(got) != n * width:
            raise errors.ProtocolError(f"raycast: {len(got)} {name} for {n} rays")
        out[name] = np.asarray(got).reshape((n, 3) if width == 3 else n)
    return out


def _enum_number(enum_type: Any, value: Any, what: str) -> int:
    """An enum value from its number, its full name ("SPIN_CLOCKWISE") or its name without the
    type's common prefix, any case ("clockwise")."""
    if not isinstance(value, str):
        return int(value)
    names = [v.name for v in enum_type.values]
    prefix = names[0][:names[0].find("_") + 1] if "_" in names[0] else ""
    if not all(n.startswith(prefix) for n in names):
        prefix = ""
    key = value.upper()
    for v in enum_type.values:
        if v.name == key or v.name == prefix + key:
            return v.number
    short = sorted(n[len(prefix):].lower() for n in names)
    raise ValueError(f"{what}: unknown value {value!r}; one of {short}") from None


def _set_fields(msg: Message, params: Mapping[str, Any], what: str) -> None:
    """Set fields of msg from keyword arguments or a dict in protobuf JSON form: keys by field
    name (snake_case) or JSON name (camelCase); enums by number or name (full, or without the
    type's prefix, any case); messages from messages or dicts (the same rules, nested), Vec3,
    Quat, Pose and Mat3 also from numbers; repeated numbers from any array-like (any layout,
    byte order, integer or float type), flattened and converted once. A string for a number
    ("NaN", "1e3", an int64) is read as protobuf's JSON form reads it."""
    fields = msg.DESCRIPTOR.fields_by_name
    json_names = {f.json_name: f for f in msg.DESCRIPTOR.fields}
    for key, value in params.items():
        if value is None:
            continue
        field = fields.get(key) or json_names.get(key)
        if field is None:
            raise TypeError(f"{what}: unknown field {key!r}; fields: {sorted(fields)}")
        key = field.name
        where = f"{what}.{key}"
        repeated = field.label == field.LABEL_REPEATED
        if field.message_type is not None:
            if repeated:
                items = getattr(msg, key)
                for i, v in enumerate(value):
                    _set_message(items.add(), v, f"{where}[{i}]")
            else:
                _set_message(getattr(msg, key), value, where)
        elif field.enum_type is not None:
            if repeated:
                values = [value] if isinstance(value, (str, int, np.integer)) else \
                    (value.reshape(-1).tolist() if isinstance(value, np.ndarray) else value)
                getattr(msg, key).extend(_enum_number(field.enum_type, v, where) for v in values)
            else:
                setattr(msg, key, _enum_number(field.enum_type, value, where))
        elif repeated and field.cpp_type == field.CPPTYPE_STRING:
            getattr(msg, key).extend([value] if isinstance(value, (str, bytes)) else value)
        elif repeated and isinstance(value, (list, tuple)) and \
                any(isinstance(v, str) for v in value):
            _parse_json(msg, field, list(value), where)   # JSON spellings: "NaN", "Infinity"
        elif repeated:
            arr = _numbers(value, where).reshape(-1)
            if field.cpp_type not in (field.CPPTYPE_DOUBLE, field.CPPTYPE_FLOAT):
                _check_integers(arr, where)
                arr = arr.astype(np.int64)
            try:
                getattr(msg, key).extend(arr.tolist())
            except (TypeError, ValueError) as exc:   # out of the field's range
                raise ValueError(f"{where}: {exc}") from None
        else:
            if isinstance(value, (np.generic, np.ndarray)) and np.ndim(value) == 0:
                value = value.item()
            if isinstance(value, str) and field.cpp_type != field.CPPTYPE_STRING:
                _parse_json(msg, field, value, where)
                continue
            try:
                setattr(msg, key, value)
            except (TypeError, ValueError) as exc:
                raise type(exc)(f"{where}: {exc}") from None


def _parse_json(msg: Message, field: Any, value: Any, what: str) -> None:
    """Set field of msg from value as protobuf's JSON parser reads it."""
    try:
        json_format.ParseDict({field.json_name: value}, msg)
    except json_format.ParseError as exc:
        raise ValueError(f"{what}: {exc}") from None


def _set_message(sub: Message, value: Any, what: str) -> None:
    """Set message `sub` (a field of its parent, which it joins even when empty) from a
    message, a dict of its fields (_set_fields) or, for Vec3, Quat, Pose and Mat3, numbers."""
    sub.SetInParent()
    if isinstance(value, Message):
        sub.CopyFrom(value)
    elif isinstance(value, Mapping):
        _set_fields(sub, value, what)
    elif sub.DESCRIPTOR.name == "Vec3":
        sub.CopyFrom(_vec3(value, what))
    elif sub.DESCRIPTOR.name == "Quat":
        sub.CopyFrom(_quat(value, what))
    elif sub.DESCRIPTOR.name == "Pose":
        sub.CopyFrom(_pose(value, what))
    elif sub.DESCRIPTOR.name == "Mat3":
        del sub.m[:]
        sub.m.extend(_flat(value, what).tolist())   # row-major, any layout: (3, 3) or 9 values
    else:
        raise TypeError(f"{what}: expected a {sub.DESCRIPTOR.name} (a message or a dict)")


def _choose(msg: Message, kind: str, params: Mapping[str, Any]) -> Message:
    """Select oneof member `kind` of msg (even with no parameters) and set its fields."""
    sub = getattr(msg, kind)
    sub.SetInParent()
    _set_fields(sub, params, kind)
    return msg


# PointField.datatype -> numpy type of one element
_POINT_TYPES = {pb.PointField.INT8: "i1", pb.PointField.UINT8: "u1", pb.PointField.INT16: "<i2",
                pb.PointField.UINT16: "<u2", pb.PointField.INT32: "<i4",
                pb.PointField.UINT32: "<u4", pb.PointField.FLOAT32: "<f4",
                pb.PointField.FLOAT64: "<f8"}


def _unknown_varint(msg: Message, number: int) -> int | None:
    """The value of field `number` that msg's parser kept as unknown (an enum value this
    client's protocol module does not know reads as unset), or None."""
    try:
        from google.protobuf import unknown_fields
        found = unknown_fields.UnknownFieldSet(msg)
    except (ImportError, AttributeError):
        found = msg.UnknownFields()
    value = None
    for field in found:
        if field.field_number == number and field.wire_type == 0:
            value = field.data
    return value


def _enum_unknown(msg: Message, name: str) -> str:
    """' (N on the wire)' when enum field `name` of msg arrived with a value unknown here."""
    value = _unknown_varint(msg, msg.DESCRIPTOR.fields_by_name[name].number)
    return "" if value is None else f" ({value} on the wire)"


def _cloud_dtype(cloud: Any) -> np.dtype:
    """The record type of a PointCloud's points, from its fields (like sensor_msgs/PointCloud2:
    name, offset, datatype, count elements; a count of 0 reads as 1) and point_step. Raises
    errors.ProtocolError naming the field when the layout is not one: an unknown datatype, an
    empty or repeated name, a field passing point_step or overlapping another, point_step 0
    for a cloud with points."""
    step = cloud.point_step
    names, formats, offsets, spans = [], [], [], []
    for i, f in enumerate(cloud.fields):
        what = f"point_cloud.fields[{i}]"
        base = _POINT_TYPES.get(f.datatype)
        if base is None:
            raise errors.ProtocolError(
                f"{what}.datatype: {f.datatype}{_enum_unknown(f, 'datatype')} is not a "
                "datatype (1 INT8 .. 8 FLOAT64)")
        if not f.name:
            raise errors.ProtocolError(f"{what}.name: empty")
        if f.name in names:
            raise errors.ProtocolError(
                f"{what}.name: {f.name!r} repeats fields[{names.index(f.name)}]")
        count = max(f.count, 1)
        size = np.dtype(base).itemsize
        end = f.offset + count * size
        if end > step:
            raise errors.ProtocolError(
                f"{what} ({f.name!r}): offset {f.offset} + {count} x {size} bytes passes "
                f"point_step {step}")
        names.append(f.name)
        formats.append((base, (count,)) if count > 1 else base)
        offsets.append(f.offset)
        spans.append((f.offset, end, i))

    # sorted by offset, a field overlapping any other overlaps the one before it
    spans.sort()
    for (lo, hi, i), (lo2, hi2, j) in zip(spans, spans[1:]):
        if lo2 < hi:
            raise errors.ProtocolError(
                f"point_cloud.fields[{j}] ({names[j]!r}, bytes {lo2}..{hi2 - 1}) overlaps "
                f"fields[{i}] ({names[i]!r}, bytes {lo}..{hi - 1})")
    if step == 0 and cloud.count:
        raise errors.ProtocolError(f"point_cloud.point_step: 0 for {cloud.count} points")
    return np.dtype({"names": names, "formats": formats, "offsets": offsets, "itemsize": step})


def point_cloud_to_numpy(cloud: Any, max_bytes: int = _framing.DEFAULT_MAX_FRAME_BYTES,
                         data: Any = None) -> np.ndarray:
    """Decode a PointCloud message (any encoding) into a structured array, one record per
    point, with the cloud's own field names and types (like sensor_msgs/PointCloud2).

    A compressed cloud (ZSTD, QUANTIZED_ZSTD) decodes into count x point_step bytes, at most
    `max_bytes` (default: the client's default frame bound, 256 MiB), checked before anything
    is decompressed; decompression never holds more than that. Every decoding failure (the
    layout, the sizes, the encoded bytes) raises errors.ProtocolError naming the field.

    The array is flat, in the cloud's order; an organised cloud (height > 1: the Ouster layout,
    rows of beams) reshapes with ``points.reshape(cloud.height, cloud.width)``. data: the
    cloud's `data` bytes when they are not in the message (a buffer: a pushed frame read in
    place, Client(pushed_in_place=True)); a RAW cloud's array is then a view of it."""
    dtype = _cloud_dtype(cloud)
    if data is None:
        data = cloud.data
    count, step = cloud.count, cloud.point_step
    # organisation, as sensor_msgs/PointCloud2 (absent: one row of the points)
    if (cloud.height or cloud.width) and cloud.height * cloud.width != count:
        raise errors.ProtocolError(f"point_cloud.height: {cloud.height} x width {cloud.width} "
                                   f"is not count {count}")
    size = count * step
    encoding = cloud.encoding
    if encoding == pb.ENCODING_RAW and not cloud.HasField("encoding"):
        encoding = _unknown_varint(cloud, cloud.DESCRIPTOR.fields_by_name["encoding"].number)
        encoding = pb.ENCODING_RAW if encoding is None else encoding
    if encoding == pb.ENCODING_RAW:
        if len(data) != size:
            raise errors.ProtocolError(f"point_cloud.data: {len(data)} bytes for count {count} "
                                       f"x point_step {step} = {size}")
    elif encoding in (pb.ENCODING_ZSTD, pb.ENCODING_QUANTIZED_ZSTD):
        if size > max_bytes:
            raise errors.ProtocolError(
                f"point_cloud.count: {count} points of point_step {step} are {size} bytes, "
                f"more than max_bytes {max_bytes}")
        data = bytes(data)      # compressed: a fraction of the cloud's size
        if encoding == pb.ENCODING_ZSTD:
            data = _unzstd(data, size, "point_cloud.data")
        else:
            data = decode_quantized_zstd(data, count, step, max_bytes)
    else:
        raise errors.ProtocolError(f"point_cloud.encoding: {encoding} is not an encoding "
                                   "(0 RAW, 1 ZSTD, 2 QUANTIZED_ZSTD)")
    return np.frombuffer(data, dtype=dtype, count=count)


class _PastBound(Exception):
    """Raised by _BoundedSink when the output passes its buffer."""


class _BoundedSink:
    """A write()-able sink for zstandard's copy_stream: fills a buffer of fixed size and raises
    _PastBound at the first byte past it, which stops the decompression there."""

    def __init__(self, size: int):
        # memory that is not cleared first: decompression writes every byte once, and what a
        # refused frame leaves untouched is never mapped
        self.buffer = np.empty(size, np.uint8)
        self._view = memoryview(self.buffer)
        self.filled = 0

    def write(self, chunk: bytes) -> int:
        end = self.filled + len(chunk)
        if end > len(self.buffer):
            raise _PastBound
        self._view[self.filled:end] = chunk
        self.filled = end
        return len(chunk)


class _Parts(list):
    """The records sent ahead of one StepDone, and the bytes of their frames."""
    nbytes = 0


def _unzstd(data: bytes, size: int, what: str) -> np.ndarray:
    """data, a zstd frame (or frames one after the other, as zstd streams may be), decompressed
    into exactly `size` bytes (a uint8 array). A frame stating more is refused before anything
    is decompressed; the output goes into a buffer of `size` bytes as it is produced
    and decompression stops at the first byte past it, so a frame that states no size or a
    wrong one (a zip bomb) costs at most that buffer. errors.ProtocolError names `what`."""
    import io
    import zstandard

    try:
        stated = zstandard.frame_content_size(data)
    except zstandard.ZstdError:
        raise errors.ProtocolError(f"{what}: not a zstd frame") from None
    if stated > size:   # less: more frames may follow
        raise errors.ProtocolError(f"{what}: the zstd frame states {stated} bytes, "
                                   f"more than the {size} expected")
    sink = _BoundedSink(size)
    try:
        zstandard.ZstdDecompressor().copy_stream(io.BytesIO(data), sink)
    except _PastBound:
        raise errors.ProtocolError(f"{what}: the zstd data decompress to more than "
                                   f"{size} bytes") from None
    except zstandard.ZstdError as err:
        raise errors.ProtocolError(f"{what}: not exactly one zstd frame of {size} bytes "
                                   f"({err})") from None
    if sink.filled != size:
        raise errors.ProtocolError(f"{what}: the zstd data decompress to {sink.filled} bytes, "
                                   f"{size} expected")
    return sink.buffer


def _unzigzag(c: np.ndarray) -> np.ndarray:
    return (c >> np.uint32(1)) ^ (np.uint32(0) - (c & np.uint32(1)))


def _column_sums(res: np.ndarray, stride: int) -> np.ndarray:
    """h[i] = 2 h[i-s] - h[i-2s] + res[i] (h[i-s] + res[i] for i < 2s, res[i] for i < s) in
    uint32 arithmetic: along each column of stride s, two prefix sums."""
    n = len(res)
    if n == 0:
        return np.zeros(0, np.uint32)
    rows = -(-n // stride)
    r = np.zeros(rows * stride, np.uint32)
    r[:n] = res
    r = r.reshape(rows, stride)
    first = r[0].copy()
    r[0] = 0
    d = np.cumsum(r, axis=0, dtype=np.uint32)
    return (first + np.cumsum(d, axis=0, dtype=np.uint32)).reshape(-1)[:n]


def _point_spans(step: int, offsets: Sequence[int]) -> list[tuple[int, int, int, int]]:
    """The runs [lo, hi) of a point's bytes between the position fields (the whole point
    without positions), in order, each with its words (four offsets in a row, the first a
    multiple of 4): (lo, hi, first word, number of words); the other bytes are single bytes."""
    spans, lo = [], 0
    for hi in sorted(offsets) + [step]:
        if hi > lo:
            w0 = -(-lo // 4) * 4
            words = (hi - w0) // 4 if w0 + 4 <= hi else 0
            spans.append((lo, hi, w0, words))
        lo = hi + 4
    return spans


def decode_quantized_zstd(data: bytes, count: int, point_step: int,
                          max_bytes: int = _framing.DEFAULT_MAX_FRAME_BYTES) -> bytes:
    """Decode ENCODING_QUANTIZED_ZSTD bytes (docs/streams.md, format SQZ2) into
    count * point_step bytes, at most max_bytes; errors.ProtocolError names what is malformed.
    The body is decompressed into a buffer of the exact size its header and the zstd frame
    state (within what the header allows), never more."""
    import struct
    import zstandard

    what = "point_cloud.data (QUANTIZED_ZSTD)"

    def bad(detail: str) -> errors.ProtocolError:
        return errors.ProtocolError(f"{what}: {detail}")

    if count * point_step > max_bytes:
        raise errors.ProtocolError(
            f"point_cloud.count: {count} points of point_step {point_step} are "
            f"{count * point_step} bytes, more than max_bytes {max_bytes}")
    if len(data) < 56:
        raise bad(f"{len(data)} bytes, shorter than the 56-byte header")
    if data[:4] != b"SQZ2":
        raise bad(f"magic {bytes(data[:4])!r}, expected b'SQZ2'")
    n, step, stride, xo, yo, zo, nexc = struct.unpack_from("<7I", data, 4)
    range_step, angle_step = struct.unpack_from("<2d", data, 32)
    if n != count or step != point_step:
        raise bad(f"header of {n} points of {step} bytes, the cloud has {count} of {point_step}")
    if stride == 0:
        raise bad("stride 0")
    stride = min(stride, max(n, 1))   # a stride past the last point predicts nothing, as n does
    if nexc > n:
        raise bad(f"{nexc} exceptions for {n} points")
    offsets = [xo, yo, zo]
    has_pos = offsets != [0xFFFFFFFF] * 3
    if has_pos:
        cut = sorted(offsets)
        if cut[2] + 4 > step or cut[1] < cut[0] + 4 or cut[2] < cut[1] + 4:
            raise bad(f"position offsets {offsets} do not fit apart in a point of {step} bytes")
        if not (0 < range_step < np.inf and 0 < angle_step < np.inf):
            raise bad(f"range_step {range_step} or angle_step {angle_step} not positive and finite")
    elif nexc:
        raise bad(f"{nexc} exceptions without positions")

    # K code streams (range, azimuth, elevation, then the words), b single bytes
    spans = _point_spans(step, offsets if has_pos else [])
    nwords = sum(sp[3] for sp in spans)
    nstreams = 3 * has_pos + nwords
    nsingle = sum(hi - lo - 4 * words for lo, hi, _, words in spans)
    head = 4 * nstreams
    fixed = head + (nstreams + nsingle) * n + 12 * nexc
    bound = fixed + 4 * nstreams * n
    body = data[56:]
    try:
        size = zstandard.frame_content_size(body)
    except zstandard.ZstdError:
        raise bad("the body is not a zstd frame") from None
    if size < 0:
        raise bad("the body's zstd frame does not state its size")
    if not fixed <= size <= bound:
        raise bad(f"body of {size} bytes, the header allows {fixed} to {bound}")
    buf = _unzstd(body, size, f"{what} body")

    # the overflow counts m_k: each at most n, the body exactly as long as they say
    m = np.frombuffer(buf, "<u4", count=nstreams).astype(np.int64)
    if np.any(m > n):
        k = int(np.argmax(m > n))
        raise bad(f"stream {k} has {m[k]} overflow values for {n} points")
    if size != fixed + 4 * int(m.sum()):
        raise bad(f"body of {size} bytes, the header and overflow counts say "
                  f"{fixed + 4 * int(m.sum())}")
    planes = buf[head:head + nstreams * n].reshape(nstreams, n)
    full = np.count_nonzero(planes == 255, axis=1)
    if np.any(full != m):
        k = int(np.argmax(full != m))
        raise bad(f"stream {k} has {full[k]} bytes of 255, its overflow count is {m[k]}")
    at = head + (nstreams + nsingle) * n
    singles_buf = buf[head + nstreams * n:at].reshape(nsingle, n)
    exc_buf = buf[at:at + 12 * nexc]
    starts = at + 12 * nexc + 4 * np.concatenate(([0], np.cumsum(m)))

    def codes(k: int) -> np.ndarray:
        """Stream k's uint32 codes: the plane byte, or 255 plus the next overflow value."""
        c = planes[k].astype(np.uint32)
        if m[k]:
            o = buf[starts[k]:starts[k + 1]].reshape(4, m[k]).astype(np.uint32)
            v = o[0] | o[1] << 8 | o[2] << 16 | o[3] << 24
            if np.any(v > 0xFFFFFFFF - 255):
                raise bad(f"stream {k} has an overflow value past 2^32 - 256")
            c[np.flatnonzero(planes[k] == 255)] = np.uint32(255) + v
        return c

    out = np.zeros((n, step), np.uint8)
    if has_pos:
        cr, ca, ce = codes(0), codes(1), codes(2)
        valid = cr != 0
        miss = ~valid
        kind = ca
        exc = np.flatnonzero(miss & (kind == 2))
        if np.any(miss & (kind > 2)):
            raise bad(f"miss of kind {kind[miss & (kind > 2)][0]}: 0, 1 or 2 expected")
        if len(exc) != nexc:
            raise bad(f"{len(exc)} misses kept raw, the header says {nexc}")
        values = []
        for k, c in enumerate((cr, ca, ce)):
            res = _unzigzag(c - np.uint32(1) if k == 0 else c)
            res = np.where(valid, res, np.uint32(0))   # a miss takes the prediction
            values.append(_column_sums(res, stride).view(np.int32).astype(np.float64))
        rng = values[0] * range_step
        az = values[1] * angle_step
        el = values[2] * angle_step
        cos_el = rng * np.cos(el)
        with np.errstate(over="ignore"):    # steps too large for float32 give infinities
            xyz = [(cos_el * np.cos(az)).astype("<f4"), (cos_el * np.sin(az)).astype("<f4"),
                   (rng * np.sin(el)).astype("<f4")]
        raw_xyz = exc_buf.reshape(-1, 3, 4).view("<u4")[:, :, 0] if nexc else None
        for k, off in enumerate(offsets):
            bits = xyz[k].view("<u4").copy()
            bits[miss & (kind == 0)] = 0
            bits[miss & (kind == 1)] = 0x7FC00000
            if nexc:
                bits[exc] = raw_xyz[:, k]
            out[:, off:off + 4] = bits.view(np.uint8).reshape(n, 4)
    if n == 0:
        return b""

    # uint32 words (streams 3.. with positions): column prediction plus the previous point's
    # miss, i.e. e = prefix sum of the residuals, then the column sums
    k = 3 * has_pos
    for lo, hi, w0, words in spans:
        for off in range(w0, w0 + 4 * words, 4):
            e = np.cumsum(_unzigzag(codes(k)), dtype=np.uint32)
            k += 1
            word = _column_sums(e, stride).astype("<u4")
            out[:, off:off + 4] = word.view(np.uint8).reshape(n, 4)
    singles = [b for lo, hi, w0, words in spans for b in range(lo, hi)
               if not (words and w0 <= b < w0 + 4 * words)]
    if singles:
        # each byte was stored less the same byte `stride` points back (mod 256)
        rows = -(-n // stride)
        d = np.zeros((nsingle, rows * stride), np.uint8)
        d[:, :n] = singles_buf
        d = np.cumsum(d.reshape(nsingle, rows, stride), axis=1, dtype=np.uint8)
        out[:, singles] = d.reshape(nsingle, -1)[:, :n].T
    return out.tobytes()


def _step_message(time: float, outputs: str | Iterable[int] = "all") -> Any:
    """The Step request to `time` carrying `outputs`: "all" (the field left at its default,
    as daemons before Step.outputs expect), "none" or sensor ids (each in [1, 2^32), else a
    ValueError naming it; the daemon checks that each exists)."""
    msg = pb.Step(time=float(time))
    if isinstance(outputs, str):
        if outputs == "none":
            msg.outputs = pb.STEP_OUTPUTS_NONE
        elif outputs != "all":
            raise ValueError(f"outputs: {outputs!r} is not 'all', 'none' or sensor ids")
    else:
        ids = _ids(list(outputs), "outputs")
        if (ids == 0).any():
            raise ValueError(f"outputs: sensor ids are at least 1, got {ids.tolist()}")
        msg.outputs = pb.STEP_OUTPUTS_LISTED
        msg.output_sensors.extend(ids.tolist())
    return msg


def state_arrays(body_ids: Sequence[int] = (), body_poses: Any = None,
                 body_velocities: Any = None, joint_ids: Sequence[int] = (),
                 joint_positions: Any = None) -> list[tuple[str, np.ndarray]]:
    """The bulk fields of an UpdateState ((field name, little-endian array)), checked and
    converted once (Client.update_state; ShardedClient sends the same arrays to every shard)."""
    ids = _ids(body_ids, "body_ids")
    jids = _ids(joint_ids, "joint_ids")
    arrays = []
    if len(ids):
        if body_poses is None:
            raise ValueError("body_poses: required with body_ids")
        poses = _rows(body_poses, 7, "body_poses")
        if len(poses) != len(ids):
            raise ValueError(f"body_poses: {len(poses)} rows for {len(ids)} body_ids")
        arrays += [("body_ids_bytes", ids), ("body_poses_bytes", poses)]
        if body_velocities is not None:
            vel = _rows(body_velocities, 6, "body_velocities")
            if len(vel) != len(ids):
                raise ValueError(f"body_velocities: {len(vel)} rows for {len(ids)} body_ids")
            arrays.append(("body_velocities_bytes", vel))
    if len(jids):
        if joint_positions is None:
            raise ValueError("joint_positions: required with joint_ids")
        pos = _flat(joint_positions, "joint_positions")
        if len(pos) != len(jids):
            raise ValueError(f"joint_positions: {len(pos)} values for {len(jids)} joint_ids")
        arrays += [("joint_ids_bytes", jids), ("joint_positions_bytes", pos)]
    return arrays


class Client:
    """A connection to sensimd.

    Connects and sends Hello in the constructor (``connect=False`` defers both to
    :meth:`connect`). Methods raise a :mod:`sensim.errors` class on a non-OK status;
    :class:`errors.TransportError` and its subclasses mean the connection is gone.
    Use as a context manager to close it.

    Frames pushed by the daemon (subscriptions) arrive whenever the client reads, also while
    it waits for a reply, and wait in a queue for :meth:`next_sensor_data`. The queue holds at
    most ``pushed_max_bytes`` (the frames' sizes as received; default
    ``DEFAULT_PUSHED_MAX_BYTES``, 64 MiB) and ``pushed_queue`` frames (default 1024): past
    either, the oldest whole frames are dropped, and counted in ``frames_dropped`` and
    ``bytes_dropped``. The newest frame always stays, even when it alone is larger than the
    bound (it is in memory already; dropping it would leave nothing to read).
    ``pushed_bytes`` is what the queue holds now.
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 7700, *,
                 environment: str = "default", token: str | None = None,
                 role: str | int = "controller", client_name: str = "python",
                 timeout: float | None = 10.0, retention: str | int | None = None,
                 connect: bool = True, max_frame_bytes: int = _framing.DEFAULT_MAX_FRAME_BYTES,
                 pushed_queue: int = 1024, pushed_max_bytes: int = DEFAULT_PUSHED_MAX_BYTES,
                 pushed_in_place: bool = False):
        for name, value, least in (("pushed_queue", pushed_queue, 1),
                                   ("pushed_max_bytes", pushed_max_bytes, 0)):
            if not isinstance(value, (int, np.integer)) or isinstance(value, bool) \
                    or value < least:
                raise ValueError(f"{name}: expected an integer >= {least}, got {value!r}")
        self.host = host
        self.port = int(port)
        self.environment = environment
        self.token = token
        self.role = role
        self.client_name = client_name
        self.timeout = timeout
        self.retention = retention
        self.hello_reply: Any = None     # HelloReply once the handshake succeeded
        self.pushed_max_bytes = int(pushed_max_bytes)  # bound of the pushed frames queued
        self.pushed_bytes = 0            # bytes of the pushed frames queued now
        self.frames_dropped = 0          # pushed frames dropped from the full queue
        self.bytes_dropped = 0           # their bytes
        # pushed clouds of large frames parsed without their points, which stay in the frame
        # (next_sensor_output reads them there; next_sensor_data copies them back in)
        self.pushed_in_place = bool(pushed_in_place)
        self.last_pushed_bytes = 0       # size of the last pushed frame taken from the queue
        # (Envelope, its points, the frame's length) of a frame parsed without its points
        self._arrived_view: tuple[Any, memoryview, int] | None = None
        self._sock: socket.socket | None = None
        self._decoder = _framing.FrameDecoder(max_frame_bytes)
        self._next_id = 0
        self._replies: dict[int, Any] = {}
        self._parts: dict[int, _Parts] = {}  # SensorData sent ahead of a StepDone, by request id
        self._frame_len = 0                # bytes of the last frame _next_buffered parsed
        self._abandoned: set[int] = set()
        # ids of the requests sent whose reply has not arrived: any other reply is a protocol
        # error (kept, it would grow _replies without bound)
        self._outstanding: set[int] = set()
        self._pushed: collections.deque = collections.deque()  # (Envelope, bytes, points)
        self._pushed_max_frames = int(pushed_queue)
        self._fatal: errors.SensimError | None = None
        self._large_frame: tuple[int, memoryview] | None = None  # (id, body) of the last one
        self._hits_kept: list[np.ndarray] = []  # arrays of pipelined raycasts' hits
        self._serial_unknown = False  # the daemon's replies carry no world_serial (older)
        if connect:
            self.connect()

    # ------------------------------------------------------------------ connection

    def connect(self, handshake: bool = True) -> None:
        """Open the TCP connection (if not open) and, unless handshake is False, send Hello."""
        if self._sock is None:
            try:
                sock = socket.create_connection((self.host, self.port), timeout=self.timeout)
            except socket.timeout:
                raise errors.Timeout(f"connect to {self.host}:{self.port} timed out") from None
            except OSError as exc:
                raise errors.TransportError(
                    f"cannot connect to {self.host}:{self.port}: {exc.strerror or exc}") from exc
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._sock = sock
            self._decoder.clear()
            self._fatal = None
        if handshake and self.hello_reply is None:
            try:
                self.hello()
            except errors.SensimError:
                # A refused handshake is final: the daemon closes the connection after it.
                self.close()
                raise

    def hello(self, protocol_version: int | None = None, **overrides: Any) -> Any:
        """Send Hello (built from the constructor's arguments, changed by ``overrides``) and
        return the HelloReply. Normally done by connect(); exposed for tests."""
        msg = pb.Hello(protocol_version=PROTOCOL_VERSION if protocol_version is None
                       else int(protocol_version))
        fields = dict(client_name=self.client_name, environment=self.environment,
                      token=self.token, role=self.role, retention=self.retention)
        fields.update(overrides)
        if fields["client_name"] is not None:
            msg.client_name = fields["client_name"]
        if fields["environment"] is not None:
            msg.environment = fields["environment"]
        if fields["token"] is not None:
            msg.token = fields["token"]
        if fields["role"] is not None:
            msg.role = _enum(fields["role"], _ROLES, "role")
        if fields["retention"] is not None:
            msg.retention = _enum(fields["retention"], _RETENTIONS, "retention")
        reply = self._call("hello", msg, "hello_reply")
        if reply.protocol_version and reply.protocol_version != PROTOCOL_VERSION:
            self.close()
            raise errors.ProtocolError(
                f"daemon speaks protocol_version {reply.protocol_version}, "
                f"this client {PROTOCOL_VERSION}")
        self.hello_reply = reply
        return reply

    @property
    def pushed_dropped(self) -> int:
        """Pushed frames dropped from the full queue (the same as frames_dropped)."""
        return self.frames_dropped

    @property
    def server_version(self) -> str:
        return self.hello_reply.server_version if self.hello_reply is not None else ""

    @property
    def limits(self) -> Any:
        return self.hello_reply.limits if self.hello_reply is not None else None

    @property
    def session_id(self) -> int:
        return self.hello_reply.session_id if self.hello_reply is not None else 0

    @property
    def features(self) -> int:
        """HelloReply.features: the pb.FEATURE_* bits of the forms the daemon takes (0 from a
        daemon older than them)."""
        return self.hello_reply.features if self.hello_reply is not None else 0

    @property
    def closed(self) -> bool:
        return self._sock is None

    def close(self) -> None:
        """Close the connection; further requests raise ConnectionClosed. Idempotent."""
        sock, self._sock = self._sock, None
        self.hello_reply = None
        self._large_frame = None
        if sock is not None:
            try:
                sock.close()
            except OSError:
                pass

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"session {self.session_id}"
        return f"<sensim.Client {self.host}:{self.port} {self.environment!r} {state}>"

    # ------------------------------------------------------------------ framing and correlation

    def _closed_error(self) -> errors.ConnectionClosed:
        if self._fatal is not None:
            return errors.ConnectionClosed(f"connection closed after {self._fatal}")
        return errors.ConnectionClosed("connection is closed")

    def _deadline(self, timeout: float | None) -> float | None:
        if timeout is None:
            timeout = self.timeout
        return None if timeout is None else time.monotonic() + timeout

    def send_raw(self, data: bytes) -> None:
        """Write bytes to the socket as they are, without framing (for tests). The client
        does not track a request sent this way: read its reply with wait_reply(its id) or
        recv(); while waiting for another request, a reply to an id the client did not send is
        a protocol error (errors.ProtocolError, the connection closed)."""
        self._send_parts([data])

    def _send_parts(self, parts: list) -> None:
        """Write the buffers of parts in order (one frame or several), without copying them."""
        if self._sock is None:
            raise self._closed_error()
        try:
            self._sock.settimeout(self.timeout)
            _framing.send_parts(self._sock, parts)
        except socket.timeout:
            self.close()
            raise errors.Timeout("timed out sending") from None
        except (BrokenPipeError, ConnectionResetError) as exc:
            self.close()
            raise errors.ConnectionClosed(f"connection closed by the daemon ({exc})") from None
        except OSError as exc:
            self.close()
            raise errors.TransportError(f"send: {exc}") from exc

    def send_envelope(self, env: Any) -> int:
        """Frame and send an Envelope; an id of 0 is replaced by the next request id.
        Returns the id."""
        if env.id == 0 and env.WhichOneof("body") not in (None, "sensor_data"):
            self._next_id += 1
            env.id = self._next_id
        payload = env.SerializeToString()
        limit = self.limits.max_frame_bytes if self.limits is not None else 0
        if limit and len(payload) > limit:
            raise errors.ResourceExhausted(
                f"request of {len(payload)} bytes exceeds the daemon's max_frame_bytes {limit}")
        self.send_raw(_framing.encode(payload))
        if env.id and env.WhichOneof("body") not in (None, "sensor_data"):
            self._outstanding.add(env.id)
        return env.id

    def _send_bulk(self, body: str, message: Message,
                   arrays: Sequence[tuple[str, np.ndarray]], padding: str = "") -> int:
        """Send a request whose body `body` is `message` plus the bytes fields `arrays`
        ((field name, C-contiguous little-endian array)), written from the arrays' own memory;
        with `padding` (the name of the body's field of meaningless zeros), each array of a
        frame larger than SMALL_BULK_BYTES at a multiple of 8 bytes from the frame's start (a
        smaller one is serialized at once as before: aligning it costs the client more, about
        17 us a call, than the daemon's copy of its few kB). Returns its id."""
        request_id, parts = self._bulk_parts(body, message, arrays, padding)
        self._send_parts(parts)
        return request_id

    def _bulk_parts(self, body: str, message: Message,
                    arrays: Sequence[tuple[str, np.ndarray]],
                    padding: str = "") -> tuple[int, list]:
        """The id and the buffers of the request _send_bulk sends (the id is taken: the
        caller must send the parts, possibly with other requests' in one write)."""
        fields = message.DESCRIPTOR.fields_by_name
        bulk = [(fields[name].number, memoryview(a).cast("B") if a.size else memoryview(b""))
                for name, a in arrays]
        size = message.ByteSize() + sum(view.nbytes for _, view in bulk)  # the frame is more
        limit = self.limits.max_frame_bytes if self.limits is not None else 0
        if limit and size > limit:
            raise errors.ResourceExhausted(
                f"request of more than {size} bytes exceeds the daemon's max_frame_bytes {limit}")
        request_id = self._next_id + 1
        if size <= SMALL_BULK_BYTES:
            # small arrays (a state update of a few bodies): copied into one message that
            # protobuf serializes at once, cheaper than assembling the frame around them
            env = pb.Envelope(id=request_id)
            sub = getattr(env, body)
            sub.MergeFrom(message)
            for (name, _), (_, view) in zip(arrays, bulk):
                setattr(sub, name, view.tobytes())
            parts = [_framing.encode(env.SerializeToString())]
        else:
            envelope = pb.Envelope(id=request_id).SerializeToString()
            number = pb.Envelope.DESCRIPTOR.fields_by_name[body].number
            parts = _framing.bulk_frame(envelope, number, message.SerializeToString(), bulk,
                                        fields[padding].number if padding else 0)
        # the frame as it goes, its envelope and paddings included: one byte over the
        # daemon's limit would close the connection, so it is refused here, nothing sent
        payload = sum(len(p) for p in parts) - _framing.HEADER_SIZE
        if limit and payload > limit:
            raise errors.ResourceExhausted(
                f"request of {payload} bytes exceeds the daemon's max_frame_bytes {limit}")
        self._next_id = request_id
        self._outstanding.add(request_id)
        return request_id, parts

    def send_request(self, body: str, message: Message | None = None) -> int:
        """Send a request whose body is the Envelope field `body` (e.g. "ping") without waiting.
        Returns its id for wait_reply."""
        env = pb.Envelope()
        sub = getattr(env, body)
        sub.SetInParent()
        if message is not None:
            sub.MergeFrom(message)
        return self.send_envelope(env)

    def recv(self, timeout: float | None = None) -> Any:
        """Return the next Envelope from the connection as it is, whatever its id (no status
        check, no queueing). For tests and tools; normal code uses the request methods."""
        deadline = self._deadline(timeout)
        while True:
            env = self._next_buffered()
            if env is not None:
                return self._put_back(env, self._take_view(env)[0])
            self._fill(deadline)

    def _next_buffered(self, in_place: tuple[int, Sequence[int]] | None = None) -> Any:
        """The next received Envelope, or None. in_place: (request id, field path) of a bulk
        field that the caller reads from a large frame itself: the reply to that request is
        parsed without it (protobuf would copy it)."""
        try:
            body = self._decoder.next_frame()
        except _framing.FrameTooLarge as exc:
            self.close()
            raise errors.ProtocolError(str(exc)) from None
        if body is None:
            return None
        env = pb.Envelope()
        try:
            small = None
            if in_place is not None and isinstance(body, memoryview):
                small = _framing.without_field(body, in_place[1])
            if small is not None:
                env.ParseFromString(small)
                if env.id != in_place[0]:
                    env.ParseFromString(body)  # not that reply: all of it
            elif self.pushed_in_place and isinstance(body, memoryview):
                self._parse_pushed_in_place(env, body)
            else:
                env.ParseFromString(body)
        except (DecodeError, ValueError) as exc:
            self.close()
            raise errors.ProtocolError(f"cannot decode a frame from the daemon: {exc}") from None
        self._frame_len = len(body)
        if isinstance(body, memoryview):
            # a large frame, received into its own buffer: kept so that bulk arrays can be seen
            # in place (raycast); only the last one, so that nothing piles up
            self._large_frame = (env.id, body)
        return env

    def _parse_pushed_in_place(self, env: Any, body: memoryview) -> None:
        """Parse a large frame; a pushed cloud without its points (protobuf would copy them),
        which are kept as a view of the frame in self._arrived_view for _queue_pushed."""
        loc = _framing.find_field(body, _PUSHED_CLOUD_PATH)
        small = None if loc is None else _framing.without_field(body, _PUSHED_CLOUD_PATH)
        if loc is not None and small is not None:
            env.ParseFromString(small)
            if env.id == 0 and env.WhichOneof("body") == "sensor_data":
                self._arrived_view = (env, body[loc[0]:loc[0] + loc[1]], len(body))
                return
        env.ParseFromString(body)

    def _take_view(self, env: Any) -> tuple[memoryview, int] | tuple[None, int]:
        """The points of env kept in its frame by _parse_pushed_in_place (else None), and the
        frame's length."""
        arrived, self._arrived_view = self._arrived_view, None
        if arrived is not None and arrived[0] is env:
            return arrived[1], arrived[2]
        return None, env.ByteSize()

    @staticmethod
    def _put_back(env: Any, view: memoryview | None) -> Any:
        """env with the points kept in its frame copied back into its cloud."""
        if view is not None:
            env.sensor_data.point_cloud.data = bytes(view)
        return env

    def _fill(self, deadline: float | None) -> None:
        """Read what the socket has into the frame decoder, waiting until the deadline."""
        if self._sock is None:
            raise self._closed_error()
        # Past the deadline one non-blocking read still collects what has already arrived.
        remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
        try:
            self._sock.settimeout(remaining)
            self._recv_once()
        except (socket.timeout, BlockingIOError):
            raise errors.Timeout(f"nothing received within {self.timeout} s") from None

    def _recv_once(self) -> None:
        """One receive from the socket (in its current mode) into the frame decoder. A timeout
        or, non-blocking, nothing to read propagates (socket.timeout, BlockingIOError); a
        closed or failed connection closes the client and raises ConnectionClosed or
        TransportError."""
        assert self._sock is not None
        try:
            received = self._decoder.recv_from(self._sock)
        except (socket.timeout, BlockingIOError):
            raise
        except ConnectionResetError:
            received = 0
        except OSError as exc:
            self.close()
            raise errors.TransportError(f"recv: {exc}") from exc
        if not received:
            self.close()
            if self._fatal is not None:
                raise self._closed_error()
            raise errors.ConnectionClosed("connection closed by the daemon")

    def _dispatch(self, env: Any) -> None:
        """File an Envelope that is not the reply being waited for."""
        if env.id != 0 and env.id not in self._outstanding:
            self.close()
            raise errors.ProtocolError(
                f"a reply ({env.WhichOneof('body') or 'status'}) to request {env.id}, which "
                f"is not waiting for one")
        if env.id != 0 and env.WhichOneof("body") == "sensor_data":
            # a record a StepDone sends ahead (docs/streams.md, "Outputs of a step")
            if env.id not in self._abandoned:
                self._keep_part(env)
            return
        if env.id == 0:
            if env.WhichOneof("body") is None and env.status.code != pb.OK:
                # The daemon refuses the connection (frame or client limit) and closes it.
                self._fatal = errors.error_for(env.status.code, env.status.message)
                raise self._fatal
            self._queue_pushed(env)
        elif env.id in self._abandoned:
            self._abandoned.discard(env.id)
            self._outstanding.discard(env.id)
        else:
            self._replies[env.id] = env
            self._outstanding.discard(env.id)

    def _keep_part(self, env: Any) -> None:
        """Keep a record sent ahead of a StepDone (the frame _next_buffered parsed last), within
        STEP_MAX_PARTS and STEP_MAX_PART_BYTES: a peer that never ends the reply must not fill
        the memory."""
        parts = self._parts.setdefault(env.id, _Parts())
        kept = parts.nbytes + self._frame_len
        if len(parts) >= STEP_MAX_PARTS or kept > STEP_MAX_PART_BYTES:
            self.close()
            raise errors.ProtocolError(
                f"step (request {env.id}): the daemon sent more records ahead of its StepDone "
                f"than the client keeps (STEP_MAX_PARTS = {STEP_MAX_PARTS} frames, "
                f"STEP_MAX_PART_BYTES = {STEP_MAX_PART_BYTES} bytes)")
        parts.append(env.sensor_data)
        parts.nbytes = kept

    def _queue_pushed(self, env: Any) -> None:
        """Queue a pushed Envelope, then drop the oldest whole frames (not the new one) while
        the queue holds more than pushed_max_bytes or pushed_queue frames."""
        view, size = self._take_view(env)     # size: the frame's bytes as received
        self._pushed.append((env, size, view))
        self.pushed_bytes += size
        while len(self._pushed) > 1 and (self.pushed_bytes > self.pushed_max_bytes
                                         or len(self._pushed) > self._pushed_max_frames):
            _, old, _ = self._pushed.popleft()
            self.pushed_bytes -= old
            self.frames_dropped += 1
            self.bytes_dropped += old

    def wait_reply(self, request_id: int, timeout: float | None = None,
                   check: bool = True) -> Any:
        """Wait for the reply Envelope of request_id. With check, a non-OK status raises the
        matching sensim.errors class. Other messages arriving meanwhile are kept."""
        return self._wait_reply(request_id, timeout, check)

    def _file_until(self, request_id: int, skip: Any = None) -> bool:
        """File the frames received so far until the reply of request_id (without reading the
        socket); whether that reply is here. skip: as _next_buffered takes it."""
        while request_id not in self._replies:
            env = self._next_buffered(skip)
            if env is None:
                return False
            if env.id == request_id and env.WhichOneof("body") != "sensor_data":
                self._replies[request_id] = env
                self._outstanding.discard(request_id)
            else:
                self._dispatch(env)
        return True

    def _wait_reply(self, request_id: int, timeout: float | None = None, check: bool = True,
                    in_place: Sequence[int] | None = None) -> Any:
        """wait_reply; in_place: the path of a bulk field the caller reads from the large frame
        itself (self._large_frame), left out of the parsed reply."""
        deadline = self._deadline(timeout)
        skip = None if in_place is None else (request_id, in_place)
        if request_id not in self._replies:
            self._outstanding.add(request_id)  # sent by send_raw, perhaps: its reply is awaited
        try:
            while not self._file_until(request_id, skip):
                self._fill(deadline)
        except errors.Timeout:
            self._abandoned.add(request_id)
            self._parts.pop(request_id, None)
            raise
        env = self._replies.pop(request_id)
        parts = self._parts.pop(request_id, [])
        if env.WhichOneof("body") == "step_done":
            # the records sent ahead, in order, where a StepDone that fits one frame has them
            done = env.step_done
            if len(parts) != done.outputs_in_parts:
                self.close()
                raise errors.ProtocolError(
                    f"step_done: {len(parts)} records arrived ahead of it, it says "
                    f"{done.outputs_in_parts}")
            if parts:
                done.outputs.extend(parts)
        if check and env.HasField("status") and env.status.code != pb.OK:
            raise errors.error_for(env.status.code, env.status.message, request_id)
        return env

    def _call(self, body: str, message: Message | None, reply: str | None = None) -> Any:
        """Send a request, wait for its reply, check the status; return the reply body (or
        None when the reply carries none)."""
        env = self.wait_reply(self.send_request(body, message))
        which = env.WhichOneof("body")
        if reply is not None and which != reply:
            raise errors.ProtocolError(f"{body}: expected a {reply} reply, got {which}")
        return getattr(env, which) if which is not None else None

    def next_sensor_data(self, timeout: float | None = 0.0) -> Any:
        """Return the next pushed SensorData, waiting up to timeout seconds (None = the client
        timeout); None if nothing arrived."""
        got = self._wait_pushed(self._deadline(timeout))
        return None if got is None else self._put_back(got[0], got[1]).sensor_data

    def next_sensor_output(self, timeout: float | None = 0.0,
                           max_bytes: int = _framing.DEFAULT_MAX_FRAME_BYTES
                           ) -> "SensorOutput | None":
        """next_sensor_data decoded (sensim.outputs.decode; max_bytes bounds a decoded cloud).
        With Client(pushed_in_place=True), a cloud that came in a large frame (1 MiB or more)
        is read where it was received: a RAW cloud's array is a view of that frame, no copy
        made (the frame's buffer is used again once nothing refers to it)."""
        from .outputs import decode     # outputs imports this module
        got = self._wait_pushed(self._deadline(timeout))
        return None if got is None else decode(got[0].sensor_data, max_bytes, points=got[1])

    def _wait_pushed(self, deadline: float | None) -> tuple[Any, memoryview | None] | None:
        """The next pushed frame as _next_pushed gives it, receiving (and filing the replies
        that arrive meanwhile) until the deadline; None when none came."""
        while True:
            got = self._next_pushed()
            if got is not None:
                return got
            env = self._next_buffered()
            if env is not None:
                self._dispatch(env)
                continue
            try:
                self._fill(deadline)
            except errors.Timeout:
                return None

    def _next_pushed(self) -> tuple[Any, memoryview | None] | None:
        """The next queued pushed SensorData Envelope (its sequence copied into the
        SensorData) and the points kept in its frame, or None."""
        while self._pushed:
            env, size, view = self._pushed.popleft()
            self.pushed_bytes -= size
            if env.WhichOneof("body") == "sensor_data":
                self.last_pushed_bytes = size
                if env.HasField("sequence"):
                    env.sensor_data.sequence = env.sequence
                return env, view
        return None

    # ------------------------------------------------------------------ session

    def ping(self, payload: bytes = b"") -> Any:
        """Round trip; returns the Pong (payload echoed, server_time_ns)."""
        return self._call("ping", pb.Ping(payload=bytes(payload)), "pong")

    def get_info(self) -> Any:
        """Return the daemon's Info: version, uptime, connections, counters, environments,
        limits."""
        return self._call("get_info", pb.GetInfo(), "info")

    def describe(self, sensors: bool = True, bodies: bool = True) -> Any:
        """Return the Description of this connection's environment (any role): its sensors
        (id, kind, name, body, mount, a lidar's point fields and frame) and its bodies (id,
        name, world pose at the last state), each list whole in id order (the daemon's pages
        are fetched and joined), with the time of the last state and the step count."""
        out = None
        s_after = b_after = 0
        want_s, want_b = sensors, bodies
        while True:
            page = self._call("describe", pb.Describe(
                sensors_after=s_after, bodies_after=b_after, no_sensors=not want_s,
                no_bodies=not want_b), "description")
            # ids in increasing order above the last page's: every page moves on, so the
            # pages end (a daemon repeating one page was asked forever)
            for kind, items, after in (("sensors", page.sensors, s_after),
                                       ("bodies", page.bodies, b_after)):
                ids = [after] + [x.id for x in items]
                if any(b <= a for a, b in zip(ids, ids[1:])):
                    raise errors.ProtocolError(
                        f"describe: {kind} not in increasing id order above {after}")
            if out is None:
                out = page
            else:
                out.sensors.extend(page.sensors)
                out.bodies.extend(page.bodies)
            want_s = want_s and page.more_sensors and len(page.sensors) > 0
            want_b = want_b and page.more_bodies and len(page.bodies) > 0
            if not (want_s or want_b):
                out.more_sensors = out.more_bodies = False
                return out
            if want_s:
                s_after = page.sensors[-1].id
            if want_b:
                b_after = page.bodies[-1].id

    # ------------------------------------------------------------------ scene

    def create_mesh(self, id: int, vertices: Any, indices: Any = None, material_ids: Any = None,
                    name: str = "") -> None:
        """Create triangle mesh geometry `id` from vertices (N, 3) float32 and indices (M, 3)
        uint32 (any array-like, converted once, or already packed little-endian bytes);
        material_ids: (M,) uint32. The arrays are sent from their own memory. Or from a mesh
        file: ``create_mesh(id, "part.obj")`` (OBJ, STL, PLY, ... read by
        sensim.mesh.load_mesh through meshio; vertices in m)."""
        if isinstance(vertices, (str, os.PathLike)):
            if indices is not None:
                raise TypeError("create_mesh: indices come from the mesh file "
                                f"{os.fspath(vertices)!r}; give one or the other")
            from .mesh import load_mesh
            vertices, indices = load_mesh(vertices)
        elif indices is None:
            raise TypeError("create_mesh: indices (M, 3) are required with vertices")
        arrays = [("vertices", _packed(vertices, "<f4", 3, "vertices")),
                  ("indices", _packed(indices, "<u4", 3, "indices"))]
        if material_ids is not None:
            arrays.append(("material_ids", _packed(material_ids, "<u4", 1, "material_ids")))
        msg = pb.CreateMesh(id=id)
        if name:
            msg.name = name
        self.wait_reply(self._send_bulk("create_mesh", msg, arrays))

    def create_primitive(self, id: int, kind: str, *, name: str = "", **size: Any) -> None:
        """Create primitive geometry `id`: box(half_extents=(x, y, z)), sphere(radius),
        cylinder(radius, half_length), capsule(radius, half_length), plane(half_size=0),
        ellipsoid(radii=(x, y, z)), rectangle(half_size_x, half_size_y, one_sided=False),
        height_field(heights (rows, columns) in m, row r at y = -half_size_y + r * dy,
        half_size_x, half_size_y, base_depth)."""
        kind = kind.lower()
        if kind not in _PRIMITIVES:
            raise ValueError(f"kind: unknown primitive {kind!r}; one of {sorted(_PRIMITIVES)}")
        unknown = set(size) - set(_PRIMITIVES[kind])
        if unknown:
            raise TypeError(f"{kind}: unexpected {sorted(unknown)}; takes {_PRIMITIVES[kind]}")
        if kind == "height_field" and size.get("heights") is not None:
            heights = np.asarray(size["heights"], dtype="<f4")
            if heights.ndim != 2:
                raise ValueError(f"height_field.heights: a 2-D array (rows, columns), got "
                                 f"shape {heights.shape}")
            size = dict(size, heights=heights.tobytes(), rows=heights.shape[0],
                        columns=heights.shape[1])
        msg = _choose(pb.CreatePrimitive(id=id), kind, size)
        if name:
            msg.name = name
        self._call("create_primitive", msg)

    def set_material(self, id: int, kind: str = "lambertian", *, name: str = "",
                     **params: Any) -> None:
        """Create or replace surface material `id`: lambertian(reflectance) or
        two_layer(refractive_index, extinction_coefficient, specular_roughness,
        diffuse_reflectance, diffuse_roughness); absent parameters take the protocol defaults."""
        if kind not in _MATERIALS:
            raise ValueError(f"kind: unknown material model {kind!r}; one of {_MATERIALS}")
        msg = _choose(pb.SetMaterial(id=id), kind, params)
        if name:
            msg.name = name
        self._call("set_material", msg)

    def set_ambient(self, kind: str = "custom", *, id: int = 0, **params: Any) -> None:
        """Set the environment's medium (id 0) or define medium `id`. kind is "custom"
        (attenuation, refractive_index, return_gamma_shape, return_gamma_scale,
        return_probability_scaling, atmospheric_backscatter) or a preset: "clear_air" /
        "fog" (visibility, m), "rain" / "snow" (rate, mm/h)."""
        if kind not in _AMBIENTS:
            raise ValueError(f"kind: unknown medium {kind!r}; one of {_AMBIENTS}")
        self._call("set_ambient", _choose(pb.SetAmbient(id=id), kind, params))

    def set_environment(self, *, gravity: Any = None, magnetic_field: Any = None,
                        dipoles: Iterable[Any] | None = None, seed: int | None = None,
                        freeze_objects: bool | None = None) -> None:
        """Change environment-wide settings; None keeps the current value. dipoles (a list of
        MagneticDipole, mappings or (moment, position[, body_id]) tuples) replaces the list."""
        msg = pb.SetEnvironment()
        _set_fields(msg, dict(gravity=gravity, magnetic_field=magnetic_field, seed=seed,
                              freeze_objects=freeze_objects), "set_environment")
        if dipoles is not None:
            msg.replace_dipoles = True
            for i, d in enumerate(dipoles):
                dip = msg.dipoles.add()
                if isinstance(d, Message):
                    dip.CopyFrom(d)
                elif isinstance(d, Mapping):
                    _set_fields(dip, d, f"dipoles[{i}]")
                else:
                    _set_fields(dip, dict(zip(("moment", "position", "body_id"), d)),
                                f"dipoles[{i}]")
        self._call("set_environment", msg)

    def create_body(self, id: int, pose: Any = None, *, linear_velocity: Any = None,
                    angular_velocity: Any = None, center_of_mass: Any = None,
                    name: str = "") -> None:
        """Create rigid body `id` at pose (world) with optional velocities (world frame)."""
        msg = pb.CreateBody(id=id)
        _set_fields(msg, dict(pose=pose, linear_velocity=linear_velocity,
                              angular_velocity=angular_velocity, center_of_mass=center_of_mass,
                              name=name or None), "create_body")
        self._call("create_body", msg)

    def create_object(self, id: int, geometry_id: int, *, body_id: int = 0,
                      local_pose: Any = None, scale: Any = None, material_id: int = 0,
                      label: int = 0, medium_id: int = 0, name: str = "",
                      group: int = 0) -> None:
        """Place geometry `geometry_id` as object `id` on body `body_id` (0 = static world);
        `group` (0..31) is its bit in sensors' group masks."""
        msg = pb.CreateObject(id=id, geometry_id=geometry_id)
        if isinstance(scale, (int, float)):
            scale = (scale, scale, scale)
        _set_fields(msg, dict(body_id=body_id or None, local_pose=local_pose, scale=scale,
                              material_id=material_id or None, label=label or None,
                              medium_id=medium_id or None, name=name or None,
                              group=group or None), "create_object")
        self._call("create_object", msg)

    def create_joint(self, id: int, type: str | int = "revolute", position: float = 0.0,
                     name: str = "") -> None:
        """Create joint `id` ("revolute": rad, "prismatic": m) at its initial position."""
        msg = pb.CreateJoint(id=id, type=_enum(type, _JOINTS, "type"), position=float(position))
        if name:
            msg.name = name
        self._call("create_joint", msg)

    def remove(self, kind: str | int, id: int = 0) -> None:
        """Remove one entity: kind is geometry, material, medium, body, object, joint or
        sensor. kind "environment" releases this connection's environment (id ignored): it is
        no longer kept and is destroyed when its last client leaves."""
        self._call("remove", pb.Remove(kind=_enum(kind, _ENTITIES, "kind"), id=id))

    # ------------------------------------------------------------------ sensors and streams

    def create_sensor(self, id: int, config: Any = None, *, body_id: int = 0, mount: Any = None,
                      name: str = "", **kind: Any) -> None:
        """Create sensor `id` on body `body_id` at `mount`. config is a LidarConfig, ImuConfig,
        EncoderConfig, OdometerConfig or ConeConfig message, or a whole CreateSensor (sent as
        is); alternatively pass one keyword lidar=/imu=/encoder=/odometer=/cone= with a message
        or a dict in protobuf JSON form (vectors, matrices and repeated numbers also as
        arrays of any layout)."""
        if isinstance(config, pb.CreateSensor):
            msg = pb.CreateSensor()
            msg.CopyFrom(config)
            if not msg.HasField("id"):
                msg.id = id
        else:
            msg = pb.CreateSensor(id=id)
            if config is not None:
                field = _SENSOR_CONFIGS.get(type(config).__name__)
                if field is None:
                    raise TypeError(f"config: unsupported type {type(config).__name__}")
                kind = {field: config, **kind}
            if len(kind) != 1 or next(iter(kind)) not in _SENSOR_CONFIGS.values():
                raise TypeError("create_sensor: give exactly one of config or "
                                f"{sorted(_SENSOR_CONFIGS.values())}")
            field, value = next(iter(kind.items()))
            sub = getattr(msg, field)
            sub.SetInParent()
            if isinstance(value, Message):
                sub.MergeFrom(value)
            else:
                _set_fields(sub, value, field)
            _set_fields(msg, dict(body_id=body_id or None, mount=mount, name=name or None),
                        "create_sensor")
        self._call("create_sensor", msg)

    def create_imu(self, id: int, *, body_id: int = 0, mount: Any = None, name: str = "",
                   accelerometer: Any = None, gyroscope: Any = None, magnetometer: Any = None,
                   sample_rate: float | None = None) -> None:
        """Create an IMU with the sub-sensors given (True = ideal defaults, or a dict in
        protobuf JSON form, e.g. {"chain": {"noiseStddev": {"x": 0.01}}}, vectors and 3x3
        matrices also as arrays: {"chain": {"crossAxisMatrix": np.eye(3)}}); sample_rate in
        Hz (None = one sample per step)."""
        cfg: dict = {}
        for key, sub in (("accelerometer", accelerometer), ("gyroscope", gyroscope),
                         ("magnetometer", magnetometer)):
            if sub is not None and sub is not False:
                cfg[key] = {} if sub is True else sub
        if sample_rate is not None:
            cfg["sampleRate"] = float(sample_rate)
        self.create_sensor(id, imu=cfg, body_id=body_id, mount=mount, name=name)

    def create_encoder(self, id: int, joint_id: int, *, mode: str = "absolute",
                       name: str = "", **params: Any) -> None:
        """Create an encoder on joint `joint_id` (mode "absolute" or "incremental"); params are
        EncoderConfig fields (noise_stddev, resolution, scaling, range_lower, range_upper,
        speed_timeout)."""
        msg = pb.EncoderConfig(joint_id=joint_id, mode=_enum_number(
            pb.EncoderMode.DESCRIPTOR, mode, "encoder.mode"))
        _set_fields(msg, params, "encoder")
        self.create_sensor(id, msg, name=name)

    def create_odometer(self, id: int, joint_id: int, *, name: str = "", **params: Any) -> None:
        """Create an odometer on revolute joint `joint_id`; params are OdometerConfig fields
        (wheel_radius, pulses_per_revolution, noise_stddev, scaling)."""
        msg = pb.OdometerConfig(joint_id=joint_id)
        _set_fields(msg, params, "odometer")
        self.create_sensor(id, msg, name=name)

    def create_lidar(self, id: int, *, body_id: int = 0, mount: Any = None, name: str = "",
                     preset: str | None = None, **config: Any) -> None:
        """Create lidar `id` on body `body_id` at `mount`. Either a device, ``preset="vlp16"``
        (sensim.presets.preset_names(): VLP-16, OS1-16/32/64/128 at 512, 1024 and 2048
        columns, HDL-64E, Bpearl, flash, Livox Mid-40; keywords override its fields), or
        exactly one scan pattern keyword
        (spinning, vlp16, ouster, flash, hdl64e, bpearl, custom, livox) with a dict of its
        fields, e.g. ``vlp16={"frequency": 10.0}``; fields left out take the device's
        datasheet defaults (sensim.presets.PATTERN_DEFAULTS: ``vlp16={}`` is 10 Hz)
        (spinning's spin: "clockwise" or
        "counter_clockwise"); the other keywords are LidarConfig fields,
        enums by lowercase name: return_mode ("strongest", "first", "last", "dual", "all"),
        frame ("sensor", "world"), publish ("per_revolution", "per_step"), misses ("remove",
        "zero", "nan"), layout ("fields", "velodyne", "ouster", "xyzi"); fields a list of
        names; beam, distance_noise, angle_noise dicts; see_own_body, exclude_bodies (body ids)
        and group_mask (bit g = object group g) for what it sees. Read the clouds with
        lidar_clouds."""
        msg = pb.LidarConfig()
        if preset is not None:
            config = presets.get(preset).kwargs(**config)
        patterns = [k for k in config if k in _LIDAR_PATTERNS]
        if len(patterns) != 1:
            raise TypeError(f"create_lidar: give exactly one pattern of {list(_LIDAR_PATTERNS)}"
                            " or a preset")
        params = dict(config)
        pattern = presets.pattern_with_defaults(patterns[0], params.pop(patterns[0]))
        if isinstance(pattern.get("spin"), str):      # "clockwise" / "counter_clockwise"
            spin = pattern["spin"].upper()
            pattern["spin"] = pb.SpinDirection.Value(spin if spin.startswith("SPIN_")
                                                     else "SPIN_" + spin)
        _choose(msg, patterns[0], pattern)
        for key, (prefix, names) in _LIDAR_ENUMS.items():
            if key in params and params[key] is not None:
                table = {n: getattr(pb, prefix + n.upper()) for n in names}
                setattr(msg, key, _enum(params.pop(key), table, f"lidar.{key}"))
        _set_fields(msg, params, "lidar")
        self.create_sensor(id, msg, body_id=body_id, mount=mount, name=name)

    @staticmethod
    def lidar_clouds(done: Any, sensor_id: int,
                     max_bytes: int = _framing.DEFAULT_MAX_FRAME_BYTES) -> list[np.ndarray]:
        """The point clouds of lidar `sensor_id` in a StepDone (or a list of SensorData), in
        order, as structured arrays (one record per point, the cloud's own fields), decoded by
        point_cloud_to_numpy (max_bytes: its bound of a decoded cloud)."""
        items = done.outputs if hasattr(done, "outputs") else done
        return [point_cloud_to_numpy(d.point_cloud, max_bytes) for d in items
                if d.sensor_id == sensor_id and d.WhichOneof("payload") == "point_cloud"]

    def create_cone(self, id: int, *, body_id: int = 0, mount: Any = None, name: str = "",
                    mode: str = "exact", **params: Any) -> None:
        """Create a cone sensor (mode "exact" or "lines"); params are ConeConfig fields
        (fov_horizontal, fov_vertical in rad, range in m, lines_per_face)."""
        msg = pb.ConeConfig(mode=_enum_number(pb.ConeMode.DESCRIPTOR, mode, "cone.mode"))
        _set_fields(msg, params, "cone")
        self.create_sensor(id, msg, body_id=body_id, mount=mount, name=name)

    def subscribe(self, sensor_id: int, encoding: str | int = "raw",
                  precision: float | None = None, level: int | None = None,
                  fields: Sequence[str] = ()) -> None:
        """Stream sensor `sensor_id` to this connection (see next_sensor_data; decode clouds
        with point_cloud_to_numpy). precision: m, for "quantized_zstd" (default 0.001), in
        [1e-6, 1] whatever the encoding (ValueError before sending otherwise); level:
        zstd level 1..19 (default 1; ValueError before sending otherwise); fields: the point fields wanted, in this order (default
        all)."""
        msg = pb.Subscribe(sensor_id=sensor_id, encoding=_enum(encoding, _ENCODINGS, "encoding"),
                           fields=list(fields))
        if precision is not None:
            step = float(precision)
            # the daemon's range, for any encoding; checked here so nothing is sent
            if not SUBSCRIBE_MIN_PRECISION <= step <= SUBSCRIBE_MAX_PRECISION:
                raise ValueError(f"precision: {step} must be in [{SUBSCRIBE_MIN_PRECISION:g}, "
                                 f"{SUBSCRIBE_MAX_PRECISION:g}] m")
            msg.precision = step
        if level is not None:
            lvl = int(level)
            if not 0 <= lvl <= 19:      # the daemon's range; 0 is the default, 1
                raise ValueError(f"level: {lvl} must be in [1, 19] (0: 1)")
            msg.level = lvl
        self._call("subscribe", msg)

    def unsubscribe(self, sensor_id: int) -> None:
        self._call("unsubscribe", pb.Unsubscribe(sensor_id=sensor_id))

    # ------------------------------------------------------------------ time

    def update_state(self, time: float, body_ids: Sequence[int] = (), body_poses: Any = None,
                     body_velocities: Any = None, joint_ids: Sequence[int] = (),
                     joint_positions: Any = None) -> None:
        """Send the state at `time`: body_poses (N, 7) px py pz qx qy qz qw, body_velocities
        (N, 6) vx vy vz wx wy wz in world or None, joint_positions (M,). The arrays travel as
        little-endian bytes (the UpdateState *_bytes fields), each converted once from any
        array-like (any layout, byte order, integer or float type; ids any integers)."""
        self.wait_reply(self._send_bulk(*self._state_request(
            time, body_ids, body_poses, body_velocities, joint_ids, joint_positions)))

    def _state_request(self, time: float, body_ids: Sequence[int] = (), body_poses: Any = None,
                       body_velocities: Any = None, joint_ids: Sequence[int] = (),
                       joint_positions: Any = None) -> tuple[str, Any, list]:
        """The checked arguments of update_state as _send_bulk's (body, message, arrays)."""
        arrays = state_arrays(body_ids, body_poses, body_velocities, joint_ids, joint_positions)
        return "update_state", pb.UpdateState(time=float(time)), arrays

    def step(self, time: float, outputs: str | Iterable[int] = "all") -> "StepDone":
        """Evaluate every sensor over (t_prev, time]; returns a sensim.StepDone (time in s,
        step index, the records as SensorData messages in `outputs`, decoded by `records`,
        `by_sensor()` or done[sensor_id]). outputs: the records it carries, "all" (default),
        "none" (they go to subscribers only) or the ids of the sensors wanted. Records the
        daemon sends ahead of the StepDone (when they do not fit in one frame) are put back
        into its outputs, in order."""
        from .outputs import StepDone   # outputs imports this module
        return StepDone.from_message(self._call("step", _step_message(time, outputs),
                                                "step_done"))

    def raycast(self, origins: Any, directions: Any, max_range: float = 0.0,
                times: Any = None, exclude_bodies: Sequence[int] = (),
                group_mask: int = 0) -> np.recarray:
        """Trace rays (origins and directions (N, 3), world) against the environment. Returns a
        record array of N rays (RAYCAST_DTYPE) with fields distances (+inf on a miss),
        object_ids, labels and normals (N, 3). The rays pass through the objects of
        `exclude_bodies` and, with a non-zero `group_mask`, those whose group bit it does not
        set. `origins` may also be one origin (3,) for every ray.

        Rays that all start at one point (one origin given, or origins equal bit for bit) send
        it once (Raycast.origin, 24 bytes a ray fewer) to a daemon with
        pb.FEATURE_RAYCAST_ORIGIN in `features`, with the same hits bit for bit; an older
        daemon gets it once per ray. A refused origin is then named `origin`.

        The arrays may be anything array-like (broadcast, sliced, Fortran-ordered, big-endian,
        any integer or float type); each is converted once to the little-endian float64 it
        travels as (an array that already is one is sent from its own memory), and a result is
        seen in the memory it was received into (no copy), or, from a daemon with
        pb.FEATURE_RAYCAST_HIT_MASK, asked for the hits alone (Raycast.omit_misses), spread
        into a new array: the same records, bit for bit. From PIPELINE_MIN_RAYS rays on,
        when they would fit in one request (the daemon's max_frame_bytes), the rays go as
        several requests sent back to back (PIPELINE_WINDOW in flight), whose replies must
        report one `world_serial` (no request changed the environment in between); otherwise,
        or when one of them fails, the rays are sent again as one request, whose reply (or
        error) is the answer."""
        o = _rows(origins, 3, "origins")
        d = _rows(directions, 3, "directions")
        if len(o) != len(d) and len(o) != 1:
            raise ValueError(f"origins: {len(o)} rays but directions: {len(d)}")
        t = None if times is None else _flat(times, "times")
        msg = pb.Raycast(max_range=float(max_range),
                         exclude_bodies=_ids(exclude_bodies, "exclude_bodies").tolist())
        if group_mask:
            msg.group_mask = int(group_mask)
        if self.features & pb.FEATURE_RAYCAST_HIT_MASK:
            msg.omit_misses = True  # the hits alone come back, spread over the rays here
        o = self._one_origin(msg, o, len(d))
        limit = self.limits.max_frame_bytes if self.limits is not None else 0
        whole = (0 if o is None else o.nbytes) + d.nbytes + (0 if t is None else t.nbytes)
        if (len(d) >= PIPELINE_MIN_RAYS and (t is None or len(t) in (0, 1, len(d)))
                and (not limit or whole + 4096 <= limit) and not self._serial_unknown):
            hits = self._raycast_pipelined(o, d, t, msg)
            if hits is not None:
                return hits
        return self._raycast_one(o, d, t, msg)

    def _one_origin(self, msg: Any, o: np.ndarray, n: int) -> np.ndarray | None:
        """The origins as they travel: None with msg.origin set when every ray starts at one
        point and the daemon takes Raycast.origin; else (N, 3) (one origin written out per
        ray for an older daemon)."""
        if len(o) == n and (n < 2 or not self.features & pb.FEATURE_RAYCAST_ORIGIN):
            return o
        bits = o.view("<u8")
        if len(o) == n and not (bits == bits[0]).all():
            return o
        if not self.features & pb.FEATURE_RAYCAST_ORIGIN:
            return np.ascontiguousarray(np.broadcast_to(o[0], (n, 3)))
        msg.origin.x, msg.origin.y, msg.origin.z = (float(v) for v in o[0])
        return None

    def _send_rays(self, msg: Any, o: np.ndarray | None, d: np.ndarray, t: np.ndarray | None,
                   a: int, b: int) -> int:
        """Send the Raycast msg with rays a .. b - 1 as its bulk arrays, each (in a frame of more
        than SMALL_BULK_BYTES) at a multiple of 8 bytes from the frame's start (Raycast.padding
        before it when needed: the daemon traces aligned rays where they lie in the frame, and
        copies misaligned ones first).
        Returns the request's id."""
        arrays = [] if o is None else [("origins_bytes", o[a:b])]
        arrays.append(("directions_bytes", d[a:b]))
        if t is not None:
            arrays.append(("times_bytes", t if len(t) <= 1 else t[a:b]))
        return self._send_bulk("raycast", msg, arrays, "padding")

    def _raycast_reply(self, request_id: int, n: int, check: bool = True,
                       omit_misses: bool = False) -> tuple[Any, Any]:
        """Wait for the reply to a raycast of n rays: (Envelope, the hits as a record array
        seen in the frame they arrived in, or copied from the parsed reply, or with
        omit_misses spread from the hits over a new array); (Envelope, None) for a failed
        request when not check."""
        self._large_frame = None
        env = self._wait_reply(request_id, check=check, in_place=_HITS_PATH)
        if env.HasField("status") and env.status.code != pb.OK:
            return env, None
        if env.WhichOneof("body") != "raycast_result":
            raise errors.ProtocolError(
                f"raycast: expected a raycast_result reply, got {env.WhichOneof('body')}")
        frame, self._large_frame = self._large_frame, None
        if omit_misses:
            if frame is not None and frame[0] == env.id:
                at = _framing.find_field(frame[1], _HITS_PATH)
                if at is not None:
                    return env, spread_hits(env.raycast_result.hit_mask,
                                            memoryview(frame[1])[at[0]:at[0] + at[1]], n)
            return env, raycast_hits(env.raycast_result, n, omit_misses=True)
        if frame is not None and frame[0] == env.id:
            # the records inside the frame they arrived in (parsed without them): no copy
            at = _framing.find_field(frame[1], _HITS_PATH)
            if at is not None:
                if at[1] != n * RAYCAST_DTYPE.itemsize:
                    raise errors.ProtocolError(
                        f"raycast: {at[1]} bytes of hits_bytes for {n} rays")
                return env, np.frombuffer(frame[1], dtype=RAYCAST_DTYPE, count=n,
                                          offset=at[0]).view(np.recarray)
        return env, raycast_hits(env.raycast_result, n)

    def _raycast_one(self, o: np.ndarray | None, d: np.ndarray, t: np.ndarray | None,
                     msg: Any) -> np.recarray:
        """The raycast as one request."""
        rid = self._send_rays(msg, o, d, t, 0, len(d))
        return self._raycast_reply(rid, len(d), omit_misses=msg.omit_misses)[1]

    def _raycast_pipelined(self, o: np.ndarray | None, d: np.ndarray, t: np.ndarray | None,
                           msg: Any) -> np.recarray | None:
        """The raycast as requests of about PIPELINE_RAYS rays, PIPELINE_WINDOW of them in
        flight (a request is sent when the reply PIPELINE_WINDOW before it is in), their hits
        gathered into one array; None when a request failed or the replies' world_serial
        differ (the caller then sends the rays as one request; no more parts are sent)."""
        n = len(d)
        k = -(-n // PIPELINE_RAYS)
        bounds = [n * i // k for i in range(k + 1)]
        ids: list[int] = []

        def send_next() -> None:
            a, b = bounds[len(ids)], bounds[len(ids) + 1]
            ids.append(self._send_rays(msg, o, d, t, a, b))

        out = self._hits_buffer(n)
        raw = out.view(np.uint8)
        serial = None
        consistent = True
        i = 0
        reading = False  # a failure while reading reply i: that reply is gone with it
        try:
            while len(ids) < min(PIPELINE_WINDOW, k):
                send_next()
            while i < len(ids):
                reading = True
                env, hits = self._raycast_reply(ids[i], bounds[i + 1] - bounds[i], check=False,
                                                omit_misses=msg.omit_misses)
                reading = False
                result = env.raycast_result if hits is not None else None
                if result is not None and not result.HasField("world_serial"):
                    self._serial_unknown = True  # a daemon without it: one request from now on
                if (result is None or not result.HasField("world_serial")
                        or serial not in (None, result.world_serial)):
                    consistent = False  # the replies already asked for are still read
                if consistent:
                    # every byte of the records (the reserved ones too, which no field names)
                    serial = result.world_serial
                    size = RAYCAST_DTYPE.itemsize
                    raw[bounds[i] * size:bounds[i + 1] * size] = np.asarray(hits).view(np.uint8)
                del hits
                i += 1
                if consistent and len(ids) < k:
                    send_next()
        except BaseException:
            # the replies not read yet are dropped as they arrive
            self._abandoned.update(ids[i + 1 if reading else i:])
            raise
        return out.view(np.recarray) if consistent else None

    def _hits_buffer(self, n: int) -> np.ndarray:
        """An array of n RAYCAST_DTYPE records for a pipelined raycast's hits: one of the two
        kept arrays that nothing else refers to any more (a result handed out keeps its
        array), else a new one, kept (up to KEEP_BUFFER_BYTES) in place of a free one."""
        for i in range(len(self._hits_kept)):
            # references: the list's and getrefcount's argument; a result adds one
            if len(self._hits_kept[i]) == n and sys.getrefcount(self._hits_kept[i]) == 2:
                return self._hits_kept[i]
        buf = np.empty(n, dtype=RAYCAST_DTYPE)
        if buf.nbytes > _framing.KEEP_BUFFER_BYTES:
            return buf  # not kept: at most two arrays of 64 MiB stay with the client
        if len(self._hits_kept) < 2:
            self._hits_kept.append(buf)
        else:
            free = [i for i in range(len(self._hits_kept))
                    if sys.getrefcount(self._hits_kept[i]) == 2]
            if free:
                self._hits_kept[free[0]] = buf
        return buf


