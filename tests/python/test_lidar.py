# SPDX-License-Identifier: MIT
"""Lidar sensors over TCP through the Python client against the real sensimd: every scan
pattern is served, clouds arrive in StepDone as structured arrays with the requested layout,
geometry and timing match analytic truth, misses are handled per mode, and bad configurations
are refused naming the field without changing the environment."""

from __future__ import annotations

import math
import os
import time

import numpy as np
import pytest

from sensim import errors

T_SEQ = 55.296e-6          # VLP-16 firing sequence, s
AIR_N = 1.000273           # refractive index of the default air: ranges are optical paths


def _clear(c, refractive_index=AIR_N):
    """Air without its rare atmospheric returns, so that every point lies on a surface."""
    c.set_ambient("custom", return_probability_scaling=0.0, refractive_index=refractive_index)


def _room(c, radius=12.0, refractive_index=AIR_N):
    """A hollow sphere around the origin in clear air: every ray from inside hits it."""
    _clear(c, refractive_index)
    c.create_primitive(1, "sphere", radius=radius)
    c.create_object(1, geometry_id=1, label=3)


def _env_sensors(c):
    info = c.get_info()
    return [e.sensors for e in info.environments if e.name == "default"][0]


def _run(c, sensor, times):
    """States and steps at the given times (static world); the clouds of `sensor`."""
    clouds = []
    for t in times:
        c.update_state(t)
        clouds += c.lidar_clouds(c.step(t), sensor)
    return clouds


def test_lidar_vlp16_revolution_in_a_room(sensimd):
    with sensimd.client() as c:
        _room(c, 12.0)
        c.create_lidar(5, vlp16={"frequency": 10.0},
                       fields=["x", "y", "z", "distance", "ring", "time_offset", "azimuth",
                               "object_id", "label"])
        clouds = _run(c, 5, [0.0, 0.05, 0.1, 0.15, 0.2])
        assert len(clouds) == 2
        first = clouds[0]
        # sequences starting in [0, 0.1): ceil(0.1 / 55.296 us) = 1809
        assert len(first) == 1809 * 16
        assert np.all(first["object_id"] == 1) and np.all(first["label"] == 3)
        np.testing.assert_allclose(first["distance"], 12.0 * AIR_N, rtol=2e-6)
        r = np.sqrt(first["x"].astype(float) ** 2 + first["y"] ** 2 + first["z"] ** 2)
        np.testing.assert_allclose(r, first["distance"], rtol=1e-5)
        n = np.arange(len(first)) // 16
        j = np.arange(len(first)) % 16
        t = n * T_SEQ + j * 2.304e-6
        np.testing.assert_allclose(first["time_offset"], t, atol=1e-8)
        assert np.array_equal(first["ring"], j)
        phi = np.remainder(-2 * math.pi * 10.0 * t + math.pi, 2 * math.pi) - math.pi
        np.testing.assert_allclose(np.remainder(first["azimuth"] - phi + math.pi, 2 * math.pi)
                                   - math.pi, 0.0, atol=1e-6)
        assert len(clouds[1]) == 1808 * 16


def test_lidar_every_pattern_is_served(sensimd):
    patterns = {
        "spinning": ({"spinning": {"frequency": 10.0, "columns": 360,
                                   "channel_elevations": [-0.1, 0.0, 0.1]}}, 360 * 3),
        "ouster": ({"ouster": {"channels": 32, "columns": 512, "frequency": 10.0}}, 32 * 512),
        "bpearl": ({"bpearl": {}}, 32 * 1800),
        "hdl64e": ({"hdl64e": {"columns": 1000}}, 64 * 1000),
        "flash": ({"flash": {"columns": 8, "rows": 4, "fov_horizontal": 0.7,
                             "fov_vertical": 0.35, "frame_rate": 10.0}}, 32),
        "custom": ({"custom": {"azimuths": [0.0, 0.5, -0.5], "elevations": [0.0, 0.1, -0.1],
                               "time_offsets": [0.0, 0.01, 0.02], "channels": [4, 5, 6],
                               "frame_rate": 10.0}}, 3),
        "livox": ({"livox": {"point_rate": 20000, "frame_rate": 10}}, 2000),
    }
    with sensimd.client() as c:
        _room(c, 8.0)
        for i, (config, _) in enumerate(patterns.values()):
            c.create_lidar(10 + i, **config)
        assert _env_sensors(c) == len(patterns)
        c.update_state(0.0)
        c.update_state(0.1)
        done = c.step(0.1)
        for i, (name, (_, count)) in enumerate(patterns.items()):
            clouds = c.lidar_clouds(done, 10 + i)
            assert len(clouds) >= 1, name
            assert len(clouds[0]) == count, name
            np.testing.assert_allclose(
                np.sqrt(clouds[0]["x"].astype(float) ** 2 + clouds[0]["y"] ** 2 +
                        clouds[0]["z"] ** 2), 8.0 * AIR_N, rtol=1e-5, err_msg=name)


def test_lidar_layout_presets_over_the_wire(sensimd):
    with sensimd.client() as c:
        _room(c)
        c.create_lidar(1, vlp16={"frequency": 10.0}, layout="velodyne")
        c.create_lidar(2, ouster={"channels": 16, "columns": 512, "frequency": 10.0},
                       layout="ouster")
        c.create_lidar(3, vlp16={"frequency": 10.0})
        c.update_state(0.0)
        c.update_state(0.15)
        done = c.step(0.15)
        velo = c.lidar_clouds(done, 1)[0]
        assert velo.dtype.itemsize == 22
        assert [velo.dtype.fields[n][1] for n in ("x", "y", "z", "intensity", "ring", "time")] \
            == [0, 4, 8, 12, 16, 18]
        assert velo.dtype["ring"] == np.dtype("<u2")
        ouster = c.lidar_clouds(done, 2)[0]
        assert ouster.dtype.itemsize == 48
        assert [ouster.dtype.fields[n][1] for n in
                ("x", "y", "z", "intensity", "t", "reflectivity", "ring", "ambient", "range")] \
            == [0, 4, 8, 16, 20, 24, 26, 28, 32]
        np.testing.assert_allclose(ouster["range"], round(12.0 * AIR_N * 1000), atol=1)
        # organised as ouster_ros: 16 rows of 512 columns, column j fired at j * 195.3125 us
        np.testing.assert_allclose(ouster["t"], (np.arange(len(ouster)) % 512) * 195312.5,
                                   atol=1)
        assert np.array_equal(ouster["ring"], np.arange(len(ouster)) // 512)
        xyzi = c.lidar_clouds(done, 3)[0]
        assert xyzi.dtype.names == ("x", "y", "z", "intensity")
        assert xyzi.dtype.itemsize == 16
        assert np.all(xyzi["intensity"] > 0)


@pytest.mark.parametrize("mode", ["remove", "zero", "nan"])
def test_lidar_misses(sensimd, mode):
    with sensimd.client() as c:
        # a wall x = 5 in front of the left half of a flash grid only
        _clear(c)
        c.create_primitive(1, "plane", half_size=5.0)
        c.create_object(1, geometry_id=1,
                        local_pose={"position": (5, 5, 0),
                                    "orientation": (0, math.sin(math.pi / 4), 0,
                                                    math.cos(math.pi / 4))})
        c.create_lidar(1, flash={"columns": 8, "rows": 2, "fov_horizontal": 0.7,
                                 "fov_vertical": 0.2, "frame_rate": 10.0},
                       misses=mode, fields=["x", "y", "z", "distance", "azimuth",
                                            "return_count"])
        clouds = _run(c, 1, [0.0])
        assert len(clouds) == 1
        cloud = clouds[0]
        hit = cloud["azimuth"] > 0
        assert len(cloud) == (8 if mode == "remove" else 16)
        assert hit.sum() == 8
        np.testing.assert_allclose(cloud["x"][hit], 5.0 * AIR_N, rtol=1e-5, atol=1e-4)
        if mode == "zero":
            assert np.all(cloud["x"][~hit] == 0) and np.all(cloud["distance"][~hit] == 0)
        if mode == "nan":
            assert np.all(np.isnan(cloud["x"][~hit])) and np.all(np.isnan(cloud["distance"][~hit]))
        assert np.all(cloud["return_count"][~hit] == 0)


def test_lidar_publish_per_step_world_frame(sensimd):
    with sensimd.client() as c:
        _room(c, 10.0, refractive_index=1.0)   # world points: |o + d X| = R when X = L
        c.create_body(2)
        c.create_lidar(1, body_id=2, mount={"position": (0, 0, 1)},
                       ouster={"channels": 16, "columns": 512, "frequency": 10.0},
                       publish="per_step", frame="world", fields=["x", "y", "z", "time_offset"])
        counts = []
        for k in range(4):
            t = 0.02 * k
            c.update_state(t, [2], [[0.5 * t, 0, 0, 0, 0, 0, 1]])
            done = c.step(t)
            clouds = c.lidar_clouds(done, 1)
            assert len(clouds) == 1
            cloud = clouds[0]
            counts.append(len(cloud))
            r = np.sqrt(cloud["x"].astype(float) ** 2 + cloud["y"] ** 2 + cloud["z"] ** 2)
            np.testing.assert_allclose(r, 10.0, rtol=1e-5)
            assert np.all(cloud["time_offset"] <= 0.02 + 1e-6)
        # rays at t <= 0.06: columns 0..307 (0.06 / 195.3125 us = 307.2)
        assert sum(counts) == 308 * 16


@pytest.mark.parametrize("config, field", [
    ({"spinning": {"frequency": 10.0, "columns": 100}}, "lidar.spinning.channel_elevations"),
    ({"spinning": {"frequency": 10.0, "columns": 0, "channel_elevations": [0.0]}},
     "lidar.spinning.columns = 0 must be > 0"),
    ({"vlp16": {"frequency": 10.0}, "range_min": -1.0}, "lidar.range_min"),
    ({"vlp16": {"frequency": 10.0}, "range_max": 0.05}, "lidar.range_max"),
    ({"vlp16": {"frequency": 10.0}, "fields": ["x", "colour"]}, "lidar.fields[1]"),
    ({"vlp16": {"frequency": float("nan")}}, "lidar.vlp16.frequency"),
    ({"ouster": {"channels": 48, "columns": 1024, "frequency": 10.0}}, "lidar.ouster.channels"),
    ({"flash": {"columns": 8, "rows": 0, "fov_horizontal": 1, "fov_vertical": 1,
                "frame_rate": 10}}, "lidar.flash.rows"),
    ({"custom": {"azimuths": [0.0, 0.1], "elevations": [0.0], "frame_rate": 10}},
     "lidar.custom.elevations"),
    ({"livox": {"prism_rates": [1.0]}}, "lidar.livox.prism_rates"),
    ({"vlp16": {"frequency": 10.0}, "distance_noise": {"stddev_base": -1}},
     "lidar.distance_noise"),
])
def test_lidar_bad_configuration_names_the_field(sensimd, config, field):
    with sensimd.client() as c:
        _room(c)
        c.create_lidar(1, vlp16={"frequency": 10.0})
        with pytest.raises(errors.InvalidArgument) as exc:
            c.create_lidar(2, **config)
        assert field in exc.value.message
        assert _env_sensors(c) == 1
        c.create_lidar(2, vlp16={"frequency": 10.0})   # the id is still free
        assert _env_sensors(c) == 2


def test_lidar_no_pattern_is_refused(sensimd):
    with sensimd.client() as c:
        with pytest.raises(errors.InvalidArgument) as exc:
            c.create_sensor(1, lidar={})
        assert "scan pattern" in exc.value.message
        assert _env_sensors(c) == 0


@pytest.mark.parametrize("see_own_body", [False, True])
def test_lidar_own_body_and_excluded_bodies(sensimd, see_own_body):
    with sensimd.client() as c:
        _room(c, 10.0, refractive_index=1.0)
        c.create_body(2)                                   # the vehicle, around the lidar
        c.create_body(3, {"position": (4, 0, 0)})          # a pillar ahead
        c.create_primitive(2, "box", half_extents=(0.5, 0.5, 0.5))
        c.create_primitive(3, "box", half_extents=(0.5, 0.5, 20.0))
        c.create_object(2, geometry_id=2, body_id=2)
        c.create_object(3, geometry_id=3, body_id=3)
        flash = {"columns": 9, "rows": 3, "fov_horizontal": math.radians(20),
                 "fov_vertical": math.radians(10), "frame_rate": 10.0}
        fields = ["distance", "object_id"]
        c.create_lidar(1, body_id=2, flash=flash, fields=fields, see_own_body=see_own_body)
        c.create_lidar(2, body_id=2, flash=flash, fields=fields, exclude_bodies=[3])
        c.update_state(0.0, [2, 3], [[0, 0, 0, 0, 0, 0, 1], [4, 0, 0, 0, 0, 0, 1]])
        done = c.step(0.0)
        first = c.lidar_clouds(done, 1)[0]
        if see_own_body:
            assert set(first["object_id"]) == {2}
        else:
            assert set(first["object_id"]) == {1, 3}
            assert (first["object_id"] == 3).sum() == 21
        second = c.lidar_clouds(done, 2)[0]
        assert set(second["object_id"]) == {1}
        np.testing.assert_allclose(second["distance"], 10.0, rtol=1e-5)


def test_lidar_group_mask(sensimd):
    with sensimd.client() as c:
        _room(c, 10.0, refractive_index=1.0)                 # the room: group 0
        c.create_primitive(3, "box", half_extents=(0.5, 0.5, 20.0))
        c.create_object(3, geometry_id=3, local_pose={"position": (4, 0, 0)}, group=3)
        flash = {"columns": 9, "rows": 1, "fov_horizontal": math.radians(20),
                 "fov_vertical": math.radians(1), "frame_rate": 10.0}
        c.create_lidar(1, flash=flash, fields=["object_id"], group_mask=1 << 0)
        c.create_lidar(2, flash=flash, fields=["object_id"], group_mask=1 << 3)
        c.create_lidar(3, flash=flash, fields=["object_id"])
        c.update_state(0.0)
        done = c.step(0.0)
        assert list(c.lidar_clouds(done, 1)[0]["object_id"]) == [1] * 9
        assert list(c.lidar_clouds(done, 2)[0]["object_id"]) == [3] * 7
        assert sorted(c.lidar_clouds(done, 3)[0]["object_id"]) == [1, 1] + [3] * 7
        with pytest.raises(errors.InvalidArgument) as exc:
            c.create_object(4, geometry_id=3, group=32)
        assert "group = 32" in exc.value.message


def test_raycast_exclude_bodies_and_group_mask(sensimd):
    with sensimd.client() as c:
        c.create_body(2, {"position": (2, 0, 0)})
        c.create_primitive(1, "box", half_extents=(0.5, 0.5, 0.5))
        c.create_primitive(2, "box", half_extents=(0.5, 5.0, 5.0))
        c.create_object(1, geometry_id=1, body_id=2, group=1)
        c.create_object(2, geometry_id=2, local_pose={"position": (6, 0, 0)})
        c.update_state(0.0, [2], [[2, 0, 0, 0, 0, 0, 1]])
        o, d = [[0, 0, 0]], [[1, 0, 0]]
        assert c.raycast(o, d).object_ids[0] == 1
        assert c.raycast(o, d, exclude_bodies=[2]).object_ids[0] == 2
        assert c.raycast(o, d, group_mask=1 << 0).object_ids[0] == 2
        hit = c.raycast(o, d, group_mask=1 << 1)
        assert hit.object_ids[0] == 1
        np.testing.assert_allclose(hit.distances[0], 1.5, rtol=1e-6)
        assert math.isinf(c.raycast(o, d, exclude_bodies=[2], group_mask=2).distances[0])


def test_lidar_options_reach_the_model(sensimd):
    """Each LidarConfig option changes the cloud as the model says (a wall 5 m ahead)."""
    with sensimd.client() as c:
        _clear(c, 1.0)
        c.create_primitive(1, "box", half_extents=(0.5, 20.0, 20.0))
        c.create_object(1, geometry_id=1, local_pose={"position": (5.5, 0, 0)})
        flash = {"columns": 4, "rows": 4, "fov_horizontal": 0.2, "fov_vertical": 0.2,
                 "frame_rate": 10.0}
        fields = ["distance", "intensity", "return_index", "return_count", "elevation"]
        configs = {
            1: {},
            2: {"range_max": 4.0},                                   # the wall is beyond
            3: {"range_min": 6.0},                                   # ... and before
            4: {"intensity_threshold": 1.0},                         # too faint
            5: {"distance_noise": {"stddev_base": 0.05}},
            6: {"return_mode": "dual", "raytrace_depth": 2},
            7: {"angle_noise": {"axis": "NOISE_AXIS_AZIMUTH", "stddev": 0.01}},
            8: {"beam": {"divergence": 0.0015}},
        }
        for sid, extra in configs.items():
            c.create_lidar(sid, flash=flash, fields=fields, **extra)
        c.update_state(0.0)
        done = c.step(0.0)
        clouds = {sid: c.lidar_clouds(done, sid)[0] for sid in configs}
        base = clouds[1]
        assert len(base) == 16
        np.testing.assert_allclose(base["distance"] * np.cos(base["elevation"]).mean(), 5.0,
                                   rtol=0.02)
        assert len(clouds[2]) == 0 and len(clouds[3]) == 0 and len(clouds[4]) == 0
        assert not np.array_equal(clouds[5]["distance"], base["distance"])
        np.testing.assert_allclose(clouds[5]["distance"], base["distance"], atol=4 * 0.05)
        assert np.all(clouds[6]["return_count"] == 1) and len(clouds[6]) == 16
        assert not np.array_equal(clouds[7]["distance"], base["distance"])
        assert np.all(clouds[8]["intensity"] != base["intensity"])


@pytest.mark.parametrize("spin, sign", [("clockwise", -1), ("counter_clockwise", 1),
                                        ("SPIN_COUNTER_CLOCKWISE", 1)])
def test_lidar_spin_direction(sensimd, spin, sign):
    with sensimd.client() as c:
        _room(c, 8.0)
        c.create_lidar(1, spinning={"frequency": 10.0, "columns": 8, "channel_elevations": [0.0],
                                    "start_azimuth": 0.5, "spin": spin},
                       fields=["azimuth", "time_offset"])
        clouds = _run(c, 1, [0.0, 0.1])
        az = clouds[0]["azimuth"].astype(float)
        expect = 0.5 + sign * 2 * math.pi * np.arange(8) / 8
        np.testing.assert_allclose(np.remainder(az - expect + math.pi, 2 * math.pi) - math.pi,
                                   0.0, atol=1e-6)
        np.testing.assert_allclose(clouds[0]["time_offset"], np.arange(8) * 0.0125, atol=1e-7)


# ---- limits: nothing a client sends can make a step unbounded, and errors name the field


def _vm_kib(pid, key):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith(key):
            return int(line.split()[1])
    return 0


@pytest.mark.parametrize("pattern", ["vlp16", "hdl64e", "bpearl", "livox"])
def test_lidar_start_time_is_named_under_its_pattern_and_bounded(sensimd, pattern):
    with sensimd.client() as c:
        for bad in (math.nan, -1e300, 1.0000001e9, -2e9):
            cfg = {"start_time": bad}
            if pattern == "vlp16":
                cfg["frequency"] = 10.0
            with pytest.raises(errors.InvalidArgument) as exc:
                c.create_lidar(5, **{pattern: cfg})
            assert f"lidar.{pattern}.start_time" in str(exc.value)
        assert _env_sensors(c) == 0


def test_lidar_start_time_at_the_bound_steps_promptly(sensimd):
    # 2e9 s of sweeps before the first step: the cursor is found at once, and 50 ms later
    # the step holds 50 ms of rays (904 or 905 sequences of 16, give or take the resolution of
    # times near 1e9 s: 1.2e-7 s)
    with sensimd.client(timeout=10) as c:
        _room(c)
        c.create_lidar(5, vlp16={"frequency": 10.0, "start_time": -1e9}, publish="per_step")
        t0 = time.monotonic()
        _run(c, 5, [1e9 - 0.1])
        n = len(_run(c, 5, [1e9 - 0.05])[0])
        assert time.monotonic() - t0 < 5.0
        assert abs(n - 0.05 / T_SEQ * 16) <= 2 * 16


def test_lidar_step_over_the_output_limit_is_refused_before_tracing(sensimd):
    # 200 s of a VLP-16 are 58 M points (0.9 GB): the state that would make the next step
    # that long is refused at once, memory untouched, the message names the lidar and the
    # time (and does not advise publishing per step to a lidar that does); a nearer state is
    # then taken and stepped
    with sensimd.client(timeout=60) as c:
        _room(c)
        c.create_lidar(5, vlp16={"frequency": 20.0})
        c.create_lidar(6, vlp16={"frequency": 20.0}, publish="per_step")
        _run(c, 5, [0.0])
        rss0 = _vm_kib(sensimd.proc.pid, "VmRSS")
        t0 = time.monotonic()
        with pytest.raises(errors.ResourceExhausted) as exc:
            c.update_state(200.0)
        assert time.monotonic() - t0 < 2.0
        assert "time = 200 is too far from the last step (0)" in str(exc.value)
        assert "lidar 5: the rays fired over (0, 200]" in str(exc.value)
        assert "publish per step" not in str(exc.value)
        c.remove("sensor", 5)
        with pytest.raises(errors.ResourceExhausted) as exc:
            c.update_state(200.0)
        assert "lidar 6: the rays fired over (0, 200]" in str(exc.value)
        assert _vm_kib(sensimd.proc.pid, "VmRSS") - rss0 < 64 * 1024
        c.update_state(0.05)
        assert len(c.lidar_clouds(c.step(0.05), 6)) == 1


@pytest.mark.parametrize("kw,field", [
    (dict(flash={"columns": 2048, "rows": 2048, "fov_horizontal": 0.5, "fov_vertical": 0.5,
                 "frame_rate": 10.0}), "lidar.flash.columns x rows"),
    (dict(livox={"frame_rate": 1e-12}), "lidar.livox.frame_rate"),
    (dict(spinning={"frequency": 0.2, "columns": 1048576,
                    "channel_elevations": [0.0] * 4096}), "lidar.spinning.columns"),
    (dict(custom={"azimuths": [0.0] * 2100000, "elevations": [0.0] * 2100000,
                  "frame_rate": 1.0}, return_mode=3), "lidar.custom.azimuths"),
])
def test_lidar_frame_that_cannot_be_published_is_refused(sensimd, kw, field):
    # one frame (rays x returns x point_step) must fit in one step's output (the daemon's
    # max_frame_bytes less its envelope): 2048 x 2048 x 16 bytes = 64 MiB does not
    with sensimd.client(timeout=60) as c:
        with pytest.raises(errors.InvalidArgument) as exc:
            c.create_lidar(5, **kw)
        assert field in str(exc.value)
        assert _env_sensors(c) == 0
        # the same grid with fewer bytes per point fits
        if "flash" in kw:
            c.create_lidar(5, fields=["x", "y", "z"], **kw)


@pytest.mark.parametrize("noise,field", [({"mean": 1e300}, "lidar.distance_noise.mean"),
                                         ({"mean": -2e6}, "lidar.distance_noise.mean"),
                                         ({"stddev_base": 1e7}, "lidar.distance_noise.stddev_base"),
                                         ({"stddev_slope": 1e300},
                                          "lidar.distance_noise.stddev_slope")])
def test_lidar_distance_noise_is_bounded(sensimd, noise, field):
    with sensimd.client() as c:
        with pytest.raises(errors.InvalidArgument) as exc:
            c.create_lidar(5, custom={"azimuths": [0.0], "elevations": [0.0],
                                      "frame_rate": 10.0}, distance_noise=noise)
        assert field in str(exc.value)


def test_lidar_distance_noise_at_its_bounds_gives_finite_points(sensimd):
    # mean 1e6 m and slope 1e3 m/m: far from the wall, but every coordinate is finite
    with sensimd.client() as c:
        _room(c, 10.0, refractive_index=1.0)
        c.create_lidar(5, custom={"azimuths": [0.0, 1.0, 2.0], "elevations": [0.0, 0.1, 0.2],
                                  "frame_rate": 10.0},
                       fields=["x", "y", "z", "distance"],
                       distance_noise={"mean": 1e6, "stddev_slope": 1e3, "stddev_base": 1e6})
        c.update_state(0.0)
        cl = c.lidar_clouds(c.step(0.0), 5)[0]
        assert len(cl) == 3
        for f in ("x", "y", "z", "distance"):
            assert np.all(np.isfinite(cl[f]))


def test_lidar_step_honours_the_request_deadline(sensimd_factory):
    # 2 s of an OS1-128 2048 x 20 (10.5 M rays of 4 bytes: inside the output limit) take
    # longer than 0.2 s: stopped with DEADLINE_EXCEEDED, promptly, and nothing changes (the same
    # step fails the same way). On one tracing thread: seconds of tracing on any machine,
    # where all the cores of a large one might trace them within the deadline
    d = sensimd_factory("--max-request-seconds", "0.2", "--threads", "1")
    with d.client(timeout=60) as c:
        _room(c)
        c.create_lidar(5, ouster={"channels": 128, "columns": 2048, "frequency": 20.0},
                       fields=["distance"], publish="per_step")
        _run(c, 5, [0.0])
        c.update_state(2.0)
        for _ in range(2):
            t0 = time.monotonic()
            with pytest.raises(errors.SensimError) as exc:
                c.step(2.0)
            assert "DEADLINE_EXCEEDED" in str(exc.value)
            assert time.monotonic() - t0 < 1.5


def test_lidar_per_step_rays_of_one_instant_must_fit_a_step(sensimd):
    # publishing per step, a 2048 x 2048 flash frame still fires at one instant: no step can
    # split its 64 MiB, so it is refused at creation; three fields (48 MiB) fit and step
    flash = {"columns": 2048, "rows": 2048, "fov_horizontal": 0.5, "fov_vertical": 0.5,
             "frame_rate": 10.0, "start_time": 0.05}
    with sensimd.client(timeout=120) as c:
        _room(c)
        with pytest.raises(errors.InvalidArgument) as exc:
            c.create_lidar(5, flash=flash, publish="per_step")
        assert "lidar.flash: 4194304 rays fire at one instant" in str(exc.value)
        assert "lidar.flash.columns x rows" in str(exc.value)
        c.create_lidar(5, flash=flash, publish="per_step", fields=["x", "y", "z"])
        counts = [sum(len(p) for p in _run(c, 5, [t])) for t in (0.04, 0.05, 0.06)]
        assert counts == [0, 2048 * 2048, 0]


def test_lidar_frames_that_complete_together_over_a_frame_travel_in_parts(sensimd):
    # 8 OS1-128 2048 of 13 fields (11.5 MB a frame each, 92 MB together, more than a frame)
    # all complete their revolution in the same step, however short: the step succeeds, its
    # records travel each in a frame of its own ahead of the StepDone
    fields = ["x", "y", "z", "intensity", "ring", "azimuth", "elevation", "distance",
              "time_offset", "object_id", "label", "return_index", "return_count"]
    with sensimd.client(timeout=120) as c:
        _room(c)
        for i in range(8):
            c.create_lidar(10 + i, ouster={"channels": 128, "columns": 2048, "frequency": 10.0},
                           fields=fields)
        _run(c, 10, [0.0, 0.05])
        c.update_state(0.1)
        done = c.step(0.1)
        assert done.outputs_in_parts == 8
        assert all(len(c.lidar_clouds(done, 10 + i)) == 1 for i in range(8))
        assert [o.sensor_id for o in done.outputs] == list(range(10, 18))


def test_lidar_ouster_range_follows_the_device_beam_origin_formula(sensimd):
    # with the beam-origin offset n the Ouster layout's range is the device's: the point is
    # (r - n) d + n (cos az, sin az, 0) (docs/frames.md, "Ouster"), r in whole mm
    n = 0.015806
    with sensimd.client() as c:
        _room(c, 10.0, refractive_index=1.0)
        ouster = {"channels": 32, "columns": 512, "frequency": 10.0,
                  "lidar_origin_to_beam_origin": n}
        c.create_lidar(5, ouster=ouster, layout="ouster")
        c.create_lidar(6, ouster=ouster, fields=["azimuth", "elevation", "distance"])
        a, b = [], []
        for t in (0.0, 0.1, 0.2):
            c.update_state(t)
            done = c.step(t)
            a += c.lidar_clouds(done, 5)
            b += c.lidar_clouds(done, 6)
    # the Ouster cloud is organised (beams x columns, row-major), the other in firing order
    pts, ang = a[0], b[0].reshape(512, 32).T.reshape(-1)
    e = ang["elevation"].astype(float)
    az = ang["azimuth"].astype(float)
    r = pts["range"].astype(float) / 1000.0
    np.testing.assert_allclose(r, ang["distance"] + n, atol=6e-4)
    d = np.stack([np.cos(e) * np.cos(az), np.cos(e) * np.sin(az), np.sin(e)], axis=1)
    p = (r - n)[:, None] * d + n * np.stack([np.cos(az), np.sin(az), 0 * az], axis=1)
    xyz = np.stack([pts["x"], pts["y"], pts["z"]], axis=1).astype(float)
    np.testing.assert_allclose(p, xyz, atol=1e-3)
    np.testing.assert_allclose(np.linalg.norm(xyz, axis=1), 10.0, rtol=1e-5)


def test_lidar_return_all_is_bounded_by_its_actual_points(sensimd_factory):
    # RETURN_ALL's worst case (every candidate of every ray) does not refuse a configuration up
    # front: a deep VLP-16 is accepted; in dense fog its actual points (surface and atmospheric
    # returns) are what a step's output must hold, and a step whose points exceed it is refused
    # as they come (nothing changes: the same step fails the same way again)
    d = sensimd_factory("--max-frame-bytes", str(1 << 20))
    with d.client(timeout=60) as c:
        c.create_lidar(4, vlp16={"frequency": 10.0}, return_mode="all", max_returns=0,
                       raytrace_depth=8, publish="per_step", fields=["distance"])
        c.remove("sensor", 4)
        c.set_environment(seed=5)
        c.set_ambient("fog", visibility=15.0)
        c.create_primitive(1, "sphere", radius=12.0)
        c.create_object(1, geometry_id=1)
        rng = np.random.default_rng(1)
        c.create_lidar(5, custom={"azimuths": list(rng.uniform(-3, 3, 20000)),
                                  "elevations": list(rng.uniform(-1, 1, 20000)),
                                  "frame_rate": 10.0},
                       return_mode="all", max_returns=0, publish="per_step", fields=["distance"])
        _run(c, 5, [0.0])
        n1 = len(_run(c, 5, [0.1])[0])
        assert n1 > 20000 * 1.3                       # many rays return from the fog too
        c.update_state(1.0)
        for _ in range(2):
            with pytest.raises(errors.ResourceExhausted) as exc:
                c.step(1.0)
            assert "lidar 5: Step.time = 1: the clouds of the rays fired since 0.1" \
                in str(exc.value)
            assert "take over" in str(exc.value)


def test_lidar_rays_above_the_horizon_are_misses_without_tracing(sensimd):
    # an open yard: a 40 m square of ground 1.5 m under the lidar and one tall box; every ray
    # that meets them returns its analytic range, every other one is a miss, and the daemon
    # counts the sky rays as culled rather than traced (rays_traced + rays_culled = fired)
    with sensimd.client() as c:
        _clear(c, refractive_index=1.0)
        c.create_primitive(1, "box", half_extents=(20.0, 20.0, 0.5))
        c.create_object(1, 1, local_pose=(0, 0, -2.0), label=1)          # top at z = -1.5
        c.create_primitive(2, "box", half_extents=(1.0, 1.0, 4.0))
        c.create_object(2, 2, local_pose=(8.0, 0, 0), label=2)           # x in [7, 9], z to 4
        c.create_lidar(5, ouster={"channels": 64, "columns": 512, "frequency": 10.0},
                       misses="nan", fields=["azimuth", "elevation", "distance", "object_id"])
        clouds = _run(c, 5, [0.0, 0.1, 0.2])
        info = c.get_info()
    env = next(e for e in info.environments if e.name == "default")
    cloud = clouds[0]
    assert len(cloud) == 64 * 512
    az = cloud["azimuth"].astype(float)
    el = cloud["elevation"].astype(float)
    d = np.stack([np.cos(el) * np.cos(az), np.cos(el) * np.sin(az), np.sin(el)], axis=1)

    # analytic first hits of the two boxes (slab tests; origins at the sensor, the Ouster
    # beam offset being ignored at these tolerances)
    def slab(lo, hi):
        with np.errstate(divide="ignore", invalid="ignore"):
            t0 = (np.asarray(lo) - 0.0) / d
            t1 = (np.asarray(hi) - 0.0) / d
        tn = np.nanmax(np.minimum(t0, t1), axis=1)
        tf = np.nanmin(np.maximum(t0, t1), axis=1)
        return np.where((tn <= tf) & (tf > 0), np.maximum(tn, 0.0), np.inf)

    t = np.minimum(slab((-20, -20, -2.5), (20, 20, -1.5)), slab((7, -1, -4), (9, 1, 4)))
    t[t > 120.0] = np.inf
    # rays that graze an edge within the float tolerance may go either way
    near_edge = np.zeros(len(t), bool)
    for lo, hi in (((-20, -20, -2.5), (20, 20, -1.5)), ((7, -1, -4), (9, 1, 4))):
        grown = np.minimum(slab(np.subtract(lo, 0.03), np.add(hi, 0.03)), np.inf)
        shrunk = slab(np.add(lo, 0.03), np.subtract(hi, 0.03))
        near_edge |= np.isfinite(grown) != np.isfinite(shrunk)
    hit = np.isfinite(cloud["distance"])
    sure = ~near_edge
    assert np.array_equal(hit[sure], np.isfinite(t)[sure])
    both = hit & np.isfinite(t) & sure
    np.testing.assert_allclose(cloud["distance"][both], t[both], atol=0.03)
    assert both.sum() > 10000 and (~hit).sum() > 10000

    # every ray fired gives one point (misses kept as NaN): two revolutions, and the rays of
    # the third fired at t = 0.2 exactly; culled rays are misses, and most misses are culled
    n = 64 * 512
    misses = sum(int(np.isnan(k["distance"]).sum()) for k in clouds)
    traced, culled = env.counters.rays_traced, env.counters.rays_culled
    assert len(clouds) == 2 and 2 * n <= traced + culled <= 2 * n + 64
    if os.environ.get("SENSIM_SIMD") == "baseline":
        assert culled == 0                 # the horizon culls on the AVX2 path only
    else:
        assert 0.9 * misses < culled <= misses + 64
