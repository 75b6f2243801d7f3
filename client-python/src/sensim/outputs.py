# SPDX-License-Identifier: MIT
"""Sensor outputs as plain Python and NumPy values.

``Client.step`` returns the ``StepDone`` message; :func:`outputs` turns its ``outputs`` (or any
list of ``SensorData`` messages, such as those pushed to a subscriber) into
:class:`SensorOutput` records::

    done = client.step(t)
    for out in sensim.outputs(done):
        if out.kind == "point_cloud":
            xyz = out.value[["x", "y", "z"]]       # structured array, one record per point
        elif out.kind == "imu":
            acc = out.value["acceleration"]       # numpy (3,), m/s^2
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

import numpy as np

from ._framing import DEFAULT_MAX_FRAME_BYTES
from ._proto import pb
from .client import point_cloud_to_numpy


@dataclass(frozen=True)
class SensorOutput:
    """One record of one sensor: ``kind`` is ``point_cloud``, ``imu``, ``scalar`` or ``cone``.

    ``value`` is a structured array (point clouds, see ``meta`` for the frame start time,
    completeness and frame), or a dict of floats and numpy vectors.
    """

    sensor_id: int
    time: float
    frame: int
    kind: str
    value: Any
    meta: dict


def _vec(msg: Any, field: str) -> np.ndarray | None:
    if not msg.HasField(field):
        return None
    v = getattr(msg, field)
    return np.array([v.x, v.y, v.z])


def decode(data: Any, max_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> SensorOutput:
    """Decode one ``SensorData`` message; a point cloud as by point_cloud_to_numpy (at most
    max_bytes decoded; errors.ProtocolError names what does not decode)."""
    kind = data.WhichOneof("payload") or ""
    meta: dict = {}
    if kind == "point_cloud":
        pc = data.point_cloud
        value: Any = point_cloud_to_numpy(pc, max_bytes)
        meta = {"frame_start_time": pc.frame_start_time, "complete": pc.complete,
                "frame": "world" if pc.frame == pb.FRAME_WORLD else "sensor",
                "encoding": pc.encoding, "max_error": pc.max_error}
    elif kind == "imu":
        s = data.imu
        value = {"acceleration": _vec(s, "acceleration"),
                 "angular_velocity": _vec(s, "angular_velocity"),
                 "magnetic_field": _vec(s, "magnetic_field"),
                 "values": np.array(s.values, dtype=np.float64)}
    elif kind == "scalar":
        s = data.scalar
        value = {"position": s.position, "speed": s.speed if s.HasField("speed") else None}
    elif kind == "cone":
        s = data.cone
        value = {"detected": s.detected, "range": s.range, "azimuth": s.azimuth,
                 "elevation": s.elevation, "object_id": s.object_id,
                 "point": _vec(s, "point"),
                 "speed": s.speed if s.HasField("speed") else None}
    else:
        value = None
    return SensorOutput(data.sensor_id, data.time, data.frame, kind, value, meta)


def outputs(done_or_list: Any, max_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> list[SensorOutput]:
    """The decoded outputs of a ``StepDone`` (or of an iterable of ``SensorData``); max_bytes
    bounds each decoded point cloud (see point_cloud_to_numpy)."""
    items: Iterable[Any] = (done_or_list.outputs if hasattr(done_or_list, "outputs")
                            else done_or_list)
    return [decode(d, max_bytes) for d in items]
