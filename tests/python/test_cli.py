# SPDX-License-Identifier: MIT
"""The command line against the real daemon: `python -m sensim` info, ping, record (while a
controller steps a vehicle), export and plot; what record wrote is what the controller's
steps produced, read back by rosbag and Open3D; SIGTERM ends a recording with whole files;
errors exit 1 naming the problem."""

from __future__ import annotations

import json
import os
import pathlib
import re
import selectors
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import sensim
from sensim.recording import open_recording

DT = 0.005


def cli(*args, timeout=120, check=True):
    out = subprocess.run([sys.executable, "-m", "sensim", *map(str, args)],
                         capture_output=True, text=True, timeout=timeout)
    if check:
        assert out.returncode == 0, out.stderr
    return out


def start_record(*args):
    return subprocess.Popen([sys.executable, "-m", "sensim", "record", *map(str, args)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def drive(c, steps, t0=0.0):
    """A vehicle with an OS1-16 (5) and an IMU (7) driving past a box; returns every output
    of its steps (decoded), stepped through the lock-step helper."""
    if t0 == 0.0:
        c.set_ambient("custom", return_probability_scaling=0.0)
        c.create_primitive(1, "plane")
        c.create_object(1, 1)
        c.create_primitive(2, "box", half_extents=(1, 1, 1))
        c.create_object(2, 2, local_pose=((8, 3, 1), None))
        c.create_body(1, pose=((0, 0, 0.5), None))
        c.create_lidar(5, body_id=1, mount=((0, 0, 1.5), None), preset="os1-16-512",
                       misses="nan")
        c.create_imu(7, body_id=1, accelerometer=True, gyroscope=True, sample_rate=400.0)
    outs = []
    with sensim.LockStep(c, depth=4) as sim:
        for k in range(1, steps + 1):
            t = t0 + k * DT
            for r in sim.submit(t, body_ids=[1], body_poses=[[2 * t, 0, 0.5, 0, 0, 0, 1]],
                                body_velocities=[[2, 0, 0, 0, 0, 0]]):
                outs += [o for v in r.outputs.values() for o in v]
        for r in sim.drain():
            outs += [o for v in r.outputs.values() for o in v]
    return outs


def test_cli_info_and_ping(sensimd):
    with sensimd.client(environment="yard") as c:
        c.create_imu(7, accelerometer=True)
        c.update_state(0.0)
        out = cli("info", "--port", sensimd.port, "-e", "yard").stdout
        assert re.search(r"^sensimd \d+\.\d+\.\d+ \(protocol 1\)", out)
        assert re.search(r"^  yard: 2 clients, 1 sensors, .*0 steps, t = 0\.000000 s$", out,
                         re.M)
        assert "counters:" in out and re.search(r"^  steps = 0$", out, re.M)
        info = json.loads(cli("info", "--port", sensimd.port, "--json").stdout)
        assert {e["name"] for e in info["environments"]} >= {"yard", "default"}
        assert info["server_version"] == c.server_version
    out = cli("ping", "--port", sensimd.port, "-n", 50, "--size", 100).stdout
    m = re.fullmatch(r"50 pings of 100 B to 127\.0\.0\.1:\d+: round trip min ([\d.]+) median "
                     r"([\d.]+) mean ([\d.]+) p99 ([\d.]+) max ([\d.]+) us\n", out)
    assert m, out
    lo, med, _, p99, hi = (float(x) for x in m.groups())
    assert 0 < lo <= med <= p99 <= hi


def test_cli_record_export_plot(sensimd, tmp_path):
    rec = start_record("--port", sensimd.port, "-e", "drive", "-s", 5, "-s", 7,
                       "-o", tmp_path / "run.srec", "--bag", tmp_path / "run.bag",
                       "--pcd", tmp_path / "pcd", "--csv", tmp_path / "csv",
                       "--namespace", "5=/os1", "--frame-id", "5=os_sensor",
                       "--idle", 2, "--wait", 20)
    try:
        with sensimd.client(environment="drive") as c:
            # the recorder subscribes as soon as the sensors exist; the steps come after
            drive_setup_and_wait(c, sensimd)
            outs = drive(c, 60, t0=DT)
        stdout, stderr = rec.communicate(timeout=60)
    finally:
        rec.kill()
    assert rec.returncode == 0, stderr
    clouds = [o for o in outs if o.kind == "point_cloud"]
    imus = [o for o in outs if o.kind == "imu"]
    assert len(clouds) == 3 and len(imus) == 120        # 0.3 s at 10 Hz and 400 Hz
    assert f"recorded {len(outs)} records" in stdout
    assert "stopped: nothing received for 2.0 s" in stdout
    assert re.search(rf"sensor 5: 3 records \({3 * 16 * 512} points\)", stdout)
    # the recording holds exactly what the steps produced
    got = list(open_recording(tmp_path / "run.srec").outputs())
    for sid in (5, 7):
        a = [o for o in got if o.sensor_id == sid]
        b = [o for o in outs if o.sensor_id == sid]
        assert [(o.frame, o.time) for o in a] == [(o.frame, o.time) for o in b]
        for x, y in zip(a, b):
            if x.kind == "point_cloud":
                assert x.value.tobytes() == y.value.tobytes()
            else:
                np.testing.assert_array_equal(x.value.acceleration, y.value.acceleration)
    # the bag, read by rosbag
    import rosbag
    with rosbag.Bag(str(tmp_path / "run.bag")) as bag:
        counts = bag.get_type_and_topic_info().topics
        assert counts["/os1/points"].message_count == 3
        assert counts["/sensim/sensor_7/data"].message_count == 120
        _, m, _ = next(bag.read_messages(topics=["/os1/points"]))
        assert m.header.frame_id == "os_sensor" and m.width * m.height == 16 * 512
    # the PCD files, read by Open3D
    import open3d as o3d
    files = sorted(os.listdir(tmp_path / "pcd"))
    assert files == [f"sensor5_{f:06d}.pcd" for f in range(3)]
    pc = o3d.io.read_point_cloud(str(tmp_path / "pcd" / files[0]), remove_nan_points=False)
    np.testing.assert_array_equal(np.asarray(pc.points)[:, 2], clouds[0].value["z"])
    assert len((tmp_path / "csv" / "sensor7.csv").read_text().splitlines()) == 121

    # export: the same files from the recording
    out = cli("export", tmp_path / "run.srec", "-f", "pcd", "-o", tmp_path / "exp")
    assert out.stdout.split() == [str(tmp_path / "exp" / f) for f in files]
    for f in files:
        assert (tmp_path / "exp" / f).read_bytes() == (tmp_path / "pcd" / f).read_bytes()
    cli("export", tmp_path / "run.srec", "-f", "csv", "-o", tmp_path / "exp")
    assert (tmp_path / "exp" / "sensor7.csv").read_text() == \
        (tmp_path / "csv" / "sensor7.csv").read_text()
    for fmt in ("ply", "xyz"):
        out = cli("export", tmp_path / "run.srec", "-f", fmt, "-s", 5, "-o", tmp_path / fmt)
        assert len(out.stdout.split()) == 3
        pc = o3d.io.read_point_cloud(str(tmp_path / fmt / f"sensor5_000002.{fmt}"),
                                     format=fmt)
        assert len(pc.points) == 16 * 512          # misses: NaN in PLY, 0 0 0 in XYZ

    # plot: the last cloud from above, from the side, as a range image; the IMU series
    out = cli("plot", tmp_path / "run.srec", "-o", tmp_path / "png")
    from PIL import Image
    pngs = out.stdout.split()
    assert [os.path.basename(p) for p in pngs] == [
        "sensor5_000002_top.png", "sensor5_000002_side.png", "sensor5_000002_range.png",
        "sensor7_imu.png"]
    for p in pngs:
        assert Image.open(p).format == "PNG"

    # export and plot of the bag: the same files (the lidar's topic /os1/points, frame
    # os_sensor, names no sensor: it is given the first free id, 1)
    out = cli("export", tmp_path / "run.bag", "-f", "pcd", "-o", tmp_path / "bagpcd")
    assert "/os1/points -> sensor 1, /sensim/sensor_7/data -> sensor 7" in out.stderr
    for k, f in enumerate(files):
        assert (tmp_path / "bagpcd" / f"sensor1_{k:06d}.pcd").read_bytes() == \
            (tmp_path / "pcd" / f).read_bytes()
    cli("export", tmp_path / "run.bag", "-f", "csv", "-o", tmp_path / "bagcsv")
    a = np.genfromtxt(tmp_path / "bagcsv" / "sensor7.csv", delimiter=",", skip_header=1)
    b = np.genfromtxt(tmp_path / "csv" / "sensor7.csv", delimiter=",", skip_header=1)
    np.testing.assert_allclose(a[:, 0], b[:, 0], rtol=0, atol=1e-9)     # ROS time: ns
    np.testing.assert_array_equal(a[:, 1:], b[:, 1:])
    out = cli("plot", tmp_path / "run.bag", "-o", tmp_path / "bagpng")
    assert [os.path.basename(p) for p in out.stdout.split()] == [
        "sensor1_000002_top.png", "sensor1_000002_side.png", "sensor1_000002_range.png",
        "sensor7_imu.png"]
    assert np.array_equal(     # the range image has no title naming the sensor
        np.asarray(Image.open(tmp_path / "bagpng" / "sensor1_000002_range.png")),
        np.asarray(Image.open(tmp_path / "png" / "sensor5_000002_range.png")))


def wait_recorded(rec, n: int, timeout: float = 300.0) -> None:
    """Wait until `sensim record`'s progress line (on stderr, every 5 s when not a terminal)
    counts n records."""
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as sel:
        sel.register(rec.stderr, selectors.EVENT_READ)
        while True:
            left = deadline - time.monotonic()
            assert left > 0, f"the recorder did not report {n} records within {timeout} s"
            if sel.select(left):
                line = rec.stderr.readline()
                assert line, "the recorder's stderr ended"
                if line.startswith(f"recording: {n} records"):
                    return


def drive_setup_and_wait(c, d):
    """Create the scene (its first step at DT) and wait until the recorder subscribed."""
    drive(c, 1)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        subs = [s for s in c.get_info().subscribers if s.environment == "drive"]
        if len(subs) == 2:
            return
        time.sleep(0.05)
    raise AssertionError("the recorder did not subscribe")


def test_cli_record_sigterm_closes_whole_files(sensimd, tmp_path):
    with sensimd.client() as c:
        drive(c, 1)
        rec = start_record("--port", sensimd.port, "-s", 5, "-s", 7, "--bag",
                           tmp_path / "run.bag", "-o", tmp_path / "run.srec", "--idle", 0)
        try:
            deadline = time.monotonic() + 20
            while len(c.get_info().subscribers) < 2 and time.monotonic() < deadline:
                time.sleep(0.05)
            outs = drive(c, 30, t0=DT)
            # the last steps' records are on their way: wait until the recorder has them all
            # (what the daemon has sent may still be in the sockets, or read and not yet
            # written, for longer than the recorder's drain after SIGTERM)
            want = len(outs)
            wait_recorded(rec, want)
            rec.send_signal(signal.SIGTERM)
            stdout, stderr = rec.communicate(timeout=30)
        finally:
            rec.kill()
    assert rec.returncode == 0, stderr
    assert "stopped: stopped" in stdout and f"recorded {want} records" in stdout
    import rosbag
    with rosbag.Bag(str(tmp_path / "run.bag")) as bag:    # indexed: closed properly
        assert bag.get_message_count() == want
    assert sum(1 for _ in open_recording(tmp_path / "run.srec").messages()) == want


def test_cli_errors_exit_1_naming_the_problem(sensimd, tmp_path):
    import socket
    with socket.socket() as s:
        # bound, not listening: connections are refused, and while it is open no daemon of a
        # test running in parallel can take the port
        s.bind(("127.0.0.1", 0))
        free = s.getsockname()[1]
        out = cli("info", "--port", free, check=False)
    assert out.returncode == 1 and f"cannot connect to 127.0.0.1:{free}" in out.stderr
    (tmp_path / "junk.srec").write_bytes(b"not a recording")
    out = cli("export", tmp_path / "junk.srec", "-f", "pcd", "-o", tmp_path / "x", check=False)
    assert out.returncode == 1 and "not a sensim recording" in out.stderr
    out = cli("record", "--port", sensimd.port, "-s", 99, "-o", tmp_path / "r.srec",
              "--wait", 0.2, check=False)
    assert out.returncode == 1 and "subscribe.sensor_id = 99: no such sensor" in out.stderr
    out = cli("record", "--port", sensimd.port, "-s", 5, check=False)
    assert out.returncode == 1 and "nothing to write" in out.stderr
    out = cli("ping", "--port", sensimd.port, "-n", 0, check=False)
    assert out.returncode == 1 and "--count must be at least 1" in out.stderr
    out = cli("plot", check=False)
    assert out.returncode == 2 and "usage: sensim plot" in out.stderr
    # a cut recording is read up to its last whole record
    with sensimd.client() as c:
        drive(c, 1)
        rec = start_record("--port", sensimd.port, "-s", 7, "-o", tmp_path / "cut.srec",
                           "--max-records", 4, "--wait", 5)
        try:
            deadline = time.monotonic() + 20
            while not c.get_info().subscribers and time.monotonic() < deadline:
                time.sleep(0.05)
            drive(c, 5, t0=DT)
            rec.communicate(timeout=30)
        finally:
            rec.kill()
    data = (tmp_path / "cut.srec").read_bytes()
    (tmp_path / "cut2.srec").write_bytes(data[:-5])
    r = open_recording(tmp_path / "cut2.srec")
    assert len(list(r.messages())) == 3 and r.truncated
    out = cli("export", tmp_path / "cut2.srec", "-f", "csv", "-o", tmp_path / "cut")
    assert "ends in a cut record" in out.stderr
    assert len((tmp_path / "cut" / "sensor7.csv").read_text().splitlines()) == 4


def test_cli_foxglove_is_the_bridge(sensimd):
    """`python -m sensim foxglove` is the bridge of `python -m sensim.foxglove`: same options,
    the sensors advertised to a Foxglove viewer, its page served, SIGTERM ends it with 0."""
    import urllib.request
    from foxglove_support import BridgeProcess, Stepper, Viewer, build_scene
    page = (pathlib.Path(sensim.__file__).parent / "foxglove" / "web" / "index.html")
    with sensimd.client(environment="demo") as c:
        build_scene(c)
        with BridgeProcess(sensimd.port, "--sensor", "10", "--sensor", "11",
                           command=(sys.executable, "-m", "sensim", "foxglove")) as bridge:
            with urllib.request.urlopen(bridge.page_url, timeout=10) as r:
                assert r.read() == page.read_bytes()
            with Stepper(c), Viewer(bridge.url) as v:   # channels come with the first records
                assert v.channel("/sensor_10/points")["schemaName"] == "sensor_msgs/PointCloud2"
                assert v.channel("/sensor_11/imu")["schemaName"] == "sensor_msgs/Imu"
    out = cli("foxglove", "--listen", "nowhere", check=False)
    assert out.returncode == 2 and "usage: sensim foxglove" in out.stderr
    assert "--listen" in out.stderr
    assert "foxglove" in cli("--help").stdout


def test_cli_record_every_sensor_and_info_lists_them(sensimd, tmp_path):
    """Without -s, record finds the environment's sensors itself (whatever their ids: Describe
    lists them, nothing is probed), and info --sensors lists them; looking leaves no
    subscription behind."""
    with sensimd.client(environment="all") as c, \
            sensimd.client(environment="bare") as bare:
        for sid in (7, 3, 130, 4_000_000_000):
            c.create_imu(sid, accelerometer=True, gyroscope=True, sample_rate=100.0)
        c.update_state(0.0)
        bare.update_state(0.0)
        out = cli("info", "--port", sensimd.port, "--sensors").stdout
        assert re.search(r"^  all: .*\n    sensor ids: 3, 7, 130, 4000000000$", out, re.M), out
        assert re.search(r"^  bare: .*\n    sensor ids: none$", out, re.M), out
        # --probe-ids is only for a daemon without Describe (test_find_sensors_probes_...)
        out = cli("info", "--port", sensimd.port, "--sensors", "--probe-ids", 2).stdout
        assert re.search(r"^  all: .*\n    sensor ids: 3, 7, 130, 4000000000$", out, re.M), out
        info = json.loads(cli("info", "--port", sensimd.port, "--sensors", "--json").stdout)
        assert {e["name"]: e["sensor_ids"] for e in info["environments"]
                if e["name"] in ("all", "bare")} == {"all": [3, 7, 130, 4_000_000_000],
                                                     "bare": []}
        assert not c.get_info().subscribers
        # recording every sensor
        rec = start_record("--port", sensimd.port, "-e", "all", "-o", tmp_path / "all.srec",
                           "--idle", 2, "--wait", 20)
        try:
            deadline = time.monotonic() + 20
            while len(c.get_info().subscribers) < 4 and time.monotonic() < deadline:
                time.sleep(0.05)
            for k in range(1, 11):
                c.update_state(0.01 * k)
                c.step(0.01 * k)
            stdout, stderr = rec.communicate(timeout=60)
        finally:
            rec.kill()
        assert rec.returncode == 0, stderr
        assert "every sensor of environment 'all'" in stderr
        r = open_recording(tmp_path / "all.srec")
        assert r.header["sensors"] == [3, 7, 130, 4_000_000_000]
        got = list(r.outputs())
        for sid in (3, 7, 130, 4_000_000_000):
            assert [o.time for o in got if o.sensor_id == sid] == \
                pytest.approx([0.01 * k for k in range(1, 11)])
        # nothing to record
        out = cli("record", "--port", sensimd.port, "-e", "bare", "-o", tmp_path / "b.srec",
                  "--wait", 0.2, check=False)
        assert out.returncode == 1
        assert ("environment 'bare' has no sensors (the daemon's Describe lists none; waited "
                "0.2 s)") in out.stderr


def test_find_sensors_probes_only_a_daemon_without_describe():
    """Against a daemon older than Describe (it answers INVALID_ARGUMENT "envelope has no
    body"), find_sensors falls back to subscribing to ids 1..probe_ids and gives each one
    taken up again; against one that describes, it asks Describe once and probes nothing;
    a Describe refused for another reason raises instead of probing."""
    from fakedaemon import FakeDaemon, ok_reply
    from sensim.stream import find_sensors

    def answer(have, describe, refusal="envelope has no body"):
        def reply(env):
            kind = env.WhichOneof("body")
            out = sensim.pb.Envelope(id=env.id)
            if kind == "describe" and describe:
                d = out.description
                for sid in sorted(have):
                    d.sensors.add(id=sid, kind=sensim.pb.SENSOR_KIND_IMU)
                d.sensor_count = len(have)
                return [out]
            if kind == "describe" or (kind == "subscribe" and env.subscribe.sensor_id not in
                                      have):
                out.status.code = (sensim.pb.INVALID_ARGUMENT if kind == "describe"
                                   else sensim.pb.NOT_FOUND)
                out.status.message = refusal if kind == "describe" else "no"
                return [out]
            if kind == "get_info":
                out.info.environments.add(name="default", sensors=len(have))
                return [out]
            return ok_reply(env)
        return reply

    def kinds(d, kind):
        return [b for b in d.frames
                if sensim.pb.Envelope.FromString(b).WhichOneof("body") == kind]

    with FakeDaemon(answer({2, 9, 300}, describe=False)) as d, \
            sensim.Client(port=d.port, role="observer") as c:
        assert find_sensors(c, 100) == [2, 9]
        subs = [sensim.pb.Envelope.FromString(b).subscribe.sensor_id
                for b in kinds(d, "subscribe")]
        assert subs == list(range(1, 101))
        assert [sensim.pb.Envelope.FromString(b).unsubscribe.sensor_id
                for b in kinds(d, "unsubscribe")] == [2, 9]
    with FakeDaemon(answer({2, 9, 300}, describe=True)) as d, \
            sensim.Client(port=d.port, role="observer") as c:
        assert find_sensors(c, 100) == [2, 9, 300]
        assert not kinds(d, "subscribe") and len(kinds(d, "describe")) == 1
    # any other INVALID_ARGUMENT is a refusal to report, not a daemon without Describe
    with FakeDaemon(answer({2}, describe=False, refusal="describe: sensors_after: bad")) as d, \
            sensim.Client(port=d.port, role="observer") as c:
        with pytest.raises(sensim.errors.InvalidArgument, match="sensors_after"):
            find_sensors(c, 100)
        assert not kinds(d, "subscribe")



KEEP_FREED = """
import ctypes, sys
from sensim.record import keep_freed_memory

class MallInfo2(ctypes.Structure):      # glibc >= 2.33
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd",
                "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]
libc = ctypes.CDLL(None)
libc.mallinfo2.restype = MallInfo2
if sys.argv[1] == "keep":
    assert keep_freed_memory()
held = [bytes(12 << 20) for _ in range(3)]      # three buffers of a cloud's size at once
mapped = libc.mallinfo2().hblkhd                # bytes in blocks mapped of their own
del held
print(mapped >> 20, libc.mallinfo2().arena >> 20)   # MiB; the heap after freeing them
"""


def test_keep_freed_memory_reuses_a_clouds_buffer():
    """sensim record makes malloc serve buffers of a cloud's size from its heap and keep them
    there once freed, for the next record (glibc's defaults map each such buffer anew, zeroed
    page by page by the kernel, and unmap it when freed)."""
    def run(mode):
        out = subprocess.run([sys.executable, "-c", KEEP_FREED, mode], capture_output=True,
                             text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        return [int(v) for v in out.stdout.split()]
    mapped, heap = run("keep")
    assert mapped == 0 and heap >= 36, (mapped, heap)
    mapped, heap = run("default")
    assert mapped >= 36 and heap < 12, (mapped, heap)
