# SPDX-License-Identifier: MIT
"""The Python client as a victim. Against a fake daemon (fakedaemon.py) that pushes what a
daemon should not: zstd clouds whose frames state or hold other sizes than their points, a zip
bomb (refused without the client's memory growing, measured in a process of its own), garbage,
malformed field layouts: every decoding failure is an errors.ProtocolError naming the field. The
queue of pushed frames is bounded in bytes and in frames, drops the oldest whole frames and
counts them; with the real daemon, an OS1-128 subscriber that does not read keeps to the bound."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import sensim
from fakedaemon import FakeDaemon, ok_reply, pushed
from sensim import errors, pb
from sensim.client import point_cloud_to_numpy

XYZI = [("x", 0), ("y", 4), ("z", 8), ("intensity", 12)]
RLE_BLOCK = 128 << 10   # the largest zstd block (Block_Maximum_Size)


def cloud(count: int, data: bytes = b"", encoding=pb.ENCODING_RAW, point_step: int = 16,
          fields=XYZI) -> "pb.PointCloud":
    pc = pb.PointCloud(point_step=point_step, count=count, encoding=encoding, data=data)
    for name, offset in fields:
        pc.fields.add(name=name, offset=offset, datatype=pb.PointField.FLOAT32, count=1)
    return pc


def zstd_frame(content_size: int | None, blocks, checksum: bool = False) -> bytes:
    """A zstd frame written by hand (RFC 8878, "Zstandard Frames"), not by a compressor: the
    magic, a header stating content_size in 8 bytes (None: not stated) and a 128 KiB window,
    then the blocks, each (type, size, content), the last flagged; type 1 (RLE) repeats its one
    content byte size times, type 3 is reserved (corrupt)."""
    fhd = (0xC0 if content_size is not None else 0) | (0x04 if checksum else 0)
    out = bytearray(struct.pack("<IBB", 0xFD2FB528, fhd, 7 << 3))   # window 2^(10+7)
    if content_size is not None:
        out += struct.pack("<Q", content_size)
    for i, (kind, size, content) in enumerate(blocks):
        head = (i == len(blocks) - 1) | kind << 1 | size << 3
        out += struct.pack("<I", head)[:3] + content
    return bytes(out)


def rle(n: int, byte: bytes = b"\0") -> list:
    """n RLE blocks of 128 KiB: 4 bytes of frame each."""
    return [(1, RLE_BLOCK, byte)] * n


def push_on_ping(frames):
    """A fake daemon's answer: on Ping, `frames` pushed (id 0), then the Pong."""
    def answer(env):
        if env.WhichOneof("body") == "ping":
            return list(frames) + ok_reply(env)
        return ok_reply(env)
    return answer


def receive(frames, **client_args):
    """Connect a client to a fake daemon that pushes `frames` before answering a Ping; return
    (client, every SensorData it then holds, in order). The client is closed."""
    with FakeDaemon(push_on_ping(frames)) as d, sensim.Client(port=d.port, **client_args) as c:
        c.ping()
        got = []
        while (sd := c.next_sensor_data(timeout=0)) is not None:
            got.append(sd)
    return c, got


def points(count: int, seed: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.normal(size=(count, 4)).astype("<f4")


# ---------------------------------------------------------------- zstd sizes and garbage

def test_hostile_control_clouds_decode():
    """The harness breaks only what each case means to: the same clouds made well (a frame of
    a real compressor with and without its size, two frames one after the other as zstd
    streams may be, the hand-written RLE frame of the exact size) decode to their points."""
    import zstandard
    pts = points(1000)
    raw = pts.tobytes()
    with_size = zstandard.ZstdCompressor(level=3).compress(raw)
    no_size = zstandard.ZstdCompressor(level=3, write_content_size=False).compress(raw)
    half = len(raw) // 2
    two = (zstandard.ZstdCompressor().compress(raw[:half])
           + zstandard.ZstdCompressor().compress(raw[half:]))
    frames = [pushed(pb.SensorData(sensor_id=1, point_cloud=cloud(1000, data, pb.ENCODING_ZSTD)))
              for data in (with_size, no_size, two)]
    rle_cloud = cloud(RLE_BLOCK // 16, zstd_frame(RLE_BLOCK, rle(1, b"\x7f")), pb.ENCODING_ZSTD)
    frames.append(pushed(pb.SensorData(sensor_id=1, point_cloud=rle_cloud)))
    _, got = receive(frames)
    assert len(got) == 4
    for sd in got[:3]:
        arr = point_cloud_to_numpy(sd.point_cloud)
        assert arr.tobytes() == raw and arr.dtype.names == ("x", "y", "z", "intensity")
        assert np.array_equal(arr["y"], pts[:, 1])
    assert point_cloud_to_numpy(got[3].point_cloud).tobytes() == b"\x7f" * RLE_BLOCK


GIB4 = 1 << 32

# name: (count, data, message)
ZSTD_CASES = {
    "header states 4 GiB for 1000 points":
        (1000, zstd_frame(GIB4, rle(1)), r"point_cloud\.data: .*states 4294967296 bytes"),
    "header and points 4 GiB":
        (GIB4 // 16, zstd_frame(GIB4, rle(1)), r"point_cloud\.count: .*max_bytes"),
    "no size, points 4 GiB":
        (GIB4 // 16, zstd_frame(None, rle(1)), r"point_cloud\.count: .*max_bytes"),
    "header states the points, holds more":
        (1000, zstd_frame(16000, rle(2)), r"point_cloud\.data: .*16000 bytes"),
    "no size, holds more than the points":
        (1000, zstd_frame(None, rle(2)), r"point_cloud\.data: .*more than 16000 bytes"),
    "no size, holds fewer than the points":
        (10000, zstd_frame(None, rle(1)), r"point_cloud\.data: .*131072 bytes, 160000 expected"),
    "a corrupt block":
        (RLE_BLOCK // 16, zstd_frame(RLE_BLOCK, [(3, 5, b"")]), r"point_cloud\.data: .*zstd"),
    "not zstd":
        (1000, b"not a zstd frame at all", r"point_cloud\.data: not a zstd frame"),
    "garbage after a zstd magic":
        (1000, struct.pack("<I", 0xFD2FB528) + b"\xff" * 40, r"point_cloud\.data"),
    "data after the frame":
        (RLE_BLOCK // 16, zstd_frame(RLE_BLOCK, rle(1)) + b"\0\0\0\0\0\0",
         r"point_cloud\.data: .*zstd"),
    "the frame cut short":
        (2 * RLE_BLOCK // 16, zstd_frame(2 * RLE_BLOCK, rle(2))[:-4],
         r"point_cloud\.data: .*131072 bytes, 262144 expected"),
}


@pytest.mark.parametrize("case", list(ZSTD_CASES))
def test_hostile_zstd_cloud_is_a_protocol_error(case):
    count, data, message = ZSTD_CASES[case]
    sd = pb.SensorData(sensor_id=3, point_cloud=cloud(count, data, pb.ENCODING_ZSTD))
    _, got = receive([pushed(sd, 1)])
    with pytest.raises(errors.ProtocolError, match=message):
        point_cloud_to_numpy(got[0].point_cloud)
    with pytest.raises(errors.ProtocolError, match=message):
        sensim.outputs(got)


def test_hostile_max_bytes_is_the_callers_choice():
    """The bound of a decoded cloud is max_bytes (the client's default frame bound unless
    given): a cloud one byte past it is refused, the same cloud within a larger one decodes."""
    import zstandard
    raw = points(4096).tobytes()
    pc = cloud(4096, zstandard.ZstdCompressor().compress(raw), pb.ENCODING_ZSTD)
    with pytest.raises(errors.ProtocolError, match=r"point_cloud\.count: .*max_bytes 65535"):
        point_cloud_to_numpy(pc, max_bytes=len(raw) - 1)
    assert point_cloud_to_numpy(pc, max_bytes=len(raw)).tobytes() == raw


CHILD = textwrap.dedent("""
    import json, sys
    import zstandard
    import sensim
    from sensim import errors
    from sensim.client import point_cloud_to_numpy

    def hwm():
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024

    with sensim.Client(port=int(sys.argv[1])) as c:
        c.ping()
        pc = c.next_sensor_data(timeout=0).point_cloud
        data_bytes = len(pc.data)
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")   # the peak resident size starts again from the current one
        before = hwm()
        try:
            point_cloud_to_numpy(pc)
            result = "decoded"
        except errors.ProtocolError as exc:
            result = "ProtocolError: " + str(exc)
        except BaseException as exc:
            result = type(exc).__name__ + ": " + str(exc)
        print(json.dumps({"growth": hwm() - before, "result": result, "data": data_bytes}))
""")


@pytest.mark.parametrize("count", [(2 << 30) // 16, (1 << 20) // 16],
                         ids=["points 2 GiB", "points 1 MiB"])
def test_hostile_zip_bomb_does_not_grow_the_client(count):
    """A 3 KB zstd frame stating 2 GiB, holding 100 MiB of zeros then a corrupt block: refused
    before it is decompressed. The client runs in a process of its own, whose peak resident
    size is measured around the decoding (/proc/self/status VmHWM, reset just before)."""
    bomb = zstd_frame(2 << 30, rle(800) + [(3, 5, b"")])
    sd = pb.SensorData(sensor_id=3, point_cloud=cloud(count, bomb, pb.ENCODING_ZSTD))
    with FakeDaemon(push_on_ping([pushed(sd, 1)])) as d:
        run = subprocess.run([sys.executable, "-c", CHILD, str(d.port)], capture_output=True,
                             text=True, timeout=120, env=os.environ)
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert out["data"] == len(bomb) < 4096
    assert out["growth"] < 4 << 20, out   # bytes; the bomb decompressed holds 100 MiB
    assert out["result"].startswith("ProtocolError: EPROTO: point_cloud."), out["result"]


# ---------------------------------------------------------------- malformed layouts

def _with_unknown_datatype(value: int) -> "pb.PointCloud":
    """An xyzi cloud whose field 1 carries datatype `value` on the wire (not one of the enum's:
    protobuf keeps it as an unknown field and reads the datatype as unset)."""
    pc = cloud(2, bytes(32))
    pc.fields[1].ClearField("datatype")
    pc.fields[1].MergeFromString(bytes([3 << 3, value]))
    return pc


def _field(pc, i, **changes):
    for key, value in changes.items():
        setattr(pc.fields[i], key, value)
    return pc


# name: (cloud, message)
LAYOUT_CASES = {
    "offset past point_step": (_field(cloud(2, bytes(32)), 3, offset=14),
                               r"point_cloud\.fields\[3\] .*passes point_step 16"),
    "offset far past point_step": (_field(cloud(2, bytes(32)), 0, offset=0xFFFFFFF0),
                                   r"point_cloud\.fields\[0\] .*passes point_step 16"),
    "unknown datatype": (_with_unknown_datatype(9), r"point_cloud\.fields\[1\]\.datatype"),
    "datatype unset": (_with_unknown_datatype(0), r"point_cloud\.fields\[1\]\.datatype"),
    "overlapping fields": (_field(cloud(2, bytes(32)), 1, offset=2),
                           r"point_cloud\.fields\[1\] .*overlap.*fields\[0\]"),
    "a field inside another": (_field(_field(cloud(2, bytes(32)), 0, count=4), 2, offset=8),
                               r"point_cloud\.fields\[[123]\] .*overlap.*fields\[0\]"),
    "huge count": (_field(cloud(2, bytes(32)), 3, count=0xFFFFFFFF),
                   r"point_cloud\.fields\[3\] .*passes point_step 16"),
    "count 2^31": (_field(cloud(2, bytes(32)), 0, count=1 << 31),
                   r"point_cloud\.fields\[0\] .*passes point_step 16"),
    "a repeated name": (_field(cloud(2, bytes(32)), 2, name="x"),
                        r"point_cloud\.fields\[2\]\.name: 'x' repeats fields\[0\]"),
    "an empty name": (_field(cloud(2, bytes(32)), 1, name=""),
                      r"point_cloud\.fields\[1\]\.name: empty"),
    "point_step 0 with points": (cloud(5, b"", point_step=0, fields=[]),
                                 r"point_cloud\.point_step: 0 for 5 points"),
    "RAW data shorter than count x point_step": (cloud(2, bytes(31)),
                                                 r"point_cloud\.data: 31 bytes .*32"),
    "RAW data longer than count x point_step": (cloud(2, bytes(33)),
                                                r"point_cloud\.data: 33 bytes .*32"),
    "garbage QUANTIZED_ZSTD": (cloud(2, b"SQZ2" + bytes(100), pb.ENCODING_QUANTIZED_ZSTD),
                               r"point_cloud\.data \(QUANTIZED_ZSTD\): "),
}


def _unknown_encoding() -> bytes:
    """A SensorData whose cloud has encoding 7 on the wire (kept as an unknown field)."""
    sd = pb.SensorData(sensor_id=3, point_cloud=cloud(2, bytes(32)))
    sd.point_cloud.ClearField("encoding")
    sd.point_cloud.MergeFromString(bytes([4 << 3, 7]))
    return sd


@pytest.mark.parametrize("case", list(LAYOUT_CASES))
def test_hostile_layout_is_a_protocol_error(case):
    pc, message = LAYOUT_CASES[case]
    _, got = receive([pushed(pb.SensorData(sensor_id=3, point_cloud=pc), 1)])
    with pytest.raises(errors.ProtocolError, match=message):
        point_cloud_to_numpy(got[0].point_cloud)
    with pytest.raises(errors.ProtocolError, match=message):
        sensim.Client.lidar_clouds(got, 3)


def test_hostile_unknown_encoding_is_a_protocol_error():
    _, got = receive([pushed(_unknown_encoding(), 1)])
    with pytest.raises(errors.ProtocolError, match=r"point_cloud\.encoding"):
        point_cloud_to_numpy(got[0].point_cloud)


def test_hostile_layout_controls_decode():
    """What the layout checks let through: fields in any order with gaps between them, a field
    of several elements, count 0 read as 1, no fields at all, an empty cloud of point_step 0."""
    pc = cloud(3, bytes(range(3 * 24)), point_step=24, fields=[("z", 16), ("x", 0)])
    pc.fields.add(name="ring", offset=6, datatype=pb.PointField.UINT16, count=3)
    pc.fields[1].count = 0
    _, got = receive([pushed(pb.SensorData(sensor_id=3, point_cloud=pc), 1)])
    arr = point_cloud_to_numpy(got[0].point_cloud)
    assert arr.dtype.names == ("z", "x", "ring") and arr["ring"].shape == (3, 3)
    assert arr["ring"][1].tolist() == [0x1F1E, 0x2120, 0x2322]
    assert arr.dtype.itemsize == 24
    assert len(point_cloud_to_numpy(cloud(2, bytes(16), point_step=8, fields=[]))) == 2
    assert len(point_cloud_to_numpy(cloud(0, b"", point_step=0, fields=[]))) == 0


# ---------------------------------------------------------------- the queue of pushed frames

def _clouds(n: int, size: int, first: int = 1) -> list:
    """n pushed RAW clouds of `size` bytes of points each, sequences from `first`, each its own
    bytes (its sequence in every point's intensity)."""
    out = []
    for k in range(first, first + n):
        pts = np.zeros((size // 16, 4), "<f4")
        pts[:, 3] = k
        sd = pb.SensorData(sensor_id=4, frame=k, point_cloud=cloud(size // 16, pts.tobytes()))
        out.append(pushed(sd, k))
    return out


def test_hostile_pushed_queue_is_bounded_in_bytes():
    """40 frames of 1 MiB pushed to a client that reads none of them while it waits for a
    reply, with a bound of 8.5 MiB: it keeps the newest 8 whole frames and counts the 32
    others and their bytes (the frames' sizes on the wire)."""
    frames = _clouds(40, 1 << 20)
    sizes = [len(f.SerializeToString()) for f in frames]
    bound = (17 << 20) // 2
    assert 8 * sizes[0] <= bound < 9 * sizes[0]
    with FakeDaemon(push_on_ping(frames)) as d, \
            sensim.Client(port=d.port, pushed_max_bytes=bound) as c:
        assert c.pushed_max_bytes == bound
        c.ping()
        assert c.frames_dropped == c.pushed_dropped == 32
        assert c.bytes_dropped == sum(sizes[:32])
        assert c.pushed_bytes == sum(sizes[32:]) <= bound
        got = [c.next_sensor_data(timeout=0) for _ in range(9)]
        assert got[8] is None and c.pushed_bytes == 0
        assert [sd.sequence for sd in got[:8]] == list(range(33, 41))
        for sd in got[:8]:
            assert np.all(point_cloud_to_numpy(sd.point_cloud)["intensity"] == sd.sequence)
        # frames arriving while next_sensor_data waits keep to the bound too
        assert c.ping().payload == b""
        assert c.frames_dropped == 64 and c.pushed_bytes <= bound


def test_hostile_pushed_queue_default_bound():
    """Without pushed_max_bytes the bound is sensim.client.DEFAULT_PUSHED_MAX_BYTES, 64 MiB:
    of 80 frames of 1 MiB the newest 63 stay."""
    from sensim.client import DEFAULT_PUSHED_MAX_BYTES
    assert DEFAULT_PUSHED_MAX_BYTES == 64 << 20
    frames = _clouds(80, 1 << 20)
    size = len(frames[0].SerializeToString())
    keep = DEFAULT_PUSHED_MAX_BYTES // size
    assert keep == 63
    c, got = receive(frames)
    assert [sd.sequence for sd in got] == list(range(81 - keep, 81))
    assert c.frames_dropped == 80 - keep


def test_hostile_pushed_frame_larger_than_the_bound():
    """A frame larger than the whole bound is the one kept: the newest frame always stays (it
    is in memory already), the older ones go."""
    frames = _clouds(5, 2 << 20)
    c, got = receive(frames, pushed_max_bytes=1 << 20)
    assert [sd.sequence for sd in got] == [5]
    assert c.frames_dropped == 4
    assert c.bytes_dropped == sum(len(f.SerializeToString()) for f in frames[:4])


def test_hostile_pushed_queue_is_bounded_in_frames():
    """Small frames are bounded by their number too (pushed_queue): each costs a Python object
    far larger than its bytes."""
    frames = [pushed(pb.SensorData(sensor_id=2, frame=k, scalar={"position": k}), k)
              for k in range(1, 21)]
    c, got = receive(frames, pushed_queue=5)
    assert [sd.sequence for sd in got] == [16, 17, 18, 19, 20]
    assert [sd.scalar.position for sd in got] == [16, 17, 18, 19, 20]
    assert c.frames_dropped == 15
    assert c.bytes_dropped == sum(len(f.SerializeToString()) for f in frames[:15])


@pytest.mark.parametrize("args, message", [
    ({"pushed_max_bytes": -1}, "pushed_max_bytes"),
    ({"pushed_max_bytes": 1.5}, "pushed_max_bytes"),
    ({"pushed_queue": 0}, "pushed_queue"),
])
def test_hostile_pushed_queue_arguments(args, message):
    with pytest.raises(ValueError, match=message):
        sensim.Client(connect=False, **args)


OS1_128 = {"channels": 128, "columns": 2048, "frequency": 10.0}


def test_hostile_os1_128_subscriber_that_does_not_read(sensimd_factory):
    """A controller subscribed to its own OS1-128 (4 MiB frames) steps 12 revolutions and never
    asks for a pushed frame: the frames it receives while waiting for its replies stay within
    its 10 MiB bound, the newest two whole frames, as the StepDone clouds of the same
    revolutions; the daemon (its queue large enough) dropped none, so the client's count is
    every frame it did not keep."""
    d = sensimd_factory("--subscriber-max-bytes", str(1 << 30), "--subscriber-soft-seconds", "0")
    bound = 10 << 20
    with d.client(pushed_max_bytes=bound) as c:
        c.set_ambient("custom", return_probability_scaling=0.0)
        c.create_primitive(1, "plane", half_size=40.0)
        c.create_object(1, geometry_id=1, local_pose={"position": (0, 0, -1.5)})
        c.create_lidar(5, ouster=OS1_128, misses="zero")
        c.subscribe(5, "raw")
        clouds = {}
        for k in range(13):
            c.update_state(0.1 * k)
            for out in c.step(0.1 * k).outputs:
                clouds[out.frame] = out.point_cloud.data
        assert len(clouds) == 12
        info = [s for s in c.get_info().subscribers if s.sensor_id == 5]
        assert len(info) == 1 and info[0].frames_dropped == 0
        c.unsubscribe(5)   # every frame sent has arrived before this reply
        assert c.pushed_bytes <= bound
        kept = []
        while (sd := c.next_sensor_data(timeout=0)) is not None:
            kept.append(sd)
        size = len(kept[0].point_cloud.data)
        assert size == 128 * 2048 * 16
        assert [sd.sequence for sd in kept] == [11, 12]
        assert c.frames_dropped == 10
        assert 10 * size < c.bytes_dropped < 10 * (size + 128)
        for sd in kept:
            assert sd.point_cloud.data == clouds[sd.frame]


# ---------------------------------------------------------------- replies nobody asked for

def _reply_to(ids, body="pong"):
    """A fake daemon's answer: on Ping, replies with `ids` (requests never sent) first."""
    def answer(env):
        if env.WhichOneof("body") == "ping":
            extra = []
            for i in ids:
                e = pb.Envelope(id=i)
                getattr(e, body).SetInParent()
                extra.append(e)
            return extra + ok_reply(env)
        return ok_reply(env)
    return answer


@pytest.mark.parametrize("ids,body", [([99], "pong"), ([1], "pong"), ([7, 8, 9], "step_done"),
                                      ([5], "sensor_data")])
def test_hostile_reply_to_no_request_is_a_protocol_error(ids, body):
    """A reply whose id names no request in flight (never sent, or already answered: id 1 is
    the Hello's) was kept in the client until asked for, without bound. It is a protocol
    error naming the id, and the connection is closed."""
    with FakeDaemon(_reply_to(ids, body)) as d, sensim.Client(port=d.port) as c:
        with pytest.raises(errors.ProtocolError, match=f"request {ids[0]}, which is not"):
            c.ping()
        assert c.closed


def test_hostile_describe_pages_that_do_not_move_on_are_a_protocol_error():
    """A daemon answering every Describe with the same page and more_sensors set was asked
    for pages forever, the description growing: ids must increase above the last page's."""
    asked = []

    def answer(env):
        if env.WhichOneof("body") != "describe":
            return ok_reply(env)
        asked.append(env.describe.sensors_after)
        out = pb.Envelope(id=env.id)
        out.description.sensors.add(id=1)
        out.description.sensors.add(id=2)
        out.description.sensor_count = 2
        out.description.more_sensors = len(asked) < 2000   # a bound for the test only
        return [out]
    with FakeDaemon(answer) as d, sensim.Client(port=d.port) as c:
        with pytest.raises(errors.ProtocolError, match="sensors not in increasing id order"):
            c.describe()
    assert asked == [0, 2]


def test_subscription_counts_the_frames_dropped_before_its_first(tmp_path):
    """A subscription's frames are numbered from 1: when the first to arrive is number 3 (the
    daemon's encoder dropped two), Subscription.gaps and the recorder's summary count 2, and
    every later gap as well."""
    from sensim.record import Recorder
    frames = []
    for seq in (3, 4, 7):
        sd = pb.SensorData(sensor_id=5, time=0.1 * seq, frame=seq)
        sd.scalar.position = 0.5
        frames.append(pushed(sd, seq))

    def answer(env):
        if env.WhichOneof("body") == "subscribe":
            return ok_reply(env) + frames
        return ok_reply(env)
    with FakeDaemon(answer) as d:
        with sensim.Subscription(port=d.port, sensors=[5]) as sub:
            got = [sub.get(timeout=10) for _ in range(3)]
            assert [o.sequence for o in got] == [3, 4, 7]
            assert sub.gaps == 2 + 2
        summary = Recorder(port=d.port, sensors=[5], files={"csv": tmp_path}).run(
            max_records=3, wall=20)
        assert summary.records == 3 and summary.sensors[5].gaps == 4


# ---------------------------------------------------------------- records sent ahead of a step

def _varint(v: int) -> bytes:
    out = bytearray()
    while v >= 0x80:
        out.append(v & 0x7F | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def _part(request_id: int, size: int) -> bytes:
    """Envelope{id, sensor_data{sensor_id 1, an unknown bytes field 15 of zeros}} of exactly
    `size` bytes (at least 16), written by hand."""
    for pad in range(size, -1, -1):
        data = b"\x08\x01\x7a" + _varint(pad) + bytes(pad)
        env = b"\x08" + _varint(request_id) + b"\xa2\x03" + _varint(len(data)) + data
        if len(env) == size:
            return env
    raise ValueError(size)


def _parts_then_done(nparts: int, size: int, sent: list):
    """A fake daemon's answer: a Step answered by nparts records of `size` bytes sent ahead,
    then the StepDone saying so (`sent` counts the parts written)."""
    def answer(env):
        if env.WhichOneof("body") != "step":
            return ok_reply(env)

        def frames():
            part = _part(env.id, size)
            for _ in range(nparts):
                yield part
                sent[0] += 1
            done = pb.Envelope(id=env.id)
            done.step_done.step = 1
            done.step_done.outputs_in_parts = nparts
            yield done
        return frames()
    return answer


@pytest.mark.parametrize("size,limit,name", [
    (16, sensim.client.STEP_MAX_PARTS, "STEP_MAX_PARTS = 65536 frames"),
    (1 << 20, sensim.client.STEP_MAX_PART_BYTES >> 20, "STEP_MAX_PART_BYTES = 268435456 bytes")])
def test_hostile_step_parts_are_bounded(size, limit, name):
    """Records sent ahead of a StepDone were kept without bound: a daemon that never ends the
    reply filled the client's memory. At most STEP_MAX_PARTS frames of STEP_MAX_PART_BYTES
    together are kept (a step at the limits is whole); past them the step is a ProtocolError
    naming the limit and the connection is closed."""
    sent = [0]
    with FakeDaemon(_parts_then_done(limit, size, sent)) as d, sensim.Client(port=d.port) as c:
        done = c.step(0.0)
        assert len(done.outputs) == limit and done.outputs_in_parts == limit
        assert all(o.sensor_id == 1 for o in done.outputs)
    more = limit + 1000
    sent = [0]
    with FakeDaemon(_parts_then_done(more, size, sent)) as d, \
            sensim.Client(port=d.port, timeout=30) as c:
        with pytest.raises(errors.ProtocolError, match=name):
            c.step(0.0)
        assert c.closed
    if size > 1000:
        assert sent[0] < more  # the client stopped reading: the peer could not go on

