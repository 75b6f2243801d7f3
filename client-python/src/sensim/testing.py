# SPDX-License-Identifier: MIT
"""Helpers for tests and scripted scenarios: start a real ``sensimd`` on a free loopback port,
connect clients to it, and stop it with a check that it shut down cleanly.

    from sensim.testing import Daemon

    with Daemon() as d:                       # sensimd from $SENSIMD, PATH or <repo>/build
        with d.client(environment="scenario") as c:
            c.create_primitive(1, "sphere", radius=1.0)
            ...
    # leaving the block sends SIGTERM and raises DaemonError unless sensimd exits with 0
"""

from __future__ import annotations

import os
import pathlib
import re
import selectors
import shutil
import signal
import subprocess
import tempfile
import time
from typing import Any, Sequence

from .client import Client

_LISTENING = re.compile(rb"sensimd listening on 127\.0\.0\.1:(\d+)\n")


class DaemonError(RuntimeError):
    """sensimd did not start, or did not stop cleanly; the message carries its log."""


def find_sensimd() -> pathlib.Path:
    """The daemon executable: $SENSIMD, else `sensimd` on PATH, else <repo>/build/server/sensimd
    for a source checkout."""
    candidates = []
    if os.environ.get("SENSIMD"):
        candidates.append(pathlib.Path(os.environ["SENSIMD"]))
    on_path = shutil.which("sensimd")
    if on_path:
        candidates.append(pathlib.Path(on_path))
    # client-python/src/sensim/testing.py -> the repository root is three levels above src/sensim
    candidates.append(pathlib.Path(__file__).resolve().parents[3] / "build" / "server" / "sensimd")
    for path in candidates:
        if path.is_file() and os.access(path, os.X_OK):
            return path
    raise DaemonError("cannot find sensimd: set $SENSIMD, put it on PATH, or build it "
                      "(./run.sh build); looked at " + ", ".join(map(str, candidates)))


class Daemon:
    """One running sensimd on 127.0.0.1 and a free port.

    args: extra command-line options (e.g. ["--threads", "2"]). executable: default
    find_sensimd(). log_dir: where its stderr goes (default: a temporary directory).
    start_timeout / stop_timeout: seconds. client_timeout: the timeout (s) of the clients
    client() and raw() hand out when not given one.
    """

    def __init__(self, args: Sequence[str] = (), *, executable: str | os.PathLike | None = None,
                 log_dir: str | os.PathLike | None = None, start_timeout: float = 20.0,
                 stop_timeout: float = 15.0, name: str = "sensimd",
                 client_timeout: float = 10.0):
        exe = pathlib.Path(executable) if executable is not None else find_sensimd()
        self.args = [str(exe), "--listen", "127.0.0.1:0", *map(str, args)]
        self.stop_timeout = stop_timeout
        self.client_timeout = client_timeout
        self._tmp = None
        if log_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="sensimd-")
            log_dir = self._tmp.name
        self.log_path = pathlib.Path(log_dir) / f"{name}.stderr"
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(self.args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=self._log)
        self.port = self._read_port(start_timeout)

    def _read_port(self, timeout: float) -> int:
        """Read the one stdout line announcing the port, never blocking past the timeout."""
        line = b""
        deadline = time.monotonic() + timeout
        with selectors.DefaultSelector() as sel:
            sel.register(self.proc.stdout, selectors.EVENT_READ)
            while not line.endswith(b"\n"):
                left = deadline - time.monotonic()
                if left <= 0 or not sel.select(left):
                    self.kill()
                    raise DaemonError(f"sensimd printed no port within {timeout} s "
                                      f"(stdout so far {line!r})\n{self.stderr()}")
                chunk = os.read(self.proc.stdout.fileno(), 1)
                if not chunk:
                    code = self.proc.wait(timeout=self.stop_timeout)
                    raise DaemonError(f"sensimd exited with {code} before listening "
                                      f"(stdout {line!r})\n{self.stderr()}")
                line += chunk
        match = _LISTENING.fullmatch(line)
        if match is None:
            self.kill()
            raise DaemonError(f"unexpected first stdout line of sensimd: {line!r}")
        return int(match.group(1))

    @property
    def running(self) -> bool:
        return self.proc.poll() is None

    def client(self, **kwargs: Any) -> Client:
        """A connected, handshaken Client (keyword arguments as for Client)."""
        kwargs.setdefault("timeout", self.client_timeout)
        return Client("127.0.0.1", self.port, **kwargs)

    def raw(self, **kwargs: Any) -> Client:
        """A connected Client that has not sent Hello (for protocol tests)."""
        kwargs.setdefault("timeout", self.client_timeout)
        c = Client("127.0.0.1", self.port, connect=False, **kwargs)
        c.connect(handshake=False)
        return c

    def stop(self, sig: int = signal.SIGTERM, timeout: float | None = None) -> int:
        """Send sig and return the exit code; kills the daemon and raises after the timeout."""
        timeout = self.stop_timeout if timeout is None else timeout
        if self.running:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise DaemonError(f"sensimd did not exit within {timeout} s of signal {sig}\n"
                              f"{self.stderr()}") from None

    def kill(self) -> None:
        if self.running:
            self.proc.kill()
            self.proc.wait()

    def stderr(self) -> str:
        """Everything the daemon logged so far, framed for a test report."""
        if not self._log.closed:
            self._log.flush()
        text = self.log_path.read_text(errors="replace")
        return f"--- {' '.join(self.args)} stderr ---\n{text}--- end ---"

    def close(self) -> None:
        """Stop (SIGTERM) if still running and release files; raises DaemonError unless the
        daemon exited with 0."""
        try:
            code = self.stop() if self.running else self.proc.returncode
            if code != 0:
                raise DaemonError(f"sensimd exited with {code}\n{self.stderr()}")
        finally:
            if self.proc.stdout is not None:
                self.proc.stdout.close()
            self._log.close()
            if self._tmp is not None:
                self._tmp.cleanup()

    def __enter__(self) -> "Daemon":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
