# SPDX-License-Identifier: MIT
"""The primitives MuJoCo has that the first protocol lacked, through the real daemon and the
Python client: an ellipsoid, a rectangle (bounded per axis, one-sided or not) and a height
field, each traced against an answer built from its definition (docs/frames.md,
"Primitives"); every bad value refused naming its field, changing nothing."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sensim import errors, pb

TOL = 2e-5   # Embree traces in float32 (docs/backend.md, "Precision")


def ray(c, origin, direction):
    return c.raycast([origin], [direction])[0]


def test_ellipsoid_rectangle_and_height_field_are_where_they_should_be(sensimd):
    with sensimd.client() as c:
        c.create_primitive(1, "ellipsoid", radii=(2.0, 1.0, 0.5))
        c.create_object(1, 1, local_pose=((0, 0, 10), (0, 0, 0, 1)))
        # along each axis, the semi-axis; from the centre along (1, 1, 0)/sqrt2, the surface at
        # 1 / sqrt(1/(2*4) + 1/(2*1))
        assert ray(c, (10, 0, 10), (-1, 0, 0)).distances == pytest.approx(8.0, rel=TOL)
        assert ray(c, (0, 10, 10), (0, -1, 0)).distances == pytest.approx(9.0, rel=TOL)
        assert ray(c, (0, 0, 20), (0, 0, -1)).distances == pytest.approx(9.5, rel=TOL)
        r = ray(c, (0, 0, 10), (1, 1, 0))
        assert r.distances == pytest.approx(1 / math.sqrt(1 / 8 + 1 / 2), rel=TOL)

        # a one-sided rectangle at z = 0, 4 m x 2 m: from above yes, from below no
        c.create_primitive(2, "rectangle", half_size_x=2.0, half_size_y=1.0, one_sided=True)
        c.create_object(2, 2, local_pose=((20, 0, 0), (0, 0, 0, 1)))
        assert ray(c, (21.9, 0.9, 3), (0, 0, -1)).distances == pytest.approx(3.0, rel=TOL)
        assert math.isinf(ray(c, (21.9, 0.9, -3), (0, 0, 1)).distances)
        assert math.isinf(ray(c, (22.1, 0, 3), (0, 0, -1)).distances)
        # two-sided, unbounded along y
        c.create_primitive(3, "rectangle", half_size_x=1.0)
        c.create_object(3, 3, local_pose=((40, 0, 0), (0, 0, 0, 1)))
        hit = ray(c, (40.5, 3000.0, -2), (0, 0, 1))
        assert hit.distances == pytest.approx(2.0, rel=TOL) and hit.object_ids == 3
        assert hit.normals[2] == pytest.approx(-1.0)   # facing the ray

        # a height field: z = 0.5 + 0.1 x over 3 x 4 samples (rows along y), base 1 m
        xs = np.linspace(-2, 2, 4)
        z = np.tile(0.5 + 0.1 * xs, (3, 1))            # rows (3) x columns (4)
        c.create_primitive(4, "height_field", heights=z, half_size_x=2.0, half_size_y=1.0,
                           base_depth=1.0)
        c.create_object(4, 4, local_pose=((60, 0, 0), (0, 0, 0, 1)))
        for x in (-1.7, -0.3, 0.9, 1.8):
            hit = ray(c, (60 + x, 0.4, 5), (0, 0, -1))
            assert hit.distances == pytest.approx(5 - (0.5 + 0.1 * x), rel=TOL)
            n = np.array([-0.1, 0, 1]) / math.sqrt(1.01)
            assert hit.normals == pytest.approx(n, abs=1e-5)
        assert ray(c, (60.5, 0, -5), (0, 0, 1)).distances == pytest.approx(4.0, rel=TOL)
        assert ray(c, (55, 0.2, -0.5), (1, 0, 0)).distances == pytest.approx(3.0, rel=TOL)
        assert c.get_info().environments[0].geometries == 4


def snapshot(c):
    env = c.get_info().environments[0]
    return env.geometries, env.objects


def test_bad_values_are_refused_naming_the_field(sensimd):
    with sensimd.client() as c:
        c.create_primitive(1, "sphere", radius=1.0)
        before = snapshot(c)
        z = np.zeros((3, 3))
        nan = z.copy()
        nan[2, 1] = np.nan
        deep = z.copy()
        deep[0, 2] = -2.0
        raw_hf = pb.CreatePrimitive(id=9, height_field=pb.HeightField(
            rows=3, columns=3, heights=np.zeros(8, dtype="<f4").tobytes(), half_size_x=1,
            half_size_y=1))
        huge = pb.CreatePrimitive(id=9, height_field=pb.HeightField(
            rows=4096, columns=2048, half_size_x=1, half_size_y=1))
        cases = [
            (r"ellipsoid\.radii\.y = 0 must be > 0",
             lambda: c.create_primitive(9, "ellipsoid", radii=(1, 0, 1))),
            ("ellipsoid.radii is not set", lambda: c.wait_reply(c.send_request(
                "create_primitive", pb.CreatePrimitive(id=9, ellipsoid=pb.Ellipsoid())))),
            (r"rectangle\.half_size_x = -1 must be > 0",
             lambda: c.create_primitive(9, "rectangle", half_size_x=-1)),
            (r"height_field\.rows = 1 must be >= 2",
             lambda: c.create_primitive(9, "height_field", heights=np.zeros((1, 4)),
                                        half_size_x=1, half_size_y=1)),
            (r"height_field\.heights\[7\] = nan is not finite",
             lambda: c.create_primitive(9, "height_field", heights=nan, half_size_x=1,
                                        half_size_y=1)),
            (r"height_field\.heights\[2\] = -2 is below the bottom -base_depth = -1 m",
             lambda: c.create_primitive(9, "height_field", heights=deep, half_size_x=1,
                                        half_size_y=1, base_depth=1.0)),
            (r"height_field\.half_size_y = 0 must be in",
             lambda: c.create_primitive(9, "height_field", heights=z, half_size_x=1)),
            (r"height_field\.heights: 32 bytes for rows x columns = 3 x 3 samples of 4 bytes",
             lambda: c.wait_reply(c.send_request("create_primitive", raw_hf))),
            (r"height_field: rows x columns = 4096 x 2048 exceeds 4194304 samples",
             lambda: c.wait_reply(c.send_request("create_primitive", huge))),
        ]
        for pattern, call in cases:
            with pytest.raises(errors.InvalidArgument, match=pattern):
                call()
            assert snapshot(c) == before, pattern
        with pytest.raises(ValueError, match="height_field.heights: a 2-D array"):
            c.create_primitive(9, "height_field", heights=[1, 2, 3])
