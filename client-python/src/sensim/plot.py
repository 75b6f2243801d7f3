# SPDX-License-Identifier: MIT
"""Pictures of sensor outputs with matplotlib (Debian ``python3-matplotlib``), saved as PNG.

* :func:`cloud_figure` / :func:`save_cloud`: a point cloud seen from above (bird's-eye, x right
  and y up as REP 103 draws a top view), from the side (x right, z up) or from behind (y to
  the left, z up), coloured by height (z), intensity, ring or range;
* :func:`range_image_figure` / :func:`save_range_image`: the range image of an organised cloud
  (rows = beams from the top, columns in firing order, as the Ouster image), or of a spinning
  lidar's cloud with a ``ring`` field: rows by ring from the highest beam down (rings in
  number order when elevation follows it, else by mean elevation with rings that saw
  nothing last), columns in firing order (every ring as long, misses kept) or by azimuth
  from behind, clockwise;
* :func:`imu_figure` / :func:`save_imu`: IMU time series (acceleration, angular velocity and
  magnetic field against time); :func:`imu_series_figure` the same from arrays.

The figures are ``matplotlib.figure.Figure`` objects made without pyplot, so they work in
scripts, threads and headless machines alike. Misses (NaN positions, or points at the origin)
are left out of cloud views and blank in range images.
"""

from __future__ import annotations

import os
from typing import Any, Iterable, Optional, Sequence, Union

import numpy as np

from .export import as_cloud

__all__ = ["cloud_figure", "save_cloud", "range_image_figure", "save_range_image",
           "imu_figure", "imu_series_figure", "save_imu", "VIEWS", "COLOURS"]

PathLike = Union[str, "os.PathLike[str]"]

# view -> (horizontal axis, vertical axis, their labels); "-y" is y mirrored.
VIEWS = {"top": ("x", "y"), "bev": ("x", "y"), "side": ("x", "z"), "front": ("-y", "z")}
COLOURS = ("height", "intensity", "ring", "range", "none")
_UNITS = {"height": "z [m]", "intensity": "intensity [1/sr]", "ring": "ring",
          "range": "range [m]", "time": "time [s]", "time_offset": "time offset [s]",
          "distance": "distance [m]"}


def _figure(size: tuple[float, float], dpi: int) -> Any:
    try:
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise ImportError("sensim.plot needs matplotlib (Debian: apt-get install "
                          "python3-matplotlib)") from exc
    return Figure(figsize=size, dpi=dpi, layout="constrained")


def _xyz(cloud: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(N, 3) float64 positions and the mask of the points that are not misses."""
    xyz = np.column_stack([np.asarray(cloud[n], dtype=np.float64) for n in ("x", "y", "z")])
    hit = np.isfinite(xyz).all(axis=1) & ~(xyz == 0).all(axis=1)
    return xyz, hit


def _colour_values(cloud: np.ndarray, xyz: np.ndarray, colour: str) -> Optional[np.ndarray]:
    if colour == "none":
        return None
    if colour == "height":
        return xyz[:, 2]
    if colour == "range":
        return np.linalg.norm(xyz, axis=1)
    if colour not in cloud.dtype.names:
        raise ValueError(f"colour: the cloud has no {colour!r} field (fields: "
                         f"{list(cloud.dtype.names)})")
    if cloud.dtype[colour].shape:
        raise ValueError(f"colour: {colour!r} is a vector field; pick a scalar one")
    return np.asarray(cloud[colour], dtype=np.float64)


def cloud_figure(points: Any, *, view: str = "top", colour: str = "height",
                 limits: Optional[Sequence[float]] = None, point_size: float = 1.0,
                 title: str = "", size: tuple[float, float] = (8.0, 8.0),
                 dpi: int = 100) -> Any:
    """A Figure of the cloud seen from `view` ("top" or "bev", "side", "front"), points
    coloured by `colour` ("height", "intensity", "ring", "range", "none", or any scalar field
    of the cloud, e.g. "reflectivity") with a colour bar.
    limits: (h_min, h_max, v_min, v_max) in m (default: the points' extent); equal scales."""
    if view not in VIEWS:
        raise ValueError(f"view: {view!r}; one of {sorted(VIEWS)}")
    cloud = as_cloud(points)
    if colour not in COLOURS and colour not in cloud.dtype.names:
        raise ValueError(f"colour: the cloud has no {colour!r} field; one of {list(COLOURS)} "
                         f"or a field of the cloud {list(cloud.dtype.names)}")
    xyz, hit = _xyz(cloud)
    values = _colour_values(cloud, xyz, colour)
    axis = {"x": xyz[:, 0], "y": xyz[:, 1], "z": xyz[:, 2], "-y": -xyz[:, 1]}
    hname, vname = VIEWS[view]
    h, v = axis[hname][hit], axis[vname][hit]
    fig = _figure(size, dpi)
    ax = fig.add_subplot()
    if values is None:
        ax.scatter(h, v, s=point_size, c="k", marker=".", linewidths=0)
    else:
        art = ax.scatter(h, v, s=point_size, c=values[hit], cmap="viridis", marker=".",
                         linewidths=0)
        fig.colorbar(art, ax=ax, label=_UNITS.get(colour, colour), shrink=0.8)
    ax.set_aspect("equal", adjustable="datalim" if limits is None else "box")
    if limits is not None:
        ax.set_xlim(limits[0], limits[1])
        ax.set_ylim(limits[2], limits[3])
    label = {"x": "x [m]", "y": "y [m]", "z": "z [m]", "-y": "y [m] (left to the left)"}
    ax.set_xlabel(label[hname])
    ax.set_ylabel(label[vname])
    ax.grid(True, linewidth=0.3)
    ax.set_title(title or f"{int(hit.sum())} points, {view} view")
    return fig


def save_cloud(path: PathLike, points: Any, **kwargs: Any) -> str:
    """Save cloud_figure(points, **kwargs) as a PNG; returns the path."""
    return _save(cloud_figure(points, **kwargs), path)


def _range_grid(cloud: np.ndarray, shape: Optional[Sequence[int]], field: str) -> np.ndarray:
    """The (rows, columns) image of `field` ("range" in m, or a field of the cloud), NaN
    where there is no return."""
    xyz, hit = _xyz(cloud)
    if field == "range":
        values = np.linalg.norm(xyz, axis=1)
    elif field in cloud.dtype.names:
        values = np.asarray(cloud[field], dtype=np.float64)
    else:
        raise ValueError(f"field: the cloud has no {field!r} field")
    values = np.where(hit, values, np.nan)
    if shape is not None and int(shape[0]) > 1:
        rows, cols = (int(s) for s in shape)
        if rows * cols != len(cloud):
            raise ValueError(f"shape: {rows} x {cols} does not hold {len(cloud)} points")
        return values.reshape(rows, cols)
    if "ring" not in cloud.dtype.names:
        raise ValueError("range image: the cloud is not organised (height 1) and has no "
                         "'ring' field to organise it by")
    # rows: rings from the highest beam down; columns: azimuth from +pi, clockwise
    ring = np.asarray(cloud["ring"], dtype=np.int64)
    rings, row = np.unique(ring, return_inverse=True)
    elevation = np.arctan2(xyz[:, 2], np.hypot(xyz[:, 0], xyz[:, 1]))
    mean_el = np.array([elevation[hit & (row == i)].mean() if (hit & (row == i)).any()
                        else -np.inf for i in range(len(rings))])
    seen = np.isfinite(mean_el)
    step = np.diff(mean_el[seen])
    if seen.sum() >= 2 and ((step < 0).all() or (step > 0).all()):
        # elevation monotonic in the ring number (Ouster: 0 on top; Velodyne drivers: 0 at
        # the bottom): every ring in that order, those without a return too
        rank = np.arange(len(rings)) if (step < 0).all() else np.arange(len(rings))[::-1]
    else:
        # rings numbered otherwise: by mean elevation, rings without a return last
        rank = np.argsort(-mean_el, kind="stable")
    row_of = np.empty_like(rank)
    row_of[rank] = np.arange(len(rank))
    per_ring = np.bincount(row)
    if (per_ring == per_ring[0]).all():
        # every ring has a point per firing (misses kept): columns in firing order
        cols = int(per_ring[0])
        col = np.empty(len(row), dtype=np.int64)
        for i in range(len(rings)):
            col[row == i] = np.arange(cols)
    else:
        # rings of different lengths (misses removed): columns by azimuth, from +pi clockwise
        cols = max(1, int(np.median(per_ring)))
        az = np.arctan2(xyz[:, 1], xyz[:, 0])
        az = np.where(hit, az, 0.0)
        col = np.clip(((np.pi - az) / (2 * np.pi) * cols).astype(np.int64), 0, cols - 1)
    img = np.full((len(rings), cols), np.nan)
    img[row_of[row[hit]], col[hit]] = values[hit]
    return img


def range_image_figure(points: Any, shape: Optional[Sequence[int]] = None, *,
                       field: str = "range", title: str = "",
                       size: tuple[float, float] = (12.0, 3.5), dpi: int = 100) -> Any:
    """A Figure of the cloud's range image: shape (rows, columns) of an organised cloud (e.g.
    SensorOutput.meta.shape), else organised by its ring field. field: "range" (m) or a field
    of the cloud (e.g. "intensity"). Misses are blank."""
    cloud = as_cloud(points)
    if len(cloud):
        img = _range_grid(cloud, shape, field)
    else:
        img = np.full((1, 1), np.nan)      # a revolution without returns: a blank image
        title = title or f"{field} image, no points"
    fig = _figure(size, dpi)
    ax = fig.add_subplot()
    art = ax.imshow(np.ma.masked_invalid(img), aspect="auto", interpolation="nearest",
                    cmap="turbo")
    fig.colorbar(art, ax=ax, label="range [m]" if field == "range" else field)
    ax.set_xlabel("column (firing order)")
    ax.set_ylabel("row (beam, top first)")
    ax.set_title(title or f"{field} image, {img.shape[0]} x {img.shape[1]}")
    return fig


def save_range_image(path: PathLike, points: Any, shape: Optional[Sequence[int]] = None,
                     **kwargs: Any) -> str:
    """Save range_image_figure(points, shape, **kwargs) as a PNG; returns the path."""
    return _save(range_image_figure(points, shape, **kwargs), path)


def imu_figure(samples: Iterable[Any], *, title: str = "",
               size: tuple[float, float] = (10.0, 8.0), dpi: int = 100) -> Any:
    """A Figure of IMU samples (SensorOutput records of kind "imu", in time order): one panel
    per sub-sensor present (acceleration m/s^2, angular velocity rad/s, magnetic field uT),
    x y z against time in s."""
    samples = [s for s in samples if s.kind == "imu"]
    if not samples:
        raise ValueError("imu_figure: no IMU samples")
    # the sub-sensors every sample has (an IMU's are fixed when it is created)
    vectors = {name: (np.array([getattr(s.value, name) for s in samples], dtype=np.float64)
                      if all(getattr(s.value, name) is not None for s in samples) else None)
               for name in ("acceleration", "angular_velocity", "magnetic_field")}
    return imu_series_figure(np.array([s.time for s in samples]), **vectors,
                             sensor_id=samples[0].sensor_id, title=title, size=size, dpi=dpi)


def imu_series_figure(time: Any, acceleration: Any = None, angular_velocity: Any = None,
                      magnetic_field: Any = None, *, sensor_id: int = 0, title: str = "",
                      size: tuple[float, float] = (10.0, 8.0), dpi: int = 100) -> Any:
    """imu_figure from arrays: time (N,) s and each sub-sensor's (N, 3) values (m/s^2, rad/s,
    T), None for one absent; what ``sensim plot`` draws a long recording's IMU from without
    keeping a record object per sample."""
    t = np.asarray(time, dtype=np.float64)
    panels = [(v, label, scale) for v, label, scale in
              ((acceleration, "acceleration [m/s²]", 1.0),
               (angular_velocity, "angular velocity [rad/s]", 1.0),
               (magnetic_field, "magnetic field [µT]", 1e6)) if v is not None]
    if not panels:
        raise ValueError(f"imu_figure: the samples of IMU {sensor_id} carry no "
                         "acceleration, angular velocity or magnetic field in common")
    fig = _figure(size, dpi)
    axes = fig.subplots(len(panels), 1, sharex=True, squeeze=False)[:, 0]
    for ax, (values, label, scale) in zip(axes, panels):
        vec = np.asarray(values, dtype=np.float64).reshape(len(t), 3) * scale
        for i, axis in enumerate("xyz"):
            ax.plot(t, vec[:, i], label=axis, linewidth=0.8)
        ax.set_ylabel(label)
        ax.grid(True, linewidth=0.3)
        ax.legend(loc="upper right", fontsize="small")
    axes[-1].set_xlabel("time [s]")
    axes[0].set_title(title or f"IMU {sensor_id}, {len(t)} samples")
    return fig


def save_imu(path: PathLike, samples: Iterable[Any], **kwargs: Any) -> str:
    """Save imu_figure(samples, **kwargs) as a PNG; returns the path."""
    return _save(imu_figure(samples, **kwargs), path)


def _save(fig: Any, path: PathLike) -> str:
    path = os.fspath(path)
    fig.savefig(path, format="png")
    return path
