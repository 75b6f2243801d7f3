# SPDX-License-Identifier: MIT
"""Randomized robustness of the real sensimd, with a fixed seed and bounded counts (a few
seconds, also under ASan):

- mutated frames: valid request Envelopes of every kind, serialized and then mutated (bit flips,
  truncation, byte insertion and overwrite, duplication, splicing, corrupt length prefixes), each
  sent on its own connection after a valid Hello; the daemon answers with well-formed frames or
  closes the connection, and never crashes;
- semantically bad requests: well-formed messages with random bad values (NaN, inf, huge and
  negative numbers, unknown and huge ids, mismatched packed array lengths, empty oneofs, unknown
  enum values); each gets a non-OK status naming the field, and the environment's state
  (GetInfo counts and counters, raycasts at both ends of the interval) is unchanged;
- a witness client, connected to its own environment the whole time, keeps getting correct
  answers (ping, a raycast against a known sphere, its GetInfo entry) throughout;
- afterwards the daemon exits 0 on SIGTERM.

Traffic stays on 127.0.0.1 (the fixture's listen address).
"""

from __future__ import annotations

import math
import random
import signal
import socket
import struct
import time

import numpy as np
import pytest

import sensim
from sensim import pb

SEED = 0x5E115
N_MUTATED = 2500           # part (a): one connection each
N_SEMANTIC = 1300          # part (b): round-robin over the 13 generators
WITNESS_EVERY = 50
IO_TIMEOUT = 15.0          # s; generous for ASan builds
NAN, INF = math.nan, math.inf


def frame(payload: bytes) -> bytes:
    return struct.pack("<I", len(payload)) + payload


def info_of(info, name: str):
    """The EnvironmentInfo of environment `name` in an Info."""
    for env in info.environments:
        if env.name == name:
            return env
    pytest.fail(f"environment {name!r} is not listed: {[e.name for e in info.environments]}")


def cube(half: float = 0.5) -> tuple[np.ndarray, np.ndarray]:
    v = np.array([[x, y, z] for z in (-half, half) for y in (-half, half) for x in (-half, half)],
                 dtype="<f4")
    t = np.array([[0, 2, 1], [1, 2, 3], [4, 5, 6], [5, 7, 6], [0, 1, 4], [1, 5, 4],
                  [2, 6, 3], [3, 6, 7], [0, 4, 2], [2, 4, 6], [1, 3, 5], [3, 7, 5]], dtype="<u4")
    return v, t


def build_scene(c: sensim.Client) -> None:
    """Mesh 1 (a cube; odd triangles material 6), sphere 2, materials 5 and 6, medium 3, bodies
    10 and 11 (a dipole on 11), objects 100 (cube on 10), 101 (sphere on 11, material 5, medium
    3), 102 (static sphere at (0, 5, 0)), joint 20; states t = 0 (stepped) and t = 1 (body 10
    raised to z = 1)."""
    v, t = cube()
    c.set_material(5, "two_layer", name="paint")
    c.set_material(6, "lambertian", reflectance=0.3)
    c.create_mesh(1, v, t, material_ids=np.array([0, 6] * 6, dtype="<u4"), name="cube")
    c.create_primitive(2, "sphere", radius=0.5)
    c.set_ambient("fog", id=3, visibility=100.0)
    c.create_body(10, [0, 0, 0], name="cart")
    c.create_body(11, [5, 0, 0])
    c.create_object(100, 1, body_id=10, label=1)
    c.create_object(101, 2, body_id=11, material_id=5, medium_id=3, label=2)
    c.create_object(102, 2, local_pose=[0, 5, 0], label=3)
    c.create_joint(20, "revolute", 0.5)
    c.set_environment(dipoles=[((0, 0, 1), (0, 0, 0), 11)])
    c.update_state(0.0, [10, 11], [[0, 0, 0, 0, 0, 0, 1], [5, 0, 0, 0, 0, 0, 1]])
    c.step(0.0)
    c.update_state(1.0, [10], [[0, 0, 1, 0, 0, 0, 1]])


class Witness:
    """A client connected the whole time to its own environment: a unit sphere (object 1, label
    7) at the origin. check() must always get the same, correct answers."""

    def __init__(self, d):
        self.d = d
        self.rng = random.Random(SEED + 1)
        self.c = d.client(environment="witness", client_name="witness", timeout=IO_TIMEOUT)
        self.c.create_primitive(1, "sphere", radius=1.0)
        self.c.create_object(1, 1, label=7)
        self.checks = 0

    def check(self) -> None:
        assert self.d.running, self.d.stderr()
        payload = self.rng.randbytes(self.rng.randrange(64))
        assert self.c.ping(payload).payload == payload
        r = self.c.raycast([[-5, 0, 0], [0, 0, 9], [0, 3, 0]], [[1, 0, 0], [0, 0, -1], [1, 0, 0]])
        assert r.object_ids.tolist() == [1, 1, 0]
        assert r.labels.tolist() == [7, 7, 0]
        np.testing.assert_allclose(r.distances[:2], [4.0, 8.0], atol=1e-5)
        assert math.isinf(r.distances[2])
        env = info_of(self.c.get_info(), "witness")
        assert (env.geometries, env.objects, env.bodies, env.joints, env.steps) == (1, 1, 0, 0, 0)
        self.checks += 1


# ------------------------------------------------------------------------- (a) mutated frames

def valid_requests() -> list[tuple[str, bytes]]:
    """One valid request Envelope (serialized) per kind, ids from 2, for the environment that
    build_scene() made."""
    v, t = cube(0.25)
    out = []

    def add(body: str, fill) -> None:
        env = pb.Envelope(id=len(out) + 2)
        getattr(env, body).SetInParent()
        fill(getattr(env, body))
        out.append((body, env.SerializeToString()))

    def mesh(m):
        m.id, m.vertices, m.indices, m.name = 3, v.tobytes(), t.tobytes(), "small cube"
        m.material_ids = np.array([5, 0, 6] * 4, dtype="<u4").tobytes()

    def box(m):
        m.id, m.name = 4, "box"
        m.box.half_extents.x, m.box.half_extents.y, m.box.half_extents.z = 0.1, 0.2, 0.3

    def cylinder(m):
        m.id, m.cylinder.radius, m.cylinder.half_length = 6, 0.2, 0.4

    def capsule(m):
        m.id, m.capsule.radius, m.capsule.half_length = 7, 0.2, 0.4

    def plane(m):
        m.id, m.plane.half_size = 8, 10.0

    def two_layer(m):
        m.id, m.name = 12, "coat"
        m.two_layer.refractive_index, m.two_layer.extinction_coefficient = 1.5, 0.01
        m.two_layer.specular_roughness, m.two_layer.diffuse_reflectance = 0.2, 0.6
        m.two_layer.diffuse_roughness = 0.1

    def custom(m):
        m.id = 13
        c = m.custom
        c.attenuation, c.refractive_index, c.return_gamma_shape = 0.01, 1.0003, 9.0
        c.return_gamma_scale, c.return_probability_scaling = 0.5, 1e-4
        c.atmospheric_backscatter = 0.3

    def settings(m):
        m.gravity.x, m.gravity.y, m.gravity.z = 0.1, 0.0, -9.8
        m.magnetic_field.x, m.magnetic_field.z = 2e-5, -4e-5
        m.replace_dipoles, m.seed, m.freeze_objects = True, 42, True
        for body in (10, 0):
            dip = m.dipoles.add()
            dip.moment.z, dip.position.x, dip.body_id = 1.0, 0.5, body

    def body(m):
        m.id, m.name = 30, "new body"
        m.pose.position.x, m.pose.position.y, m.pose.position.z = 1, 2, 3
        m.pose.orientation.x, m.pose.orientation.w = 0.6, 0.8
        m.linear_velocity.x, m.angular_velocity.z, m.center_of_mass.y = 1.0, 0.5, 0.1

    def obj(m):
        m.id, m.geometry_id, m.body_id, m.material_id, m.label, m.name = 103, 2, 10, 5, 9, "o"
        m.local_pose.position.z, m.local_pose.orientation.w = 2.0, 1.0
        m.scale.x, m.scale.y, m.scale.z = 1.0, 2.0, -1.0
        m.medium_id = 3

    def state(m):
        m.time = 2.0
        m.body_ids.extend([10, 11])
        m.body_poses.extend([0, 0, 2, 0, 0, 0, 1, 5, 1, 0, 0, 0, 0.6, 0.8])
        m.body_velocities.extend([0.1] * 12)
        m.joint_ids.append(20)
        m.joint_positions.append(1.25)

    def raycast(m):
        m.origins.extend([0, 0, 10, 5, 0, 10, -10, 0, 0.5, 0, 5, 10])
        m.directions.extend([0, 0, -1, 0, 0, -1, 1, 0, 0, 0.1, 0, -1])
        m.max_range = 50.0
        m.times.extend([0.0, 0.25, 0.5, 1.0])

    def sensor(m):
        m.id, m.body_id, m.name = 1, 10, "lidar"
        s = m.lidar.spinning
        s.frequency, s.columns = 10.0, 360
        s.channel_elevations.extend([-0.2, 0.0, 0.2])
        s.channel_time_offsets.extend([0.0, 1e-6, 2e-6])

    add("hello", lambda m: (setattr(m, "protocol_version", 1), setattr(m, "client_name", "fz"),
                            setattr(m, "environment", "fuzz")))
    add("ping", lambda m: setattr(m, "payload", bytes(range(40))))
    add("get_info", lambda m: None)
    add("create_mesh", mesh)
    add("create_primitive", box)
    add("create_primitive", cylinder)
    add("create_primitive", capsule)
    add("create_primitive", plane)
    add("create_primitive", lambda m: (setattr(m, "id", 9), setattr(m.sphere, "radius", 0.3)))
    add("set_material", lambda m: (setattr(m, "id", 11), setattr(m.lambertian, "reflectance",
                                                                   0.4)))
    add("set_material", two_layer)
    add("set_ambient", custom)
    add("set_ambient", lambda m: (setattr(m, "id", 14), setattr(m.rain, "rate", 5.0)))
    add("set_environment", settings)
    add("create_body", body)
    add("create_object", obj)
    add("create_joint", lambda m: (setattr(m, "id", 21), setattr(m, "type", pb.JOINT_PRISMATIC),
                                   setattr(m, "position", 0.3), setattr(m, "name", "slide")))
    add("remove", lambda m: (setattr(m, "kind", pb.ENTITY_OBJECT), setattr(m, "id", 102)))
    add("update_state", state)
    add("step", lambda m: setattr(m, "time", 1.0))
    add("raycast", raycast)
    add("create_sensor", sensor)
    add("subscribe", lambda m: (setattr(m, "sensor_id", 1), setattr(m, "precision", 0.01)))
    return out


INTERESTING_BYTES = (0x00, 0x01, 0x7F, 0x80, 0xFF)
MUTATORS = ("bitflip", "truncate", "truncate_frame", "insert", "overwrite", "length",
            "duplicate", "splice")


def mutate(rng: random.Random, how: str, payload: bytes, corpus: list[bytes]) -> bytes:
    """Return a framed, mutated version of payload."""
    data = bytearray(payload)
    n = len(data)
    if how == "bitflip":
        for _ in range(rng.randrange(1, 9)):
            data[rng.randrange(n)] ^= 1 << rng.randrange(8)
    elif how == "truncate":
        data = data[:rng.randrange(1, n)] if n > 1 else data
    elif how == "truncate_frame":      # the length prefix announces more than is ever sent
        framed = frame(bytes(data))
        return framed[:rng.randrange(1, len(framed))]
    elif how == "insert":
        at = rng.randrange(n + 1)
        data[at:at] = rng.randbytes(rng.randrange(1, 9))
    elif how == "overwrite":
        for _ in range(rng.randrange(1, 5)):
            data[rng.randrange(n)] = rng.choice(INTERESTING_BYTES)
    elif how == "length":
        length = rng.choice([0, 1, n - 1, n + 1, n + rng.randrange(2, 200), 0xFFFFFFFF,
                             0x80000000, 64 << 20, (64 << 20) + 1, rng.getrandbits(32)])
        return struct.pack("<I", length & 0xFFFFFFFF) + bytes(data)
    elif how == "duplicate":           # repeated fields, a oneof member twice, merged messages
        a = rng.randrange(n)
        data += data[a:rng.randrange(a + 1, n + 1)]
    elif how == "splice":
        other = rng.choice(corpus)
        data = data[:rng.randrange(n + 1)] + other[rng.randrange(len(other)):]
    else:
        raise AssertionError(how)
    return frame(bytes(data))


def exchange(port: int, data: bytes) -> list:
    """Send data on a fresh connection, half-close it, and read until the daemon closes. Returns
    the Envelopes received; fails on a malformed frame or when the daemon neither closes nor
    answers in time."""
    buf = b""
    reset = False
    with socket.create_connection(("127.0.0.1", port), timeout=IO_TIMEOUT) as s:
        try:
            s.sendall(data)
            s.shutdown(socket.SHUT_WR)
        except (BrokenPipeError, ConnectionResetError):
            pass                       # refused early; what it sent is still readable
        deadline = time.monotonic() + IO_TIMEOUT
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                pytest.fail(f"the daemon did not close the connection within {IO_TIMEOUT} s "
                            f"after {data!r}")
            s.settimeout(left)
            try:
                chunk = s.recv(1 << 16)
            except ConnectionResetError:
                reset = True           # a close with our bytes unread: the tail may be lost
                break
            except socket.timeout:
                continue
            if not chunk:
                break
            buf += chunk
    envs = []
    while buf:
        (length,) = struct.unpack_from("<I", buf) if len(buf) >= 4 else (len(buf),)
        if reset and (len(buf) < 4 or length > len(buf) - 4):
            break
        assert len(buf) >= 4, f"partial frame header {buf!r} after {data!r}"
        assert 0 < length <= len(buf) - 4, f"bad reply frame length {length} after {data!r}"
        env = pb.Envelope()
        env.ParseFromString(buf[4:4 + length])
        envs.append(env)
        buf = buf[4 + length:]
    return envs


def test_fuzz_mutated_frames_are_refused_or_closed_and_never_crash(sensimd):
    d = sensimd
    rng = random.Random(SEED)
    witness = Witness(d)
    witness.check()

    # the environment the mutated requests go to, kept alive by this client
    setup = d.client(environment="fuzz", client_name="fuzz setup", timeout=IO_TIMEOUT)
    build_scene(setup)
    corpus = valid_requests()
    payloads = [p for _, p in corpus]
    hello = frame(pb.Envelope(id=1, hello=pb.Hello(protocol_version=1, environment="fuzz"))
                  .SerializeToString())

    # every kind sent unmutated first: all are served (or refused by name)
    for body, payload in corpus[1:]:
        replies = exchange(d.port, hello + frame(payload))
        assert [r.WhichOneof("body") for r in replies][:1] == ["hello_reply"], replies
        assert len(replies) == 2 and replies[1].HasField("status"), (body, replies)

    outcomes = {"error": 0, "accepted": 0, "no reply": 0}
    for i in range(N_MUTATED):
        body, payload = corpus[i % len(corpus)]
        how = MUTATORS[(i // len(corpus) + i) % len(MUTATORS)]
        mutated = mutate(rng, how, payload, payloads)
        data = mutated if body == "hello" else hello + mutated
        try:
            replies = exchange(d.port, data)
        except OSError as exc:
            pytest.fail(f"{body} ({how}) {data!r}: {exc}; daemon running: {d.running}\n"
                        f"{d.stderr()}", pytrace=False)
        answers = [r for r in replies if r.WhichOneof("body") != "hello_reply"]
        for r in replies:
            assert r.HasField("status"), (body, how, r)
            assert r.status.code != pb.INTERNAL, (body, how, data, r)
            if r.status.code != pb.OK:
                assert r.status.message, (body, how, r)
        if not answers:
            outcomes["no reply"] += 1
        elif any(r.status.code != pb.OK for r in answers):
            outcomes["error"] += 1
        else:
            outcomes["accepted"] += 1
        if i % WITNESS_EVERY == 0:
            witness.check()

    # the mutations did exercise refusals and closes; everybody still works
    assert outcomes["error"] > N_MUTATED // 4, outcomes
    assert outcomes["no reply"] > 0, outcomes
    witness.check()
    assert setup.ping(b"after").payload == b"after"
    info_of(setup.get_info(), "fuzz")
    setup.close()
    witness.c.close()
    assert d.stop(signal.SIGTERM) == 0, d.stderr()


# ------------------------------------------------------------------------- (b) bad values

def nonfinite(rng):
    return rng.choice([NAN, INF, -INF])


def not_positive(rng):
    return rng.choice([0.0, -0.0, -1e-300, -1.0, -1e300, NAN, INF, -INF])


def bad_coord(rng):
    """Not finite, or beyond the daemon's coordinate bound (1e9 m)."""
    return rng.choice([NAN, INF, -INF, 1e10, -2e9, 1e300, -1e300])


def unknown_id(rng):
    return rng.choice([0xFFFFFFFF, 0x80000000, 0xFFFFFFFE, rng.randrange(1000, 1 << 32)])


def new_id(rng):
    return rng.randrange(1000, 1 << 32)


def set_vec(v, values):
    v.x, v.y, v.z = values


def rand_vec(rng, lo=-1.0, hi=1.0):
    return [rng.uniform(lo, hi) for _ in range(3)]


def one_bad(rng, values, bad):
    """values with one random component replaced by bad(rng)."""
    values = list(values)
    values[rng.randrange(len(values))] = bad(rng)
    return values


def with_unknown_varint(msg, field: int, value: int) -> None:
    """Append field = value (varint) to msg's unknown fields, so that a value outside a closed
    enum reaches the daemon."""
    tag = bytes([field << 3])
    raw = bytearray()
    v = value & 0xFFFFFFFFFFFFFFFF
    while True:
        raw.append((v & 0x7F) | (0x80 if v > 0x7F else 0))
        v >>= 7
        if not v:
            break
    msg.MergeFromString(tag + bytes(raw))


# Each generator returns (body, filled message or None, words): the request has exactly one
# defect, and at least one of `words` names it in the status message.

def gen_create_mesh(rng):
    nv, nt = rng.randrange(3, 9), rng.randrange(1, 6)
    v = np.array([rand_vec(rng) for _ in range(nv)], dtype="<f4")
    t = np.array([[rng.randrange(nv) for _ in range(3)] for _ in range(nt)], dtype="<u4")
    mats = None
    m = pb.CreateMesh(id=new_id(rng), name="bad")
    defect = rng.randrange(11)
    words: tuple = ()
    if defect == 0:
        m.id, words = 0, ("id = 0",)
    elif defect == 1:
        m.id, words = rng.choice([1, 2]), ("already exists",)
    elif defect == 4:
        v[rng.randrange(nv), rng.randrange(3)] = nonfinite(rng)
        words = ("vertices[",)
    elif defect == 5:
        t[rng.randrange(nt), rng.randrange(3)] = rng.randrange(nv, 1 << 32)
        words = ("indices[",)
    elif defect == 6:
        mats = np.zeros(nt + rng.randrange(1, 4), dtype="<u4")
        words = ("material_ids",)
    elif defect == 7:
        mats = np.array([rng.choice([0, 5, 6]) for _ in range(nt)], dtype="<u4")
        mats[rng.randrange(nt)] = unknown_id(rng)
        words = ("material_ids[",)
    vb, ib = v.tobytes(), t.tobytes()
    if defect == 2:
        vb, words = vb[:len(vb) - rng.randrange(1, 12)], ("vertices length",)
    elif defect == 3:
        ib, words = ib[:len(ib) - rng.randrange(1, 12)], ("indices length",)
    elif defect == 8:
        vb, words = b"", ("vertices is empty",)
    elif defect == 9:
        ib, words = b"", ("indices is empty",)
    elif defect == 10:
        mats, words = np.zeros(nt, dtype="<u4").tobytes()[:-rng.randrange(1, 4)], ("material_ids",)
    m.vertices, m.indices = vb, ib
    if mats is not None:
        m.material_ids = mats if isinstance(mats, bytes) else mats.tobytes()
    return "create_mesh", m, words


def gen_create_primitive(rng):
    m = pb.CreatePrimitive(id=new_id(rng))
    kind = rng.choice(["sphere", "box", "cylinder", "capsule", "plane"])
    good = lambda: rng.uniform(0.01, 5.0)  # noqa: E731
    if kind == "sphere":
        m.sphere.radius = good()
    elif kind == "box":
        set_vec(m.box.half_extents, [good() for _ in range(3)])
    elif kind == "plane":
        m.plane.half_size = good()
    else:
        getattr(m, kind).radius, getattr(m, kind).half_length = good(), good()
    defect = rng.randrange(4)
    if defect == 0:
        m.id, words = 0, ("id = 0",)
    elif defect == 1:
        m.id, words = rng.choice([1, 2]), ("already exists",)
    elif defect == 2:
        m.ClearField(kind)
        words = ("shape is not set",)
    elif kind == "sphere":
        if rng.random() < 0.2:
            m.sphere.ClearField("radius")
        else:
            m.sphere.radius = not_positive(rng)
        words = ("sphere.radius",)
    elif kind == "box":
        if rng.random() < 0.2:
            m.box.ClearField("half_extents")
        else:
            e = m.box.half_extents
            set_vec(e, one_bad(rng, [e.x, e.y, e.z], not_positive))
        words = ("half_extents",)
    elif kind == "plane":
        m.plane.half_size = rng.choice([-1.0, -1e-300, -1e300, NAN, INF, -INF])
        words = ("plane.half_size",)
    else:
        field = rng.choice(["radius", "half_length"])
        value = not_positive(rng)
        # a capsule of half length 0 is a sphere, which is valid
        while kind == "capsule" and field == "half_length" and value == 0.0:
            value = not_positive(rng)
        setattr(getattr(m, kind), field, value)
        words = (f"{kind}.{field}",)
    return "create_primitive", m, words


def gen_set_material(rng):
    m = pb.SetMaterial(id=rng.choice([0, 5, 6, new_id(rng)]), name="bad")
    defect = rng.randrange(3)
    if defect == 0:
        return "set_material", m, ("model is not set",)
    if defect == 1:
        m.lambertian.reflectance = rng.choice([NAN, INF, -INF, -0.1, 1.5, 1e300, -1e300])
        return "set_material", m, ("lambertian.reflectance",)
    bad = {"refractive_index": [0.0, -1.0, NAN, INF],
           "extinction_coefficient": [-1e-9, -1.0, NAN, INF],
           "specular_roughness": [-0.1, NAN, -INF],
           "diffuse_reflectance": [-0.1, 1.01, NAN],
           "diffuse_roughness": [-1.0, NAN, INF]}
    field = rng.choice(sorted(bad))
    m.two_layer.specular_roughness = rng.uniform(0, 1)
    setattr(m.two_layer, field, rng.choice(bad[field]))
    return "set_material", m, (f"two_layer.{field}",)


def gen_set_ambient(rng):
    m = pb.SetAmbient(id=rng.choice([0, 3, new_id(rng)]))
    defect = rng.randrange(4)
    if defect == 0:
        return "set_ambient", m, ("medium is not set",)
    if defect == 1:
        preset = rng.choice(["fog", "clear_air"])
        getattr(m, preset).SetInParent()
        if rng.random() < 0.8:
            getattr(m, preset).visibility = rng.choice([0.0, -1.0, -1e-300, NAN, INF, -INF])
        return "set_ambient", m, (f"{preset}.visibility",)
    if defect == 2:
        preset = rng.choice(["rain", "snow"])
        getattr(m, preset).SetInParent()
        if rng.random() < 0.8:
            getattr(m, preset).rate = rng.choice([0.0, -1.0, -1e300, NAN, INF])
        return "set_ambient", m, (f"{preset}.rate",)
    bad = {"attenuation": [-1.0, NAN, INF], "refractive_index": [0.5, NAN, -INF],
           "return_gamma_shape": [0.0, -1.0, NAN], "return_gamma_scale": [0.0, -2.0, INF],
           "return_probability_scaling": [-0.1, 1.5, NAN],
           "atmospheric_backscatter": [-1.0, NAN, INF]}
    field = rng.choice(sorted(bad))
    m.custom.SetInParent()
    setattr(m.custom, field, rng.choice(bad[field]))
    return "set_ambient", m, (f"ambient.{field}",)


def gen_set_environment(rng):
    m = pb.SetEnvironment()
    if rng.random() < 0.5:
        m.seed = rng.getrandbits(64)
    if rng.random() < 0.5:
        m.freeze_objects = rng.random() < 0.5
    defect = rng.randrange(4)
    if defect == 0:
        set_vec(m.gravity, one_bad(rng, rand_vec(rng, -10, 10), nonfinite))
        return "set_environment", m, ("gravity",)
    if defect == 1:
        set_vec(m.magnetic_field, one_bad(rng, rand_vec(rng, -1e-4, 1e-4), nonfinite))
        return "set_environment", m, ("magnetic_field",)
    for _ in range(rng.randrange(1, 4)):
        dip = m.dipoles.add()
        set_vec(dip.moment, rand_vec(rng))
        set_vec(dip.position, rand_vec(rng, -5, 5))
        dip.body_id = rng.choice([0, 10, 11])
    if defect == 2:
        if rng.random() < 0.5:
            m.replace_dipoles = False
        return "set_environment", m, ("replace_dipoles",)
    m.replace_dipoles = True
    dip = m.dipoles[rng.randrange(len(m.dipoles))]
    what = rng.randrange(3)
    if what == 0:
        set_vec(dip.moment, one_bad(rng, [dip.moment.x, dip.moment.y, dip.moment.z], nonfinite))
        return "set_environment", m, (".moment",)
    if what == 1:
        p = dip.position
        set_vec(p, one_bad(rng, [p.x, p.y, p.z], nonfinite))
        return "set_environment", m, (".position",)
    dip.body_id = unknown_id(rng)
    return "set_environment", m, ("body_id",)


def set_pose(rng, pose, scale: float = 3.0) -> None:
    set_vec(pose.position, rand_vec(rng, -scale, scale))
    q = np.array([rng.gauss(0, 1) for _ in range(4)])
    q /= np.linalg.norm(q)
    o = pose.orientation
    o.x, o.y, o.z, o.w = (float(x) for x in q)


def break_pose(rng, pose) -> str:
    """Make one thing of a valid pose bad; returns the word naming it."""
    what = rng.randrange(3)
    if what == 0:
        p = pose.position
        set_vec(p, one_bad(rng, [p.x, p.y, p.z], bad_coord))
        return "position"
    o = pose.orientation
    if what == 1:
        o.x, o.y, o.z, o.w = one_bad(rng, [o.x, o.y, o.z, o.w], nonfinite)
    else:
        o.x, o.y, o.z, o.w = [rng.choice([0.0, -0.0, 1e-12, -3e-10]) for _ in range(4)]
    return "orientation"


def gen_create_body(rng):
    m = pb.CreateBody(id=new_id(rng), name="bad")
    set_pose(rng, m.pose)
    set_vec(m.linear_velocity, rand_vec(rng))
    defect = rng.randrange(5)
    if defect == 0:
        m.id, words = 0, ("id = 0",)
    elif defect == 1:
        m.id, words = rng.choice([10, 11]), ("already exists",)
    elif defect == 2:
        words = ("pose." + break_pose(rng, m.pose),)
    else:
        field = rng.choice(["linear_velocity", "angular_velocity", "center_of_mass"])
        set_vec(getattr(m, field), one_bad(rng, rand_vec(rng), nonfinite))
        words = (field,)
    return "create_body", m, words


def gen_create_object(rng):
    m = pb.CreateObject(id=new_id(rng), geometry_id=rng.choice([1, 2]),
                        body_id=rng.choice([0, 10, 11]), material_id=rng.choice([0, 5, 6]),
                        label=rng.getrandbits(32), medium_id=rng.choice([0, 3]), name="bad")
    set_pose(rng, m.local_pose)
    set_vec(m.scale, [rng.choice([-1, 1]) * rng.uniform(0.1, 3) for _ in range(3)])
    defect = rng.randrange(8)
    if defect == 0:
        m.id, words = 0, ("id = 0",)
    elif defect == 1:
        m.id, words = rng.choice([100, 101, 102]), ("already exists",)
    elif defect == 2:
        m.geometry_id, words = rng.choice([0, unknown_id(rng)]), ("geometry_id",)
    elif defect == 3:
        m.body_id, words = unknown_id(rng), ("body_id",)
    elif defect == 4:
        m.material_id, words = unknown_id(rng), ("material_id",)
    elif defect == 5:
        m.medium_id, words = unknown_id(rng), ("medium_id",)
    elif defect == 6:
        s = m.scale
        set_vec(s, one_bad(rng, [s.x, s.y, s.z],
                           lambda r: r.choice([0.0, -0.0, NAN, INF, -INF, 1e-9, -1e-300])))
        words = ("scale",)
    else:
        words = ("local_pose." + break_pose(rng, m.local_pose),)
    return "create_object", m, words


def gen_create_joint(rng):
    m = pb.CreateJoint(id=new_id(rng), type=rng.choice([pb.JOINT_REVOLUTE, pb.JOINT_PRISMATIC]),
                       position=rng.uniform(-3, 3), name="bad")
    defect = rng.randrange(4)
    if defect == 0:
        m.id, words = 0, ("id = 0",)
    elif defect == 1:
        m.id, words = 20, ("already exists",)
    elif defect == 2:
        m.position, words = nonfinite(rng), ("position",)
    else:
        m.ClearField("type")
        with_unknown_varint(m, 2, rng.choice([2, 7, 1 << 20, -1]))
        words = ("type",)
    return "create_joint", m, words


def gen_remove(rng):
    m = pb.Remove()
    defect = rng.randrange(5)
    if defect == 0:
        if rng.random() < 0.5:
            m.kind = pb.ENTITY_UNSPECIFIED
        m.id = rng.choice([1, 100])
        return "remove", m, ("kind",)
    if defect == 1:
        m.id = 1
        with_unknown_varint(m, 1, rng.choice([9, 99, -3]))
        return "remove", m, ("kind",)
    if defect == 2:
        m.kind = rng.choice([pb.ENTITY_GEOMETRY, pb.ENTITY_MATERIAL, pb.ENTITY_MEDIUM,
                             pb.ENTITY_BODY, pb.ENTITY_OBJECT, pb.ENTITY_JOINT,
                             pb.ENTITY_SENSOR])
        m.id = unknown_id(rng)
        return "remove", m, ("not found",)
    if defect == 3:
        m.kind, m.id = rng.choice([(pb.ENTITY_MATERIAL, 0), (pb.ENTITY_MEDIUM, 0)])
        return "remove", m, ("cannot be removed",)
    m.kind, m.id = rng.choice([(pb.ENTITY_GEOMETRY, 1), (pb.ENTITY_GEOMETRY, 2),
                               (pb.ENTITY_MATERIAL, 5), (pb.ENTITY_MATERIAL, 6),
                               (pb.ENTITY_MEDIUM, 3), (pb.ENTITY_BODY, 10),
                               (pb.ENTITY_BODY, 11)])
    return "remove", m, ("is used by", "carries")


def gen_update_state(rng):
    """The environment's last state is t = 1: every other field is valid for a later time."""
    m = pb.UpdateState(time=1.0 + rng.uniform(1e-3, 100))
    ids = rng.sample([10, 11], rng.randrange(0, 3))
    poses = []
    for _ in ids:
        q = np.array([rng.gauss(0, 1) for _ in range(4)])
        q /= np.linalg.norm(q)
        poses += rand_vec(rng, -3, 3) + [float(x) for x in q]
    vel = [rng.uniform(-1, 1) for _ in range(6 * len(ids))] if rng.random() < 0.5 else []
    jids = [20] if rng.random() < 0.5 else []
    jpos = [rng.uniform(-3, 3) for _ in jids]
    defect = rng.randrange(13)
    words: tuple = ()
    if defect == 0:
        m.ClearField("time")
        words = ("time is not set",)
    elif defect == 1:
        m.time, words = nonfinite(rng), ("time",)
    elif defect == 2:
        m.time = rng.choice([1.0, math.nextafter(1.0, 0.0), 0.5, 0.0, -1e300])
        words = ("time",)
    elif defect == 3:
        if poses and rng.random() < 0.5:
            poses = poses[:-rng.randrange(1, 7)]
        else:
            poses += [0.0] * rng.choice([1, 3, 6, 8])
        words = ("body_poses",)
    elif defect == 4:
        vel = [0.0] * rng.choice([n for n in range(1, 20) if n != 6 * len(ids)])
        words = ("body_velocities",)
    elif defect == 5:
        jids, jpos = [20], rng.choice([[], [0.1, 0.2]])
        words = ("joint_positions",)
    elif defect == 6:
        ids.append(unknown_id(rng))
        poses += [0, 0, 0, 0, 0, 0, 1]
        vel += [0.0] * 6 if vel else []
        words = ("body_ids[",)
    elif defect == 7:
        ids, poses = [10, 10], [0, 0, 0, 0, 0, 0, 1] * 2
        vel = [0.0] * 12 if vel else []
        words = ("repeated",)
    elif defect == 8 and ids:
        k = 7 * rng.randrange(len(ids)) + rng.randrange(7)
        poses[k] = bad_coord(rng) if k % 7 < 3 else nonfinite(rng)
        words = ("body_poses[",)
    elif defect == 9 and ids:
        k = 7 * rng.randrange(len(ids))
        poses[k + 3:k + 7] = [rng.choice([0.0, 1e-12]) for _ in range(4)]
        words = ("orientation",)
    elif defect == 10 and ids:
        vel = [0.0] * (6 * len(ids))
        vel[rng.randrange(len(vel))] = nonfinite(rng)
        words = ("body_velocities[",)
    elif defect == 11:
        jids, jpos = [unknown_id(rng)], [0.0]
        words = ("joint_ids[",)
    else:
        jids, jpos = [20], [nonfinite(rng)]
        words = ("joint_positions[",)
    m.body_ids.extend(ids)
    m.body_poses.extend(poses)
    m.body_velocities.extend(vel)
    m.joint_ids.extend(jids)
    m.joint_positions.extend(jpos)
    return "update_state", m, words


def gen_step(rng):
    m = pb.Step()
    defect = rng.randrange(3)
    if defect == 0:
        return "step", m, ("time is not set",)
    m.time = nonfinite(rng) if defect == 1 else rng.choice([0.0, 0.5, 2.0, 1.0000001, -1.0])
    return "step", m, ("time",)


def gen_raycast(rng):
    n = rng.randrange(2, 6)
    o = [rng.uniform(-10, 10) for _ in range(3 * n)]
    dirs = [rng.uniform(-1, 1) for _ in range(3 * n)]
    for i in range(n):
        dirs[3 * i + 2] = -1.0            # never zero
    times = rng.choice([[], [0.5], [rng.uniform(0, 1) for _ in range(n)]])
    m = pb.Raycast(max_range=rng.choice([0.0, 100.0]))
    defect = rng.randrange(7)
    if defect == 0:
        o += [0.0] * rng.choice([1, 2])
        words = ("origins",)
    elif defect == 1:
        dirs = dirs[:rng.randrange(len(dirs))] if rng.random() < 0.5 else dirs + [1.0, 0, 0]
        words = ("directions",)
    elif defect == 2:
        times = [0.5] * rng.choice([k for k in range(2, n + 3) if k != n])
        words = ("times",)
    elif defect == 3:
        m.max_range, words = rng.choice([NAN, -1e-9, -1.0, -INF]), ("max_range",)
    elif defect == 4:
        o[rng.randrange(len(o))] = bad_coord(rng)
        words = ("origins[",)
    elif defect == 5:
        i = 3 * rng.randrange(n)
        if rng.random() < 0.5:
            dirs[i:i + 3] = [0.0, 0.0, 0.0]
        else:
            dirs[i + rng.randrange(3)] = nonfinite(rng)
        words = ("directions[",)
    else:
        times = times or [0.5]
        times[rng.randrange(len(times))] = rng.choice([-0.5, 1.5, 1e300, -1e300, NAN, INF])
        words = ("times[",)
    m.origins.extend(o)
    m.directions.extend(dirs)
    m.times.extend(times)
    return "raycast", m, words


def gen_envelope(rng):
    """Envelope-level faults: no body, a reply sent as a request, Hello twice, a subscription
    to no sensor, id 0."""
    defect = rng.randrange(5)
    if defect == 0:
        return None, None, ("no body",)
    if defect == 1:
        return rng.choice(["pong", "info", "step_done", "raycast_result", "hello_reply",
                           "sensor_data"]), None, ("is a reply",)
    if defect == 2:
        return "hello", pb.Hello(protocol_version=1), ("already done",)
    if defect == 3:
        return rng.choice(["subscribe", "unsubscribe"]), None, ("sensor_id",)
    return "id0", None, ("envelope.id",)


GENERATORS = (gen_create_mesh, gen_create_primitive, gen_set_material, gen_set_ambient,
              gen_set_environment, gen_create_body, gen_create_object, gen_create_joint,
              gen_remove, gen_update_state, gen_step, gen_raycast, gen_envelope)

PROBE_O = [[0, 0, 10], [5, 0, 10], [0, 5, 10], [3, 3, 10], [-10, 0, 0], [-10, 0, 1]]
PROBE_D = [[0, 0, -1]] * 4 + [[1, 0, 0]] * 2


def snapshot(c: sensim.Client) -> dict:
    now = c.raycast(PROBE_O, PROBE_D)
    prev = c.raycast(PROBE_O, PROBE_D, times=[0.0])
    # counters after the probes: their first commit writes the instances of bodies moved since
    env = info_of(c.get_info(), "semantic")
    return {
        "counts": (env.geometries, env.materials, env.bodies, env.objects, env.joints,
                   env.sensors),
        "time": (env.time, env.steps),
        "builds": (env.counters.mesh_builds, env.counters.instance_updates),
        "now": (now.object_ids.tolist(), now.distances.tolist()),
        "prev": (prev.object_ids.tolist(), prev.distances.tolist()),
    }


def test_fuzz_semantically_bad_requests_are_refused_by_name_and_change_nothing(sensimd):
    d = sensimd
    rng = random.Random(SEED + 2)
    witness = Witness(d)
    c = d.client(environment="semantic", client_name="semantic", timeout=IO_TIMEOUT)
    build_scene(c)
    before = snapshot(c)
    assert before["counts"] == (2, 3, 2, 3, 1, 0), before
    assert before["now"][0] == [100, 101, 102, 0, 101, 100], before
    assert before["prev"][0] == [100, 101, 102, 0, 100, 0], before

    seen = {}
    for i in range(N_SEMANTIC):
        gen = GENERATORS[i % len(GENERATORS)]
        body, msg, words = gen(rng)
        env = pb.Envelope(id=rng.choice([i + 1, (1 << 64) - 1 - i, rng.getrandbits(63) + 1]))
        if body == "id0":
            env.id = 0
            env.ping.SetInParent()
        elif body is not None:
            sub = getattr(env, body)
            sub.SetInParent()
            if msg is not None:
                sub.MergeFrom(msg)
        c.send_raw(frame(env.SerializeToString()))
        reply = c.recv(timeout=IO_TIMEOUT)
        what = f"{gen.__name__}: {env}"
        assert reply.id == env.id, (what, reply)
        assert reply.HasField("status") and reply.WhichOneof("body") is None, (what, reply)
        assert reply.status.code not in (pb.OK, pb.INTERNAL), (what, reply)
        text = reply.status.message
        if body not in (None, "id0", "hello") and gen is not gen_envelope:
            assert text.startswith(f"{body}: "), (what, text)
        assert any(w in text for w in words), (what, text, words)
        seen[gen.__name__] = seen.get(gen.__name__, 0) + 1

        after = snapshot(c)
        assert after == before, (what, text, before, after)
        if i % WITNESS_EVERY == 0:
            witness.check()

    assert len(seen) == len(GENERATORS), seen
    witness.check()

    # the environment still takes valid requests afterwards
    c.update_state(2.0, [10], [[0, 0, 2, 0, 0, 0, 1]])
    assert c.step(2.0).step == 2
    c.close()
    witness.c.close()
    assert d.stop(signal.SIGTERM) == 0, d.stderr()


def test_fuzz_bad_hello_values_are_refused_and_closed(sensimd):
    """Out-of-range Hello fields on fresh connections: refused by name, then closed."""
    d = sensimd
    witness = Witness(d)
    cases = [
        (dict(protocol_version=0), "protocol_version"),
        (dict(protocol_version=0xFFFFFFFF), "protocol_version"),
        (dict(environment="a" * 64), "hello.environment"),
        (dict(environment="bad\nname"), "hello.environment"),
        (dict(environment="\x7f"), "hello.environment"),
        ({"role": 9}, "hello.role"),
        ({"role": -1}, "hello.role"),
        ({"retention": 3}, "hello.retention"),
        ({"retention": 1 << 30}, "hello.retention"),
    ]
    for fields, word in cases:
        hello = pb.Hello(protocol_version=1)
        for key, value in fields.items():
            if key in ("role", "retention"):
                with_unknown_varint(hello, 5 if key == "role" else 6, value)
            else:
                setattr(hello, key, value)
        env = pb.Envelope(id=7, hello=hello)
        replies = exchange(d.port, frame(env.SerializeToString()))
        assert len(replies) == 1, (fields, replies)
        assert replies[0].id == 7 and replies[0].status.code != pb.OK, (fields, replies)
        assert word in replies[0].status.message, (fields, replies[0].status.message)
        witness.check()
    witness.c.close()
    assert d.stop(signal.SIGTERM) == 0, d.stderr()
