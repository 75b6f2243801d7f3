# SPDX-License-Identifier: MIT
"""The bridge (python -m sensim.foxglove, as users run it) seen by a real Foxglove peer: the
Node client of @foxglove/ws-protocol lists the channels, subscribes, and decodes a point cloud,
IMU samples and transforms with the schemas the channels advertise (Foxglove's own ROS 1
libraries, tests/web/client_test.mjs). What it decodes must equal what the daemon computed:
the controller's StepDone records of the same frames, bit for bit, and the poses the
controller published."""

from __future__ import annotations

import json
import math
import subprocess

import numpy as np
import pytest

from sensim.foxglove import Bridge
from foxglove_support import WEB_TESTS, BridgeProcess, Stepper, build_scene, node


def run_node_client(url: str, out, cloud_topic: str, imu_topic: str) -> dict:
    p = subprocess.run([node(), str(WEB_TESTS / "client_test.mjs"), url, str(out), cloud_topic,
                        imu_topic], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, f"node client failed:\n{p.stdout[-4000:]}\n{p.stderr[-4000:]}"
    return json.loads(p.stdout.strip().splitlines()[-1])


def check_cloud(result: dict, k: int, stepper: Stepper, sensor_id: int, out) -> np.ndarray:
    """Cloud k decoded by the Node client equals the daemon's cloud of that frame."""
    msg = result["clouds"][k]
    frame = msg["header"]["seq"]
    rec = stepper.records[(sensor_id, frame)]
    pc = rec.point_cloud
    truth = stepper.cloud(sensor_id, frame)
    stamp = round(rec.time * 1e9)
    assert (msg["header"]["sec"], msg["header"]["nsec"]) == divmod(stamp, 10**9)
    assert int(msg["timestamp"]) == stamp
    assert msg["header"]["frame_id"] == f"sensor_{sensor_id}"
    height, width = (pc.height, pc.width) if pc.HasField("height") else (1, pc.count)
    assert (msg["height"], msg["width"]) == (height, width)
    assert msg["fields"] == [[f.name, f.offset, f.datatype, max(f.count, 1)] for f in pc.fields]
    assert msg["point_step"] == pc.point_step
    assert msg["row_step"] == width * pc.point_step
    assert msg["is_bigendian"] is False
    dense = not any(np.isnan(truth[a]).any() for a in "xyz")
    assert msg["is_dense"] is dense
    # the points, byte for byte, and read through the advertised fields
    data = (out / f"cloud{k}.bin").read_bytes()
    assert msg["data_bytes"] == len(data) == truth.nbytes
    assert data == truth.tobytes()
    xyzi = np.fromfile(out / f"cloud{k}_xyzi.bin", dtype="<f4").reshape(-1, 4)
    for j, name in enumerate(("x", "y", "z", "intensity")):
        np.testing.assert_array_equal(xyzi[:, j], truth[name])
    return truth


def test_node_client_decodes_what_the_daemon_computed(sensimd, tmp_path):
    with sensimd.client(environment="demo") as c:
        build_scene(c)
        with BridgeProcess(sensimd.port, "--frame", "sensor_10=world:0,0,1.5") as bridge:
            with Stepper(c) as stepper:
                result = run_node_client(bridge.url, tmp_path, "/sensor_10/points",
                                         "/sensor_11/imu")
            info = bridge.stats()

    assert result["serverInfo"]["capabilities"] == ["time"]
    topics = {ch["topic"]: ch for ch in result["channels"]}
    assert topics["/sensor_10/points"]["schemaName"] == "sensor_msgs/PointCloud2"
    assert topics["/sensor_11/imu"]["schemaName"] == "sensor_msgs/Imu"
    assert topics["/tf"]["schemaName"] == "tf2_msgs/TFMessage"
    for ch in topics.values():
        assert (ch["encoding"], ch["schemaEncoding"]) == ("ros1", "ros1msg")
    assert len(topics) == 3, topics   # lidar, IMU, /tf: nothing else
    assert result["status"] == []
    assert result["times"] > 0

    # three clouds, the daemon's own points; a cloud of the wall 8 m ahead
    seqs = [m["header"]["seq"] for m in result["clouds"]]
    assert seqs == sorted(seqs) and len(set(seqs)) == 3
    for k in range(3):
        truth = check_cloud(result, k, stepper, 10, tmp_path)
        ahead = truth[(truth["x"] > 6) & (np.abs(truth["y"]) < 1) & (truth["z"] > -1)]
        assert len(ahead) > 50 and abs(np.median(ahead["x"]) - 7.5) < 0.05

    # IMU samples: the daemon's accelerometer and gyroscope values exactly, no orientation
    for msg in result["imus"]:
        rec = stepper.records[(11, msg["header"]["seq"])]
        assert int(msg["timestamp"]) == round(rec.time * 1e9)
        assert msg["header"]["frame_id"] == "sensor_11"
        a, w = rec.imu.acceleration, rec.imu.angular_velocity
        assert msg["linear_acceleration"] == [a.x, a.y, a.z]
        assert msg["angular_velocity"] == [w.x, w.y, w.z]
        assert msg["orientation_covariance"][0] == -1
        assert msg["angular_velocity_covariance"] == [0.0] * 9
    # on a circle of 3 m at 0.5 rad/s: centripetal 0.75 m/s^2 and a 0.5 rad/s yaw rate
    last = result["imus"][-1]
    assert abs(last["angular_velocity"][2] - 0.5) < 1e-6
    assert abs(math.hypot(*last["linear_acceleration"][:2]) - 0.75) < 1e-3
    assert abs(last["linear_acceleration"][2] - 9.80665) < 1e-6

    # /tf: the fixed frame of --frame
    for tfs in result["tf"]:
        fixed = [t for t in tfs if t["child"] == "sensor_10"]
        assert len(fixed) == 1 and fixed[0]["header"]["frame_id"] == "world"
        assert fixed[0]["translation"] == [0, 0, 1.5] and fixed[0]["rotation"] == [0, 0, 0, 1]

    # unsubscribed from the cloud: none arrives, the IMU still does
    assert result["afterUnsubscribe"]["clouds"] == 0
    assert result["afterUnsubscribe"]["imus"] >= 12   # the count ends at the 12th (client_test.mjs)
    assert info["daemon"]["sensors"] == [10, 11]
    assert info["daemon"]["decode_errors"] == 0


def test_node_client_reads_transforms_the_controller_publishes(sensimd, tmp_path):
    with sensimd.client(environment="demo") as c:
        build_scene(c)
        with Bridge(port=sensimd.port, environment="demo", listen="127.0.0.1:0",
                    poll_interval=0.2) as bridge:
            bridge.set_frame("sensor_11", "body_1", ((0.1, 0.0, 0.2), None))
            sent = {}

            def on_step(t, poses):
                bridge.publish_body_poses(t, [1], poses)
                sent[round(t * 1e9)] = poses[0]

            with Stepper(c, on_step=on_step):
                result = run_node_client(bridge.url, tmp_path, "/sensor_10/points",
                                         "/sensor_11/imu")
    assert len(result["tf"]) == 5
    for tfs in result["tf"]:
        by_child = {t["child"]: t for t in tfs}
        # body_1 and the mounts as the daemon describes them (sensor_10 in world), with the
        # mount given to set_frame in place of the described one
        assert {"sensor_10", "sensor_11"} <= set(by_child) <= {"body_1", "sensor_10",
                                                                 "sensor_11"}
        if "body_1" not in by_child:
            continue        # the mounts alone, described before the first state
        body = by_child["body_1"]
        stamp = body["header"]["sec"] * 10**9 + body["header"]["nsec"]
        assert body["header"]["frame_id"] == "world"
        # as published, or as the daemon describes it (its quaternion normalised: 1 ulp)
        np.testing.assert_allclose(body["translation"] + body["rotation"], sent[stamp],
                                   rtol=0, atol=1e-15)
        mount = by_child["sensor_11"]
        assert mount["header"]["frame_id"] == "body_1"
        assert mount["translation"] == [0.1, 0, 0.2] and mount["rotation"] == [0, 0, 0, 1]


@pytest.mark.parametrize("encoding", ["zstd", "quantized_zstd"])
def test_node_client_reads_an_ouster_cloud_sent_compressed(sensimd, tmp_path, encoding):
    """An OS1-64 in the ouster_ros layout with misses as NaN, subscribed by the bridge
    compressed: viewers get the decoded points (lossless: the daemon's; quantized: within the
    stated precision, everything else exact)."""
    with sensimd.client(environment="demo") as c:
        build_scene(c)
        c.create_lidar(12, ouster={"channels": 64, "columns": 512, "frequency": 20.0},
                       mount=((0.0, 0.0, 1.8), (0, 0, 0, 1)), layout="ouster", misses="nan")
        with BridgeProcess(sensimd.port, "--encoding", encoding, "--sensor", "12",
                           "--sensor", "11") as bridge:
            with Stepper(c) as stepper:
                result = run_node_client(bridge.url, tmp_path, "/sensor_12/points",
                                         "/sensor_11/imu")
    assert {ch["topic"] for ch in result["channels"]} == {"/sensor_12/points", "/sensor_11/imu",
                                                          "/tf"}
    for k in range(3):
        msg = result["clouds"][k]
        truth = stepper.cloud(12, msg["header"]["seq"])
        assert msg["is_dense"] is False            # misses are NaN points
        assert msg["fields"][:3] == [["x", 0, 7, 1], ["y", 4, 7, 1], ["z", 8, 7, 1]]
        got = np.frombuffer((tmp_path / f"cloud{k}.bin").read_bytes(), dtype=truth.dtype)
        assert len(got) == len(truth) == 64 * 512
        if encoding == "zstd":
            assert got.tobytes() == truth.tobytes()
        else:
            for name in truth.dtype.names:
                if name not in "xyz":
                    np.testing.assert_array_equal(got[name], truth[name])
            xyz = lambda a: np.stack([a["x"], a["y"], a["z"]], axis=1).astype(np.float64)
            err = np.linalg.norm(xyz(got) - xyz(truth), axis=1)
            hit = np.isfinite(err)
            assert (np.isnan(got["x"]) == np.isnan(truth["x"])).all()
            assert hit.sum() > 1000 and err[hit].max() <= 0.001
