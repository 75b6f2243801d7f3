#!/bin/sh
# SPDX-License-Identifier: MIT
# Container entry point: listen on all interfaces (the container's network is the boundary)
# and require the token from SENSIM_TOKEN when it is set. Extra arguments go to sensimd.
set -eu
if [ -n "${SENSIM_TOKEN:-}" ]; then
  exec /usr/local/bin/sensimd --listen 0.0.0.0:7700 --token "$SENSIM_TOKEN" "$@"
fi
exec /usr/local/bin/sensimd --listen 0.0.0.0:7700 "$@"
