# SPDX-License-Identifier: MIT
"""The MuJoCo demo: sensim-mujoco drives the vehicle of client-c/mujoco/scenes/vehicle.xml
for a few simulated seconds while this script, a second client of the same environment,
records the roof's Velodyne VLP-16 and Ouster OS1-64 and the IMU; then it writes pictures
(PNG) and the clouds (PCD) and prints one summary line.

    .venv/bin/python client-python/examples/mujoco_demo.py --port 7700 \\
        --bridge build/client-c/sensim-mujoco --out build/demo

Writes, in --out: birdseye.png (one VLP-16 revolution in the world seen from above, coloured
by height, with the vehicle's path), ouster_range.png (the range and intensity images of one
OS1-64 revolution), imu.png (the IMU's specific force and angular rate), vlp16.pcd and
os1.pcd (those revolutions, x y z intensity), path.csv (the vehicle's pose at every step).
"""

from __future__ import annotations

import argparse
import pathlib
import queue
import re
import subprocess
import sys
import threading
import time

import numpy as np

import sensim

REPO = pathlib.Path(__file__).resolve().parents[2]
SENSORS = ("vlp16", "os1", "imu")       # the scene's sensors this script records


def start_bridge(args: argparse.Namespace, out: pathlib.Path) -> tuple:
    """Start sensim-mujoco; it waits for our three subscriptions before it steps. Returns the
    process and a queue of its output lines (None at the end)."""
    cmd = [str(args.bridge), str(args.scene), "--host", args.host, "--port", str(args.port),
           "--environment", args.environment, "--seconds", str(args.seconds),
           "--wait-subscribers", str(len(SENSORS)), "--trace", f"car:{out / 'path.csv'}"]
    if args.map:
        cmd += ["--map", str(args.map)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: queue.Queue = queue.Queue()

    def pump() -> None:
        for line in proc.stdout:
            lines.put(line.rstrip("\n"))
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    return proc, lines


def sensor_ids(proc: subprocess.Popen, lines: queue.Queue, log: list) -> dict:
    """The ids the bridge gave the scene's sensors, from its "sensor ID NAME" lines."""
    ids: dict = {}
    deadline = time.monotonic() + 60
    while not all(name in ids for name in SENSORS):
        try:
            line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            line = None
        if line is None:
            proc.kill()
            raise SystemExit(f"mujoco_demo: sensim-mujoco did not announce its sensors:\n"
                             + "\n".join(log) + proc.stderr.read())
        log.append(line)
        m = re.match(r"sensim-mujoco: sensor (\d+) (\S+)$", line)
        if m:
            ids[m.group(2)] = int(m.group(1))
    return ids


def record(c: sensim.Client, ids: dict, proc: subprocess.Popen) -> dict:
    """Subscribe and gather until every stream has ended (the bridge removes its sensors at
    the end). Keeps the last complete revolution of each lidar, its points per revolution,
    and every IMU sample."""
    by_id = {v: k for k, v in ids.items()}
    for name in SENSORS:
        c.subscribe(ids[name])
    rec = {"vlp16": None, "os1": None, "revolutions": {"vlp16": [], "os1": []}, "imu": []}
    ended: set = set()
    quiet = 0
    while len(ended) < len(SENSORS):
        d = c.next_sensor_data(timeout=1.0)
        if d is None:
            quiet += 1
            if proc.poll() is not None and (proc.returncode != 0 or quiet > 5):
                break               # the bridge is gone: no end of stream will come
            continue
        quiet = 0
        name = by_id.get(d.sensor_id)
        if d.end_of_stream:
            ended.add(name)
        elif name == "imu":
            a, w = d.imu.acceleration, d.imu.angular_velocity
            rec["imu"].append((d.time, a.x, a.y, a.z, w.x, w.y, w.z))
        elif name in ("vlp16", "os1") and d.point_cloud.complete:
            pts = sensim.point_cloud_to_numpy(d.point_cloud)
            rec[name] = (d.time, pts)
            rec["revolutions"][name].append(int(np.isfinite(pts["x"]).sum()))
    return rec


def write_pcd(path: pathlib.Path, pts: np.ndarray) -> int:
    """A binary PCD (x y z intensity, float32) of the points with a return."""
    ok = np.isfinite(pts["x"])
    xyzi = np.stack([pts[f][ok] for f in ("x", "y", "z", "intensity")], axis=1)
    xyzi = np.ascontiguousarray(xyzi, dtype="<f4")
    head = (f"# .PCD v0.7 - Point Cloud Data file format\nVERSION 0.7\nFIELDS x y z intensity\n"
            f"SIZE 4 4 4 4\nTYPE F F F F\nCOUNT 1 1 1 1\nWIDTH {len(xyzi)}\nHEIGHT 1\n"
            f"VIEWPOINT 0 0 0 1 0 0 0\nPOINTS {len(xyzi)}\nDATA binary\n")
    path.write_bytes(head.encode() + xyzi.tobytes())
    return len(xyzi)


def pictures(out: pathlib.Path, rec: dict, path: np.ndarray) -> list:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []

    # bird's-eye view: one VLP-16 revolution in the world frame, by height, and the path
    t, pts = rec["vlp16"]
    ok = np.isfinite(pts["x"])
    fig, ax = plt.subplots(figsize=(7.2, 6.4), dpi=100)
    sc = ax.scatter(pts["x"][ok], pts["y"][ok], c=pts["z"][ok], s=1.0, cmap="viridis",
                    vmin=-0.2, vmax=2.0, linewidths=0)
    ax.plot(path[:, 1], path[:, 2], color="crimson", lw=1.6, label="vehicle path")
    k = int(np.argmin(np.abs(path[:, 0] - t)))
    ax.plot(path[k, 1], path[k, 2], "o", color="crimson", ms=7, label=f"vehicle at {t:.1f} s")
    ax.set_aspect("equal")
    ax.set_xlim(-21, 21)
    ax.set_ylim(-21, 21)
    ax.set_xlabel("x (m)")
    ax.set_ylabel("y (m)")
    ax.set_title(f"VLP-16, one revolution ({ok.sum():,} points), seen from above")
    ax.legend(loc="lower left", fontsize=8)
    fig.colorbar(sc, ax=ax, label="height z (m)", shrink=0.8)
    fig.tight_layout()
    fig.savefig(out / "birdseye.png")
    plt.close(fig)
    written.append(out / "birdseye.png")

    # the Ouster's range and intensity images: rows are its beams (0 at the top), columns its
    # firing instants within the revolution (time_offset at 10 Hz x 1024 columns)
    t, pts = rec["os1"]
    rows = pts["ring"].astype(int)
    cols = np.rint(pts["time_offset"] * 10.0 * 1024).astype(int) % 1024
    rng = np.full((64, 1024), np.nan)
    inten = np.full((64, 1024), np.nan)
    rng[rows, cols] = pts["distance"]
    inten[rows, cols] = pts["intensity"]
    fig, (a1, a2) = plt.subplots(2, 1, figsize=(11, 4.4), dpi=100)
    im = a1.imshow(rng, aspect="auto", cmap="turbo", vmin=0, vmax=25, interpolation="nearest")
    a1.set_title(f"OS1-64 range image at {t:.1f} s (black: no return)")
    a1.set_ylabel("beam")
    a1.set_facecolor("black")
    fig.colorbar(im, ax=a1, label="range (m)")
    im = a2.imshow(np.log10(inten + 1e-4), aspect="auto", cmap="gray", vmin=-3, vmax=-0.5,
                   interpolation="nearest")
    a2.set_title("intensity (log10, 1/sr)")
    a2.set_ylabel("beam")
    a2.set_xlabel("column (the spin is clockwise from the back of the unit)")
    a2.set_facecolor("black")
    fig.colorbar(im, ax=a2, label="log10 I")
    fig.tight_layout()
    fig.savefig(out / "ouster_range.png")
    plt.close(fig)
    written.append(out / "ouster_range.png")

    # the IMU
    imu = np.array(rec["imu"])
    fig, (a1, a2) = plt.subplots(2, 1, figsize=(9, 5.5), dpi=100, sharex=True)
    for i, axis in enumerate("xyz"):
        a1.plot(imu[:, 0], imu[:, 1 + i], lw=0.8, label=axis)
        a2.plot(imu[:, 0], imu[:, 4 + i], lw=0.8, label=axis)
    a1.set_ylabel("specific force (m/s²)")
    a1.set_title("IMU at the chassis centre (sensor axes: x forward, y left, z up)")
    a1.legend(loc="upper right", ncol=3, fontsize=8)
    a2.set_ylabel("angular rate (rad/s)")
    a2.set_xlabel("simulated time (s)")
    a2.legend(loc="upper right", ncol=3, fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "imu.png")
    plt.close(fig)
    written.append(out / "imu.png")
    return written


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=7700)
    ap.add_argument("--bridge", type=pathlib.Path,
                    default=REPO / "build" / "client-c" / "sensim-mujoco")
    ap.add_argument("--scene", type=pathlib.Path,
                    default=REPO / "client-c" / "mujoco" / "scenes" / "vehicle.xml")
    ap.add_argument("--seconds", type=float, default=4.0, help="simulated seconds (4)")
    ap.add_argument("--environment", default="vehicle")
    ap.add_argument("--map", type=pathlib.Path, help="a side file of sensim.* specs for the "
                    "bridge (docs/mujoco.md)")
    ap.add_argument("--out", type=pathlib.Path, default=REPO / "build" / "demo")
    args = ap.parse_args()
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)

    log: list = []
    proc, lines = start_bridge(args, out)
    try:
        ids = sensor_ids(proc, lines, log)
        with sensim.Client(args.host, args.port, environment=args.environment,
                           role="observer", client_name="mujoco_demo.py", timeout=60) as c:
            rec = record(c, ids, proc)
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    while (line := lines.get()) is not None:
        log.append(line)
    print("\n".join(log))
    if proc.returncode != 0 or rec["vlp16"] is None or rec["os1"] is None or not rec["imu"]:
        sys.stderr.write(proc.stderr.read())
        print(f"mujoco_demo: the bridge exited with {proc.returncode}; recorded "
              f"{len(rec['revolutions']['vlp16'])} VLP-16 and {len(rec['revolutions']['os1'])}"
              f" OS1-64 revolutions, {len(rec['imu'])} IMU samples", file=sys.stderr)
        return 1
    stats = dict(re.findall(r"(\w+)=([\d.]+)", log[-1]))

    # files
    path = np.loadtxt(out / "path.csv", delimiter=",", skiprows=1, ndmin=2)
    written = pictures(out, rec, path)
    n_vlp = write_pcd(out / "vlp16.pcd", rec["vlp16"][1])
    n_os1 = write_pcd(out / "os1.pcd", rec["os1"][1])
    written += [out / "vlp16.pcd", out / "os1.pcd", out / "path.csv"]
    for f in written:
        print(f"wrote {f}")
    imu = np.array(rec["imu"])
    print(f"summary: VLP-16 {np.mean(rec['revolutions']['vlp16']):,.0f} points per revolution "
          f"({len(rec['revolutions']['vlp16'])} revolutions), OS1-64 "
          f"{np.mean(rec['revolutions']['os1']):,.0f} of 65,536; IMU {len(imu)} samples, mean "
          f"specific force z {imu[:, 3].mean():.2f} m/s^2; "
          f"{float(stats['physics_steps_per_s']):,.0f} physics steps per second, real-time "
          f"factor {float(stats['realtime_factor']):.2f} ({float(stats['sim_s']):.1f} simulated "
          f"s in {float(stats['wall_s']):.1f} s); last clouds {n_vlp:,} + {n_os1:,} points")
    return 0


if __name__ == "__main__":
    sys.exit(main())
