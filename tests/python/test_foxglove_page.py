# SPDX-License-Identifier: MIT
"""The bridge's built-in page in a real browser: headless Chromium (Debian's, driven by
playwright-core, tests/web/page_test.mjs) opens it while a simulation runs. The screenshot
taken before the first step shows no cloud, the one taken after shows the cloud's colours;
the page reports a cloud rate, and the points it drew are the daemon's cloud of that frame.
The page's files come from the bridge's own port (three.js vendored, nothing fetched
elsewhere). Set SENSIM_SCREENSHOT_DIR to keep the screenshots."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import urllib.error
import urllib.request

import numpy as np
from PIL import Image

from sensim.foxglove import Bridge
from foxglove_support import WEB_TESTS, Stepper, build_scene, node


def coloured_pixels(png: pathlib.Path) -> tuple[int, np.ndarray]:
    """Pixels of the drawing area (below the tool bar, above the note) whose colour is
    saturated: the colour ramp's, not the background's, the grid's or the text's greys."""
    rgb = np.asarray(Image.open(png).convert("RGB")).astype(np.int16)
    area = rgb[48:-32]
    sat = area.max(axis=2) - area.min(axis=2) > 80
    return int(sat.sum()), np.argwhere(sat)


def test_page_draws_the_live_cloud_in_chromium(sensimd, tmp_path):
    out = pathlib.Path(os.environ.get("SENSIM_SCREENSHOT_DIR") or tmp_path)
    out.mkdir(parents=True, exist_ok=True)
    with sensimd.client(environment="demo") as c:
        build_scene(c, imu=False)
        with Bridge(port=sensimd.port, environment="demo", listen="127.0.0.1:0",
                    poll_interval=0.2) as bridge:
            bridge.set_frame("sensor_10", "world", ((0.0, 0.0, 1.5), None))
            page = subprocess.Popen([node(), str(WEB_TESTS / "page_test.mjs"), bridge.page_url,
                                     str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    text=True)
            try:
                first = page.stdout.readline().strip()
                assert first == "EMPTY", first + page.stderr.read()
                with Stepper(c) as stepper:     # the simulation starts once the page is open
                    stdout, stderr = page.communicate(timeout=120)
            finally:
                if page.poll() is None:
                    page.kill()
    assert page.returncode == 0, stdout + stderr
    report = json.loads(stdout.strip().splitlines()[-1])
    stats = report["stats"]
    assert report["errors"] == [] and stats["errors"] == []

    # the page's counters: a cloud rate and the frame drawn
    assert stats["cloudRate"] > 0 and float(report["fpsText"]) > 0
    assert stats["topics"] == ["/sensor_10/points"]
    assert stats["frameId"] == "sensor_10" and stats["drawnInWorld"] is True
    truth = stepper.cloud(10, stats["lastSeq"])
    xyz = np.stack([truth["x"], truth["y"], truth["z"]], axis=1)
    drawn = np.isfinite(xyz).all(axis=1) & (xyz != 0).any(axis=1)
    assert stats["points"] == int(drawn.sum()) > 10000

    # the pixels: nothing coloured before the first cloud, a cloud after
    empty, _ = coloured_pixels(out / "empty.png")
    cloud, where = coloured_pixels(out / "cloud.png")
    assert empty == 0
    assert cloud > 3000
    # rings of ground points around the lidar fill much of the view, not one corner
    rows, cols = where[:, 0], where[:, 1]
    assert np.ptp(rows) > 200 and np.ptp(cols) > 400
    if os.environ.get("SENSIM_SCREENSHOT_DIR") is None:
        shutil.copy(out / "cloud.png", tmp_path / "foxglove_page.png")


def get(url: str) -> tuple[int, str, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.headers.get("Content-Type", ""), r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type", ""), e.read()


def test_page_files_come_from_the_bridge(sensimd):
    with sensimd.client(environment="demo"), \
            Bridge(port=sensimd.port, environment="demo", listen="127.0.0.1:0") as bridge:
        base = bridge.page_url
        status, ctype, body = get(base)
        assert status == 200 and ctype.startswith("text/html")
        # the page loads three.js from the bridge, through an import map: nothing external
        html = body.decode()
        assert '"three": "./vendor/three.module.js"' in html
        assert "http://" not in html.replace("http://www.w3.org", "") and "https://" not in html
        for path in ("view.js", "vendor/three.module.js", "vendor/three.core.js",
                     "vendor/OrbitControls.js"):
            status, ctype, body = get(base + path)
            assert status == 200 and ctype.startswith("text/javascript"), path
            assert b"https://" not in body.split(b"*/", 1)[-1] or path != "view.js"
        status, _, body = get(base + "vendor/three.module.js")
        assert b"REVISION" in body or b"three.core.js" in body
        for bad in ("../setup.sh", "vendor/../../bridge.py", "view.js/..", "nothing"):
            assert get(base + bad)[0] == 404, bad
        status, ctype, body = get(base + "stats.json")
        assert status == 200 and ctype == "application/json"
        assert json.loads(body)["daemon"]["environment"] == "demo"
