# SPDX-License-Identifier: MIT
"""The C client as a user installs it: `cmake --install` of the build (component `client`) into a
temporary prefix, then the examples built against that prefix alone, as a separate project,
three ways: CMake's find_package(sensim) with sensim::client (shared) and with
sensim::client_static, and pkg-config. The programs built each way run against the real
sensimd. The package must resolve the client's own dependencies (nanopb, zstd): the user
names none of them."""

from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]


def build_dir(examples_dir: pathlib.Path) -> pathlib.Path:
    build = examples_dir.parent
    if not (build / "CMakeCache.txt").is_file():
        pytest.fail(f"{build} is not a CMake build directory", pytrace=False)
    return build


def sanitizer_flags(build: pathlib.Path) -> list[str]:
    """The compile and link flags of a sanitizer build: its library needs them in the
    programs that link it."""
    cache = (build / "CMakeCache.txt").read_text()
    if re.search(r"^SENSIM_SANITIZE:BOOL=ON$", cache, re.M):
        return ["-fsanitize=address,undefined"]
    return []


def sh(*cmd, env=None, cwd=None, timeout=600):
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, env=env, cwd=cwd,
                       timeout=timeout)
    assert r.returncode == 0, f"{' '.join(map(str, cmd))} failed:\n{r.stdout}\n{r.stderr}"
    return r.stdout


@pytest.fixture(scope="module")
def prefix(tmp_path_factory):
    """The client installed from this build into a fresh prefix."""
    build = build_dir(pathlib.Path(os.environ.get("SENSIM_EXAMPLES_DIR") or
                                   REPO / "build" / "client-c"))
    dest = tmp_path_factory.mktemp("prefix")
    sh("cmake", "--install", build, "--component", "client", "--prefix", dest)
    return dest, build


def libdir(dest: pathlib.Path) -> pathlib.Path:
    found = sorted(dest.glob("lib*/**/libsensim.so")) + sorted(dest.glob("lib*/libsensim.so"))
    assert found, f"no libsensim.so under {dest}"
    return found[0].parent


def test_install_lays_out_a_package(prefix):
    dest, _ = prefix
    lib = libdir(dest)
    assert (dest / "include" / "sensim" / "sensim.h").is_file()
    assert (lib / "libsensim.a").is_file()
    assert os.path.islink(lib / "libsensim.so")
    assert list(lib.glob("libsensim.so.0*"))
    assert (lib / "pkgconfig" / "sensim.pc").is_file()
    assert (lib / "cmake" / "sensim" / "sensimConfig.cmake").is_file()
    assert (lib / "cmake" / "sensim" / "sensimConfigVersion.cmake").is_file()
    # nothing of the build tree leaks into the package (it must work once the build is gone)
    for f in (lib / "cmake" / "sensim").glob("*.cmake"):
        assert str(REPO) not in f.read_text(), f
    assert str(REPO) not in (lib / "pkgconfig" / "sensim.pc").read_text()
    # the shared library needs only libzstd of the client's dependencies (nanopb is inside)
    needed = sh("readelf", "-d", lib / "libsensim.so")
    assert "libzstd.so" in needed
    assert "nanopb" not in needed
    exported = sh("nm", "-D", "--defined-only", lib / "libsensim.so")
    names = re.findall(r"^[0-9a-f]+ [A-Za-z] (\S+)$", exported, re.M)
    assert names and all(n.startswith("sensim_") for n in names), names


@pytest.mark.parametrize("static", [False, True], ids=["shared", "static"])
def test_examples_build_with_find_package(prefix, tmp_path, sensimd, static):
    dest, build = prefix
    flags = " ".join(sanitizer_flags(build))
    out = tmp_path / "examples"
    sh("cmake", "-S", REPO / "client-c" / "examples", "-B", out, f"-DCMAKE_PREFIX_PATH={dest}",
       f"-DSENSIM_EXAMPLES_STATIC={'ON' if static else 'OFF'}", f"-DCMAKE_C_FLAGS={flags}",
       f"-DCMAKE_EXE_LINKER_FLAGS={flags}")
    sh("cmake", "--build", out, "-j2")

    # run them: a shared build finds the library through its install RPATH or LD_LIBRARY_PATH
    env = dict(os.environ, LD_LIBRARY_PATH=str(libdir(dest)))
    env.pop("SENSIM_TOKEN", None)
    info = sh(out / "sensim_info", "127.0.0.1", sensimd.port, env=env)
    with sensimd.client() as c:
        assert c.server_version in info
    ray = sh(out / "sensim_raycast", "--port", sensimd.port, env=env)
    assert re.search(r"^ray sphere distance 4 object 2 label 2", ray, re.M), ray
    if static:
        linked = sh("readelf", "-d", out / "sensim_info")
        assert "libsensim" not in linked


def test_examples_build_with_pkg_config(prefix, tmp_path, sensimd):
    dest, build = prefix
    if not shutil.which("pkg-config"):
        pytest.skip("pkg-config is not installed")
    env = dict(os.environ, PKG_CONFIG_PATH=str(libdir(dest) / "pkgconfig"))
    cflags = sh("pkg-config", "--cflags", "sensim", env=env).split()
    libs = sh("pkg-config", "--libs", "sensim", env=env).split()
    assert any(f.startswith("-I") and f.endswith("include") for f in cflags), cflags
    assert "-lsensim" in libs
    static_libs = sh("pkg-config", "--static", "--libs", "sensim", env=env).split()
    assert "-lprotobuf-nanopb" in static_libs and "-lzstd" in static_libs, static_libs
    flags = sanitizer_flags(build)
    exe = tmp_path / "sensim_info_pc"
    sh("cc", "-std=c11", "-Wall", "-Wextra", "-Werror", *flags, REPO / "client-c" / "examples" /
       "info.c", "-o", exe, *cflags, *libs)
    # the static library with the dependencies pkg-config names for it
    exe_static = tmp_path / "sensim_info_pc_static"
    sh("cc", "-std=c11", *flags, REPO / "client-c" / "examples" / "info.c", "-o", exe_static,
       *cflags, str(libdir(dest) / "libsensim.a"),
       *[f for f in static_libs if f not in ("-lsensim",) and not f.startswith("-L")])
    run_env = dict(os.environ, LD_LIBRARY_PATH=str(libdir(dest)))
    run_env.pop("SENSIM_TOKEN", None)
    for program in (exe, exe_static):
        out = sh(program, "127.0.0.1", sensimd.port, env=run_env)
        assert "protocol version" in out and "frames_in" in out
