# SPDX-License-Identifier: MIT
"""Subscriptions as iterators and callbacks, read and decoded off the caller's thread.

A :class:`Subscription` opens a connection of its own (an observer by default), subscribes to
the sensors asked for, and reads and decodes their pushed frames on a background thread::

    with sensim.Subscription(port=7700, sensors=[5, 7], environment="demo") as sub:
        for out in sub:                       # SensorOutput records, in arrival order
            if out.kind == "point_cloud":
                ...
    # or: Subscription(..., callback=handle) calls handle(out) on the background thread

Decoded records wait in a queue bounded in bytes (``max_queue_bytes``): when the consumer falls
behind, the oldest records are dropped and counted in ``dropped`` (the daemon's own drops show
as ``gaps``, from the frames' sequence numbers). The iteration ends once every sensor's stream
has ended (the sensor was removed) or after ``close()``; when the connection breaks (the daemon
went away), the records already queued are delivered and then the iteration raises the
:mod:`sensim.errors` exception that broke it: it never hangs on a dead daemon.

A Python thread shares the interpreter lock with the caller: a 1 kHz controller in the same
process runs slower while a subscription decodes large clouds. To keep it at full speed,
record from another process (``python -m sensim record``, or ``sensim.record.Recorder`` in a
``multiprocessing.Process``).
"""

from __future__ import annotations

import collections
import threading
import time
from typing import Any, Callable, Iterable, Iterator, Mapping, Optional, Sequence, Union

from . import errors
from .client import Client
from .outputs import SensorOutput, decode

__all__ = ["Subscription", "subscribe_all", "find_sensors", "describe_sensors", "lacks_describe",
           "probe_sensors", "DEFAULT_PROBE_IDS"]

Sensors = Union[Iterable[int], Mapping[int, Mapping[str, Any]]]


def _size(out: SensorOutput) -> int:
    """Bytes a queued record holds (its array's, plus a fixed share for the rest)."""
    value = out.value
    return 256 + (int(getattr(value, "nbytes", 0)) if out.kind == "point_cloud" else 128)


DEFAULT_PROBE_IDS = 256   # a daemon without Describe: sensor ids 1..this are probed


def describe_sensors(client: Client) -> Optional[list[Any]]:
    """The sensors of the client's environment as its Describe lists them (every one, any id:
    pb.SensorDescription messages in id order, with kind, name, body, mount and a lidar's
    point fields), or None from a daemon older than Describe (it answers the request, an
    Envelope body it does not know, with INVALID_ARGUMENT). Subscribes to nothing."""
    try:
        return list(client.describe(bodies=False).sensors)
    except (errors.InvalidArgument, errors.Unimplemented) as exc:
        if not lacks_describe(exc):
            raise
        return None


# What a daemon that does not know an Envelope's body answers (daemon/protocol.c): the only
# INVALID_ARGUMENT that means "older than Describe". Any other one is a real refusal.
_NO_BODY = "envelope has no body"


def lacks_describe(exc: errors.SensimError) -> bool:
    """Whether `exc`, raised by a Describe, says the daemon predates Describe: UNIMPLEMENTED,
    or INVALID_ARGUMENT for an Envelope without a body it knows. Any other refusal (a field
    the daemon names) is not a reason to fall back to probing."""
    if isinstance(exc, errors.Unimplemented):
        return True
    return isinstance(exc, errors.InvalidArgument) and exc.message.strip() == _NO_BODY


def probe_sensors(client: Client, probe_ids: int = DEFAULT_PROBE_IDS) -> list[int]:
    """The ids of the sensors of the client's environment among 1..probe_ids, ascending, for a
    daemon older than Describe, whose Info counts an environment's sensors but does not list
    them: each id is tried with a subscription, which the daemon refuses (NotFound) for a
    sensor that does not exist, and each one taken is given up again (a subscription the
    client already had is kept). Stops early once as many were found as Info counts. Records
    pushed meanwhile wait in the client's bounded queue of pushed frames."""
    if not isinstance(probe_ids, int) or isinstance(probe_ids, bool) or probe_ids < 1:
        raise ValueError(f"probe_ids: expected an integer >= 1, got {probe_ids!r}")
    count = next((e.sensors for e in client.get_info().environments
                  if e.name == client.environment), None)
    found: list[int] = []
    for sid in range(1, probe_ids + 1):
        if count is not None and len(found) >= count:
            break
        try:
            client.subscribe(sid)
        except errors.NotFound:
            continue
        except errors.AlreadyExists:
            found.append(sid)          # the caller's own subscription: leave it
            continue
        found.append(sid)
        client.unsubscribe(sid)
    return found


def find_sensors(client: Client, probe_ids: int = DEFAULT_PROBE_IDS) -> list[int]:
    """The ids of the sensors of the client's environment, ascending: every sensor, whatever
    its id, as the daemon's Describe lists them. Only a daemon older than Describe is probed
    instead, among ids 1..probe_ids (probe_sensors)."""
    if not isinstance(probe_ids, int) or isinstance(probe_ids, bool) or probe_ids < 1:
        raise ValueError(f"probe_ids: expected an integer >= 1, got {probe_ids!r}")
    listed = describe_sensors(client)
    if listed is None:
        return probe_sensors(client, probe_ids)
    return [int(s.id) for s in listed]


def subscribe_all(client: Client, sensors: Sensors, *, encoding: str = "raw",
                  precision: Optional[float] = None, fields: Sequence[str] = (),
                  wait: float = 0.0) -> list[int]:
    """Subscribe `client` to each sensor (a list of ids, or {id: subscribe keyword arguments}
    overriding encoding, precision, level, fields per sensor). wait: seconds to retry a sensor
    the environment does not have yet (NotFound), for a recorder started before the
    simulation creates its sensors. Returns the ids."""
    items: Iterable[tuple[Any, Mapping[str, Any]]] = (
        sensors.items() if isinstance(sensors, Mapping) else ((s, {}) for s in sensors))
    ids = []
    deadline = time.monotonic() + max(0.0, wait)
    for sid, opts in items:
        kw: dict[str, Any] = {"encoding": encoding, "precision": precision, "fields": tuple(fields),
              **dict(opts)}
        while True:
            try:
                client.subscribe(int(sid), **kw)
                break
            except errors.NotFound:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.05)
        ids.append(int(sid))
    return ids


class Subscription:
    """Streams of `sensors` of environment `environment` on a connection of its own.

    sensors: ids, or {id: {"encoding": ..., "precision": ..., "fields": [...]}}. encoding,
    precision (m) and fields: as Client.subscribe, for every sensor not given its own.
    callback(out): called on the background thread for each record (instead of queueing it);
    on_error(exc): called there when the connection breaks. max_queue_bytes: bound of the
    queue of decoded records. wait: seconds to wait for sensors that do not exist yet.
    Other keywords go to Client (token, role, timeout, ...).
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 7700, *, sensors: Sensors,
                 environment: str = "default", encoding: str = "raw",
                 precision: Optional[float] = None, fields: Sequence[str] = (),
                 callback: Optional[Callable[[SensorOutput], None]] = None,
                 on_error: Optional[Callable[[BaseException], None]] = None,
                 max_queue_bytes: int = 256 << 20, wait: float = 0.0, **client_args: Any):
        client_args.setdefault("role", "observer")
        self.client = Client(host, port, environment=environment, **client_args)
        try:
            self.sensors = subscribe_all(self.client, sensors, encoding=encoding,
                                         precision=precision, fields=fields, wait=wait)
        except BaseException:
            self.client.close()
            raise
        self.callback = callback
        self.on_error = on_error
        self.max_queue_bytes = int(max_queue_bytes)
        self.dropped = 0                 # records dropped from the local queue (consumer slow)
        self.gaps = 0                    # frames the daemon dropped (sequence gaps)
        self.received = 0
        self.error: Optional[BaseException] = None
        self._queue: collections.deque = collections.deque()
        self._queued_bytes = 0
        self._cond = threading.Condition()
        self._open = set(self.sensors)   # sensors whose stream has not ended
        self._last_seq: dict[int, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sensim-subscription",
                                        daemon=True)
        self._thread.start()

    # ---------------------------------------------------------------- background thread

    def _run(self) -> None:
        try:
            while not self._stop.is_set() and self._open:
                data = self.client.next_sensor_data(timeout=0.1)
                if data is None:
                    continue
                out = decode(data)
                self.received += 1
                self._count_gap(out)
                if out.end_of_stream:
                    self._open.discard(out.sensor_id)
                    continue
                if self.callback is not None:
                    self.callback(out)
                else:
                    self._put(out)
        except BaseException as exc:  # the consumer sees it; this thread ends
            if not self._stop.is_set():
                self.error = exc
                if self.on_error is not None:
                    self.on_error(exc)
        finally:
            with self._cond:
                self._open.clear()
                self._cond.notify_all()

    def _count_gap(self, out: SensorOutput) -> None:
        # a subscription's frames are numbered from 1: a first one above 1 follows drops too
        last = self._last_seq.get(out.sensor_id, 0)
        if out.sequence and out.sequence > last + 1:
            self.gaps += out.sequence - last - 1
        if out.sequence:
            self._last_seq[out.sensor_id] = out.sequence

    def _put(self, out: SensorOutput) -> None:
        size = _size(out)
        with self._cond:
            while self._queue and self._queued_bytes + size > self.max_queue_bytes:
                old, old_size = self._queue.popleft()
                self._queued_bytes -= old_size
                self.dropped += 1
            self._queue.append((out, size))
            self._queued_bytes += size
            self._cond.notify()

    # ---------------------------------------------------------------- consumer

    @property
    def active(self) -> bool:
        """True while records may still arrive."""
        return self._thread.is_alive()

    def get(self, timeout: Optional[float] = None) -> Optional[SensorOutput]:
        """The next record, waiting up to timeout seconds (None: until one comes or the
        streams end); None when nothing came or every stream has ended. Raises the error that
        broke the connection once the records before it have been delivered."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while not self._queue:
                if not self._thread.is_alive() or not self._open:
                    if self.error is not None:
                        raise self.error
                    return None
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return None
                self._cond.wait(left if left is not None else 0.5)
            out, size = self._queue.popleft()
            self._queued_bytes -= size
            return out

    def __iter__(self) -> Iterator[SensorOutput]:
        while True:
            out = self.get()
            if out is None:
                return
            yield out

    def close(self) -> None:
        """Stop the background thread and close the connection. Idempotent."""
        self._stop.set()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout=max(1.0, (self.client.timeout or 1.0) + 1.0))
        self.client.close()
        with self._cond:
            self._open.clear()
            self._cond.notify_all()

    def __enter__(self) -> "Subscription":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
