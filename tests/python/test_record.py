# SPDX-License-Identifier: MIT
"""sensimd --record and python -m sensim.replay: a recording of two clients (a controller
stepping a noisy lidar and a noisy IMU, an observer subscribed to both) played against fresh
daemons at 1 and 2 worker threads gives the very outputs of the original run (the hashes the
original clients computed from what they received); the file holds no token; the recording is
bounded (a size limit, a full disk) without harming the daemon."""

from __future__ import annotations

import math
import struct
import subprocess
import sys

import numpy as np

from sensim import replay as rp
from sensim.client import pb
from sensim.testing import Daemon, find_sensimd

TOKEN = "s3cret-token-value"


def _scenario(daemon, hasher: rp.Hasher) -> None:
    """The original run: the hashes of what its clients receive, keyed as replay keys them."""
    with daemon.client(environment="noisy", token=TOKEN) as c:
        c.set_environment(seed=77)
        c.create_primitive(1, "box", half_extents=(0.5, 6, 3))
        c.create_object(1, 1, local_pose=(7, 0, 0))
        c.create_primitive(2, "plane", half_size=50.0)
        c.create_object(2, 2)
        c.create_body(1, (0, 0, 0, 0, 0, 0, 1))
        c.create_lidar(5, body_id=1, mount=(0, 0, 1.2), vlp16={"frequency": 20.0},
                       publish="per_step", distance_noise={"stddev_base": 0.02},
                       angle_noise={"axis": pb.NOISE_AXIS_AZIMUTH, "stddev": 0.002})
        c.create_imu(6, body_id=1, accelerometer={"chain": {"noiseStddev": {"x": 0.05, "y": 0.05,
                                                                           "z": 0.05}}},
                     gyroscope={"chain": {"noiseStddev": {"x": 0.01, "y": 0.01, "z": 0.01}}})
        with daemon.client(environment="noisy", token=TOKEN, role="observer",
                           client_name="watcher") as obs:
            obs.subscribe(5)
            obs.subscribe(6)
            got = {5: 0, 6: 0}
            for k in range(12):
                t = 0.025 * k
                a = 0.3 * t
                c.update_state(t, [1], [[math.cos(a), math.sin(a), 0, 0, 0,
                                         math.sin(a / 2), math.cos(a / 2)]])
                done = c.step(t)
                for out in done.outputs:
                    hasher.add_sensor_data("noisy/step", out)
                    got[out.sensor_id] += 1
            ray = pb.Raycast(origins=[0, 0, 1, 0, 0, 2], directions=[1, 0, 0, 1, 0.1, 0])
            hasher.add("conn1/raycast", c._call("raycast", ray, "raycast_result"))
            # every record the steps gave, pushed to the observer
            seen = {5: 0, 6: 0}
            while seen != got:
                data = obs.next_sensor_data(timeout=30.0)
                assert data is not None, f"pushed records missing: {seen} of {got}"
                seen[data.sensor_id] += 1
                hasher.add_sensor_data("conn2/pushed", data)


def test_replay_gives_the_recorded_outputs_at_any_thread_count(sensimd_factory, tmp_path):
    rec = tmp_path / "run.sensimrec"
    original = rp.Hasher()
    d = sensimd_factory("--record", str(rec), "--token", TOKEN)
    _scenario(d, original)
    d.close()
    data = rec.read_bytes()
    assert data[:8] == b"SENSIMRC" and struct.unpack_from("<I", data, 8)[0] == 1
    assert TOKEN.encode() not in data                     # the token is never written
    kinds = [r[0] for r in rp.read_recording(str(rec))]
    assert kinds.count(rp.HELLO) == 2 and kinds.count(rp.CLOSE) == 2
    assert kinds.count(rp.REQUEST) == 8 + 2 + 2 * 12 + 1

    want = original.lines()
    assert len(want) == 5, want       # steps of 5 and 6, pushed 5 and 6, raycast
    assert all(int(line.split()[1]) > 0 for line in want)
    for threads in ("1", "2", "2"):
        r = sensimd_factory("--threads", threads, "--token", TOKEN)
        got = rp.replay(str(rec), "127.0.0.1", r.port, token=TOKEN)
        assert got.lines() == want, threads
        r.close()

    # the command line: --save, then --compare against it; a changed seed is caught
    r = sensimd_factory("--token", TOKEN)
    saved = tmp_path / "hashes.txt"
    run = [sys.executable, "-m", "sensim.replay", str(rec), "--connect", f"127.0.0.1:{r.port}",
           "--token", TOKEN]
    p = subprocess.run(run + ["--save", str(saved)], capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr
    assert saved.read_text().splitlines() == want == p.stdout.splitlines()
    p = subprocess.run(run + ["--compare", str(saved)], capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr
    bad = tmp_path / "bad.txt"
    bad.write_text(saved.read_text().replace(want[0].split()[2], "0" * 64))
    p = subprocess.run(run + ["--compare", str(bad)], capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 1 and "differ" in p.stderr


def test_recording_is_bounded_and_never_stops_the_daemon(sensimd_factory, tmp_path):
    rec = tmp_path / "small.sensimrec"
    d = sensimd_factory("--record", str(rec), "--record-max-bytes", "4096")
    with d.client(environment="b") as c:
        verts = np.zeros((100, 3), np.float32)
        verts[:, 0] = np.arange(100)
        verts[:, 1] = np.arange(100) % 7
        tris = np.array([[i, i + 1, i + 2] for i in range(98)], np.uint32)
        c.create_mesh(1, verts, tris)        # about 2.4 kB: still recorded
        c.create_mesh(2, verts, tris)        # past 4096 bytes: recording stops here
        c.create_primitive(3, "sphere", radius=1.0)
        assert c.get_info().server_version   # the daemon goes on
    d.close()
    size = rec.stat().st_size
    assert size <= 4096
    records = list(rp.read_recording(str(rec)))
    assert [r[0] for r in records] == [rp.HELLO, rp.REQUEST, rp.END]
    assert "--record-max-bytes" in d.stderr()

    # a full disk at start: refused, naming it
    p = subprocess.run([str(find_sensimd()), "--record", "/dev/full"], capture_output=True,
                       text=True, timeout=30)
    assert p.returncode != 0 and "--record /dev/full" in p.stderr
    assert "No space left" in p.stderr

    # the disk fills while recording (a 64 KiB file size limit): the daemon logs it once and
    # serves on
    wrapper = tmp_path / "limited.sh"
    wrapper.write_text(f'#!/bin/sh\nulimit -f 64\nexec "{find_sensimd()}" "$@"\n')
    wrapper.chmod(0o755)
    d = Daemon(["--record", str(tmp_path / "full.sensimrec")], executable=wrapper,
               log_dir=tmp_path, name="limited")
    try:
        with d.client() as c:
            blob = np.zeros((3000, 3), np.float32)
            blob[:, 0] = np.arange(3000)
            tris = np.array([[i, i + 1, i + 2] for i in range(2998)], np.uint32)
            for i in range(1, 20):      # 72 kB a request: past the limit at the second MiB
                c.create_mesh(i, blob, tris)
        with d.client() as c:
            c.create_primitive(100, "sphere", radius=1.0)
            assert c.get_info().server_version
    finally:
        d.close()                        # exit status 0
    log = d.stderr()
    assert log.count("recording stopped") == 1, log
    assert "File too large" in log

    # a file that cannot be created refuses to start, naming it
    p = subprocess.run([str(find_sensimd()), "--record", str(tmp_path / "no" / "such")],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode != 0 and "--record" in p.stderr
