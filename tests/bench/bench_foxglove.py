#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Foxglove bridge benchmark: a real sensimd, the bridge as users run it (python -m
sensim.foxglove, its own process) and a viewer of foxglove.websocket.v1 in this process,
against an observer subscribed to the daemon directly (the reference: what the daemon alone
delivers, measured in the same run).

Prints
    BENCH foxglove_bridge_latency_ms <median> ms
from a controller's StepDone to the viewer's receipt of that step's cloud, a VLP-16 (one
revolution per 0.1 s step, steps paced so that each cloud is delivered before the next step;
goal <= 20 ms), with its 90th percentile, the direct observer's latency of the same clouds
(foxglove_direct_latency_ms) and the difference per cloud (foxglove_bridge_added_ms); and
    BENCH foxglove_bridge_fps_os1_128 <median> revolutions/s
the OS1-128 (2048 x 10) revolutions per second delivered to one viewer while the controller
steps as fast as the daemon traces (one revolution per step; goal >= 10), next to the
revolutions per second the direct observer receives in alternating runs without the bridge
(foxglove_direct_fps_os1_128) and their ratio (foxglove_bridge_fps_over_direct).

Cross-check (also with --quick): every cloud the viewer receives holds the points, byte for
byte, of the cloud the direct observer received for the same step; exit 1 otherwise.

    bench_foxglove.py [--sensimd PATH] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import selectors
import signal
import statistics
import struct
import subprocess
import sys
import threading
import time

import numpy as np
import websockets

import sensim
from sensim import pb
from sensim.testing import Daemon

SUBPROTOCOL = "foxglove.websocket.v1"


class Bridge:
    """python -m sensim.foxglove for one environment and sensor, on a free port."""

    def __init__(self, port: int, environment: str, sensor: int):
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "sensim.foxglove", "--port", str(port), "--environment",
             environment, "--sensor", str(sensor), "--listen", "127.0.0.1:0",
             "--log-level", "warning"], stdout=subprocess.PIPE)
        with selectors.DefaultSelector() as sel:
            sel.register(self.proc.stdout, selectors.EVENT_READ)
            if not sel.select(30):
                self.proc.kill()
                raise SystemExit("bench_foxglove: the bridge did not start")
        line = self.proc.stdout.readline().decode()
        m = re.search(r"on (ws://\S+) ", line)
        if m is None:
            self.proc.kill()
            raise SystemExit(f"bench_foxglove: unexpected bridge banner {line!r}")
        self.url = m.group(1)

    def close(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        if self.proc.wait(30) != 0:
            raise SystemExit(f"bench_foxglove: the bridge exited with {self.proc.returncode}")


def cloud_of(payload: bytes) -> tuple[int, bytes]:
    """(stamp ns, point bytes) of a sensor_msgs/PointCloud2 (ROS 1)."""
    _, sec, nsec, n = struct.unpack_from("<IIII", payload, 0)
    pos = 16 + n
    _, _, nfields = struct.unpack_from("<III", payload, pos)
    pos += 12
    for _ in range(nfields):
        (n,) = struct.unpack_from("<I", payload, pos)
        pos += 4 + n + 9
    size = struct.unpack_from("<I", payload, pos + 9)[0]
    return sec * 10**9 + nsec, payload[pos + 13:pos + 13 + size]


class Viewer:
    """Subscribes to the topic's channel and records each cloud: stamp -> (arrival, points)."""

    def __init__(self, url: str, topic: str, keep_points: bool):
        self.url, self.topic, self.keep_points = url, topic, keep_points
        self.clouds: dict[int, tuple[float, bytes]] = {}
        self.arrivals: list[float] = []
        self.error: str = ""
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main()), daemon=True)
        self._thread.start()

    async def _main(self) -> None:
        try:
            async with websockets.connect(self.url, subprotocols=[SUBPROTOCOL], max_size=None,
                                          compression=None) as ws:
                while not self._stop.is_set():
                    try:
                        m = await asyncio.wait_for(ws.recv(), 0.2)
                    except asyncio.TimeoutError:
                        continue
                    now = time.perf_counter()
                    if isinstance(m, str):
                        obj = json.loads(m)
                        for ch in obj.get("channels", []) if obj["op"] == "advertise" else []:
                            if ch["topic"] == self.topic:
                                await ws.send(json.dumps({"op": "subscribe", "subscriptions": [
                                    {"id": 1, "channelId": ch["id"]}]}))
                                self._ready.set()
                    elif m[0] == 1:
                        stamp, points = cloud_of(memoryview(m)[13:])
                        self.clouds[stamp] = (now, bytes(points) if self.keep_points else b"")
                        self.arrivals.append(now)
        except Exception as exc:
            self.error = repr(exc)
            self._ready.set()

    def wait_ready(self, timeout: float) -> None:
        if not self._ready.wait(timeout) or self.error:
            raise SystemExit(f"bench_foxglove: viewer: no channel {self.topic} ({self.error})")

    def close(self) -> None:
        self._stop.set()
        self._thread.join(10)


class Direct:
    """An observer of the daemon subscribed to one sensor: stamp -> (arrival, points)."""

    def __init__(self, port: int, environment: str, sensor: int, keep_points: bool):
        self.c = sensim.Client("127.0.0.1", port, environment=environment, role="observer",
                               client_name="bench-direct", timeout=30.0)
        self.c.subscribe(sensor)
        self.keep_points = keep_points
        self.clouds: dict[int, tuple[float, bytes]] = {}
        self.arrivals: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            d = self.c.next_sensor_data(timeout=0.1)
            if d is None or not d.HasField("point_cloud"):
                continue
            now = time.perf_counter()
            stamp = round(d.time * 1e9)
            self.clouds[stamp] = (now, d.point_cloud.data if self.keep_points else b"")
            self.arrivals.append(now)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self.c.close()


def scene(c: sensim.Client, lidar: dict, mount_z: float) -> None:
    """Ground and 40 boxes around the origin (a yard), a lidar at the origin."""
    c.create_primitive(1, "plane", half_size=200.0)
    c.create_object(1, 1)
    c.create_primitive(2, "box", half_extents=(1.0, 2.0, 1.5))
    rng = np.random.default_rng(7)
    for k in range(40):
        a, r = rng.uniform(0, 2 * np.pi), rng.uniform(6, 40)
        c.create_object(10 + k, 2, local_pose=(r * np.cos(a), r * np.sin(a), 1.5))
    c.create_lidar(1, mount=((0.0, 0.0, mount_z), (0, 0, 0, 1)), **lidar)


def step(c: sensim.Client, t: float) -> None:
    c.update_state(t)
    c.wait_reply(c.send_request("step", pb.Step(time=t, outputs=pb.STEP_OUTPUTS_NONE)))


def check_same(viewer: Viewer, direct: Direct, what: str) -> int:
    both = sorted(set(viewer.clouds) & set(direct.clouds))
    for stamp in both:
        if viewer.clouds[stamp][1] != direct.clouds[stamp][1]:
            print(f"bench_foxglove: {what}: the viewer's cloud at {stamp} ns differs from the "
                  "daemon's", file=sys.stderr)
            raise SystemExit(1)
    return len(both)


def latency(d: Daemon, n: int) -> tuple[list[float], list[float]]:
    with d.client(environment="latency", timeout=60.0) as c:
        # revolutions end in the middle of the 0.1 s steps: one cloud per step, stamped with it
        scene(c, {"vlp16": {"frequency": 10.0, "start_time": 0.05}}, 1.8)
        step(c, 0.0)
        bridge = Bridge(d.port, "latency", 1)
        direct = Direct(d.port, "latency", 1, keep_points=True)
        viewer = Viewer(bridge.url, "/sensor_1/points", keep_points=True)
        try:
            # the channel appears with the lidar's first record
            t = 0.0
            deadline = time.monotonic() + 30
            while not viewer._ready.is_set() and time.monotonic() < deadline:
                t += 0.1
                step(c, t)
                time.sleep(0.1)
            viewer.wait_ready(1)
            time.sleep(0.5)
            bridge_ms, direct_ms = [], []
            for _ in range(n):
                t = round(t + 0.1, 9)
                stamp = round(t * 1e9)
                step(c, t)
                done = time.perf_counter()
                deadline = done + 5
                while (stamp not in viewer.clouds or stamp not in direct.clouds) and \
                        time.perf_counter() < deadline:
                    time.sleep(0.0005)
                if stamp in viewer.clouds and stamp in direct.clouds:
                    bridge_ms.append((viewer.clouds[stamp][0] - done) * 1e3)
                    direct_ms.append((direct.clouds[stamp][0] - done) * 1e3)
                time.sleep(0.02)
            if check_same(viewer, direct, "latency") < n // 2:
                raise SystemExit("bench_foxglove: fewer than half the clouds reached both")
        finally:
            viewer.close()
            direct.close()
            bridge.close()
    return bridge_ms, direct_ms


def rate(arrivals: list[float], start: float, end: float) -> float:
    return sum(1 for a in arrivals if start <= a < end) / (end - start)


def fps(d: Daemon, window: float, rounds: int) -> tuple[list[float], list[float]]:
    """Alternating runs: the direct observer alone, then the bridge and its viewer alone."""
    os1 = {"ouster": {"channels": 128, "columns": 2048, "frequency": 10.0, "start_time": 0.05}}
    via_bridge, alone = [], []
    with d.client(environment="fps", timeout=60.0) as c:
        scene(c, os1, 1.8)
        t = 0.0
        step(c, t)

        def run(arrivals: list[float]) -> float:
            # the window lasts `window` seconds and at least 4 steps after the warm-up, so
            # that a slow build (a sanitizer's, under load: a revolution can take longer than
            # the window) still counts clouds instead of none
            nonlocal t
            warm = time.perf_counter() + 1.0
            steps = 0
            while time.perf_counter() < warm + window or steps < 4:
                t = round(t + 0.1, 9)
                step(c, t)
                steps += time.perf_counter() >= warm
            end = time.perf_counter()
            time.sleep(0.3)        # the last clouds of the window arrive
            return rate(arrivals, warm, end)

        for r in range(rounds):
            direct = Direct(d.port, "fps", 1, keep_points=False)
            try:
                alone.append(run(direct.arrivals))
            finally:
                direct.close()
            bridge = Bridge(d.port, "fps", 1)
            viewer = Viewer(bridge.url, "/sensor_1/points", keep_points=r == 0)
            direct = Direct(d.port, "fps", 1, keep_points=r == 0) if r == 0 else None
            try:
                while not viewer._ready.is_set():
                    t = round(t + 0.1, 9)
                    step(c, t)
                    if viewer.error:
                        viewer.wait_ready(0)
                if direct is not None:      # the first round checks the points as well
                    run(viewer.arrivals)
                    check_same(viewer, direct, "fps")
                else:
                    via_bridge.append(run(viewer.arrivals))
            finally:
                viewer.close()
                if direct is not None:
                    direct.close()
                bridge.close()
            if direct is not None:         # that round's rate is not measured alone
                bridge = Bridge(d.port, "fps", 1)
                viewer = Viewer(bridge.url, "/sensor_1/points", keep_points=False)
                try:
                    while not viewer._ready.is_set():
                        t = round(t + 0.1, 9)
                        step(c, t)
                    via_bridge.append(run(viewer.arrivals))
                finally:
                    viewer.close()
                    bridge.close()
    return via_bridge, alone


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sensimd", default=None, help="daemon executable (default: $SENSIMD)")
    ap.add_argument("--quick", action="store_true", help="few iterations (a smoke test)")
    args = ap.parse_args()
    with Daemon(executable=args.sensimd) as d:
        bridge_ms, direct_ms = latency(d, 10 if args.quick else 200)
        via_bridge, alone = fps(d, 1.0 if args.quick else 5.0, 1 if args.quick else 5)
    added = [b - a for b, a in zip(bridge_ms, direct_ms)]
    p90 = sorted(bridge_ms)[int(0.9 * (len(bridge_ms) - 1))]
    print(f"VLP-16 clouds, StepDone to receipt over {len(bridge_ms)} steps: bridge median "
          f"{statistics.median(bridge_ms):.2f} ms (p90 {p90:.2f}), direct observer "
          f"{statistics.median(direct_ms):.2f} ms")
    print(f"BENCH foxglove_bridge_latency_ms {statistics.median(bridge_ms):.2f} ms")
    print(f"BENCH foxglove_bridge_latency_p90_ms {p90:.2f} ms")
    print(f"BENCH foxglove_direct_latency_ms {statistics.median(direct_ms):.2f} ms")
    print(f"BENCH foxglove_bridge_added_ms {statistics.median(added):.2f} ms")
    print("OS1-128 revolutions per second: bridge "
          + " ".join(f"{x:.1f}" for x in via_bridge) + "; direct "
          + " ".join(f"{x:.1f}" for x in alone))
    b, a = statistics.median(via_bridge), statistics.median(alone)
    if a <= 0 or b <= 0:
        raise SystemExit("bench_foxglove: no OS1-128 cloud arrived in a measuring window "
                         f"(bridge {b:.1f}, direct {a:.1f} revolutions/s)")
    print(f"BENCH foxglove_bridge_fps_os1_128 {b:.1f} revolutions/s")
    print(f"BENCH foxglove_direct_fps_os1_128 {a:.1f} revolutions/s")
    print(f"BENCH foxglove_bridge_fps_over_direct {b / a:.2f} x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
