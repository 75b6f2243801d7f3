# SPDX-License-Identifier: MIT
"""The Foxglove bridge's behaviour towards viewers and the daemon, through a minimal viewer of
foxglove.websocket.v1 (foxglove_support.Viewer, on the websockets library) and raw sockets:
refused requests change nothing, each viewer gets only what it subscribed to, a viewer that
never reads keeps the bridge's memory bounded while another is served, sensors are found and
followed as they come and go, and the bridge leaves an environment it is alone in."""

from __future__ import annotations

import base64
import json
import math
import os
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

from sensim.foxglove import Bridge
from foxglove_support import SUBPROTOCOL, BridgeProcess, Stepper, Viewer, body_pose, \
    build_scene, read_cloud2, read_tf

MiB = 1 << 20


def bridge(port: int, **kw) -> Bridge:
    kw.setdefault("environment", "demo")
    return Bridge(port=port, listen="127.0.0.1:0", poll_interval=0.2, **kw)


def data_of(viewer: Viewer, sub: int) -> list:
    return [d for d in viewer.data if d[0] == sub]


def test_viewer_requests_refused_change_nothing(sensimd):
    with sensimd.client(environment="demo") as c:
        build_scene(c)
        with bridge(sensimd.port) as b, Stepper(c) as stepper, Viewer(b.url) as v:
            v.wait(lambda: len(v.json) >= 2, "serverInfo and advertise")
            assert v.json[0]["op"] == "serverInfo" and v.json[0]["capabilities"] == ["time"]
            assert v.json[1]["op"] == "advertise"
            cloud = v.channel("/sensor_10/points")["id"]
            imu = v.channel("/sensor_11/imu")["id"]
            # nobody watches: records arrive from the daemon, none is converted
            stats = b.stats()
            assert stats["daemon"]["records"] > 0 and stats["daemon"]["converted"] == 0

            bad = [
                ("{not json", "message: not JSON"),
                ('["subscribe"]', "message: expected a JSON object"),
                ('{"op": "advertise", "channels": []}', "op: 'advertise' is not served"),
                ('{"op": "subscribe"}', "subscribe.subscriptions: expected an array"),
                (json.dumps({"op": "subscribe", "subscriptions": [{"id": 1, "channelId": 999}]}),
                 "subscribe.subscriptions[0].channelId: no channel 999"),
                (json.dumps({"op": "subscribe", "subscriptions": [
                    {"id": 1, "channelId": cloud}, {"id": 1, "channelId": imu}]}),
                 "subscribe.subscriptions[1].id: subscription 1 is in use"),
                (json.dumps({"op": "subscribe", "subscriptions": [
                    {"id": 1, "channelId": cloud}, {"id": 2, "channelId": cloud}]}),
                 f"subscribe.subscriptions[1].channelId: channel {cloud} is subscribed"),
                (json.dumps({"op": "subscribe", "subscriptions": [{"id": -1, "channelId": cloud}]}),
                 "subscribe.subscriptions[0].id: expected an integer in [0, 4294967295]"),
                (json.dumps({"op": "subscribe",
                             "subscriptions": [{"id": True, "channelId": cloud}]}),
                 "subscribe.subscriptions[0].id: expected an integer"),
                ('{"op": "unsubscribe", "subscriptionIds": [7]}',
                 "unsubscribe.subscriptionIds[0]: no subscription 7"),
            ]
            for text, expected in bad:
                v.send_text(text)
            v.send_bytes(b"\x01\x00\x00\x00\x00payload")
            v.wait(lambda: len(v.statuses()) == len(bad) + 1, "a status for each refusal")
            for status, (_, expected) in zip(v.statuses(), bad):
                assert status["level"] == 2 and expected in status["message"], status
            assert "binary messages" in v.statuses()[-1]["message"]
            time.sleep(0.5)
            assert v.data == []   # none of them subscribed to anything
            assert b.stats()["daemon"]["converted"] == 0

            # a valid subscription: its messages only, under its id; then unsubscribed
            v.subscribe([(5, cloud)])
            v.wait(lambda: len(data_of(v, 5)) >= 3, "three clouds")
            assert {d[0] for d in v.data} == {5}
            for sub, ts, payload, _ in data_of(v, 5):
                msg = read_cloud2(payload)
                assert msg["stamp"] == ts
                truth = stepper.cloud(10, msg["seq"])
                assert msg["data"] == truth.tobytes()
            assert v.times and v.times == sorted(v.times)
            v.unsubscribe([5])
            # a refused request after it: the bridge answers a viewer's requests in order and
            # sends it everything in one queue, so once its status is here, every cloud queued
            # before the unsubscription was applied is here too
            v.unsubscribe([5])
            v.wait(lambda: len(v.statuses()) == len(bad) + 2, "the status of a second refusal")
            assert "unsubscribe.subscriptionIds[0]: no subscription 5" in \
                v.statuses()[-1]["message"]
            n = len(v.data)
            time.sleep(1.0)
            assert len(v.data) == n, "messages after unsubscribing"
            assert len(v.statuses()) == len(bad) + 2


def test_each_viewer_gets_only_its_channels(sensimd):
    with sensimd.client(environment="demo") as c:
        build_scene(c)
        with bridge(sensimd.port) as b, Stepper(c), Viewer(b.url) as a, Viewer(b.url) as bb:
            cloud = a.channel("/sensor_10/points")["id"]
            imu = bb.channel("/sensor_11/imu")["id"]
            a.subscribe([(1, cloud)])
            bb.subscribe([(1, imu)])
            a.wait(lambda: len(a.data) >= 3, "clouds for viewer a")
            bb.wait(lambda: len(bb.data) >= 10, "IMU samples for viewer b")
            time.sleep(0.3)
            assert all(len(d[2]) > 10000 for d in a.data)        # clouds only
            assert all(len(d[2]) < 1000 for d in bb.data)        # IMU samples only
            chans = {ch["topic"]: ch["subscribers"] for ch in b.stats()["channels"]}
            # /tf (the described frames) is advertised, nobody subscribed to it
            assert chans == {"/sensor_10/points": 1, "/sensor_11/imu": 1, "/tf": 0}


def raw_slow_viewer(port: int, channel: int) -> socket.socket:
    """A viewer that subscribes and then never reads: a socket with a small receive buffer,
    the client's opening handshake and one masked text frame written by hand."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(("127.0.0.1", port))
    key = base64.b64encode(os.urandom(16)).decode()
    s.sendall((f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
               f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
               f"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: {SUBPROTOCOL}\r\n\r\n"
               ).encode())
    head = b""
    while b"\r\n\r\n" not in head:
        head += s.recv(1)
    assert head.startswith(b"HTTP/1.1 101"), head
    text = json.dumps({"op": "subscribe",
                       "subscriptions": [{"id": 1, "channelId": channel}]}).encode()
    mask = os.urandom(4)
    body = bytes(b ^ mask[i % 4] for i, b in enumerate(text))
    assert len(text) < 126
    s.sendall(bytes([0x81, 0x80 | len(text)]) + mask + body)
    return s


def test_a_viewer_that_never_reads_keeps_memory_bounded(sensimd):
    """An OS1-128 revolution every step, as fast as the daemon steps; one viewer never reads.
    Run until the bridge has had 128 MiB of clouds for it (an unbounded queue would hold
    them), then the bridge's memory must have grown by far less, the clouds must have been
    dropped and counted, and the other viewer must have had its share all along."""
    with sensimd.client(environment="demo") as c:
        build_scene(c, imu=False)
        c.create_lidar(20, ouster={"channels": 128, "columns": 2048, "frequency": 10.0},
                       mount=((0.0, 0.0, 1.8), (0, 0, 0, 1)))
        with BridgeProcess(sensimd.port, "--sensor", "20", "--viewer-max-bytes",
                           str(4 * MiB)) as bp, \
                Stepper(c, dt=0.1, pace=0.0, outputs=False) as stepper, \
                Viewer(bp.url) as fast:
            cloud = fast.channel("/sensor_20/points")["id"]
            fast.subscribe([(1, cloud)])
            fast.wait(lambda: len(fast.data) >= 3, "clouds for the reading viewer", 60)
            # the reading viewer's share of the revolutions alone, under this machine's load
            steps_a, got_a = stepper.steps, len(fast.data)
            time.sleep(3.0)
            share_alone = (len(fast.data) - got_a) / max(1, stepper.steps - steps_a)
            slow = raw_slow_viewer(bp.port, cloud)

            peer = "127.0.0.1:%d" % slow.getsockname()[1]

            def slow_viewer() -> dict:
                return next(v for v in bp.stats()["viewers"] if v["peer"] == peer)

            def offered(v: dict) -> int:   # bytes the bridge had for it: sent, queued, dropped
                return v["bytes_sent"] + v["queued_bytes"] + v["bytes_dropped"]

            try:
                # warm up: the slow viewer's socket buffers fill and its queue reaches its bound
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline and slow_viewer()["bytes_dropped"] == 0 \
                        and slow_viewer()["queued_bytes"] < 32 * MiB:
                    time.sleep(0.2)
                rss0, base = bp.rss(), offered(slow_viewer())
                steps0, got0 = stepper.steps, len(fast.data)
                deadline = time.monotonic() + 400   # a sanitized daemon: ~1 cloud/s
                peak = rss0
                while time.monotonic() < deadline:
                    time.sleep(0.5)
                    peak = max(peak, bp.rss())
                    slow_now = slow_viewer()
                    if offered(slow_now) - base >= 128 * MiB:
                        break
                assert offered(slow_now) - base >= 128 * MiB, slow_now
                steps1, got1 = stepper.steps, len(fast.data)
                fast_now = next(v for v in bp.stats()["viewers"] if v["peer"] != peer)
            finally:
                slow.close()
    print(f"slow viewer: offered {(offered(slow_now) - base) / MiB:.0f} MiB, dropped "
          f"{slow_now['bytes_dropped'] / MiB:.0f} MiB; bridge RSS {rss0 / MiB:.0f} MiB, grew "
          f"{(peak - rss0) / MiB:.1f} MiB; reading viewer {got1 - got0} clouds of "
          f"{steps1 - steps0} steps ({share_alone:.2f} of them alone)")
    # a cloud is 128 x 2048 x 16 bytes = 4 MiB: the queue bound (4 MiB), a message in the
    # library and one in the socket, and room for the allocator
    assert slow_now["bytes_dropped"] >= 100 * MiB and slow_now["frames_sent"] < 20
    assert slow_now["queued_bytes"] <= 4 * MiB + 4 * MiB + 64
    assert peak - rss0 < 48 * MiB, (peak - rss0) / MiB
    # the reading viewer kept its share of the revolutions (at least half of it alone)
    share = (got1 - got0) / max(1, steps1 - steps0)
    assert share >= 0.5 * share_alone, (share, share_alone)
    assert fast_now["frames_sent"] > 0


def test_bridge_finds_every_sensor_and_follows_them(sensimd):
    with sensimd.client(environment="demo") as c:
        build_scene(c, imu=False)
        c.create_imu(40, body_id=1, accelerometer=True)
        c.create_imu(300, body_id=1, gyroscope=True)         # listed by Describe: any id
        with bridge(sensimd.port) as b, Stepper(c) as first, Viewer(b.url) as v:
            v.channel("/sensor_10/points")
            v.channel("/sensor_40/imu")
            v.channel("/sensor_300/imu")
            assert b.stats()["daemon"]["sensors"] == [10, 40, 300]
            # removed: unadvertised; created: advertised (a cone sensor, as JSON); by a second
            # controller (a client is used by one thread at a time, the stepper's is busy)
            with sensimd.client(environment="demo") as c2:
                c2.remove("sensor", 40)
                v.wait(lambda: any(j.get("op") == "unadvertise" for j in v.json),
                       "unadvertise")
                c2.create_cone(7, body_id=1, range=20.0)
            cone = v.channel("/sensor_7/cone")
            assert (cone["encoding"], cone["schemaEncoding"]) == ("json", "jsonschema")
            assert json.loads(cone["schema"])["title"] == "sensim.ConeReading"
            v.subscribe([(3, cone["id"])])
            v.wait(lambda: len(v.data) >= 3, "cone readings")
            for _, ts, payload, _ in list(v.data):
                r = json.loads(payload)
                rec = first.record(7, r["frame"])
                assert ts == round(rec.time * 1e9) and r["time"] == rec.time
                assert r["detected"] == rec.cone.detected
                assert r["range"] == rec.cone.range and r["object_id"] == rec.cone.object_id
        # named, only that sensor is served
        with bridge(sensimd.port, sensors=[300]) as b, Stepper(c, t0=first.t), \
                Viewer(b.url) as v:
            v.channel("/sensor_300/imu")
            time.sleep(0.5)
            assert sorted(ch["topic"] for ch in v.channels.values()) == \
                ["/sensor_300/imu", "/tf"]


def test_bridge_publishes_the_frames_the_daemon_describes(sensimd):
    """Nobody tells the bridge where anything is: /tf carries each sensor's mount on its body
    (or in world) and each body's pose at the simulation times the controller sent."""
    h = math.sqrt(0.5)
    with sensimd.client(environment="demo") as c:
        build_scene(c)
        c.create_imu(12, body_id=1, mount=(0.1, 0.0, 0.2, 0.0, 0.0, h, h), gyroscope=True)
        with bridge(sensimd.port) as b, Stepper(c) as stepper, Viewer(b.url) as v:
            tf = v.channel("/tf")
            v.subscribe([(1, tf["id"])])
            v.wait(lambda: sum(any(t["child"] == "body_1" for t in read_tf(p))
                               for _, _, p, _ in data_of(v, 1)) >= 5, "body poses on /tf")
    # read once the stepper has stopped: the viewer may have seen the pose of a step whose
    # reply the stepper had not yet collected when the wait above ended
    sent = {round(t * 1e9): poses[0] for t, poses in
            ((round(k * stepper.dt, 9), p) for k, p in stepper.poses.items())}
    sent[0] = body_pose(0.0)
    seen = 0
    for _, ts, payload, _ in data_of(v, 1):
        by_child = {t["child"]: t for t in read_tf(payload)}
        assert by_child["sensor_10"]["parent"] == "world"
        assert by_child["sensor_10"]["pose"] == [0, 0, 1.5, 0, 0, 0, 1]
        assert by_child["sensor_11"]["parent"] == "body_1"
        assert by_child["sensor_11"]["pose"] == [0, 0, 0, 0, 0, 0, 1]
        assert by_child["sensor_12"]["parent"] == "body_1"
        np.testing.assert_allclose(by_child["sensor_12"]["pose"], [0.1, 0, 0.2, 0, 0, h, h],
                                   atol=1e-15)
        if "body_1" in by_child:
            body = by_child["body_1"]
            assert body["parent"] == "world" and body["stamp"] == ts
            np.testing.assert_allclose(body["pose"], sent[ts], atol=1e-12)
            seen += 1
    assert seen >= 5


def test_bridge_leaves_an_environment_it_is_alone_in(sensimd):
    """The simulation ends, the bridge stays: it leaves so the environment goes, and the next
    simulation creates the same ids in a fresh one, which the bridge serves again."""
    with bridge(sensimd.port) as b, Viewer(b.url) as v:
        for run in range(2):
            with sensimd.client(environment="demo") as c:
                build_scene(c)        # ALREADY_EXISTS if the old environment were alive
                with Stepper(c):
                    ch = v.channel("/sensor_10/points")
                    v.subscribe([(10 + run, ch["id"])])
                    v.wait(lambda: len(data_of(v, 10 + run)) >= 2, f"clouds of run {run}")
                    v.unsubscribe([10 + run])
            v.wait(lambda: "/sensor_10/points" not in
                   {c["topic"] for c in v.channels.values()}, "the channel withdrawn", 30)
        assert b.stats()["daemon"]["decode_errors"] == 0


def test_websocket_refusals():
    with Bridge(port=1, listen="127.0.0.1:0", max_viewers=1) as b:   # no daemon there
        # a WebSocket must offer the protocol
        with pytest.raises(AssertionError, match=r"InvalidStatusCode\(400"):
            Viewer(b.url, subprotocols=())
        with pytest.raises(AssertionError, match=r"InvalidStatusCode\(400"):
            Viewer(b.url, subprotocols=("foxglove.websocket.v2",))
    with Bridge(port=1, listen="127.0.0.1:0", max_viewers=1) as b, Viewer(b.url) as v:
        with pytest.raises(AssertionError, match=r"InvalidStatusCode\(503"):
            Viewer(b.url)
        assert v.closed is None
        assert b.stats()["daemon"]["connected"] is False


def test_arguments_are_checked():
    for kw, name in (({"viewer_max_bytes": 0}, "viewer_max_bytes"),
                     ({"max_viewers": -1}, "max_viewers"), ({"listen": "8765"}, "listen"),
                     ({"listen": "[::1]:70000"}, "listen"), ({"encoding": "lz4"}, "encoding"),
                     ({"sensors": [0]}, "sensors[0]"), ({"poll_interval": 0}, "poll_interval")):
        with pytest.raises(ValueError, match=name.replace("[", r"\[").replace("]", r"\]")):
            Bridge(**kw)
    b = Bridge(listen="127.0.0.1:0")
    for args, name in (((0.0, [("world", "a", [0, 0, 0, 0, 0, 0, 1.0 + np.nan])]),
                        r"transforms\[0\].pose: not finite"),
                       ((0.0, [("world", "a", [0, 0, 0, 0, 0, 0, 0])]), "is zero"),
                       ((0.0, [("world", "", [0, 0, 0, 0, 0, 0, 1])]), r"transforms\[0\].child"),
                       ((0.0, [("world", "a")]), r"transforms\[0\]: expected"),
                       ((float("nan"), []), "time: not finite")):
        with pytest.raises(ValueError, match=name):
            b.publish_transforms(*args)


def test_command_line_errors(sensimd):
    def run(*args):
        return subprocess.run([sys.executable, "-m", "sensim.foxglove", "--port",
                               str(sensimd.port), *args], capture_output=True, text=True,
                              timeout=60, env=dict(os.environ))
    r = run("--listen", "nowhere")
    assert r.returncode == 2 and "--listen" in r.stderr
    r = run("--frame", "sensor_1=world:1,2")
    assert r.returncode == 2 and "--frame" in r.stderr
    r = run("--sensor", "0")
    assert r.returncode == 2 and "--sensor" in r.stderr
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        r = run("--listen", "127.0.0.1:%d" % taken.getsockname()[1])
    assert r.returncode == 1 and "cannot listen on 127.0.0.1" in r.stderr
