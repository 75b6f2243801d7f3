# SPDX-License-Identifier: MIT
"""The Python demo's --view (./run.sh demo --view): after the tour it keeps running in real time
with the Foxglove bridge on; a viewer finds the lidars, IMUs and transforms, and the vehicle's
frame moves on its 12 m circle."""

from __future__ import annotations

import math
import os
import re
import struct
import subprocess
import sys

from foxglove_support import REPO, Viewer, read_cloud2


def tf_of(payload: bytes) -> dict:
    """child -> (stamp ns, parent, 7 numbers) of a tf2_msgs/TFMessage (ROS 1)."""
    (n,) = struct.unpack_from("<I", payload, 0)
    pos, out = 4, {}
    for _ in range(n):
        _, sec, nsec, ln = struct.unpack_from("<IIII", payload, pos)
        parent = payload[pos + 16:pos + 16 + ln].decode()
        pos += 16 + ln
        (ln,) = struct.unpack_from("<I", payload, pos)
        child = payload[pos + 4:pos + 4 + ln].decode()
        pos += 4 + ln
        out[child] = (sec * 10**9 + nsec, parent, struct.unpack_from("<7d", payload, pos))
        pos += 56
    assert pos == len(payload)
    return out


def test_demo_view_serves_the_running_simulation(sensimd):
    demo = subprocess.Popen([sys.executable, str(REPO / "client-python" / "examples" / "demo.py"),
                             "--port", str(sensimd.port), "--view", "127.0.0.1:0",
                             "--view-seconds", "8"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=dict(os.environ))
    try:
        url = None
        for line in demo.stdout:
            m = re.search(r"Foxglove WebSocket -> (ws://\S+)", line)
            if m:
                url = m.group(1)
                break
        assert url, demo.stderr.read()
        with Viewer(url) as v:
            for topic in ("/sensor_10/points", "/sensor_20/points", "/sensor_11/imu",
                          "/sensor_21/imu"):
                v.channel(topic)
            v.subscribe([(1, v.channel("/tf")["id"]), (2, v.channel("/sensor_20/points")["id"])])
            v.wait(lambda: sum(d[0] == 2 for d in v.data) >= 3 and
                   sum(d[0] == 1 for d in v.data) >= 20, "transforms and vehicle clouds")
        out, err = demo.communicate(timeout=60)
    finally:
        if demo.poll() is None:
            demo.kill()
    assert demo.returncode == 0, err
    assert "live view: stopped at t = " in out

    for _, ts, payload, _ in [d for d in v.data if d[0] == 1]:
        tf = tf_of(payload)
        assert tf["sensor_10"][1:] == ("world", (0, 0, 1.5, 0, 0, 0, 1))
        assert tf["sensor_20"][1:] == ("body_2", (0.5, 0, 1.9, 0, 0, 0, 1))
        stamp, parent, (x, y, z, qx, qy, qz, qw) = tf["body_2"]
        assert stamp == ts and parent == "world"
        # on the circle, heading along it (counter-clockwise: 90 degrees past the radius)
        assert abs(math.hypot(x, y) - 12.0) < 1e-9 and z == 0
        yaw = 2 * math.atan2(qz, qw)
        assert abs(math.remainder(yaw - math.atan2(y, x) - math.pi / 2, 2 * math.pi)) < 1e-9
    for _, ts, payload, _ in [d for d in v.data if d[0] == 2]:
        cloud = read_cloud2(payload)
        assert cloud["frame_id"] == "sensor_20" and cloud["stamp"] == ts
        assert cloud["width"] > 5000
