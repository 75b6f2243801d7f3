#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# setup.sh: the single source of truth for sensim's dependencies.
#
# Installs every system package the build, the tests and the demo need (Debian 12 packages
# only), then prepares the Python environment for client-python: a venv made from Debian's
# /usr/bin/python3 with system site packages, so numpy, protobuf and zstandard come from Debian.
# Idempotent: a second run installs nothing and finishes in seconds.
#
# Usage: ./setup.sh [--system-only | --venv-only]
#   Environment: SENSIM_VENV (default: .venv in the repository root).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="${SENSIM_VENV:-$here/.venv}"
mode="${1:-all}"

# Build toolchain, libraries of the daemon and the C client, code generators, Python runtime.
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
  # client-python's tools: pip install of the package (setuptools, wheel; no network), mesh
  # files (meshio), pictures (matplotlib), ROS 1 bags (rosbag, sensor_msgs; sensor_msgs'
  # point_cloud2 imports roslib, which apt does not pull in), and the independent readers the
  # tests check exported files with (Open3D, PCL's command-line tools)
  python3-pip python3-setuptools python3-wheel
  python3-meshio python3-matplotlib
  python3-rosbag python3-sensor-msgs python3-roslib
  python3-open3d pcl-tools
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

install_system() {
  local missing=()
  for p in "${packages[@]}"; do
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
  "$venv/bin/python" -c 'import numpy, google.protobuf, zstandard, pytest' \
    || { echo "setup.sh: the venv cannot import its Debian packages" >&2; exit 1; }
}

case "$mode" in
  all) install_system; install_venv ;;
  --system-only) install_system ;;
  --venv-only) install_venv ;;
  *) echo "usage: ./setup.sh [--system-only | --venv-only]" >&2; exit 2 ;;
esac
