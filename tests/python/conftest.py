# SPDX-License-Identifier: MIT
"""Fixtures of the integration tests: start the real sensimd on a free port, hand out clients,
and check at teardown that the daemon shuts down cleanly (SIGTERM -> exit code 0).

Environment (set by CTest): SENSIMD = path of the daemon, SENSIM_EXAMPLES_DIR = directory of the
C client's examples, PYTHONPATH = the build's python dir + client-python/src.
"""

from __future__ import annotations

import os
import pathlib

import pytest

from sensim.testing import Daemon, DaemonError

REPO = pathlib.Path(__file__).resolve().parents[2]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    # Remember each phase's outcome on the item, so fixtures can dump logs for failed tests.
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)


# The timeout of the fixtures' clients when a test gives none. How long a step or a raycast
# takes is not what those calls check: an OS1-128 revolution took over 10 s in the sanitizer
# build on a loaded machine. A test of timeouts gives its client its own.
CLIENT_TIMEOUT = 300.0


@pytest.fixture
def sensimd_factory(request, tmp_path):
    """Return start(*args) -> Daemon (sensim.testing). Every daemon still running at teardown
    gets SIGTERM and must exit with code 0; its stderr is printed when the test failed."""
    daemons: list[Daemon] = []

    def start(*args: str) -> Daemon:
        try:
            d = Daemon(args, log_dir=tmp_path, name=f"sensimd-{len(daemons)}",
                       client_timeout=CLIENT_TIMEOUT)
        except DaemonError as exc:
            pytest.fail(str(exc), pytrace=False)
        daemons.append(d)
        return d

    yield start

    problems = []
    failed = getattr(request.node, "rep_call", None)
    if failed is not None and failed.failed:
        for d in daemons:
            print(d.stderr())
    for d in daemons:
        try:
            d.close()
        except DaemonError as exc:
            problems.append(str(exc))
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)


@pytest.fixture
def sensimd(sensimd_factory) -> Daemon:
    """A daemon with the default options."""
    return sensimd_factory()


@pytest.fixture
def examples_dir() -> pathlib.Path:
    return pathlib.Path(os.environ.get("SENSIM_EXAMPLES_DIR") or REPO / "build" / "client-c")
