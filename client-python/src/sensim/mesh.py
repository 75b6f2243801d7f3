# SPDX-License-Identifier: MIT
"""Triangle meshes from files (OBJ, STL, PLY and the other formats meshio reads), through the
maintained meshio library (Debian ``python3-meshio``), for ``Client.create_mesh``::

    c.create_mesh(1, "torus.obj")                  # or: c.create_mesh(1, *sensim.load_mesh(p))

Quadrilaterals are split into two triangles along their first diagonal; other polygons,
meshes without triangles and indices outside the vertex list are refused with a ValueError
naming the file. Units are the file's, taken as metres.
"""

from __future__ import annotations

import os
from typing import NamedTuple, Union

import numpy as np

__all__ = ["Mesh", "load_mesh"]

PathLike = Union[str, "os.PathLike[str]"]


class Mesh(NamedTuple):
    """vertices (N, 3) float32, m; indices (M, 3) uint32, counter-clockwise seen from outside
    as the file has them."""

    vertices: np.ndarray
    indices: np.ndarray


def load_mesh(path: PathLike, file_format: str | None = None) -> Mesh:
    """Read a triangle mesh with meshio (format from the file name unless file_format is
    given, e.g. "obj", "stl", "ply"). Raises FileNotFoundError for a missing file and
    ValueError for one meshio cannot read or that holds no usable triangles."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"load_mesh: no such file: {path}")
    try:
        import meshio
    except ImportError as exc:
        raise ImportError("load_mesh needs meshio (Debian: apt-get install python3-meshio)") \
            from exc
    try:
        m = meshio.read(path, file_format=file_format)
    except Exception as exc:  # meshio raises ReadError, ValueError, KeyError, ... by format
        raise ValueError(f"load_mesh: cannot read {path}: {type(exc).__name__}: {exc}") from None
    except SystemExit:
        # meshio's reader ends the whole program (sys.exit(1)) when no reader of the format
        # can read the file: the caller's program must go on and learn why
        what = file_format or "the format its name says"
        raise ValueError(f"load_mesh: cannot read {path} as {what}") from None
    points = np.asarray(m.points, dtype=np.float64)
    if points.ndim != 2 or points.shape[1] not in (2, 3):
        raise ValueError(f"load_mesh: {path}: vertices of shape {points.shape}")
    if points.shape[1] == 2:
        points = np.column_stack([points, np.zeros(len(points))])
    tris = []
    skipped = []
    for block in m.cells:
        data = np.asarray(block.data, dtype=np.int64)
        if block.type == "triangle":
            tris.append(data.reshape(-1, 3))
        elif block.type == "quad":
            q = data.reshape(-1, 4)
            tris += [q[:, [0, 1, 2]], q[:, [0, 2, 3]]]
        elif block.type in ("vertex", "line"):
            continue  # points and edges of a mixed file: nothing to trace
        else:
            skipped.append(block.type)
    if skipped:
        raise ValueError(f"load_mesh: {path}: cells of type {sorted(set(skipped))} are not "
                         "triangles or quads; triangulate the mesh first")
    if not tris:
        raise ValueError(f"load_mesh: {path}: no triangles")
    indices = np.concatenate(tris)
    if indices.size and (indices.min() < 0 or indices.max() >= len(points)):
        raise ValueError(f"load_mesh: {path}: triangle indices outside the {len(points)} "
                         "vertices")
    if not np.isfinite(points).all():
        raise ValueError(f"load_mesh: {path}: vertices that are not finite")
    vertices = points.astype("<f4")
    if np.isinf(vertices).any():
        raise ValueError(f"load_mesh: {path}: vertices beyond the float32 range")
    return Mesh(vertices, indices.astype("<u4"))
