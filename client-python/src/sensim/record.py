# SPDX-License-Identifier: MIT
"""Recording a running simulation: subscribe to its sensors on an observer connection and
write what arrives into a recording (.srec), a ROS bag, and point-cloud or CSV files.

    from sensim.record import Recorder
    rec = Recorder(port=7700, environment="demo", sensors=[5, 7], recording="run.srec",
                   bag="run.bag", files={"pcd": "clouds/"})
    summary = rec.run(duration=10.0)          # 10 s of simulation time, then stop
    print(summary.text())

``sensors="all"`` records every sensor the environment has when run() starts. This is what
``python -m sensim record`` runs. Start it before the simulation steps (it waits
up to ``wait`` seconds for sensors that do not exist yet; a simulation that must not lose its
first steps calls :func:`wait_for_subscribers` after creating its sensors); it stops after
``duration`` simulated seconds, ``max_records`` records, ``wall`` seconds, when every stream
has ended (its sensor removed), when nothing arrived for ``idle`` seconds after the first
record, when the connection breaks, or on Ctrl-C / SIGTERM (what has arrived is still
written): the files are always closed whole.
"""

from __future__ import annotations

import ctypes
import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional, Sequence, Union

from . import errors
from .client import Client
from .export import CLOUD_FORMATS, CsvWriter, write_cloud
from .outputs import SensorOutput, decode
from .recording import RecordingWriter
from .stream import (DEFAULT_PROBE_IDS, Sensors, describe_sensors, probe_sensors,
                     subscribe_all)

__all__ = ["Recorder", "RecordSummary", "SensorSummary", "FileSink", "wait_for_subscribers",
           "keep_freed_memory"]

PathLike = Union[str, "os.PathLike[str]"]

_DRAIN_SECONDS = 0.5    # s: after a stop, how long frames already on their way are taken


# glibc mallopt parameters (malloc.h)
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3


def keep_freed_memory(largest: int = 32 << 20, keep: int = 256 << 20) -> bool:
    """Make this process's malloc (glibc) reuse the memory of freed large blocks instead of
    giving it back to the kernel at once: blocks up to `largest` bytes come from the heap, and
    up to `keep` bytes freed at its top stay mapped. A recorder allocates and frees several
    buffers of a cloud's size per record (a 12 MB OS1-128 revolution: the protobuf message's
    bytes, the decoded array's, the bag message's); with glibc's defaults each is fresh memory
    from the kernel, zeroed page by page (9,000 page faults a revolution, most of the
    recorder's CPU), taken from the simulation it records on a machine with few cores. What
    stays mapped is at most what the process used at its peak. Returns False where mallopt is
    not glibc's (nothing changed). Process-wide: ``sensim record`` calls it; a program that
    embeds a Recorder may too."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    # the mmap threshold first: setting it also stops glibc adjusting both thresholds itself
    return bool(mallopt(_M_MMAP_THRESHOLD, int(largest)) and
                mallopt(_M_TRIM_THRESHOLD, int(keep)))


def wait_for_subscribers(client: Client, sensors: Sequence[int], timeout: float = 30.0,
                         count: int = 1) -> None:
    """Wait until each of `sensors` of the client's environment has at least `count`
    subscriptions (a recorder started alongside the simulation), so that no step goes
    unrecorded: a subscription takes the records of the steps after it. Raises
    sensim.errors.Timeout after `timeout` seconds naming the sensors still waited for."""
    deadline = time.monotonic() + timeout
    env = client.hello_reply.environment if client.hello_reply is not None else ""
    env = env or client.environment
    while True:
        have: dict[int, int] = {}
        for s in client.get_info().subscribers:
            if s.environment == env and not s.closed_reason:
                have[s.sensor_id] = have.get(s.sensor_id, 0) + 1
        missing = [i for i in sensors if have.get(int(i), 0) < count]
        if not missing:
            return
        if time.monotonic() >= deadline:
            raise errors.Timeout(f"no subscriber for sensors {missing} of environment "
                                 f"{env!r} within {timeout} s")
        time.sleep(0.02)


@dataclass
class SensorSummary:
    """What one sensor's stream delivered: records, points (clouds), the first and last
    record times (s), frames the daemon dropped for this subscription (sequence gaps)."""

    sensor_id: int
    kind: str = ""
    records: int = 0
    points: int = 0
    first_time: float = float("nan")
    last_time: float = float("nan")
    gaps: int = 0
    ended: bool = False
    last_sequence: int = 0


@dataclass
class RecordSummary:
    """The outcome of a recording: records and bytes received, wall seconds, why it stopped,
    the files written, and a SensorSummary per sensor."""

    records: int = 0
    bytes: int = 0
    wall_seconds: float = 0.0
    reason: str = ""
    files: list[str] = field(default_factory=list)
    sensors: dict[int, SensorSummary] = field(default_factory=dict)
    error: Optional[str] = None

    @property
    def sim_seconds(self) -> float:
        """Simulated time covered: the last record's time less the first's."""
        firsts = [s.first_time for s in self.sensors.values() if s.records]
        lasts = [s.last_time for s in self.sensors.values() if s.records]
        return max(lasts) - min(firsts) if firsts else 0.0

    def progress(self) -> str:
        """One line: records, MB, simulated time, drops."""
        gaps = sum(s.gaps for s in self.sensors.values())
        return (f"{self.records} records, {self.bytes / 1e6:.1f} MB, "
                f"{self.sim_seconds:.3f} s simulated in {self.wall_seconds:.1f} s, "
                f"{gaps} dropped")

    def text(self) -> str:
        """A summary for people: one line per sensor, then the files."""
        lines = [f"recorded {self.progress()}; stopped: {self.reason}"]
        if self.error:
            lines.append(f"error: {self.error}")
        for sid in sorted(self.sensors):
            s = self.sensors[sid]
            what = f"{s.points} points" if s.kind == "point_cloud" else s.kind or "no data"
            span = (f"t {s.first_time:.6f} .. {s.last_time:.6f} s" if s.records
                    else "nothing received")
            lines.append(f"  sensor {sid}: {s.records} records ({what}), {span}, "
                         f"{s.gaps} dropped{', ended' if s.ended else ''}")
        for f in self.files:
            lines.append(f"  wrote {f}")
        return "\n".join(lines)


class FileSink:
    """Writes each point cloud as a file of its own in `directory` (format "pcd", "ply" or
    "xyz": sensor<id>_<frame>.<ext>) and, for format "csv", each IMU, encoder, odometer or
    cone sensor's samples into sensor<id>.csv. binary: PCD / PLY binary or ASCII;
    keep_misses: XYZ misses as 0 0 0."""

    def __init__(self, directory: PathLike, fmt: str, *, binary: bool = True,
                 keep_misses: bool = True):
        if fmt not in CLOUD_FORMATS + ("csv",):
            raise ValueError(f"format: {fmt!r}; one of {list(CLOUD_FORMATS) + ['csv']}")
        self.directory = os.fspath(directory)
        os.makedirs(self.directory, exist_ok=True)
        self.fmt = fmt
        self.binary = binary
        self.keep_misses = keep_misses
        self.files: list[str] = []
        self._csv: dict[int, CsvWriter] = {}

    def write(self, out: SensorOutput) -> None:
        if out.kind == "point_cloud" and self.fmt in CLOUD_FORMATS:
            path = os.path.join(self.directory,
                                f"sensor{out.sensor_id}_{out.frame:06d}.{self.fmt}")
            write_cloud(path, out, binary=self.binary, keep_misses=self.keep_misses)
            self.files.append(path)
        elif out.kind in ("imu", "scalar", "cone") and self.fmt == "csv":
            w = self._csv.get(out.sensor_id)
            if w is None:
                w = self._csv[out.sensor_id] = CsvWriter(
                    os.path.join(self.directory, f"sensor{out.sensor_id}.csv"))
                self.files.append(w.path)
            w.write(out)

    def close(self) -> None:
        for w in self._csv.values():
            w.close()
        self._csv.clear()


class Recorder:
    """Subscribes to `sensors` of a running environment and writes what arrives.

    sensors: ids, {id: subscribe keyword arguments}, or "all": every sensor the environment
    has when run() starts, whatever its id, as the daemon's Describe lists them (waiting up
    to `wait` seconds for a first one; sensors created later are not recorded; a daemon
    older than Describe is probed among ids 1..probe_ids instead).
    recording: path of a .srec recording (every record as sent); bag: path of a ROS 1 bag
    (sensim.bag.BagWriter; bag_options: its keyword arguments, e.g. namespaces, frame_ids);
    files: {format: directory} for "pcd", "ply", "xyz" and "csv" (sensim.record.FileSink;
    binary, keep_misses as there). encoding, precision, fields: of the subscriptions.
    Other keywords go to Client (token, timeout, ...)."""

    def __init__(self, host: str = "127.0.0.1", port: int = 7700, *,
                 sensors: Union[Sensors, str],
                 environment: str = "default", recording: Optional[PathLike] = None,
                 bag: Optional[PathLike] = None, bag_options: Optional[Mapping] = None,
                 files: Optional[Mapping[str, PathLike]] = None, binary: bool = True,
                 keep_misses: bool = True, encoding: str = "raw",
                 precision: Optional[float] = None, fields: Sequence[str] = (),
                 wait: float = 10.0, probe_ids: int = DEFAULT_PROBE_IDS, **client_args: Any):
        self.host, self.port, self.environment = host, int(port), environment
        if isinstance(sensors, str) and sensors != "all":
            raise ValueError(f"sensors: expected sensor ids or \"all\", got {sensors!r}")
        self.sensors = sensors
        self.probe_ids = probe_ids
        self.encoding, self.precision, self.fields = encoding, precision, tuple(fields)
        self.wait = wait
        self.client_args: dict[str, Any] = {"role": "observer", **client_args}
        self.recording_path = recording
        self.bag_path = bag
        self.bag_options = dict(bag_options or {})
        self.files = dict(files or {})
        self.binary, self.keep_misses = binary, keep_misses
        self._stop = False

    def _resolve(self, client: Client) -> Sensors:
        """The sensors to record: as given, or for "all" those the daemon's Describe lists
        (probed among ids 1..probe_ids only on a daemon older than Describe), waiting up to
        `wait` seconds for a first one."""
        if not isinstance(self.sensors, str):
            return self.sensors
        deadline = time.monotonic() + max(0.0, self.wait)
        while True:
            listed = describe_sensors(client)
            ids = ([int(s.id) for s in listed] if listed is not None
                   else probe_sensors(client, self.probe_ids))
            if ids:
                return ids
            if time.monotonic() >= deadline:
                where = ("the daemon's Describe lists none" if listed is not None
                         else f"none among ids 1..{self.probe_ids}: the daemon cannot "
                         "describe its environments")
                raise errors.NotFound(f"environment {self.environment!r} has no sensors "
                                      f"({where}; waited {self.wait:g} s)")
            time.sleep(0.1)

    def stop(self) -> None:
        """Ask run() to stop after the record it is handling (from a signal handler or
        another thread)."""
        self._stop = True

    def run(self, *, duration: Optional[float] = None, max_records: Optional[int] = None,
            wall: Optional[float] = None, idle: Optional[float] = 5.0,
            progress: Optional[Callable[[RecordSummary], None]] = None,
            progress_every: float = 0.5) -> RecordSummary:
        """Record until a stop condition (see the module text); returns the summary. Raises
        only when nothing could be set up (connect, subscribe, open files); a connection that
        breaks later ends the recording with summary.reason "connection lost"."""
        summary = RecordSummary()
        # without a recording (which keeps the messages whole), clouds are read in the frames
        # they arrive in: no copy of their points before the files are written
        client_args: dict[str, Any] = {"pushed_in_place": self.recording_path is None,
                                       **self.client_args}
        client = Client(self.host, self.port, environment=self.environment, **client_args)
        sinks: list[Any] = []
        writer = None
        try:
            sensors = self._resolve(client)
            ids = [int(i) for i in (sensors.keys() if isinstance(sensors, Mapping)
                                    else sensors)]
            # every output is open before the first subscription: from then on, all that
            # arrives is written
            if self.recording_path is not None:
                writer = RecordingWriter(self.recording_path, {
                    "host": self.host, "port": self.port, "environment": self.environment,
                    "sensors": sorted(ids), "encoding": self.encoding,
                    "precision": self.precision, "fields": list(self.fields),
                    "server_version": client.server_version,
                    "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")})
                summary.files.append(writer.path)
            if self.bag_path is not None:
                from .bag import BagWriter
                sinks.append(BagWriter(self.bag_path, **self.bag_options))
                summary.files.append(os.fspath(self.bag_path))
            for fmt, directory in self.files.items():
                sinks.append(FileSink(directory, fmt, binary=self.binary,
                                      keep_misses=self.keep_misses))
            ids = subscribe_all(client, sensors, encoding=self.encoding,
                                precision=self.precision, fields=self.fields, wait=self.wait)
            summary.sensors = {i: SensorSummary(i) for i in ids}
            self._loop(client, writer, sinks, summary, duration, max_records, wall, idle,
                       progress, progress_every)
        finally:
            client.close()
            if writer is not None:
                writer.close()
            for sink in sinks:
                sink.close()
                summary.files += getattr(sink, "files", [])
        return summary

    def _loop(self, client: Client, writer: Optional[RecordingWriter], sinks: list,
              summary: RecordSummary, duration: Optional[float], max_records: Optional[int],
              wall: Optional[float], idle: Optional[float],
              progress: Optional[Callable[[RecordSummary], None]],
              progress_every: float) -> None:
        start = last_data = time.monotonic()
        next_progress = start + progress_every
        first_time = None
        stopping = False      # a stop condition met: write what has arrived, wait no more
        # once stopping, frames still arriving (a large cloud the daemon has sent, part of it
        # still on its way through the socket) are finished for up to this long
        drain_until = 0.0
        try:
            while True:
                now = time.monotonic()
                summary.wall_seconds = now - start
                if not stopping:
                    reason = self._stop_reason(summary, now - start, now - last_data, wall,
                                               idle)
                    if reason:
                        summary.reason, stopping = reason, True
                        drain_until = now + _DRAIN_SECONDS
                if progress is not None and now >= next_progress:
                    progress(summary)
                    next_progress = now + progress_every
                if stopping and now >= drain_until:
                    return
                wait = drain_until - now if stopping else 0.1
                # the message itself for a recording, else its decoded form (read in place)
                if writer is None:
                    data, out = None, client.next_sensor_output(timeout=wait)
                else:
                    data = client.next_sensor_data(timeout=wait)
                    out = decode(data) if data is not None and sinks else None
                rec = data if data is not None else out
                if rec is None:
                    if stopping:
                        return
                    continue
                last_data = time.monotonic()
                s = summary.sensors.setdefault(rec.sensor_id, SensorSummary(rec.sensor_id))
                if rec.sequence:
                    # numbered from 1: a first frame above 1 follows drops too
                    if rec.sequence > s.last_sequence + 1:
                        s.gaps += rec.sequence - s.last_sequence - 1
                    s.last_sequence = rec.sequence
                if rec.end_of_stream:
                    s.ended = True
                    continue
                if first_time is None:
                    first_time = rec.time
                if duration is not None and rec.time - first_time > duration + 1e-12:
                    summary.reason = f"{duration} s of simulated time"
                    return
                self._write(data, out, client.last_pushed_bytes, writer, sinks, summary, s)
                if max_records is not None and summary.records >= max_records:
                    summary.reason = f"{max_records} records"
                    return
        except KeyboardInterrupt:
            summary.reason = "interrupted"
        except errors.TransportError as exc:
            if not summary.reason:
                summary.reason = "connection lost"
                summary.error = str(exc)
        finally:
            summary.wall_seconds = time.monotonic() - start

    def _stop_reason(self, summary: RecordSummary, elapsed: float, quiet: float,
                     wall: Optional[float], idle: Optional[float]) -> str:
        """Why the recording should stop now ("" to go on)."""
        if self._stop:
            return "stopped"
        if wall is not None and elapsed >= wall:
            return f"{wall} s of wall time"
        if idle is not None and summary.records and quiet >= idle:
            return f"nothing received for {idle} s"
        if summary.sensors and all(s.ended for s in summary.sensors.values()):
            return "every stream ended"
        return ""

    @staticmethod
    def _write(data: Any, out: Optional[SensorOutput], size: int,
               writer: Optional[RecordingWriter], sinks: list, summary: RecordSummary,
               s: SensorSummary) -> None:
        """Write one record everywhere and count it: data, the SensorData message (with a
        recording), out, its decoded form (with files to write); size, its frame's bytes."""
        if writer is not None:
            writer.write(data)
        for sink in sinks:
            sink.write(out)
        summary.records += 1
        summary.bytes += size
        if data is not None:
            kind, t = data.WhichOneof("payload") or "", data.time
            points = data.point_cloud.count if kind == "point_cloud" else 0
        else:
            assert out is not None
            kind, t = out.kind, out.time
            points = len(out.value) if kind == "point_cloud" else 0
        s.kind = kind or s.kind
        s.records += 1
        s.points += points
        if s.records == 1:
            s.first_time = t
        s.last_time = t
