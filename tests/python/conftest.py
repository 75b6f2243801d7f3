# SPDX-License-Identifier: MIT
"""Fixtures of the integration tests: start the real sensimd on a free port, hand out clients,
and check at teardown that the daemon shuts down cleanly (SIGTERM -> exit code 0).

Environment (set by CTest): SENSIMD = path of the daemon, SENSIM_EXAMPLES_DIR = directory of the
C client's examples, PYTHONPATH = the build's python dir + client-python/src.
"""

from __future__ import annotations

import os
import pathlib
import re
import selectors
import signal
import subprocess
import time

import pytest

import sensim

REPO = pathlib.Path(__file__).resolve().parents[2]
START_TIMEOUT = 20.0
STOP_TIMEOUT = 15.0
LISTENING = re.compile(rb"sensimd listening on 127\.0\.0\.1:(\d+)\n")


def _executable(env: str, default: pathlib.Path) -> pathlib.Path:
    path = pathlib.Path(os.environ.get(env) or default)
    if not (path.is_file() and os.access(path, os.X_OK)):
        pytest.fail(f"{path} is not an executable: build it, or set {env}", pytrace=False)
    return path


class Daemon:
    """One running sensimd. ``port`` is the port it listens on; ``stop()`` signals it and
    returns its exit code; ``stderr()`` is everything it logged."""

    def __init__(self, args: list[str], log_dir: pathlib.Path, index: int):
        self.args = [str(_executable("SENSIMD", REPO / "build" / "server" / "sensimd")),
                     "--listen", "127.0.0.1:0", *args]
        self.log_path = log_dir / f"sensimd-{index}.stderr"
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(self.args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=self._log)
        self.port = self._read_port()

    def _read_port(self) -> int:
        """Read the single stdout line announcing the port, without blocking past the timeout."""
        line = b""
        deadline = time.monotonic() + START_TIMEOUT
        with selectors.DefaultSelector() as sel:
            sel.register(self.proc.stdout, selectors.EVENT_READ)
            while not line.endswith(b"\n"):
                left = deadline - time.monotonic()
                if left <= 0 or not sel.select(left):
                    self.kill()
                    pytest.fail(f"sensimd printed no port within {START_TIMEOUT} s "
                                f"(stdout so far {line!r})\n{self.stderr()}", pytrace=False)
                chunk = os.read(self.proc.stdout.fileno(), 1)
                if not chunk:
                    code = self.proc.wait(timeout=STOP_TIMEOUT)
                    pytest.fail(f"sensimd exited with {code} before listening "
                                f"(stdout {line!r})\n{self.stderr()}", pytrace=False)
                line += chunk
        match = LISTENING.fullmatch(line)
        if match is None:
            self.kill()
            pytest.fail(f"unexpected first stdout line of sensimd: {line!r}", pytrace=False)
        return int(match.group(1))

    @property
    def running(self) -> bool:
        return self.proc.poll() is None

    def client(self, **kwargs) -> sensim.Client:
        kwargs.setdefault("timeout", 10.0)
        return sensim.Client("127.0.0.1", self.port, **kwargs)

    def raw(self, **kwargs) -> sensim.Client:
        """A connected client that has not sent Hello."""
        kwargs.setdefault("timeout", 10.0)
        c = sensim.Client("127.0.0.1", self.port, connect=False, **kwargs)
        c.connect(handshake=False)
        return c

    def stop(self, sig: int = signal.SIGTERM, timeout: float = STOP_TIMEOUT) -> int:
        """Send sig and wait for the exit code; kills the daemon and fails after timeout."""
        if self.running:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            pytest.fail(f"sensimd did not exit within {timeout} s of signal {sig}\n"
                        f"{self.stderr()}", pytrace=False)

    def kill(self) -> None:
        if self.running:
            self.proc.kill()
            self.proc.wait()

    def close_files(self) -> None:
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self._log.close()

    def stderr(self) -> str:
        if not self._log.closed:
            self._log.flush()
        text = self.log_path.read_text(errors="replace")
        return f"--- sensimd {' '.join(self.args[1:])} stderr ---\n{text}--- end ---"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    # Remember each phase's outcome on the item, so fixtures can dump logs for failed tests.
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)


@pytest.fixture
def sensimd_factory(request, tmp_path):
    """Return start(*args) -> Daemon. Every daemon still running at teardown gets SIGTERM and
    must exit with code 0; its stderr is printed when the test failed."""
    daemons: list[Daemon] = []

    def start(*args: str) -> Daemon:
        d = Daemon(list(args), tmp_path, len(daemons))
        daemons.append(d)
        return d

    yield start

    problems = []
    for d in daemons:
        if d.running:
            code = d.stop()
            if code != 0:
                problems.append(f"sensimd exited with {code} after SIGTERM\n{d.stderr()}")
        d.close_files()
    failed = getattr(request.node, "rep_call", None)
    if failed is not None and failed.failed:
        for d in daemons:
            print(d.stderr())
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)


@pytest.fixture
def sensimd(sensimd_factory) -> Daemon:
    """A daemon with the default options."""
    return sensimd_factory()


@pytest.fixture
def examples_dir() -> pathlib.Path:
    return pathlib.Path(os.environ.get("SENSIM_EXAMPLES_DIR") or REPO / "build" / "client-c")
