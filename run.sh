#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# run.sh: build, test and demo entry points. Every command first runs ./setup.sh (the single
# source of truth for dependencies), so each works on a fresh Debian 12 machine.
#
#   ./run.sh demo    build, start sensimd, drive the MuJoCo vehicle scene through the bridge while
#                    a Python subscriber records; pictures and clouds in build/demo/, stop
#   ./run.sh demo --view [HOST:PORT]   the same, then keep a vehicle driving with the
#                    Foxglove bridge on (default 127.0.0.1:8765) until Ctrl-C
#   ./run.sh test    build + full test suite, the geometry and lidar tests again on Embree's
#                    AVX2 kernels, the Release build with the benchmarks' quick cross-checks,
#                    the ASan+UBSan build + full test suite, each fuzz target for
#                    a bounded time (clang, ASan+UBSan), the threaded tests under ThreadSanitizer
#   ./run.sh build   build only (into build/)
#   ./run.sh bench   release build, then the benchmarks (ratios against raw Embree and sockets)
#   ./run.sh fuzz [SECONDS]            each fuzz target SECONDS (default 300), corpora kept in
#                                      build-fuzz/corpus, crashing inputs in build-fuzz/crashes
#   ./run.sh soak [SECONDS [CYCLES]]   the fault soak (tests/python/test_soak.py) at length:
#                                      default 600 s and 100000 connect/subscribe cycles
#   ./run.sh containers  the deployment for real (docs/deploy.md), as root: a debian:12 base
#                    image from Debian's packages, the image built from a clean clone with
#                    buildah, three daemons from it with podman-compose, checked against the
#                    tree's daemon; and the manifest checks
#
# Environment: SENSIM_JOBS (parallel build jobs, default: cores); for `test`:
# SENSIM_SKIP_SANITIZE=1, SENSIM_SKIP_FUZZ=1, SENSIM_SKIP_TSAN=1 skip a pass;
# SENSIM_FUZZ_SECONDS (default 30) is each fuzz target's time; SENSIM_DEMO_SECONDS (simulated
# seconds of the demo, 4); for `containers`, SENSIM_DEBIAN_MIRROR and SENSIM_DEBIAN_SECURITY
# (the base image's sources; default deb.debian.org).
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

# The fuzz targets (tests/fuzz) and their longest input.
fuzz_targets=(frame request codec client)
fuzz_max_len() {
  case "$1" in
    request) echo 16384 ;;
    *) echo 65536 ;;
  esac
}


fuzz() {  # fuzz SECONDS: every target for SECONDS in build-fuzz; fails if one crashed
  local seconds="$1" dir=build-fuzz status=0
  build "$dir" -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSENSIM_SANITIZE=ON \
    -DSENSIM_FUZZ=ON -DSENSIM_TESTS=OFF
  for t in "${fuzz_targets[@]}"; do
    mkdir -p "$dir/corpus/$t" "$dir/crashes/$t"
    local log="$dir/fuzz_$t.log"
    # new inputs go to the first directory, the corpus kept between runs
    if UBSAN_OPTIONS="suppressions=$here/tests/fuzz/ubsan.supp:halt_on_error=1:print_stacktrace=1" \
        "./$dir/tests/fuzz/fuzz_$t" -max_total_time="$seconds" -timeout=30 -rss_limit_mb=2048 \
        -max_len="$(fuzz_max_len "$t")" -print_final_stats=1 -artifact_prefix="$dir/crashes/$t/" \
        "$dir/corpus/$t" "$dir/tests/fuzz/seeds/$t" "tests/fuzz/regress/$t" >"$log" 2>&1; then
      echo "== fuzz_$t: $(sed -n 's/^stat::number_of_executed_units: *//p' "$log") executions" \
        "in ${seconds} s, corpus $(find "$dir/corpus/$t" -type f | wc -l) inputs, no crash"
    else
      tail -n 60 "$log"
      echo "== fuzz_$t: FAILED; the input is in $dir/crashes/$t/, the log in $log" >&2
      status=1
    fi
  done
  return "$status"
}


# The threaded tests under ThreadSanitizer: the worker pool, the executors and the server, and
# the integration tests that drive the daemon's threads (executors, sessions, and a short fault
# soak for the streams); not those that bound time or memory, which ThreadSanitizer inflates.
# Embree and TBB are not instrumented: tests/tsan/suppressions.txt says what that hides.
tsan_tests='^unit/test_(pool|exec|server)$'
tsan_tests+='|^python/test_(execution|session|half_close|client_python|imu|environment'
tsan_tests+='|c_client|soak)$'

tsan() {
  build build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSENSIM_TSAN=ON
  local options="suppressions=$here/tests/tsan/suppressions.txt:halt_on_error=1"
  (cd build-tsan &&
    TSAN_OPTIONS="$options:second_deadlock_stack=1" SENSIM_SOAK_SECONDS=15 \
      SENSIM_SOAK_CYCLES=1000 ctest --output-on-failure -j "$jobs" -R "$tsan_tests")
}


demo() {  # demo [--view [HOST:PORT]]
  local view=()
  if [ "${1:-}" = --view ]; then
    view=(--view "${2:-127.0.0.1:8765}")
  elif [ -n "${1:-}" ]; then
    echo "usage: ./run.sh demo [--view [HOST:PORT]]" >&2
    exit 2
  fi
  build build -DCMAKE_BUILD_TYPE=RelWithDebInfo
  local log
  log="$(mktemp)"
  # In a session of its own: the Ctrl-C that ends `demo --view` must not stop the daemon
  # before the demo has finished with it (sensimd stops on SIGINT).
  setsid ./build/server/sensimd --listen 127.0.0.1:0 >"$log" 2>&1 &
  demo_pid=$!   # global: the EXIT trap may run after this function has returned
  trap 'kill "$demo_pid" 2>/dev/null || true' EXIT
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
  echo "== MuJoCo drives client-c/mujoco/scenes/vehicle.xml through sensim-mujoco;" \
       "client-python/examples/mujoco_demo.py records its lidars and IMU:"
  PYTHONPATH="$here/build/python" .venv/bin/python client-python/examples/mujoco_demo.py \
    --port "$port" --bridge build/client-c/sensim-mujoco --out build/demo \
    --seconds "${SENSIM_DEMO_SECONDS:-4}"
  if [ "${#view[@]}" -gt 0 ]; then
    # MuJoCo goes on driving the vehicle in real time in an environment of its own, and the
    # Foxglove bridge finds its sensors and bodies (Describe) and serves them; Ctrl-C (or
    # SENSIM_VIEW_SECONDS of wall time) ends the bridge, then the simulation is stopped.
    echo "== live view: sensim-mujoco drives the vehicle in real time; Ctrl-C ends it"
    ./build/client-c/sensim-mujoco client-c/mujoco/scenes/vehicle.xml --port "$port" \
      --environment live --realtime 1 --seconds 86400 --quiet &
    local sim=$!
    local limit=()
    if [ -n "${SENSIM_VIEW_SECONDS:-}" ]; then
      limit=(timeout -s INT "$SENSIM_VIEW_SECONDS")
    fi
    "${limit[@]}" env PYTHONPATH="$here/build/python:$here/client-python/src" \
      .venv/bin/python -m sensim.foxglove --port "$port" --environment live \
      --listen "${view[1]}" || true
    kill -TERM "$sim" 2>/dev/null || true
    wait "$sim" 2>/dev/null || true
  fi
  kill -TERM "$demo_pid"
  wait "$demo_pid"
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
    demo "${@:2}"
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
    # the build of `./run.sh bench` (-O3 warns where -O2 does not) and its benchmarks' quick
    # cross-checks
    echo "== Release build and the benchmarks' cross-checks (label bench)"
    build build-release -DCMAKE_BUILD_TYPE=Release
    run_tests build-release -L bench
    if [ "${SENSIM_SKIP_SANITIZE:-0}" != 1 ]; then
      echo "== sanitizer build (ASan + UBSan)"
      build build-asan -DCMAKE_BUILD_TYPE=Debug -DSENSIM_SANITIZE=ON
      ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
        run_tests build-asan
    fi
    if [ "${SENSIM_SKIP_FUZZ:-0}" != 1 ]; then
      echo "== fuzz targets (clang, ASan + UBSan), ${SENSIM_FUZZ_SECONDS:-30} s each"
      fuzz "${SENSIM_FUZZ_SECONDS:-30}"
    fi
    if [ "${SENSIM_SKIP_TSAN:-0}" != 1 ]; then
      echo "== ThreadSanitizer build (threaded tests)"
      tsan
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
    ./build-release/tests/bench/bench_step
    ./build-release/tests/bench/bench_client --sensimd ./build-release/server/sensimd
    ./build-release/tests/bench/bench_shard --sensimd ./build-release/server/sensimd
    if [ -x ./build-release/tests/bench/bench_mujoco ]; then
      ./build-release/tests/bench/bench_mujoco --sensimd ./build-release/server/sensimd
    fi
    PYTHONPATH="$here/build-release/python:$here/client-python/src" PYTHONDONTWRITEBYTECODE=1 \
      .venv/bin/python tests/bench/bench_imu.py --sensimd ./build-release/server/sensimd
    PYTHONPATH="$here/build-release/python:$here/client-python/src" PYTHONDONTWRITEBYTECODE=1 \
      .venv/bin/python tests/bench/bench_shard.py --sensimd ./build-release/server/sensimd
    PYTHONPATH="$here/build-release/python:$here/client-python/src" PYTHONDONTWRITEBYTECODE=1 \
      .venv/bin/python tests/bench/bench_foxglove.py --sensimd ./build-release/server/sensimd
    PYTHONPATH="$here/build-release/python:$here/client-python/src" PYTHONDONTWRITEBYTECODE=1 \
      .venv/bin/python tests/bench/bench_pipelined.py --sensimd ./build-release/server/sensimd \
      --c-loop ./build-release/tests/bench/bench_pipelined
    PYTHONPATH="$here/build-release/python:$here/client-python/src" PYTHONDONTWRITEBYTECODE=1 \
      .venv/bin/python tests/bench/bench_record.py --sensimd ./build-release/server/sensimd
    ;;
  containers)
    ./setup.sh
    ./setup.sh --containers
    build build -DCMAKE_BUILD_TYPE=RelWithDebInfo
    containers
    ;;
  fuzz)
    ./setup.sh
    fuzz "${2:-300}"
    ;;
  soak)
    ./setup.sh
    build build -DCMAKE_BUILD_TYPE=RelWithDebInfo
    (cd tests/python &&
      SENSIM_SOAK_SECONDS="${2:-600}" SENSIM_SOAK_CYCLES="${3:-100000}" \
        SENSIMD="$here/build/server/sensimd" PYTHONDONTWRITEBYTECODE=1 \
        PYTHONPATH="$here/build/python:$here/client-python/src" \
        "$here/.venv/bin/python" -m pytest -q -p no:cacheprovider test_soak.py)
    ;;
  *)
    echo "usage: ./run.sh demo [--view [HOST:PORT]] | test | build | bench | fuzz [SECONDS] |" \
      "soak [SECONDS [CYCLES]] | containers" >&2
    exit 2
    ;;
esac
