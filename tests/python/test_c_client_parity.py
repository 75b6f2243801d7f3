# SPDX-License-Identifier: MIT
"""The C and Python clients give the same bytes for the same scenario. The C program
sensim_c_parity (tests/client_c/parity.c) builds a scene in one environment of a real sensimd,
steps a revolution of a VLP-16 with noise past a moving body and raycasts inside the last
interval; it writes the numbers it sent and what it received. The Python client replays those
very numbers in another environment of the same daemon: the cloud and the hit records must be
equal byte for byte (the daemon is deterministic for a seed), so either client can stand in
for the other."""

from __future__ import annotations

import math
import subprocess

import numpy as np
import pytest


def test_c_and_python_clients_give_the_same_cloud_and_hits(sensimd, examples_dir, tmp_path):
    prog = examples_dir / "sensim_c_parity"
    if not prog.is_file():
        pytest.fail(f"{prog} is missing: build the sensim_c_parity target", pytrace=False)
    r = subprocess.run([str(prog), "127.0.0.1", str(sensimd.port), "c_side", str(tmp_path)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr

    def load(name, dtype, width):
        return np.fromfile(tmp_path / name, dtype=dtype).reshape(-1, width)

    vertices, indices = load("vertices.f32", "<f4", 3), load("indices.u32", "<u4", 3)
    poses = load("poses.f64", "<f8", 7)
    origins, directions = load("origins.f64", "<f8", 3), load("directions.f64", "<f8", 3)
    times = np.fromfile(tmp_path / "times.f64", dtype="<f8")

    with sensimd.client(environment="python_side") as c:
        c.set_environment(seed=1234)
        c.create_mesh(1, vertices, indices)
        c.create_primitive(2, "box", half_extents=(1.5, 0.75, 1.0))
        c.create_primitive(3, "sphere", radius=0.6)
        c.create_body(1)
        c.create_object(10, 1, label=1)
        boxes = [(8, 3, 0), (-6, 9, 0), (2, -11, 0.5)]
        for k in range(1, 4):
            c.create_object(10 + k, 2, label=k + 1,
                            local_pose=(boxes[k - 1], (0, 0, math.sin(0.3 * k),
                                                       math.cos(0.3 * k))))
        c.create_object(14, 3, body_id=1, label=5, local_pose=(4.0, 0.0, 0.0))
        c.create_lidar(1, mount=((0, 0, 1.2), None), vlp16={"frequency": 10.0},
                       distance_noise={"stddevBase": 0.01}, layout="velodyne")
        for k, pose in enumerate(poses):
            t = 0.025 * k
            c.update_state(t, [1], [pose])
            if k == len(poses) - 1:
                hits = c.raycast(origins, directions, max_range=40.0, times=times)
            done = c.step(t)
    assert len(done.outputs) == 1
    cloud = done.outputs[0].point_cloud
    c_cloud = (tmp_path / "cloud.bin").read_bytes()
    fields = [f"{f.name} {f.offset} {f.datatype} {f.count}" for f in cloud.fields]
    meta = (tmp_path / "cloud.txt").read_text().splitlines()
    assert meta == fields + [f"point_step {cloud.point_step}", f"count {cloud.count}"]
    assert cloud.count > 10000
    assert cloud.data == c_cloud

    c_hits = (tmp_path / "hits.bin").read_bytes()
    assert len(c_hits) == 48 * len(origins)
    assert np.asarray(hits).tobytes() == c_hits
    # and the scene was seen: hits on the terrain, the boxes and the moving ball
    labels = set(np.frombuffer(c_hits, dtype="<u4").reshape(-1, 12)[:, 9].tolist())
    assert {1, 2, 5} <= labels
