#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# run.sh: build, test and demo entry points. Every command first runs ./setup.sh (the single
# source of truth for dependencies), so each works on a fresh Debian 12 machine.
#
#   ./run.sh demo    build, start sensimd, run the C and Python demo clients, stop
#   ./run.sh test    build + full test suite, the geometry and lidar tests again on Embree's
#                    AVX2 kernels, then the ASan+UBSan build + full test suite
#   ./run.sh build   build only (into build/)
#   ./run.sh bench   release build, then the benchmarks (ratios against raw Embree and sockets)
#   ./run.sh containers  the deployment for real (docs/deploy.md), as root: a debian:12 base
#                    image from Debian's packages, the image built from a clean clone with
#                    buildah, three daemons from it with podman-compose, checked against the
#                    tree's daemon; and the manifest checks
#
# Environment: SENSIM_JOBS (parallel build jobs, default: cores), SENSIM_SKIP_SANITIZE=1 to
# skip the sanitizer pass of `test`; for `containers`, SENSIM_DEBIAN_MIRROR and
# SENSIM_DEBIAN_SECURITY (the base image's sources; default deb.debian.org).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"
jobs="${SENSIM_JOBS:-$(nproc)}"

build() {  # build DIR [cmake args...]
  local dir="$1"
  shift
  cmake -S . -B "$dir" -DSENSIM_PYTHON="$here/.venv/bin/python" "$@" >/dev/null
  cmake --build "$dir" -j "$jobs"
}

run_tests() {  # run_tests DIR [ctest args...]
  local dir="$1"
  shift
  (cd "$dir" && ctest --output-on-failure -j "$jobs" "$@")
}

demo() {
  build build -DCMAKE_BUILD_TYPE=RelWithDebInfo
  local log
  log="$(mktemp)"
  ./build/server/sensimd --listen 127.0.0.1:0 >"$log" 2>&1 &
  local pid=$!
  trap 'kill "$pid" 2>/dev/null || true' EXIT
  local port=""
  for _ in $(seq 1 100); do
    port="$(sed -n 's/^sensimd listening on 127\.0\.0\.1:\([0-9]*\)$/\1/p' "$log")"
    [ -n "$port" ] && break
    sleep 0.1
  done
  if [ -z "$port" ]; then
    echo "run.sh: sensimd did not start:" >&2
    cat "$log" >&2
    exit 1
  fi
  echo "== sensimd is listening on 127.0.0.1:$port"
  echo "== C client (client-c/examples/info.c):"
  ./build/client-c/sensim_info 127.0.0.1 "$port"
  echo "== Python client (client-python/examples/demo.py):"
  PYTHONPATH="$here/build/python" .venv/bin/python client-python/examples/demo.py \
    --port "$port"
  kill -TERM "$pid"
  wait "$pid"
  trap - EXIT
  echo "== sensimd stopped cleanly"
}

# A debian:12 image without a registry: debootstrap from the Debian mirror, imported into the
# local store as localhost/debian:12, which `FROM debian:12` then finds (buildah --pull=never).
base_image() {
  if podman image exists localhost/debian:12; then
    echo "== base image localhost/debian:12 is present (podman rmi it to make it anew)"
    return
  fi
  local mirror="${SENSIM_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
  local security="${SENSIM_DEBIAN_SECURITY:-http://deb.debian.org/debian-security}"
  local root
  root="$(mktemp -d)"
  # every path below is inside the new root: never let an empty variable point them at /
  if [ -z "$root" ] || [ "$root" = / ]; then
    echo "run.sh: mktemp gave no directory" >&2
    exit 1
  fi
  echo "== debootstrap bookworm from $mirror (minutes)"
  if ! debootstrap --variant=minbase bookworm "$root" "$mirror" >"$root.log" 2>&1; then
    tail -20 "$root.log" >&2
    exit 1
  fi
  # the sources of Debian's own image: the release, its updates and the security archive
  rm -f "$root/etc/apt/sources.list"
  printf 'Types: deb\nURIs: %s\nSuites: bookworm bookworm-updates\nComponents: main\n%s\n\n' \
    "$mirror" "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg" \
    >"$root/etc/apt/sources.list.d/debian.sources"
  printf 'Types: deb\nURIs: %s\nSuites: bookworm-security\nComponents: main\n%s\n' \
    "$security" "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg" \
    >>"$root/etc/apt/sources.list.d/debian.sources"
  rm -rf "${root:?}/var/lib/apt/lists/"* "${root:?}/var/cache/apt/"*.bin
  tar -C "$root" --numeric-owner -cf - . |
    podman import --change 'CMD ["bash"]' - localhost/debian:12 >/dev/null
  rm -rf "${root:?}" "$root.log"
  echo "== base image localhost/debian:12 imported"
}


# The image from a clean clone, three daemons from it, the shard scenario against them and
# against the tree's daemon (tests/python/test_deploy_containers.py); the manifest checks.
containers() {
  if [ "$(id -u)" -ne 0 ]; then
    echo "run.sh: containers runs as root (debootstrap, buildah and podman here)" >&2
    exit 1
  fi
  # the tools' settings for this kind of machine (docker/containers.conf says why)
  export CONTAINERS_CONF="$here/docker/containers.conf"
  base_image
  SENSIM_CONTAINERS=1 SENSIMD="$here/build/server/sensimd" \
    PYTHONPATH="$here/build/python:$here/client-python/src" PYTHONDONTWRITEBYTECODE=1 \
    .venv/bin/python -m pytest -q -p no:cacheprovider -rs \
    tests/python/test_deploy_containers.py tests/python/test_deploy_config.py
}


cmd="${1:-}"
case "$cmd" in
  demo)
    ./setup.sh
    demo
    ;;
  test)
    ./setup.sh
    build build -DCMAKE_BUILD_TYPE=RelWithDebInfo
    run_tests build
    # the geometry and lidar tests (label isa) again with Embree and the core's own kernels
    # forced onto AVX2, as on a CPU without AVX-512: tolerances must not depend on the ISA
    echo "== geometry and lidar tests on AVX2 kernels (SENSIM_EMBREE_CONFIG=isa=avx2" \
      "SENSIM_SIMD=avx2)"
    SENSIM_EMBREE_CONFIG=isa=avx2 SENSIM_SIMD=avx2 run_tests build -L isa
    if [ "${SENSIM_SKIP_SANITIZE:-0}" != 1 ]; then
      echo "== sanitizer build (ASan + UBSan)"
      build build-asan -DCMAKE_BUILD_TYPE=Debug -DSENSIM_SANITIZE=ON
      ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
        run_tests build-asan
    fi
    ;;
  build)
    ./setup.sh
    build build -DCMAKE_BUILD_TYPE=RelWithDebInfo
    ;;
  bench)
    ./setup.sh
    build build-release -DCMAKE_BUILD_TYPE=Release
    ./build-release/tests/bench/bench_raycast
    ./build-release/tests/bench/bench_lidar
    ./build-release/tests/bench/bench_codec
    ./build-release/tests/bench/bench_streams --sensimd ./build-release/server/sensimd
    ./build-release/tests/bench/bench_session ./build-release/server/sensimd
    ./build-release/tests/bench/bench_imu --sensimd ./build-release/server/sensimd
    ./build-release/tests/bench/bench_client --sensimd ./build-release/server/sensimd
    PYTHONPATH="$here/build-release/python:$here/client-python/src" PYTHONDONTWRITEBYTECODE=1 \
      .venv/bin/python tests/bench/bench_imu.py --sensimd ./build-release/server/sensimd
    ;;
  containers)
    ./setup.sh
    ./setup.sh --containers
    build build -DCMAKE_BUILD_TYPE=RelWithDebInfo
    containers
    ;;
  *)
    echo "usage: ./run.sh demo | test | build | bench | containers" >&2
    exit 2
    ;;
esac
