# SPDX-License-Identifier: MIT
"""Sensor models against analytic geometry and physics, through the real sensimd and the Python
client: scenes whose answers follow in closed form (a ray from inside a posed, scaled primitive;
a lidar on a tilted mount over a floor; a turning body during a sweep; a rigid body with a lever
arm), compared with what the daemon returns.

Tolerances come from the number formats, not from runs: the ray tracer carries rays in float32
(unit roundoff U = 2^-24) through each object's float32 instance transform, so a hit's
coordinates are good to a bounded number of roundings at the magnitude of the positions involved
(ROUNDINGS * U times the sum of the magnitudes of the origin, the object's position and the
distance); point fields are float32 too. The double-precision models (IMU, joint sensors, cone)
are held to a few units of double roundoff."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sensim import errors

U = 2.0 ** -24        # unit roundoff of float32
ROUNDINGS = 32        # roundings a float32 ray and transform may add up (each at most U)
DU = 2.0 ** -53       # unit roundoff of double


# ------------------------------------------------------------------ rotations


def quat(axis, angle):
    """Unit quaternion (x, y, z, w) of a rotation by `angle` about `axis`."""
    a = np.asarray(axis, float)
    a = a / np.linalg.norm(a)
    s = math.sin(angle / 2)
    return np.array([a[0] * s, a[1] * s, a[2] * s, math.cos(angle / 2)])


def rot(q):
    """R(q) of docs/frames.md: local axes as columns, in the parent frame."""
    x, y, z, w = q
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
        [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
        [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])


def quat_of(m):
    """The unit quaternion (x, y, z, w) of rotation matrix m (m = rot(quat_of(m)))."""
    w = math.sqrt(max(0.0, 1 + m[0, 0] + m[1, 1] + m[2, 2])) / 2
    x = math.copysign(math.sqrt(max(0.0, 1 + m[0, 0] - m[1, 1] - m[2, 2])) / 2, m[2, 1] - m[1, 2])
    y = math.copysign(math.sqrt(max(0.0, 1 - m[0, 0] + m[1, 1] - m[2, 2])) / 2, m[0, 2] - m[2, 0])
    z = math.copysign(math.sqrt(max(0.0, 1 - m[0, 0] - m[1, 1] + m[2, 2])) / 2, m[1, 0] - m[0, 1])
    q = np.array([x, y, z, w])
    return q / np.linalg.norm(q)


def direction(azimuth, elevation):
    """d(phi, eps) of docs/frames.md, one row per ray."""
    az = np.asarray(azimuth, float)
    el = np.asarray(elevation, float)
    return np.stack([np.cos(el) * np.cos(az), np.cos(el) * np.sin(az), np.sin(el)], axis=-1)


def unit_rows(n, seed):
    v = np.random.default_rng(seed).normal(size=(n, 3))
    return v / np.linalg.norm(v, axis=1)[:, None]


# ------------------------------------------------------------------ analytic exits


def exit_quadric(o, d, radii):
    """Distance and outward unit normal where rays o + t d (object frame, o inside) leave the
    ellipsoid with semi-axes `radii`."""
    a = np.asarray(radii, float)
    oo, dd = o / a, d / a
    qa = (dd * dd).sum(1)
    qb = 2 * (dd @ oo)
    qc = oo @ oo - 1
    t = (-qb + np.sqrt(qb * qb - 4 * qa * qc)) / (2 * qa)
    p = o + t[:, None] * d
    n = p / a ** 2
    return t, n / np.linalg.norm(n, axis=1)[:, None]


def exit_box(o, d, half):
    h = np.asarray(half, float)
    with np.errstate(divide="ignore"):
        t_axes = np.where(d > 0, (h - o) / d, (-h - o) / d)
    k = np.argmin(t_axes, axis=1)
    rows = np.arange(len(d))
    n = np.zeros_like(d)
    n[rows, k] = np.sign(d[rows, k])
    return t_axes[rows, k], n


def exit_cylinder(o, d, radius, half_length, ax=(1.0, 1.0)):
    """Leaving the capped solid x^2/ax0^2 + y^2/ax1^2 <= radius^2, |z| <= half_length."""
    sx, sy = ax
    qa = (d[:, 0] / sx) ** 2 + (d[:, 1] / sy) ** 2
    qb = 2 * (o[0] * d[:, 0] / sx ** 2 + o[1] * d[:, 1] / sy ** 2)
    qc = (o[0] / sx) ** 2 + (o[1] / sy) ** 2 - radius ** 2
    with np.errstate(divide="ignore", invalid="ignore"):
        t_side = (-qb + np.sqrt(qb * qb - 4 * qa * qc)) / (2 * qa)
        t_cap = np.where(d[:, 2] > 0, (half_length - o[2]) / d[:, 2],
                         (-half_length - o[2]) / d[:, 2])
    side = t_side < t_cap
    t = np.where(side, t_side, t_cap)
    p = o + t[:, None] * d
    n_side = np.stack([p[:, 0] / sx ** 2, p[:, 1] / sy ** 2, np.zeros(len(d))], axis=1)
    n_cap = np.stack([np.zeros(len(d)), np.zeros(len(d)), np.sign(d[:, 2])], axis=1)
    n = np.where(side[:, None], n_side, n_cap)
    return t, n / np.linalg.norm(n, axis=1)[:, None]


def exit_capsule(o, d, radius, half_length):
    qa = d[:, 0] ** 2 + d[:, 1] ** 2
    qb = 2 * (o[0] * d[:, 0] + o[1] * d[:, 1])
    qc = o[0] ** 2 + o[1] ** 2 - radius ** 2
    with np.errstate(divide="ignore", invalid="ignore"):
        t = (-qb + np.sqrt(qb * qb - 4 * qa * qc)) / (2 * qa)
    beyond = ~(np.abs(o[2] + t * d[:, 2]) <= half_length)
    for sign in (1.0, -1.0):
        oc = o - np.array([0.0, 0.0, sign * half_length])
        b = d @ oc
        with np.errstate(invalid="ignore"):          # rays that miss this end's sphere
            t_end = -b + np.sqrt(b * b - (oc @ oc - radius ** 2))
        this_end = beyond & (sign * (o[2] + t_end * d[:, 2]) >= half_length)
        t = np.where(this_end, t_end, t)
    p = o + t[:, None] * d
    n = p - np.stack([np.zeros(len(d)), np.zeros(len(d)),
                      np.clip(p[:, 2], -half_length, half_length)], axis=1)
    return t, n / np.linalg.norm(n, axis=1)[:, None]


def scaled_exit(o, d, scale, exit_unscaled):
    """Exit of the scaled solid S·X (scale S diagonal) from the exit of X: the ray maps to
    S^-1 o + s S^-1 d; distances along the unit world ray are recovered, normals go as S^-1 n."""
    s = np.asarray(scale, float)
    dl = d / s
    length = np.linalg.norm(dl, axis=1)
    t, n = exit_unscaled(o / s, dl / length[:, None])
    n = n / s
    return t / length, n / np.linalg.norm(n, axis=1)[:, None]


# ------------------------------------------------------------------ scene helpers


def _clear(c, refractive_index=1.0):
    """A medium without atmospheric returns: ranges are geometric with index 1."""
    c.set_ambient("custom", return_probability_scaling=0.0, refractive_index=refractive_index)


def _xyz(cloud):
    return np.stack([cloud["x"], cloud["y"], cloud["z"]], axis=1).astype(float)


def _steps(c, times):
    out = []
    for t in times:
        c.update_state(t)
        out.append(c.step(t))
    return out


OBJECT_POSE = (np.array([1.0, -2.0, 0.5]), quat((1, 2, 3), 0.7))
INSIDE = np.array([0.3, 0.2, -0.1])          # ray origin, in the (unscaled) object frame

PRIMITIVES = {
    # name: (kind, size, scale, exit(o, d) in the object frame before scaling)
    "sphere": ("sphere", dict(radius=3.0), None, lambda o, d: exit_quadric(o, d, (3, 3, 3))),
    "sphere_scaled": ("sphere", dict(radius=2.0), (1.0, 2.0, 0.5),
                      lambda o, d: exit_quadric(o, d, (2, 2, 2))),
    "ellipsoid": ("ellipsoid", dict(radii=(3.0, 2.0, 1.0)), None,
                  lambda o, d: exit_quadric(o, d, (3, 2, 1))),
    "ellipsoid_scaled": ("ellipsoid", dict(radii=(3.0, 2.0, 1.0)), (0.5, 2.0, 3.0),
                         lambda o, d: exit_quadric(o, d, (3, 2, 1))),
    "box": ("box", dict(half_extents=(2.0, 1.0, 3.0)), None,
            lambda o, d: exit_box(o, d, (2, 1, 3))),
    "box_scaled": ("box", dict(half_extents=(2.0, 1.0, 3.0)), (2.0, 0.5, 1.5),
                   lambda o, d: exit_box(o, d, (2, 1, 3))),
    "cylinder": ("cylinder", dict(radius=2.0, half_length=1.5), None,
                 lambda o, d: exit_cylinder(o, d, 2.0, 1.5)),
    "cylinder_scaled": ("cylinder", dict(radius=1.0, half_length=1.0), (2.0, 3.0, 1.5),
                        lambda o, d: exit_cylinder(o, d, 1.0, 1.0)),
    "capsule": ("capsule", dict(radius=1.5, half_length=1.0), None,
                lambda o, d: exit_capsule(o, d, 1.5, 1.0)),
    "capsule_scaled": ("capsule", dict(radius=1.0, half_length=1.0), (2.0, 1.0, 1.0),
                       lambda o, d: exit_capsule(o, d, 1.0, 1.0)),
}


def _place(c, name, object_id=1):
    """Put primitive `name` at OBJECT_POSE; return (world -> object rotation, exit(o, d) in the
    object frame after scaling, the origin INSIDE scaled into the object)."""
    kind, size, scale, exit_fn = PRIMITIVES[name]
    c.create_primitive(object_id, kind, **size)
    c.create_object(object_id, object_id, local_pose=(tuple(OBJECT_POSE[0]),
                                                      tuple(OBJECT_POSE[1])),
                    scale=scale, label=7)
    s = np.ones(3) if scale is None else np.asarray(scale, float)
    return rot(OBJECT_POSE[1]), (lambda o, d: scaled_exit(o, d, s, exit_fn)), INSIDE * s


@pytest.mark.parametrize("name", sorted(PRIMITIVES))
def test_raycast_from_inside_a_posed_primitive_meets_its_analytic_surface(sensimd, name):
    """2000 rays from a point inside a rotated, offset (and scaled) primitive: each distance and
    normal is that of the exact surface, and the hit names the object."""
    with sensimd.client() as c:
        rm, exit_fn, inside = _place(c, name)
        origin = OBJECT_POSE[0] + rm @ inside
        dirs = unit_rows(2000, seed=1)
        hits = c.raycast(origin, dirs, max_range=1000.0)
        t, n_obj = exit_fn(inside, dirs @ rm)      # rows of R^T d
        n_world = -(n_obj @ rm.T)                  # the normal faces the ray
        tol = ROUNDINGS * U * (np.linalg.norm(origin) + np.linalg.norm(OBJECT_POSE[0]) + t)
        got = np.asarray(hits.distances)
        assert np.all(np.abs(got - t) <= tol), \
            f"{name}: worst {np.max(np.abs(got - t) / tol):.3g} of the tolerance"
        assert np.all(np.abs(np.asarray(hits.normals) - n_world) <= ROUNDINGS * U * 4)
        assert np.all(hits.object_ids == 1) and np.all(hits.labels == 7)


def test_raycast_parallel_to_faces_and_refusals_name_the_field(sensimd):
    """Rays parallel to a box's faces (inside the slab, on a face's plane, along an edge) meet the
    facing face; bad rays are refused naming the field and the scene is unchanged."""
    with sensimd.client() as c:
        c.create_primitive(1, "box", half_extents=(1.0, 1.0, 1.0))
        c.create_object(1, 1, local_pose=((3.0, 0.0, 0.0), None))
        origins = [(0, 0.5, 0), (0, 1.0, 0), (0, -1.0, 0.999), (0, 0, 1.0), (0, 1.0, 1.0),
                   (5, 0, 0)]
        dirs = [(1, 0, 0)] * 5 + [(-1, 0, 0)]
        hits = c.raycast(origins, dirs, max_range=100.0)
        np.testing.assert_array_equal(hits.distances, [2, 2, 2, 2, 2, 1])
        np.testing.assert_array_equal(hits.normals, [(-1, 0, 0)] * 5 + [(1, 0, 0)])
        bad = [
            (dict(origins=(0, 0, 0), directions=[(0, 0, 0)]), "directions"),
            (dict(origins=(0, 0, 0), directions=[(1, 0, 0), (0, 0, 0)]), r"directions\w*\[1\]"),
            (dict(origins=(0, 0, 0), directions=[(math.nan, 0, 1)]), "directions"),
            (dict(origins=(0, 0, 0), directions=[(1e-320, 0, 0)]), "directions"),
            (dict(origins=[(math.inf, 0, 0)], directions=[(1, 0, 0)]), "origin"),
            (dict(origins=(0, 0, 0), directions=[(1, 0, 0)], max_range=-1.0), "max_range"),
            (dict(origins=(0, 0, 0), directions=[(1, 0, 0)], max_range=math.nan), "max_range"),
            (dict(origins=(0, 0, 0), directions=[(1, 0, 0)], times=[math.nan]), "times"),
        ]
        for kwargs, field in bad:
            with pytest.raises(errors.InvalidArgument, match=field):
                c.raycast(**kwargs)
        again = c.raycast(origins, dirs, max_range=100.0)
        np.testing.assert_array_equal(again.distances, hits.distances)


def test_raycast_times_see_a_moving_wall_where_it_is(sensimd):
    """A wall moving from 10 m to 9 m over the state interval [1.0, 1.1]: rays at given times meet
    it at 9.5 - 10 (t - 1); a time outside the interval is refused naming `times`."""
    with sensimd.client() as c:
        c.create_body(1, pose=((10.0, 0.0, 0.0), None))
        c.create_primitive(1, "box", half_extents=(0.5, 3.0, 3.0))
        c.create_object(1, 1, body_id=1)
        c.update_state(1.0, [1], [(10, 0, 0, 0, 0, 0, 1)])
        c.update_state(1.1, [1], [(9, 0, 0, 0, 0, 0, 1)])
        times = np.array([1.0, 1.02, 1.05, 1.1])
        hits = c.raycast((0.0, 0.0, 0.0), [(1.0, 0.0, 0.0)] * 4, times=times, max_range=100.0)
        want = 9.5 - 10.0 * (times - 1.0)
        assert np.all(np.abs(hits.distances - want) <= ROUNDINGS * U * (10 + want))
        for t in (0.99, 1.2):
            with pytest.raises(errors.InvalidArgument, match="times"):
                c.raycast((0.0, 0.0, 0.0), [(1.0, 0.0, 0.0)], times=[t])


SURFACES = {
    # name: (create(c, id), distance down from a point on its top at the origin, at 0.5 rad
    # below the horizon: through a thin surface nothing; through a solid its far side)
    "plane": (lambda c: c.create_primitive(1, "plane", half_size=0), math.inf),
    "rectangle": (lambda c: c.create_primitive(1, "rectangle", half_size_x=5, half_size_y=5),
                  math.inf),
    "box": (lambda c: c.create_primitive(1, "box", half_extents=(5, 5, 1)), 2 / math.sin(0.5)),
    "sphere": (lambda c: c.create_primitive(1, "sphere", radius=1.0), 2 * math.sin(0.5)),
    "mesh": (lambda c: c.create_mesh(1, [(-5, -5, 0), (5, -5, 0), (5, 5, 0), (-5, 5, 0)],
                                     [(0, 1, 2), (0, 2, 3)]), math.inf),
    "height_field": (lambda c: c.create_primitive(1, "height_field", heights=np.zeros((3, 3)),
                                                  half_size_x=5, half_size_y=5, base_depth=1.0),
                     1 / math.sin(0.5)),
}
SURFACE_TOP = {"box": 1.0, "sphere": 1.0}      # how far below its origin a solid's top lies


@pytest.mark.parametrize("name", sorted(SURFACES))
def test_a_sensor_exactly_on_a_surface_sees_past_it(sensimd, name):
    """Rays starting exactly on a surface do not meet it at their origin (a hit lies within
    (0, tmax], docs/backend.md): from the top of each kind of surface, rays going up see the
    ceiling 3 m above, and rays going down see what lies beyond (the far side of a solid, nothing
    under a thin surface); a lidar resting there reads the same."""
    create, down = SURFACES[name]
    up = [3.0, 3.0 / math.sin(0.5)]
    with sensimd.client() as c:
        _clear(c)
        create(c)
        c.create_object(1, 1, local_pose=((0.0, 0.0, -SURFACE_TOP.get(name, 0.0)), None))
        c.create_primitive(2, "box", half_extents=(10.0, 10.0, 0.1))
        c.create_object(2, 2, local_pose=((0.0, 0.0, 3.1), None))
        dirs = direction([0.0, 0.0, 0.0], [math.pi / 2, 0.5, -0.5])
        hits = c.raycast((0.0, 0.0, 0.0), dirs, max_range=100.0)
        want = np.array(up + [down])
        tol = ROUNDINGS * U * (10 + np.where(np.isfinite(want), want, 0))
        assert np.all(hits.distances[:2] == pytest.approx(want[:2], abs=tol[0]))
        assert list(hits.object_ids) == [2, 2, 0 if math.isinf(down) else 1]
        if math.isinf(down):
            assert math.isinf(hits.distances[2])
        else:
            assert hits.distances[2] == pytest.approx(down, abs=tol[2])
        c.create_lidar(1, custom={"azimuths": [0.0] * 3, "elevations": [math.pi / 2, 0.5, -0.5],
                                  "frame_rate": 10.0}, fields=LIDAR_FIELDS, misses="nan")
        c.update_state(0.0)
        c.update_state(0.1)
        cloud = c.lidar_clouds(c.step(0.1), 1)[0]
        lidar_want = np.where(np.isfinite(want), want, np.nan)
        np.testing.assert_allclose(cloud["distance"], lidar_want, rtol=0, atol=tol.max())
        assert list(cloud["object_id"]) == list(hits.object_ids)


# ------------------------------------------------------------------ lidar


LIDAR_FIELDS = ["x", "y", "z", "distance", "intensity", "ring", "time_offset", "azimuth",
                "elevation", "normal", "object_id"]


@pytest.mark.parametrize("name", ["ellipsoid_scaled", "box_scaled", "cylinder", "capsule_scaled"])
@pytest.mark.parametrize("frame", ["sensor", "world"])
def test_lidar_inside_a_posed_primitive_on_a_rotated_mount(sensimd, name, frame):
    """A spinning lidar on a posed body with a rotated, offset mount, inside a posed (scaled)
    primitive: every ray's distance is the analytic one along its documented direction, the point
    lies at that distance along it (in the sensor or the world frame), and its normal is the
    surface's."""
    f, cols = 10.0, 90
    els = np.radians([-40.0, -7.0, 0.0, 12.0, 55.0])
    body = (np.array([0.9, -1.8, 0.6]), quat((0.2, 0.3, 1.0), 1.1))
    mount = (np.array([0.1, -0.05, 0.2]), quat((1.0, 1.0, 0.0), 0.3))
    with sensimd.client() as c:
        _clear(c)
        rm, exit_fn, _ = _place(c, name)
        c.create_body(1, pose=(tuple(body[0]), tuple(body[1])))
        c.create_lidar(1, body_id=1, mount=(tuple(mount[0]), tuple(mount[1])), frame=frame,
                       spinning={"frequency": f, "columns": cols,
                                 "channel_elevations": els.tolist()}, fields=LIDAR_FIELDS)
        clouds = []
        for done in _steps(c, [0.0, 0.05, 0.1, 0.15]):
            clouds += c.lidar_clouds(done, 1)
        cloud = clouds[0]
        assert len(cloud) == cols * len(els)
        j = np.repeat(np.arange(cols), len(els))
        ch = np.tile(np.arange(len(els)), cols)
        d_s = direction(-2 * math.pi * j / cols, els[ch])       # clockwise from azimuth 0
        r_s = rot(body[1]) @ rot(mount[1])
        origin = body[0] + rot(body[1]) @ mount[0]
        d_w = d_s @ r_s.T
        o_obj = rm.T @ (origin - OBJECT_POSE[0])
        t, n_obj = exit_fn(o_obj, d_w @ rm)
        assert np.all(t > 0)                        # the lidar is inside the solid
        tol = ROUNDINGS * U * (np.linalg.norm(origin) + np.linalg.norm(OBJECT_POSE[0]) + t)
        assert np.all(np.abs(cloud["distance"] - t) <= tol)
        expect = t[:, None] * d_s if frame == "sensor" else origin + t[:, None] * d_w
        assert np.all(np.abs(_xyz(cloud) - expect) <= tol[:, None])
        n_w = -(n_obj @ rm.T)
        n_expect = n_w @ r_s if frame == "sensor" else n_w
        assert np.all(np.abs(cloud["normal"].astype(float) - n_expect) <= ROUNDINGS * U * 4)
        assert np.array_equal(cloud["ring"], ch)
        np.testing.assert_allclose(cloud["time_offset"], j / (f * cols), rtol=0, atol=U)
        assert np.all(cloud["object_id"] == 1)


def test_lidar_grazing_rays_on_a_floor_from_a_tilted_mount(sensimd):
    """A floor seen from a tilted mount, down to rays a fraction of a degree from grazing: the
    rays going down hit it, each at h / -d_z, with the Lambertian intensity (C/pi) cos(theta)
    exp(-alpha X) of docs/models/lidar.md and the floor's normal; the others miss."""
    els = np.radians([-30.0, -10.0, -3.0, -1.0, -0.2, 0.0, 0.5])
    mount = (np.array([0.3, -0.2, 1.7]), quat((1.0, 0.3, 0.0), 0.25))
    alpha, n_air, reflectance, cols = 0.01, 1.0003, 0.6, 720
    with sensimd.client() as c:
        c.set_ambient("custom", return_probability_scaling=0.0, refractive_index=n_air,
                      attenuation=alpha)
        c.set_material(1, "lambertian", reflectance=reflectance)
        c.create_primitive(1, "plane", half_size=0)
        c.create_object(1, 1, material_id=1)
        c.create_lidar(1, mount=(tuple(mount[0]), tuple(mount[1])), frame="world",
                       spinning={"frequency": 10.0, "columns": cols,
                                 "channel_elevations": els.tolist()}, fields=LIDAR_FIELDS)
        c.update_state(0.0)
        c.update_state(0.1)
        cloud = c.lidar_clouds(c.step(0.1), 1)[0]
        j = np.repeat(np.arange(cols), len(els))
        ch = np.tile(np.arange(len(els)), cols)
        d_w = direction(-2 * math.pi * j / cols, els[ch]) @ rot(mount[1]).T
        down = d_w[:, 2] < 0
        assert len(cloud) == down.sum() and np.array_equal(cloud["ring"], ch[down])
        d_w = d_w[down]
        cos_theta = -d_w[:, 2]
        length = mount[0][2] / cos_theta
        opl = n_air * length
        # a float32 direction's z is good to a few U absolute: relative error U / cos_theta
        tol = ROUNDINGS * U * opl * (1 + 1 / cos_theta)
        assert np.all(np.abs(cloud["distance"] - opl) <= tol)
        assert cloud["distance"].max() > 1000          # grazing rays were traced that far
        # along the emission at the optical path: (n - 1) h below the floor (docs/models/lidar.md)
        pts = _xyz(cloud)
        assert np.all(np.abs(pts - (mount[0] + opl[:, None] * d_w)) <= tol[:, None])
        intensity = reflectance / math.pi * cos_theta * np.exp(-alpha * opl)
        # cos(theta) has the direction's relative error; exp(-alpha X) that of the distance
        rel = ROUNDINGS * U * (1 + 1 / cos_theta) * (1 + alpha * opl)
        assert np.all(np.abs(cloud["intensity"] - intensity) <= rel * intensity)
        assert np.all(cloud["normal"] == np.array([0, 0, 1], np.float32))


def test_lidar_on_a_turning_body_follows_the_arc(sensimd):
    """A lidar 1 m off the axis of a body turning 0.8 rad in a step fires 20 rays over it: each
    ray starts on the arc at its own time (slerp, docs/time.md), not on the chord, and meets an
    off-centre sphere where the geometry says."""
    n, turn = 20, 0.8
    centre, radius = np.array([0.5, 0.2, 0.0]), 5.0
    with sensimd.client() as c:
        _clear(c)
        c.create_primitive(1, "sphere", radius=radius)
        c.create_object(1, 1, local_pose=(tuple(centre), None))
        c.create_body(1, pose=((0, 0, 0), None))
        c.create_lidar(1, body_id=1, mount=((1.0, 0.0, 0.0), None), frame="world",
                       custom={"azimuths": [0.3] * n, "elevations": [0.1] * n,
                               "time_offsets": [k * 0.005 for k in range(n)],
                               "frame_rate": 10.0}, fields=LIDAR_FIELDS)
        c.update_state(0.0, [1], [(0, 0, 0, 0, 0, 0, 1)])
        c.update_state(0.1, [1], [np.r_[0.0, 0.0, 0.0, quat((0, 0, 1), turn)]])
        cloud = c.lidar_clouds(c.step(0.1), 1)[0]
        tau = np.arange(n) * 0.005
        np.testing.assert_allclose(cloud["time_offset"], tau, rtol=0, atol=U)
        th = turn * tau / 0.1
        origin = np.stack([np.cos(th), np.sin(th), np.zeros(n)], axis=1)
        d_w = direction(th + 0.3, np.full(n, 0.1))
        oc = origin - centre
        b = (oc * d_w).sum(1)
        t = -b + np.sqrt(b * b - (oc * oc).sum(1) + radius ** 2)
        tol = ROUNDINGS * U * (1 + np.linalg.norm(centre) + t)
        assert np.all(np.abs(cloud["distance"] - t) <= tol)
        assert np.all(np.abs(_xyz(cloud) - (origin + t[:, None] * d_w)) <= tol[:, None])


def test_lidar_sees_moving_and_turning_targets_at_each_ray_time(sensimd):
    """A static lidar fires along +x at ten times of a step: a wall approaching at 10 m/s is met
    at d0 - v t, and a wall on a body turning about the lidar's vertical axis is met at
    h / cos(theta(t))."""
    n = 10
    custom = {"azimuths": [0.0] * n, "elevations": [0.0] * n,
              "time_offsets": [k * 0.01 for k in range(n)], "frame_rate": 10.0}
    with sensimd.client() as c:
        _clear(c)
        c.create_body(1, pose=((10.0, 0.0, 0.0), None))
        c.create_primitive(1, "box", half_extents=(0.5, 3.0, 3.0))
        c.create_object(1, 1, body_id=1)
        c.create_lidar(1, custom=custom, fields=LIDAR_FIELDS)
        c.update_state(1.0, [1], [(10, 0, 0, 0, 0, 0, 1)])
        c.update_state(1.1, [1], [(9, 0, 0, 0, 0, 0, 1)])
        cloud = c.lidar_clouds(c.step(1.1), 1)[0]
        tau = np.arange(n) * 0.01
        np.testing.assert_allclose(cloud["time_offset"], tau, rtol=0, atol=U)
        want = 9.5 - 10.0 * tau
        assert np.all(np.abs(cloud["distance"] - want) <= ROUNDINGS * U * (10 + want))
    with sensimd.client() as c:
        _clear(c)
        c.create_body(1, pose=((0, 0, 0), None))
        c.create_primitive(1, "box", half_extents=(0.1, 3.0, 3.0))
        c.create_object(1, 1, body_id=1, local_pose=((4.0, 0.0, 0.0), None))
        c.create_lidar(1, custom=custom, fields=LIDAR_FIELDS)
        c.update_state(0.0, [1], [(0, 0, 0, 0, 0, 0, 1)])
        c.update_state(0.1, [1], [np.r_[0.0, 0.0, 0.0, quat((0, 0, 1), 0.5)]])
        cloud = c.lidar_clouds(c.step(0.1), 1)[0]
        want = 3.9 / np.cos(0.5 * np.arange(n) * 0.01 / 0.1)
        assert np.all(np.abs(cloud["distance"] - want) <= ROUNDINGS * U * (4 + want))


def _livox_directions(t, fov, rates):
    a = fov / 4
    s = a * np.exp(2j * math.pi * rates[0] * t) + a * np.exp(2j * math.pi * rates[1] * t)
    polar, towards = np.abs(s), np.angle(s)
    return np.stack([np.cos(polar), np.sin(polar) * np.cos(towards),
                     np.sin(polar) * np.sin(towards)], axis=1)


def _hdl64e_elevations():
    upper = np.linspace(math.radians(2.0), math.radians(-8.33), 32)
    lower = np.linspace(math.radians(-8.83), math.radians(-24.8), 32)
    return np.r_[upper, lower]


def _pattern_cases():
    """name: (pattern keyword arguments, steps, expected (directions, time offsets, rings))."""
    cases = {}
    f, cols = 10.0, 100
    els, dph, dts, phi0 = [-0.2, 0.05, 0.3], [0.01, -0.02, 0.03], [0.0, 2e-5, 5e-5], 0.7
    j = np.repeat(np.arange(cols), 3)
    ch = np.tile(np.arange(3), cols)
    tau = j / (f * cols) + np.array(dts)[ch]
    order = np.lexsort((ch, tau))
    j, ch, tau = j[order], ch[order], tau[order]
    cases["spinning_ccw_offsets"] = (
        dict(spinning={"frequency": f, "columns": cols, "channel_elevations": els,
                       "channel_azimuth_offsets": dph, "channel_time_offsets": dts,
                       "spin": "counter_clockwise", "start_azimuth": phi0}),
        [0.0, 0.05, 0.1, 0.15],
        (direction(phi0 + 2 * math.pi * f * tau + np.array(dph)[ch], np.array(els)[ch]), tau, ch))
    j = np.repeat(np.arange(200), 64)
    ch = np.tile(np.arange(64), 200)
    cases["hdl64e"] = (dict(hdl64e={"columns": 200}), [0.0, 0.05, 0.1, 0.15],
                       (direction(-2 * math.pi * j / 200, _hdl64e_elevations()[ch]), j / 2000, ch))
    j = np.repeat(np.arange(1800), 32)
    ch = np.tile(np.arange(32), 1800)
    cases["bpearl"] = (dict(bpearl={}), [0.0, 0.05, 0.1, 0.15],
                       (direction(-2 * math.pi * j / 1800, ch * math.radians(90) / 32),
                        j / 18000, ch))
    j = np.repeat(np.arange(512), 16)
    ch = np.tile(np.arange(16), 512)
    ouster_el = math.radians(16.6) - ch * math.radians(33.2) / 15
    cases["ouster"] = (dict(ouster={"channels": 16, "columns": 512, "frequency": 10.0}),
                       [0.0, 0.05, 0.1, 0.15],
                       (direction(math.pi - 2 * math.pi * j / 512, ouster_el), j / 5120, ch))
    col = np.tile(np.arange(7), 5)
    row = np.repeat(np.arange(5), 7)
    cases["flash"] = (dict(flash={"columns": 7, "rows": 5, "fov_horizontal": 1.0,
                                  "fov_vertical": 0.6, "frame_rate": 10.0}), [0.0, 0.1],
                      (direction(0.5 - (col + 0.5) / 7, 0.3 - (row + 0.5) * 0.6 / 5),
                       np.zeros(35), row))
    col = np.tile(np.arange(6), 4)
    row = np.repeat(np.arange(4), 6)
    d = np.stack([np.ones(24), (1 - 2 * (col + 0.5) / 6) * math.tan(0.6),
                  (1 - 2 * (row + 0.5) / 4) * math.tan(0.4)], axis=1)
    cases["flash_projective"] = (
        dict(flash={"columns": 6, "rows": 4, "fov_horizontal": 1.2, "fov_vertical": 0.8,
                    "frame_rate": 10.0, "projective": True}), [0.0, 0.1],
        (d / np.linalg.norm(d, axis=1)[:, None], np.zeros(24), row))
    t = np.arange(2000) / 20000
    cases["livox"] = (dict(livox={"point_rate": 20000, "frame_rate": 10}), [0.0, 0.1],
                      (_livox_directions(t, math.radians(38.4), (7294 / 60, -4664 / 60)), t,
                       np.zeros(2000, int)))
    az = [0.1, -0.5, 2.0, 3.0, -2.5]
    el = [0.0, 0.2, -0.3, 1.2, -1.4]
    to = [0.02, 0.0, 0.02, 0.0, 0.01]
    chans = [7, 9, 3, 9, 0]
    order = sorted(range(5), key=lambda i: (to[i], chans[i], i))
    cases["custom"] = (dict(custom={"azimuths": az, "elevations": el, "time_offsets": to,
                                    "channels": chans, "frame_rate": 10.0}), [0.0, 0.1],
                       (direction(np.array(az)[order], np.array(el)[order]),
                        np.array(to)[order], np.array(chans)[order]))
    return cases


PATTERNS = _pattern_cases()


@pytest.mark.parametrize("name", sorted(PATTERNS))
def test_lidar_pattern_directions_times_and_rings_follow_the_documented_formulas(sensimd, name):
    """Each scan pattern inside an off-centre sphere: every point is the analytic hit along the
    direction docs/models/lidar.md gives for its ray, with its time offset and ring, in firing
    order."""
    kwargs, times, (d_s, tau, ring) = PATTERNS[name]
    centre, radius = np.array([0.5, -0.3, 0.2]), 9.0
    with sensimd.client() as c:
        _clear(c)
        c.create_primitive(1, "sphere", radius=radius)
        c.create_object(1, 1, local_pose=(tuple(centre), None))
        c.create_lidar(1, fields=LIDAR_FIELDS, **kwargs)
        clouds = []
        for done in _steps(c, times):
            clouds += c.lidar_clouds(done, 1)
        cloud = clouds[0]
        assert len(cloud) == len(d_s)
        b = d_s @ -centre
        t = -b + np.sqrt(b * b - centre @ centre + radius ** 2)
        tol = ROUNDINGS * U * (np.linalg.norm(centre) + t)
        assert np.all(np.abs(_xyz(cloud) - t[:, None] * d_s) <= tol[:, None])
        assert np.all(np.abs(cloud["distance"] - t) <= tol)
        np.testing.assert_allclose(cloud["time_offset"], tau, rtol=4 * U, atol=U)
        assert np.array_equal(cloud["ring"], ring)


def test_lidar_through_a_glass_slab_reads_the_optical_path_along_the_emission(sensimd):
    """A 1 m slab of index 1.5 in front of a wall: the return lies along the emission direction at
    the optical path L1 + n L2 + L3 of the refracted path (Snell), with the intensity of the wall
    times both Fresnel transmittances (normal incidence) and the medium's attenuation."""
    n_glass, alpha = 1.5, 0.000402272        # the medium's default attenuation
    with sensimd.client() as c:
        _clear(c)
        c.set_ambient("custom", id=1, return_probability_scaling=0.0,
                      refractive_index=n_glass)
        c.create_primitive(1, "box", half_extents=(0.5, 5.0, 5.0))
        c.create_object(1, 1, medium_id=1, local_pose=((3.0, 0.0, 0.0), None))
        c.create_primitive(2, "box", half_extents=(0.1, 50.0, 50.0))
        c.create_object(2, 2, local_pose=((10.1, 0.0, 0.0), None))
        az = np.array([0.0, 0.4])
        c.create_lidar(1, custom={"azimuths": az.tolist(), "elevations": [0.0, 0.0],
                                  "frame_rate": 10.0}, raytrace_depth=3, fields=LIDAR_FIELDS)
        c.update_state(0.0)
        c.update_state(0.1)
        cloud = c.lidar_clouds(c.step(0.1), 1)[0]
        assert len(cloud) == 2 and np.all(cloud["object_id"] == 2)
        sin_t = np.sin(az) / n_glass
        opl = 2.5 / np.cos(az) + n_glass * 1.0 / np.sqrt(1 - sin_t ** 2) + 6.5 / np.cos(az)
        tol = ROUNDINGS * U * 4 * (10 + opl)      # three segments, each traced from its start
        assert np.all(np.abs(cloud["distance"] - opl) <= tol)
        assert np.all(np.abs(_xyz(cloud) - opl[:, None] * direction(az, 0 * az)) <= tol[:, None])
        transmit = 1 - ((n_glass - 1) / (n_glass + 1)) ** 2
        normal_incidence = 0.8 / math.pi * transmit ** 2 * math.exp(-alpha * opl[0])
        assert cloud["intensity"][0] == pytest.approx(normal_incidence, rel=64 * U)


def _rodrigues(d, axis, beta):
    """d rotated by beta about the unit axis (perpendicular to d), right-handed."""
    return d * math.cos(beta) + np.cross(axis, d) * math.sin(beta)


@pytest.mark.parametrize("axis", ["elevation", "azimuth"])
def test_lidar_angle_and_distance_noise_means_move_the_point_as_documented(sensimd, axis):
    """Noise of zero spread and a set mean is a fixed distortion: each ray turns by the mean about
    the documented axis of its own frame (x_opt = e_z x d normalised, y_opt = d x x_opt) and its
    range grows by the distance mean; the point lies along the turned ray, its azimuth and
    elevation fields keep the pattern's angles."""
    az, el, beta, shift, radius = np.array([0.0, 0.5, -2.0]), np.array([0.0, 0.2, -0.7]), 0.1, \
        0.25, 10.0
    with sensimd.client() as c:
        _clear(c)
        c.create_primitive(1, "sphere", radius=radius)
        c.create_object(1, 1)
        c.create_lidar(1, custom={"azimuths": az.tolist(), "elevations": el.tolist(),
                                  "frame_rate": 10.0}, fields=LIDAR_FIELDS,
                       angle_noise={"axis": "NOISE_AXIS_" + axis.upper(), "mean": beta,
                                    "stddev": 0.0},
                       distance_noise={"mean": shift})
        c.update_state(0.0)
        c.update_state(0.1)
        cloud = c.lidar_clouds(c.step(0.1), 1)[0]
    want = []
    for d in direction(az, el):
        x_opt = np.cross([0.0, 0.0, 1.0], d)
        x_opt /= np.linalg.norm(x_opt)
        want.append(_rodrigues(d, x_opt if axis == "elevation" else np.cross(d, x_opt), beta))
    want = np.array(want) * (radius + shift)
    assert np.all(np.abs(_xyz(cloud) - want) <= ROUNDINGS * U * radius)
    assert np.all(np.abs(cloud["distance"] - (radius + shift)) <= ROUNDINGS * U * radius)
    np.testing.assert_array_equal(cloud["azimuth"], az.astype(np.float32))
    np.testing.assert_array_equal(cloud["elevation"], el.astype(np.float32))
    horizon = np.arctan2(want[0, 2], np.hypot(want[0, 0], want[0, 1])), \
        np.arctan2(want[0, 1], want[0, 0])
    assert horizon == pytest.approx((-beta, 0.0) if axis == "elevation" else (0.0, beta))


def test_lidar_time_offsets_count_from_the_sweep_or_the_step_start(sensimd):
    """A sweep starting at 13 ms: per revolution, frame_start_time is the sweep's start and the
    offsets run from 0; per step, it is the step's start, and frame_start_time + time_offset is
    each ray's firing time t_s + j / (f W) either way."""
    f, cols, t_s = 10.0, 100, 0.013
    with sensimd.client() as c:
        _clear(c)
        c.create_primitive(1, "sphere", radius=10.0)
        c.create_object(1, 1)
        pattern = {"frequency": f, "columns": cols, "channel_elevations": [0.0],
                   "start_time": t_s}
        c.create_lidar(1, spinning=pattern, fields=LIDAR_FIELDS)
        c.create_lidar(2, spinning=pattern, fields=LIDAR_FIELDS, publish="per_step")
        fired = []
        t_prev = None
        for t in (0.0, 0.02, 0.05, 0.09, 0.12):
            c.update_state(t)
            done = c.step(t)
            for o in done.outputs:
                cloud = c.lidar_clouds([o], o.sensor_id)[0]
                start = o.point_cloud.frame_start_time
                if o.sensor_id == 1:
                    assert o.point_cloud.complete and start == t_s
                    np.testing.assert_allclose(cloud["time_offset"], np.arange(cols) / (f * cols),
                                               rtol=0, atol=U)
                elif len(cloud):
                    assert start == t_prev
                    fired.append(start + cloud["time_offset"].astype(float))
            t_prev = t
        fired = np.concatenate(fired)
        want = t_s + np.arange(len(fired)) / (f * cols)
        np.testing.assert_allclose(fired, want, rtol=0, atol=U * 0.1)
        assert want[-1] <= 0.12 < want[-1] + 1 / (f * cols)


# ------------------------------------------------------------------ IMU


def test_imu_rigid_motion_with_a_lever_arm_and_a_rotated_mount(sensimd):
    """A body turning with constant angular acceleration about a tilted axis while its origin
    accelerates, an IMU 0.6 m off the origin on a rotated mount, gravity and field of their own:
    specific force F^T (a_o + alpha x r + w x (w x r) - g), rate F^T w and field F^T B, every
    step, with and without a centre of mass (the relation is about the body origin)."""
    g = np.array([0.3, -0.2, -9.7])
    b0 = np.array([2e-5, -1e-5, 4e-5])
    axis = np.array([0.3, 0.4, 1.0]) / np.linalg.norm([0.3, 0.4, 1.0])
    w0, alpha = 1.0, 2.0
    p0, v0, a0 = np.array([1.0, 2.0, 3.0]), np.array([0.2, 0.0, 0.0]), np.array([0.5, 0.1, -0.2])
    mount = (np.array([0.5, -0.3, 0.2]), quat((1.0, -1.0, 0.5), 0.8))
    dipole_m, dipole_c = np.array([0.0, 0.0, 2.0]), np.array([3.0, 1.0, 2.0])

    def state(t):
        q = quat(axis, w0 * t + 0.5 * alpha * t * t)
        return p0 + v0 * t + 0.5 * a0 * t * t, q, v0 + a0 * t, (w0 + alpha * t) * axis

    def expected(t):
        p, q, _, w = state(t)
        f = rot(q) @ rot(mount[1])
        r = rot(q) @ mount[0]
        acc = a0 + np.cross(alpha * axis, r) + np.cross(w, np.cross(w, r))
        rr = p + r - dipole_c
        dist = np.linalg.norm(rr)
        rh = rr / dist
        b = b0 + 1e-7 * (3 * rh * (dipole_m @ rh) - dipole_m) / dist ** 3
        return f.T @ (acc - g), f.T @ w, f.T @ b

    with sensimd.client() as c:
        c.set_environment(gravity=tuple(g), magnetic_field=tuple(b0),
                          dipoles=[(tuple(dipole_m), tuple(dipole_c))])
        c.create_body(1, pose=(tuple(p0), None))
        c.create_body(2, pose=(tuple(p0), None), center_of_mass=(0.4, -0.7, 0.1))
        for sensor, body in ((1, 1), (2, 2)):
            c.create_imu(sensor, body_id=body, mount=(tuple(mount[0]), tuple(mount[1])),
                         accelerometer=True, gyroscope=True, magnetometer=True)
        dt = 0.01
        for k in range(6):
            t = k * dt
            p, q, v, w = state(t)
            c.update_state(t, [1, 2], [np.r_[p, q]] * 2, [np.r_[v, w]] * 2)
            done = c.step(t)
            samples = {o.sensor_id: o.imu for o in done.outputs}
            assert samples[1] == samples[2]       # the centre of mass changes nothing
            if k == 0:
                continue                          # the first step has no acceleration
            acc, rate, field = expected(t)
            s = samples[1]
            # velocities linear in t: their difference quotient is exact but for rounding, at
            # the magnitude of the velocities over dt (origin and lever arm) and of gravity
            _, _, v, w = state(t)
            acc_tol = 64 * DU * ((np.linalg.norm(v) + np.linalg.norm(w) * 0.62) / dt + 10)
            for vec, want, tol in ((s.acceleration, acc, acc_tol),
                                   (s.angular_velocity, rate, 64 * DU * np.linalg.norm(w)),
                                   (s.magnetic_field, field, 64 * DU * np.linalg.norm(b0))):
                got = np.array([vec.x, vec.y, vec.z])
                assert np.all(np.abs(got - want) <= tol), (k, got, want)


def test_imu_gyroscope_reads_a_uniform_rotation_from_poses_alone(sensimd):
    """Poses only: the angular velocity estimated from q1 q0^-1 over the step is the true rate of
    a uniform rotation about a tilted axis, in the rotated sensor frame."""
    axis = np.array([1.0, -2.0, 2.0]) / 3.0
    rate = 3.0
    mount = quat((0.0, 1.0, 1.0), -0.6)
    with sensimd.client() as c:
        c.create_body(1, pose=((0, 0, 0), None))
        c.create_imu(1, body_id=1, mount=((0.0, 0.0, 0.0), tuple(mount)), gyroscope=True)
        for k in range(5):
            t = 0.02 * k
            q = quat(axis, rate * t)
            c.update_state(t, [1], [np.r_[0.0, 0.0, 0.0, q]])
            s = c.step(t).outputs[0].imu
            if k == 0:
                continue
            f = rot(q) @ rot(mount)
            got = np.array([s.angular_velocity.x, s.angular_velocity.y, s.angular_velocity.z])
            # the step's rotation angle (0.06 rad) from quaternions good to a few DU, over dt
            assert np.all(np.abs(got - f.T @ (rate * axis)) <= 256 * DU / 0.02)


# ------------------------------------------------------------------ joint sensors


def test_encoders_and_odometer_quantise_wrap_and_keep_direction(sensimd):
    """A revolute joint at 0.013 + 3.1 t and a prismatic one at -0.333 + 2 t, over 15 steps:
    binned absolute reading and its change-to-change speed (docs table), an incremental encoder
    wrapped into [-pi, pi), a mirrored (scaling -1) binned linear encoder wrapped into [0, 0.25)
    with its wrap-aware speed, an odometer binned at 2 pi R / PPR, and a negative scaling clamped
    into its range."""
    def floor_bin(u, res):
        return res * np.floor(u / res)

    def wrap(u, lo, hi):
        return u - (hi - lo) * np.floor((u - lo) / (hi - lo))

    with sensimd.client() as c:
        c.create_joint(1, "revolute", 0.013)
        c.create_joint(2, "prismatic", -0.333)
        c.create_encoder(1, 1, mode="absolute", resolution=0.1, range_lower=-100,
                         range_upper=100)
        c.create_encoder(2, 1, mode="incremental", range_lower=-math.pi, range_upper=math.pi)
        c.create_encoder(3, 2, mode="incremental", range_lower=0.0, range_upper=0.25,
                         resolution=0.01, scaling=-1.0)
        c.create_odometer(4, 1, wheel_radius=0.3, pulses_per_revolution=100)
        c.create_encoder(5, 1, mode="absolute", scaling=-2.0, range_lower=-1.0, range_upper=0.5)
        speeds1 = [0, 0, 0] + [0.1 / 0.03] * 4 + [2.5] * 3 + [0.1 / 0.03] * 5
        res_odo = 2 * math.pi * 0.3 / 100
        for k in range(15):
            t = k * 0.01
            q, x = 0.013 + 3.1 * t, -0.333 + 2.0 * t
            c.update_state(t, joint_ids=[1, 2], joint_positions=[q, x])
            s = {o.sensor_id: o.scalar for o in c.step(t).outputs}
            assert s[1].position == pytest.approx(floor_bin(q, 0.1), abs=1e-12)
            assert s[1].speed == pytest.approx(speeds1[k], rel=1e-9)
            assert s[2].position == pytest.approx(wrap(q, -math.pi, math.pi), abs=1e-12)
            assert s[3].position == pytest.approx(wrap(-floor_bin(x, 0.01), 0.0, 0.25), abs=1e-12)
            assert s[3].speed == pytest.approx(0.0 if k == 0 else -2.0, abs=1e-9)
            assert s[4].position == pytest.approx(floor_bin(0.3 * q, res_odo), abs=1e-12)
            assert s[5].position == pytest.approx(max(-1.0, min(0.5, -2.0 * q)), abs=1e-12)
        # across the wrap of [-pi, pi): 3.1 then 3.2 (read as 3.2 - 2 pi) is +0.1 rad in 0.02 s
        c.update_state(0.15, joint_ids=[1], joint_positions=[3.1])
        c.step(0.15)
        c.update_state(0.17, joint_ids=[1], joint_positions=[3.2])
        s = {o.sensor_id: o.scalar for o in c.step(0.17).outputs}
        assert s[2].position == pytest.approx(3.2 - 2 * math.pi, abs=1e-12)
        assert s[2].speed == pytest.approx(0.1 / 0.02, rel=1e-9)
        assert s[4].position < 0.3 * 3.2 and s[4].position > 0.3 * 3.2 - res_odo


# ------------------------------------------------------------------ cone


CONE_FOV = (0.8, 0.5)
CONE_BODY = (np.array([1.0, -2.0, 0.5]), quat((0.2, 0.3, 1.0), 1.1))
CONE_MOUNT = (np.array([0.2, 0.1, 0.3]), quat((0.0, 1.0, 0.3), -0.4))


def _cone_cases():
    a, b = (math.tan(f / 2) for f in CONE_FOV)
    cases = {}
    centre = np.array([6.0, 1.0, 0.5])
    cases["sphere_in_view"] = ("sphere", dict(radius=1.2), centre, None, None,
                               centre - 1.2 * centre / np.linalg.norm(centre))
    for name, gen, centre in (("sphere_left_edge", (1, a, 0), (6.0, 6.0 * a + 0.8, 0.0)),
                              ("sphere_top_edge", (1, 0, b), (6.0, 0.0, 6.0 * b + 0.5))):
        u = np.array(gen) / np.linalg.norm(gen)
        cc = np.array(centre)
        t = u @ cc - math.sqrt((u @ cc) ** 2 - cc @ cc + 1.0)
        cases[name] = ("sphere", dict(radius=1.0), cc, None, None, t * u)
    n = np.array([math.cos(0.2), math.sin(0.2), 0.0])
    cases["turned_wall"] = ("box", dict(half_extents=(0.05, 30, 30)), 5.05 * n, None,
                            ((0, 0, 1), 0.2), 5 * n)
    cases["floor_on_the_mantle"] = ("plane", dict(half_size=0), np.array([0, 0, -2.0]), None,
                                    None, np.array([2 / b, 0, -2.0]))
    centre = np.array([8.0, -1.0, 0.0])
    cases["cylinder"] = ("cylinder", dict(radius=0.7, half_length=2.0), centre, None, None,
                         centre - 0.7 * centre / np.linalg.norm(centre))
    end = np.array([8.0, 0.0, 0.5])
    cases["capsule_end"] = ("capsule", dict(radius=0.5, half_length=1.0), end + [0, 0, 1.0],
                            None, None, end - 0.5 * end / np.linalg.norm(end))
    cases["sphere_scaled"] = ("sphere", dict(radius=1.0), np.array([8.0, 0, 0]), (2.0, 1.0, 1.0),
                              None, np.array([6.0, 0, 0]))
    cases["ellipsoid"] = ("ellipsoid", dict(radii=(2.0, 1.0, 3.0)), np.array([8.0, 0, 0]),
                          None, None, np.array([6.0, 0, 0]))
    cases["beyond_range"] = ("box", dict(half_extents=(0.05, 30, 30)), np.array([20.1, 0, 0]),
                             None, None, None)
    return cases


CONES = _cone_cases()


# Line mode samples each surface with lines: its reading is exact where the nearest point lies on
# a sampled line (the poles of the 24 x 12 grid of a sphere or an ellipsoid), or when nothing is
# in view.
CONE_RUNS = [(name, "exact") for name in sorted(CONES)] + \
    [(name, "lines") for name in ("beyond_range", "ellipsoid", "sphere_scaled")]


@pytest.mark.parametrize("name,mode", CONE_RUNS)
def test_cone_reports_the_analytic_nearest_point_in_view(sensimd, name, mode):
    """A cone sensor on a posed body with a rotated mount: the nearest point of each primitive
    inside the view (in view, on the mantle at the edges, on a turned wall, beyond the range),
    its range, azimuth, projected elevation and world point."""
    kind, size, centre, scale, turn, nearest = CONES[name]
    r_s = rot(CONE_BODY[1]) @ rot(CONE_MOUNT[1])
    p_s = CONE_BODY[0] + rot(CONE_BODY[1]) @ CONE_MOUNT[0]
    r_o = r_s @ (rot(quat(*turn)) if turn else np.eye(3))
    with sensimd.client() as c:
        c.create_body(1, pose=(tuple(CONE_BODY[0]), tuple(CONE_BODY[1])))
        c.create_cone(1, body_id=1, mount=(tuple(CONE_MOUNT[0]), tuple(CONE_MOUNT[1])),
                      fov_horizontal=CONE_FOV[0], fov_vertical=CONE_FOV[1], range=20.0,
                      mode=mode)
        c.create_primitive(1, kind, **size)
        c.create_object(1, 1, local_pose=(tuple(p_s + r_s @ centre), tuple(quat_of(r_o))),
                        scale=scale)
        c.update_state(0.0)
        c.update_state(0.1)
        reading = [o.cone for o in c.step(0.1).outputs if o.sensor_id == 1][0]
    if nearest is None:
        assert not reading.detected
        return
    assert reading.detected and reading.object_id == 1
    tol = 1e-6       # the exact query's documented accuracy, m
    assert reading.range == pytest.approx(np.linalg.norm(nearest), abs=tol)
    assert reading.azimuth == pytest.approx(math.atan2(nearest[1], nearest[0]), abs=tol)
    assert reading.elevation == pytest.approx(math.atan2(nearest[2], nearest[0]), abs=tol)
    point = np.array([reading.point.x, reading.point.y, reading.point.z])
    assert np.all(np.abs(point - (p_s + r_s @ nearest)) <= tol)


def test_cone_speed_is_the_nearest_points_displacement_rate(sensimd):
    """A sphere moving at 2 m/s towards the sensor's side: each step's speed is |q_k - q_(k-1)| /
    dt of the analytic nearest points c - c/|c|, absent on the first detection."""
    dt, radius = 0.01, 1.0
    with sensimd.client() as c:
        c.create_body(1, pose=((6.0, 1.0, 0.0), None))
        c.create_primitive(1, "sphere", radius=radius)
        c.create_object(1, 1, body_id=1)
        c.create_cone(1, fov_horizontal=0.8, fov_vertical=0.5, range=20.0)
        previous = None
        for k in range(6):
            centre = np.array([6.0 - 2.0 * k * dt, 1.0, 0.0])
            c.update_state(k * dt, [1], [np.r_[centre, 0.0, 0.0, 0.0, 1.0]])
            reading = c.step(k * dt).outputs[0].cone
            nearest = centre - radius * centre / np.linalg.norm(centre)
            assert reading.range == pytest.approx(np.linalg.norm(nearest), abs=1e-6)
            if previous is None:
                assert not reading.HasField("speed")
            else:
                speed = np.linalg.norm(nearest - previous) / dt
                assert reading.speed == pytest.approx(speed, abs=2e-6 / dt)
            previous = nearest
