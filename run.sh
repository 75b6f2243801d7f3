#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# run.sh: build, test and demo entry points. Every command first runs ./setup.sh (the single
# source of truth for dependencies), so each works on a fresh Debian 12 machine.
#
#   ./run.sh demo    build, start sensimd, run the C and Python demo clients, stop
#   ./run.sh test    build + full test suite, then the ASan+UBSan build + full test suite
#   ./run.sh build   build only (into build/)
#   ./run.sh bench   release build, then the benchmarks (ratios against raw Embree and sockets)
#
# Environment: SENSIM_JOBS (parallel build jobs, default: cores), SENSIM_SKIP_SANITIZE=1 to
# skip the sanitizer pass of `test`.
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

run_tests() {  # run_tests DIR
  (cd "$1" && ctest --output-on-failure -j "$jobs")
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
    PYTHONPATH="$here/build-release/python:$here/client-python/src" PYTHONDONTWRITEBYTECODE=1 \
      .venv/bin/python tests/bench/bench_pipelined.py --sensimd ./build-release/server/sensimd \
      --c-loop ./build-release/tests/bench/bench_pipelined
    PYTHONPATH="$here/build-release/python:$here/client-python/src" PYTHONDONTWRITEBYTECODE=1 \
      .venv/bin/python tests/bench/bench_record.py --sensimd ./build-release/server/sensimd
    ;;
  *)
    echo "usage: ./run.sh demo | test | build | bench" >&2
    exit 2
    ;;
esac
