# SPDX-License-Identifier: MIT
"""Files other tools open: point clouds as PCD (ASCII or binary), PLY and XYZ, samples as CSV.

Every writer takes a cloud as it comes from the client (a structured array with the cloud's
own fields, e.g. ``SensorOutput.value``) or a plain (N, 3) / (N, 4) array of x y z
[intensity], in any memory layout; the result is little-endian and packed.

* PCD (v0.7, the Point Cloud Library's format): every field of the cloud, ``normal`` as
  ``normal_x normal_y normal_z``; an organised cloud (``shape=(height, width)``, e.g.
  ``SensorOutput.meta.shape``) stays organised; ASCII or binary.
* PLY: a ``vertex`` element with every field, ``normal`` as ``nx ny nz``; binary little-endian or
  ASCII.
* XYZ: ``x y z`` per line (the convention of the Tirkkonen thesis that MeshLab reads); a miss
  (NaN position, or a point at the origin) is written as ``0 0 0`` with ``keep_misses`` and left
  out otherwise.
* CSV: IMU, encoder, odometer and cone samples, one row per sample, a header naming each
  column with its unit.

Floats are written with enough digits to read back the same float32 / float64 bits.
"""

from __future__ import annotations

import csv
import os
import re
from typing import Any, Iterable, Optional, Sequence, Union

import numpy as np

__all__ = ["as_cloud", "write_pcd", "write_ply", "write_xyz", "write_csv", "csv_columns",
           "CsvWriter", "write_cloud"]

PathLike = Union[str, "os.PathLike[str]"]

# Names PCL and PLY readers know for the components of a vector field.
_PCD_VECTORS = {"normal": ("normal_x", "normal_y", "normal_z")}
_PLY_VECTORS = {"normal": ("nx", "ny", "nz")}


def as_cloud(points: Any) -> np.ndarray:
    """A structured array of points from a structured array (kept as it is) or an (N, 3) /
    (N, 4) array-like of x y z [intensity] in any layout and real dtype (float32 when it
    converts exactly, else float64)."""
    arr = np.asarray(points)
    if arr.dtype.names:
        return arr.reshape(-1)
    if arr.ndim != 2 or arr.shape[1] not in (3, 4):
        raise ValueError(f"points: expected a structured array or shape (N, 3) or (N, 4), "
                         f"got shape {arr.shape}")
    if arr.dtype.kind not in "fiu":
        raise ValueError(f"points: expected real numbers, got {arr.dtype}")
    f4 = arr.astype("<f4")
    kind = "<f4" if np.array_equal(f4.astype(arr.dtype), arr, equal_nan=True) else "<f8"
    names = ["x", "y", "z", "intensity"][:arr.shape[1]]
    out = np.empty(len(arr), dtype=[(n, kind) for n in names])
    for i, n in enumerate(names):
        out[n] = arr[:, i]
    return out


# a field's name as PCD's and PLY's headers can hold it: one token of printable ASCII (a
# space or a line end in it would change what the header says)
_HEADER_NAME = re.compile(r"[!-~]+")


def _columns(cloud: np.ndarray, vectors: dict) -> list[tuple[str, np.ndarray]]:
    """(name, 1-D little-endian column) for every scalar of every field, vectors split.
    ValueError naming a field whose name a file header cannot hold."""
    cols = []
    for name in cloud.dtype.names:
        if not _HEADER_NAME.fullmatch(name):
            raise ValueError(f"points: the field name {name!r} cannot be written in a PCD or "
                             "PLY header (one word of printable ASCII)")
        field = cloud[name]
        le = (field.dtype.base if field.ndim == 2 else field.dtype).newbyteorder("<")
        if field.ndim == 2:
            parts = vectors.get(name, ())
            if len(parts) != field.shape[1]:
                parts = tuple(f"{name}_{i}" for i in range(field.shape[1]))
            cols += [(p, np.ascontiguousarray(field[:, i], dtype=le))
                     for i, p in enumerate(parts)]
        else:
            cols.append((name, np.ascontiguousarray(field, dtype=le)))
    return cols


def _packed(cols: list[tuple[str, np.ndarray]]) -> np.ndarray:
    """One packed little-endian record per point from the columns."""
    dtype = np.dtype([(n, c.dtype) for n, c in cols])
    out = np.empty(len(cols[0][1]) if cols else 0, dtype=dtype)
    for n, c in cols:
        out[n] = c
    return out


def _format(dtype: np.dtype) -> str:
    """printf format that reads back the same value."""
    if dtype.kind == "f":
        return "%.9g" if dtype.itemsize <= 4 else "%.17g"
    return "%d"


def _text_rows(cols: list[tuple[str, np.ndarray]]) -> Iterable[str]:
    """One line per point, the values separated by spaces."""
    fmt = " ".join(_format(c.dtype) for _, c in cols) + "\n"
    for row in zip(*(c.tolist() for _, c in cols)):
        yield fmt % row


def _shape(n: int, shape: Optional[Sequence[int]]) -> tuple[int, int]:
    if shape is None:
        return 1, n
    h, w = (int(v) for v in shape)
    if h * w != n or h < 1:
        raise ValueError(f"shape: {h} x {w} does not hold the cloud's {n} points")
    return h, w


_PCD_TYPES = {"f": "F", "i": "I", "u": "U"}


def write_pcd(path: PathLike, points: Any, *, binary: bool = True,
              shape: Optional[Sequence[int]] = None,
              viewpoint: Sequence[float] = (0, 0, 0, 1, 0, 0, 0)) -> None:
    """Write a PCD v0.7 file: every field of the cloud; shape (height, width) keeps an organised
    cloud organised (row-major points, as sensor_msgs/PointCloud2); viewpoint: the sensor's
    pose tx ty tz qw qx qy qz (PCD's order)."""
    cloud = as_cloud(points)
    cols = _columns(cloud, _PCD_VECTORS)
    h, w = _shape(len(cloud), shape)
    bad = [n for n, c in cols if c.dtype.kind not in _PCD_TYPES or c.dtype.itemsize > 8]
    if bad:
        raise ValueError(f"write_pcd: fields {bad} have no PCD type")
    header = ["# .PCD v0.7 - Point Cloud Data file format (written by sensim)",
              "VERSION 0.7",
              "FIELDS " + " ".join(n for n, _ in cols),
              "SIZE " + " ".join(str(c.dtype.itemsize) for _, c in cols),
              "TYPE " + " ".join(_PCD_TYPES[c.dtype.kind] for _, c in cols),
              "COUNT " + " ".join("1" for _ in cols),
              f"WIDTH {w}", f"HEIGHT {h}",
              "VIEWPOINT " + " ".join("%.17g" % float(v) for v in viewpoint),
              f"POINTS {len(cloud)}",
              "DATA " + ("binary" if binary else "ascii")]
    with open(path, "wb") as f:
        f.write(("\n".join(header) + "\n").encode())
        if binary:
            f.write(_packed(cols).tobytes())
        else:
            for line in _text_rows(cols):
                f.write(line.encode())


_PLY_TYPES = {("f", 4): "float", ("f", 8): "double", ("i", 1): "char", ("u", 1): "uchar",
              ("i", 2): "short", ("u", 2): "ushort", ("i", 4): "int", ("u", 4): "uint"}


def write_ply(path: PathLike, points: Any, *, binary: bool = True) -> None:
    """Write a PLY file: one vertex per point with every field of the cloud (normal as nx ny
    nz), binary little-endian or ASCII."""
    cloud = as_cloud(points)
    cols = _columns(cloud, _PLY_VECTORS)
    bad = [n for n, c in cols if (c.dtype.kind, c.dtype.itemsize) not in _PLY_TYPES]
    if bad:
        raise ValueError(f"write_ply: fields {bad} have no PLY type")
    header = ["ply", "format " + ("binary_little_endian" if binary else "ascii") + " 1.0",
              "comment written by sensim", f"element vertex {len(cloud)}"]
    header += [f"property {_PLY_TYPES[(c.dtype.kind, c.dtype.itemsize)]} {n}" for n, c in cols]
    header.append("end_header")
    with open(path, "wb") as f:
        f.write(("\n".join(header) + "\n").encode())
        if binary:
            f.write(_packed(cols).tobytes())
        else:
            for line in _text_rows(cols):
                f.write(line.encode())


def write_xyz(path: PathLike, points: Any, *, keep_misses: bool = True) -> int:
    """Write `x y z` per line. A miss (a NaN coordinate, or a point exactly at the origin as
    MISSES_ZERO gives) is `0 0 0` with keep_misses, else left out. Returns the lines written."""
    cloud = as_cloud(points)
    xyz = np.column_stack([np.asarray(cloud[n], dtype=np.float64) for n in ("x", "y", "z")])
    miss = np.isnan(xyz).any(axis=1) | (xyz == 0).all(axis=1)
    if keep_misses:
        xyz[miss] = 0.0
    else:
        xyz = xyz[~miss]
    single = all(cloud.dtype[n].itemsize <= 4 for n in ("x", "y", "z"))
    np.savetxt(path, xyz, fmt="%.9g" if single else "%.17g", delimiter=" ")
    return len(xyz)


def csv_columns(kind: str) -> list[tuple[str, str]]:
    """The (column, unit) pairs of write_csv for a sample kind (after time and sensor)."""
    def vec(name: str, unit: str) -> list[tuple[str, str]]:
        return [(f"{name}_{a}", unit) for a in "xyz"]

    if kind == "imu":
        return vec("acceleration", "m/s^2") + vec("angular_velocity", "rad/s") + \
            vec("magnetic_field", "T")
    if kind == "scalar":
        return [("position", "rad or m"), ("speed", "rad/s or m/s")]
    if kind == "cone":
        return [("detected", "bool"), ("range", "m"), ("azimuth", "rad"),
                ("elevation", "rad"), ("object_id", ""), ("speed", "m/s")] + vec("point", "m")
    raise ValueError(f"write_csv: no CSV form for {kind!r} outputs (imu, scalar, cone)")


def _row(kind: str, v: Any) -> list:
    """The kind's columns of one sample; absent values empty."""
    def num(x: Any) -> str:
        return "" if x is None else repr(float(x))

    def vec(x: Any) -> list:
        return ["", "", ""] if x is None else [num(c) for c in x]

    if kind == "imu":
        return vec(v.acceleration) + vec(v.angular_velocity) + vec(v.magnetic_field)
    if kind == "scalar":
        return [num(v.position), num(v.speed)]
    return [int(bool(v.detected)), num(v.range), num(v.azimuth), num(v.elevation),
            int(v.object_id), num(v.speed)] + vec(v.point)


class CsvWriter:
    """Writes samples of one kind to a CSV file as they come (see write_csv); close() when
    done, or use as a context manager."""

    def __init__(self, path: PathLike):
        self.path = os.fspath(path)
        self.rows = 0
        self.kind: Optional[str] = None
        self._f = open(self.path, "w", newline="")
        self._out = csv.writer(self._f)

    def write(self, sample: Any) -> None:
        if self.kind is None:
            self.kind = sample.kind
            self._out.writerow(["time [s]", "sensor_id"] +
                               [f"{n} [{u}]" if u else n for n, u in csv_columns(self.kind)])
        elif sample.kind != self.kind:
            raise ValueError(f"write_csv: a {sample.kind} sample among {self.kind} samples "
                             f"(sensor {sample.sensor_id}); one kind per file")
        self._out.writerow([repr(float(sample.time)), sample.sensor_id] +
                           _row(self.kind, sample.value))
        self.rows += 1

    def close(self) -> None:
        self._f.close()

    def __enter__(self) -> "CsvWriter":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def write_csv(path: PathLike, samples: Iterable[Any]) -> int:
    """Write samples of one kind (SensorOutput records of IMUs, encoders, odometers or cone
    sensors; several sensors may share a file) as CSV: time (s), sensor_id, then the kind's
    columns (csv_columns), headed `name [unit]`; an absent value is empty. Returns the rows."""
    with CsvWriter(path) as w:
        for s in samples:
            w.write(s)
        return w.rows


# File name extension -> writer of one cloud, for write_cloud.
CLOUD_FORMATS = ("pcd", "ply", "xyz")


def write_cloud(path: PathLike, out: Any, *, binary: bool = True,
                keep_misses: bool = True) -> None:
    """Write one point-cloud SensorOutput in the format its file name ends with (.pcd, .ply,
    .xyz); a PCD keeps an organised cloud's shape."""
    ext = os.fspath(path).rsplit(".", 1)[-1].lower()
    if ext == "pcd":
        meta = getattr(out, "meta", None)
        write_pcd(path, out.value, binary=binary, shape=meta.shape if meta is not None else None)
    elif ext == "ply":
        write_ply(path, out.value, binary=binary)
    elif ext == "xyz":
        write_xyz(path, out.value, keep_misses=keep_misses)
    else:
        raise ValueError(f"write_cloud: {os.fspath(path)!r}: extension not one of "
                         f"{list(CLOUD_FORMATS)}")
