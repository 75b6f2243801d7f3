# SPDX-License-Identifier: MIT
"""The C client (nanopb) against the real sensimd, through its example program sensim_info."""

from __future__ import annotations

import os
import re
import socket
import subprocess

import pytest


def run_info(examples_dir, *args, env=None):
    exe = examples_dir / "sensim_info"
    if not exe.is_file():
        pytest.fail(f"{exe} is missing: build the sensim_info target or set SENSIM_EXAMPLES_DIR",
                    pytrace=False)
    full_env = dict(os.environ)
    full_env.pop("SENSIM_TOKEN", None)
    full_env.update(env or {})
    return subprocess.run([str(exe), *map(str, args)], capture_output=True, text=True,
                          timeout=60, env=full_env)


def unlistened() -> socket.socket:
    """A socket bound to a free port and not listening: connections to the port are refused
    for as long as it stays open (a port merely released could be taken meanwhile by a daemon
    of a test running in parallel)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    return s


def test_c_client_info_prints_server_info(sensimd, examples_dir):
    with sensimd.client() as c:
        version = c.get_info().server_version

        r = run_info(examples_dir, "127.0.0.1", sensimd.port)
        assert r.returncode == 0, r.stderr
        out = r.stdout
        assert version in out
        assert "server version" in out
        connections = re.search(r"^\s*connections\s+(\d+)$", out, re.M)
        assert connections, out
        assert int(connections.group(1)) >= 2     # this Python client and sensim_info
        assert re.search(r"^\s*protocol version\s+1$", out, re.M), out
        assert "uptime" in out and "threads" in out and "frames_in" in out

        # the C client's frames show in the daemon's counters
        assert c.get_info().counters.connections_total >= 2


def test_c_client_info_wrong_port_fails_clearly(examples_dir):
    with unlistened() as s:
        port = s.getsockname()[1]
        r = run_info(examples_dir, "127.0.0.1", port)
    assert r.returncode != 0
    assert r.stdout == ""
    assert f"127.0.0.1:{port}" in r.stderr
    assert "refused" in r.stderr.lower()


def test_c_client_info_bad_arguments(examples_dir):
    r = run_info(examples_dir, "127.0.0.1", "notaport")
    assert r.returncode != 0
    assert "port" in r.stderr


def test_c_client_info_token(sensimd_factory, examples_dir):
    d = sensimd_factory("--token", "tok")
    r = run_info(examples_dir, "127.0.0.1", d.port)
    assert r.returncode != 0
    assert "UNAUTHENTICATED" in r.stderr

    r = run_info(examples_dir, "127.0.0.1", d.port, env={"SENSIM_TOKEN": "tok"})
    assert r.returncode == 0, r.stderr


def test_c_client_info_refused_over_max_clients(sensimd_factory, examples_dir):
    d = sensimd_factory("--max-clients", "1")
    with d.client():
        r = run_info(examples_dir, "127.0.0.1", d.port)
        assert r.returncode != 0
        assert "max_clients" in r.stderr
        assert "RESOURCE_EXHAUSTED" in r.stderr
