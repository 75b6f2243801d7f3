# SPDX-License-Identifier: MIT
"""The image for real (./run.sh containers; skipped by the normal suite): built with buildah from
a clean clone of the repository's HEAD, three daemons started from it with podman-compose
(docker/compose.yaml, the "shards" services), and the shard scenario run against them and
against the tree's own sensimd: the outputs of every sensor are bit-identical with the same
seed. Also the image's user, read-only root and health check (answered while a shard is busy
stepping), the token it requires, and the compose demo.

Environment: SENSIM_CONTAINERS=1 runs it (run.sh sets it); CONTAINERS_CONF as run.sh sets it;
SENSIM_DEPLOY_IMAGE=NAME and SENSIM_DEPLOY_DEMO_IMAGE=NAME reuse images already built instead
of building from a clone (for working on this test only).
"""

from __future__ import annotations

import collections
import math
import os
import pathlib
import secrets
import shutil
import socket
import subprocess
import threading
import time

import pytest

import sensim
from sensim import errors
from sensim.testing import Daemon

REPO = pathlib.Path(__file__).resolve().parents[2]
TOOLS = ("git", "buildah", "podman", "podman-compose")

pytestmark = pytest.mark.skipif(
    os.environ.get("SENSIM_CONTAINERS") != "1",
    reason="the container test runs under ./run.sh containers (it builds the image; tools "
           "from ./setup.sh --containers)")


def run(*cmd: str, timeout: float = 600, check: bool = True, **kw) -> subprocess.CompletedProcess:
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    if check and r.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} exited with {r.returncode}\n"
                             f"{r.stdout[-4000:]}\n{r.stderr[-4000:]}")
    return r


def free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


# ---------------------------------------------------------------------------- the scenario
# The shard scenario through sensim.ShardedClient (docs/sharding.md): the same scene,
# materials, medium, bodies and state updates go to every daemon; each sensor lives on one of
# them (pair k on daemon k mod n, an explicit placement) and its outputs come from it, merged
# by the client. With one address it is the whole scenario on one daemon.

SEED = 7_340_033
STEP = 0.05
TIMES = [k * STEP for k in range(9)]          # 0.4 s: four revolutions of the 10 Hz lidars
LIDARS = {
    101: {"vlp16": {"frequency": 10.0}},
    102: {"ouster": {"channels": 32, "columns": 512, "frequency": 10.0}},
    103: {"hdl64e": {"frequency": 10.0, "columns": 500}},
}
IMUS = (201, 202, 203)
PAIRS = list(zip(LIDARS, IMUS))               # one lidar and one IMU per shard
NOISE = {"x": 0.02, "y": 0.02, "z": 0.02}


def vehicle_state(t: float) -> tuple[list[float], list[float]]:
    """Pose and velocity of body 1 at t: 5 m/s along x, turning at 0.2 rad/s."""
    yaw = 0.2 * t
    pose = [5.0 * t, 0.0, 0.5, 0.0, 0.0, math.sin(yaw / 2), math.cos(yaw / 2)]
    return pose, [5.0, 0.0, 0.0, 0.0, 0.0, 0.2]


def build_scene(c: sensim.Client | sensim.ShardedClient, seed: int) -> None:
    c.set_environment(seed=seed, magnetic_field=(2e-5, 0.0, -4e-5))
    c.set_ambient("fog", visibility=150.0)    # atmospheric returns: drawn from the seed
    c.set_material(1, "lambertian", reflectance=0.35)
    c.create_primitive(1, "plane", half_size=200.0)
    c.create_object(1, 1, label=1)
    c.create_primitive(2, "box", half_extents=(1.0, 0.8, 1.5))
    c.create_primitive(3, "sphere", radius=1.2)
    for i in range(12):
        a = i * math.pi / 6
        r = 8.0 + 1.5 * i
        c.create_object(10 + i, 2 + i % 2, local_pose=((r * math.cos(a), r * math.sin(a), 1.2),
                                                       None),
                        material_id=1 if i % 3 else 0, label=2 + i % 2)
    pose, vel = vehicle_state(0.0)
    c.create_body(1, pose=(pose[:3], pose[3:]), linear_velocity=vel[:3],
                  angular_velocity=vel[3:])
    c.create_body(2, pose=((12.0, -3.0, 1.0), None), linear_velocity=(-3.0, 1.0, 0.0))
    c.create_object(40, 2, body_id=2, material_id=1, label=4)


def create_sensors(c: sensim.Client | sensim.ShardedClient, lidar: int, imu: int) -> None:
    k = lidar - 101
    c.create_lidar(lidar, body_id=1, mount=((0.5 * k, 0.0, 1.5), None),
                   distance_noise={"stddev_base": 0.02, "stddev_slope": 0.001}, **LIDARS[lidar])
    c.create_imu(imu, body_id=1, mount=((0.1 * k, 0.2, 0.3), None), sample_rate=200.0,
                 accelerometer={"chain": {"noiseStddev": NOISE}},
                 gyroscope={"chain": {"noiseStddev": NOISE}},
                 magnetometer={"chain": {"noiseStddev": {"x": 1e-7, "y": 1e-7, "z": 1e-7}}})


def run_scenario(shards: list[tuple[str, int]], token: str | None,
                 seed: int = SEED) -> dict[int, list[bytes]]:
    """Every sensor's outputs over the steps (serialized SensorData), from daemons at `shards`."""
    placement = {}
    for k, (lidar, imu) in enumerate(PAIRS):
        placement[lidar] = placement[imu] = k % len(shards)
    with sensim.ShardedClient(shards, placement=placement, token=token,
                              environment="shard-scenario", client_name="test_deploy_containers",
                              timeout=120) as c:
        build_scene(c, seed)
        for lidar, imu in PAIRS:
            create_sensors(c, lidar, imu)
        assert c.sensors == placement
        outputs: dict[int, list[bytes]] = collections.defaultdict(list)
        for t in TIMES:
            pose, vel = vehicle_state(t)
            obstacle = [12.0 - 3.0 * t, -3.0 + t, 1.0, 0.0, 0.0, 0.0, 1.0]
            c.update_state(t, [1, 2], [pose, obstacle], [vel, [-3.0, 1.0, 0, 0, 0, 0]])
            done = c.step(t)
            ids = [out.sensor_id for out in done.outputs]
            assert ids == sorted(ids)                 # merged in sensor id order
            for out in done.outputs:
                outputs[out.sensor_id].append(out.SerializeToString(deterministic=True))
        return dict(outputs)


def first_difference(a: dict[int, list[bytes]], b: dict[int, list[bytes]]) -> str:
    for sensor in sorted(set(a) | set(b)):
        xa, xb = a.get(sensor, []), b.get(sensor, [])
        if len(xa) != len(xb):
            return f"sensor {sensor}: {len(xa)} outputs against {len(xb)}"
        for i, (p, q) in enumerate(zip(xa, xb)):
            if p != q:
                return f"sensor {sensor}, output {i}: {len(p)} bytes against {len(q)}, differ"
    return "none"


# ---------------------------------------------------------------------------- fixtures

class Compose:
    """podman-compose on docker/compose.yaml as a project of its own."""

    def __init__(self, tmp: pathlib.Path, image: str, demo_image: str, token: str):
        self.project = f"sensimtest{os.getpid()}"
        self.token = token
        self.token_file = tmp / "token"
        self.token_file.write_text(token + "\n")
        # the image's user reads the secret, nobody else
        os.chown(self.token_file, 10001, 10001)
        self.token_file.chmod(0o400)
        ports = free_ports(4)
        self.env = dict(os.environ, SENSIM_IMAGE=image, SENSIM_DEMO_IMAGE=demo_image,
                        SENSIM_TOKEN_FILE=str(self.token_file), SENSIM_PORT=str(ports[0]),
                        SENSIM_PORT_0=str(ports[1]), SENSIM_PORT_1=str(ports[2]),
                        SENSIM_PORT_2=str(ports[3]))
        self.ports = {"sensimd": ports[0], "sensimd-0": ports[1], "sensimd-1": ports[2],
                      "sensimd-2": ports[3]}

    def __call__(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
        return run("podman-compose", "-p", self.project, "-f", str(REPO / "docker/compose.yaml"),
                   *args, env=self.env, timeout=timeout)

    def container(self, service: str) -> str:
        return f"{self.project}_{service}_1"

    def wait_healthy(self, service: str, timeout: float = 60.0) -> None:
        """Run the image's health check until it passes (podman runs it on demand here: its
        timers need systemd)."""
        deadline = time.monotonic() + timeout
        while True:
            r = run("podman", "healthcheck", "run", self.container(service), check=False)
            if r.returncode == 0:
                return
            if time.monotonic() > deadline:
                logs = run("podman", "logs", self.container(service), check=False)
                raise AssertionError(f"{service} not healthy: {r.stdout}{r.stderr}\n"
                                     f"{logs.stdout}{logs.stderr}")
            time.sleep(0.5)

    def stop(self, service: str) -> tuple[int, str]:
        """SIGTERM (podman stop), then the exit code and the log."""
        name = self.container(service)
        run("podman", "stop", "-t", "20", name)
        code = run("podman", "inspect", "-f", "{{.State.ExitCode}}", name).stdout.strip()
        logs = run("podman", "logs", name)
        return int(code), logs.stdout + logs.stderr

    def down(self) -> None:
        self("down", timeout=300)
        run("podman", "network", "rm", "-f", f"{self.project}_default", check=False)


@pytest.fixture(scope="module")
def images(tmp_path_factory) -> tuple[str, str]:
    """The runtime and demo images, built with buildah from a clean clone of HEAD."""
    missing = [t for t in TOOLS if shutil.which(t) is None]
    assert not missing, f"missing {missing}: ./setup.sh --containers"
    if os.environ.get("SENSIM_DEPLOY_IMAGE"):
        return os.environ["SENSIM_DEPLOY_IMAGE"], os.environ["SENSIM_DEPLOY_DEMO_IMAGE"]
    head = run("git", "-C", str(REPO), "rev-parse", "HEAD").stdout.strip()
    dirty = run("git", "-C", str(REPO), "status", "--porcelain").stdout.strip()
    clone = tmp_path_factory.mktemp("clone") / "sensim"
    run("git", "clone", "--quiet", "--no-checkout", str(REPO), str(clone))
    run("git", "-C", str(clone), "checkout", "--quiet", "--detach", head)
    print(f"building the image from a clean clone of {head}"
          + (" (the work tree's uncommitted changes are not in it)" if dirty else ""))
    tags = ("localhost/sensim:test", "localhost/sensim-demo:test")
    for target, tag in zip(("runtime", "demo"), tags):
        run("buildah", "bud", "--isolation", "chroot", "--format", "docker", "--layers",
            "--pull=never", "--target", target, "-f", "docker/Dockerfile", "-t", tag, ".",
            cwd=clone, timeout=3600)
    return tags


@pytest.fixture(scope="module")
def compose(images, tmp_path_factory):
    c = Compose(tmp_path_factory.mktemp("compose"), *images, token=secrets.token_hex(16))
    try:
        c("up", "-d", "sensimd-0", "sensimd-1", "sensimd-2")
        for service in ("sensimd-0", "sensimd-1", "sensimd-2"):
            c.wait_healthy(service)
        yield c
        # each daemon stops cleanly on SIGTERM
        for service in ("sensimd-0", "sensimd-1", "sensimd-2"):
            code, log = c.stop(service)
            assert code == 0 and "stopped cleanly" in log, log
    finally:
        c.down()


@pytest.fixture(scope="module")
def shards(compose) -> list[tuple[str, int]]:
    return [("127.0.0.1", compose.ports[f"sensimd-{i}"]) for i in range(3)]


# ---------------------------------------------------------------------------- tests

def test_three_daemons_from_the_image_match_the_tree_daemon(compose, shards):
    sharded = run_scenario(shards, compose.token)
    assert sorted(sharded) == sorted([*LIDARS, *IMUS])
    with Daemon(["--token", "tree"]) as d:
        reference = run_scenario([("127.0.0.1", d.port)], "tree")
        other_seed = run_scenario([("127.0.0.1", d.port)], "tree", seed=SEED + 1)
    assert sharded == reference, first_difference(sharded, reference)
    # the seed reaches every sensor's noise, so equal outputs are not equal by accident
    for sensor in reference:
        assert reference[sensor] != other_seed[sensor], sensor
    # and every sensor produced something: clouds with points, IMU samples
    for lidar in LIDARS:
        clouds = [sensim.pb.SensorData.FromString(b).point_cloud for b in sharded[lidar]]
        assert len(clouds) >= 3 and all(pc.count > 1000 for pc in clouds), lidar


def test_the_image_runs_unprivileged_on_a_read_only_root(images, compose):
    config = run("podman", "image", "inspect", "-f",
                 "{{.Config.User}} {{.Config.ExposedPorts}} {{.Config.Healthcheck.Test}}",
                 images[0]).stdout.strip()
    assert config == "10001:10001 map[7700/tcp:{}] [CMD sensimd-entrypoint health]", config
    name = compose.container("sensimd-0")
    assert run("podman", "exec", name, "id", "-u", "-n").stdout.strip() == "sensim"
    # what compose.yaml asks for: a read-only root, no capabilities, no privilege gained
    state = run("podman", "inspect", "-f",
                "{{.HostConfig.ReadonlyRootfs}} {{.EffectiveCaps}} {{.HostConfig.SecurityOpt}}",
                name).stdout.strip()
    assert state == "true [] [no-new-privileges]", state


def test_the_daemons_require_the_token(compose, shards):
    for host, port in shards:
        for token in (None, "not-" + compose.token):
            with pytest.raises(errors.Unauthenticated):
                sensim.Client(host, port, token=token, timeout=10).close()
        with sensim.Client(host, port, token=compose.token, timeout=10) as c:
            c.ping()


def test_the_health_check_answers_while_a_shard_steps(compose, shards):
    # a step of about 1e7 rays keeps the shard's environment busy for seconds; the health
    # check joins an environment of its own and is answered by the network thread
    host, port = shards[0]
    with sensim.Client(host, port, token=compose.token, environment="busy", timeout=300) as c:
        c.create_primitive(1, "sphere", radius=10.0)
        c.create_object(1, 1)
        c.create_lidar(5, livox={"point_rate": 1e8, "frame_rate": 0.05}, publish="per_step",
                       fields=["ring"])
        c.update_state(0.0)
        c.step(0.0)
        c.update_state(0.1)
        done = {}
        stepper = threading.Thread(target=lambda: done.update(reply=c.step(0.1)))
        stepper.start()
        time.sleep(0.5)
        try:
            for service in ("sensimd-0",):
                r = run("podman", "healthcheck", "run", compose.container(service), check=False)
                assert r.returncode == 0, r.stdout + r.stderr
                live = run("podman", "exec", compose.container(service), "sensimd-entrypoint",
                           "health", "--live", check=False)
                assert live.returncode == 0, live.stderr
            assert stepper.is_alive(), "the step ended before the checks: nothing was proven"
        finally:
            stepper.join()
        assert done["reply"].outputs


def test_the_compose_demo_runs_against_the_daemon(compose):
    compose("up", "-d", "sensimd")
    try:
        compose.wait_healthy("sensimd")
        compose("up", "-d", "--no-deps", "demo")
        name = compose.container("demo")
        code = run("podman", "wait", name, timeout=300).stdout.strip()
        logs = run("podman", "logs", name)
        assert code == "0", logs.stdout + logs.stderr
        assert "connected to sensimd" in logs.stdout, logs.stdout
    finally:
        code, log = compose.stop("sensimd")
        assert code == 0 and "stopped cleanly" in log, log
