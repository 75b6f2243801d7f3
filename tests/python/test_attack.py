# SPDX-License-Identifier: MIT
"""Attacks of an adversarial client on the real sensimd, each one that once got a wrong answer:
raw frames where the client library would refuse to send the bad thing, and the daemon's answer
checked against what the protocol (proto/README.md) promises: the right status, a message
naming the field or the limit, nothing changed, the daemon alive for the next request."""

from __future__ import annotations

import math
import socket
import struct

import numpy as np

from sensim import pb


def _connect(daemon, environment: str = "attack") -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", daemon.port))
    sock.settimeout(30)
    env = pb.Envelope(id=1)
    env.hello.protocol_version = pb.PROTOCOL_VERSION
    env.hello.environment = environment
    _send(sock, env)
    reply = _read(sock)
    assert reply.status.code == pb.OK, reply
    return sock


def _send(sock: socket.socket, env) -> None:
    payload = env.SerializeToString()
    sock.sendall(struct.pack("<I", len(payload)) + payload)


def _read_exact(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            return b""
        data += chunk
    return data


def _read(sock: socket.socket):
    """The next Envelope, or None once the daemon has closed the connection."""
    head = _read_exact(sock, 4)
    if not head:
        return None
    env = pb.Envelope()
    env.ParseFromString(_read_exact(sock, struct.unpack("<I", head)[0]))
    return env


def test_a_frame_header_cut_short_is_named_when_it_times_out(sensimd_factory):
    # two of the four length bytes, then silence: the deadline's message said "2 of 0 bytes"
    daemon = sensimd_factory("--io-timeout", "0.5")
    sock = _connect(daemon)
    sock.sendall(b"\x05\x00")
    reply = _read(sock)
    assert reply.id == 0 and reply.status.code == pb.DEADLINE_EXCEEDED
    assert "2 of the 4 bytes of its length" in reply.status.message, reply.status.message
    assert _read(sock) is None
    # a frame whose length arrived and whose payload did not still counts its bytes
    sock = _connect(daemon)
    sock.sendall(struct.pack("<I", 100) + b"\x08")
    reply = _read(sock)
    assert reply.status.code == pb.DEADLINE_EXCEEDED
    assert "(5 of 104 bytes)" in reply.status.message, reply.status.message


def test_directions_of_any_finite_length_are_traced(sensimd):
    # A unit sphere at the origin, rays from (-5, -5, 0) along (1, 1, 0) scaled up to DBL_MAX:
    # each is the same ray and meets the sphere at 5 sqrt(2) - 1. Scaled past 1/DBL_MIN, the
    # inverse of its length was flushed to zero (the tracer's denormals-are-zero mode) and the
    # ray, of direction 0, missed everything.
    sock = _connect(sensimd)
    env = pb.Envelope(id=2)
    env.create_primitive.id = 1
    env.create_primitive.sphere.radius = 1.0
    _send(sock, env)
    env = pb.Envelope(id=3)
    env.create_object.id = 1
    env.create_object.geometry_id = 1
    _send(sock, env)
    assert [_read(sock).status.code for _ in range(2)] == [pb.OK, pb.OK]
    # three times over: full packets of rays as well as a part one
    scales = [1.0, 1e100, 1e200, 1e300, 4e307, 1e308, np.finfo(np.float64).max / 2] * 3
    directions = np.array([[s, s, 0.0] for s in scales])
    env = pb.Envelope(id=4)
    env.raycast.origins_bytes = np.tile([-5.0, -5.0, 0.0], (len(scales), 1)).tobytes()
    env.raycast.directions_bytes = directions.tobytes()
    _send(sock, env)
    reply = _read(sock)
    assert reply.status.code == pb.OK, reply.status.message
    hits = np.frombuffer(reply.raycast_result.hits_bytes, dtype=np.dtype(
        {"names": ["distance", "normal", "object_id"], "formats": ["<f8", ("<f8", (3,)), "<u4"],
         "offsets": [0, 8, 32], "itemsize": 48}))
    expected = 5.0 * math.sqrt(2.0) - 1.0
    for scale, hit in zip(scales, hits):
        assert hit["object_id"] == 1, f"direction scaled by {scale:g}: {hit}"
        assert abs(hit["distance"] - expected) < 1e-5, f"direction scaled by {scale:g}: {hit}"
        assert np.allclose(hit["normal"], [-math.sqrt(0.5), -math.sqrt(0.5), 0.0], atol=1e-5)
    # one ray of the plain length gives the same bits as every scaled one
    assert len({h.tobytes() for h in hits}) == 1


def _accelerometer(lower, upper, *, bias=0.0, cross=1.0, scaling=1.0):
    chain = pb.TriaxialConfig(range=pb.AxisRange(lower=pb.Vec3(x=lower, y=lower, z=lower),
                                                 upper=pb.Vec3(x=upper, y=upper, z=upper)),
                              bias=pb.Vec3(x=bias, y=bias, z=bias),
                              scaling=pb.Vec3(x=scaling, y=scaling, z=scaling))
    chain.cross_axis_matrix.m.extend([cross] * 9)
    return pb.ImuConfig(accelerometer=pb.AccelerometerConfig(chain=chain))


def test_an_imu_range_cannot_make_its_samples_overflow(sensimd):
    # The chain clamps to the range, then adds the bias, couples the axes and scales: a range
    # pinned at -1e308 (accepted: only NaN and a wrong infinity were refused) times a scaling
    # of -1e9 gave +inf samples. A finite bound is now within +-1e9 like every other value of
    # the chain; infinite bounds (no clamp) stay allowed.
    sock = _connect(sensimd)
    refused = [(-1e308, -1e308), (-1.0, 1e308), (-1.0000001e9, 0.0), (0.0, 2e9)]
    for n, (lower, upper) in enumerate(refused):
        env = pb.Envelope(id=10 + n)
        env.create_sensor.id = 1
        env.create_sensor.imu.CopyFrom(_accelerometer(lower, upper, scaling=-1e9))
        _send(sock, env)
        reply = _read(sock)
        assert reply.status.code == pb.INVALID_ARGUMENT, (lower, upper, reply)
        field = "lower" if abs(lower) > 1e9 else "upper"
        assert f"imu.accelerometer.chain.range.{field}.x" in reply.status.message
        assert "1e+09" in reply.status.message, reply.status.message
    # nothing was created: the id is free, and the largest values of every factor still give
    # finite samples: clamp(u) + b = -2e9 on each axis, the rows of 1e9 sum it to -6e18 and the
    # scaling makes -6e27 whatever the motion
    inf = float("inf")
    configs = [(-1e9, -1e9, -1e9), (-inf, -1e9, -1e9)]
    for n, (lower, upper, bias) in enumerate(configs):
        env = pb.Envelope(id=20 + n)
        env.create_sensor.id = 1 + n
        env.create_sensor.imu.CopyFrom(_accelerometer(lower, upper, bias=bias, cross=1e9,
                                                      scaling=1e9))
        _send(sock, env)
        reply = _read(sock)
        assert reply.status.code == pb.OK, reply.status.message
    for n, body in enumerate(("update_state", "step")):
        env = pb.Envelope(id=30 + n)
        getattr(env, body).time = 0.5
        _send(sock, env)
        reply = _read(sock)
        assert reply.status.code == pb.OK, reply.status.message
    samples = {o.sensor_id: list(o.imu.values) for o in reply.step_done.outputs}
    assert sorted(samples) == [1, 2]
    for values in samples.values():
        assert np.allclose(values, [-6e27] * 3, rtol=1e-12, atol=0.0), values


def test_small_round_primitives_are_hit_exactly_from_far_away(sensimd):
    # A ray from distance D at a primitive of radius r: the discriminant b^2 - a c of the hit's
    # quadratic was the difference of two numbers near D^2, and lost every digit once D / r
    # reached ~1e8 (a ray at the centre of a 1 m sphere 1e8 m away missed it, one of a 1e-6 m
    # ellipsoid 100 m away too; rays beside the centre got the wrong normal). Analytic truth:
    # the ray at height y = f r meets the circle of radius r at D - r sqrt(1 - f^2), normal
    # (-sqrt(1 - f^2), f, 0), whatever D / r (the distance to float32 precision, as the tracer
    # carries it; the normal, computed in double, to far better).
    sock = _connect(sensimd)
    cases = [(1e-6, 100.0), (1e-3, 1e5), (1.0, 1e8), (1.0, 1e9)]
    shapes = {"sphere": lambda p, r: setattr(p.sphere, "radius", r),
              "ellipsoid": lambda p, r: (setattr(p.ellipsoid.radii, "x", r),
                                         setattr(p.ellipsoid.radii, "y", r),
                                         setattr(p.ellipsoid.radii, "z", r)),
              "cylinder": lambda p, r: (setattr(p.cylinder, "radius", r),
                                        setattr(p.cylinder, "half_length", r)),
              "capsule": lambda p, r: (setattr(p.capsule, "radius", r),
                                       setattr(p.capsule, "half_length", r))}
    fractions = np.array([0.0, 0.5, 0.9])
    next_id = iter(range(10, 1000))
    for radius, distance in cases:
        for shape, make in shapes.items():
            requests = [pb.Envelope(id=next(next_id)) for _ in range(4)]
            requests[0].create_primitive.id = 1
            make(requests[0].create_primitive, radius)
            requests[1].create_object.id = 1
            requests[1].create_object.geometry_id = 1
            ray = requests[2].raycast
            ray.origins_bytes = np.array([[-distance, f * radius, 0.0]
                                          for f in fractions]).tobytes()
            ray.directions_bytes = np.tile([1.0, 0.0, 0.0], (len(fractions), 1)).tobytes()
            requests[3].remove.kind = pb.ENTITY_OBJECT
            requests[3].remove.id = 1
            for env in requests:
                _send(sock, env)
            replies = [_read(sock) for _ in requests]
            assert [r.status.code for r in replies] == [pb.OK] * 4, replies
            env = pb.Envelope(id=next(next_id))
            env.remove.kind = pb.ENTITY_GEOMETRY
            env.remove.id = 1
            _send(sock, env)
            assert _read(sock).status.code == pb.OK
            hits = np.frombuffer(replies[2].raycast_result.hits_bytes, dtype=np.dtype(
                {"names": ["distance", "normal", "object_id"],
                 "formats": ["<f8", ("<f8", (3,)), "<u4"], "offsets": [0, 8, 32],
                 "itemsize": 48}))
            what = f"{shape} r = {radius:g} from {distance:g}"
            assert list(hits["object_id"]) == [1, 1, 1], what
            cos = np.sqrt(1.0 - fractions ** 2)
            # the tracer carries a ray's distance as a float32: its spacing at D bounds it
            tol = 2.0 * float(np.spacing(np.float32(distance)))
            np.testing.assert_allclose(hits["distance"], distance - radius * cos, rtol=0,
                                       atol=tol, err_msg=what)
            np.testing.assert_allclose(hits["normal"], np.stack([-cos, fractions, 0 * cos], 1),
                                       rtol=0, atol=1e-6, err_msg=what)


def test_an_incremental_encoder_with_a_subnormal_range_stays_in_it(sensimd):
    # An incremental encoder wraps its reading into [range_lower, range_upper). With a range
    # as narrow as 5e-324 (accepted: finite, lower < upper) the number of wraps of a reading of
    # 1 rad overflowed to inf and the reading became -inf, its speed NaN. Truth: every reading
    # lies in the half-open range (for [0, 5e-324) that is 0 alone), every speed is finite.
    sock = _connect(sensimd)
    ranges = {7: (0.0, 5e-324), 8: (-1e-310, 1e-310)}
    requests = [pb.Envelope(id=2)]
    requests[0].create_joint.id = 1
    for sensor, (lower, upper) in ranges.items():
        env = pb.Envelope(id=sensor)
        env.create_sensor.id = sensor
        env.create_sensor.encoder.joint_id = 1
        env.create_sensor.encoder.mode = pb.ENCODER_INCREMENTAL
        env.create_sensor.encoder.range_lower = lower
        env.create_sensor.encoder.range_upper = upper
        requests.append(env)
    for env in requests:
        _send(sock, env)
        reply = _read(sock)
        assert reply.status.code == pb.OK, reply.status.message
    for n, (t, q) in enumerate([(0.1, 0.0), (0.2, 1.0), (0.3, -2.5), (0.4, 1e9)]):
        env = pb.Envelope(id=20 + 2 * n)
        env.update_state.time = t
        env.update_state.joint_ids.append(1)
        env.update_state.joint_positions.append(q)
        _send(sock, env)
        env = pb.Envelope(id=21 + 2 * n)
        env.step.time = t
        _send(sock, env)
        assert _read(sock).status.code == pb.OK
        reply = _read(sock)
        assert reply.status.code == pb.OK, reply.status.message
        readings = {o.sensor_id: o.scalar for o in reply.step_done.outputs}
        for sensor, (lower, upper) in ranges.items():
            r = readings[sensor]
            assert lower <= r.position < upper, (t, q, sensor, r)
            assert math.isfinite(r.speed), (t, q, sensor, r)
        assert readings[7].position == 0.0


def _payload(env) -> str:
    data = env.sensor_data
    return "end" if data.end_of_stream else data.WhichOneof("payload")


def test_a_removed_sensors_subscription_never_gets_its_successors_records(sensimd):
    # Pipelined in one write: subscribe to IMU 1, step, remove it, create encoder 1 in its
    # place, subscribe to that, step, remove it. The removal ended the streams only when its
    # reply was written, after the next requests had run: the IMU's subscription got the
    # encoder's record before its end_of_stream, and the new Subscribe joined the IMU's ended
    # stream (the encoder's records lost, its end_of_stream early) or was refused as a repeat.
    sock = _connect(sensimd)
    env = pb.Envelope(id=2)
    env.create_joint.id = 1
    _send(sock, env)
    assert _read(sock).status.code == pb.OK
    ident, t = 10, 0.0

    def request(**body):
        nonlocal ident
        ident += 1
        env = pb.Envelope(id=ident)
        for name, value in body.items():
            getattr(env, name).CopyFrom(value)
        return env

    for _ in range(20):
        imu = pb.CreateSensor(id=1, imu=pb.ImuConfig(accelerometer=pb.AccelerometerConfig()))
        batch = [request(create_sensor=imu), request(subscribe=pb.Subscribe(sensor_id=1))]
        t += 0.01
        batch += [request(update_state=pb.UpdateState(time=t)),
                  request(step=pb.Step(time=t, outputs=pb.STEP_OUTPUTS_NONE)),
                  request(remove=pb.Remove(kind=pb.ENTITY_SENSOR, id=1)),
                  request(create_sensor=pb.CreateSensor(id=1, encoder=pb.EncoderConfig(
                      joint_id=1))),
                  request(subscribe=pb.Subscribe(sensor_id=1))]
        t += 0.01
        batch += [request(update_state=pb.UpdateState(time=t)),
                  request(step=pb.Step(time=t, outputs=pb.STEP_OUTPUTS_NONE)),
                  request(remove=pb.Remove(kind=pb.ENTITY_SENSOR, id=1))]
        sock.sendall(b"".join(struct.pack("<I", e.ByteSize()) + e.SerializeToString()
                              for e in batch))
        pushed, replies = [], 0
        while replies < len(batch) or pushed.count("end") < 2:
            reply = _read(sock)
            assert reply is not None
            if reply.HasField("sensor_data"):
                pushed.append(_payload(reply))
            else:
                assert reply.status.code == pb.OK, reply.status.message
                replies += 1
        # each subscription: its sensor's one record, then its end
        assert sorted(pushed) == ["end", "end", "imu", "scalar"], pushed


def test_a_custom_channel_past_the_rings_uint16_is_refused(sensimd):
    # CustomPattern.channels are reported as the point field ring, a uint16: a channel of 65536
    # was accepted and arrived as ring 0, 70000 as 4464. Refused now, naming the channel;
    # 65535 is kept whole.
    sock = _connect(sensimd)

    def custom(id_, channels):
        env = pb.Envelope(id=id_)
        env.create_sensor.id = 1
        lidar = env.create_sensor.lidar
        lidar.custom.azimuths.extend([0.0] * len(channels))
        lidar.custom.elevations.extend([0.0] * len(channels))
        lidar.custom.channels.extend(channels)
        lidar.custom.frame_rate = 10.0
        lidar.fields.append("ring")
        lidar.keep_misses = True
        return env

    for n, channels in enumerate([[3, 65536], [70000]]):
        _send(sock, custom(10 + n, channels))
        reply = _read(sock)
        assert reply.status.code == pb.INVALID_ARGUMENT, reply
        bad = len(channels) - 1
        assert f"custom.channels[{bad}] = {channels[bad]} exceeds 65535" in reply.status.message
    _send(sock, custom(20, [65535, 7]))
    assert _read(sock).status.code == pb.OK
    for n, t in enumerate([0.0, 0.1]):
        env = pb.Envelope(id=30 + 2 * n)
        env.update_state.time = t
        _send(sock, env)
        env = pb.Envelope(id=31 + 2 * n)
        env.step.time = t
        _send(sock, env)
        assert _read(sock).status.code == pb.OK
        reply = _read(sock)
        assert reply.status.code == pb.OK, reply.status.message
    (cloud,) = [o.point_cloud for o in reply.step_done.outputs]
    assert cloud.count == 2 and cloud.point_step == 2
    assert sorted(np.frombuffer(cloud.data, dtype="<u2").tolist()) == [7, 65535]


def test_a_subscription_gets_the_records_of_a_step_pipelined_right_after_it(sensimd):
    # Pipelined: create IMU k, subscribe to it, step, for k = 1..R. The loop could take a
    # step's frames before it had made the subscription its Subscribe asked for: that
    # subscription lost its first record (its sequence still began at 1, no gap to see).
    R = 60
    sock = _connect(sensimd)
    batch = []
    for k in range(1, R + 1):
        t = 0.01 * k
        env = pb.Envelope(id=4 * k)
        env.create_sensor.id = k
        env.create_sensor.imu.accelerometer.SetInParent()
        batch.append(env)
        env = pb.Envelope(id=4 * k + 1)
        env.subscribe.sensor_id = k
        batch.append(env)
        env = pb.Envelope(id=4 * k + 2)
        env.update_state.time = t
        batch.append(env)
        env = pb.Envelope(id=4 * k + 3)
        env.step.time = t
        env.step.outputs = pb.STEP_OUTPUTS_NONE
        batch.append(env)
    sock.sendall(b"".join(struct.pack("<I", e.ByteSize()) + e.SerializeToString()
                          for e in batch))
    times = {k: [] for k in range(1, R + 1)}
    replies = 0
    while replies < len(batch) or sum(map(len, times.values())) < R * (R + 1) // 2:
        if replies == len(batch):
            sock.settimeout(5)   # every reply is in: the records left come at once or never
        try:
            reply = _read(sock)
        except socket.timeout:
            break
        assert reply is not None
        if reply.HasField("sensor_data"):
            times[reply.sensor_data.sensor_id].append(round(reply.sensor_data.time, 6))
        else:
            assert reply.status.code == pb.OK, reply.status.message
            replies += 1
    for k in range(1, R + 1):
        assert times[k] == [round(0.01 * j, 6) for j in range(k, R + 1)], (k, times[k])
