# SPDX-License-Identifier: MIT
"""Shards in network namespaces of their own (as root, where `ip netns` works; skipped
otherwise): three sensimd, each in a namespace reached over a veth pair at an address of its
own with a token, run the sharded scenario of test_shard.py with the same records as one daemon
on loopback; a network partition (the link to one shard taken down: no FIN, no RST, the daemon
still running) is reported naming that shard's address within the client's timeout."""

from __future__ import annotations

import os
import selectors
import shutil
import signal
import subprocess
import time

import pytest

from sensim import ShardedClient, errors
from sensim.testing import find_sensimd
from test_shard import BALANCED, build, pose, records, run

TOKEN = "netns-shard-token"


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    r = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if check and r.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {r.stderr.strip()}")
    return r


def _netns_usable() -> str | None:
    """None when network namespaces can be made here, else why not."""
    if os.geteuid() != 0:
        return "needs root"
    if shutil.which("ip") is None:
        return "needs iproute2's ip"
    probe = f"sensimprobe{os.getpid()}"
    if _ip("netns", "add", probe, check=False).returncode != 0:
        return "ip netns add is not permitted here"
    _ip("netns", "del", probe, check=False)
    return None


_WHY = _netns_usable()
pytestmark = pytest.mark.skipif(_WHY is not None, reason=f"network namespaces: {_WHY}")


class NsDaemon:
    """sensimd in namespace `ns`, listening on addr:7700 with the token."""

    def __init__(self, ns: str, addr: str):
        self.ns, self.addr, self.port = ns, addr, 7700
        self.proc = subprocess.Popen(
            ["ip", "netns", "exec", ns, str(find_sensimd()), "--listen", f"{addr}:7700",
             "--token", TOKEN, "--log-level", "warn"],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        line = b""
        deadline = time.monotonic() + 20
        with selectors.DefaultSelector() as sel:
            sel.register(self.proc.stdout, selectors.EVENT_READ)
            while not line.endswith(b"\n"):
                if time.monotonic() > deadline or not sel.select(deadline - time.monotonic()):
                    self.proc.kill()
                    raise RuntimeError(f"sensimd in {ns} printed no port: {line!r}")
                chunk = os.read(self.proc.stdout.fileno(), 1)
                if not chunk:
                    raise RuntimeError(f"sensimd in {ns} exited: {self.proc.stderr.read()!r}")
                line += chunk
        assert line == f"sensimd listening on {addr}:7700\n".encode(), line

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()


@pytest.fixture
def netns_shards():
    """Three namespaces, each joined to this one by a veth pair: host side 10.N.i.1/30, the
    namespace's side 10.N.i.2/30 (N from this process's id, so that parallel runs differ),
    and a sensimd in each. Torn down whatever happens."""
    tag = os.getpid() % 100000
    net = 100 + tag % 100
    made, links, daemons = [], [], []
    try:
        for i in range(3):
            ns, host, peer = f"sensimshard{tag}_{i}", f"ssh{tag}h{i}", f"ssh{tag}n{i}"
            _ip("netns", "add", ns)
            made.append(ns)
            _ip("link", "add", host, "type", "veth", "peer", "name", peer)
            links.append(host)
            _ip("link", "set", peer, "netns", ns)
            _ip("addr", "add", f"10.{net}.{i}.1/30", "dev", host)
            _ip("link", "set", host, "up")
            _ip("netns", "exec", ns, "ip", "addr", "add", f"10.{net}.{i}.2/30", "dev", peer)
            _ip("netns", "exec", ns, "ip", "link", "set", peer, "up")
            _ip("netns", "exec", ns, "ip", "link", "set", "lo", "up")
        for i, ns in enumerate(made):
            daemons.append(NsDaemon(ns, f"10.{net}.{i}.2"))
        yield daemons, links
        codes = [d.stop() for d in daemons]
        assert codes == [0, 0, 0], codes
    finally:
        for d in daemons:
            if d.proc.poll() is None:
                d.proc.kill()
                d.proc.wait()
        for host in links:
            _ip("link", "del", host, check=False)
        for ns in made:
            _ip("netns", "del", ns, check=False)


def test_shards_in_their_own_namespaces_give_the_records_of_one_daemon(netns_shards,
                                                                       sensimd_factory):
    daemons, _ = netns_shards
    one = sensimd_factory()
    with one.client() as c, ShardedClient([(d.addr, d.port) for d in daemons], token=TOKEN,
                                          placement=BALANCED) as sc:
        build(c)
        build(sc)
        assert records(run(sc, 4)) == records(run(c, 4))


def test_a_partitioned_shard_is_named_within_the_timeout(netns_shards):
    daemons, links = netns_shards
    with ShardedClient([(d.addr, d.port) for d in daemons], token=TOKEN, placement=BALANCED,
                       timeout=2.0) as sc:
        build(sc)
        run(sc, 1)
        _ip("link", "set", links[1], "down")      # the daemon runs on; nothing reaches it
        start = time.monotonic()
        with pytest.raises(errors.Timeout) as err:
            sc.update_state(0.1, [1], pose(0.1))
        assert 2.0 <= time.monotonic() - start < 4.0
        assert str(err.value).startswith(f"ETIMEDOUT: shard 1 ({daemons[1].addr}:7700)")
        assert "shards 0, 2 accepted it" in str(err.value)
        _ip("link", "set", links[1], "up")
