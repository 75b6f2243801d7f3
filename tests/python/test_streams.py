# SPDX-License-Identifier: MIT
"""Subscriptions against the real daemon: every encoding round-trips (the raw cloud of StepDone
is the reference), a slow subscriber costs at most its budget and drops whole frames counted
exactly while a healthy one gets every frame, subscribers that vanish mid-frame, unsubscribe
under load, removal of the sensor, IMU streams, refused subscriptions, malformed
QUANTIZED_ZSTD bodies refused by the C and Python decoders."""

from __future__ import annotations

import os
import socket
import struct
import time

import numpy as np
import pytest

from sensim import errors, pb
from sensim.client import point_cloud_to_numpy

OS1_64 = {"channels": 64, "columns": 1024, "frequency": 10.0}


def _scene(c):
    """Clear air, a ground plane 1.5 m below the sensor and a sphere: some rays miss."""
    c.set_ambient("custom", return_probability_scaling=0.0)
    c.create_primitive(1, "plane", half_size=40.0)
    c.create_object(1, geometry_id=1, local_pose={"position": (0, 0, -1.5)})
    c.create_primitive(2, "sphere", radius=2.0)
    c.create_object(2, geometry_id=2, local_pose={"position": (8, 3, 0)})


def _lidar(c, misses="nan", **extra):
    c.create_lidar(5, ouster=OS1_64, misses=misses, fields=["x", "y", "z", "intensity", "ring"],
                   distance_noise={"stddevBase": 0.01}, **extra)


def _step_clouds(c, t, sensor=5):
    c.update_state(t)
    done = c.step(t)
    return [o for o in done.outputs if o.sensor_id == sensor and o.HasField("point_cloud")]


def _xyz(a):
    return np.stack([a["x"], a["y"], a["z"]], axis=1).astype(np.float64)


def _rss(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def _sanitized(pid):
    """Under AddressSanitizer the resident size says nothing about the daemon's own bounds."""
    with open(f"/proc/{pid}/maps") as f:
        return any("libasan" in line for line in f)


def _sub_info(c, session_id, sensor=5):
    for s in c.get_info().subscribers:
        if s.session_id == session_id and s.sensor_id == sensor and not s.closed_reason:
            return s
    return None


def test_streams_every_encoding_round_trips(sensimd):
    with sensimd.client() as c, sensimd.client() as z, \
            sensimd.client(role="observer") as q:
        _scene(c)
        _lidar(c)
        c.subscribe(5, "raw")
        z.subscribe(5, "zstd", level=3)
        q.subscribe(5, "quantized_zstd", precision=0.002)
        reference = []
        for k in range(4):
            reference += _step_clouds(c, 0.1 * k)
        assert len(reference) == 3
        for seq, ref in enumerate(reference, start=1):
            raw = c.next_sensor_data(timeout=10)
            zs = z.next_sensor_data(timeout=10)
            qz = q.next_sensor_data(timeout=10)
            truth = point_cloud_to_numpy(ref.point_cloud)
            for sd in (raw, zs, qz):
                assert sd.sequence == seq and sd.sensor_id == 5 and sd.frame == ref.frame
                assert sd.time == ref.time and sd.start_time == pytest.approx(sd.time - 0.1)
                assert sd.point_cloud.count == len(truth)
            assert raw.point_cloud.encoding == pb.ENCODING_RAW
            assert raw.point_cloud.data == ref.point_cloud.data
            assert zs.point_cloud.encoding == pb.ENCODING_ZSTD
            assert point_cloud_to_numpy(zs.point_cloud).tobytes() == truth.tobytes()
            assert len(zs.point_cloud.data) < len(ref.point_cloud.data)

            # quantized: order kept, within the stated error, the stated error within precision
            cq = qz.point_cloud
            assert cq.encoding == pb.ENCODING_QUANTIZED_ZSTD and cq.precision == 0.002
            assert 0 < cq.max_error <= 0.002
            got = point_cloud_to_numpy(cq)
            miss = np.isnan(truth["x"])
            assert miss.any() and (~miss).any()
            assert np.array_equal(np.isnan(got["x"]), miss)
            err = np.linalg.norm(_xyz(got)[~miss] - _xyz(truth)[~miss], axis=1)
            assert err.max() <= cq.max_error * (1 + 1e-9)
            assert err.max() == pytest.approx(cq.max_error, rel=1e-6)
            assert np.array_equal(got["intensity"], truth["intensity"])
            assert np.array_equal(got["ring"], truth["ring"])
            assert len(cq.data) < len(zs.point_cloud.data) / 3


def test_streams_clouds_read_in_place(sensimd):
    """Client(pushed_in_place=True): a pushed cloud of a large frame (1.3 MB here) is parsed
    without its points; next_sensor_output gives an array viewing the frame it came in (no
    copy), next_sensor_data the whole message as ever. Both give the reference's bytes (the
    StepDone's cloud and a plain client's), the frames count at their size as received, and
    an array still held keeps its frame from being used again for the next ones."""
    with sensimd.client() as c, sensimd.client(role="observer") as plain, \
            sensimd.client(role="observer", pushed_in_place=True) as inp, \
            sensimd.client(role="observer", pushed_in_place=True) as zs:
        _scene(c)
        _lidar(c)
        for o, enc in ((plain, "raw"), (inp, "raw"), (zs, "zstd")):
            o.subscribe(5, enc)
        reference = []
        for k in range(6):
            reference += _step_clouds(c, 0.1 * k)
        assert len(reference) == 5
        held = []
        for seq, ref in enumerate(reference, start=1):
            want = plain.next_sensor_data(timeout=10)
            assert want.point_cloud.data == ref.point_cloud.data
            assert len(want.point_cloud.data) > 1 << 20          # a large frame
            if seq % 2:
                out = inp.next_sensor_output(timeout=10)
                assert (out.sensor_id, out.sequence, out.frame, out.time) == \
                    (5, seq, ref.frame, ref.time)
                assert out.value.tobytes() == ref.point_cloud.data
                base = out.value
                while isinstance(base, np.ndarray) and base.base is not None:
                    base = base.base
                assert isinstance(base, memoryview) and not out.value.flags.owndata
                held.append((out.value, ref.point_cloud.data))
            else:
                got = inp.next_sensor_data(timeout=10)
                assert got.SerializeToString() == want.SerializeToString()
            assert inp.last_pushed_bytes == plain.last_pushed_bytes > 1 << 20
            zout = zs.next_sensor_output(timeout=10)
            assert zout.value.tobytes() == ref.point_cloud.data
        for value, data in held:        # the frames after them went into other buffers
            assert value.tobytes() == data


@pytest.mark.parametrize("misses", ["remove", "zero"])
def test_streams_quantized_without_nan_misses(sensimd, misses):
    with sensimd.client() as c:
        _scene(c)
        _lidar(c, misses=misses)
        c.subscribe(5, "quantized_zstd")
        ref = []
        for k in range(2):
            ref += _step_clouds(c, 0.1 * k)
        sd = c.next_sensor_data(timeout=10)
        truth, got = point_cloud_to_numpy(ref[0].point_cloud), point_cloud_to_numpy(sd.point_cloud)
        err = np.linalg.norm(_xyz(got) - _xyz(truth), axis=1)
        assert err.max() <= sd.point_cloud.max_error * (1 + 1e-9) <= 0.001
        zero = np.all(_xyz(truth) == 0, axis=1)
        assert (misses == "zero") == bool(zero.any())
        assert np.all(_xyz(got)[zero] == 0)


def test_streams_refused_subscriptions(sensimd):
    with sensimd.client() as c:
        _scene(c)
        _lidar(c)
        with pytest.raises(errors.NotFound) as exc:
            c.subscribe(99)
        assert "subscribe.sensor_id = 99" in exc.value.message
        with pytest.raises(ValueError, match="precision"):
            c.subscribe(5, "quantized_zstd", precision=0.0)
        with pytest.raises(errors.NotFound) as exc:
            c.unsubscribe(5)
        assert "unsubscribe.sensor_id" in exc.value.message
        c.subscribe(5)
        with pytest.raises(errors.AlreadyExists):
            c.subscribe(5, "zstd")
        c.unsubscribe(5)
        c.subscribe(5, "zstd")
        assert c.ping(b"x").payload == b"x"


@pytest.mark.parametrize("encoding", ["raw", "zstd", "quantized_zstd"])
def test_streams_precision_checked_whatever_the_encoding(sensimd, encoding):
    """A precision that is not a step in [1e-6, 1] m is refused naming the field and its range,
    whatever the encoding (it used to pass unchecked with raw and zstd), by the daemon (the
    request sent as is, below the client's check) and by the client before sending; the
    connection still subscribes afterwards."""
    with sensimd.client() as c:
        _scene(c)
        _lidar(c)
        number = pb.Encoding.Value({"raw": "ENCODING_RAW", "zstd": "ENCODING_ZSTD",
                                    "quantized_zstd": "ENCODING_QUANTIZED_ZSTD"}[encoding])
        for bad in (float("nan"), float("inf"), -float("inf"), -0.001, 0.0, 2.0):
            with pytest.raises(errors.InvalidArgument) as exc:
                c._call("subscribe", pb.Subscribe(sensor_id=5, encoding=number, precision=bad))
            assert "subscribe.precision" in exc.value.message
            assert "[1e-06, 1] m" in exc.value.message
            with pytest.raises(ValueError, match=r"precision: .* must be in \[1e-06, 1\] m"):
                c.subscribe(5, encoding, precision=bad)
        c.subscribe(5, encoding, precision=1e-6)
        c.unsubscribe(5)
        c.subscribe(5, encoding, precision=1.0)
        for k in range(2):
            _step_clouds(c, 0.1 * k)
        assert c.next_sensor_data(timeout=10).sensor_id == 5


def test_streams_level_and_encoding_checked(sensimd):
    """A zstd level outside [0, 19] or an unknown encoding is refused by the daemon naming the
    field and its valid values (the request sent as is, below the client's checks), and by the
    client before sending; nothing is subscribed by a refusal."""
    with sensimd.client() as c:
        _scene(c)
        _lidar(c)
        for level in (-1, 20, 1 << 30):
            with pytest.raises(errors.InvalidArgument) as exc:
                c._call("subscribe", pb.Subscribe(sensor_id=5, level=level))
            assert f"subscribe.level = {level} must be in [1, 19]" in exc.value.message
            with pytest.raises(ValueError, match=r"level: .* must be in \[1, 19\]"):
                c.subscribe(5, "zstd", level=level)
        # encoding 9 (field 2, a varint) in bytes: protobuf refuses to set an unknown value
        unknown = pb.Subscribe.FromString(pb.Subscribe(sensor_id=5).SerializeToString() +
                                          b"\x10\x09")
        with pytest.raises(errors.InvalidArgument) as exc:
            c._call("subscribe", unknown)
        assert "subscribe.encoding = 9 is unknown (RAW 0, ZSTD 1, QUANTIZED_ZSTD 2)" in \
            exc.value.message
        c.subscribe(5, "zstd", level=19)
        for k in range(2):
            _step_clouds(c, 0.1 * k)
        d = c.next_sensor_data(timeout=10)
        assert d.sensor_id == 5 and d.point_cloud.encoding == pb.ENCODING_ZSTD


def test_streams_imu_and_end_of_stream(sensimd):
    with sensimd.client() as c, sensimd.client(role="observer") as o:
        c.create_imu(7, accelerometer=True)
        _scene(c)
        _lidar(c)
        o.subscribe(7)
        o.subscribe(5, "quantized_zstd")
        for k in range(3):
            _step_clouds(c, 0.1 * k)
        got = {5: [], 7: []}
        for _ in range(5):
            sd = o.next_sensor_data(timeout=10)
            got[sd.sensor_id].append(sd)
        assert [s.sequence for s in got[7]] == [1, 2, 3]
        assert all(s.HasField("imu") for s in got[7])
        assert [s.sequence for s in got[5]] == [1, 2]

        # removing the sensor ends the subscription with a last frame
        c.remove("sensor", 5)
        end = o.next_sensor_data(timeout=10)
        assert end.sensor_id == 5 and end.end_of_stream and end.sequence == 3
        assert end.WhichOneof("payload") is None
        _step_clouds(c, 0.3)
        assert o.next_sensor_data(timeout=10).sensor_id == 7
        with pytest.raises(errors.NotFound):
            o.unsubscribe(5)


def test_streams_slow_subscriber_is_bounded_and_healthy_ones_get_everything(sensimd_factory):
    """A subscriber that never reads while the controller steps an OS1-64 at 10 Hz for 60 s of
    simulated time: the daemon holds at most its budget plus one frame for it, counts every
    dropped frame, a healthy subscriber receives every frame, and steps do not slow down."""
    budget = 8 << 20
    d = sensimd_factory("--subscriber-max-bytes", str(budget), "--subscriber-soft-seconds", "0",
                        "--io-timeout", "0")
    steps = 601
    with d.client() as c, d.client() as healthy, d.client(role="observer") as slow:
        _scene(c)
        _lidar(c, misses="remove")
        healthy.subscribe(5, "quantized_zstd")
        slow.subscribe(5, "raw")
        slow_session = slow.session_id
        frame_bytes = 0
        rtts, produced, received = [], 0, []
        rss0 = _rss(d.proc.pid)
        for k in range(steps):
            t0 = time.perf_counter()
            clouds = _step_clouds(c, 0.1 * k)
            rtts.append(time.perf_counter() - t0)
            produced += len(clouds)
            for cl in clouds:
                frame_bytes = max(frame_bytes, len(cl.point_cloud.data) + 1024)
                sd = healthy.next_sensor_data(timeout=10)
                received.append(sd.sequence)
            if k % 100 == 99:
                info = _sub_info(c, slow_session)
                assert info.queued_bytes <= budget
                assert c.get_info().counters.held_bytes <= budget + 2 * frame_bytes + (1 << 20)
        assert produced == steps - 1
        assert received == list(range(1, produced + 1))

        info = _sub_info(c, slow_session)
        assert info.frames_dropped > 0
        assert info.queued_bytes <= budget
        assert info.frames_sent + info.frames_dropped + info.queued_frames == produced
        assert info.frames_sent <= 2 + (64 << 20) // frame_bytes  # what the socket buffers took
        counters = c.get_info().counters
        assert counters.frames_dropped == info.frames_dropped
        assert counters.bytes_dropped == info.bytes_dropped
        hinfo = _sub_info(c, healthy.session_id)
        assert hinfo.frames_dropped == 0 and hinfo.frames_sent == produced

        # the stepping client never waited: late steps about as fast as early ones. A client
        # held up by the slow subscriber would wait for its whole queue (budget / frame_bytes
        # frames) at every step; allow twice the early median for a loaded 2-core machine and
        # sanitizer builds, far below that.
        early, late = np.median(rtts[10:110]), np.median(rtts[-100:])
        assert late <= 2.0 * early + 0.01, (early, late)
        if not _sanitized(d.proc.pid):
            assert _rss(d.proc.pid) - rss0 <= budget + 2 * frame_bytes + (48 << 20)

        # the slow subscriber reads at last: consecutive numbers after its gap, newest frames
        seqs = []
        while True:
            sd = slow.next_sensor_data(timeout=2)
            if sd is None:
                break
            seqs.append(sd.sequence)
        assert seqs[-1] == produced
        gaps = np.diff(seqs)
        assert np.all(gaps >= 1) and np.sum(gaps - 1) == info.frames_dropped


def test_streams_slow_subscriber_past_soft_limit_is_closed(sensimd_factory):
    d = sensimd_factory("--subscriber-max-bytes", str(4 << 20), "--subscriber-soft-bytes",
                        str(1 << 20), "--subscriber-soft-seconds", "1")
    with d.client() as c, d.client(role="observer") as slow:
        _scene(c)
        _lidar(c, misses="remove")
        slow.subscribe(5, "raw")
        sid = slow.session_id
        deadline = time.monotonic() + 60
        k = 0
        while time.monotonic() < deadline:
            _step_clouds(c, 0.1 * k)
            k += 1
            closed = [s for s in c.get_info().subscribers if s.closed_reason]
            if closed:
                break
        assert closed and closed[0].session_id == sid
        assert "slow subscriber" in closed[0].closed_reason
        assert c.get_info().counters.subscribers_closed == 1
        assert "slow subscriber" in d.stderr()


def test_streams_slow_subscriber_with_many_subscriptions_is_closed(sensimd_factory):
    """The soft limit was checked a subscription at a time: a subscriber that stopped reading
    with several subscriptions, each below --subscriber-soft-bytes, kept them all queued (up
    to --subscriber-max-bytes each) for as long as it stayed connected. What a connection's
    subscriptions queue together counts now: above the soft limit for the soft time, the
    connection is closed, the reason names its subscriptions, and what it held is let go."""
    each, soft = 3 << 20, 4 << 20
    d = sensimd_factory("--subscriber-max-bytes", str(each), "--subscriber-soft-bytes",
                        str(soft), "--subscriber-soft-seconds", "1", "--io-timeout", "0")
    sensors = (5, 6, 7, 8)
    with d.client() as c, d.client(role="observer") as slow:
        _scene(c)
        for sid in sensors:
            c.create_lidar(sid, ouster=OS1_64, misses="nan",
                           fields=["x", "y", "z", "intensity", "ring"])
            slow.subscribe(sid, "raw")
        session = slow.session_id
        deadline = time.monotonic() + 30
        k, closed = 0, []
        while not closed and time.monotonic() < deadline:
            c.update_state(0.1 * k)
            c.step(0.1 * k)
            k += 1
            info = c.get_info()
            live = [s for s in info.subscribers if s.session_id == session and not s.closed_reason]
            assert all(s.queued_bytes <= each for s in live)     # each below the soft limit
            closed = [s for s in info.subscribers if s.closed_reason]
        assert closed and closed[0].session_id == session, k
        # closed for what the four queued together (above the soft limit: none could alone)
        assert "slow subscriber: 4 subscriptions" in closed[0].closed_reason
        assert info.counters.subscribers_closed == 1
        assert not [s for s in info.subscribers if s.session_id == session and not s.closed_reason]
        assert info.counters.held_bytes < soft
        c.update_state(0.1 * k)
        c.step(0.1 * k)                                           # the controller goes on


@pytest.mark.parametrize("how", ["close", "reset"])
def test_streams_subscriber_gone_mid_frame(sensimd, how):
    with sensimd.client() as c:
        _scene(c)
        _lidar(c)
        sub = sensimd.client(role="observer")
        sub.subscribe(5, "raw")
        _step_clouds(c, 0.0)
        _step_clouds(c, 0.1)
        sock = sub._sock
        head = sock.recv(4, socket.MSG_WAITALL)
        (length,) = struct.unpack("<I", head)
        assert length > 100_000
        sock.recv(1000)   # part of the frame
        if how == "reset":
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()
        sub._sock = None
        for k in range(2, 6):
            assert len(_step_clouds(c, 0.1 * k)) == 1
        deadline = time.monotonic() + 10
        while any(s.sensor_id == 5 and not s.closed_reason for s in c.get_info().subscribers):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert c.ping(b"ok").payload == b"ok"


def test_streams_unsubscribe_under_load(sensimd):
    with sensimd.client() as c, sensimd.client(role="observer") as o:
        _scene(c)
        _lidar(c, misses="remove")
        o.subscribe(5, "raw")
        for k in range(8):
            _step_clouds(c, 0.1 * k)   # frames pile up unread
        o.unsubscribe(5)
        before = len(o._pushed)
        for k in range(8, 12):
            _step_clouds(c, 0.1 * k)
        assert o.ping(b"p").payload == b"p"
        assert len(o._pushed) == before        # nothing arrived after the reply
        seqs = [o.next_sensor_data(timeout=0).sequence for _ in range(before)]
        assert seqs == sorted(seqs) and all(s <= 7 for s in seqs)
        info = [s for s in c.get_info().subscribers if s.sensor_id == 5]
        assert info == []


@pytest.mark.parametrize("layout", ["xyzi", "velodyne", "ouster"])
def test_streams_c_and_python_clients_decode_the_same_bytes(sensimd, tmp_path, layout):
    """Shared test vectors: frames produced by the daemon in every encoding, decoded by the C
    client (sensim_point_cloud_decode) and by the Python client, give the same points."""
    import pathlib
    import subprocess
    exe = pathlib.Path(os.environ.get("SENSIM_EXAMPLES_DIR", "")) / "sensim_decode_cloud"
    if not exe.exists():
        pytest.fail(f"{exe} is missing: build the sensim_decode_cloud target")
    with sensimd.client() as c, sensimd.client() as z, sensimd.client() as q:
        _scene(c)
        c.create_lidar(5, ouster=OS1_64, misses="nan", layout=layout,
                       distance_noise={"stddevBase": 0.01})
        c.subscribe(5, "raw")
        z.subscribe(5, "zstd")
        q.subscribe(5, "quantized_zstd")
        for k in range(2):
            _step_clouds(c, 0.1 * k)
        clouds = [cl.next_sensor_data(timeout=10).point_cloud for cl in (c, z, q)]
        truth = point_cloud_to_numpy(clouds[0]).tobytes()
        for cloud in clouds:
            src, dst = tmp_path / "in.bin", tmp_path / "out.bin"
            src.write_bytes(cloud.data)
            subprocess.run([str(exe), str(cloud.encoding), str(cloud.count),
                            str(cloud.point_step), str(src), str(dst)], check=True, timeout=60)
            by_c = dst.read_bytes()
            by_py = point_cloud_to_numpy(cloud).tobytes()
            if cloud.encoding != pb.ENCODING_QUANTIZED_ZSTD:
                assert by_c == truth and by_py == truth
                continue
            dt = point_cloud_to_numpy(cloud).dtype
            a = np.frombuffer(by_c, dtype=dt)
            b = np.frombuffer(by_py, dtype=dt)
            t = np.frombuffer(truth, dtype=dt)
            for name in dt.names:
                if name in ("x", "y", "z"):
                    # the same integers, the same float64 expression: equal up to the last
                    # bit of cos/sin in two maths libraries
                    np.testing.assert_array_max_ulp(a[name], b[name], maxulp=1)
                else:
                    assert a[name].tobytes() == t[name].tobytes() == b[name].tobytes(), name
            miss = np.isnan(t["x"])
            err = np.linalg.norm(_xyz(a)[~miss] - _xyz(t)[~miss], axis=1)
            assert err.max() == pytest.approx(cloud.max_error, rel=1e-9)
            assert np.array_equal(np.isnan(a["x"]), miss)


def _sqz2_body(data):
    """A QUANTIZED_ZSTD frame (docs/streams.md) split as the format states it: n, K streams, b
    single bytes, e exceptions, the overflow counts m_k and the decompressed body."""
    import zstandard
    assert data[:4] == b"SQZ2"
    n, step, _, xo, yo, zo, e = struct.unpack_from("<7I", data, 4)
    pos = set() if xo == 0xFFFFFFFF else {o + j for o in (xo, yo, zo) for j in range(4)}
    rest = [b for b in range(step) if b not in pos]
    words = singles = j = 0
    while j < len(rest):
        if rest[j] % 4 == 0 and rest[j:j + 4] == list(range(rest[j], rest[j] + 4)):
            words, j = words + 1, j + 4
        else:
            singles, j = singles + 1, j + 1
    k = words + (3 if pos else 0)
    body = zstandard.ZstdDecompressor().decompress(data[56:])
    m = list(struct.unpack_from(f"<{k}I", body))
    assert len(body) == 4 * k + (k + singles) * n + 12 * e + 4 * sum(m)
    return n, k, singles, e, m, body


def test_streams_malformed_quantized_bodies_are_refused_by_both_decoders(sensimd, tmp_path):
    """A daemon frame, its zstd body decompressed, broken in one way and compressed again: the
    C client (sensim_point_cloud_decode) and the Python client refuse every version (EPROTO,
    a ProtocolError naming what is wrong), and both decode the unbroken body again."""
    import pathlib
    import subprocess
    import zstandard
    from sensim.client import decode_quantized_zstd
    exe = pathlib.Path(os.environ.get("SENSIM_EXAMPLES_DIR", "")) / "sensim_decode_cloud"
    if not exe.exists():
        pytest.fail(f"{exe} is missing: build the sensim_decode_cloud target")
    with sensimd.client() as c:
        _scene(c)
        # x, y, z, intensity (float32), ring (uint16), time (float32) at 18: the words are
        # intensity and bytes 16..19, bytes 20 and 21 are single bytes
        c.create_lidar(5, ouster=OS1_64, misses="nan", layout="velodyne",
                       distance_noise={"stddevBase": 0.01})
        c.subscribe(5, "quantized_zstd")
        for k in range(2):
            _step_clouds(c, 0.1 * k)
        cloud = c.next_sensor_data(timeout=10).point_cloud
    data, count, step = cloud.data, cloud.count, cloud.point_step
    n, k, singles, e, m, body = _sqz2_body(data)
    assert (k, singles) == (5, 2)
    assert min(m[:3]) > 0 and max(m) < n    # codes past 254 in every position stream
    head, pack = data[:56], zstandard.ZstdCompressor(level=3).compress
    planes = 4 * k                                      # plane j starts at planes + j * n
    over = 4 * k + (k + singles) * n + 12 * e           # stream 0's overflow lists
    full0 = planes + body[planes:planes + n].index(255)
    miss = planes + body[planes:planes + n].index(0)    # a NaN miss: azimuth code 1

    def patch(at, new):
        return body[:at] + new + body[at + len(new):]

    def overflow0(value):
        """Stream 0's first overflow value set to `value` (its byte j in plane j of m_0)."""
        out = bytearray(body)
        for j in range(4):
            out[over + j * m[0]] = value >> 8 * j & 0xFF
        return bytes(out)

    def m0(value):
        return struct.pack("<I", value) + body[4:]

    cases = {
        "magic SQZ1": (b"SQZ1" + data[4:], "expected b'SQZ2'"),
        "m_0 + 1, the body 4 bytes longer": (head + pack(m0(m[0] + 1) + bytes(4)),
                                             "stream 0 has .* bytes of 255"),
        "m_0 - 1": (head + pack(m0(m[0] - 1)), "overflow counts say"),
        "m_0 > n": (head + pack(m0(n + 1)), "stream 0 has .* overflow values"),
        "overflow list cut short": (head + pack(body[:-1]), "overflow counts say"),
        "a byte after the overflow lists": (head + pack(body + b"\0"), "overflow counts say"),
        "a 255 of plane 0 made 254": (head + pack(patch(full0, b"\xfe")), "bytes of 255"),
        "an overflow value past 2^32 - 256": (head + pack(overflow0(0xFFFFFFFF)), "past 2"),
        "a miss of kind 3": (head + pack(patch(miss + n, b"\x03")), "miss of kind"),
        "the body longer than the header allows": (head + pack(body + bytes(16 * k * n)),
                                                   "the header allows"),
        "data after the zstd frame": (head + pack(body) + b"\0", "exactly one zstd frame"),
        "no content size in the frame":
            (head + zstandard.ZstdCompressor(write_content_size=False).compress(body),
             "does not state its size"),
        "a header of 55 bytes": (data[:55], "shorter than the 56-byte header"),
    }
    src, dst = tmp_path / "in.bin", tmp_path / "out.bin"

    def by_c(frame):
        src.write_bytes(frame)
        return subprocess.run([str(exe), "2", str(count), str(step), str(src), str(dst)],
                              capture_output=True, text=True, timeout=60)

    for name, (frame, message) in cases.items():
        with pytest.raises(errors.ProtocolError, match=message):
            decode_quantized_zstd(frame, count, step)
        run = by_c(frame)
        assert run.returncode == 1 and "EPROTO" in run.stderr, (name, run.stderr)

    # the harness breaks only what it means to: the body recompressed decodes as it was, and
    # the largest overflow value (a code of 2^32 - 1) is taken
    good = decode_quantized_zstd(data, count, step)
    assert decode_quantized_zstd(head + pack(body), count, step) == good
    assert by_c(head + pack(body)).returncode == 0 and dst.read_bytes() == good
    assert len(decode_quantized_zstd(head + pack(overflow0(0xFFFFFF00)), count, step)) == len(good)
    assert by_c(head + pack(overflow0(0xFFFFFF00))).returncode == 0

    # any stride decodes, 2^31 included (past every point: each prediction is 0), the same
    # fields by both
    wide = head[:12] + struct.pack("<I", 1 << 31) + data[16:]
    dt = point_cloud_to_numpy(cloud).dtype
    py = np.frombuffer(decode_quantized_zstd(wide, count, step), dtype=dt)
    assert by_c(wide).returncode == 0
    cc = np.frombuffer(dst.read_bytes(), dtype=dt)
    for name in ("intensity", "ring", "time"):
        assert py[name].tobytes() == cc[name].tobytes(), name
    np.testing.assert_array_max_ulp(py["x"], cc["x"], maxulp=1)


def test_streams_field_selection(sensimd):
    with sensimd.client() as c, sensimd.client(role="observer") as q, \
            sensimd.client(role="observer") as r:
        _scene(c)
        _lidar(c)
        q.subscribe(5, "quantized_zstd", fields=["intensity", "z", "x", "y", "colour"])
        r.subscribe(5, "raw", fields=["ring"])
        with pytest.raises(errors.InvalidArgument) as exc:
            c.subscribe(5, fields=["x", "x"])
        assert "subscribe.fields[1]" in exc.value.message
        ref = []
        for k in range(2):
            ref += _step_clouds(c, 0.1 * k)
        truth = point_cloud_to_numpy(ref[0].point_cloud)
        cq = q.next_sensor_data(timeout=10).point_cloud
        cr = r.next_sensor_data(timeout=10).point_cloud
        assert [f.name for f in cq.fields] == ["intensity", "z", "x", "y"]
        assert [f.offset for f in cq.fields] == [0, 4, 8, 12] and cq.point_step == 16
        got = point_cloud_to_numpy(cq)
        assert np.array_equal(got["intensity"], truth["intensity"])
        miss = np.isnan(truth["x"])
        err = np.linalg.norm(_xyz(got)[~miss] - _xyz(truth)[~miss], axis=1)
        assert err.max() <= cq.max_error * (1 + 1e-9) <= 0.001
        assert [f.name for f in cr.fields] == ["ring"] and cr.point_step == 2
        assert np.array_equal(point_cloud_to_numpy(cr)["ring"], truth["ring"])


def test_streams_empty_cloud_in_every_encoding(sensimd):
    """A lidar that sees nothing (misses removed) publishes empty clouds: every encoding
    carries and decodes them."""
    with sensimd.client() as c, sensimd.client() as z, sensimd.client() as q:
        c.set_ambient("custom", return_probability_scaling=0.0)
        c.create_lidar(5, ouster={"channels": 16, "columns": 512, "frequency": 10.0})
        c.subscribe(5, "raw")
        z.subscribe(5, "zstd")
        q.subscribe(5, "quantized_zstd")
        for k in range(2):
            _step_clouds(c, 0.1 * k)
        for cl in (c, z, q):
            cloud = cl.next_sensor_data(timeout=10).point_cloud
            assert cloud.count == 0
            assert len(point_cloud_to_numpy(cloud)) == 0
