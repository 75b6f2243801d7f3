# SPDX-License-Identifier: MIT
"""The ray-tracing backend seen from outside (docs/backend.md): the instruction set the daemon
traces with follows SENSIM_EMBREE_CONFIG, the core's own kernels follow SENSIM_SIMD, and
GetInfo counts invalid rays (none, through the daemon) apart from those traced."""

from __future__ import annotations

import os
import re

import numpy as np
import pytest

import sensim
from sensim import errors

U32 = 2.0 ** -24   # float32 unit roundoff: the backend traces in float32


def backend_line(daemon) -> str:
    """The daemon's "ray tracing: ..." log line (at debug level, or info when configured)."""
    found = re.findall(r"ray tracing: (.*)", daemon.stderr())
    assert len(found) == 1, daemon.stderr()
    return found[0]


def cpu_flags() -> set[str]:
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    return set()


def test_daemon_traces_with_the_configured_instruction_set(sensimd_factory, monkeypatch):
    # this run's daemon: forced onto AVX2 by the second pass of ./run.sh test, else the CPU's
    # best (AVX-512 needs the Skylake-server subset that Embree's AVX-512 kernels use)
    forced = os.environ.get("SENSIM_EMBREE_CONFIG", "")
    line = backend_line(sensimd_factory("--log-level", "debug"))
    if "isa=avx2" in forced:
        assert "(native 8-ray packets)" in line and f'"{forced}"' in line, line
    elif not forced:
        skx = {"avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl"}
        width = 16 if skx <= cpu_flags() else 8 if "avx2" in cpu_flags() else 4
        assert f"(native {width}-ray packets)" in line and "the CPU's best ISA" in line, line

    # a daemon told to run SSE does: the variable reaches the device, and is logged at info
    monkeypatch.setenv("SENSIM_EMBREE_CONFIG", "isa=sse4.2")
    sse = sensimd_factory()
    line = backend_line(sse)
    assert "(native 4-ray packets)" in line and '"isa=sse4.2"' in line, line
    with sse.client() as c:
        c.create_primitive(1, "sphere", radius=2.0)
        c.create_object(10, geometry_id=1)
        hits = c.raycast(np.zeros((1, 3)), [[0.0, 0.0, 1.0]])
    assert abs(hits.distances[0] - 2.0) <= 4 * U32 * 2.0


def test_daemon_runs_the_core_kernels_at_the_configured_level(sensimd_factory, monkeypatch):
    # SENSIM_SIMD lowers the level of the core's own SIMD kernels (docs/backend.md): logged at
    # info when it lowers the CPU's, the same clouds at every level, and a bad value stops the
    # daemon at start
    levels = ["baseline", "avx2", "avx512"]
    clouds = []
    best = None
    for level in (None, "baseline", "avx2"):
        if level is None:
            monkeypatch.delenv("SENSIM_SIMD", raising=False)
        else:
            monkeypatch.setenv("SENSIM_SIMD", level)
        d = sensimd_factory("--log-level", "debug")
        line = backend_line(d)
        if level is None:
            assert "core kernels " in line and "(SENSIM_SIMD)" not in line, line
            best = line.split("core kernels ")[1].split()[0]   # the CPU's
            assert best in levels, line
        elif levels.index(level) < levels.index(best):
            assert f"core kernels {level} (SENSIM_SIMD)" in line, line
        else:   # at or above the CPU's: runs the CPU's, as without the variable
            assert f"core kernels {best}" in line and "(SENSIM_SIMD)" not in line, line
        with d.client() as c:
            c.create_primitive(1, "sphere", radius=6.0)
            c.create_object(10, geometry_id=1)
            c.create_lidar(1, vlp16={"frequency": 10.0}, distance_noise={"stddev_base": 0.01})
            got = []
            for t in (0.0, 0.05, 0.1, 0.15):
                c.update_state(t)
                got += c.lidar_clouds(c.step(t), 1)
        assert len(got) == 1 and len(got[0]) == 1809 * 16   # every ray hits the sphere
        clouds.append(got[0].tobytes())
    assert clouds[0] == clouds[1] == clouds[2]

    monkeypatch.setenv("SENSIM_SIMD", "avx3")
    with pytest.raises(pytest.fail.Exception, match='SENSIM_SIMD = "avx3" is not baseline'):
        sensimd_factory()


def test_getinfo_counts_invalid_rays_apart(sensimd):
    # rays no sensor should make never reach the tracer (docs/backend.md, "Invalid rays"); the
    # configuration checks refuse what made them (an angle noise of 1e308 rad once gave NaN
    # directions), so through the daemon every ray is valid: GetInfo reports rays_invalid, 0,
    # per environment and in total, and every ray fired as traced or culled. The tracer's own
    # check is tested with such rays in tests/unit/scene (every layout).
    with sensimd.client() as c:
        c.create_primitive(1, "sphere", radius=5.0)
        c.create_object(10, geometry_id=1)
        with pytest.raises(errors.InvalidArgument, match=r"angle_noise\.stddev"):
            c.create_lidar(21, vlp16={"frequency": 10.0}, angle_noise={"stddev": 1e308})
        c.create_lidar(20, vlp16={"frequency": 10.0}, angle_noise={"stddev": 0.01},
                       publish="per_step", fields=["x", "y", "z", "distance"])
        points = 0
        for t in (0.0, 0.1, 0.2):
            c.update_state(t)
            points += sum(len(o.value) for o in sensim.outputs(c.step(t)))
        hits = c.raycast(np.zeros((3, 3)), [[1.0, 0, 0], [0, 1.0, 0], [0, 0, 1.0]])
        info = c.get_info()

    env = next(e for e in info.environments if e.name == "default").counters
    assert env.HasField("rays_invalid") and info.counters.HasField("rays_invalid")
    assert env.rays_invalid == 0 and info.counters.rays_invalid == 0
    # two revolutions of a VLP-16 (and the firings at t = 0.2 exactly), every ray on the sphere
    assert 2 * 28933 <= points <= 2 * 28933 + 16 and env.rays_culled == 0
    assert env.rays_traced == points + 3
    assert np.all(np.abs(hits.distances - 5.0) <= 8 * U32 * 5.0)
