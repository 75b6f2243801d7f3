# SPDX-License-Identifier: MIT
"""The command line, ``python -m sensim`` (``sensim`` once installed):

    sensim info --sensors                 environments (their sensor ids), subscribers, counters
    sensim ping -n 100                    round-trip statistics
    sensim record -s 5 -s 7 -o run.srec --bag run.bag --pcd clouds/ --duration 10
    sensim record --bag run.bag --duration 10      every sensor of the environment
    sensim export run.srec --format pcd -o clouds/
    sensim plot run.srec -o pictures/       (or a ROS 1 bag: sensim plot run.bag -o pictures/)
    sensim foxglove --environment demo    the Foxglove bridge (sensim.foxglove), same options

Every command takes --host, --port, --token (or $SENSIM_HOST, $SENSIM_PORT, $SENSIM_TOKEN)
where it talks to a daemon. Exit status: 0 done, 1 an error (its message on stderr), 2 a usage
error.
"""

from __future__ import annotations

import argparse
import array
import contextlib
import json
import math
import os
import signal
import statistics
import sys
import time
from typing import Any, Iterator, Optional, Sequence

import numpy as np

from . import __version__, errors
from ._proto import pb
from .client import Client
from .stream import DEFAULT_PROBE_IDS

__all__ = ["main"]


def _client(args: argparse.Namespace, **kw: Any) -> Client:
    return Client(args.host, args.port, environment=args.environment, token=args.token,
                  timeout=args.timeout, client_name="sensim-cli", **kw)


# ---------------------------------------------------------------- info

def _counters(c: Any) -> dict:
    return {f.name: v for f, v in c.ListFields()}


def _sensor_ids(args: argparse.Namespace, info: Any) -> dict[str, Any]:
    """Each environment's sensor ids (a list), or the reason they could not be found (str),
    from an observer joining it and asking Describe (a daemon older than Describe: probed
    among ids 1..--probe-ids)."""
    from .stream import find_sensors
    out: dict[str, Any] = {}
    for e in info.environments:
        try:
            with Client(args.host, args.port, environment=e.name, token=args.token,
                        timeout=args.timeout, client_name="sensim-cli", role="observer") as c:
                out[e.name] = find_sensors(c, args.probe_ids)
        except errors.TransportError:
            raise                           # the daemon went away: an error of the command
        except errors.SensimError as exc:   # e.g. the environment went away meanwhile
            out[e.name] = str(exc)
    return out


def cmd_info(args: argparse.Namespace) -> int:
    with _client(args, role="observer") as c:
        info = c.get_info()
    ids = _sensor_ids(args, info) if args.sensors else {}
    if args.json:
        from google.protobuf import json_format
        d = json_format.MessageToDict(info, preserving_proto_field_name=True)
        for e in d.get("environments", []):
            if e.get("name", "") in ids:
                e["sensor_ids"] = ids[e.get("name", "")]
        print(json.dumps(d, indent=2, sort_keys=True))
        return 0
    print(f"sensimd {info.server_version} (protocol {info.protocol_version}) at "
          f"{args.host}:{args.port}: up {info.uptime_s:.1f} s, {info.connections} "
          f"connections, {info.threads} threads")
    print(f"environments ({len(info.environments)}):")
    for e in info.environments:
        t = f"t = {e.time:.6f} s" if e.HasField("time") else "no state yet"
        print(f"  {e.name}: {e.clients} clients, {e.sensors} sensors, {e.bodies} bodies, "
              f"{e.objects} objects, {e.geometries} geometries, {e.joints} joints; "
              f"{e.steps} steps, {t}")
        if e.name in ids:
            found = ids[e.name]
            print("    sensor ids: " + (", ".join(map(str, found)) if isinstance(found, list)
                                        and found else found or "none"))
    print(f"subscribers ({len(info.subscribers)}):")
    for s in info.subscribers:
        name = pb.Encoding.Name(s.encoding).replace("ENCODING_", "").lower()
        closed = f", closed: {s.closed_reason}" if s.closed_reason else ""
        print(f"  session {s.session_id} ({s.peer}) {s.environment}/sensor {s.sensor_id} "
              f"{name}: sent {s.frames_sent} frames ({s.bytes_sent} B), dropped "
              f"{s.frames_dropped}, queued {s.queued_frames}{closed}")
    print("counters:")
    for name, value in _counters(info.counters).items():
        print(f"  {name} = {value}")
    return 0


# ---------------------------------------------------------------- ping

def cmd_ping(args: argparse.Namespace) -> int:
    rtts = []
    with _client(args, role="observer") as c:
        # a Ping's frame: the payload and a few bytes of envelope, within the daemon's limit
        limit = c.limits.max_frame_bytes if c.limits is not None else 0
        if limit and args.size > limit - 64:
            raise SystemExit(f"ping: --size {args.size} does not fit in the daemon's frames "
                             f"(max_frame_bytes {limit}, less 64 bytes of envelope)")
        payload = bytes(args.size)
        for i in range(args.count):
            t0 = time.perf_counter()
            pong = c.ping(payload)
            rtts.append((time.perf_counter() - t0) * 1e6)
            if pong.payload != payload:
                raise errors.ProtocolError("ping: the payload came back changed")
            if args.interval:
                time.sleep(args.interval)
    rtts.sort()
    p99 = rtts[min(len(rtts) - 1, int(0.99 * len(rtts)))]
    print(f"{len(rtts)} pings of {args.size} B to {args.host}:{args.port}: round trip "
          f"min {rtts[0]:.1f} median {statistics.median(rtts):.1f} "
          f"mean {statistics.fmean(rtts):.1f} p99 {p99:.1f} max {rtts[-1]:.1f} us")
    return 0


# ---------------------------------------------------------------- record

def port_arg(text: str) -> int:
    """--port (and $SENSIM_PORT): an integer in 1..65535 (an argparse type, also of the
    Foxglove bridge's command line)."""
    try:
        port = int(text)
    except ValueError:
        port = 0
    if not 0 < port < 65536:
        raise argparse.ArgumentTypeError(f"expected a TCP port 1..65535 (from --port or "
                                         f"$SENSIM_PORT), got {text!r}")
    return port


def _sensor_id(text: str) -> int:
    """-s/--sensor: a sensor id, an integer in [0, 2^32)."""
    try:
        sid = int(text)
    except ValueError:
        sid = -1
    if not 0 <= sid < 1 << 32:
        raise argparse.ArgumentTypeError(f"expected a sensor id in [0, 2^32), got {text!r}")
    return sid


# Numeric options of every command and what they accept: (option, lowest, lowest allowed
# itself, highest). NaN and infinities are refused everywhere.
_RANGES = {
    "timeout": ("--timeout", 0.0, False, 1e9),
    "count": ("--count", 1, True, 1 << 31),
    "size": ("--size", 0, True, 1 << 31),
    "interval": ("--interval", 0.0, True, 1e9),
    "probe_ids": ("--probe-ids", 1, True, 1 << 32),
    "time_offset": ("--time-offset", 0.0, True, float(1 << 32)),
    "precision": ("--precision", 0.0, False, 1e9),
    "duration": ("--duration", 0.0, True, 1e18),
    "max_records": ("--max-records", 1, True, 1 << 62),
    "wall": ("--wall", 0.0, True, 1e18),
    "idle": ("--idle", 0.0, True, 1e18),
    "wait": ("--wait", 0.0, True, 1e9),
}


def _check_ranges(args: argparse.Namespace) -> None:
    """Refuse (SystemExit, exit status 1) a numeric option out of its range, naming it,
    before anything is connected to or written."""
    for attr, (option, low, low_ok, high) in _RANGES.items():
        value = getattr(args, attr, None)
        if value is None:
            continue
        if not math.isfinite(value) or value < low or (value == low and not low_ok) \
                or value > high:
            bound = f"at least {low}" if low_ok else f"more than {low}"
            top = f"{high:g}" if isinstance(high, float) else str(high)
            raise SystemExit(f"{args.command}: {option} must be {bound} and at most {top}, "
                             f"got {value}")


def _pairs(items: Sequence[str], what: str) -> dict[int, str]:
    out = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key.strip().isdigit():
            raise SystemExit(f"{what}: expected SENSOR_ID=VALUE, got {item!r}")
        out[int(key)] = value
    return out


def cmd_record(args: argparse.Namespace) -> int:
    from .record import Recorder, keep_freed_memory

    files = {fmt: getattr(args, fmt) for fmt in ("pcd", "ply", "xyz", "csv")
             if getattr(args, fmt)}
    if not (args.output or args.bag or files):
        raise SystemExit("record: nothing to write: give -o FILE.srec, --bag, --pcd, --ply, "
                         "--xyz or --csv")
    rec = Recorder(args.host, args.port, sensors=args.sensor or "all",
                   probe_ids=args.probe_ids, environment=args.environment,
                   token=args.token, timeout=args.timeout, client_name="sensim-record",
                   recording=args.output, bag=args.bag,
                   bag_options={"namespaces": _pairs(args.namespace, "--namespace"),
                                "frame_ids": _pairs(args.frame_id, "--frame-id"),
                                "time_offset": args.time_offset},
                   files=files, binary=not args.ascii, keep_misses=not args.drop_misses,
                   encoding=args.encoding, precision=args.precision, wait=args.wait)
    if not args.sensor and not args.quiet:
        print(f"record: every sensor of environment {args.environment!r} (as the daemon "
              "describes it)", file=sys.stderr)
    keep_freed_memory()     # buffers of a cloud's size, used again rather than mapped anew
    signal.signal(signal.SIGTERM, lambda *_: rec.stop())
    tty = sys.stderr.isatty()

    def show(summary: Any) -> None:
        line = "recording: " + summary.progress()
        sys.stderr.write(("\r" + line + "\x1b[K") if tty else line + "\n")
        sys.stderr.flush()

    summary = rec.run(duration=args.duration, max_records=args.max_records, wall=args.wall,
                      idle=args.idle or None, progress=None if args.quiet else show,
                      progress_every=0.5 if tty else 5.0)
    if tty and not args.quiet:
        sys.stderr.write("\n")
    print(summary.text())
    if summary.error:
        # the daemon went away (or the connection broke): what arrived is written, whole,
        # but the recording ends where the daemon did, not where the run did
        print(f"sensim record: the connection to the daemon broke: {summary.error}",
              file=sys.stderr)
        return 1
    return 0


# ---------------------------------------------------------------- export and plot

def _read(path: str, sensors: Optional[Sequence[int]]) -> Any:
    """A recording (.srec) or a ROS 1 bag (told apart by their first bytes) and its records."""
    with open(path, "rb") as f:
        head = f.read(13)
    if head == b"#ROSBAG V2.0\n":
        from .bag import read_bag
        rec: Any = read_bag(path)
        if rec.sensors:
            print("bag topics: " + ", ".join(f"{t} -> sensor {i}"
                                             for t, i in rec.sensors.items()), file=sys.stderr)
    else:
        from .recording import open_recording
        rec = open_recording(path)
    return rec, rec.outputs(set(sensors) if sensors else None)


def cmd_export(args: argparse.Namespace) -> int:
    from .record import FileSink

    rec, outs = _read(args.recording, args.sensor)
    sink = FileSink(args.output, args.format, binary=not args.ascii,
                    keep_misses=not args.drop_misses)
    n = 0
    try:
        for out in outs:
            with _naming(args.recording, out):
                sink.write(out)
            n += 1
    finally:
        sink.close()
    for f in sink.files:
        print(f)
    print(f"exported {len(sink.files)} files from {n} records of {args.recording}"
          + (" (the recording ends in a cut record)" if rec.truncated else ""),
          file=sys.stderr)
    if not sink.files:
        print(f"export: no {args.format} output in {args.recording} (point clouds go to "
              "pcd, ply, xyz; IMU, encoder, odometer and cone samples to csv)",
              file=sys.stderr)
        return 1
    return 0


def cmd_plot(args: argparse.Namespace) -> int:
    rec, outs = _read(args.recording, args.sensor)
    os.makedirs(args.output, exist_ok=True)
    clouds: dict[int, Any] = {}             # the cloud to draw of each lidar (not --all)
    pictures: dict[int, list[str]] = {}     # with --all: each lidar's pictures so far
    imus: dict[int, _ImuSeries] = {}
    for out in outs:
        if out.kind == "point_cloud":
            if args.all:
                # drawn as it comes: a long recording's clouds are never all in memory
                with _naming(args.recording, out):
                    pictures.setdefault(out.sensor_id, []).extend(_plot_cloud(args, out))
                continue
            kept = clouds.get(out.sensor_id)
            if kept is None or out.meta.complete or not kept.meta.complete:
                clouds[out.sensor_id] = out
        elif out.kind == "imu":
            series = imus.get(out.sensor_id)
            if series is None:
                series = imus[out.sensor_id] = _ImuSeries(out)
            series.add(out)
    for sid, out in clouds.items():
        with _naming(args.recording, out):
            pictures[sid] = _plot_cloud(args, out)
    written = [f for sid in sorted(pictures) for f in pictures[sid]]
    for sid, series in sorted(imus.items()):
        with _naming(args.recording, series.first):
            written.append(series.save(os.path.join(args.output, f"sensor{sid}_imu.png")))
    for f in written:
        print(f)
    if not written:
        print(f"plot: nothing to plot in {args.recording}", file=sys.stderr)
        return 1
    return 0


def _plot_cloud(args: argparse.Namespace, out: Any) -> list[str]:
    """The pictures of one cloud record (its views); returns their paths."""
    from . import plot

    written = []
    sid = out.sensor_id
    stem = os.path.join(args.output, f"sensor{sid}_{out.frame:06d}")
    names = out.value.dtype.names or ()
    colour = args.colour
    if colour in ("intensity", "ring") and colour not in names:
        colour = "height"
    for view in args.view:
        if view == "range":
            if out.meta.organised or "ring" in names:
                written.append(plot.save_range_image(
                    f"{stem}_range.png", out.value,
                    out.meta.shape if out.meta.organised else None))
            continue
        written.append(plot.save_cloud(
            f"{stem}_{view}.png", out.value, view=view, colour=colour,
            title=f"sensor {sid}, frame {out.frame}, t = {out.time:.3f} s"))
    return written


class _ImuSeries:
    """One IMU's samples as packed doubles, 80 bytes a sample where a decoded record takes
    about 800: a long recording's IMU is drawn without keeping its records."""

    _NAMES = ("acceleration", "angular_velocity", "magnetic_field")

    def __init__(self, first: Any):
        self.first = first
        self.time = array.array("d")
        self.values = {name: array.array("d") for name in self._NAMES}
        self.complete = dict.fromkeys(self._NAMES, True)   # present in every sample

    def add(self, out: Any) -> None:
        self.time.append(out.time)
        for name, values in self.values.items():
            v = getattr(out.value, name)
            if v is None or not self.complete[name]:
                if self.complete[name]:
                    self.complete[name] = False
                    del values[:]
                continue
            values.extend(v.tolist())

    def save(self, path: str) -> str:
        from . import plot
        acc, gyro, mag = (np.frombuffer(self.values[name], dtype=np.float64)
                          if self.complete[name] else None for name in self._NAMES)
        fig = plot.imu_series_figure(np.frombuffer(self.time, dtype=np.float64), acc, gyro,
                                     mag, sensor_id=self.first.sensor_id)
        fig.savefig(path, format="png")
        return path


@contextlib.contextmanager
def _naming(path: str, out: Any) -> Iterator[None]:
    """Turns a ValueError about one record's contents into one naming the file and the
    record (sensor, frame, time)."""
    try:
        yield
    except ValueError as exc:
        raise ValueError(f"{path}: sensor {out.sensor_id}, frame {out.frame}, t = "
                         f"{out.time:.6f} s: {exc}") from None


# ---------------------------------------------------------------- parser

def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="sensim", description="Tools for sensimd, the sensor "
                                "simulation daemon: inspect it, record its sensors, turn "
                                "recordings into files and pictures.")
    p.add_argument("--version", action="version", version=f"sensim {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def daemon_args(q: argparse.ArgumentParser) -> None:
        q.add_argument("--host", default=os.environ.get("SENSIM_HOST", "127.0.0.1"))
        # a string default goes through the type too: a bad $SENSIM_PORT is a usage error
        q.add_argument("--port", type=port_arg, default=os.environ.get("SENSIM_PORT", "7700"),
                       help="the daemon's port, 1..65535 (default $SENSIM_PORT or 7700)")
        q.add_argument("--token", default=os.environ.get("SENSIM_TOKEN"))
        q.add_argument("-e", "--environment", default="default",
                       help="environment to join (default: default)")
        q.add_argument("--timeout", type=float, default=10.0,
                       help="seconds to wait for a reply (default 10)")

    q = sub.add_parser("info", help="the daemon's environments, subscribers and counters")
    daemon_args(q)
    q.add_argument("--json", action="store_true", help="the whole Info message as JSON")
    q.add_argument("--sensors", action="store_true",
                   help="also list each environment's sensor ids (as its Describe lists "
                   "them)")
    q.add_argument("--probe-ids", type=int, default=DEFAULT_PROBE_IDS, metavar="N",
                   help="with --sensors, against a daemon too old to describe its "
                   f"environments: look for sensors among ids 1..N (default "
                   f"{DEFAULT_PROBE_IDS})")
    q.set_defaults(run=cmd_info)

    q = sub.add_parser("ping", help="round-trip time statistics")
    daemon_args(q)
    q.add_argument("-n", "--count", type=int, default=100)
    q.add_argument("--size", type=int, default=0, help="payload bytes")
    q.add_argument("--interval", type=float, default=0.0, help="seconds between pings")
    q.set_defaults(run=cmd_ping)

    q = sub.add_parser("record", help="subscribe to sensors and write a recording, a ROS bag "
                       "or files")
    daemon_args(q)
    q.add_argument("-s", "--sensor", type=_sensor_id, action="append",
                   help="sensor id to record (repeat for several; default: every sensor the "
                   "environment has when recording starts, as its Describe lists them)")
    q.add_argument("--probe-ids", type=int, default=DEFAULT_PROBE_IDS, metavar="N",
                   help="without --sensor, against a daemon too old to describe its "
                   f"environments: look for sensors among ids 1..N (default "
                   f"{DEFAULT_PROBE_IDS})")
    q.add_argument("-o", "--output", help="sensim recording (.srec) of every record")
    q.add_argument("--bag", help="ROS 1 bag to write (PointCloud2, Imu, ...)")
    for fmt, what in (("pcd", "PCD file per cloud"), ("ply", "PLY file per cloud"),
                      ("xyz", "XYZ file per cloud"), ("csv", "CSV file per sample sensor")):
        q.add_argument(f"--{fmt}", metavar="DIR", help=f"directory for a {what}")
    q.add_argument("--ascii", action="store_true", help="PCD and PLY as text")
    q.add_argument("--drop-misses", action="store_true",
                   help="XYZ: leave misses out (default: 0 0 0 lines)")
    q.add_argument("--namespace", action="append", metavar="ID=NS",
                   help="bag topic namespace of a sensor (default /sensim/sensor_ID)")
    q.add_argument("--frame-id", action="append", metavar="ID=FRAME",
                   help="bag frame id of a sensor (default sensor_ID)")
    q.add_argument("--time-offset", type=float, default=0.0,
                   help="seconds added to bag times (default 0)")
    q.add_argument("--encoding", default="raw", choices=("raw", "zstd", "quantized_zstd"))
    q.add_argument("--precision", type=float, help="m, for quantized_zstd")
    q.add_argument("--duration", type=float, help="stop after this much simulated time, s")
    q.add_argument("--max-records", type=int, help="stop after this many records")
    q.add_argument("--wall", type=float, help="stop after this many wall seconds")
    q.add_argument("--idle", type=float, default=5.0,
                   help="stop when nothing arrived for this long, s (0: never; default 5)")
    q.add_argument("--wait", type=float, default=10.0,
                   help="seconds to wait for sensors that do not exist yet (default 10)")
    q.add_argument("-q", "--quiet", action="store_true", help="no progress line")
    q.set_defaults(run=cmd_record)

    q = sub.add_parser("export", help="a recording or a bag to PCD, PLY, XYZ or CSV files")
    q.add_argument("recording", help="a .srec file written by record, or a ROS 1 bag "
                   "(its PointCloud2 and Imu topics)")
    q.add_argument("-f", "--format", required=True, choices=("pcd", "ply", "xyz", "csv"))
    q.add_argument("-o", "--output", required=True, metavar="DIR")
    q.add_argument("-s", "--sensor", type=_sensor_id, action="append",
                   help="only these sensors")
    q.add_argument("--ascii", action="store_true", help="PCD and PLY as text")
    q.add_argument("--drop-misses", action="store_true", help="XYZ: leave misses out")
    q.set_defaults(run=cmd_export)

    q = sub.add_parser("plot", help="a recording or a bag to PNG pictures")
    q.add_argument("recording", help="a .srec file written by record, or a ROS 1 bag "
                   "(its PointCloud2 and Imu topics)")
    q.add_argument("-o", "--output", required=True, metavar="DIR")
    q.add_argument("-s", "--sensor", type=_sensor_id, action="append",
                   help="only these sensors")
    q.add_argument("--view", action="append", choices=("top", "side", "front", "range"),
                   help="views of each cloud (repeat; default top, side and range)")
    q.add_argument("--colour", "--color", default="height",
                   choices=("height", "intensity", "ring", "range", "none"))
    q.add_argument("--all", action="store_true",
                   help="every cloud (default: the last complete one of each lidar)")
    q.set_defaults(run=cmd_plot)

    # Listed here for --help only: main() hands everything after the word to the bridge's own
    # command line (sensim.foxglove.cli), which needs the optional websockets package.
    sub.add_parser("foxglove", add_help=False,
                   help="serve the daemon to Foxglove and to a 3D web page (python -m sensim "
                   "foxglove --help)")
    return p


def _foxglove(argv: Sequence[str]) -> int:
    """``sensim foxglove ...``: the bridge's command line with the same options as
    ``python -m sensim.foxglove``."""
    try:
        from .foxglove import cli as foxglove_cli
    except ImportError as exc:
        print(f"sensim foxglove: the bridge needs the websockets package ({exc}); install "
              "python3-websockets or pip install './client-python[foxglove]'", file=sys.stderr)
        return 1
    return foxglove_cli.main(argv, prog="sensim foxglove")


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["foxglove"]:
        return _foxglove(argv[1:])
    args = parser().parse_args(argv)
    _check_ranges(args)
    if getattr(args, "view", None) is None and args.command == "plot":
        args.view = ["top", "side", "range"]
    try:
        return int(args.run(args) or 0)
    except errors.SensimError as exc:
        print(f"sensim {args.command}: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        # the reader of our output went away (`sensim info | head`): not an error of ours
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except (OSError, ValueError) as exc:
        print(f"sensim {args.command}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
