# SPDX-License-Identifier: MIT
"""Seed corpora of the fuzz targets, written by the build from valid messages of the protocol
(the generated sensim_pb2 module): python3 seeds.py OUTDIR writes OUTDIR/request, OUTDIR/frame
and OUTDIR/client (OUTDIR/codec comes from fuzz_seeds_codec.c, which needs the encoder, and
is written first: the client's seeds carry its clouds).

- request: what a controller sends after its Hello: scenes with every geometry, material,
  medium and sensor kind (each lidar pattern among them) on moving bodies, state updates and
  steps in both array forms, raycasts, removals, and the session requests;
- frame: the same streams behind fuzz_frame's 10-byte head (split seed, two limits);
- client: what a daemon answers the C client's calls (HelloReply, Info, Pong, RaycastResult,
  StepDone with parts ahead, a status alone), with pushed sensor data of every kind and
  encoding, stale replies and refusals among them.
Ids follow fuzz_request.c and fuzz_client.c. Deterministic: the same bytes on every build.
"""

from __future__ import annotations

import math
import pathlib
import struct
import sys

import sensim_pb2 as pb


def frame(env: pb.Envelope) -> bytes:
    payload = env.SerializeToString()
    return struct.pack("<I", len(payload)) + payload


class Stream:
    """Requests with consecutive ids, framed."""

    def __init__(self) -> None:
        self.next_id = 1
        self.frames: list[bytes] = []

    def add(self, **body) -> "Stream":
        self.frames.append(frame(pb.Envelope(id=self.next_id, **body)))
        self.next_id += 1
        return self

    def bytes(self) -> bytes:
        return b"".join(self.frames)


def vec(x: float, y: float, z: float) -> pb.Vec3:
    return pb.Vec3(x=x, y=y, z=z)


def pose(x: float = 0.0, y: float = 0.0, z: float = 0.0, yaw: float = 0.0) -> pb.Pose:
    return pb.Pose(position=vec(x, y, z),
                   orientation=pb.Quat(w=math.cos(yaw / 2), x=0.0, y=0.0, z=math.sin(yaw / 2)))


def cube_mesh(gid: int) -> pb.CreateMesh:
    v = [(x, y, z) for z in (-0.5, 0.5) for y in (-0.5, 0.5) for x in (-0.5, 0.5)]
    t = [(0, 2, 1), (1, 2, 3), (4, 5, 6), (5, 7, 6), (0, 1, 4), (1, 5, 4),
         (2, 6, 3), (3, 6, 7), (0, 4, 2), (2, 4, 6), (1, 3, 5), (3, 7, 5)]
    return pb.CreateMesh(id=gid, vertices=b"".join(struct.pack("<3f", *p) for p in v),
                         indices=b"".join(struct.pack("<3I", *i) for i in t),
                         material_ids=struct.pack("<12I", *([0, 2] * 6)), name="cube")


def scene(s: Stream) -> Stream:
    """Geometry of every kind, materials, media, settings, two bodies, objects, two joints."""
    s.add(set_material=pb.SetMaterial(id=1, lambertian=pb.Lambertian(reflectance=0.3)))
    s.add(set_material=pb.SetMaterial(id=2, two_layer=pb.TwoLayer(specular_roughness=0.2),
                                      name="paint"))
    s.add(create_mesh=cube_mesh(1))
    s.add(create_primitive=pb.CreatePrimitive(id=2, sphere=pb.Sphere(radius=0.7)))
    s.add(create_primitive=pb.CreatePrimitive(id=3, box=pb.Box(half_extents=vec(1, 2, 0.5))))
    s.add(create_primitive=pb.CreatePrimitive(id=4, cylinder=pb.Cylinder(radius=0.3,
                                                                          half_length=1)))
    s.add(create_primitive=pb.CreatePrimitive(id=5, capsule=pb.Capsule(radius=0.2,
                                                                        half_length=0.5)))
    s.add(create_primitive=pb.CreatePrimitive(id=6, plane=pb.Plane(half_size=50)))
    s.add(set_ambient=pb.SetAmbient(id=0, clear_air=pb.ClearAir(visibility=20000)))
    s.add(set_ambient=pb.SetAmbient(id=1, fog=pb.Fog(visibility=50)))
    s.add(set_environment=pb.SetEnvironment(
        gravity=vec(0, 0, -9.81), magnetic_field=vec(2e-5, 0, -4e-5), seed=7, replace_dipoles=True,
        dipoles=[pb.MagneticDipole(moment=vec(0, 0, 1), position=vec(1, 0, 0), body_id=0)]))
    s.add(create_body=pb.CreateBody(id=1, pose=pose(0, 0, 1), linear_velocity=vec(2, 0, 0),
                                    angular_velocity=vec(0, 0, 0.5), name="vehicle"))
    s.add(create_body=pb.CreateBody(id=2, pose=pose(6, 1, 0.5, 0.3)))
    s.add(create_object=pb.CreateObject(id=1, geometry_id=6, material_id=1, label=1))
    s.add(create_object=pb.CreateObject(id=2, geometry_id=1, body_id=2, scale=vec(2, 2, 1),
                                        material_id=2, label=2, group=3))
    s.add(create_object=pb.CreateObject(id=3, geometry_id=2, local_pose=pose(8, -3, 0.7),
                                        label=3))
    s.add(create_object=pb.CreateObject(id=4, geometry_id=3, local_pose=pose(-6, 4, 0.5),
                                        medium_id=1, label=4))
    s.add(create_object=pb.CreateObject(id=5, geometry_id=4, local_pose=pose(3, 5, 1)))
    s.add(create_object=pb.CreateObject(id=6, geometry_id=5, body_id=1,
                                        local_pose=pose(0, 0, -0.5)))
    s.add(create_joint=pb.CreateJoint(id=1, type=pb.JOINT_REVOLUTE, position=0.1, name="wheel"))
    s.add(create_joint=pb.CreateJoint(id=2, type=pb.JOINT_PRISMATIC, position=0.0))
    return s


def small_spinning() -> pb.LidarConfig:
    return pb.LidarConfig(
        spinning=pb.SpinningPattern(frequency=10, columns=64,
                                    channel_elevations=[-0.2, -0.1, 0.0, 0.1]),
        range_max=80, publish=pb.PUBLISH_PER_STEP)


def other_sensors(s: Stream) -> Stream:
    """An IMU with every triaxial sensor, an encoder, an odometer and a cone sensor."""
    chain = pb.TriaxialConfig(noise_stddev=vec(0.01, 0.01, 0.01), bias=vec(0.1, 0, 0),
                              cross_axis_scalar=0.01,
                              drift=pb.TriaxialDrift(bias_instability=0.001,
                                                     bias_correlation_time=10, precision=1e-4))
    s.add(create_sensor=pb.CreateSensor(id=2, body_id=1, mount=pose(0.1, 0, 0), imu=pb.ImuConfig(
        accelerometer=pb.AccelerometerConfig(chain=chain),
        gyroscope=pb.GyroscopeConfig(chain=chain, lae_diagonal=vec(1e-3, 1e-3, 1e-3)),
        magnetometer=pb.MagnetometerConfig(chain=chain), sample_rate=400)))
    s.add(create_sensor=pb.CreateSensor(id=3, encoder=pb.EncoderConfig(
        joint_id=1, noise_stddev=1e-3, resolution=0.01, mode=pb.ENCODER_INCREMENTAL)))
    s.add(create_sensor=pb.CreateSensor(id=4, odometer=pb.OdometerConfig(
        joint_id=1, wheel_radius=0.3, pulses_per_revolution=512)))
    s.add(create_sensor=pb.CreateSensor(id=5, body_id=1, mount=pose(0.5, 0, 0),
                                        cone=pb.ConeConfig(range=15)))
    s.add(create_sensor=pb.CreateSensor(id=6, body_id=1, cone=pb.ConeConfig(
        mode=pb.CONE_LINES, lines_per_face=4, range=10)))
    return s


def move(s: Stream, t: float, as_bytes: bool, n: int = 2) -> Stream:
    """State at t of the first n bodies and joints (body 1 driving and turning, body 2 still)
    and its step."""
    poses = [2 * t, 0, 1, 0, 0, math.sin(0.25 * t), math.cos(0.25 * t), 6, 1, 0.5, 0, 0, 0, 1]
    vels = [2, 0, 0, 0, 0, 0.5, 0, 0, 0, 0, 0, 0]
    ids, poses, vels, joints = [1, 2][:n], poses[:7 * n], vels[:6 * n], [3 * t, 0.1 * t][:n]
    if as_bytes:
        u = pb.UpdateState(time=t, body_ids_bytes=struct.pack(f"<{n}I", *ids),
                           body_poses_bytes=struct.pack(f"<{7 * n}d", *poses),
                           body_velocities_bytes=struct.pack(f"<{6 * n}d", *vels),
                           joint_ids_bytes=struct.pack(f"<{n}I", *ids),
                           joint_positions_bytes=struct.pack(f"<{n}d", *joints))
    else:
        u = pb.UpdateState(time=t, body_ids=ids, body_poses=poses, body_velocities=vels,
                           joint_ids=ids, joint_positions=joints)
    s.add(update_state=u)
    s.add(step=pb.Step(time=t))
    return s


def raycasts(s: Stream, t1: float) -> Stream:
    """Four raycasts after the step to t1 (the interval is then the instant t1): the packed
    arrays, their bytes form, one origin for every ray, and the hits alone asked for."""
    s.add(raycast=pb.Raycast(origins=[0, 0, 1, 0, 0, 1], directions=[1, 0, 0, 0, 1, -0.1],
                             max_range=100, times=[t1]))
    s.add(raycast=pb.Raycast(origins_bytes=struct.pack("<6d", 0, 0, 2, 1, 1, 2),
                             directions_bytes=struct.pack("<6d", 1, 0, -0.2, 0, -1, 0),
                             times_bytes=struct.pack("<d", t1), exclude_bodies=[1],
                             group_mask=0xFFFFFFF7))
    s.add(raycast=pb.Raycast(origin=pb.Vec3(x=0.5, y=-1, z=2),
                             directions_bytes=struct.pack("<6d", 1, 0, -0.2, 0, -1, 0)))
    s.add(raycast=pb.Raycast(origins=[0, 0, 1, 0, 0, 1], directions=[1, 0, 0, 0, 1, -0.1],
                             omit_misses=True))
    return s


def request_seeds() -> dict[str, bytes]:
    out = {}

    # every sensor kind in one scene, stepped four times, queried, then taken apart
    s = other_sensors(scene(Stream()))
    s.add(create_sensor=pb.CreateSensor(id=1, body_id=1, mount=pose(0, 0, 0.5),
                                        lidar=small_spinning()))
    move(s, 0.0, False)
    move(s, 0.02, True)
    raycasts(s, 0.02)
    move(s, 0.04, False)
    s.add(get_info=pb.GetInfo())
    s.add(ping=pb.Ping(payload=b"seed"))
    s.add(subscribe=pb.Subscribe(sensor_id=1, encoding=pb.ENCODING_QUANTIZED_ZSTD,
                                 precision=0.001, level=3, fields=["x", "y", "z"]))
    s.add(unsubscribe=pb.Unsubscribe(sensor_id=1))
    for kind, eid in ((pb.ENTITY_SENSOR, 5), (pb.ENTITY_OBJECT, 6), (pb.ENTITY_GEOMETRY, 5),
                      (pb.ENTITY_OBJECT, 1), (pb.ENTITY_MATERIAL, 1), (pb.ENTITY_OBJECT, 4),
                      (pb.ENTITY_MEDIUM, 1), (pb.ENTITY_JOINT, 2), (pb.ENTITY_OBJECT, 2),
                      (pb.ENTITY_BODY, 2)):
        s.add(remove=pb.Remove(kind=kind, id=eid))
    move(s, 0.06, True, n=1)
    out["every_sensor"] = s.bytes()

    # one lidar per pattern and option set, on the moving body, three steps of 20 ms
    lidars = {
        "vlp16": pb.LidarConfig(vlp16=pb.Vlp16Pattern(frequency=10, vertical_offsets=True),
                                return_mode=pb.RETURN_DUAL, layout=pb.LAYOUT_VELODYNE,
                                publish=pb.PUBLISH_PER_STEP),
        "ouster": pb.LidarConfig(ouster=pb.OusterPattern(channels=16, columns=512,
                                                         frequency=20),
                                 layout=pb.LAYOUT_OUSTER, misses=pb.MISSES_ZERO,
                                 frame=pb.FRAME_WORLD),
        "flash": pb.LidarConfig(flash=pb.FlashPattern(columns=8, rows=6, fov_horizontal=1,
                                                      fov_vertical=0.5, frame_rate=100,
                                                      projective=True),
                                misses=pb.MISSES_NAN, publish=pb.PUBLISH_PER_STEP),
        "hdl64e": pb.LidarConfig(hdl64e=pb.Hdl64ePattern(frequency=20, columns=32),
                                 distance_noise=pb.DistanceNoise(stddev_base=0.01,
                                                                 stddev_slope=0.001),
                                 publish=pb.PUBLISH_PER_STEP),
        "bpearl": pb.LidarConfig(bpearl=pb.BpearlPattern(frequency=20),
                                 angle_noise=pb.RayAngleNoise(axis=pb.NOISE_AXIS_AZIMUTH,
                                                              stddev=0.001),
                                 publish=pb.PUBLISH_PER_STEP, raytrace_depth=2),
        "custom": pb.LidarConfig(custom=pb.CustomPattern(
            azimuths=[0, 0.5, 1, 1.5, 2, 3], elevations=[0, -0.1, 0.1, 0, -0.3, 0.2],
            time_offsets=[0, 1e-4, 2e-4, 3e-4, 4e-4, 5e-4], channels=[0, 1, 2, 0, 1, 2],
            frame_rate=200), return_mode=pb.RETURN_ALL, max_returns=3,
            beam=pb.BeamDivergence(divergence=0.003), fields=["x", "y", "z", "intensity",
                                                              "distance", "object_id"]),
        "livox": pb.LidarConfig(livox=pb.LivoxPattern(point_rate=20000, frame_rate=100),
                                round_trip_attenuation=True, intensity_threshold=0.01,
                                see_own_body=True, group_mask=0b111),
    }
    for name, cfg in lidars.items():
        s = scene(Stream())
        s.add(create_sensor=pb.CreateSensor(id=1, body_id=1, mount=pose(0, 0, 0.5, 0.1),
                                            name=name, lidar=cfg))
        for k, t in enumerate((0.0, 0.02, 0.04, 0.06)):
            move(s, t, k % 2 == 1)
        out[f"lidar_{name}"] = s.bytes()

    # each request kind alone, and refusals (unknown ids, a NUL in a name, no body, a reply)
    s = Stream()
    s.add(create_body=pb.CreateBody(id=3, pose=pose(1, 2, 3), name="a\0b"))
    s.add(remove=pb.Remove(kind=pb.ENTITY_BODY, id=99))
    s.add(step=pb.Step(time=1.0))
    s.add(raycast=pb.Raycast(origins=[0, 0, 0], directions=[0, 0, 0]))
    s.add(hello=pb.Hello(protocol_version=1, client_name="seed", environment="e", token="t"))
    s.add(step_done=pb.StepDone(time=1))
    s.add(remove=pb.Remove(kind=pb.ENTITY_ENVIRONMENT))
    s.frames.append(frame(pb.Envelope(id=s.next_id)))
    out["refusals"] = s.bytes()
    return out


def frame_seeds(requests: dict[str, bytes]) -> dict[str, bytes]:
    """fuzz_frame's head: 8 bytes of split seed, then the limit indices of the first frame
    and of the others (fuzz_frame.c kLimits: 4 = 4096, 5 = 65536, 6 = 1 MiB, 2 = 64)."""
    out = {}
    for k, (name, stream) in enumerate(sorted(requests.items())):
        out[name] = struct.pack("<Q", 0x1234567 * (k + 1)) + bytes([5, 6]) + stream
    out["small_limits"] = struct.pack("<Q", 42) + bytes([4, 2]) + requests["refusals"]
    out["zero_length"] = struct.pack("<Q", 7) + bytes([5, 5]) + frame(pb.Envelope(id=1)) + \
        b"\0\0\0\0"
    return out


def varint(v: int) -> bytes:
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def status_frame(i: int, code: int, message: str) -> bytes:
    """A reply carrying status `code` alone, written by hand: the generated module refuses a
    code its enum does not have (a newer daemon's, or one in the client's own range)."""
    st = b"\x08" + varint(code) + b"\x12" + varint(len(message)) + message.encode()
    payload = pb.Envelope(id=i).SerializeToString() + b"\x12" + varint(len(st)) + st
    return struct.pack("<I", len(payload)) + payload


def codec_clouds(codec_dir: pathlib.Path) -> dict[str, pb.PointCloud]:
    """The decode seeds of fuzz_codec (the daemon's encoder, fuzz_seeds_codec.c: a 9-byte head
    with the encoding, u16 points and the point step, then the data) as PointClouds."""
    out = {}
    for path in sorted(codec_dir.glob("decode_*")):
        b = path.read_bytes()
        count, step = b[1] | b[2] << 8, b[3]
        fields = [pb.PointField(name=n, offset=4 * k, datatype=pb.PointField.FLOAT32, count=1)
                  for k, n in enumerate("xyz") if 4 * k + 4 <= step]
        out[path.name[len("decode_"):]] = pb.PointCloud(
            fields=fields, point_step=step, count=count, height=1, width=count,
            encoding=b[0] & 3, data=b[9:], precision=1e-3, max_error=5e-4, complete=True)
    return out


def client_seeds(codec_dir: pathlib.Path) -> dict[str, bytes]:
    """fuzz_client.c's input: an options byte, then a daemon's replies to the C client's
    Hello (id 1), GetInfo (2), Ping "fuzz" (3), Raycast of 4 rays (4), Step (5), Subscribe (6)
    and GetInfo (7), with pushed data of every kind and encoding among them."""
    ok = pb.Status(code=pb.OK)
    limits = pb.Limits(max_frame_bytes=1 << 26, max_clients=64, max_raycast_rays=1 << 20)
    hello = frame(pb.Envelope(id=1, status=ok, hello_reply=pb.HelloReply(
        protocol_version=1, server_version="0.1.0", session_id=1, environment="fuzz",
        environment_created=True, threads=2, limits=limits)))

    def info(i: int) -> bytes:
        return frame(pb.Envelope(id=i, status=ok, info=pb.Info(
            server_version="0.1.0", protocol_version=1, uptime_s=1.5, connections=1,
            threads=2, counters=pb.Counters(frames_in=3, steps=10, rays_traced=1000),
            limits=limits,
            environments=[pb.EnvironmentInfo(name="fuzz", clients=1, bodies=2, time=0.5,
                                             steps=5, counters=pb.Counters(steps=5),
                                             retention=pb.RETENTION_KEEP),
                          pb.EnvironmentInfo(name="other", clients=2)],
            subscribers=[pb.SubscriberInfo(session_id=1, environment="fuzz", sensor_id=1,
                                           encoding=pb.ENCODING_ZSTD, queued_bytes=10,
                                           frames_sent=3, peer="127.0.0.1:5000"),
                         pb.SubscriberInfo(session_id=2, environment="fuzz", sensor_id=2,
                                           closed_reason="slow subscriber")])))

    pong = frame(pb.Envelope(id=3, status=ok, pong=pb.Pong(payload=b"fuzz",
                                                           server_time_ns=123456789)))
    inf = float("inf")
    hits = b"".join(struct.pack("<4d2I8x", d, 1.0, 0.0, 0.0, obj, 7)
                    for d, obj in ((2.5, 3), (inf, 0), (0.5, 1), (inf, 0)))
    raycast = frame(pb.Envelope(id=4, status=ok, raycast_result=pb.RaycastResult(
        padding=b"\0" * 3, hits_bytes=hits, world_serial=9)))
    # the same hits to a client that asked for them alone (HelloReply.features: hit_mask)
    masked_hello = frame(pb.Envelope(id=1, status=ok, hello_reply=pb.HelloReply(
        protocol_version=1, server_version="0.1.0", session_id=1, environment="fuzz",
        threads=2, limits=limits,
        features=pb.FEATURE_RAYCAST_ORIGIN | pb.FEATURE_RAYCAST_HIT_MASK)))
    masked = frame(pb.Envelope(id=4, status=ok, raycast_result=pb.RaycastResult(
        world_serial=9, hit_mask=bytes([0b0101]), padding=b"\0" * 5,
        hits_bytes=hits[:40] + hits[96:136])))
    subscribed = frame(pb.Envelope(id=6, status=ok))

    clouds = codec_clouds(codec_dir)
    xyz = clouds["raw_xyzi"]
    imu = pb.SensorData(sensor_id=2, time=0.1, start_time=0.0, frame=1, imu=pb.ImuSample(
        acceleration=vec(0, 0, 9.8), angular_velocity=vec(0, 0, 0.1),
        magnetic_field=vec(2e-5, 0, -4e-5), values=[1, 2, 3, 4, 5, 6, 7, 8, 9]))
    scalar = pb.SensorData(sensor_id=3, time=0.1, frame=1,
                           scalar=pb.ScalarSample(position=0.3, speed=1.0))
    cone = pb.SensorData(sensor_id=5, time=0.1, frame=1, cone=pb.ConeReading(
        detected=True, range=2.0, azimuth=0.1, elevation=-0.1, speed=0.5,
        point=vec(2, 0.2, -0.2), object_id=3))
    cloud = pb.SensorData(sensor_id=1, time=0.1, frame=1, point_cloud=xyz)

    def step(parts: list[pb.SensorData], outputs: list[pb.SensorData]) -> bytes:
        ahead = b"".join(frame(pb.Envelope(id=5, sensor_data=d)) for d in parts)
        return ahead + frame(pb.Envelope(id=5, status=ok, step_done=pb.StepDone(
            time=0.1, step=1, outputs=outputs, outputs_in_parts=len(parts))))

    def push(seq: int, d: pb.SensorData) -> bytes:
        return frame(pb.Envelope(id=0, sequence=seq, sensor_data=d))

    calls = hello + info(2) + pong + raycast
    rest = subscribed + info(7)
    pushed = b"".join(push(k + 1, pb.SensorData(sensor_id=1, time=0.1, frame=k + 1,
                                                point_cloud=c))
                      for k, (_, c) in enumerate(sorted(clouds.items())))
    ended = push(len(clouds) + 1, pb.SensorData(sensor_id=1, time=0.2, end_of_stream=True))
    stale = frame(pb.Envelope(id=77, status=ok, step_done=pb.StepDone(time=1, step=1)))
    refused = frame(pb.Envelope(id=0, status=pb.Status(code=pb.RESOURCE_EXHAUSTED,
                                                       message="max_clients (64) reached")))
    parts = [pb.SensorData(sensor_id=10 + k, time=0.1, frame=1, point_cloud=c)
             for k, (_, c) in enumerate(sorted(clouds.items()))]
    out = {
        "calls": calls + step([], [imu, scalar, cone, cloud]) + rest,
        "step_parts": calls + step(parts, []) + rest,
        "pushed": hello + push(1, imu) + info(2) + push(2, scalar) + stale + pong +
        push(3, cone) + raycast + step([cloud], []) + pushed + rest + ended,
        "hit_mask": masked_hello + info(2) + pong + masked + step([], [imu]) + rest,
        "refused": refused,
        "unauthenticated": frame(pb.Envelope(id=1, status=pb.Status(
            code=pb.UNAUTHENTICATED, message="bad token"))),
        "failed_calls": hello + status_frame(2, pb.INTERNAL, "no") + pong +
        status_frame(4, pb.FAILED_PRECONDITION, "no state yet") +
        status_frame(5, pb.DEADLINE_EXCEEDED, "step: over --max-request-seconds") +
        status_frame(6, pb.NOT_FOUND, "sensor_id 1 does not exist") + info(7),
    }
    # the options byte: blocking, 1024 pushed frames kept, sensim_raycast; the pushed stream
    # again with every option set
    seeds = {name: b"\0" + stream for name, stream in out.items()}
    seeds["pushed_options"] = b"\7" + out["pushed"]
    return seeds


def main() -> None:
    root = pathlib.Path(sys.argv[1])
    requests = request_seeds()
    for corpus, seeds in (("request", requests), ("frame", frame_seeds(requests)),
                          ("client", client_seeds(root / "codec"))):
        d = root / corpus
        d.mkdir(parents=True, exist_ok=True)
        for name, data in seeds.items():
            (d / name).write_bytes(data)


if __name__ == "__main__":
    main()
