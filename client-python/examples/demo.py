# SPDX-License-Identifier: MIT
"""A short tour of sensimd from Python: handshake and server info, a small scene (a ground
plane, a wall on a moving body, a mesh), a VLP-16 lidar and an IMU, state updates and steps,
the lidar's revolutions and the IMU's samples, and raycasts that see the wall where it is at
each ray's time.

    .venv/bin/python client-python/examples/demo.py --port 7700
"""

from __future__ import annotations

import argparse

import numpy as np

import sensim


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=7700)
    ap.add_argument("--token", default=None)
    args = ap.parse_args()

    with sensim.Client(args.host, args.port, environment="demo", token=args.token,
                       client_name="demo.py") as c:
        info = c.get_info()
        print(f"connected to sensimd {info.server_version} (protocol {info.protocol_version}), "
              f"{info.threads} threads, {info.connections} connection(s)")

        # the world: ground, a wall carried by body 1, a tetrahedron mesh on the ground
        c.set_material(1, "two_layer", diffuse_reflectance=0.6)
        c.set_ambient("fog", visibility=200.0)
        c.create_primitive(1, "plane", half_size=100.0)
        c.create_object(1, 1, label=1, name="ground")
        c.create_primitive(2, "box", half_extents=(0.1, 2.0, 1.0))
        c.create_body(1, (10.0, 0.0, 1.0), linear_velocity=(-5.0, 0.0, 0.0))
        c.create_object(2, 2, body_id=1, material_id=1, label=2, name="wall")
        tetra_v = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]], dtype=np.float32)
        tetra_f = np.array([[0, 2, 1], [0, 1, 3], [0, 3, 2], [1, 2, 3]], dtype=np.uint32)
        c.create_mesh(3, tetra_v, tetra_f)
        c.create_object(3, 3, local_pose=(3.5, -3.5, 0.0), scale=2.0, label=3, name="tetra")

        # sensors: a VLP-16 on a 1.5 m mast at the origin, an IMU on the wall's body
        c.create_lidar(10, vlp16={"frequency": 10.0}, mount=((0.0, 0.0, 1.5), (0, 0, 0, 1)))
        c.create_imu(11, body_id=1, accelerometer=True, gyroscope=True)

        # ten steps of 20 ms: the wall approaches at 5 m/s
        dt = 0.02
        for k in range(11):
            t = k * dt
            c.update_state(t, [1], [[10.0 - 5.0 * t, 0, 1, 0, 0, 0, 1]],
                           [[-5.0, 0, 0, 0, 0, 0]])
            if k == 10:
                break
            for out in sensim.outputs(c.step(t)):
                if out.kind == "point_cloud":
                    p = out.value  # sensor frame: x forward, y left, z up
                    ahead = p[(p["x"] > 0) & (np.abs(p["y"]) < 0.3) & (np.abs(p["z"]) < 0.3)]
                    # (a few points ahead are returns from the fog itself: the median is the wall)
                    print(f"lidar {out.sensor_id}: revolution {out.frame} complete at "
                          f"t = {out.time:.3f} s: {len(p)} points, straight ahead "
                          f"{np.median(ahead['x']):.2f} m (the wall)")
                elif out.kind == "imu" and k == 9:
                    a = out.value["acceleration"]
                    print(f"imu {out.sensor_id} on the wall's body at t = {out.time:.3f} s: "
                          f"acceleration ({a[0]:.2f}, {a[1]:.2f}, {a[2]:.2f}) m/s^2 "
                          "(constant velocity: the reaction to gravity only)")

        # inside the last interval (0.18, 0.2]: rays fired at different times see the wall move
        times = np.linspace(0.18, 0.2, 5)
        hits = c.raycast(np.tile([0.0, 0.0, 1.0], (5, 1)), np.tile([1.0, 0.0, 0.0], (5, 1)),
                         times=times)
        print("wall range at ray time (expected 10 - 5 t - 0.1):")
        for t, d in zip(times, hits.distances):
            print(f"  t = {t:.3f} s: {d:.4f} m (expected {10 - 5 * t - 0.1:.4f})")
        c.step(0.2)

        # a fan of rays downwards-forwards: ground, tetrahedron, wall
        angles = np.radians(np.linspace(-60, 60, 7))
        dirs = np.stack([np.cos(angles), np.sin(angles), np.full(7, -0.1)], axis=1)
        hits = c.raycast(np.tile([0.0, 0.0, 1.0], (7, 1)), dirs)
        print("fan of 7 rays from (0, 0, 1):")
        for a, h in zip(np.degrees(angles), hits):
            what = {0: "nothing", 1: "ground", 2: "wall", 3: "tetrahedron"}[int(h.labels)]
            print(f"  azimuth {a:+6.1f} deg: {h.distances:7.3f} m, {what}")

        info = c.get_info()
        env = next(e for e in info.environments if e.name == "demo")
        print(f"environment 'demo': {env.objects} objects, {env.steps} steps, "
              f"{env.counters.rays_traced} rays traced, {env.counters.mesh_builds} BVH builds, "
              f"{env.counters.instance_updates} instance updates")
        return 0


if __name__ == "__main__":
    raise SystemExit(main())
