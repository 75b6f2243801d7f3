# SPDX-License-Identifier: MIT
"""Lidar presets and pattern defaults against the real daemon: every named device fires the
rays its datasheet says per revolution, in its driver's point layout, with the datasheet's
range and beam divergence; a pattern given as {} takes the device defaults; overrides win; bad
names and conflicting patterns are refused naming what is wrong."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sensim import errors, presets

T_SEQ = 55.296e-6  # VLP-16 firing sequence, s (Velodyne VLP-16 manual)

# Rays per revolution from the datasheets (independent of the presets' own tables).
EXPECTED_RAYS = {
    "vlp16": None,                      # 1808 or 1809 sequences of 16 at 10 Hz, see below
    "hdl64e": 64 * round(1.3333e6 / (64 * 10)),
    "bpearl": 32 * 1800,                # 0.2 deg horizontal at 10 Hz
    "flash": 160 * 120,
    "livox-mid40": 100000 // 10,        # 100 k points/s, 10 frames/s
    **{f"os1-{n}-{w}": n * w for n in (16, 32, 64, 128) for w in (512, 1024, 2048)},
}

LAYOUT_FIELDS = {
    "velodyne": ["x", "y", "z", "intensity", "ring", "time"],
    "ouster": ["x", "y", "z", "intensity", "t", "reflectivity", "ring", "ambient", "range"],
    "xyzi": ["x", "y", "z", "intensity"],
}


def _first_revolution(c, sensor, period):
    """Step a static world through one revolution (two steps) plus a little; the first cloud."""
    for t in (0.0, period * 0.5, period * 1.01):
        c.update_state(t)
        clouds = c.lidar_clouds(c.step(t), sensor)
        if clouds:
            return clouds[0]
    raise AssertionError("no cloud after one revolution")


def test_presets_list_every_pattern_the_daemon_has():
    names = presets.preset_names()
    assert {"vlp16", "hdl64e", "bpearl", "flash", "livox-mid40"} <= set(names)
    assert {f"os1-{n}-{w}" for n in (16, 32, 64, 128) for w in (512, 1024, 2048)} <= set(names)
    devices = {presets.PRESETS[n].pattern for n in names}
    # every device pattern of the protocol; spinning and custom are generic (no device)
    assert devices == set(presets.PATTERNS) - {"spinning", "custom"}


@pytest.mark.parametrize("name", sorted(EXPECTED_RAYS))
def test_preset_fires_its_datasheet_rays_in_its_driver_layout(sensimd, name):
    preset = presets.get(name)
    with sensimd.client(timeout=60.0) as c:
        # misses kept, so that every ray fired gives one point
        c.create_lidar(5, preset=name, misses="zero")
        rate = preset.params.get("frequency") or preset.params.get("frame_rate")
        cloud = _first_revolution(c, 5, 1.0 / rate)
        want = EXPECTED_RAYS[name]
        if name == "vlp16":
            # sequences starting in [0, 0.1): ceil(0.1 / T_SEQ) = 1809
            assert len(cloud) == 1809 * 16
        else:
            assert len(cloud) == want
        assert list(cloud.dtype.names) == LAYOUT_FIELDS[preset.config["layout"]]


def test_preset_datasheet_range_and_divergence():
    # 1/e^2 half angles of the datasheet divergences (docs/models/lidar.md, KAT-GEO)
    assert presets.get("vlp16").config["beam"]["divergence"] == 0.0015
    assert presets.get("os1-64-1024").config["beam"]["divergence"] == pytest.approx(
        0.00192705004, rel=1e-8)
    assert presets.get("os1-128-2048").config["beam"]["divergence"] == pytest.approx(
        0.00266822313, rel=1e-8)
    assert presets.get("vlp16").config["range_max"] == 100.0
    assert presets.get("OS1_64_1024").name == "os1-64-1024"  # case and _ do not matter


def test_preset_range_max_is_applied_by_the_daemon(sensimd):
    # a wall 110 m away: beyond the VLP-16's 100 m, within the OS1's 120 m
    with sensimd.client() as c:
        c.set_ambient("custom", return_probability_scaling=0.0)
        c.create_primitive(1, "sphere", radius=110.0)
        c.create_object(1, 1)
        c.create_lidar(5, preset="vlp16")
        c.create_lidar(6, preset="os1-16-512")
        for t in (0.0, 0.05, 0.101):
            c.update_state(t)
            done = c.step(t)
        assert sum(len(x) for x in c.lidar_clouds(done, 5)) == 0
        os1 = c.lidar_clouds(done, 6)
        assert len(os1) == 1 and len(os1[0]) == 16 * 512
        np.testing.assert_allclose(os1[0]["range"], 110.0 * 1.000273 * 1000, atol=1.0)


def test_empty_pattern_takes_the_device_defaults(sensimd):
    with sensimd.client() as c:
        c.create_primitive(1, "sphere", radius=5.0)
        c.create_object(1, 1)
        c.create_lidar(5, vlp16={})                          # 10 Hz
        c.create_lidar(6, ouster={"channels": 16})           # 1024 columns at 10 Hz
        c.create_lidar(7, flash={"rows": 4})                 # 160 columns, 20 Hz
        c.create_lidar(8, vlp16={"frequency": 20.0})         # a given field wins
        got = {}
        for t in (0.0, 0.03, 0.06, 0.101):
            c.update_state(t)
            done = c.step(t)
            for sid in (5, 6, 7, 8):
                got.setdefault(sid, []).extend(c.lidar_clouds(done, sid))
        assert len(got[5]) == 1 and len(got[5][0]) == 1809 * 16
        assert len(got[6]) == 1 and len(got[6][0]) == 16 * 1024
        assert len(got[7]) == 3 and all(len(x) == 160 * 4 for x in got[7])  # t = 0.05, 0.1
        # 20 Hz: revolutions end near 0.05 and 0.1; ceil(0.05 / T_SEQ) sequences each
        assert len(got[8]) == 2 and len(got[8][0]) == math.ceil(0.05 / T_SEQ) * 16


def test_preset_overrides_and_refusals(sensimd):
    with sensimd.client() as c:
        kw = presets.lidar_config("os1-32-1024", range_max=40.0, ouster={"frequency": 20.0},
                                  misses="nan")
        assert kw["ouster"] == {"channels": 32, "columns": 1024, "frequency": 20.0}
        assert kw["range_max"] == 40.0 and kw["layout"] == "ouster"
        c.create_lidar(5, preset="os1-32-1024", layout="xyzi")
        with pytest.raises(ValueError, match="unknown lidar 'os2-64'.*vlp16"):
            c.create_lidar(6, preset="os2-64")
        with pytest.raises(TypeError, match="ouster lidar; vlp16= cannot override"):
            c.create_lidar(6, preset="os1-32-1024", vlp16={})
        # generic patterns have no defaults: the daemon names the missing field
        with pytest.raises(errors.InvalidArgument, match="frequency"):
            c.create_lidar(6, spinning={})
        # nothing was created by the refused calls
        with pytest.raises(errors.NotFound):
            c.remove("sensor", 6)
        for t in (0.0, 0.05):
            c.update_state(t)
        assert c.lidar_clouds(c.step(0.05), 5) == []
