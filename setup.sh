#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# setup.sh: the single source of truth for sensim's dependencies.
#
# Installs every system package the build, the tests and the demo need (Debian 12 packages
# only), then prepares the Python environment for client-python: a venv made from Debian's
# /usr/bin/python3 with system site packages, so numpy, protobuf and zstandard come from Debian.
# Idempotent: a second run installs nothing and finishes in seconds.
#
# Usage: ./setup.sh [--system-only | --venv-only | --runtime-only | --containers | --web-only]
#   (no option)     build, test and demo packages, then the venv
#   --system-only   build, test and demo packages only
#   --venv-only     the venv only
#   --runtime-only  only the shared libraries sensimd runs on (the image's runtime stage)
#   --containers    the container and deployment tools of `./run.sh containers` (buildah,
#                   podman, podman-compose, debootstrap) and the Kubernetes schema validator
#                   (npm packages pinned in docker/k8s/validate); `./run.sh test` needs none
#   --web-only      the npm packages of the Foxglove page and its tests (below)
#
# The Foxglove bridge's page and its tests need packages from the npm registry (Node 20 and npm
# must be on PATH): web/ (three.js, copied into the Python package's served folder) and
# tests/web/ (the test clients), each installed with `npm ci` from its lock file, again only
# when the lock file changes.
#
#   Environment: SENSIM_VENV (default: .venv in the repository root).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="${SENSIM_VENV:-$here/.venv}"
mode="${1:-all}"

# Build toolchain, libraries of the daemon and the C client, code generators, Python runtime,
# and clang with its runtimes for the fuzz targets.
packages=(
  build-essential cmake pkg-config git
  libuv1-dev
  libprotobuf-c-dev protobuf-c-compiler
  nanopb libnanopb-dev
  protobuf-compiler
  libembree-dev
  libzstd-dev
  libdraco-dev
  python3 python3-venv python3-protobuf python3-zstandard python3-numpy python3-pytest
  python3-yaml
  # the Foxglove bridge (client-python/src/sensim/foxglove) serves WebSockets with the
  # websockets library; its page is tested in headless Chromium (screenshots read with Pillow)
  python3-websockets chromium python3-pil
  # client-python's tools: pip install of the package (setuptools, wheel; no network), mesh
  # files (meshio), pictures (matplotlib), ROS 1 bags (rosbag, sensor_msgs; sensor_msgs'
  # point_cloud2 imports roslib, which apt does not pull in), the independent readers the
  # tests check exported files with (Open3D, PCL's command-line tools), and mypy, which checks
  # that the package's type hints serve a user's code
  python3-pip python3-setuptools python3-wheel
  python3-meshio python3-matplotlib
  python3-rosbag python3-sensor-msgs python3-roslib
  python3-open3d pcl-tools python3-mypy
  # the MuJoCo bridge (client-c/mujoco/); the pictures of ./run.sh demo use matplotlib (above)
  libmujoco-dev
  clang libclang-rt-14-dev    # the fuzz targets (libFuzzer; ./run.sh fuzz, the fuzz pass of test)
  # the driver-layout tests read clouds back with ROS's own reader (sensor_msgs' point_cloud2
  # imports roslib, which apt does not pull in)
  python3-sensor-msgs python3-roslib
)

# What sensimd and the health probe link against at run time: the runtime stage of
# docker/Dockerfile installs exactly these (keep them next to their -dev packages above).
runtime_packages=(
  libuv1
  libprotobuf-c1
  libembree3-3
  libzstd1
)

# Building and running the images and checking the manifests (docker/, docs/deploy.md); the
# dnsname plugin lets compose services find each other by name on podman's networks.
container_packages=(
  buildah podman podman-compose runc debootstrap
  golang-github-containernetworking-plugin-dnsname
  nodejs
)

as_root() {
  if [ "$(id -u)" -eq 0 ]; then
    "$@"
  elif command -v sudo >/dev/null 2>&1; then
    sudo "$@"
  else
    echo "setup.sh: need root (or sudo) to install packages: $*" >&2
    exit 1
  fi
}

install_system() {  # install_system PACKAGE...
  local missing=()
  for p in "$@"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
      missing+=("$p")
    fi
  done
  if [ "${#missing[@]}" -eq 0 ]; then
    echo "setup.sh: system packages already installed"
    return
  fi
  echo "setup.sh: installing ${missing[*]}"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
    "${missing[@]}"
}


install_containers() {
  install_system "${container_packages[@]}"
  # Node may come from elsewhere than Debian (with its own npm); Debian's npm only if none.
  command -v npm >/dev/null 2>&1 || install_system npm
  # The schema validator: versions pinned by the lock file, installed next to it.
  local dir="$here/docker/k8s/validate"
  if [ ! -d "$dir/node_modules" ] || [ "$dir/package-lock.json" -nt "$dir/node_modules" ]; then
    echo "setup.sh: installing the Kubernetes schema validator into $dir/node_modules"
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
    touch "$dir/node_modules"
  fi
}

install_venv() {
  # The python3 first on PATH may be a private build that cannot see Debian's packages.
  if [ ! -x "$venv/bin/python" ]; then
    echo "setup.sh: creating venv $venv"
    /usr/bin/python3 -m venv --system-site-packages "$venv"
  fi
  # The client is pure Python; its generated protobuf modules come from the CMake build and
  # are found through the path file written by the build (see client-python/README.md).
  "$venv/bin/python" - "$here/client-python/src" <<'PY'
import pathlib, site, sys
src = pathlib.Path(sys.argv[1]).resolve()
pth = pathlib.Path(site.getsitepackages()[0]) / "sensim-client.pth"
if not pth.exists() or pth.read_text().strip() != str(src):
    pth.write_text(str(src) + "\n")
    print(f"setup.sh: client-python installed into the venv ({pth})")
PY
  "$venv/bin/python" -c 'import numpy, google.protobuf, zstandard, pytest, websockets' \
    || { echo "setup.sh: the venv cannot import its Debian packages" >&2; exit 1; }
}

npm_ci() {  # npm_ci DIR: `npm ci` in DIR unless node_modules was installed from this lock file
  local dir="$here/$1" stamp sum
  stamp="$dir/node_modules/.sensim-lock.sha256"
  sum="$(sha256sum "$dir/package-lock.json" | cut -d' ' -f1)"
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$sum" ]; then
    return
  fi
  echo "setup.sh: npm ci in $1"
  (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
  echo "$sum" >"$stamp"
}

install_web() {
  if ! command -v npm >/dev/null 2>&1; then
    echo "setup.sh: npm not found: the Foxglove page and its tests need Node 20 and npm" >&2
    exit 1
  fi
  npm_ci web
  npm_ci tests/web
  # three.js is served by the bridge from the package's own folder, never fetched at run time:
  # the module, its core, the orbit controls and the licence.
  local vendor="$here/client-python/src/sensim/foxglove/web/vendor" f
  mkdir -p "$vendor"
  for f in build/three.module.js build/three.core.js examples/jsm/controls/OrbitControls.js \
    LICENSE; do
    if ! cmp -s "$here/web/node_modules/three/$f" "$vendor/${f##*/}"; then
      cp "$here/web/node_modules/three/$f" "$vendor/${f##*/}"
    fi
  done
}

case "$mode" in
  all) install_system "${packages[@]}"; install_venv; install_web ;;
  --system-only) install_system "${packages[@]}" ;;
  --venv-only) install_venv ;;
  --runtime-only) install_system "${runtime_packages[@]}" ;;
  --containers) install_containers ;;
  --web-only) install_web ;;
  *)
    echo "usage: ./setup.sh [--system-only | --venv-only | --runtime-only | --containers |" \
      "--web-only]" >&2
    exit 2
    ;;
esac
