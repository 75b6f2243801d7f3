# SPDX-License-Identifier: MIT
"""Sensors sharded over three real daemons through sensim.ShardedClient (docs/sharding.md):
six lidars and two IMUs with noise give bit-identical records to the same scenario on one
daemon with the same seed, whatever the placement and the daemons' thread counts; listed outputs, raycasts and subscriptions
come from the owning shards; a killed or frozen shard is named within the client's timeout; a
restarted shard is rejoined by ShardedClient.rejoin, which re-sends the scene."""

from __future__ import annotations

import signal
import time

import numpy as np
import pytest

from sensim import ShardedClient, StepDone, errors, shard_for
from sensim.client import point_cloud_to_numpy
from sensim.testing import Daemon, DaemonError
from test_bulk_arrays import _bytes_raycast

ROOM = 20.0                       # radius of the sphere around everything, m
LIDARS = [11, 12, 13, 14, 15, 16]
IMUS = [21, 22]
SMALL = {"frequency": 10.0, "columns": 128,
         "channel_elevations": [-0.3 + 0.04 * i for i in range(8)]}
BALANCED = {11: 0, 12: 1, 13: 2, 14: 0, 15: 1, 16: 2, 21: 0, 22: 1}


def build(c):
    """The scenario: a room (sphere), two boxes, a moving body carrying six noisy lidars and
    two noisy IMUs; seed 7."""
    c.set_environment(seed=7)
    c.set_ambient("custom", return_probability_scaling=0.0)
    c.set_material(3, "lambertian", reflectance=0.6)
    c.create_primitive(1, "sphere", radius=ROOM)
    c.create_primitive(2, "box", half_extents=(1.0, 2.0, 0.5))
    c.create_object(1, geometry_id=1)
    c.create_object(2, geometry_id=2, local_pose=(4.0, 0.0, 0.0), material_id=3, label=9)
    c.create_object(3, geometry_id=2, local_pose=(-3.0, 5.0, 1.0), label=8)
    c.create_body(1, (0.0, 0.0, 1.0))
    for k, sid in enumerate(LIDARS):
        yaw = k * np.pi / 3
        c.create_lidar(sid, body_id=1, spinning=SMALL, frame="world",
                       mount=(0.1 * k, 0.0, 0.2, 0.0, 0.0, np.sin(yaw / 2), np.cos(yaw / 2)),
                       distance_noise={"stddev_base": 0.02})
    for sid in IMUS:
        c.create_imu(sid, body_id=1, sample_rate=200.0,
                     accelerometer={"chain": {"noiseStddev": {"x": 0.1, "y": 0.1, "z": 0.1}}},
                     gyroscope={"chain": {"noiseStddev": {"x": 0.01, "y": 0.01, "z": 0.01}}})


def pose(t):
    """The body's pose at t: moving along x and turning."""
    yaw = 0.5 * t
    return [[0.5 * t, 0.2 * t, 1.0, 0.0, 0.0, np.sin(yaw / 2), np.cos(yaw / 2)]]


def run(c, steps, outputs="all", t0=0.0, dt=0.05):
    """update_state + step for `steps` steps after the first state at t0; the StepDones."""
    done = []
    if t0 == 0.0:
        c.update_state(0.0, [1], pose(0.0))
    for k in range(1, steps + 1):
        t = t0 + k * dt
        c.update_state(t, [1], pose(t), [[0.5, 0.2, 0.0, 0.0, 0.0, 0.5]])
        done.append(c.step(t, outputs))
    return done


def records(done):
    """(sensor id, serialized record) of every output of every step, in order."""
    return [[(d.sensor_id, d.SerializeToString()) for d in s.outputs] for s in done]


def payload(d):
    """What a record says: its time and its payload's bytes."""
    return d.time, getattr(d, d.WhichOneof("payload")).SerializeToString()


def addresses(daemons):
    return [f"127.0.0.1:{d.port}" for d in daemons]


@pytest.mark.parametrize("placement", [BALANCED, None], ids=["explicit", "hash"])
def test_three_shards_give_the_records_of_one_daemon(sensimd_factory, placement):
    # the shards' thread counts differ from each other and from the single daemon's
    one = sensimd_factory("--threads", "2")
    three = [sensimd_factory("--threads", str(n)) for n in (1, 3, 2)]
    with one.client() as c, ShardedClient(addresses(three), placement=placement) as sc:
        build(c)
        build(sc)
        expect = {s: (BALANCED[s] if placement else shard_for(s, 3)) for s in LIDARS + IMUS}
        assert sc.sensors == expect
        # each daemon holds the whole scene and only its own sensors
        for i, info in enumerate(sc.get_info()):
            env = next(e for e in info.environments if e.name == "default")
            assert (env.objects, env.bodies) == (3, 1)
            assert env.sensors == sum(1 for s in expect.values() if s == i)

        want = run(c, 6)
        got = run(sc, 6)
        assert records(got) == records(want)
        assert [s.step for s in got] == [s.step for s in want]
        # not vacuous: every sensor spoke, the lidars saw the room with noise
        ids = {sid for s in got for sid, _ in records([s])[0]}
        assert ids == set(LIDARS + IMUS)
        cloud = point_cloud_to_numpy(next(d for s in got for d in s.outputs
                                          if d.sensor_id == 13).point_cloud)
        assert len(cloud) > 100

        # listed outputs: each shard is asked for its own; the same records as one daemon
        pick = [16, 21, 11, 14]
        want = run(c, 3, pick, t0=0.3)
        got = run(sc, 3, pick, t0=0.3)
        assert records(got) == records(want)
        assert {sid for s in got for sid, _ in records([s])[0]} <= set(pick)
        assert len(run(sc, 1, "none", t0=0.45)[0].outputs) == 0
        run(c, 1, "none", t0=0.45)

        # raycasts split across the shards: the hits of one daemon, byte for byte
        rng = np.random.default_rng(3)
        n = 20000
        origins = rng.uniform(-2, 2, (n, 3))
        dirs = rng.normal(size=(n, 3))
        hits = sc.raycast(origins, dirs)
        ref = c.raycast(origins, dirs)
        assert hits.tobytes() == np.asarray(ref).tobytes()
        assert np.isfinite(hits.distances).all()            # inside the room
        assert set(np.unique(hits.object_ids)) == {1, 2, 3}
        small = sc.raycast(origins[:10], dirs[:10])
        assert small.tobytes() == np.asarray(c.raycast(origins[:10], dirs[:10])).tobytes()
        # one origin for every ray (given, or found equal): the same hits as sent per ray
        at = origins[0]
        per_ray = _bytes_raycast(c, np.tile(at, (n, 1)), dirs).hits_bytes   # Google's protobuf
        assert sc.raycast(at, dirs).tobytes() == per_ray
        assert sc.raycast(np.tile(at, (n, 1)), dirs).tobytes() == per_ray


def test_one_shard_steps_like_a_client(sensimd_factory):
    # a list of one address is a valid cluster: its steps are the typed StepDone of a Client
    one, other = sensimd_factory(), sensimd_factory()
    with one.client() as c, ShardedClient(addresses([other])) as sc:
        build(c)
        build(sc)
        want, got = run(c, 2), run(sc, 2)
        assert [type(s) for s in got] == [StepDone, StepDone]
        assert records(got) == records(want)
        assert sorted(got[-1].by_sensor()) == sorted(LIDARS + IMUS)
        assert got[-1][21] and all(o.sensor_id == 21 for o in got[-1][21])


def test_subscriptions_come_from_the_owning_shards(sensimd_factory):
    three = [sensimd_factory() for _ in range(3)]
    with ShardedClient(addresses(three), placement=BALANCED) as sc:
        build(sc)
        for s in LIDARS + IMUS:
            sc.subscribe(s)
        done = run(sc, 2)
        want = {(d.sensor_id, d.frame): payload(d) for s in done for d in s.outputs}
        pushed = {}
        while len(pushed) < len(want):
            d = sc.next_sensor_data(timeout=30)
            assert d is not None, f"pushed {sorted(pushed)} of {sorted(want)}"
            pushed[(d.sensor_id, d.frame)] = payload(d)
        assert pushed == want
        assert sc.next_sensor_data(timeout=0.2) is None


def test_bad_input_is_refused_before_any_shard_changes(sensimd_factory):
    three = [sensimd_factory() for _ in range(3)]
    with pytest.raises(ValueError, match="address"):
        ShardedClient(["127.0.0.1:notaport"])
    with ShardedClient(addresses(three), placement={11: 3}) as sc:
        build_scene_only = sc.create_primitive
        build_scene_only(1, "sphere", radius=ROOM)
        with pytest.raises(ValueError, match=r"placement: sensor 11 -> 3 .*\[0, 3\)"):
            sc.create_lidar(11, spinning=SMALL)
        assert sc.sensors == {}
        sc.create_imu(21, accelerometer=True)
        sc.update_state(0.0)
        sc.step(0.0)
        with pytest.raises(ValueError, match=r"output_sensors\[1\] = 99"):
            sc.step(0.1, [21, 99])
        with pytest.raises(ValueError, match="body_poses"):
            sc.update_state(0.1, [1], [[0.0] * 6])
        # nothing moved: every shard is still at the first step and takes the next
        infos = [next(e for e in i.environments if e.name == "default") for i in sc.get_info()]
        assert [(e.steps, e.time) for e in infos] == [(1, 0.0)] * 3
        sc.update_state(0.1)
        assert [d.sensor_id for d in sc.step(0.1, [21]).outputs] == [21]


def test_a_request_over_the_frame_length_prefix_is_refused_before_sending(sensimd_factory,
                                                                          monkeypatch):
    """A fanned-out request longer than the u32 length prefix can say (4 GiB; made small here)
    raises ValueError naming it even when no shard told its limits, sends nothing, and leaves
    every connection usable."""
    from sensim import _framing
    three = [sensimd_factory() for _ in range(3)]
    with ShardedClient(addresses(three)) as sc:
        sc.create_primitive(1, "sphere", radius=ROOM)
        # as from daemons that did not say their limits
        monkeypatch.setattr(type(sc.shards[0]), "limits", property(lambda self: None))
        poses = np.tile([0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0], (100, 1))
        monkeypatch.setattr(_framing, "MAX_LENGTH", 2000)
        with pytest.raises(ValueError, match=r"update_state: request of \d+ bytes does not fit"):
            sc.update_state(0.0, list(range(1, 101)), poses)
        monkeypatch.undo()
        infos = [next(e for e in i.environments if e.name == "default") for i in sc.get_info()]
        assert [e.steps for e in infos] == [0] * 3
        sc.update_state(0.0)
        sc.step(0.0)
        infos = [next(e for e in i.environments if e.name == "default") for i in sc.get_info()]
        assert [e.steps for e in infos] == [1] * 3


def test_jump_hash_moves_only_to_the_new_shard_and_balances():
    ids = range(1, 30001)
    for n in (1, 2, 3, 5, 8):
        before = [shard_for(i, n) for i in ids]
        after = [shard_for(i, n + 1) for i in ids]
        moved = [a for b, a in zip(before, after) if a != b]
        assert set(moved) <= {n}                       # only onto the new shard
        assert abs(len(moved) / len(ids) - 1 / (n + 1)) < 0.02
        counts = np.bincount(after, minlength=n + 1) / len(ids)
        assert np.all(np.abs(counts - 1 / (n + 1)) < 0.02)


def _discard(d):
    """Release a daemon this test killed (its exit code is not 0 by design)."""
    try:
        d.close()
    except DaemonError:
        pass


def test_killed_shard_is_named_within_the_timeout():
    daemons = [Daemon() for _ in range(3)]
    try:
        with ShardedClient(addresses(daemons), placement=BALANCED, timeout=3.0) as sc:
            build(sc)
            run(sc, 2)
            daemons[1].kill()
            start = time.monotonic()
            with pytest.raises(errors.ConnectionClosed) as err:
                sc.update_state(0.15, [1], pose(0.15))
                sc.step(0.15)
            assert time.monotonic() - start < 3.0
            assert f"shard 1 (127.0.0.1:{daemons[1].port})" in str(err.value)
            assert err.value.shard == 1
            assert "accepted it" in str(err.value)      # shards 0 and 2 are ahead now
    finally:
        for d in daemons:
            _discard(d)


def test_frozen_shard_times_out_once_for_all_shards():
    daemons = [Daemon() for _ in range(3)]
    try:
        with ShardedClient(addresses(daemons), placement=BALANCED, timeout=2.0) as sc:
            build(sc)
            run(sc, 1)
            daemons[0].proc.send_signal(signal.SIGSTOP)
            daemons[2].proc.send_signal(signal.SIGSTOP)
            start = time.monotonic()
            with pytest.raises(errors.Timeout) as err:
                sc.update_state(0.1, [1], pose(0.1))
            elapsed = time.monotonic() - start
            # one deadline for the fan-out: not one timeout per frozen shard
            assert 2.0 <= elapsed < 4.0
            assert str(err.value).startswith(f"ETIMEDOUT: shard 0 (127.0.0.1:{daemons[0].port})")
            assert f"also shard 2 (127.0.0.1:{daemons[2].port})" in str(err.value)
            assert sorted(err.value.failures) == [0, 2]
    finally:
        for d in daemons:
            if d.running:
                d.proc.send_signal(signal.SIGCONT)
            _discard(d)


def test_restarted_shard_is_rejoined_by_resending_the_scene(sensimd_factory):
    one = sensimd_factory()
    daemons = [Daemon() for _ in range(3)]
    try:
        with one.client() as c, ShardedClient(addresses(daemons), placement=BALANCED,
                                               timeout=10.0) as sc:
            build(c)
            build(sc)
            run(c, 3)
            run(sc, 3)
            port = daemons[2].port
            daemons[2].kill()
            daemons[2] = Daemon(["--listen", f"127.0.0.1:{port}"])
            assert daemons[2].port == port
            # without rejoin: the old connection is gone, and the error says which
            with pytest.raises(errors.ConnectionClosed, match=f"shard 2 \\(127.0.0.1:{port}\\)"):
                sc.update_state(0.2, [1], pose(0.2))
            sc.rejoin(2)
            # the last state that succeeded everywhere was re-sent: the new daemon is at 0.15
            env = next(e for e in sc.get_info()[2].environments if e.name == "default")
            assert env.HasField("time") and env.time == 3 * 0.05
            # the other shards took t = 0.2 before the failure: resume after it
            want = run(c, 3, t0=0.2)
            got = run(sc, 3, t0=0.2)
            got += run(sc, 1, t0=0.35)
            # the untouched shards' records: bit-identical to one daemon's
            for s_got, s_want in zip(got, want):
                kept = [d.SerializeToString() for d in s_got.outputs if BALANCED[d.sensor_id] != 2]
                assert kept == [d.SerializeToString() for d in s_want.outputs
                                if BALANCED[d.sensor_id] != 2]
            # the rejoined shard's lidars (13, 16) see the re-sent room: world-frame points on
            # the sphere (most) or the boxes, never beyond
            for sid in (13, 16):
                clouds = [point_cloud_to_numpy(d.point_cloud) for s in got for d in s.outputs
                          if d.sensor_id == sid]
                assert clouds and sum(len(p) for p in clouds) > 100
                for p in clouds:
                    r = np.sqrt(p["x"].astype(float) ** 2 + p["y"] ** 2 + p["z"] ** 2)
                    assert r.max() < ROOM + 0.2
                    assert np.mean(np.abs(r - ROOM) < 0.2) > 0.5
            info = next(e for e in sc.get_info()[2].environments if e.name == "default")
            assert (info.objects, info.bodies, info.sensors) == (3, 1, 2)
    finally:
        for d in daemons:
            _discard(d)
