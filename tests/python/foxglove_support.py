# SPDX-License-Identifier: MIT
"""Shared parts of the Foxglove bridge's tests: a small scene with a VLP-16 and an IMU, a
controller stepping it on a thread (keeping every record of its StepDones, the truth the
viewers' messages are compared with), the bridge started as a program (python -m
sensim.foxglove), a minimal viewer speaking foxglove.websocket.v1 through the websockets
library, and the Node tools' paths."""

from __future__ import annotations

import asyncio
import collections
import json
import math
import os
import pathlib
import re
import selectors
import shutil
import signal
import struct
import subprocess
import sys
import threading
import time
from typing import Any, Optional, Sequence

import numpy as np
import pytest
import websockets

import sensim

REPO = pathlib.Path(__file__).resolve().parents[2]
WEB_TESTS = REPO / "tests" / "web"
SUBPROTOCOL = "foxglove.websocket.v1"
_BANNER = re.compile(r"sensim foxglove bridge on ws://([\d.]+):(\d+) \(page (\S+)\)")


def node() -> str:
    """The node executable, with the test packages installed (./setup.sh does both)."""
    exe = shutil.which("node")
    if exe is None or not (WEB_TESTS / "node_modules" / "@foxglove" / "ws-protocol").is_dir():
        pytest.fail("node or tests/web/node_modules is missing: run ./setup.sh "
                    "(or ./setup.sh --web-only)", pytrace=False)
    return exe


def build_scene(c: sensim.Client, *, imu: bool = True) -> None:
    """A ground plane, a wall 8 m ahead of a VLP-16 (sensor 10, static, 1.5 m up), body 1
    circling the origin (see body_pose) and an IMU on it (sensor 11) unless imu is False."""
    c.create_primitive(1, "plane", half_size=100.0)
    c.create_object(1, 1, label=1)
    c.create_primitive(2, "box", half_extents=(0.5, 3.0, 1.5))
    c.create_object(2, 2, local_pose=(8.0, 0.0, 1.5), label=2)
    c.create_lidar(10, vlp16={"frequency": 10.0}, mount=((0.0, 0.0, 1.5), (0, 0, 0, 1)))
    c.create_body(1, body_pose(0.0))
    if imu:
        c.create_imu(11, body_id=1, accelerometer=True, gyroscope=True)


def body_pose(t: float) -> list[float]:
    """Body 1 on a circle of 3 m radius at 0.5 rad/s, facing along its path."""
    a = 0.5 * t
    return [3 * math.cos(a), 3 * math.sin(a), 0.5, 0.0, 0.0,
            math.sin((a + math.pi / 2) / 2), math.cos((a + math.pi / 2) / 2)]


class Stepper:
    """Steps an environment from a thread: state at t, Step(t), every `dt` of simulation time
    and `pace` s of wall time (0: as fast as it can); outputs=False asks for StepDones
    without records. Keeps the last `keep` records of each
    sensor by frame (sensor id, frame) -> SensorData, and calls on_step(t, pose of body 1)
    after each UpdateState when given (a test publishing transforms)."""

    def __init__(self, client: sensim.Client, dt: float = 0.05, pace: float = 0.05,
                 bodies: tuple = (1,), keep: int = 400, on_step: Any = None,
                 outputs: bool = True, t0: float = 0.0):
        self.c, self.dt, self.pace, self.bodies, self.on_step = client, dt, pace, bodies, on_step
        self.outputs = outputs      # False: StepDone carries nothing (outputs to subscribers)
        self.records: dict[tuple[int, int], Any] = {}
        self._order: collections.deque = collections.deque()
        self.keep = keep
        self.steps = 0
        self.t0 = t0                # steps are at t0 + k dt, k = 1, 2, ...
        self.t = t0
        self.error: Optional[BaseException] = None
        self._stop = threading.Event()
        self._collected = threading.Condition()   # notified when a step's reply is collected
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.poses: dict[int, list[float]] = {}

    def __enter__(self) -> "Stepper":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        if self.error is not None:
            raise self.error

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                k = self.steps + 1
                t = round(self.t0 + k * self.dt, 9)
                poses = [body_pose(t) for _ in self.bodies]
                self.poses[k] = poses   # before sending: a subscriber may see it at once
                self.c.update_state(t, list(self.bodies), poses if self.bodies else None)
                if self.on_step is not None:
                    self.on_step(t, poses)
                if self.outputs:
                    done = self.c.step(t)
                else:
                    done = self.c.wait_reply(self.c.send_request("step", sensim.pb.Step(
                        time=t, outputs=sensim.pb.STEP_OUTPUTS_NONE))).step_done
                for out in done.outputs:
                    key = (out.sensor_id, out.frame)
                    self.records[key] = out
                    self._order.append(key)
                    if len(self._order) > self.keep:
                        self.records.pop(self._order.popleft(), None)
                with self._collected:
                    self.steps, self.t = k, t
                    self._collected.notify_all()
                if self.pace:
                    self._stop.wait(self.pace)
        except BaseException as exc:  # reported by stop()
            self.error = exc
        finally:
            with self._collected:
                self._collected.notify_all()

    def record(self, sensor_id: int, frame: int, timeout: float = 60.0) -> Any:
        """The record of a sensor's frame as a StepDone carried it. The daemon pushes a frame
        to subscribers (the bridge, its viewers) as the step ends, before the stepper has read
        the step's reply: a frame a viewer has seen is in the step in flight at the latest, so
        wait until that step has been collected (or the stepper has stopped)."""
        key = (sensor_id, frame)
        with self._collected:
            in_flight = self.steps + 1
            self._collected.wait_for(lambda: key in self.records or self.steps >= in_flight
                                     or not self._thread.is_alive(), timeout)
            rec = self.records.get(key)
        assert rec is not None, f"no record of sensor {sensor_id} frame {frame} kept"
        return rec

    def cloud(self, sensor_id: int, frame: int) -> np.ndarray:
        return sensim.point_cloud_to_numpy(self.record(sensor_id, frame).point_cloud)


class BridgeProcess:
    """python -m sensim.foxglove as users run it (or `command`, e.g. the installed
    ["sensim", "foxglove"]); .url, .page_url, .port; stop() sends SIGTERM and checks exit
    status 0."""

    def __init__(self, daemon_port: int, *args: str, environment: str = "demo",
                 command: Sequence[str] = (sys.executable, "-m", "sensim.foxglove"),
                 env: Optional[dict] = None, cwd: Optional[str] = None):
        env = dict(os.environ) if env is None else env
        self.proc = subprocess.Popen(
            [*command, "--port", str(daemon_port),
             "--environment", environment, "--listen", "127.0.0.1:0", *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=cwd)
        line = self._line(20.0)
        m = _BANNER.fullmatch(line.strip())
        if m is None:
            self.proc.kill()
            raise AssertionError(f"bridge banner: {line!r}\n{self.proc.stderr.read().decode()}")
        self.port = int(m.group(2))
        self.url = f"ws://127.0.0.1:{self.port}"
        self.page_url = m.group(3)

    def _line(self, timeout: float) -> str:
        with selectors.DefaultSelector() as sel:
            sel.register(self.proc.stdout, selectors.EVENT_READ)
            if not sel.select(timeout):
                self.proc.kill()
                raise AssertionError("the bridge printed nothing within "
                                     f"{timeout} s:\n{self.proc.stderr.read().decode()}")
        return self.proc.stdout.readline().decode()

    def rss(self) -> int:
        """Resident memory of the bridge process, bytes."""
        text = pathlib.Path(f"/proc/{self.proc.pid}/status").read_text()
        return int(re.search(r"VmRSS:\s+(\d+) kB", text).group(1)) * 1024

    def stats(self) -> dict:
        import urllib.request
        with urllib.request.urlopen(self.page_url + "stats.json", timeout=10) as r:
            return json.loads(r.read())

    def stop(self) -> str:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            _, err = self.proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate()
            raise AssertionError(f"the bridge did not stop on SIGTERM:\n{err.decode()}")
        assert self.proc.returncode == 0, f"bridge exit {self.proc.returncode}:\n{err.decode()}"
        return err.decode()

    def __enter__(self) -> "BridgeProcess":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


class Viewer:
    """A minimal foxglove.websocket.v1 viewer on a thread of its own (websockets client):
    records every JSON message and every Message Data (subscription id, timestamp, payload,
    arrival time); subscribe()/unsubscribe()/send_text() from the test's thread."""

    def __init__(self, url: str, subprotocols: tuple = (SUBPROTOCOL,)):
        self.url = url
        self.json: list[dict] = []
        self.data: list[tuple[int, int, bytes, float]] = []
        self.times: list[int] = []
        self.channels: dict[int, dict] = {}
        self.closed: Optional[str] = None
        self._loop = asyncio.new_event_loop()
        self._ws: Any = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(subprotocols,), daemon=True)
        self._thread.start()
        if not self._ready.wait(20) or self._ws is None:
            raise AssertionError(f"viewer: cannot connect to {url}: {self.closed}")

    def _run(self, subprotocols: tuple) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._main(subprotocols))
        # the library's keepalive task ends with the connection: let it finish
        pending = asyncio.all_tasks(self._loop)
        for task in pending:
            task.cancel()
        self._loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))

    async def _main(self, subprotocols: tuple) -> None:
        try:
            async with websockets.connect(self.url, subprotocols=list(subprotocols),
                                          max_size=None, compression=None) as ws:
                self._ws = ws
                self._ready.set()
                async for m in ws:
                    if isinstance(m, str):
                        obj = json.loads(m)
                        self.json.append(obj)
                        if obj.get("op") == "advertise":
                            for ch in obj["channels"]:
                                self.channels[ch["id"]] = ch
                        elif obj.get("op") == "unadvertise":
                            for i in obj["channelIds"]:
                                self.channels.pop(i, None)
                    elif m[0] == 1:
                        sub, ts = struct.unpack_from("<IQ", m, 1)
                        self.data.append((sub, ts, m[13:], time.perf_counter()))
                    elif m[0] == 2:
                        self.times.append(struct.unpack_from("<Q", m, 1)[0])
                self.closed = f"closed {ws.close_code} {ws.close_reason}"
        except Exception as exc:  # recorded for the test
            self.closed = repr(exc)
        finally:
            self._ready.set()

    def send_text(self, text: str) -> None:
        asyncio.run_coroutine_threadsafe(self._ws.send(text), self._loop).result(10)

    def send_bytes(self, data: bytes) -> None:
        asyncio.run_coroutine_threadsafe(self._ws.send(data), self._loop).result(10)

    def subscribe(self, pairs: list[tuple[int, int]]) -> None:
        self.send_text(json.dumps({"op": "subscribe", "subscriptions": [
            {"id": s, "channelId": c} for s, c in pairs]}))

    def unsubscribe(self, ids: list[int]) -> None:
        self.send_text(json.dumps({"op": "unsubscribe", "subscriptionIds": ids}))

    def channel(self, topic: str, timeout: float = 20.0) -> dict:
        """The channel of a topic, waiting for its advertisement."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for ch in list(self.channels.values()):
                if ch["topic"] == topic:
                    return ch
            time.sleep(0.02)
        raise AssertionError(f"no channel {topic}; advertised: "
                             f"{[c['topic'] for c in self.channels.values()]}")

    def wait(self, predicate: Any, what: str, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return
            time.sleep(0.02)
        raise AssertionError(f"viewer: {what} within {timeout} s (closed: {self.closed})")

    def statuses(self) -> list[dict]:
        return [j for j in self.json if j.get("op") == "status"]

    def close(self) -> None:
        if self._ws is not None and self.closed is None:
            try:
                asyncio.run_coroutine_threadsafe(self._ws.close(), self._loop).result(10)
            except Exception:
                pass
        self._thread.join(10)
        self._loop.close()

    def __enter__(self) -> "Viewer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def read_cloud2(payload: bytes) -> dict:
    """A second reader of sensor_msgs/PointCloud2 (ROS 1), for Python-side checks; the Node
    tests read with Foxglove's own libraries."""
    pos = 0

    def take(fmt: str) -> tuple:
        nonlocal pos
        vals = struct.unpack_from(fmt, payload, pos)
        pos += struct.calcsize(fmt)
        return vals

    def string() -> str:
        nonlocal pos
        (n,) = take("<I")
        s = payload[pos:pos + n].decode()
        pos += n
        return s

    seq, sec, nsec = take("<III")
    frame_id = string()
    height, width, nfields = take("<III")
    fields = []
    for _ in range(nfields):
        name = string()
        fields.append((name, *take("<IBI")))
    bigendian, point_step, row_step, size = take("<BIII")
    data = payload[pos:pos + size]
    pos += size
    (dense,) = take("<B")
    assert pos == len(payload), f"PointCloud2: {len(payload) - pos} bytes left over"
    return {"seq": seq, "stamp": sec * 10**9 + nsec, "frame_id": frame_id, "height": height,
            "width": width, "fields": fields, "is_bigendian": bigendian,
            "point_step": point_step, "row_step": row_step, "data": data, "is_dense": dense}


def read_tf(payload: bytes) -> list[dict]:
    """A second reader of tf2_msgs/TFMessage (ROS 1): each transform's stamp (ns), parent,
    child and pose (px py pz qx qy qz qw)."""
    pos = 0

    def take(fmt: str) -> tuple:
        nonlocal pos
        vals = struct.unpack_from(fmt, payload, pos)
        pos += struct.calcsize(fmt)
        return vals

    def string() -> str:
        nonlocal pos
        (n,) = take("<I")
        s = payload[pos:pos + n].decode()
        pos += n
        return s

    out = []
    (count,) = take("<I")
    for _ in range(count):
        _seq, sec, nsec = take("<III")
        parent = string()
        child = string()
        out.append({"stamp": sec * 10**9 + nsec, "parent": parent, "child": child,
                    "pose": list(take("<7d"))})
    assert pos == len(payload), f"TFMessage: {len(payload) - pos} bytes left over"
    return out
