# SPDX-License-Identifier: MIT
"""Mesh files into create_mesh: a torus written by Open3D as OBJ, STL and PLY is loaded through
meshio and traced by the daemon; its rays hit where the analytic torus has its vertices and
where a float64 brute-force intersection over Open3D's own reading of the file says; quads
are split; unreadable files are refused naming the file and create nothing."""

from __future__ import annotations

import numpy as np
import pytest

import sensim
from sensim import errors

o3d = pytest.importorskip("open3d")
pytest.importorskip("meshio")

R, r = 2.0, 0.5           # torus radius and tube radius, m


@pytest.fixture(scope="module")
def torus_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("mesh")
    m = o3d.geometry.TriangleMesh.create_torus(torus_radius=R, tube_radius=r,
                                               radial_resolution=64, tubular_resolution=32)
    m.compute_triangle_normals()
    m.compute_vertex_normals()
    paths = {}
    for ext in ("obj", "stl", "ply"):
        paths[ext] = d / f"torus.{ext}"
        assert o3d.io.write_triangle_mesh(str(paths[ext]), m)
    return paths


def brute_force(vertices, triangles, origins, directions):
    """Nearest hit distance of each ray over every triangle (Moller-Trumbore in float64)."""
    v0, v1, v2 = (vertices[triangles[:, i]] for i in range(3))
    e1, e2 = v1 - v0, v2 - v0
    out = np.full(len(origins), np.inf)
    for k, (o, d) in enumerate(zip(origins, directions)):
        p = np.cross(d, e2)
        det = np.einsum("ij,ij->i", e1, p)
        ok = np.abs(det) > 1e-12
        inv = np.where(ok, 1.0 / np.where(ok, det, 1.0), 0.0)
        s = o - v0
        u = np.einsum("ij,ij->i", s, p) * inv
        q = np.cross(s, e1)
        v = (q @ d) * inv
        t = np.einsum("ij,ij->i", e2, q) * inv
        hit = ok & (u >= 0) & (v >= 0) & (u + v <= 1) & (t > 0)
        if hit.any():
            out[k] = t[hit].min()
    return out


@pytest.mark.parametrize("ext", ["obj", "stl", "ply"])
def test_mesh_file_traced_where_the_torus_is(sensimd, torus_files, ext):
    path = torus_files[ext]
    ref = o3d.io.read_triangle_mesh(str(path))
    mesh = sensim.load_mesh(path)
    assert mesh.vertices.dtype == np.dtype("<f4") and mesh.indices.dtype == np.dtype("<u4")
    assert len(mesh.indices) == len(ref.triangles) == 64 * 32 * 2
    # the same triangles as Open3D reads (by their corner positions; STL repeats vertices)
    got = np.sort(mesh.vertices[mesh.indices].reshape(-1, 9), axis=0)
    want = np.sort(np.asarray(ref.vertices)[np.asarray(ref.triangles)].reshape(-1, 9), axis=0)
    np.testing.assert_allclose(got, want, atol=1e-6)

    with sensimd.client() as c:
        c.create_mesh(1, path)                 # straight from the file
        c.create_object(1, 1)
        # analytic points that are vertices of the tessellation: the inner equator from the
        # centre, the top of the tube from above, the outer equator from outside
        o = np.array([[0, 0, 0], [R, 0, 5.0], [10.0, 0, 0], [0, 0, 5.0]])
        d = np.array([[1.0, 0, 0], [0, 0, -1.0], [-1.0, 0, 0], [0, 0, -1.0]])
        hits = c.raycast(o, d)
        np.testing.assert_allclose(hits.distances[:3], [R - r, 5.0 - r, 10.0 - (R + r)],
                                   atol=2e-6)
        assert np.isinf(hits.distances[3])      # down the hole
        # random rays against a float64 brute force over Open3D's triangles
        rng = np.random.default_rng(7)
        origins = rng.uniform(-4, 4, (150, 3)) * [1, 1, 0.25] + [0, 0, 3.0]
        targets = rng.uniform(-3, 3, (150, 3)) * [1, 1, 0.2]
        dirs = targets - origins
        dirs /= np.linalg.norm(dirs, axis=1)[:, None]
        truth = brute_force(np.asarray(ref.vertices), np.asarray(ref.triangles), origins, dirs)
        got = c.raycast(origins, dirs).distances
        assert np.isfinite(truth).sum() > 50
        np.testing.assert_array_equal(np.isinf(got), np.isinf(truth))
        fin = np.isfinite(truth)
        np.testing.assert_allclose(got[fin], truth[fin], atol=1e-5)


def test_quads_are_split_and_polygons_refused(sensimd, tmp_path):
    quad = tmp_path / "square.obj"
    quad.write_text("v -1 -1 0\nv 1 -1 0\nv 1 1 0\nv -1 1 0\nf 1 2 3 4\n")
    mesh = sensim.load_mesh(quad)
    assert mesh.indices.tolist() == [[0, 1, 2], [0, 2, 3]]
    with sensimd.client() as c:
        c.create_mesh(1, str(quad))
        c.create_object(1, 1)
        hits = c.raycast([[0.5, -0.5, 1], [-0.5, 0.5, 1], [1.5, 0, 1]], [[0, 0, -1]] * 3)
        np.testing.assert_array_equal(hits.distances, [1.0, 1.0, np.inf])
    pent = tmp_path / "pentagon.obj"
    pent.write_text("v 0 0 0\nv 1 0 0\nv 1 1 0\nv 0.5 1.5 0\nv 0 1 0\nf 1 2 3 4 5\n")
    with pytest.raises(ValueError, match=r"pentagon\.obj.*triangulate"):
        sensim.load_mesh(pent)


def test_unreadable_mesh_files_are_refused_naming_the_file(sensimd, tmp_path):
    missing = tmp_path / "nowhere.obj"
    garbage = tmp_path / "garbage.stl"
    garbage.write_bytes(b"\x00\x01 not a mesh at all")
    dangling = tmp_path / "dangling.obj"
    dangling.write_text("v 0 0 0\nv 1 0 0\nf 1 2 7\n")
    with sensimd.client() as c:
        with pytest.raises(FileNotFoundError, match="nowhere.obj"):
            c.create_mesh(1, missing)
        with pytest.raises(ValueError, match="garbage.stl"):
            c.create_mesh(1, garbage)
        with pytest.raises(ValueError, match=r"dangling\.obj.*(outside|cannot read)"):
            c.create_mesh(1, dangling)
        with pytest.raises(TypeError, match="one or the other"):
            c.create_mesh(1, dangling, np.zeros((1, 3)))
        with pytest.raises(TypeError, match="indices"):
            c.create_mesh(1, np.zeros((3, 3)))
        # nothing was created: the id is free
        with pytest.raises(errors.NotFound):
            c.remove("geometry", 1)
