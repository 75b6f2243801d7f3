# SPDX-License-Identifier: MIT
"""The lock-step helper against the real daemon: with any number of steps in flight it returns
exactly what a plain update_state + step loop returns (bit for bit, in order, by sensor); a
refused step raises naming its time and leaves the helper usable; a daemon that dies or stops
answering raises instead of hanging; state arrays of any layout give the same steps."""

from __future__ import annotations

import math
import os
import signal
import time

import numpy as np
import pytest

import sensim
from sensim import errors
from sensim.lockstep import _step_message
from sensim.testing import Daemon, DaemonError

DT = 1e-3


def vehicle(c):
    """A ground, a box and a vehicle (body 1) with a VLP-16 (5) and an IMU with noise (7)
    sampling at 4 kHz (four samples per 1 ms step)."""
    c.set_environment(seed=11)
    c.create_primitive(1, "plane")
    c.create_object(1, 1)
    c.create_primitive(2, "box", half_extents=(1.0, 1.0, 1.0))
    c.create_object(2, 2, local_pose=((6.0, 2.0, 1.0), None))
    c.create_body(1, pose=((0, 0, 0.5), (0, 0, 0, 1)))
    c.create_lidar(5, body_id=1, mount=((0, 0, 1.0), None), preset="vlp16",
                   distance_noise={"stddev_base": 0.01})
    c.create_imu(7, body_id=1, accelerometer={"chain": {"noiseStddev": {"x": 0.01, "y": 0.01,
                                                                          "z": 0.01}}},
                 gyroscope=True, sample_rate=4000.0)


def pose(t):
    """The vehicle on a circle of 5 m at 0.4 rad/s, facing along its path: pose, velocity."""
    w, r = 0.4, 5.0
    a = w * t
    p = [r * math.sin(a), r - r * math.cos(a), 0.5, 0, 0, math.sin(a / 2), math.cos(a / 2)]
    v = [r * w * math.cos(a), r * w * math.sin(a), 0, 0, 0, w]
    return p, v


def state(t):
    p, v = pose(t)
    return dict(body_ids=[1], body_poses=[p], body_velocities=[v])


def plain_loop(c, times):
    """The reference: one update_state and one step per time, each waited for."""
    out = []
    for t in times:
        c.update_state(t, **state(t))
        done = c.step(t)
        out.append((done.time, done.step, sensim.by_sensor(done)))
    return out


def same(a, b):
    """Two outputs hold the same values bit for bit."""
    assert (a.sensor_id, a.time, a.frame, a.kind) == (b.sensor_id, b.time, b.frame, b.kind)
    if a.kind == "point_cloud":
        assert a.value.tobytes() == b.value.tobytes()
        assert a.meta == b.meta
    else:
        for key in a.value.keys():
            np.testing.assert_array_equal(a.value[key], b.value[key])


@pytest.mark.parametrize("depth", [1, 4, 16])
def test_lockstep_returns_what_the_plain_loop_returns(sensimd, depth):
    times = [k * DT for k in range(0, 260)]
    with sensimd.client(environment="plain") as a, sensimd.client(environment="piped") as b:
        vehicle(a)
        vehicle(b)
        want = plain_loop(a, times)
        seen = []
        with sensim.LockStep(b, depth=depth, on_result=seen.append) as sim:
            got = []
            for t in times:
                got += sim.submit(t, **state(t))
                assert sim.in_flight <= depth
            got += sim.drain()
        assert seen == got
        assert len(got) == len(want)
        clouds = 0
        for r, (t, step, outs) in zip(got, want):
            assert (r.time, r.step) == (t, step)
            assert sorted(r.outputs) == sorted(outs)
            for sid in outs:
                assert len(r[sid]) == len(outs[sid])
                for x, y in zip(r[sid], outs[sid]):
                    same(x, y)
                clouds += sum(o.kind == "point_cloud" for o in outs[sid])
        assert clouds == 2            # revolutions completed at 0.1 and 0.2 s
        assert len(r[7]) == 4
        assert r[7][0].value.acceleration is not None and r[99] == []


def test_lockstep_gathers_records_sent_ahead_in_parts(sensimd_factory):
    """Frames of at most 160 KiB: three lidars of 64 KiB a revolution and an IMU do not fit
    one StepDone, so each revolution's records travel ahead of it in frames of the step's id
    (docs/streams.md, "Outputs of a step"); with steps in flight, every result holds its own
    step's records, equal to the plain loop's, and a selection is honoured."""
    small = {"frequency": 10.0, "columns": 256,
             "channel_elevations": [-0.3 + 0.02 * i for i in range(16)]}

    def room(c):
        c.set_ambient("custom", return_probability_scaling=0.0)
        c.create_primitive(1, "sphere", radius=20.0)
        c.create_object(1, 1)
        for i in (3, 4, 5):
            c.create_lidar(i, spinning=small, mount=((0.1 * i, 0, 0), None))
        c.create_imu(9, accelerometer=True, sample_rate=100.0)

    d = sensimd_factory("--max-frame-bytes", str(160 << 10))
    times = [0.025 * k for k in range(0, 13)]          # revolutions end at 0.1, 0.2, 0.3 s
    with d.client(environment="plain") as a, d.client(environment="piped") as b:
        room(a)
        room(b)
        want = []
        for t in times:
            a.update_state(t)
            done = a.step(t)
            want.append((done.outputs_in_parts, sensim.by_sensor(done)))
        assert sum(parts > 0 for parts, _ in want) == 3      # the daemon did send parts
        with sensim.LockStep(b, depth=4) as sim:
            got = list(sim.run(times))
        assert len(got) == len(want)
        for r, (_, outs) in zip(got, want):
            assert sorted(r.outputs) == sorted(outs)
            for sid in outs:
                assert len(r[sid]) == len(outs[sid])
                for x, y in zip(r[sid], outs[sid]):
                    same(x, y)
        # only the listed sensors, even when their records come in parts
        with sensim.LockStep(b, depth=3, outputs=[4, 9]) as sim:
            got = list(sim.run([0.3 + 0.025 * k for k in range(1, 9)]))
        assert all(set(r.outputs) <= {4, 9} for r in got)
        assert sum(len(r[4]) for r in got) == 2 and sum(len(r[9]) for r in got) == 20


def test_lockstep_run_and_context_manager_drain(sensimd):
    with sensimd.client() as c:
        vehicle(c)
        sim = sensim.LockStep(c, depth=3)
        results = list(sim.run([k * DT for k in range(1, 21)], state))
        assert [r.step for r in results] == list(range(1, 21))
        assert sim.in_flight == 0
        seen = []
        with sensim.LockStep(c, depth=8, on_result=seen.append) as sim:
            for k in range(21, 26):
                sim.submit(k * DT, **state(k * DT))
        # leaving the block collected the five steps still in flight
        assert [r.step for r in seen] == [21, 22, 23, 24, 25]


def test_lockstep_any_array_layout(sensimd):
    """Poses as Fortran-ordered, sliced, broadcast, big-endian and float32 arrays step exactly
    as the contiguous float64 ones."""
    n = 4
    base = np.array([[1.0, 2.0, 0.5, 0, 0, 0.38268343236508984, 0.9238795325112867]])
    layouts = {
        "contiguous": lambda p: np.ascontiguousarray(np.repeat(p, n, axis=0)),
        "fortran": lambda p: np.asfortranarray(np.repeat(p, n, axis=0)),
        "sliced": lambda p: np.repeat(p, 2 * n, axis=0)[::2],
        "broadcast": lambda p: np.broadcast_to(p, (n, 7)),
        "big_endian": lambda p: np.repeat(p, n, axis=0).astype(">f8"),
        "float32": lambda p: np.repeat(p, n, axis=0).astype(np.float32).astype(np.float64),
    }
    results = {}
    for name, make in layouts.items():
        with sensimd.client(environment=name) as c:
            c.create_primitive(1, "sphere", radius=0.25)
            for i in range(n):
                c.create_body(i + 1)
                c.create_object(i + 1, 1, body_id=i + 1)
            c.create_imu(9, body_id=2, accelerometer=True, gyroscope=True)
            c.create_lidar(5, flash={"columns": 8, "rows": 8, "frame_rate": 1000.0},
                           misses="zero")
            with sensim.LockStep(c, depth=4) as sim:
                out = []
                for k in range(1, 6):
                    poses = make(base + [k * 0.1, 0, 0, 0, 0, 0, 0])
                    vel = np.broadcast_to(np.array([1.0, 0, 0, 0, 0, 0.2]), (n, 6))
                    out += sim.submit(k * DT, body_ids=np.arange(1, n + 1)[::-1][::-1],
                                      body_poses=poses, body_velocities=vel)
                out += sim.drain()
            results[name] = [(o.time, o.kind, o.value.tobytes() if o.kind == "point_cloud"
                              else tuple(o.value.values.tolist()))
                             for r in out for outs in r.outputs.values() for o in outs]
    assert results["contiguous"]
    for name in layouts:
        assert results[name] == results["contiguous"], name


def test_lockstep_refused_step_names_its_time_and_the_helper_goes_on(sensimd):
    with sensimd.client() as c:
        vehicle(c)
        with sensim.LockStep(c, depth=6) as sim:
            got = []
            for k in range(1, 5):
                got += sim.submit(k * DT, **state(k * DT))
            # a time that does not increase: the daemon refuses this state (and its step)
            got += sim.submit(3.5 * DT, **state(3.5 * DT))
            for k in range(5, 8):
                got += sim.submit(k * DT, **state(k * DT))
            with pytest.raises(errors.FailedPrecondition, match=r"update_state at t = 0\.0035"):
                got += sim.drain()
            # the steps after the refused one were answered; they come with the next call
            got += sim.drain()
            assert [round(r.time / DT) for r in got] == [1, 2, 3, 4, 5, 6, 7]
            assert sim.refused == 1 and sim.in_flight == 0
            # usable again: the next steps go on from 7 ms
            more = list(sim.run([8 * DT, 9 * DT], state))
            assert [r.step for r in more] == [8, 9]
        # the connection is in order: a plain request is answered as usual
        assert c.ping(b"x").payload == b"x"


def test_lockstep_daemon_gone_raises_instead_of_hanging(tmp_path):
    d = Daemon(log_dir=tmp_path)
    try:
        with d.client(timeout=5.0) as c:
            vehicle(c)
            sim = sensim.LockStep(c, depth=4)
            for k in range(1, 4):
                sim.submit(k * DT, **state(k * DT))
            d.proc.kill()
            d.proc.wait()
            start = time.monotonic()
            with pytest.raises(errors.TransportError):
                for k in range(4, 1000):
                    sim.submit(k * DT, **state(k * DT))
                sim.drain()
            assert time.monotonic() - start < 5.0
            assert sim.in_flight == 0
    finally:
        with pytest.raises(DaemonError):
            d.close()  # killed: not a clean exit, as expected


def test_lockstep_daemon_that_stops_answering_times_out(sensimd):
    with sensimd.client(timeout=1.0) as c:
        vehicle(c)
        sim = sensim.LockStep(c, depth=2)
        sim.submit(DT, **state(DT))
        os.kill(sensimd.proc.pid, signal.SIGSTOP)
        try:
            start = time.monotonic()
            with pytest.raises(errors.Timeout):
                for k in range(2, 10):
                    sim.submit(k * DT, **state(k * DT))
            assert time.monotonic() - start < 4.0
        finally:
            os.kill(sensimd.proc.pid, signal.SIGCONT)


def test_lockstep_step_message_and_bad_arguments(sensimd):
    assert not _step_message(1.0, None).HasField("outputs")
    assert not _step_message(1.0, "all").HasField("outputs")
    assert _step_message(1.0, "none").outputs == sensim.pb.STEP_OUTPUTS_NONE
    assert _step_message(1.0, []).outputs == sensim.pb.STEP_OUTPUTS_NONE
    msg = _step_message(1.0, [5, 7])
    assert msg.outputs == sensim.pb.STEP_OUTPUTS_LISTED and list(msg.output_sensors) == [5, 7]
    with pytest.raises(ValueError, match="outputs"):
        _step_message(1.0, "some")
    with pytest.raises(ValueError, match="outputs"):
        _step_message(1.0, [0])
    with sensimd.client() as c:
        with pytest.raises(ValueError, match="depth"):
            sensim.LockStep(c, depth=0)
        sim = sensim.LockStep(c)
        with pytest.raises(ValueError, match="body_poses"):
            sim.submit(DT, body_ids=[1], body_poses=[[0, 0, 0]])
        assert sim.in_flight == 0        # nothing was sent
        assert c.ping().payload == b""
