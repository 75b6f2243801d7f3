# SPDX-License-Identifier: MIT
"""Stepping at engine speed: a lock-step helper that keeps several steps in flight.

A physics loop that sends ``update_state`` and ``step`` and waits for each reply spends most of
a 1 kHz step waiting on round trips. The daemon executes an environment's requests in order, so
the next steps can be sent before the earlier ones are answered. :class:`LockStep` sends each
step's ``UpdateState`` and ``Step`` in one write, keeps up to ``depth`` steps in flight, and
hands back every step's outputs, decoded and grouped by sensor, in step order::

    with sensim.LockStep(client, depth=4) as sim:
        for k in range(1, 1001):
            t = k * 1e-3
            for result in sim.submit(t, body_ids=[1], body_poses=pose_at(t)):
                imu = result.outputs[2][0].value           # an ImuSample
        for result in sim.drain():                         # the last steps in flight
            ...

The poses a step carries must not depend on that step's own outputs (they come back up to
``depth`` steps later); a controller that needs them uses ``depth=1``.

A step refused by the daemon raises its :mod:`sensim.errors` class, naming the step's time,
from the submit or drain that collects it, once every step still in flight has been answered
(their results come from the next submit or drain; the helper is usable again). A daemon that
goes away raises :class:`sensim.errors.ConnectionClosed`; a daemon that stops answering raises
:class:`sensim.errors.Timeout` after the client's timeout: never a hang.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Optional, Sequence, Union

from . import errors
from . import client as _client
from .client import Client
from .outputs import SensorOutput, decode

__all__ = ["LockStep", "StepResult"]

Outputs = Union[None, str, Iterable[int]]


@dataclass(frozen=True)
class StepResult:
    """The answer to one step: its time (s), its index (from 1, the daemon's StepDone.step),
    and its outputs by sensor id, each sensor's records in order."""

    time: float
    step: int
    outputs: dict[int, list[SensorOutput]] = field(default_factory=dict)

    def __getitem__(self, sensor_id: int) -> list[SensorOutput]:
        """The records of one sensor in this step ([] when it produced none)."""
        return self.outputs.get(sensor_id, [])


def _step_message(time: float, outputs: Outputs) -> Any:
    """The Step request: every sensor's records (None or "all"), none ("none" or an empty
    list: the outputs go to subscribers only), or the listed sensor ids."""
    if outputs is None:
        outputs = "all"
    elif not isinstance(outputs, str):
        outputs = list(outputs)
        if not outputs:
            outputs = "none"
    return _client._step_message(time, outputs)


class LockStep:
    """Steps `client`'s environment with up to `depth` steps in flight (1 = one round trip per
    step). outputs: which records each StepDone carries: "all" (or None), "none", or a list
    of sensor ids (docs/streams.md, "Outputs of a step"). on_result: called with each
    StepResult as it is collected, besides being returned."""

    def __init__(self, client: Client, depth: int = 4, *, outputs: Outputs = "all",
                 on_result: Optional[Callable[[StepResult], None]] = None):
        if not 1 <= int(depth) <= 1024:
            raise ValueError(f"depth: {depth} is outside [1, 1024]")
        self.client = client
        self.depth = int(depth)
        self.outputs = outputs
        self.on_result = on_result
        self.refused = 0     # steps refused by the daemon (each raised, or counted after one)
        # (time, UpdateState id, Step id) of each step in flight, oldest first
        self._flight: collections.deque = collections.deque()
        # results of steps answered after a refused one, for the next submit or drain
        self._ready: collections.deque = collections.deque()

    @property
    def in_flight(self) -> int:
        """Steps sent and not yet collected."""
        return len(self._flight)

    def submit(self, time: float, body_ids: Sequence[int] = (), body_poses: Any = None,
               body_velocities: Any = None, joint_ids: Sequence[int] = (),
               joint_positions: Any = None, *,
               outputs: Outputs | ellipsis = ...) -> list[StepResult]:
        """Send the state at `time` (arguments as Client.update_state: body_poses (N, 7) px py
        pz qx qy qz qw, m; body_velocities (N, 6) m/s and rad/s, world; joint_positions (M,)
        rad or m) and the step to `time`; returns the results collected to keep at most
        `depth` steps in flight (oldest first; often empty). outputs: this step's choice
        instead of the helper's."""
        c = self.client
        state = c._state_request(time, body_ids, body_poses, body_velocities, joint_ids,
                                 joint_positions)
        step = _step_message(time, self.outputs if outputs is ... else outputs)
        # a full window first: the step sent now is answered after the oldest
        results = self._collect_while(lambda: len(self._flight) >= self.depth)
        uid, parts = c._bulk_parts(*state)
        sid, step_parts = c._bulk_parts("step", step, ())
        try:
            c._send_parts(parts + step_parts)
        except errors.TransportError:
            self._abandon((float(time), uid, sid))
            self._ready.extendleft(reversed(results))
            raise
        self._flight.append((float(time), uid, sid))
        return results

    def step(self, time: float, *args: Any, **kwargs: Any) -> list[StepResult]:
        """submit(); the name of the call it stands for."""
        return self.submit(time, *args, **kwargs)

    def drain(self) -> list[StepResult]:
        """Collect every step still in flight, oldest first."""
        return self._collect_while(lambda: bool(self._flight))

    def run(self, times: Iterable[float],
            state: Optional[Callable[[float], dict]] = None) -> Iterator[StepResult]:
        """Step through `times`, with state(t) giving submit's keyword arguments for each
        (body_ids, body_poses, ...); yields every step's result in order, the last ones once
        the times run out."""
        for t in times:
            yield from self.submit(t, **(state(t) if state is not None else {}))
        yield from self.drain()

    def _collect_while(self, more: Callable[[], bool]) -> list[StepResult]:
        """The results waiting from earlier, then those collected while more(). When a
        collection raises, every result gathered so far is kept for the next call."""
        results = list(self._ready)
        self._ready.clear()
        try:
            while more():
                results.append(self._collect())
        except BaseException:
            self._ready.extendleft(reversed(results))
            raise
        return results

    def _answer(self, time: float, uid: int, sid: int) -> StepResult:
        """Wait for one step's two replies; its result, or the error of the refused request
        (naming the step's time; the other reply is dropped unread)."""
        c = self.client
        try:
            c.wait_reply(uid)
        except errors.SensimError as exc:
            if isinstance(exc, errors.TransportError):
                raise
            c._abandoned.add(sid)
            raise errors.error_for(exc.code, f"update_state at t = {time!r}: {exc.message}",
                                   exc.request_id) from None
        try:
            # records too large for one frame together come ahead of the StepDone, each in a
            # frame of the step's id; the client puts them back into StepDone.outputs
            env = c.wait_reply(sid)
        except errors.SensimError as exc:
            if isinstance(exc, errors.TransportError):
                raise
            raise errors.error_for(exc.code, f"step at t = {time!r}: {exc.message}",
                                   exc.request_id) from None
        if env.WhichOneof("body") != "step_done":
            raise errors.ProtocolError(f"step at t = {time!r}: expected a step_done reply, "
                                       f"got {env.WhichOneof('body')}")
        done = env.step_done
        by_sensor: dict[int, list[SensorOutput]] = {}
        for data in done.outputs:
            by_sensor.setdefault(data.sensor_id, []).append(decode(data))
        result = StepResult(done.time, done.step, by_sensor)
        if self.on_result is not None:
            self.on_result(result)
        return result

    def _collect(self) -> StepResult:
        """The oldest step's result. When it was refused, every later step in flight is
        answered first (their results wait for the next submit or drain; a later refusal is
        counted in `refused`), then its error is raised."""
        time, uid, sid = self._flight.popleft()
        try:
            return self._answer(time, uid, sid)
        except errors.TransportError:
            self._abandon((time, uid, sid))
            raise
        except errors.SensimError:
            while self._flight:
                later = self._flight.popleft()
                try:
                    self._ready.append(self._answer(*later))
                except errors.TransportError:
                    self._abandon(later)
                    raise
                except errors.SensimError:
                    self.refused += 1
            self.refused += 1
            raise

    def _abandon(self, current: tuple) -> None:
        """The connection failed (or timed out) while answering `current`: its replies and
        those of every step in flight are dropped by the client if they ever arrive."""
        for _, uid, sid in (current, *self._flight):
            self.client._abandoned.update((uid, sid))
        self._flight.clear()

    def __enter__(self) -> "LockStep":
        return self

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        # Leaving normally collects the steps in flight (on_result sees them, and a refused
        # one raises); after an error they are left to the client, which drops their replies
        # as they arrive.
        if exc_type is None:
            self.drain()
        elif self._flight:
            self._abandon(self._flight.popleft())
