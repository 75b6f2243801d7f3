# SPDX-License-Identifier: MIT
"""A short tour of sensimd from Python: handshake and server info, a small scene (a ground
plane, a wall on a moving body, a mesh), a VLP-16 lidar and an IMU, state updates and steps,
the lidar's revolutions and the IMU's samples, and raycasts that see the wall where it is at
each ray's time.

With --view it then keeps the simulation running in real time, a vehicle with a second VLP-16
and an IMU circling the wall, and serves it to Foxglove and to the built-in page through the
Foxglove bridge (sensim.foxglove, docs/foxglove.md) until Ctrl-C.

    .venv/bin/python client-python/examples/demo.py --port 7700
    .venv/bin/python client-python/examples/demo.py --port 7700 --view 127.0.0.1:8765
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

import sensim


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=7700)
    ap.add_argument("--token", default=None)
    ap.add_argument("--view", nargs="?", const="127.0.0.1:8765", default=None,
                    metavar="HOST:PORT", help="after the tour, keep running and serve the "
                    "simulation to Foxglove and the built-in page here (default "
                    "127.0.0.1:8765; port 0 picks one) until Ctrl-C")
    ap.add_argument("--view-seconds", type=float, default=None, metavar="S",
                    help="with --view, stop after S seconds of wall time")
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
        if args.view is not None:
            view(c, args, t0=0.2)
        return 0


# ---------------------------------------------------------------- --view

def vehicle_state(t: float) -> tuple[list[float], list[float]]:
    """Body 2 drives a circle of 12 m radius around the origin at 5 m/s, facing its path:
    its pose (px py pz qx qy qz qw) and velocity (vx vy vz wx wy wz)."""
    r, w = 12.0, 5.0 / 12.0
    a = w * t
    yaw = a + math.pi / 2
    return ([r * math.cos(a), r * math.sin(a), 0.0, 0.0, 0.0, math.sin(yaw / 2),
             math.cos(yaw / 2)], [-r * w * math.sin(a), r * w * math.cos(a), 0.0, 0.0, 0.0, w])


def wall_state(t: float, t0: float) -> tuple[list[float], list[float]]:
    """Body 1 (the wall) goes on from where the tour left it: x = 9 - 5 sin(t - t0), so it
    swings between 4 and 14 m, leaving t0 at 9 m and -5 m/s as in the tour."""
    return ([9.0 - 5.0 * math.sin(t - t0), 0.0, 1.0, 0.0, 0.0, 0.0, 1.0],
            [-5.0 * math.cos(t - t0), 0.0, 0.0, 0.0, 0.0, 0.0])


def view(c: sensim.Client, args: argparse.Namespace, t0: float) -> None:
    """Keep the demo running in real time with the Foxglove bridge on: a vehicle (body 2)
    with a VLP-16 (sensor 20) and an IMU (sensor 21) circles the wall, whose poses go to the
    bridge as transforms each step."""
    from sensim.foxglove import Bridge, body_frame, sensor_frame

    # the vehicle: a box body the size of a car, its lidar on the roof
    c.create_primitive(4, "box", half_extents=(2.0, 0.9, 0.7))
    c.create_body(2, vehicle_state(t0)[0], linear_velocity=vehicle_state(t0)[1][:3],
                  angular_velocity=vehicle_state(t0)[1][3:])
    c.create_object(4, 4, body_id=2, local_pose=(0.0, 0.0, 0.7), label=4, name="vehicle")
    c.create_lidar(20, body_id=2, vlp16={"frequency": 10.0}, mount=((0.5, 0.0, 1.9), None))
    c.create_imu(21, body_id=2, accelerometer=True, gyroscope=True)
    # pillars along the vehicle's circle, for it to see go by
    c.create_primitive(5, "cylinder", radius=0.4, half_length=1.5)
    for k in range(8):
        a = k * math.pi / 4 + math.pi / 8
        c.create_object(10 + k, 5, local_pose=(16 * math.cos(a), 16 * math.sin(a), 1.5),
                        label=5)

    with Bridge(args.host, args.port, environment="demo", token=args.token,
                listen=args.view) as bridge:
        # fixed frames: the mounts, as given to create_lidar / create_imu above
        bridge.set_frame(sensor_frame(10), "world", ((0.0, 0.0, 1.5), None))
        bridge.set_frame(sensor_frame(11), body_frame(1), ((0.0, 0.0, 0.0), None))
        bridge.set_frame(sensor_frame(20), body_frame(2), ((0.5, 0.0, 1.9), None))
        bridge.set_frame(sensor_frame(21), body_frame(2), ((0.0, 0.0, 0.0), None))
        print(f"live view: Foxglove -> open connection -> Foxglove WebSocket -> {bridge.url}",
              flush=True)
        print(f"live view: built-in page -> {bridge.page_url}   (Ctrl-C stops)", flush=True)
        dt, t = 0.05, t0
        start = time.monotonic()
        try:
            while args.view_seconds is None or time.monotonic() - start < args.view_seconds:
                t = round(t + dt, 9)
                (wp, wv), (vp, vv) = wall_state(t, t0), vehicle_state(t)
                c.update_state(t, [1, 2], [wp, vp], [wv, vv])
                bridge.publish_body_poses(t, [1, 2], [wp, vp])
                # the clouds go to the bridge; this StepDone need not carry them
                c.wait_reply(c.send_request("step", sensim.pb.Step(
                    time=t, outputs=sensim.pb.STEP_OUTPUTS_NONE)))
                # real time: the next step when the wall clock reaches it
                lag = (t - t0) - (time.monotonic() - start)
                if lag > 0:
                    time.sleep(lag)
        except KeyboardInterrupt:
            pass
        print(f"live view: stopped at t = {t:.2f} s", flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
