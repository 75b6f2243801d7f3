# SPDX-License-Identifier: MIT
"""IMU, encoder, odometer and cone sensors through the real daemon and the Python client
(docs/models/imu.md, docs/models/joint_sensors.md, docs/models/cone.md): analytic readings of
spinning, resting and falling bodies, the magnetic field, fixed-rate sampling, encoder wrap and
speed, odometer binning, the cone sensor's closest point in both modes, configuration errors
that change nothing, and bit-identical outputs at 1 and 2 worker threads."""

from __future__ import annotations

import math

import numpy as np
import pytest

import sensim
from sensim import errors

G0 = 9.80665


def quat_z(angle: float) -> tuple[float, float, float, float]:
    """(x, y, z, w) of a rotation by `angle` about +z."""
    return (0.0, 0.0, math.sin(angle / 2), math.cos(angle / 2))


def by_sensor(done) -> dict[int, list[sensim.SensorOutput]]:
    out: dict[int, list[sensim.SensorOutput]] = {}
    for o in sensim.outputs(done):
        out.setdefault(o.sensor_id, []).append(o)
    return out


def sensor_count(c: sensim.Client) -> int:
    return sum(env.sensors for env in c.get_info().environments)


# ---------------------------------------------------------------- IMU

@pytest.mark.parametrize("send_velocity", [True, False])
def test_spinning_body_reads_centripetal_acceleration(sensimd, send_velocity):
    w, r, dt = 3.0, 0.5, 0.01
    with sensimd.client() as c:
        c.create_body(1)
        c.create_imu(1, body_id=1, mount=(r, 0, 0), accelerometer=True, gyroscope=True)
        checked = 0
        for k in range(12):
            t = k * dt
            vel = [[0, 0, 0, 0, 0, w]] if send_velocity else None
            c.update_state(t, [1], [[0, 0, 0, *quat_z(w * t)]], vel)
            outs = by_sensor(c.step(t))[1]
            assert len(outs) == 1 and outs[0].kind == "imu"
            assert outs[0].time == pytest.approx(t, abs=1e-12)
            if k < 2:
                continue  # estimates from poses need two steps of history
            acc = outs[0].value["acceleration"]
            gyr = outs[0].value["angular_velocity"]
            # in the IMU frame, turning with the body, the centripetal acceleration is -x
            assert acc[0] == pytest.approx(-w * w * r, rel=1e-9)
            assert acc[1] == pytest.approx(0.0, abs=1e-9 * w * w * r)
            assert acc[2] == pytest.approx(G0, rel=1e-12)
            assert gyr == pytest.approx([0, 0, w], rel=1e-9, abs=1e-12)
            checked += 1
        assert checked == 10


def test_resting_and_falling_bodies(sensimd):
    with sensimd.client() as c:
        c.create_body(1)
        c.create_body(2)
        c.create_imu(1, body_id=1, accelerometer=True)
        c.create_imu(2, body_id=2, accelerometer=True)
        c.create_imu(3, accelerometer=True)  # on the world
        for k in range(6):
            t = 0.02 * k
            poses = [[1, 2, 3, 0, 0, 0, 1], [0, 0, 100 - 0.5 * G0 * t * t, 0, 0, 0, 1]]
            c.update_state(t, [1, 2], poses)  # no velocities: differences of poses
            outs = by_sensor(c.step(t))
            for sid in (1, 3):
                assert outs[sid][0].value["acceleration"] == pytest.approx([0, 0, G0], abs=1e-12)
            if k >= 2:
                assert outs[2][0].value["acceleration"] == pytest.approx([0, 0, 0], abs=1e-8)


def test_magnetometer_and_selected_axes(sensimd):
    with sensimd.client() as c:
        c.set_environment(magnetic_field=(2e-5, 0, -4.5e-5))
        c.create_body(1)
        c.create_imu(1, body_id=1, accelerometer={"chain": {"axes": 4}},
                     gyroscope={"chain": {"axes": 3}}, magnetometer=True)
        # the body turned +90 deg about z: the field's x component appears on the sensor's -y
        c.update_state(0.0, [1], [[0, 0, 0, *quat_z(math.pi / 2)]], [[0, 0, 0, 0.1, -0.2, 0.3]])
        out = by_sensor(c.step(0.0))[1][0].value
        assert out["magnetic_field"] == pytest.approx([0, -2e-5, -4.5e-5], abs=1e-18)
        # z of the accelerometer, x y of the gyroscope (rotated), x y z of the magnetometer
        np.testing.assert_allclose(out["values"], [G0, -0.2, -0.1, 0, -2e-5, -4.5e-5],
                                   atol=1e-12)


def test_chain_fields_reach_the_model(sensimd):
    """Range, bias, cross-axis, scaling with absent components, LAE and drift precision, as
    translated from the wire, on a sensor at rest (ideal specific force (0, 0, g))."""
    with sensimd.client() as c:
        c.create_imu(1, accelerometer={"chain": {
            "range": {"upper": {"z": 5.0}},            # absent bounds stay open
            "bias": {"x": 0.1},
            "crossAxisScalar": 0.01,
            "scaling": {"y": 2.0},                     # x and z keep 1
        }}, gyroscope={"laeDiagonal": {"z": 0.002}, "chain": {"drift": {"precision": 0.001}}})
        c.update_state(0.0)
        out = by_sensor(c.step(0.0))[1][0].value
        # clamp z to 5, add the bias, couple 1 % of each axis into the others, scale y by 2
        u = np.array([0.1, 0.0, 5.0])
        a = np.array([[1, 0.01, 0.01], [0.01, 1, 0.01], [0.01, 0.01, 1]]) @ u
        a[1] *= 2.0
        assert out["acceleration"] == pytest.approx(a, abs=1e-12)
        # the gyroscope at rest reads the LAE of the specific force, quantized to 0.001
        assert out["angular_velocity"] == pytest.approx([0, 0, round(0.002 * G0, 3)], abs=1e-15)


def test_model_defaults_from_the_wire(sensimd):
    with sensimd.client() as c:
        c.create_joint(1)
        c.create_encoder(1, 1, mode="incremental")     # range [0, 2 pi)
        c.create_odometer(2, 1)                         # R = 0.5 m, 1024 pulses
        c.create_cone(3)                                # 45 x 30 deg, 20 m, EXACT
        c.update_state(0.0, joint_ids=[1], joint_positions=[-1.0])
        outs = by_sensor(c.step(0.0))
        assert outs[1][0].value["position"] == pytest.approx(2 * math.pi - 1.0, abs=1e-12)
        res = 2 * math.pi * 0.5 / 1024
        assert outs[2][0].value["position"] == pytest.approx(res * math.floor(-0.5 / res),
                                                             abs=1e-12)
        assert outs[3][0].value["detected"] is False


def test_fixed_sample_rate(sensimd):
    with sensimd.client() as c:
        c.create_imu(1, gyroscope=True, sample_rate=100.0)
        c.update_state(0.0)
        assert by_sensor(c.step(0.0)).get(1, []) == []
        c.update_state(0.055)
        outs = by_sensor(c.step(0.055))[1]
        assert [round(o.time, 9) for o in outs] == [0.01, 0.02, 0.03, 0.04, 0.05]
        assert [o.frame for o in outs] == [0, 1, 2, 3, 4]


def test_subscriber_receives_the_same_samples(sensimd):
    with sensimd.client() as c, sensimd.client() as watcher:
        c.create_imu(1, gyroscope={"chain": {"noiseStddev": {"x": 0.1}}}, sample_rate=100.0)
        c.create_joint(1)
        c.create_encoder(2, 1)
        watcher.subscribe(1)
        c.update_state(0.0, joint_ids=[1], joint_positions=[0.0])
        c.step(0.0)
        c.update_state(0.03, joint_ids=[1], joint_positions=[0.3])
        done = c.step(0.03)
        stepped = [o for o in done.outputs if o.sensor_id == 1]
        assert len(stepped) == 3
        pushed = []
        while len(pushed) < 3:
            d = watcher.next_sensor_data(timeout=10.0)
            assert d is not None, "no pushed sample"
            pushed.append(d)
        assert watcher.next_sensor_data(timeout=0.2) is None   # not the encoder's
        for a, b in zip(stepped, pushed):
            assert b.sensor_id == 1 and b.time == a.time and b.frame == a.frame
            assert b.imu == a.imu


def noisy_run(sensimd_factory, threads: int) -> list[bytes]:
    d = sensimd_factory("--threads", str(threads))
    with d.client() as c:
        c.set_environment(seed=42)
        c.create_body(1)
        c.create_imu(1, body_id=1,
                     accelerometer={"chain": {"noiseStddev": {"x": 0.1, "y": 0.1, "z": 0.1},
                                              "spectralNoiseDensity": {"x": 1e-3, "y": 1e-3,
                                                                       "z": 1e-3},
                                              "drift": {"biasInstability": 0.01,
                                                        "biasCorrelationTime": 1.0,
                                                        "randomWalk": 0.01}}},
                     gyroscope={"chain": {"noiseStddev": {"x": 0.01, "y": 0.01, "z": 0.01}}},
                     sample_rate=250.0)
        c.create_joint(1)
        c.create_encoder(2, 1, noise_stddev=0.01, resolution=0.001)
        c.create_odometer(3, 1, noise_stddev=0.001)
        out = []
        for k in range(20):
            t = 0.02 * k
            c.update_state(t, [1], [[t, 0, 0, *quat_z(t)]], joint_ids=[1],
                           joint_positions=[2.0 * t])
            done = c.step(t)
            out += [o.SerializeToString() for o in done.outputs]
        return out


def test_identical_outputs_at_1_and_2_threads(sensimd_factory):
    a = noisy_run(sensimd_factory, 1)
    b = noisy_run(sensimd_factory, 2)
    assert len(a) == len(b) > 20
    assert a == b


# ---------------------------------------------------------------- encoder and odometer

def test_encoder_wraps_and_odometer_bins(sensimd):
    with sensimd.client() as c:
        c.create_joint(1, "revolute")
        c.create_encoder(1, 1, mode="incremental")
        c.create_encoder(2, 1, range_lower=-1.0, range_upper=1.0)
        c.create_odometer(3, 1)
        for k in range(9):
            t = 0.5 * k
            q = -0.5 + 2.0 * t
            c.update_state(t, joint_ids=[1], joint_positions=[q])
            outs = by_sensor(c.step(t))
            inc = outs[1][0].value
            assert inc["position"] == pytest.approx(q % (2 * math.pi), abs=1e-12)
            if k > 0:
                assert inc["speed"] == pytest.approx(2.0, rel=1e-9)
            assert outs[2][0].value["position"] == pytest.approx(min(max(q, -1.0), 1.0))
        # KAT O2: theta = 10 rad, R = 0.5 m, 1024 pulses: 4.99770941 m
        c.update_state(10.0, joint_ids=[1], joint_positions=[10.0])
        assert by_sensor(c.step(10.0))[3][0].value["position"] == pytest.approx(4.99770941,
                                                                                 rel=2e-8)


# ---------------------------------------------------------------- cone sensor



@pytest.mark.parametrize("mode", ["exact", "lines"])
def test_cone_sees_the_thesis_obstacle(sensimd, mode):
    # the thesis' 1 x 1 x 1e-5 obstacle at (7, -5, 0), turned to face the sensor
    with sensimd.client() as c:
        c.create_primitive(1, "box", half_extents=(0.5e-5, 0.5, 0.5))
        az = math.atan2(-5.0, 7.0)
        c.create_object(7, 1, local_pose=((7, -5, 0), quat_z(az)))
        c.create_cone(1, mode=mode, fov_horizontal=math.radians(90), fov_vertical=math.radians(60),
                      range=20.0, lines_per_face=11)
        c.update_state(0.0)
        r = by_sensor(c.step(0.0))[1][0].value
        assert r["detected"]
        assert r["object_id"] == 7
        assert r["range"] == pytest.approx(math.sqrt(74.0) - 0.5e-5, abs=1e-6)
        assert r["range"] == pytest.approx(8.60232, abs=5e-6)
        assert math.degrees(r["azimuth"]) == pytest.approx(-35.5376778, abs=1e-6)
        assert r["elevation"] == pytest.approx(0.0, abs=1e-9)


def test_cone_speed_from_step_times(sensimd):
    with sensimd.client() as c:
        c.create_primitive(1, "sphere", radius=1.0)
        c.create_body(1, (10, 0, 0, 0, 0, 0, 1))
        c.create_object(3, 1, body_id=1)
        c.create_cone(1)
        readings = []
        for t, x in ((0.0, 10.0), (0.02, 9.9), (0.05, 9.75)):
            c.update_state(t, [1], [[x, 0, 0, 0, 0, 0, 1]])
            readings.append(by_sensor(c.step(t))[1][0].value)
        assert [r["range"] for r in readings] == pytest.approx([9.0, 8.9, 8.75], abs=1e-6)
        assert readings[0]["speed"] is None
        assert readings[1]["speed"] == pytest.approx(5.0, rel=1e-6)
        assert readings[2]["speed"] == pytest.approx(5.0, rel=1e-6)


# ---------------------------------------------------------------- configuration errors

@pytest.mark.parametrize("kwargs,field", [
    (dict(imu={}), "accelerometer, gyroscope or magnetometer"),
    (dict(imu={"gyroscope": {"chain": {"noiseStddev": {"y": -1}}}}),
     "imu.gyroscope.chain.noise_stddev.y"),
    (dict(imu={"accelerometer": {"chain": {"crossAxisMatrix": {"m": [1, 2]}}}}),
     "imu.accelerometer.chain.cross_axis_matrix"),
    (dict(imu={"accelerometer": {"chain": {"crossAxisScalar": 1.5}}}),
     "imu.accelerometer.chain.cross_axis_scalar"),
    (dict(imu={"magnetometer": {}, "sampleRate": -5}), "imu.sample_rate"),
    (dict(imu={"gyroscope": {"laeDiagonal": {"y": "NaN"}}}), "imu.gyroscope.lae_diagonal.y"),
    (dict(imu={"gyroscope": {"laeMatrix": {"m": [0, 0, 0, 0, "Infinity", 0, 0, 0, 0]}}}),
     "imu.gyroscope.lae_matrix.m[4]"),
    (dict(encoder={"jointId": 1, "resolution": -1}), "encoder.resolution"),
    (dict(encoder={}), "encoder.joint_id"),
    (dict(odometer={"jointId": 1, "wheelRadius": 0}), "odometer.wheel_radius"),
    (dict(cone={"fovHorizontal": 4.0}), "cone.fov_horizontal"),
    (dict(cone={"mode": "CONE_LINES", "linesPerFace": 1}), "cone.lines_per_face"),
])
def test_bad_configuration_names_the_field_and_changes_nothing(sensimd, kwargs, field):
    with sensimd.client() as c:
        c.create_joint(1)
        before = sensor_count(c)
        with pytest.raises(errors.InvalidArgument) as exc:
            c.create_sensor(5, **kwargs)
        assert field in str(exc.value)
        assert sensor_count(c) == before
        # the id is still free
        c.create_imu(5, gyroscope=True)


def test_odometer_needs_a_revolute_joint(sensimd):
    with sensimd.client() as c:
        c.create_joint(1, "prismatic")
        before = sensor_count(c)
        with pytest.raises(errors.InvalidArgument) as exc:
            c.create_odometer(2, 1)
        assert "odometer.joint_id = 1" in str(exc.value) and "revolute" in str(exc.value)
        assert sensor_count(c) == before
        c.create_encoder(2, 1)                          # an encoder reads either kind


def test_cone_does_not_see_the_body_it_is_mounted_on(sensimd):
    # a sphere of radius 1 on the cone's own body, 3 m ahead, and another 6 m ahead on a second
    # body: the cone reports the second one (5 m to its surface), like a lidar would
    with sensimd.client() as c:
        c.create_primitive(1, "sphere", radius=1.0)
        c.create_body(1, (0, 0, 0, 0, 0, 0, 1))
        c.create_body(2, (0, 0, 0, 0, 0, 0, 1))
        c.create_object(10, 1, body_id=1, local_pose=((3, 0, 0), (0, 0, 0, 1)))
        c.create_object(20, 1, body_id=2, local_pose=((6, 0, 0), (0, 0, 0, 1)))
        c.create_cone(1, body_id=1)
        c.create_cone(2)                                # on the world: sees the nearer one
        c.update_state(0.0)
        out = by_sensor(c.step(0.0))
        assert out[1][0].value["object_id"] == 20
        assert out[1][0].value["range"] == pytest.approx(5.0, abs=1e-6)
        assert out[2][0].value["object_id"] == 10
        assert out[2][0].value["range"] == pytest.approx(2.0, abs=1e-6)


# ---------------------------------------------------------------- all or nothing

def two_phase_run(c, fail: bool) -> list[tuple]:
    """IMU 1 (drifting gyroscope), encoder 2, cone 3 watching a ball that approaches at
    5 m/s; with `fail`, each step is first refused once every sensor ran, because of IMU 6
    (fixed rate 40 kHz: 60,000 to 100,000 samples of 150 bytes, more than the 2 MiB one reply
    may take under --max-held-bytes 4 MiB), and then, with IMU 6 removed, run again."""
    c.set_environment(seed=7)
    c.create_primitive(1, "sphere", radius=1.0)
    c.create_body(1, (10, 0, 0, 0, 0, 0, 1))
    c.create_object(3, 1, body_id=1)
    c.create_joint(1)
    c.create_imu(1, gyroscope={"chain": {"drift": {"randomWalk": 0.01,
                                                   "biasInstability": 0.002,
                                                   "biasCorrelationTime": 0.5}}})
    c.create_encoder(2, 1)
    c.create_cone(3)
    rows = []
    for k, t in enumerate((0.0, 1.5, 3.5, 6.0)):
        x = 10.0 - 0.5 * t
        c.update_state(t, [1], [[x, 0, 0, 0, 0, 0, 1]], joint_ids=[1], joint_positions=[2 * t])
        if fail and k > 0:
            c.create_imu(6, accelerometer=True, gyroscope=True, magnetometer=True,
                         sample_rate=4e4)
            with pytest.raises(errors.ResourceExhausted) as exc:
                c.step(t)
            assert "outputs: the" in exc.value.message and "more than one reply may" in \
                exc.value.message
            c.remove("sensor", 6)
        out = by_sensor(c.step(t))
        for sid in (1, 2, 3):
            o = out[sid][0]
            rows.append((sid, o.frame, o.time,
                         {key: tuple(np.ravel(v)) if isinstance(v, (np.ndarray, list)) else v
                          for key, v in o.value.items()}))
    return rows


def test_refused_step_leaves_every_sensor_as_it_was(sensimd_factory):
    sensimd = sensimd_factory("--max-held-bytes", str(4 << 20))
    with sensimd.client(environment="plain", timeout=60) as a, \
            sensimd.client(environment="retried", timeout=60) as b:
        plain = two_phase_run(a, fail=False)
        retried = two_phase_run(b, fail=True)
    # frames 0, 1, 2, 3 per sensor (none skipped), the same readings bit for bit (the gyroscope
    # drift advanced once per step, the cone and encoder speeds from the committed step)
    assert [(sid, frame) for sid, frame, _, _ in retried] == \
        [(sid, k) for k in range(4) for sid in (1, 2, 3)]
    assert retried == plain
    # and right: the ball approaches at 0.5 m/s, the joint turns at 2 rad/s
    cone = [r[3] for r in retried if r[0] == 3]
    assert cone[0]["speed"] is None
    assert [r["speed"] for r in cone[1:]] == pytest.approx([0.5] * 3, rel=1e-9)
    assert [r[3]["speed"] for r in retried if r[0] == 2][1:] == pytest.approx([2.0] * 3,
                                                                              rel=1e-9)


def test_a_fixed_rate_imu_refuses_too_long_a_step_at_the_state_update_and_steps_on(sensimd):
    # Regression: an IMU with a fixed sample rate had no step bound, so an UpdateState whose
    # step held more samples than a step may take was accepted, and that Step was refused, and
    # every later one (the interval can only grow): the environment was wedged. Now the update
    # is refused, naming the IMU, nothing changes, and nearer times step on.
    def steps(c):
        return next(e for e in c.get_info().environments if e.name == c.environment).steps

    with sensimd.client(timeout=60) as c:
        c.create_imu(6, accelerometer=True, sample_rate=1e4)
        c.update_state(0.0)
        c.step(0.0)
        for t, why in ((3600.0, "imu 6: the step (0, 3600] at imu.sample_rate = 10000 Hz "
                                "holds 36000000 samples, more than 1000000; step more often"),
                       (20.0, "imu 6: the step (0, 20] holds 200000 samples (imu.sample_rate "
                              "= 10000 Hz), 102400000 bytes of records, more than "
                              "max_output_bytes")):
            for _ in range(2):                   # refused again, the same way
                with pytest.raises(errors.ResourceExhausted) as exc:
                    c.update_state(t)
                assert (f"update_state: time = {t:g} is too far from the last step (0) for the "
                        f"next step: {why}") in exc.value.message
        assert steps(c) == 1
        # the nearer time steps: every 0.1 ms of (0, 1], then of (1, 1.5]
        c.update_state(1.0)
        out = by_sensor(c.step(1.0))[6]
        assert [o.frame for o in out] == list(range(10000))
        assert [o.time for o in out] == pytest.approx([k / 1e4 for k in range(1, 10001)],
                                                      abs=1e-12)
        assert out[-1].value["acceleration"] == pytest.approx([0, 0, G0])
        c.update_state(1.5)
        assert len(by_sensor(c.step(1.5))[6]) == 5000
        assert steps(c) == 3

        # a fixed-rate IMU created while too long a step is due is refused the same way
        c.remove("sensor", 6)
        c.update_state(400.0)                    # no sensor: any step is fine
        with pytest.raises(errors.ResourceExhausted) as exc:
            c.create_imu(7, gyroscope=True, sample_rate=1e4)
        assert ("the step already due, over (1.5, 400], is too long for it: imu 7: the step "
                "(1.5, 400] at imu.sample_rate = 10000 Hz holds 3985000 samples"
                in exc.value.message)
        c.step(400.0)
        c.create_imu(7, gyroscope=True, sample_rate=1e4)
        c.update_state(400.5)
        assert len(by_sensor(c.step(400.5))[7]) == 5000


# ---------------------------------------------------------------- client helpers

def test_helpers_take_both_key_spellings_and_enum_names(sensimd):
    with sensimd.client() as c:
        c.create_joint(1)
        c.create_encoder(1, 1, mode="ENCODER_INCREMENTAL", rangeLower=0.0, range_upper=1.0)
        c.create_encoder(2, 1, mode=1, speedTimeout=0.5)
        c.create_odometer(3, 1, wheelRadius=0.25, pulses_per_revolution=0)
        c.create_cone(4, mode="CONE_LINES", linesPerFace=3, fov_horizontal=1.0)
        c.create_cone(5, mode="lines", lines_per_face=3, fovHorizontal=1.0)
        c.create_lidar(6, spinning={"frequency": 10.0, "columns": 4,
                                    "channelElevations": [0.0, 0.1],
                                    "spin": "SPIN_COUNTER_CLOCKWISE"})
        c.create_lidar(7, spinning={"frequency": 10.0, "columns": 4,
                                    "channel_elevations": [0.0], "spin": "counter_clockwise"})
        with pytest.raises(ValueError) as exc:
            c.create_cone(8, mode="sideways")
        assert "cone.mode" in str(exc.value) and "lines" in str(exc.value)
        with pytest.raises(TypeError):
            c.create_odometer(8, 1, wheelradius=0.25)
        c.update_state(1.0, joint_ids=[1], joint_positions=[1.5])
        out = by_sensor(c.step(1.0))
        assert out[1][0].value["position"] == pytest.approx(0.5, abs=1e-12)   # wrapped in [0, 1)
        assert out[3][0].value["position"] == pytest.approx(0.375, abs=1e-12)  # R theta
