# SPDX-License-Identifier: MIT
"""`pip install ./client-python` into a fresh venv works without the build tree: the package
generates its protocol module from the protocol's single source when it is built, installs
the `sensim` command, its type marker and the Foxglove page, and talks to the real daemon from
a directory outside the repository with no PYTHONPATH. mypy checks a user's script against
the installed package: its type hints pass correct code and catch misuse."""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    if shutil.which("protoc") is None:
        pytest.skip("protoc is not installed (setup.sh: protobuf-compiler)")
    tmp = tmp_path_factory.mktemp("install")
    # a copy, so that the build leaves nothing in the source tree; the protocol link is
    # followed, as a source distribution would hold the file itself
    src = tmp / "client-python"
    shutil.copytree(REPO / "client-python", src, symlinks=False,
                    ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    assert (src / "proto" / "sensim.proto").read_bytes() == \
        (REPO / "proto" / "sensim" / "v1" / "sensim.proto").read_bytes()
    venv = tmp / "venv"
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", str(venv)],
                   check=True)
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "SENSIM_PROTO_DIR", "PYTHONHOME")}
    out = subprocess.run([str(venv / "bin" / "pip"), "install", "--no-build-isolation",
                          "--no-index", "--no-deps", "-q", str(src)],
                         capture_output=True, text=True, env=env, cwd=tmp, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    return venv, env, tmp


def test_installed_package_carries_its_protocol_module(installed, sensimd):
    venv, env, tmp = installed
    code = f"""
import sensim, sensim.presets, pathlib
assert sensim.pb.__name__ == "sensim.sensim_pb2", sensim.pb.__name__
assert "site-packages" in sensim.__file__, sensim.__file__
assert (pathlib.Path(sensim.__file__).parent / "py.typed").is_file()
with sensim.Client(port={sensimd.port}, environment="installed") as c:
    c.create_primitive(1, "sphere", radius=3.0)
    c.create_object(1, 1)
    c.create_lidar(5, preset="os1-16-512")
    for t in (0.0, 0.05, 0.101):
        c.update_state(t)
        done = c.step(t)
    cloud = sensim.outputs(done)[0]
    print(len(cloud.value), cloud.value.dtype.names[-1])
"""
    out = subprocess.run([str(venv / "bin" / "python"), "-c", code], capture_output=True,
                         text=True, env=env, cwd=tmp, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [str(16 * 512), "range"]


def test_installed_command_line(installed, sensimd):
    venv, env, tmp = installed
    out = subprocess.run([str(venv / "bin" / "sensim"), "ping", "--port", str(sensimd.port),
                          "-n", "5"], capture_output=True, text=True, env=env, cwd=tmp,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("5 pings of 0 B to 127.0.0.1:")


def test_installed_package_carries_the_foxglove_page(installed):
    venv, env, tmp = installed
    code = """
import pathlib, sensim.foxglove.hub as hub
print(hub.WEB_DIR, *sorted(p.name for p in hub.WEB_DIR.rglob("*") if p.is_file()))
"""
    out = subprocess.run([str(venv / "bin" / "python"), "-c", code], capture_output=True,
                         text=True, env=env, cwd=tmp, timeout=120)
    assert out.returncode == 0, out.stderr
    where, *files = out.stdout.split()
    assert "site-packages" in where
    want = {"index.html", "view.js"}
    vendor = REPO / "client-python" / "src" / "sensim" / "foxglove" / "web" / "vendor"
    if vendor.is_dir():     # vendored by ./setup.sh (npm), shipped when present
        want |= {p.name for p in vendor.iterdir()}
    assert set(files) == want


def test_installed_sensim_foxglove_serves_the_page_from_the_package(installed, sensimd):
    """`sensim foxglove` of the installed package, run outside the repository, serves the
    page's files from the installed package, byte for byte the files in the source tree."""
    import urllib.request
    from foxglove_support import BridgeProcess
    venv, env, tmp = installed
    web = REPO / "client-python" / "src" / "sensim" / "foxglove" / "web"
    with BridgeProcess(sensimd.port, command=(str(venv / "bin" / "sensim"), "foxglove"),
                       env=env, cwd=str(tmp)) as bridge:
        files = ["index.html", "view.js"] + [f"vendor/{p.name}" for p in
                                             sorted((web / "vendor").glob("*"))]
        for name in files:
            with urllib.request.urlopen(bridge.page_url + name, timeout=10) as r:
                assert r.read() == (web / name).read_bytes(), name


# A user's script typed against the package's hints (no error expected), and misuse mypy must
# report, each on the line marked with the error it gives.
TYPED_SCRIPT = """
import numpy as np
import sensim
from sensim import export, plot, presets
from sensim.bag import BagWriter
from sensim.lockstep import LockStep, StepResult


def run(port: int) -> float:
    with sensim.Client(port=port, environment="typed") as c:
        c.create_lidar(5, preset="vlp16")
        with LockStep(c, depth=4, outputs=[5, 7]) as sim:
            results: list[StepResult] = list(sim.run([0.001, 0.002]))
            sim.submit(0.003, body_ids=[1], body_poses=np.zeros((1, 7)), outputs="none")
    imu = results[-1][7][0].value
    assert isinstance(imu, sensim.ImuSample) and imu.acceleration is not None
    cloud = results[-1][5][0]
    shape: tuple[int, int] = cloud.meta.shape if cloud.meta is not None else (1, 0)
    export.write_pcd("a.pcd", cloud.value, binary=False, shape=shape)
    n: int = export.write_xyz("a.xyz", np.zeros((3, 3)))
    plot.save_cloud("a.png", cloud.value, view="top")
    with BagWriter("a.bag") as bag:
        bag.write(cloud)
    print(presets.get("os1-64-1024").params, n)
    with sensim.Client(port=port, environment="typed") as c:
        done: sensim.StepDone = c.step(0.004, outputs=[7])
        samples: list[sensim.SensorOutput] = done[7] + done.records + done.by_sensor()[7]
        index: int = done.step + done.outputs_in_parts + len(done.outputs) + len(samples)
    return results[-1].time + float(imu.acceleration[2]) + done.time + index
"""
MISUSE = [
    ("LockStep(c, depth='4')", 'Argument "depth" to "LockStep" has incompatible type "str"'),
    ("LockStep(c).drain()[0].time.upper()", '"float" has no attribute "upper"'),
    ("export.write_xyz('a.xyz', [], keep_misses=None)", 'incompatible type "None"'),
    ("sensim.outputs(c.step(0.1))[0].meta.shape", 'Item "None" of "Optional[CloudMeta]"'),
    ("c.step(0.1).time.upper() + c.step(0.2)[5][0].kind", '"float" has no attribute "upper"'),
    ("presets.get('vlp16').kwargs()['x'] + sensim.load_mesh(1.5).vertices",
     'Argument 1 to "load_mesh" has incompatible type "float"'),
]


def test_type_hints_serve_a_users_script(installed):
    venv, env, tmp = installed
    try:
        import mypy  # noqa: F401  (Debian python3-mypy, from setup.sh)
    except ImportError:
        pytest.skip("mypy is not installed (setup.sh: python3-mypy)")
    good = tmp / "typed_user.py"
    good.write_text(TYPED_SCRIPT)
    bad = tmp / "misuse.py"
    bad.write_text("import sensim\nfrom sensim import export, presets\n"
                   "from sensim.lockstep import LockStep\n\n\n"
                   "def f(c: sensim.Client) -> None:\n"
                   + "".join(f"    {line}\n" for line, _ in MISUSE))
    cmd = ["/usr/bin/python3", "-m", "mypy", "--python-executable", str(venv / "bin" / "python"),
           "--no-incremental", "--cache-dir", str(tmp / "mypy-cache"), "--strict-optional",
           "--disallow-untyped-calls", "--warn-unused-ignores", "--no-error-summary"]
    out = subprocess.run(cmd + [good.name], capture_output=True, text=True, env=env, cwd=tmp,
                         timeout=600)
    assert out.returncode == 0 and out.stdout == "", out.stdout + out.stderr
    out = subprocess.run(cmd + [bad.name], capture_output=True, text=True, env=env, cwd=tmp,
                         timeout=600)
    errors = [line for line in out.stdout.splitlines() if ": error: " in line]
    first = 7                                   # the line of MISUSE[0] in misuse.py
    for k, (line, message) in enumerate(MISUSE):
        on_line = [e for e in errors if e.startswith(f"misuse.py:{first + k}:")]
        assert any(message in e for e in on_line), (line, message, out.stdout)
    assert len({e.split(":")[1] for e in errors}) == len(MISUSE), out.stdout


def test_source_checkout_finds_the_built_module():
    """In the repository (PYTHONPATH = build/python + client-python/src, as ctest sets it) the
    module generated by CMake is used, never a second copy."""
    out = subprocess.run([sys.executable, "-c", "import sensim; print(sensim.pb.__file__)"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert not out.stdout.strip().startswith(str(REPO / "client-python"))
