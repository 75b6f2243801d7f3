# SPDX-License-Identifier: MIT
"""The Python tools under hostile input: recordings (.srec) and daemon recordings
(.sensimrec) with wrong magic, version or lengths, corrupt records and cut files; ROS bags
with corrupt messages; mesh files with NaN vertices; command-line options out of range; a
daemon that goes away in the middle of a command. Each gives a message naming the file, the
record or the option and a non-zero exit, never a Python traceback, and a corrupt length costs
no memory."""

from __future__ import annotations

import os
import pathlib
import resource
import signal
import struct
import subprocess
import sys
import time

import numpy as np
import pytest

import sensim
from sensim import errors
from sensim.recording import MAGIC, RecordingWriter, open_recording
from sensim.testing import Daemon, DaemonError


def run(*args, limit_memory=False, timeout=120):
    """`python -m MODULE ARGS...` (args[0] is the module); never a traceback."""
    def cap():
        # 1.5 GiB of address space: far more than a tool needs for these files, far less
        # than a length field can claim
        resource.setrlimit(resource.RLIMIT_AS, (3 << 29, 3 << 29))
    out = subprocess.run([sys.executable, "-m", *map(str, args)], capture_output=True,
                         text=True, timeout=timeout, preexec_fn=cap if limit_memory else None)
    assert "Traceback" not in out.stderr, out.stderr
    return out


def sensim_cli(*args, **kw):
    return run("sensim", *args, **kw)


def step_outputs(c):
    """The SensorData of a few steps of a lidar (5) and an IMU (7), as the daemon sent them."""
    c.create_primitive(1, "plane")
    c.create_object(1, 1, local_pose=((0, 0, -1.5), None))
    c.create_lidar(5, preset="os1-16-512", misses="nan")
    c.create_imu(7, accelerometer=True, gyroscope=True, sample_rate=100.0)
    outs = []
    for k in range(12):
        c.update_state(k * 0.01)
        outs += list(c.step(k * 0.01).outputs)
    assert any(o.HasField("point_cloud") for o in outs)
    return outs


@pytest.fixture
def recording(sensimd, tmp_path):
    """A recording of the real daemon's records and the records themselves."""
    with sensimd.client() as c:
        msgs = step_outputs(c)
    path = tmp_path / "run.srec"
    with RecordingWriter(path, {"environment": "default"}) as w:
        for m in msgs:
            w.write(m)
    return path, msgs


def export_fails(path, tmp_path, *needles, limit_memory=False):
    for cmd in (["export", path, "-f", "csv", "-o", tmp_path / "out"],
                ["plot", path, "-o", tmp_path / "pictures"]):
        out = sensim_cli(*cmd, limit_memory=limit_memory)
        assert out.returncode == 1, out.stderr
        for needle in (str(path.name),) + needles:
            assert needle in out.stderr, out.stderr


def test_recording_headers_wrong_or_corrupt_are_named(recording, tmp_path):
    path, _ = recording
    data = path.read_bytes()
    (head_len,) = struct.unpack_from("<I", data, 8)
    body = data[12 + head_len:]

    def write(name, raw):
        p = tmp_path / name
        p.write_bytes(raw)
        return p

    export_fails(write("magic.srec", b"SNSMREC2" + data[8:]), tmp_path, "not a sensim recording")
    export_fails(write("empty.srec", b""), tmp_path, "not a sensim recording")
    export_fails(write("short.srec", MAGIC + b"\x10\x00"), tmp_path, "header cut short")
    export_fails(write("hlen.srec", MAGIC + struct.pack("<I", 0xFFFFFFF0) + data[12:]),
                 tmp_path, "header length 4294967280", "limit")
    export_fails(write("json.srec", MAGIC + struct.pack("<I", 2) + b"{x" + body), tmp_path,
                 "not JSON")
    export_fails(write("list.srec", MAGIC + struct.pack("<I", 2) + b"[]" + body), tmp_path,
                 "not a JSON object")
    deep = b"[" * 200000                   # nested past the JSON parser's recursion
    export_fails(write("deep.srec", MAGIC + struct.pack("<I", len(deep)) + deep + body),
                 tmp_path, "not JSON")
    head = b'{"format": "sensim recording", "version": 2}'
    export_fails(write("v2.srec", MAGIC + struct.pack("<I", len(head)) + head + body),
                 tmp_path, "version 2")
    # a header without format and version (an older writer's) still reads
    head = b'{"environment": "default"}'
    p = write("old.srec", MAGIC + struct.pack("<I", len(head)) + head + body)
    out = sensim_cli("export", p, "-f", "csv", "-o", tmp_path / "old")
    assert out.returncode == 0 and (tmp_path / "old" / "sensor7.csv").is_file()


def test_recording_records_corrupt_cut_or_of_huge_length(recording, tmp_path):
    path, msgs = recording
    data = path.read_bytes()
    (head_len,) = struct.unpack_from("<I", data, 8)
    start = 12 + head_len
    first = len(msgs[0].SerializeToString())

    # a record that is not a SensorData: named with its index and byte offset
    p = tmp_path / "junk.srec"
    p.write_bytes(data[:start] + struct.pack("<I", 3) + b"\xff\xff\xff" + data[start:])
    export_fails(p, tmp_path, "record 0", f"byte {start}", "not a SensorData")

    # a cloud whose layout lies: the record, its sensor and the field are named
    bad = [type(m).FromString(m.SerializeToString()) for m in msgs]
    k = next(i for i, m in enumerate(bad) if m.HasField("point_cloud"))
    bad[k].point_cloud.height, bad[k].point_cloud.width = 3, 5
    p = tmp_path / "layout.srec"
    with RecordingWriter(p) as w:
        for m in bad:
            w.write(m)
    export_fails(p, tmp_path, f"record {k} (sensor 5)", "point_cloud.height")
    with pytest.raises(ValueError, match=f"layout.srec: record {k} .*point_cloud.height"):
        list(open_recording(p).outputs())

    # a record that claims more bytes than the file has left: the file was cut there
    p = tmp_path / "cut.srec"
    p.write_bytes(data[:start + 4 + first] + struct.pack("<I", 0xFFFFFFF0) + b"\x00" * 64)
    r = open_recording(p)
    assert len(list(r.messages())) == 1 and r.truncated
    out = sensim_cli("export", p, "-f", "csv", "-o", tmp_path / "cut")
    assert out.returncode == 0 and "ends in a cut record" in out.stderr

    # a length past max_record_bytes with the bytes there (a sparse file of 3 GiB): refused
    # before anything is read, in a process that could not hold the record
    p = tmp_path / "huge.srec"
    with open(p, "wb") as f:
        f.write(data[:start] + struct.pack("<I", (3 << 30) - 16))
        f.truncate(start + 4 + (3 << 30) - 16)
    export_fails(p, tmp_path, "record 0", "past the limit", limit_memory=True)
    with pytest.raises(ValueError, match="max_record_bytes"):
        list(open_recording(p).messages())
    os.unlink(p)


def test_bags_with_corrupt_messages_are_named(sensimd, tmp_path):
    from sensim.bag import BagWriter, read_bag
    with sensimd.client() as c:
        outs = sensim.outputs(step_outputs(c))
    path = tmp_path / "run.bag"
    with BagWriter(path) as bag:
        for out in outs:
            bag.write(out)
    data = path.read_bytes()
    cases = {
        # the message definitions name a type nobody has: no message can be read
        "type.bag": data.replace(b"Header header", b"Hxader header"),
        # a field wider than the bytes written: the messages do not deserialise
        "width.bag": data.replace(b"uint32 height", b"uint64 height"),
        "cut.bag": data[:len(data) // 2],
        "garbage.bag": b"#ROSBAG V2.0\n" + b"\xff" * 4096,
    }
    for name, raw in cases.items():
        p = tmp_path / name
        p.write_bytes(raw)
        export_fails(p, tmp_path, "cannot read" if name in ("type.bag", "width.bag")
                     else "not a readable ROS 1 bag")
        if name in ("cut.bag", "garbage.bag"):
            # (not the others in this process: genpy keeps the message classes it makes
            # from a bag's definitions by type and checksum, for every later bag)
            with pytest.raises(ValueError, match=name):
                list(read_bag(p).outputs())


def daemon_recording(sensimd_factory, tmp_path):
    """A sensimd --record file of a controller stepping an IMU."""
    path = tmp_path / "run.sensimrec"
    d = sensimd_factory("--record", str(path))
    with d.client(environment="r") as c:
        c.create_imu(7, accelerometer=True, sample_rate=100.0)
        for k in range(4):
            c.update_state(k * 0.01)
            c.step(k * 0.01)
    d.close()
    return path


def records(data):
    """(offset, length, type, name length) of each record of a daemon recording."""
    pos, out = 16, []
    while pos < len(data):
        length, kind, _role, nlen = struct.unpack_from("<IBBH", data, pos)
        out.append((pos, length, kind, nlen))
        pos += 4 + length
    return out


def test_replay_of_corrupt_daemon_recordings(sensimd_factory, tmp_path):
    path = daemon_recording(sensimd_factory, tmp_path)
    d = sensimd_factory()
    target = f"127.0.0.1:{d.port}"
    out = run("sensim.replay", path, "--connect", target)
    assert out.returncode == 0 and out.stdout.startswith("r/step/7 3 "), out.stderr
    data = path.read_bytes()
    recs = records(data)
    hello = recs[0][0]
    req, length, _, nlen = next(r for r in recs if r[2] == 2)
    payload = req + 24 + nlen

    def case(name, raw, *needles):
        p = tmp_path / name
        p.write_bytes(raw)
        out = run("sensim.replay", p, "--connect", target)
        assert out.returncode == 2, out.stderr
        for needle in (name,) + needles:
            assert needle in out.stderr, out.stderr

    case("magic.sensimrec", b"SENSIMRX" + data[8:], "not a sensimd recording")
    case("v9.sensimrec", data[:8] + struct.pack("<I", 9) + data[12:], "version 9")
    case("len.sensimrec", data[:hello] + struct.pack("<I", 0xFFFFFFFF) + data[hello + 4:],
         f"record at byte {hello} has a bad length")
    case("type.sensimrec", data[:hello + 4] + b"\x09" + data[hello + 5:], "unknown type 9")
    case("role.sensimrec", data[:hello + 5] + b"\x07" + data[hello + 6:], "unknown role 7")
    end = req + 4 + length
    case("junk.sensimrec", data[:payload] + b"\xff" * (end - payload) + data[end:],
         "not an Envelope")
    case("empty.sensimrec", data[:payload] + b"\x08\x01" + b"\x00" * (end - payload - 2)
         + data[end:], "carries no request")
    case("cut.sensimrec", data[:recs[-1][0] + 10], "cut short")
    out = run("sensim.replay", path, "--connect", target, "--save", tmp_path / "no" / "h")
    assert out.returncode == 2 and "no/h" in out.stderr
    out = run("sensim.replay", path, "--connect", target, "--compare", tmp_path / "none")
    assert out.returncode == 2 and "none" in out.stderr
    out = run("sensim.replay", path, "--connect", target, "--timeout", "nan")
    assert out.returncode == 2 and "--timeout" in out.stderr


@pytest.mark.parametrize("args, code, needle", [
    (["ping", "--size", "-1"], 1, "--size"),
    (["ping", "--size", "100000000000"], 1, "--size"),
    (["ping", "--size", "67108864"], 1, "--size 67108864 does not fit"),
    (["ping", "-n", "0"], 1, "--count must be at least 1"),
    (["ping", "--interval", "-1"], 1, "--interval"),
    (["ping", "--timeout", "0"], 1, "--timeout"),
    (["ping", "--timeout", "nan"], 1, "--timeout"),
    (["info", "--port", "70000"], 2, "--port"),
    (["info", "--port", "-1"], 2, "--port"),
    (["info", "--sensors", "--probe-ids", "0"], 1, "--probe-ids"),
    (["record", "-s", "-1", "-o", "x.srec"], 2, "-s/--sensor"),
    (["record", "-s", "4294967296", "-o", "x.srec"], 2, "-s/--sensor"),
    (["record", "-s", "1", "-o", "x.srec", "--wall", "inf"], 1, "--wall"),
    (["record", "-s", "1", "-o", "x.srec", "--duration", "-1"], 1, "--duration"),
    (["record", "-s", "1", "-o", "x.srec", "--max-records", "0"], 1, "--max-records"),
    (["record", "-s", "1", "-o", "x.srec", "--idle", "-2"], 1, "--idle"),
    (["record", "-s", "1", "-o", "x.srec", "--wait", "nan"], 1, "--wait"),
    (["record", "-s", "1", "--bag", "x.bag", "--time-offset", "-5"], 1, "--time-offset"),
    (["record", "-s", "1", "-o", "x.srec", "--precision", "0"], 1, "--precision"),
    (["record", "-s", "1", "-o", "no/such/dir/x.srec", "--wait", "0"], 1, "no/such/dir"),
    (["export", "x.srec", "-f", "pcd", "-o", "d", "-s", "x"], 2, "-s/--sensor"),
])
def test_cli_options_out_of_range_are_named(sensimd, tmp_path, args, code, needle):
    port = [] if "--port" in args else ["--port", str(sensimd.port)]
    if args[0] in ("export", "plot"):
        port = []
    with sensimd.client() as c:
        c.create_imu(1, accelerometer=True, sample_rate=100.0)
        out = subprocess.run([sys.executable, "-m", "sensim", args[0], *port, *args[1:]],
                             cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert "Traceback" not in out.stderr, out.stderr
    assert out.returncode == code and needle in out.stderr, out.stderr
    assert not (tmp_path / "x.srec").exists() and not (tmp_path / "x.bag").exists()


def test_cli_bad_port_in_the_environment_is_named():
    out = subprocess.run([sys.executable, "-m", "sensim", "info"], capture_output=True,
                         text=True, timeout=60, env=dict(os.environ, SENSIM_PORT="77OO"))
    assert out.returncode == 2 and "$SENSIM_PORT" in out.stderr and "'77OO'" in out.stderr


def test_daemon_gone_mid_command(sensimd_factory, tmp_path):
    # ping: the daemon killed between round trips (daemons killed by design: not the
    # fixture's, which requires a clean exit)
    d = Daemon(log_dir=tmp_path, name="killed-0")
    killed = [d]
    ping = subprocess.Popen([sys.executable, "-m", "sensim", "ping", "--port", str(d.port),
                             "-n", "1000000", "--interval", "0.001"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1.0)
    d.kill()
    _, err = ping.communicate(timeout=60)
    assert ping.returncode == 1 and "Traceback" not in err and "ECLOSED" in err, err
    # record: the daemon killed while records stream; what arrived is written whole
    d = Daemon(log_dir=tmp_path, name="killed-1")
    killed.append(d)
    with d.client(environment="g") as c:
        c.create_imu(7, accelerometer=True, sample_rate=1000.0)
        rec = subprocess.Popen([sys.executable, "-m", "sensim", "record", "--port", str(d.port),
                                "-e", "g", "-s", "7", "-o", tmp_path / "g.srec", "--csv",
                                tmp_path / "csv", "-q"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        from sensim.record import wait_for_subscribers
        wait_for_subscribers(c, [7])
        for k in range(20):
            c.update_state(k * 0.01)
            c.step(k * 0.01)
        deadline = time.monotonic() + 30
        while (not (tmp_path / "g.srec").exists() or (tmp_path / "g.srec").stat().st_size
               < 1000) and time.monotonic() < deadline:
            time.sleep(0.05)
        d.kill()
        out, err = rec.communicate(timeout=60)
    assert rec.returncode == 1 and "Traceback" not in err, err
    assert "connection to the daemon broke" in err and "connection lost" in out
    r = open_recording(tmp_path / "g.srec")
    n = len(list(r.messages()))
    assert n > 0 and not r.truncated
    assert len((tmp_path / "csv" / "sensor7.csv").read_text().splitlines()) == n + 1
    for d in killed:
        try:
            d.close()
        except DaemonError:
            pass
    # info: a daemon that stopped answering (SIGSTOP) times out, named
    d = sensimd_factory()
    os.kill(d.proc.pid, signal.SIGSTOP)
    try:
        out = sensim_cli("info", "--port", d.port, "--timeout", "1")
    finally:
        os.kill(d.proc.pid, signal.SIGCONT)
    assert out.returncode == 1 and "ETIMEDOUT" in out.stderr, out.stderr


def test_mesh_files_with_vertices_not_finite_create_nothing(sensimd, tmp_path):
    cases = {
        "nan.obj": "v 0 0 0\nv nan 0 0\nv 0 1 0\nf 1 2 3\n",
        "inf.obj": "v 0 0 0\nv 1 inf 0\nv 0 1 0\nf 1 2 3\n",
        "huge.obj": "v 0 0 0\nv 1e39 0 0\nv 0 1 0\nf 1 2 3\n",
        "random.ply": None,
        "lines.obj": "v 0 0 0\nv 1 0 0\nl 1 2\n",
    }
    with sensimd.client() as c:
        for name, text in cases.items():
            p = tmp_path / name
            if text is None:
                p.write_bytes(b"ply\n" + bytes(range(256)) * 4)
            else:
                p.write_text(text)
            with pytest.raises(ValueError, match=name.replace(".", r"\.")):
                c.create_mesh(1, p)
            with pytest.raises(errors.NotFound):
                c.remove("geometry", 1)


def test_plot_and_export_of_empty_revolutions_and_records_without_values(sensimd, tmp_path):
    # a VLP-16 (misses dropped) under an open sky without atmospheric returns: revolutions of
    # no points, which every tool takes; an OS1-16 beside it (misses kept as NaN)
    with sensimd.client() as c:
        c.set_ambient("custom", return_probability_scaling=0.0)
        c.create_lidar(6, preset="vlp16")
        c.create_lidar(5, preset="os1-16-512", misses="nan")
        msgs = []
        for k in range(16):
            c.update_state(k * 0.01)
            msgs += list(c.step(k * 0.01).outputs)
    assert any(m.sensor_id == 6 and m.point_cloud.count == 0 for m in msgs)
    path = tmp_path / "sky.srec"
    with RecordingWriter(path) as w:
        for m in msgs:
            w.write(m)
    out = sensim_cli("plot", path, "-o", tmp_path / "pictures")
    assert out.returncode == 0, out.stderr
    assert "sensor6_000000_range.png" in out.stdout and "sensor6_000000_top.png" in out.stdout
    for fmt in ("pcd", "ply", "xyz"):
        out = sensim_cli("export", path, "-f", fmt, "-o", tmp_path / fmt)
        assert out.returncode == 0 and f"sensor6_000000.{fmt}" in out.stdout, out.stderr
    # an IMU record without a vector: named, not a matplotlib error
    from sensim._proto import pb
    empty = pb.SensorData(sensor_id=11, time=0.25)
    empty.imu.SetInParent()
    with RecordingWriter(tmp_path / "imu.srec") as w:
        w.write(empty)
    out = sensim_cli("plot", tmp_path / "imu.srec", "-o", tmp_path / "p2")
    assert out.returncode == 1 and "imu.srec: sensor 11, frame 0" in out.stderr, out.stderr
    assert "no acceleration, angular velocity or magnetic field" in out.stderr


@pytest.mark.parametrize("args, needle", [
    (["--frame", "sensor_1=world:0,0,nan"], "--frame"),
    (["--frame", "sensor_1=world:0,0,1e400"], "--frame"),
    (["--frame", "sensor_1=world:0,0,1,0,0,0,0"], "quaternion"),
    (["--port", "0"], "--port"),
    (["--port", "65536"], "--port"),
])
def test_foxglove_options_out_of_range_are_named(sensimd, args, needle):
    for module in (["sensim", "foxglove"], ["sensim.foxglove"]):
        out = subprocess.run([sys.executable, "-m", *module, "--port", str(sensimd.port),
                              "--listen", "127.0.0.1:0", *args],
                             capture_output=True, text=True, timeout=60)
        assert "Traceback" not in out.stderr, out.stderr
        assert out.returncode == 2 and needle in out.stderr, out.stderr
    out = subprocess.run([sys.executable, "-m", "sensim.foxglove"], capture_output=True,
                         text=True, timeout=60, env=dict(os.environ, SENSIM_PORT="x"))
    assert out.returncode == 2 and "$SENSIM_PORT" in out.stderr, out.stderr


def test_field_names_that_would_rewrite_a_file_header_are_refused(recording, tmp_path):
    # a recorded cloud whose field is named with a line end and a PCD keyword: written as
    # it is, the name would end the FIELDS line and declare the data ASCII
    path, msgs = recording
    bad = [type(m).FromString(m.SerializeToString()) for m in msgs]
    for m in bad:
        for f in m.point_cloud.fields:
            if f.name == "intensity":
                f.name = "i\nDATA ascii"
    p = tmp_path / "names.srec"
    with RecordingWriter(p) as w:
        for m in bad:
            w.write(m)
    for fmt in ("pcd", "ply"):
        out = sensim_cli("export", p, "-f", fmt, "-o", tmp_path / fmt)
        assert out.returncode == 1 and "names.srec: sensor 5" in out.stderr, out.stderr
        assert "cannot be written in a PCD or PLY header" in out.stderr
        assert not list((tmp_path / fmt).glob(f"*.{fmt}"))
    from sensim import export
    cloud = np.zeros(2, dtype=[("x", "<f4"), ("y", "<f4"), ("z", "<f4"), ("in tensity", "<f4")])
    with pytest.raises(ValueError, match="'in tensity'"):
        export.write_pcd(tmp_path / "a.pcd", cloud)
    with pytest.raises(ValueError, match="'in tensity'"):
        export.write_ply(tmp_path / "a.ply", cloud)
