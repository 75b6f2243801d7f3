# SPDX-License-Identifier: MIT
"""Hostile numbers in sensor configurations against the real sensimd. Every numeric field of
CreateSensor (the mount, every sensor kind, every lidar pattern, every oneof branch, repeated
arrays), enumerated from the protobuf descriptors so that a new field cannot slip through, gets
NaN, +-inf, +-1e308 and 5e-324 (integers: their extremes) on a valid base configuration: the
daemon either refuses it with INVALID_ARGUMENT naming the field, or accepts it and then answers
a few steps (a long one among them) in bounded time, while a client of another environment is
still served. Plus the regressions of two configurations that crashed and hung the daemon."""

from __future__ import annotations

import math
import re
import signal
import time

import numpy as np
import pytest
from google.protobuf.descriptor import FieldDescriptor as FD

from sensim import errors, pb
from sensim.outputs import outputs
from sensim.testing import Daemon

NAN = float("nan")
INF = float("inf")
FLOAT_VALUES = (NAN, INF, -INF, 1e308, -1e308, 5e-324)
INT_VALUES = {
    FD.TYPE_UINT32: (0, 2**32 - 1), FD.TYPE_FIXED32: (0, 2**32 - 1),
    FD.TYPE_UINT64: (0, 2**64 - 1), FD.TYPE_FIXED64: (0, 2**64 - 1),
    FD.TYPE_INT32: (-2**31, 2**31 - 1), FD.TYPE_SINT32: (-2**31, 2**31 - 1),
    FD.TYPE_SFIXED32: (-2**31, 2**31 - 1), FD.TYPE_INT64: (-2**63, 2**63 - 1),
    FD.TYPE_SINT64: (-2**63, 2**63 - 1), FD.TYPE_SFIXED64: (-2**63, 2**63 - 1),
}
FLOAT_TYPES = (FD.TYPE_DOUBLE, FD.TYPE_FLOAT)
SENSOR_ID = 7
STEP_BOUND = 20.0          # s: a step answers within this (the daemon's deadline is 5 s)


# ---------------------------------------------------------------- base configurations

def _mount():
    return pb.Pose(position=pb.Vec3(x=0.0, y=0.0, z=0.5),
                   orientation=pb.Quat(x=0.0, y=0.0, z=0.0, w=1.0))


def _lidar_options(**pattern):
    """A lidar with every optional message of LidarConfig set (returns ALL so that max_returns
    counts), publishing per step."""
    return pb.LidarConfig(
        range_min=0.1, range_max=50.0, raytrace_depth=2, return_mode=pb.RETURN_ALL,
        max_returns=4, intensity_threshold=0.0,
        beam=pb.BeamDivergence(divergence=0.0015, exit_radius=0.005, detector_radius=0.005,
                               detector_offset=0.001),
        distance_noise=pb.DistanceNoise(stddev_base=0.01, stddev_slope=0.001, mean=0.0),
        angle_noise=pb.RayAngleNoise(mean=0.0, stddev=0.001),
        publish=pb.PUBLISH_PER_STEP, exclude_bodies=[1], group_mask=1, **pattern)


def _chain(matrix):
    c = pb.TriaxialConfig(
        mount=_mount(), range=pb.AxisRange(lower=pb.Vec3(x=-100, y=-100, z=-100),
                                           upper=pb.Vec3(x=100, y=100, z=100)),
        bias=pb.Vec3(x=0.01, y=0.01, z=0.01), noise_stddev=pb.Vec3(x=0.01, y=0.01, z=0.01),
        scaling=pb.Vec3(x=1, y=1, z=1), spectral_noise_density=pb.Vec3(x=0.001, y=0.001, z=0.001),
        axes=7, drift=pb.TriaxialDrift(turn_on_bias_mean=0.0, turn_on_bias_stddev=0.01,
                                       bias_instability=0.01, bias_correlation_time=100.0,
                                       random_walk=0.001, precision=0.001))
    if matrix:
        c.cross_axis_matrix.m.extend([1, 0.01, 0, 0, 1, 0.01, 0.01, 0, 1])
    else:
        c.cross_axis_scalar = 0.01
    return c


def _imu(matrix):
    g = pb.GyroscopeConfig(chain=_chain(matrix))
    if matrix:
        g.lae_matrix.m.extend([0.001] * 9)
    else:
        g.lae_diagonal.CopyFrom(pb.Vec3(x=0.001, y=0.001, z=0.001))
    return pb.ImuConfig(accelerometer=pb.AccelerometerConfig(chain=_chain(matrix)), gyroscope=g,
                        magnetometer=pb.MagnetometerConfig(chain=_chain(matrix)),
                        sample_rate=100.0)


def _bases():
    """(name, CreateSensor) pairs: every sensor kind, every lidar pattern and every oneof branch,
    each valid as it stands. The lidars have no start_time, so that their first step fires the
    first ray of sweep 0 (the ray whose time is exactly the sweep's start)."""
    el2, az2 = [-0.1, 0.1], [0.0, 0.5]
    lidars = {
        "vlp16": pb.Vlp16Pattern(frequency=10.0, vertical_offsets=True, start_azimuth=0.1),
        "spinning": pb.SpinningPattern(frequency=10.0, columns=360, channel_elevations=el2,
                                       channel_azimuth_offsets=[0.0, 0.01],
                                       channel_time_offsets=[0.0, 1e-5], start_azimuth=0.1),
        "ouster": pb.OusterPattern(channels=16, columns=512, frequency=10.0, elevation_max=0.2,
                                   elevation_min=-0.2, beam_altitude_angles=[0.01 * i - 0.08
                                                                             for i in range(16)],
                                   beam_azimuth_angles=[0.001] * 16,
                                   lidar_origin_to_beam_origin=0.015),
        "flash": pb.FlashPattern(columns=8, rows=4, fov_horizontal=0.7, fov_vertical=0.35,
                                 frame_rate=10.0),
        "hdl64e": pb.Hdl64ePattern(frequency=10.0, columns=100, start_azimuth=0.1),
        "bpearl": pb.BpearlPattern(frequency=10.0, start_azimuth=0.1),
        "custom": pb.CustomPattern(azimuths=az2, elevations=el2, time_offsets=[0.0, 0.01],
                                   channels=[0, 1], frame_rate=10.0),
        "livox": pb.LivoxPattern(fov=0.6, point_rate=10000.0, frame_rate=10.0,
                                 prism_rates=[121.0, -77.0]),
    }
    out = [(f"lidar.{k}", pb.CreateSensor(id=SENSOR_ID, mount=_mount(),
                                          lidar=_lidar_options(**{k: v})))
           for k, v in lidars.items()]
    out += [
        ("imu.scalar", pb.CreateSensor(id=SENSOR_ID, mount=_mount(), imu=_imu(False))),
        ("imu.matrix", pb.CreateSensor(id=SENSOR_ID, mount=_mount(), imu=_imu(True))),
        ("encoder", pb.CreateSensor(id=SENSOR_ID, encoder=pb.EncoderConfig(
            joint_id=1, noise_stddev=0.001, resolution=0.001, scaling=1.0,
            mode=pb.ENCODER_INCREMENTAL, range_lower=0.0, range_upper=6.0, speed_timeout=1.0))),
        ("odometer", pb.CreateSensor(id=SENSOR_ID, odometer=pb.OdometerConfig(
            joint_id=1, wheel_radius=0.3, pulses_per_revolution=512, noise_stddev=0.001,
            scaling=1.0))),
        ("cone", pb.CreateSensor(id=SENSOR_ID, mount=_mount(), cone=pb.ConeConfig(
            fov_horizontal=0.8, fov_vertical=0.5, range=20.0, mode=pb.CONE_LINES,
            lines_per_face=10))),
    ]
    return out


# ---------------------------------------------------------------- the fields, from the descriptors

def _numeric(f):
    return f.type in FLOAT_TYPES or f.type in INT_VALUES


def _all_paths(desc, path=""):
    """Every numeric field reachable from message type desc, through every oneof branch."""
    for f in desc.fields:
        p = f"{path}.{f.name}" if path else f.name
        if f.type == FD.TYPE_MESSAGE:
            yield from _all_paths(f.message_type, p)
        elif _numeric(f):
            yield p


def _walk(msg, path=""):
    """The numeric fields reachable in msg: sub-messages whether set or not, except the oneof
    members not chosen (another base covers those)."""
    for f in msg.DESCRIPTOR.fields:
        p = f"{path}.{f.name}" if path else f.name
        if f.type == FD.TYPE_MESSAGE:
            if f.containing_oneof and msg.WhichOneof(f.containing_oneof.name) != f.name:
                continue
            yield from _walk(getattr(msg, f.name), p)
        elif _numeric(f):
            yield p, f


def _cases():
    """(base name, path, value, CreateSensor) of every field x bad value, each path in the first
    base that reaches it."""
    seen, out = set(), []
    for name, base in _bases():
        for path, f in _walk(base):
            if path in seen:
                continue
            seen.add(path)
            for value in (FLOAT_VALUES if f.type in FLOAT_TYPES else INT_VALUES[f.type]):
                out.append((name, path, value, _mutate(base, path, value)))
    return out


def _mutate(base, path, value):
    m = pb.CreateSensor()
    m.CopyFrom(base)
    *parents, leaf = path.split(".")
    target = m
    for name in parents:
        target = getattr(target, name)
    if target.DESCRIPTOR.fields_by_name[leaf].label == FD.LABEL_REPEATED:
        arr = getattr(target, leaf)
        if len(arr):
            arr[0] = value
        else:
            arr.append(value)
    else:
        setattr(target, leaf, value)
    return m


CASES = _cases()


def _mentions(message, path):
    return re.search(r"(?<![\w.])" + re.escape(path) + r"(?!\w)", message) is not None


def _named(message, path):
    """Whether an error names the field: its whole path, or for a component of a vector,
    quaternion or matrix (x, y, z, w, m) the path of that value."""
    if _mentions(message, path):
        return True
    parent, _, leaf = path.rpartition(".")
    return leaf in ("x", "y", "z", "w", "m") and _mentions(message, parent)


def test_every_numeric_field_of_create_sensor_is_covered():
    every = set(_all_paths(pb.CreateSensor.DESCRIPTOR))
    covered = {path for _, path, _, _ in CASES}
    assert every - covered == set(), "numeric fields no base configuration reaches"
    assert len(every) > 150


# ---------------------------------------------------------------- against the daemon

@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    d = Daemon(["--max-request-seconds", "5", "--threads", "2"],
               log_dir=tmp_path_factory.mktemp("bounds"), name="sensimd-bounds")
    yield d
    d.close()                               # SIGTERM; raises unless sensimd exits with 0


@pytest.fixture(scope="module")
def world(daemon):
    """The environment the cases run in (a sphere around the sensors, a body, a revolute joint)
    and a witness client in another environment."""
    c = daemon.client(environment="bounds", timeout=60)
    w = daemon.client(environment="witness", timeout=60)
    c.create_primitive(1, "sphere", radius=10.0)
    c.create_object(1, geometry_id=1)
    c.create_body(1)
    c.create_joint(1, "revolute")
    state = {"t": 0.0}
    yield c, w, state
    c.close()
    w.close()


def _timed(fn, *args):
    t0 = time.monotonic()
    try:
        return fn(*args)
    except (errors.ConnectionClosed, errors.Timeout):
        raise
    except errors.SensimError as exc:       # a refused step is an answer
        return exc
    finally:
        assert time.monotonic() - t0 < STEP_BOUND, f"{fn.__name__} took over {STEP_BOUND} s"


@pytest.mark.parametrize("base", [name for name, _ in _bases()])
def test_hostile_numbers_are_refused_naming_the_field_or_served(world, daemon, base):
    c, w, state = world
    cases = [case for case in CASES if case[0] == base]
    assert cases
    unnamed, overflowed = [], []
    for _, path, value, msg in cases:
        try:
            c.create_sensor(SENSOR_ID, msg)
        except (errors.InvalidArgument, errors.NotFound) as exc:
            # refused (NOT_FOUND: a body or joint id that names nothing), naming the field
            if not _named(str(exc), path):
                unnamed.append(f"{path} = {value!r}: {exc}")
            continue

        # accepted: a few steps, a long one among them, each answered in bounded time, and
        # every value they output is a number (no overflow to +-inf; NaN only where a cloud
        # keeps a miss)
        t = state["t"]
        for dt in (0.001, 0.01, 0.5):
            t += dt
            _timed(c.update_state, t)
            done = _timed(c.step, t)
            if done is not None and not isinstance(done, errors.SensimError):
                bad = _infinite(done)
                if bad:
                    overflowed.append(f"{path} = {value!r}: {bad}")
        state["t"] = t + 0.001
        assert daemon.proc.poll() is None, f"{path} = {value!r}: the daemon died"
        w.ping()
        w.get_info()
        c.remove("sensor", msg.id)
    assert unnamed == [], "refusals that do not name the field"
    assert overflowed == [], "accepted values whose outputs overflowed"


def _infinite(done):
    """What in a StepDone's records is +-inf (an empty string when nothing is)."""
    for out in outputs(done):
        v = out.value
        if out.kind == "point_cloud":
            for name in v.dtype.names or ():
                col = np.asarray(v[name], dtype=np.float64)
                if np.isinf(col).any():
                    return f"sensor {out.sensor_id} point field {name}"
        elif out.kind == "imu":
            vecs = [v.acceleration, v.angular_velocity, v.magnetic_field, v.values]
            if any(x is not None and not np.isfinite(x).all() for x in vecs):
                return f"imu sample at t = {out.time}: {v.values}"
        elif out.kind == "scalar":
            if not math.isfinite(v.position) or (v.speed is not None and
                                                 not math.isfinite(v.speed)):
                return f"scalar sample {v}"
        elif out.kind == "cone":
            if not (math.isfinite(v.range) or not v.detected):
                return f"cone reading {v}"
    return ""


# ---------------------------------------------------------------- regressions

@pytest.mark.parametrize("noise,field", [({"stddev": 1e308}, "lidar.angle_noise.stddev"),
                                         ({"mean": 1e308}, "lidar.angle_noise.mean"),
                                         ({"stddev": 4.0}, "lidar.angle_noise.stddev"),
                                         ({"mean": -3.2}, "lidar.angle_noise.mean")])
def test_angle_noise_that_makes_rays_non_finite_is_refused(sensimd_factory, noise, field):
    # a draw times 1e308 made a non-finite ray direction: the next Step aborted the daemon
    # inside Embree, and every environment with it
    d = sensimd_factory()
    with d.client(environment="witness") as w, d.client() as c:
        c.create_primitive(1, "sphere", radius=10.0)
        c.create_object(1, geometry_id=1)
        with pytest.raises(errors.InvalidArgument) as exc:
            c.create_lidar(5, vlp16={"frequency": 10.0}, angle_noise=noise)
        assert field in str(exc.value) and "[" in str(exc.value)   # and its range
        c.create_lidar(5, vlp16={"frequency": 10.0}, angle_noise={"mean": math.pi,
                                                                   "stddev": math.pi})
        for t in (0.0, 0.05, 0.1):
            c.update_state(t)
            c.step(t)
        w.ping()


def _long_step_is_bounded(d, c, w, t1):
    """With --max-request-seconds 1: a long step answers DEADLINE_EXCEEDED in time and leaves the
    witness served; during another one SIGTERM stops the daemon promptly."""
    c.update_state(t1)
    t0 = time.monotonic()
    with pytest.raises(errors.SensimError, match="DEADLINE_EXCEEDED"):
        c.step(t1)
    assert time.monotonic() - t0 < 4.0
    w.ping()
    w.get_info()
    # the same step again (the refused one changed nothing; a later state would make the next
    # step cover (0, 2 t1], refused at UpdateState as too long for the lidar)
    c.send_request("step", pb.Step(time=t1))
    time.sleep(0.3)
    t0 = time.monotonic()
    d.proc.send_signal(signal.SIGTERM)
    assert d.proc.wait(timeout=30) == 0
    assert time.monotonic() - t0 < 3.0


@pytest.mark.parametrize("livox", [{"frame_rate": 5e-324}, {"frame_rate": 1e-12,
                                                           "point_rate": 1e8}])
def test_rates_that_hung_their_environment_are_refused(sensimd_factory, livox):
    # the frame of 1e20 rays or more overflowed the sweep bookkeeping, whose loop then never
    # ended: the Step, GetInfo and SIGTERM were never answered
    d = sensimd_factory("--max-request-seconds", "1")
    with d.client(environment="witness", timeout=10) as w, d.client(timeout=10) as c:
        with pytest.raises(errors.InvalidArgument) as exc:
            c.create_lidar(5, livox=livox)
        assert "lidar.livox.frame_rate" in str(exc.value)
        w.ping()


def test_a_valid_long_step_answers_its_deadline_and_sigterm(sensimd_factory):
    # the nearest valid rates (1e8 rays per second, frames of about 2^31 rays, per step, 2-byte
    # points): a 0.3 s step fires 3e7 rays, seconds of tracing
    d = sensimd_factory("--max-request-seconds", "1")
    w = d.client(environment="witness", timeout=30)
    c = d.client(timeout=30)
    c.create_primitive(1, "sphere", radius=10.0)
    c.create_object(1, geometry_id=1)
    c.create_lidar(5, livox={"point_rate": 1e8, "frame_rate": 0.05}, publish="per_step",
                   fields=["ring"])
    c.update_state(0.0)
    c.step(0.0)
    _long_step_is_bounded(d, c, w, 0.3)
    c.close()
    w.close()
