# SPDX-License-Identifier: MIT
"""The ray-tracing backend seen from outside (docs/backend.md): the instruction set the daemon
traces with follows SENSIM_EMBREE_CONFIG, and rays no sensor should make are misses, counted in
GetInfo's rays_invalid, while the daemon keeps stepping."""

from __future__ import annotations

import math
import os
import re

import numpy as np
import pytest

import sensim
from sensim import errors

AIR_N = 1.000273   # refractive index of the default air: ranges are optical paths
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


def test_lidar_with_non_finite_ray_directions_keeps_stepping(sensimd):
    # Angle noise of 1e308 rad: a ray's angle mean + stddev z overflows to +-inf where
    # |z| > DBL_MAX / 1e308, and its direction (cos and sin of it) is NaN; every other ray points
    # somewhere finite (cos and sin of a huge angle). From the centre of a sphere each valid ray
    # hits it, at its radius; the others are misses, counted in rays_invalid, never traced.
    stddev, radius = 1e308, 5.0
    with sensimd.client() as c:
        c.create_primitive(1, "sphere", radius=radius)
        c.create_object(10, geometry_id=1)
        try:
            c.create_lidar(20, vlp16={"frequency": 10.0}, angle_noise={"stddev": stddev},
                           publish="per_step", fields=["x", "y", "z", "distance"])
        except errors.InvalidArgument as exc:
            # a configuration check refuses the noise first: then nothing reaches the tracer
            assert "angle_noise.stddev" in str(exc)
            pytest.skip(f"the configuration refuses angle_noise.stddev = {stddev}: {exc}")
        clouds = []
        for t in (0.0, 0.1, 0.2):
            c.update_state(t)
            clouds += [o.value for o in sensim.outputs(c.step(t))]
        info = c.get_info()

    env = next(e for e in info.environments if e.name == "default").counters
    fired = env.rays_traced + env.rays_culled + env.rays_invalid
    points = sum(len(k) for k in clouds)
    assert env.rays_culled == 0          # nothing is above the horizon inside a sphere
    assert points == env.rays_traced      # every valid ray hits the sphere
    assert info.counters.rays_invalid == env.rays_invalid
    assert 2 * 28000 < fired < 2 * 30000  # two revolutions of a VLP-16

    # the share of invalid rays: P(|z| > DBL_MAX / stddev) of a standard normal, within five
    # binomial standard deviations
    p = math.erfc(1.7976931348623157e308 / stddev / math.sqrt(2.0))
    sd = math.sqrt(fired * p * (1.0 - p))
    assert abs(env.rays_invalid - fired * p) < 5 * sd, (env.rays_invalid, fired * p, sd)

    # the valid rays of the packets they shared with invalid ones were traced as usual: at the
    # sphere's radius, to float32 rounding of the 5 m coordinates (a few units of the last place
    # through the hit, the optical path and the float32 point)
    for k in clouds:
        r = np.sqrt(k["x"].astype(float) ** 2 + k["y"] ** 2 + k["z"] ** 2)
        np.testing.assert_allclose(k["distance"], radius * AIR_N, rtol=0, atol=8 * U32 * radius)
        np.testing.assert_allclose(r, radius * AIR_N, rtol=0, atol=8 * U32 * radius)
