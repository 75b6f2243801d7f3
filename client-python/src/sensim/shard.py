# SPDX-License-Identifier: MIT
"""Sensors sharded over several daemons: one ShardedClient over one Client per daemon.

Every daemon (a *shard*) holds the whole scene (geometry, materials, media, bodies, objects,
joints, environment settings) and receives every state update, so that each sees the same world;
each sensor lives on one shard, chosen by ``placement`` or else by ``shard_for(id, n)``, a stable
hash of its id. A request for all shards is sent to every shard before any reply is awaited (the
shards work at the same time), and the replies are awaited within one deadline, the client's
timeout. A step completes when every shard has answered; its outputs are merged in sensor id
order, as one daemon would have listed them. Raycasts are split across the shards.

A failure of one shard raises the sensim.errors class of what happened, its message naming the
shard (index and address), with ``shard``, ``address`` and ``failures`` attributes. Nothing is
re-sent on its own: ``rejoin(index)`` reconnects a shard (restarted, or replaced at another
address) and re-sends it the scene this client built and the last state (docs/sharding.md).
"""

from __future__ import annotations

import select
import time as _time
from typing import Any, Callable, Iterable, Mapping, Sequence, cast

import numpy as np

from . import _framing, errors
from ._proto import pb
from .client import (RAYCAST_DTYPE, Client, _ENTITIES, _flat, _ids, _rows, _step_message,
                     state_arrays)
from .outputs import StepDone

__all__ = ["ShardedClient", "shard_for", "parse_address"]

_MASK64 = (1 << 64) - 1

# A raycast of fewer rays goes to one shard whole (taking turns): splitting it would cost more
# round trips than the tracing it spreads.
SPLIT_MIN_RAYS = 4096

# A request body up to this size is joined with each shard's frame head into one buffer (one
# copy of a few kB costs less than a gather of several); larger ones are sent from their parts.
JOIN_BODY_BYTES = 1 << 14


def _mix64(x: int) -> int:
    """SplitMix64's finaliser: spreads consecutive ids over all 64 bits."""
    x = (x + 0x9E3779B97F4A7C15) & _MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
    return x ^ (x >> 31)


def shard_for(sensor_id: int, shards: int) -> int:
    """The shard (0 .. shards - 1) of a sensor without an explicit placement: Lamping and
    Veach's jump consistent hash of the mixed id, so that going from n to n + 1 shards moves
    only about 1 / (n + 1) of the sensors. The C client computes the same
    (sensim_shard_for)."""
    if shards < 1:
        raise ValueError(f"shards: expected at least 1, got {shards}")
    key = _mix64(int(sensor_id) & 0xFFFFFFFF)
    b, j = -1, 0
    while j < shards:
        b = j
        key = (key * 2862933555777941757 + 1) & _MASK64
        j = int((b + 1) * (float(1 << 31) / float((key >> 33) + 1)))
    return b


def parse_address(address: Any, default_port: int = 7700) -> tuple[str, int]:
    """(host, port) from "host:port", "[v6]:port", "host" (default port) or a (host, port)
    pair."""
    if isinstance(address, (tuple, list)) and len(address) == 2:
        host, port = address
    elif isinstance(address, str) and address:
        host, port = address, default_port
        if address.startswith("["):
            end = address.find("]")
            if end < 0:
                raise ValueError(f"address {address!r}: missing ']'")
            host, rest = address[1:end], address[end + 1:]
            if rest:
                if not rest.startswith(":"):
                    raise ValueError(f"address {address!r}: expected ':port' after ']'")
                port = rest[1:]
        elif address.count(":") == 1:
            host, port = address.split(":")
    else:
        raise ValueError(f"address {address!r}: expected 'host:port' or (host, port)")
    try:
        port = int(port)
    except (TypeError, ValueError):
        raise ValueError(f"address {address!r}: port {port!r} is not a number") from None
    if not 0 < port < 65536 or not host:
        raise ValueError(f"address {address!r}: expected a host and a port in 1..65535")
    return str(host), port


_FIELD_NUMBERS: dict[tuple[Any, str], int] = {}


def _field_number(descriptor: Any, name: str) -> int:
    """The number of the field `name` of a message descriptor (looked up once)."""
    kind = (descriptor, name)
    number = _FIELD_NUMBERS.get(kind)
    if number is None:
        number = _FIELD_NUMBERS[kind] = descriptor.fields_by_name[name].number
    return number


def _body_parts(message: Any, arrays: Sequence[tuple[str, np.ndarray]]) -> tuple[list, int]:
    """A request body encoded once for every shard: message's own fields serialized, then
    each bulk field of arrays ((field name, C-contiguous little-endian array)) as its key and
    length and the array's own memory (protocol buffers read fields in any order). Returns the
    buffers in order and their total size."""
    own = message.SerializeToString()
    parts: list = [own]
    size = len(own)
    for name, a in arrays:
        if a.size:
            head = _framing._length_delimited(_field_number(message.DESCRIPTOR, name),
                                              a.nbytes)
            parts.append(head)
            parts.append(a.data.cast("B"))
            size += len(head) + a.nbytes
    return parts, size


def _nonblocking(shard: Client) -> Any:
    """The shard's socket in non-blocking mode (set once); raises when the client is closed."""
    sock = shard._sock
    if sock is None:
        raise shard._closed_error()
    if sock.gettimeout() != 0.0:
        sock.settimeout(0.0)
    return sock


def _send_now(shard: Client, parts: list) -> None:
    """Write parts to the shard's socket without waiting (non-blocking: no poll before the
    send, no change of mode when it is non-blocking already); what the socket does not take
    at once is sent by the client's own blocking send, which also names a failure."""
    sock = _nonblocking(shard)
    try:
        sent = sock.send(parts[0]) if len(parts) == 1 else sock.sendmsg(parts)
    except OSError:
        sent = 0
    rest = []
    for p in parts:
        n = len(p) if isinstance(p, bytes) else p.nbytes
        if sent >= n:
            sent -= n
        else:
            rest.append(memoryview(p)[sent:] if sent else p)
            sent = 0
    if rest:
        shard._send_parts(rest)


def _receive_now(shard: Client) -> None:
    """Read once from the shard's socket without waiting (it was found readable): the bytes
    go to its frame decoder. Raises as the client's own reads do when the connection is gone."""
    _nonblocking(shard)
    try:
        shard._recv_once()
    except BlockingIOError:
        return


class _Shard(Client):
    """A Client that can defer its replies: while `deferring`, a request method sends its
    request and returns at once, leaving (request id, expected reply body) in `deferred` for
    ShardedClient to await, so that one request goes to every shard before any reply is read."""

    deferring = False

    def __init__(self, *args: Any, **kwargs: Any):
        self.deferred: list[tuple[int, str | None]] = []
        super().__init__(*args, **kwargs)

    def wait_reply(self, request_id: int, timeout: float | None = None,
                   check: bool = True) -> Any:
        if self.deferring:
            self.deferred.append((request_id, None))
            return None
        return super().wait_reply(request_id, timeout, check)

    def _call(self, body: str, message: Any, reply: str | None = None) -> Any:
        if self.deferring:
            self.deferred.append((self.send_request(body, message), reply))
            return None
        return super()._call(body, message, reply)

    def step(self, time: float, outputs: str | Iterable[int] = "all") -> StepDone:
        if self.deferring:   # the StepDone is awaited, and typed, by ShardedClient
            self._call("step", _step_message(time, outputs), "step_done")
            return cast(StepDone, None)
        return super().step(time, outputs)


def _remaining(deadline: float | None) -> float | None:
    return None if deadline is None else max(0.0, deadline - _time.monotonic())


class ShardedClient:
    """Connections to several daemons that together simulate one scenario.

    addresses: the daemons, as "host:port" or (host, port); their order is their index.
    placement: sensor id -> shard index (a mapping, or a function of the id and the number of
    shards); sensors it does not place (a mapping without the id, a function returning None)
    go to shard_for(id, n). The other keyword arguments are the Client's (environment, token,
    timeout, role, ...), the same for every shard; timeout bounds every fan-out as a whole.

    The methods are the Client's for scene, state, step, raycast and streams. Scene methods
    (create_mesh, create_primitive, set_material, set_ambient, set_environment, create_body,
    create_object, create_joint, remove) and update_state go to every shard; sensor methods
    (create_sensor and its create_lidar/imu/encoder/odometer/cone forms, subscribe,
    unsubscribe, remove("sensor", id)) to the owning shard; step to every shard, each asked
    for the outputs of its own sensors among those wanted; raycast in contiguous parts, one
    per shard. ping and get_info answer a list, one item per shard.

    The client keeps what it sent to build the scene (each entity's last creating call;
    removed entities are forgotten) and the arguments of the last update_state, so that
    rejoin() can rebuild a shard. It knows the sensors it created: Step.output_sensors may
    name only those.
    """

    def __init__(self, addresses: Sequence[Any], *,
                 placement: Mapping[int, int] | Callable[[int, int], int | None] | None = None,
                 **client_kwargs: Any):
        if isinstance(addresses, (str, bytes)) or not len(addresses):
            raise ValueError("addresses: expected a non-empty list of daemon addresses")
        self.addresses = [parse_address(a) for a in addresses]
        self.placement = placement
        self._kwargs = dict(client_kwargs)
        self._kwargs.pop("connect", None)
        self.timeout = self._kwargs.get("timeout", 10.0)
        self._owner: dict[int, int] = {}          # sensor id -> shard index
        self._journal: dict[tuple[str, Any], tuple] = {}  # (kind, id) -> (method, args, kw, shard)
        self._last_state: tuple | None = None
        self._next_raycast = 0                    # shard of the next small raycast
        self._next_poll = 0                       # shard read first by next_sensor_data
        self.shards: list[_Shard] = []
        try:
            for i in range(len(self.addresses)):
                self.shards.append(self._connect(i))
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------------ shards

    def _name(self, i: int) -> str:
        host, port = self.addresses[i]
        return f"shard {i} ({'[' + host + ']' if ':' in host else host}:{port})"

    def _connect(self, i: int) -> _Shard:
        host, port = self.addresses[i]
        try:
            return _Shard(host, port, **self._kwargs)
        except errors.SensimError as exc:
            raise self._named(exc, {i: exc}, []) from None

    def _named(self, first: errors.SensimError, failures: dict[int, errors.SensimError],
               accepted: list[int]) -> errors.SensimError:
        """The error of the first failed shard, renamed: its message names the shard (and the
        other failures, and the shards that accepted the request, which now differ)."""
        i = min(failures)
        text = f"{self._name(i)}: {failures[i]}"
        for j in sorted(failures):
            if j != i:
                text += f"; also {self._name(j)}: {failures[j]}"
        if accepted:
            text += (f" (shard{'s' if len(accepted) > 1 else ''} "
                     f"{', '.join(map(str, accepted))} accepted it)")
        err = type(first)(text, code=first.code, request_id=first.request_id)
        err.shard = i
        err.address = self.addresses[i]
        err.failures = dict(failures)
        return err

    def shard_of(self, sensor_id: int) -> int:
        """The shard that holds (or would hold) sensor `sensor_id`."""
        sid = int(sensor_id)
        if sid in self._owner:
            return self._owner[sid]
        n = len(self.shards) or len(self.addresses)
        chosen = None
        if isinstance(self.placement, Mapping):
            chosen = self.placement.get(sid)
        elif self.placement is not None:
            chosen = self.placement(sid, n)
        if chosen is None:
            return shard_for(sid, n)
        if not isinstance(chosen, (int, np.integer)) or not 0 <= chosen < n:
            raise ValueError(f"placement: sensor {sid} -> {chosen!r} is not a shard index in "
                             f"[0, {n})")
        return int(chosen)

    @property
    def sensors(self) -> dict[int, int]:
        """The sensors created through this client: id -> shard index."""
        return dict(self._owner)

    def close(self) -> None:
        for s in self.shards:
            s.close()

    def __enter__(self) -> "ShardedClient":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<sensim.ShardedClient {len(self.addresses)} shards>"

    # ------------------------------------------------------------------ fan-out

    def _fan(self, calls: Mapping[int, Callable[[_Shard], Any]]) -> dict[int, Any]:
        """Run calls[i](shard i) with replies deferred, for every i, then await every reply
        within one deadline. Returns {i: the reply body of shard i's last request}; raises the
        first failure, named (the replies of the other shards are awaited first, so that no
        connection is left with a reply in flight)."""
        failures: dict[int, errors.SensimError] = {}
        sent: list[int] = []
        for i, call in calls.items():
            shard = self.shards[i]
            shard.deferred = []
            shard.deferring = True
            try:
                call(shard)
            except errors.SensimError as exc:   # the connection failed while sending
                failures[i] = exc
            except BaseException:
                # bad arguments: the same for every shard, so refused at the first, before it
                # sent anything; the replies of any shard that did are dropped as they arrive
                for j in sent + [i]:
                    self.shards[j]._abandoned.update(r for r, _ in self.shards[j].deferred)
                raise
            finally:
                shard.deferring = False
            sent.append(i)
        pending = {}
        for i in sent:
            shard = self.shards[i]
            mine, shard.deferred = shard.deferred, []
            if i in failures:
                shard._abandoned.update(r for r, _ in mine)
            else:
                pending[i] = mine
        results = self._await(pending, failures)
        if failures:
            raise self._named(next(iter(failures.values())), failures,
                              [i for i in calls if i not in failures])
        return results

    def _await(self, pending: dict[int, list[tuple[int, str | None]]],
               failures: dict[int, errors.SensimError]) -> dict[int, Any]:
        """Await the replies pending[i] ((request id, expected reply body or None), in order)
        of every shard within one deadline, the shards' sockets read as their bytes arrive:
        one poll over those still awaited, then a read without waiting from each that is
        ready. Returns {i: the reply to shard i's last request: its body, or the Envelope when
        no body is expected}; a shard's failure goes into failures (the replies of its
        requests after the failed one are dropped as they arrive)."""
        deadline = None if self.timeout is None else _time.monotonic() + self.timeout
        results: dict[int, Any] = {}
        todo = {i: list(reversed(p)) for i, p in pending.items() if p}   # next one last
        poller = select.poll()
        fds: dict[int, int] = {}               # shard -> its polled socket
        by_fd: dict[int, int] = {}

        def settle(i: int, exc: errors.SensimError | None) -> None:
            # shard i is done: its reply complete, or failed (what it still awaited dropped)
            if exc is not None:
                failures[i] = exc
                self.shards[i]._abandoned.update(r for r, _ in todo[i])
            del todo[i]
            if i in fds:
                poller.unregister(fds.pop(i))

        while True:
            # take the replies received already
            for i in list(todo):
                shard, mine = self.shards[i], todo[i]
                if mine[-1][0] not in shard._replies and not len(shard._decoder):
                    continue                    # nothing received since the last look
                try:
                    while mine and shard._file_until(mine[-1][0]):
                        rid, reply = mine.pop()
                        env = Client.wait_reply(shard, rid, 0.0)    # collects it, checks it
                        which = env.WhichOneof("body")
                        if reply is not None and which != reply:
                            raise errors.ProtocolError(f"expected a {reply} reply, got {which}")
                        results[i] = env if reply is None else getattr(env, which)
                except errors.SensimError as exc:
                    settle(i, exc)
                    continue
                if not mine:
                    settle(i, None)
            if not todo:
                return results
            left = _remaining(deadline)
            if left == 0.0:
                for i in list(todo):
                    for r, _ in todo[i]:
                        self.shards[i]._parts.pop(r, None)
                    settle(i, errors.Timeout(f"nothing received within {self.timeout} s"))
                return results
            # wait for any awaited shard's bytes, then read each ready socket once
            if not by_fd:
                for i in list(todo):
                    sock = self.shards[i]._sock
                    if sock is not None:
                        fds[i] = sock.fileno()
                        poller.register(fds[i], select.POLLIN)
                    else:
                        settle(i, self.shards[i]._closed_error())
                by_fd = {fd: i for i, fd in fds.items()}
                if not todo or not by_fd:
                    return results
            for fd, _ in poller.poll(None if left is None else max(1, int(left * 1000 + 0.999))):
                i = by_fd[fd]
                if i in todo:
                    try:
                        _receive_now(self.shards[i])
                    except errors.SensimError as exc:
                        settle(i, exc)

    def _fan_body(self, body: str, parts: list, size: int) -> dict[int, Any]:
        """Send every shard the request whose body (the Envelope field `body`) is encoded in
        parts (size bytes, _body_parts): only each frame's head differs (its length, the
        shard's next request id, the body's key), sent with the body in one write without
        waiting; then await every reply (_await) as _fan does."""
        key = _framing._length_delimited(_field_number(pb.Envelope.DESCRIPTOR, body), size)
        # the longest head any shard's frame can have (its request id a 10-byte varint): the
        # same body too large for one shard's u32 length prefix is refused before any is sent
        if 11 + len(key) + size > _framing.MAX_LENGTH:
            raise ValueError(f"{body}: request of {11 + len(key) + size} bytes does not fit a "
                             f"u32 length prefix ({_framing.MAX_LENGTH} bytes)")
        joined = b"".join(parts) if size <= JOIN_BODY_BYTES else None
        failures: dict[int, errors.SensimError] = {}
        pending: dict[int, list] = {}
        for i, shard in enumerate(self.shards):
            head = b"\x08" + _framing.varint(shard._next_id + 1) + key
            try:
                limit = shard.limits.max_frame_bytes if shard.limits is not None else 0
                if limit and len(head) + size > limit:
                    raise errors.ResourceExhausted(f"request of {len(head) + size} bytes exceeds "
                                                   f"the daemon's max_frame_bytes {limit}")
                shard._next_id += 1
                shard._outstanding.add(shard._next_id)
                frame = _framing.HEADER.pack(len(head) + size) + head
                _send_now(shard, [frame + joined] if joined is not None else [frame, *parts])
                pending[i] = [(shard._next_id, None)]
            except errors.SensimError as exc:   # the connection failed while sending
                failures[i] = exc
        results = self._await(pending, failures)
        if failures:
            raise self._named(next(iter(failures.values())), failures,
                              [i for i in range(len(self.shards)) if i not in failures])
        return results

    def _all(self, method: str, *args: Any, **kwargs: Any) -> dict[int, Any]:
        return self._fan({i: (lambda s: getattr(s, method)(*args, **kwargs))
                          for i in range(len(self.shards))})

    def _one(self, i: int, method: str, *args: Any, **kwargs: Any) -> Any:
        return self._fan({i: lambda s: getattr(s, method)(*args, **kwargs)})[i]

    def _remember(self, key: tuple[str, Any], method: str, args: tuple, kwargs: dict,
                  shard: int | None) -> None:
        # a replaced entity (material, medium, settings) keeps its place, before what uses it
        self._journal[key] = (method, args, kwargs, shard)

    def _broadcast(self, key: tuple[str, Any], method: str, *args: Any, **kwargs: Any) -> None:
        self._all(method, *args, **kwargs)
        self._remember(key, method, args, kwargs, None)

    # ------------------------------------------------------------------ session

    def ping(self, payload: bytes = b"") -> list:
        """Ping every shard; the Pongs in shard order."""
        got = self._all("ping", payload)
        return [got[i] for i in range(len(self.shards))]

    def get_info(self) -> list:
        """Every shard's Info, in shard order."""
        got = self._all("get_info")
        return [got[i] for i in range(len(self.shards))]

    # ------------------------------------------------------------------ scene (every shard)

    def create_mesh(self, id: int, vertices: Any, indices: Any, material_ids: Any = None,
                    name: str = "") -> None:
        # copies, so that the journal keeps what was sent whatever the caller does next
        vertices = vertices if isinstance(vertices, bytes) else np.array(vertices)
        indices = indices if isinstance(indices, bytes) else np.array(indices)
        if material_ids is not None and not isinstance(material_ids, bytes):
            material_ids = np.array(material_ids)
        self._broadcast(("geometry", int(id)), "create_mesh", id, vertices, indices,
                        material_ids, name)

    def create_primitive(self, id: int, kind: str, *, name: str = "", **size: Any) -> None:
        self._broadcast(("geometry", int(id)), "create_primitive", id, kind, name=name, **size)

    def set_material(self, id: int, kind: str = "lambertian", *, name: str = "",
                     **params: Any) -> None:
        self._broadcast(("material", int(id)), "set_material", id, kind, name=name, **params)

    def set_ambient(self, kind: str = "custom", *, id: int = 0, **params: Any) -> None:
        self._broadcast(("medium", int(id)), "set_ambient", kind, id=id, **params)

    def set_environment(self, **settings: Any) -> None:
        self._all("set_environment", **settings)
        # settings left None keep their value: the journal keeps the latest of each
        kept = dict(self._journal.get(("environment", None), (None, (), {}, None))[2])
        kept.update({k: v for k, v in settings.items() if v is not None})
        self._remember(("environment", None), "set_environment", (), kept, None)

    def create_body(self, id: int, pose: Any = None, **kwargs: Any) -> None:
        self._broadcast(("body", int(id)), "create_body", id, pose, **kwargs)

    def create_object(self, id: int, geometry_id: int, **kwargs: Any) -> None:
        self._broadcast(("object", int(id)), "create_object", id, geometry_id, **kwargs)

    def create_joint(self, id: int, type: str | int = "revolute", position: float = 0.0,
                     name: str = "") -> None:
        self._broadcast(("joint", int(id)), "create_joint", id, type, position, name)

    def remove(self, kind: str | int, id: int = 0) -> None:
        """Remove an entity: a sensor from its shard, anything else from every shard."""
        names = {v: k for k, v in _ENTITIES.items()}
        name = kind.lower() if isinstance(kind, str) else names.get(int(kind), str(kind))
        if name == "sensor":
            shard = self.shard_of(id)
            self._one(shard, "remove", kind, id)
            self._owner.pop(int(id), None)
            self._journal.pop(("subscription", int(id)), None)
        else:
            self._all("remove", kind, id)
        self._journal.pop((name, int(id)), None)

    # ------------------------------------------------------------------ sensors (one shard)

    def _sensor(self, method: str, id: int, *args: Any, **kwargs: Any) -> None:
        shard = self.shard_of(id)
        self._one(shard, method, id, *args, **kwargs)
        self._owner[int(id)] = shard
        self._remember(("sensor", int(id)), method, (id,) + args, kwargs, shard)

    def create_sensor(self, id: int, config: Any = None, **kwargs: Any) -> None:
        self._sensor("create_sensor", id, config, **kwargs)

    def create_imu(self, id: int, **kwargs: Any) -> None:
        self._sensor("create_imu", id, **kwargs)

    def create_encoder(self, id: int, joint_id: int, **kwargs: Any) -> None:
        self._sensor("create_encoder", id, joint_id, **kwargs)

    def create_odometer(self, id: int, joint_id: int, **kwargs: Any) -> None:
        self._sensor("create_odometer", id, joint_id, **kwargs)

    def create_lidar(self, id: int, **kwargs: Any) -> None:
        self._sensor("create_lidar", id, **kwargs)

    def create_cone(self, id: int, **kwargs: Any) -> None:
        self._sensor("create_cone", id, **kwargs)

    lidar_clouds = staticmethod(Client.lidar_clouds)

    def subscribe(self, sensor_id: int, encoding: str | int = "raw", **kwargs: Any) -> None:
        """Stream sensor `sensor_id` from its shard (read with next_sensor_data)."""
        shard = self.shard_of(sensor_id)
        self._one(shard, "subscribe", sensor_id, encoding, **kwargs)
        self._remember(("subscription", int(sensor_id)), "subscribe", (sensor_id, encoding),
                       kwargs, shard)

    def unsubscribe(self, sensor_id: int) -> None:
        self._one(self.shard_of(sensor_id), "unsubscribe", sensor_id)
        self._journal.pop(("subscription", int(sensor_id)), None)

    def next_sensor_data(self, timeout: float | None = 0.0) -> Any:
        """The next pushed SensorData of any shard (taking turns), waiting up to timeout
        seconds (None = the client timeout); None if nothing arrived."""
        if timeout is None:
            timeout = self.timeout
        deadline = None if timeout is None else _time.monotonic() + timeout
        n = len(self.shards)
        while True:
            for k in range(n):
                i = (self._next_poll + k) % n
                try:
                    data = self.shards[i].next_sensor_data(0.0)
                except errors.SensimError as exc:
                    raise self._named(exc, {i: exc}, []) from None
                if data is not None:
                    self._next_poll = (i + 1) % n
                    return data
            left = _remaining(deadline)
            if left == 0.0:
                return None
            socks = [s._sock for s in self.shards if s._sock is not None]
            if not socks:
                return None
            select.select(socks, [], [], left)

    # ------------------------------------------------------------------ time

    def update_state(self, time: float, body_ids: Sequence[int] = (), body_poses: Any = None,
                     body_velocities: Any = None, joint_ids: Sequence[int] = (),
                     joint_positions: Any = None) -> None:
        """Send the state to every shard (Client.update_state): the arrays are checked and
        converted once, the same request then goes to each shard from their memory."""
        arrays = state_arrays(body_ids, body_poses, body_velocities, joint_ids, joint_positions)
        msg = pb.UpdateState(time=float(time))
        parts, size = _body_parts(msg, arrays)
        self._fan_body("update_state", parts, size)
        # a copy: the caller may change its arrays, and rejoin() sends these again
        self._last_state = (float(time), [(name, a.copy()) for name, a in arrays])

    def step(self, time: float, outputs: str | Iterable[int] = "all") -> StepDone:
        """Step every shard; a StepDone (as Client.step's) with the outputs of all of them in
        sensor id order (its `step` is the largest index a shard reported). outputs: "all", "none" or the ids of
        sensors created through this client, each shard asked for those it holds."""
        n = len(self.shards)
        if isinstance(outputs, str):
            if outputs not in ("all", "none"):
                raise ValueError(f"outputs: {outputs!r} is not 'all', 'none' or sensor ids")
            wanted: list[Any] = [outputs] * n
        else:
            ids = _ids(list(outputs), "output_sensors").tolist()
            wanted = [[] for _ in range(n)]
            seen = set()
            for k, sid in enumerate(ids):
                if sid not in self._owner:
                    raise ValueError(f"output_sensors[{k}] = {sid} is not a sensor created "
                                     "through this client")
                if sid in seen:
                    raise ValueError(f"output_sensors[{k}] = {sid} is repeated")
                seen.add(sid)
                wanted[self._owner[sid]].append(sid)
            wanted = [w if w else "none" for w in wanted]
        got = self._fan({i: (lambda s, w=wanted[i]: s.step(time, w)) for i in range(n)})
        if n == 1:
            return StepDone.from_message(got[0])
        done = pb.StepDone(time=got[0].time, step=max(got[i].step for i in range(n)))
        records = [d for i in range(n) for d in got[i].outputs]
        records.sort(key=lambda d: d.sensor_id)     # stable: each sensor's records in order
        done.outputs.extend(records)
        return StepDone.from_message(done)

    # ------------------------------------------------------------------ queries

    def raycast(self, origins: Any, directions: Any, max_range: float = 0.0,
                times: Any = None, exclude_bodies: Sequence[int] = (),
                group_mask: int = 0) -> np.recarray:
        """Client.raycast over the shards: from SPLIT_MIN_RAYS rays on, the rays go in
        contiguous parts, one per shard, sent before any reply is read, and are gathered in
        order; fewer rays go whole to one shard, the shards taking turns. Every shard holds
        the same scene and state, so the hits are those of one daemon."""
        o = _rows(origins, 3, "origins")
        d = _rows(directions, 3, "directions")
        if len(o) != len(d) and len(o) != 1:   # one origin (3,) for every ray
            raise ValueError(f"origins: {len(o)} rays but directions: {len(d)}")
        t = None if times is None else _flat(times, "times")
        if t is not None and len(t) not in (0, 1, len(d)):
            raise ValueError(f"times: {len(t)} values for {len(d)} rays; expected none, one "
                             "or one per ray")
        n, k = len(d), len(self.shards)
        if k == 1 or n < SPLIT_MIN_RAYS:
            i = self._next_raycast
            self._next_raycast = (i + 1) % k
            try:
                return self.shards[i].raycast(o, d, max_range, t, exclude_bodies, group_mask)
            except errors.SensimError as exc:
                raise self._named(exc, {i: exc}, []) from None
        msg = pb.Raycast(max_range=float(max_range),
                         exclude_bodies=_ids(exclude_bodies, "exclude_bodies").tolist())
        if group_mask:
            msg.group_mask = int(group_mask)
        bounds = [n * i // k for i in range(k + 1)]
        ids: dict[int, int] = {}
        masked: dict[int, bool] = {}
        failures: dict[int, errors.SensimError] = {}
        for i, s in enumerate(self.shards):
            try:
                part = pb.Raycast()
                part.CopyFrom(msg)   # with the origin once when this shard takes it
                # and the hits alone back when it answers so (Client.raycast)
                part.omit_misses = bool(s.features & pb.FEATURE_RAYCAST_HIT_MASK)
                masked[i] = part.omit_misses
                ids[i] = s._send_rays(part, s._one_origin(part, o, n), d, t, bounds[i],
                                      bounds[i + 1])
            except errors.SensimError as exc:
                failures[i] = exc
        out = np.empty(n, dtype=RAYCAST_DTYPE)
        raw = out.view(np.uint8)
        size = RAYCAST_DTYPE.itemsize
        deadline = None if self.timeout is None else _time.monotonic() + self.timeout
        for i, rid in ids.items():
            s = self.shards[i]
            if failures:
                s._abandoned.add(rid)
                continue
            s.timeout, saved = _remaining(deadline), s.timeout  # the shared deadline
            try:
                _, hits = s._raycast_reply(rid, bounds[i + 1] - bounds[i], omit_misses=masked[i])
                raw[bounds[i] * size:bounds[i + 1] * size] = np.asarray(hits).view(np.uint8)
            except errors.SensimError as exc:
                failures[i] = exc
            finally:
                s.timeout = saved
        if failures:
            raise self._named(next(iter(failures.values())), failures, [])
        return out.view(np.recarray)

    # ------------------------------------------------------------------ restart

    def rejoin(self, index: int, address: Any = None) -> None:
        """Reconnect shard `index` (at `address`, when it moved) and re-send it what this client
        sent to build the scene, in the order it sent it (entities removed since left out), its
        own sensors and subscriptions among them, then the last update_state, all pipelined. The shard's sensors start afresh (frame 0): their noise differs from an
        uninterrupted run. Raises the failure, named, and leaves the shard closed, on error."""
        if not 0 <= index < len(self.shards):
            raise ValueError(f"index: {index} is not a shard index in [0, {len(self.shards)})")
        self.shards[index].close()
        if address is not None:
            self.addresses[index] = parse_address(address)
        self.shards[index] = shard = self._connect(index)

        def replay(s: _Shard) -> None:
            for method, args, kwargs, where in self._journal.values():
                if where is None or where == index:
                    getattr(s, method)(*args, **kwargs)
            if self._last_state is not None:
                time, arrays = self._last_state
                s.wait_reply(s._send_bulk("update_state", pb.UpdateState(time=time), arrays))
        try:
            self._fan({index: replay})
        except BaseException:
            shard.close()
            raise
