# SPDX-License-Identifier: MIT
"""Named lidar presets and the datasheet defaults of every scan pattern the daemon has.

Two levels:

* **Pattern defaults** (:data:`PATTERN_DEFAULTS`): what ``create_lidar(id, vlp16={})`` fills in
  for the pattern fields you leave out, so that an empty pattern is the device in its usual
  mode rather than a refused request (``vlp16={}`` is a VLP-16 at 10 Hz). Fields you give win.
* **Presets** (:data:`PRESETS`, :func:`lidar_config`): a whole device, ``create_lidar(id,
  preset="os1-64-1024")``: its pattern, range, beam divergence and the point layout of its ROS
  driver; any keyword you add overrides the preset's value.

Units are the protocol's: m, s, rad, Hz. Device figures come from the public datasheets named
with each preset (docs/models/lidar.md lists them with their conversions).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping

__all__ = ["LidarPreset", "PRESETS", "PATTERN_DEFAULTS", "PATTERNS", "lidar_config",
           "pattern_with_defaults", "preset_names"]

# The LidarConfig pattern oneof members, in proto order.
PATTERNS = ("spinning", "vlp16", "ouster", "flash", "hdl64e", "bpearl", "custom", "livox")

_DEG = math.pi / 180.0

# Pattern fields filled in when omitted. The generic patterns (spinning, custom) have no device
# and so no defaults: their geometry must be given. The flash grid is no particular device: a
# 160 x 120 equi-angular grid over 60 x 45 degrees at 20 Hz (a project choice, stated in the
# docs). Patterns whose defaults the daemon applies itself (hdl64e, bpearl, livox) repeat them
# here so that the client shows what will be used.
PATTERN_DEFAULTS: dict[str, dict[str, Any]] = {
    "spinning": {},
    "vlp16": {"frequency": 10.0},                       # 600 rpm, the factory setting
    "ouster": {"channels": 64, "columns": 1024, "frequency": 10.0},  # OS1-64 in 1024x10 mode
    "flash": {"columns": 160, "rows": 120, "fov_horizontal": 60.0 * _DEG,
              "fov_vertical": 45.0 * _DEG, "frame_rate": 20.0},
    "hdl64e": {"frequency": 10.0},
    "bpearl": {"frequency": 10.0},
    "custom": {},
    "livox": {"fov": 38.4 * _DEG, "point_rate": 100000.0, "frame_rate": 10.0},
}


@dataclass(frozen=True)
class LidarPreset:
    """A lidar device: its scan pattern and the LidarConfig fields its datasheet fixes.

    pattern: the LidarConfig oneof member ("vlp16", "ouster", ...); params: its fields;
    config: other LidarConfig fields (range_max in m, beam divergence, layout); source: where
    the figures come from.
    """

    name: str
    pattern: str
    params: Mapping[str, Any]
    config: Mapping[str, Any] = field(default_factory=dict)
    source: str = ""

    def kwargs(self, **overrides: Any) -> dict[str, Any]:
        """Keyword arguments for Client.create_lidar: the preset, then `overrides` (a pattern
        dict given as override is merged field by field into the preset's pattern)."""
        out: dict[str, Any] = {self.pattern: dict(self.params), **dict(self.config)}
        for key, value in overrides.items():
            if key == self.pattern and isinstance(value, Mapping):
                out[key] = {**out[key], **value}
            elif key in PATTERNS:
                raise TypeError(f"preset {self.name!r} is a {self.pattern} lidar; "
                                f"{key}= cannot override it")
            else:
                out[key] = value
        return out


def _fwhm(deg: float) -> float:
    """The 1/e^2 half angle (rad) of a Gaussian beam of the given full width at half maximum."""
    return deg * _DEG / math.sqrt(2.0 * math.log(2.0))


def _ouster(channels: int, columns: int) -> LidarPreset:
    # OS1 datasheets: 120 m range, 10 mm beam at the exit, 0.13 deg FWHM divergence (0.18 deg
    # for 128 beams); 10 Hz is the one rate every column count supports.
    return LidarPreset(
        name=f"os1-{channels}-{columns}", pattern="ouster",
        params={"channels": channels, "columns": columns, "frequency": 10.0},
        config={"range_max": 120.0, "layout": "ouster",
                "beam": {"divergence": _fwhm(0.18 if channels == 128 else 0.13),
                         "exit_radius": 0.005}},
        source="Ouster OS1 datasheet (Gen 1, rev. C for 128 beams)")


def _build() -> dict[str, LidarPreset]:
    presets = [
        LidarPreset("vlp16", "vlp16", {"frequency": 10.0},
                    {"range_max": 100.0, "layout": "velodyne",
                     "beam": {"divergence": 0.0015}},
                    "Velodyne VLP-16 user manual: 100 m, 3.0 mrad full horizontal divergence"),
        LidarPreset("hdl64e", "hdl64e", {"frequency": 10.0},
                    {"range_max": 120.0, "layout": "velodyne"},
                    "Velodyne HDL-64E S2 datasheet: 120 m, 1.3 M points/s"),
        LidarPreset("bpearl", "bpearl", {"frequency": 10.0},
                    {"range_max": 100.0, "layout": "velodyne"},
                    "RoboSense RS-Bpearl datasheet: 100 m, 90 x 360 deg"),
        LidarPreset("flash", "flash", dict(PATTERN_DEFAULTS["flash"]),
                    {"range_max": 50.0, "layout": "xyzi"},
                    "generic flash grid (no particular device)"),
        LidarPreset("livox-mid40", "livox", dict(PATTERN_DEFAULTS["livox"]),
                    {"range_max": 260.0, "layout": "xyzi"},
                    "Livox Mid-40 datasheet: 38.4 deg circular field, 100 k points/s, 260 m"),
    ]
    presets += [_ouster(n, w) for n in (16, 32, 64, 128) for w in (512, 1024, 2048)]
    return {p.name: p for p in presets}


PRESETS: dict[str, LidarPreset] = _build()


def preset_names() -> list[str]:
    """The names accepted by Client.create_lidar(preset=...) and lidar_config."""
    return sorted(PRESETS)


def _normal(name: str) -> str:
    return name.strip().lower().replace("_", "-")


def get(name: str) -> LidarPreset:
    """The preset called `name` (case and - / _ do not matter); ValueError lists the names."""
    preset = PRESETS.get(_normal(name))
    if preset is None:
        raise ValueError(f"preset: unknown lidar {name!r}; one of {preset_names()}")
    return preset


def lidar_config(name: str, **overrides: Any) -> dict[str, Any]:
    """The create_lidar keyword arguments of preset `name` with `overrides` applied, e.g.
    ``lidar_config("os1-128-2048", range_max=60.0, misses="nan")``."""
    return get(name).kwargs(**overrides)


def pattern_with_defaults(pattern: str, params: Mapping[str, Any] | None) -> dict[str, Any]:
    """The fields of `pattern` with the datasheet defaults filled in where `params` (by field
    name or protobuf JSON name) leaves them out."""
    given = dict(params or {})
    out = {}
    for key, value in PATTERN_DEFAULTS.get(pattern, {}).items():
        if key not in given and _camel(key) not in given:
            out[key] = value
    out.update(given)
    return out


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(w.title() for w in rest)
