# SPDX-License-Identifier: MIT
"""Pictures of the daemon's outputs, decoded from PNG by Pillow: points are drawn where the
scene has its walls (bird's-eye and side views), coloured by intensity as the materials
differ; range images put each ring's points in its row, highest beam on top; IMU series have
a panel per sub-sensor."""

from __future__ import annotations

import numpy as np
import pytest

import sensim
from sensim import plot

Image = pytest.importorskip("PIL.Image")
pytest.importorskip("matplotlib")

DPI = 100


def walls(c):
    """A dark wall (reflectance 0.1) facing the sensor at x = 5 and a bright one (0.9) at
    x = -5, each 6 m wide and 6 m high (every beam of both lidars meets them), in clear air;
    a VLP-16 and an OS1-16 at the origin."""
    c.set_ambient("custom", return_probability_scaling=0.0)
    c.set_material(1, "lambertian", reflectance=0.1)
    c.set_material(2, "lambertian", reflectance=0.9)
    c.create_primitive(1, "box", half_extents=(0.5, 3.0, 3.0))
    c.create_object(1, 1, local_pose=((5.5, 0, 0), None), material_id=1)
    c.create_object(2, 1, local_pose=((-5.5, 0, 0), None), material_id=2)
    c.create_lidar(5, preset="vlp16", misses="nan")
    c.create_lidar(6, preset="os1-16-512", misses="nan")
    c.create_imu(7, accelerometer=True, gyroscope=True, magnetometer=True, sample_rate=100.0)
    outs = []
    for t in (0.0, 0.05, 0.1001):
        c.update_state(t)
        outs += sensim.outputs(c.step(t))
    return {sid: [o for o in outs if o.sensor_id == sid] for sid in (5, 6, 7)}


@pytest.fixture(scope="module")
def outs():
    from sensim.testing import Daemon
    with Daemon() as d, d.client() as c:
        yield walls(c)


def render(fig, path):
    """Save fig, decode the PNG with Pillow; (RGB array, data -> pixel mapping)."""
    fig.savefig(path, format="png")
    img = np.asarray(Image.open(path).convert("RGB")).astype(int)
    ax = fig.axes[0]
    box = ax.get_window_extent()
    (x0, x1), (y0, y1) = ax.get_xlim(), ax.get_ylim()
    height = img.shape[0]

    def pixel(h, v):
        col = box.x0 + (h - x0) / (x1 - x0) * box.width
        row = height - (box.y0 + (v - y0) / (y1 - y0) * box.height)
        return int(round(row)), int(round(col))

    return img, pixel


def drawn(img, row, col, radius=3):
    """Pixels around (row, col) that are neither white background nor light grid lines."""
    patch = img[max(row - radius, 0):row + radius + 1, max(col - radius, 0):col + radius + 1]
    return patch[(patch < 200).any(axis=2)]


def test_top_and_side_views_draw_the_walls_where_they_are(outs, tmp_path):
    cloud = outs[5][0].value
    lim = (-10, 10, -10, 10)
    img, px = render(plot.cloud_figure(cloud, view="top", colour="none", limits=lim,
                                       dpi=DPI), tmp_path / "top.png")
    assert img.shape[:2] == (800, 800)
    for y in (-2.5, 0.0, 2.5):
        assert len(drawn(img, *px(5.0, y))), f"no point drawn at (5, {y})"
        assert len(drawn(img, *px(-5.0, y))), f"no point drawn at (-5, {y})"
    for x, y in ((0, 5), (0, -5), (2.5, 0), (-2.5, 0), (5.0, 6.0), (8, 0)):
        assert not len(drawn(img, *px(x, y))), f"a point drawn at ({x}, {y})"
    img, px = render(plot.cloud_figure(cloud, view="side", colour="none", limits=lim,
                                       dpi=DPI), tmp_path / "side.png")
    for z in (-0.8, 0.0, 0.8):
        assert len(drawn(img, *px(5.0, z))) and len(drawn(img, *px(-5.0, z)))
    # beams reach 15 deg up and down (VLP-16): z = +-1.34 m at the walls
    for x, z in ((5.0, 2.0), (5.0, -2.0), (0.0, 0.0), (2.5, 0.0)):
        assert not len(drawn(img, *px(x, z))), f"a point drawn at ({x}, {z})"


def test_colour_by_intensity_tells_the_materials_apart(outs, tmp_path):
    cloud = outs[5][0].value
    img, px = render(plot.cloud_figure(cloud, view="top", colour="intensity",
                                       limits=(-10, 10, -10, 10), point_size=20, dpi=DPI),
                     tmp_path / "i.png")
    dark = drawn(img, *px(5.0, 0.0), radius=2).mean(axis=0)
    bright = drawn(img, *px(-5.0, 0.0), radius=2).mean(axis=0)
    # viridis: low values dark blue-violet, high values yellow-green
    assert bright[1] > dark[1] + 60 and bright[0] > dark[0]
    # by height in the side view: the top of a wall yellow, its bottom dark
    img, px = render(plot.cloud_figure(cloud, view="side", colour="height",
                                       limits=(-10, 10, -10, 10), point_size=20, dpi=DPI),
                     tmp_path / "h.png")
    top = drawn(img, *px(5.0, 1.2), radius=2).mean(axis=0)
    bottom = drawn(img, *px(5.0, -1.2), radius=2).mean(axis=0)
    assert top[1] > bottom[1] + 60 and top[0] > bottom[0]
    with pytest.raises(ValueError, match="no 'reflectivity' field"):
        plot.cloud_figure(cloud, colour="reflectivity")
    plot.cloud_figure(outs[6][0].value, colour="reflectivity")    # a field of the OS1's
    with pytest.raises(ValueError, match="view"):
        plot.cloud_figure(cloud, view="bottom")


def test_range_image_rows_are_rings_from_the_top(outs, tmp_path):
    for sid in (6, 5):
        cloud = outs[sid][0].value
        grid = plot._range_grid(cloud, None, "range")
        x, y, z = (cloud[a].astype(np.float64) for a in "xyz")
        rng = np.sqrt(x * x + y * y + z * z)
        elev = np.arcsin(z / rng)
        rings = sorted(set(cloud["ring"].tolist()))
        assert len(rings) == 16 and grid.shape[0] == 16
        # every ring meets the walls: its row is its rank by elevation from the top
        order = sorted(rings, key=lambda r: -np.nanmean(elev[cloud["ring"] == r]))
        assert grid.shape[1] == len(cloud) // 16
        for row, ring in enumerate(order):
            np.testing.assert_allclose(grid[row], rng[cloud["ring"] == ring], rtol=1e-14)
        fig = plot.range_image_figure(cloud, dpi=DPI)
        path = plot._save(fig, tmp_path / f"range{sid}.png")
        assert Image.open(path).size == (1200, 350)
    # an organised cloud's own shape: rows are its rows
    cloud = outs[6][0].value
    grid = plot._range_grid(cloud, (16, 512), "intensity")
    np.testing.assert_array_equal(grid, np.where(np.isnan(cloud["x"]), np.nan,
                                                 cloud["intensity"]).reshape(16, 512))
    with pytest.raises(ValueError, match="does not hold"):
        plot._range_grid(cloud, (3, 7), "range")


def test_range_image_rings_without_returns_keep_their_place(tmp_path):
    # four rings, elevation falling with the ring number (as Ouster numbers them); ring 0
    # (the top) saw nothing: it stays the top row
    elev = np.radians([10.0, 5.0, 0.0, -5.0])
    cols = 6
    az = np.linspace(np.pi, -np.pi, cols, endpoint=False)
    ring = np.repeat(np.arange(4), cols)
    e, a = elev[ring], np.tile(az, 4)
    r = 3.0 + ring
    pts = np.zeros(len(ring), dtype=[("x", "<f4"), ("y", "<f4"), ("z", "<f4"),
                                      ("ring", "<u2")])
    pts["x"], pts["y"], pts["z"] = r * np.cos(e) * np.cos(a), r * np.cos(e) * np.sin(a), \
        r * np.sin(e)
    pts["ring"] = ring
    pts["x"][ring == 0] = np.nan
    grid = plot._range_grid(pts, None, "range")
    assert np.isnan(grid[0]).all()
    np.testing.assert_allclose(grid[1:], np.repeat([[4.0], [5.0], [6.0]], cols, axis=1),
                               rtol=1e-6)
    # numbered the other way (Velodyne drivers: 0 at the bottom), the order follows
    pts["ring"] = 3 - ring
    grid = plot._range_grid(pts, None, "range")
    assert np.isnan(grid[0]).all()
    np.testing.assert_allclose(grid[1:, 0], [4.0, 5.0, 6.0], rtol=1e-6)


def test_imu_series_has_a_panel_per_sub_sensor(outs, tmp_path):
    samples = outs[7]
    assert len(samples) == 10
    fig = plot.imu_figure(samples, dpi=DPI)
    assert [ax.get_ylabel() for ax in fig.axes] == ["acceleration [m/s²]",
                                                    "angular velocity [rad/s]",
                                                    "magnetic field [µT]"]
    line = fig.axes[0].get_lines()[2]            # acceleration z
    np.testing.assert_array_equal(line.get_xdata(), [s.time for s in samples])
    np.testing.assert_allclose(line.get_ydata(), 9.80665, rtol=1e-12)
    path = plot.save_imu(tmp_path / "imu.png", samples)
    assert Image.open(path).size == (1000, 800)
    with pytest.raises(ValueError, match="no IMU samples"):
        plot.imu_figure(outs[5])
