# SPDX-License-Identifier: MIT
"""Sensor outputs as typed Python and NumPy values.

``Client.step`` returns a :class:`StepDone`: the step's time, index and records, which
``done.records`` (or :func:`outputs`, which takes any list of ``SensorData`` messages too, such
as those pushed to a subscriber) decodes into :class:`SensorOutput` records::

    done = client.step(t)
    for out in done.records:                   # or done[5]: sensor 5's records
        if out.kind == "point_cloud":
            xyz = out.value[["x", "y", "z"]]       # structured array, one record per point
            rows, cols = out.meta.shape            # (beams, columns) of an organised cloud
        elif out.kind == "imu":
            acc = out.value.acceleration          # numpy (3,), m/s^2

The sample types (:class:`ImuSample`, :class:`ScalarSample`, :class:`ConeReading`,
:class:`CloudMeta`) are frozen dataclasses; their fields can also be read by key
(``out.value["acceleration"]``), as the dicts of earlier versions were.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from functools import cached_property
from typing import Any, Iterable, Iterator, Optional, Sequence, Union

import numpy as np

from ._framing import DEFAULT_MAX_FRAME_BYTES
from ._proto import pb
from .client import point_cloud_to_numpy

__all__ = ["SensorOutput", "ImuSample", "ScalarSample", "ConeReading", "CloudMeta", "StepDone",
           "decode", "outputs", "by_sensor"]


class _ByKey:
    """Read access by field name, for code written against the dict form (no values(): an
    IMU sample has a field of that name)."""

    def __getitem__(self, key: str) -> Any:
        if key not in self.keys():
            raise KeyError(key)
        return getattr(self, key)

    def keys(self) -> list[str]:
        return [f.name for f in fields(self)]  # type: ignore[arg-type]

    def items(self) -> list[tuple[str, Any]]:
        return [(k, getattr(self, k)) for k in self.keys()]

    def __contains__(self, key: object) -> bool:
        return key in self.keys()


@dataclass(frozen=True)
class ImuSample(_ByKey):
    """One IMU sample; a vector is None when its sub-sensor is absent."""

    acceleration: Optional[np.ndarray]       # (3,) m/s^2, specific force in the IMU frame
    angular_velocity: Optional[np.ndarray]   # (3,) rad/s
    magnetic_field: Optional[np.ndarray]     # (3,) T
    values: np.ndarray                       # the selected axes, accelerometer first


@dataclass(frozen=True)
class ScalarSample(_ByKey):
    """An encoder or odometer reading."""

    position: float                          # encoder: rad or m; odometer: m
    speed: Optional[float]                   # rad/s or m/s; None when not reported


@dataclass(frozen=True)
class ConeReading(_ByKey):
    """A cone sensor reading (docs/models/cone.md)."""

    detected: bool
    range: float                             # m
    azimuth: float                           # rad
    elevation: float                         # rad
    object_id: int
    point: Optional[np.ndarray]              # (3,) closest point, world frame, m
    speed: Optional[float]                   # m/s


@dataclass(frozen=True)
class CloudMeta(_ByKey):
    """What a point cloud says about itself besides its points."""

    frame_start_time: float                  # s; the points' time offsets count from it
    complete: bool                           # a whole revolution (or flash frame)
    frame: str                               # "sensor" or "world"
    encoding: int                            # sensim.pb.ENCODING_*
    max_error: float                         # m, position error bound of the encoding
    height: int                              # rows: 1 unorganised, beams for an organised one
    width: int                               # columns (points when unorganised)

    @property
    def shape(self) -> tuple[int, int]:
        """(height, width): reshape the points with ``points.reshape(meta.shape)``."""
        return (self.height, self.width)

    @property
    def organised(self) -> bool:
        return self.height > 1


Value = Union[np.ndarray, ImuSample, ScalarSample, ConeReading, None]


@dataclass(frozen=True)
class SensorOutput:
    """One record of one sensor.

    kind is "point_cloud" (value: structured array, one record per point, the cloud's own
    fields; meta: CloudMeta), "imu" (ImuSample), "scalar" (ScalarSample) or "cone"
    (ConeReading); "" for an end-of-stream marker. time: s, end of the step (an IMU at a fixed
    rate: the sample's time); start_time: s, start of the step interval; frame: the sensor's
    frame counter; sequence: the subscription's frame number (pushed data only, else 0).
    """

    sensor_id: int
    time: float
    frame: int
    kind: str
    value: Any
    meta: Optional[CloudMeta] = None
    start_time: float = 0.0
    sequence: int = 0
    end_of_stream: bool = False


def _vec(msg: Any, field: str) -> Optional[np.ndarray]:
    if not msg.HasField(field):
        return None
    v = getattr(msg, field)
    return np.array([v.x, v.y, v.z])


def decode(data: Any, max_bytes: int = DEFAULT_MAX_FRAME_BYTES, *,
           points: Any = None) -> SensorOutput:
    """Decode one ``SensorData`` message; a point cloud as by point_cloud_to_numpy (any
    encoding, at most max_bytes decoded; errors.ProtocolError names what does not decode).
    points: the cloud's data bytes when the message was parsed without them (a buffer of
    the frame they came in: Client.next_sensor_output)."""
    kind = data.WhichOneof("payload") or ""
    meta = None
    value: Value
    if kind == "point_cloud":
        pc = data.point_cloud
        value = point_cloud_to_numpy(pc, max_bytes, points)
        height = pc.height if pc.HasField("height") and pc.height else 1
        width = pc.width if pc.HasField("width") and pc.width else len(value) // max(height, 1)
        if height * width != len(value):
            height, width = 1, len(value)    # not a grid of its points: read it as a list
        meta = CloudMeta(frame_start_time=pc.frame_start_time, complete=pc.complete,
                         frame="world" if pc.frame == pb.FRAME_WORLD else "sensor",
                         encoding=pc.encoding, max_error=pc.max_error,
                         height=height, width=width)
    elif kind == "imu":
        s = data.imu
        value = ImuSample(_vec(s, "acceleration"), _vec(s, "angular_velocity"),
                          _vec(s, "magnetic_field"), np.array(s.values, dtype=np.float64))
    elif kind == "scalar":
        s = data.scalar
        value = ScalarSample(s.position, s.speed if s.HasField("speed") else None)
    elif kind == "cone":
        s = data.cone
        value = ConeReading(s.detected, s.range, s.azimuth, s.elevation, s.object_id,
                            _vec(s, "point"), s.speed if s.HasField("speed") else None)
    else:
        value = None
    seq = data.sequence if data.HasField("sequence") else 0
    return SensorOutput(data.sensor_id, data.time, data.frame, kind, value, meta,
                        data.start_time, seq, data.end_of_stream)


def _items(done_or_list: Any) -> Iterable[Any]:
    return done_or_list.outputs if hasattr(done_or_list, "outputs") else done_or_list


def outputs(done_or_list: Any, max_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> list[SensorOutput]:
    """The decoded outputs of a ``StepDone`` (or of an iterable of ``SensorData``); max_bytes
    bounds each decoded point cloud (see point_cloud_to_numpy)."""
    return [decode(d, max_bytes) for d in _items(done_or_list)]


def by_sensor(done_or_list: Any) -> dict[int, list[SensorOutput]]:
    """The decoded outputs of a ``StepDone`` (or of SensorData messages) grouped by sensor id,
    each sensor's records in order."""
    return _group(outputs(done_or_list))


def _group(records: Iterable[SensorOutput]) -> dict[int, list[SensorOutput]]:
    out: dict[int, list[SensorOutput]] = {}
    for o in records:
        out.setdefault(o.sensor_id, []).append(o)
    return out


def iter_outputs(done_or_list: Any) -> Iterator[SensorOutput]:
    """outputs(), one record at a time."""
    return (decode(d) for d in _items(done_or_list))


@dataclass(frozen=True)
class StepDone:
    """The reply to ``Client.step``: the protocol's StepDone message in typed form, with the
    same attribute names.

    time: s, the end of the step interval; step: its index, from 1; outputs: the records it
    carries as the daemon sent them (``SensorData`` messages, in order, those sent ahead of
    the reply put back in place; decoded by ``records``, :func:`outputs`, :func:`by_sensor`,
    ``Client.lidar_clouds``); outputs_in_parts: how many of them came ahead of the reply, each
    in its own frame (docs/streams.md, "Outputs of a step"); message: the StepDone message
    itself (e.g. to hash or forward it).
    """

    time: float
    step: int
    outputs: Sequence[Any]
    outputs_in_parts: int = 0
    message: Any = field(default=None, repr=False, compare=False)

    @classmethod
    def from_message(cls, msg: Any) -> "StepDone":
        """The typed form of a ``pb.StepDone`` (its records are not copied)."""
        return cls(float(msg.time), int(msg.step), msg.outputs, int(msg.outputs_in_parts), msg)

    @cached_property
    def records(self) -> list[SensorOutput]:
        """Every record decoded (:func:`decode`), in order; decoded once, on first use."""
        return [decode(d) for d in self.outputs]

    def by_sensor(self) -> dict[int, list[SensorOutput]]:
        """The decoded records grouped by sensor id, each sensor's in order."""
        return _group(self.records)

    def __getitem__(self, sensor_id: int) -> list[SensorOutput]:
        """The decoded records of one sensor in this step ([] when it produced none)."""
        return [o for o in self.records if o.sensor_id == sensor_id]

    # not iterable: with __getitem__ alone, iter() would call done[0], done[1], ... for ever
    # (iterate done.outputs or done.records)
    __iter__ = None
