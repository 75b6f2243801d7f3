#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# run.sh: build, test and demo entry points. Every command first runs ./setup.sh (the single
# source of truth for dependencies), so each works on a fresh Debian 12 machine.
#
#   ./run.sh demo    build, start sensimd, run the C and Python demo clients, stop
#   ./run.sh test    build + full test suite, then the ASan+UBSan build + full test suite, then
#                    each fuzz target for a bounded time (clang, ASan+UBSan), then the threaded
#                    tests under ThreadSanitizer
#   ./run.sh build   build only (into build/)
#   ./run.sh bench   release build, then the benchmarks (ratios against raw Embree and sockets)
#   ./run.sh fuzz [SECONDS]            each fuzz target SECONDS (default 300), corpora kept in
#                                      build-fuzz/corpus, crashing inputs in build-fuzz/crashes
#   ./run.sh soak [SECONDS [CYCLES]]   the fault soak (tests/python/test_soak.py) at length:
#                                      default 600 s and 100000 connect/subscribe cycles
#
# Environment: SENSIM_JOBS (parallel build jobs, default: cores); for `test`:
# SENSIM_SKIP_SANITIZE=1, SENSIM_SKIP_FUZZ=1, SENSIM_SKIP_TSAN=1 skip a pass;
# SENSIM_FUZZ_SECONDS (default 30) is each fuzz target's time.
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
    PYTHONPATH="$here/build-release/python:$here/client-python/src" PYTHONDONTWRITEBYTECODE=1 \
      .venv/bin/python tests/bench/bench_imu.py --sensimd ./build-release/server/sensimd
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
    echo "usage: ./run.sh demo | test | build | bench | fuzz [SECONDS] |" \
      "soak [SECONDS [CYCLES]]" >&2
    exit 2
    ;;
esac
