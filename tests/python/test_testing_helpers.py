# SPDX-License-Identifier: MIT
"""sensim.testing, the helpers users script scenarios with: the README example runs, a daemon
that cannot start is reported with its log, and close() reports an unclean exit."""

from __future__ import annotations

import re
import signal

import pytest

from sensim.testing import Daemon, DaemonError, find_sensimd


def test_readme_example_of_the_test_helpers():
    with Daemon(["--threads", "2"]) as d, d.client(environment="scenario") as c:
        c.create_primitive(1, "sphere", radius=1.0)
        c.create_object(1, 1)
        assert c.raycast([[0, 0, 0]], [[1, 0, 0]]).distances[0] == 1.0
    assert not d.running


def test_a_daemon_that_cannot_start_is_reported():
    with pytest.raises(DaemonError, match=r"exited with 2 before listening[\s\S]*threads"):
        Daemon(["--threads", "0"])


def test_close_reports_an_unclean_exit():
    d = Daemon()
    d.proc.send_signal(signal.SIGKILL)
    d.proc.wait()
    with pytest.raises(DaemonError, match=re.escape("exited with -9")):
        d.close()


def test_find_sensimd_names_what_it_tried(monkeypatch, tmp_path):
    monkeypatch.setenv("SENSIMD", str(tmp_path / "nothing-here"))
    monkeypatch.setenv("PATH", str(tmp_path))
    # falls back to <repo>/build/server/sensimd, or says everything it looked at
    try:
        assert find_sensimd().name == "sensimd"
    except DaemonError as exc:
        assert "nothing-here" in str(exc) and "build" in str(exc)
