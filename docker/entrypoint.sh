#!/bin/sh
# SPDX-License-Identifier: MIT
# entrypoint.sh: the image's entry point (installed as /usr/local/bin/sensimd-entrypoint).
#
#   sensimd-entrypoint [SENSIMD OPTIONS]   run sensimd on SENSIM_LISTEN with the token
#   sensimd-entrypoint health [--live]     the health check: handshake and Ping (sensim_probe)
#
# Environment:
#   SENSIM_LISTEN          ADDR:PORT to listen on (default 0.0.0.0:7700: every interface of the
#                          container, whose network is the boundary; [::]:7700 for IPv6)
#   SENSIM_TOKEN           the shared token clients send in Hello, or
#   SENSIM_TOKEN_FILE      a file holding it (a mounted secret), on one line
#   SENSIM_ALLOW_NO_TOKEN  1 to run without a token (anyone who reaches the port may use it)
#   SENSIM_PROBE_TIMEOUT_MS  the health check's timeout (default 3000)
# Options after the image name go to sensimd (--threads, --log-level, limits), except --listen
# and --token, which the variables above own so that the health check probes what is served.
set -eu

listen="${SENSIM_LISTEN:-0.0.0.0:7700}"


die() {
  echo "sensimd-entrypoint: $*" >&2
  exit 2
}


# The token, from exactly one of SENSIM_TOKEN and SENSIM_TOKEN_FILE, into $token ("" = none).
# A file holds it on one line; its trailing line ends are dropped (as `echo tok > file` or a
# Kubernetes secret created from a file leave them).
read_token() {
  token=""
  if [ -n "${SENSIM_TOKEN:-}" ] && [ -n "${SENSIM_TOKEN_FILE:-}" ]; then
    die "set SENSIM_TOKEN or SENSIM_TOKEN_FILE, not both"
  fi
  if [ -n "${SENSIM_TOKEN_FILE:-}" ]; then
    [ -r "$SENSIM_TOKEN_FILE" ] ||
      die "SENSIM_TOKEN_FILE=$SENSIM_TOKEN_FILE cannot be read by uid $(id -u)"
    token="$(cat "$SENSIM_TOKEN_FILE")"
    [ -n "$token" ] || die "SENSIM_TOKEN_FILE=$SENSIM_TOKEN_FILE is empty"
    src="SENSIM_TOKEN_FILE=$SENSIM_TOKEN_FILE"
  elif [ -n "${SENSIM_TOKEN:-}" ]; then
    token="$SENSIM_TOKEN"
    src="SENSIM_TOKEN"
  elif [ "${SENSIM_ALLOW_NO_TOKEN:-0}" = 1 ]; then
    return 0
  else
    die "no token: set SENSIM_TOKEN or SENSIM_TOKEN_FILE (sensimd listens on $listen);" \
        "SENSIM_ALLOW_NO_TOKEN=1 runs it without one"
  fi
  # sensimd's own rule for --token, checked here to name the variable
  case "$token" in
    *[[:cntrl:]]*) die "the token in $src holds a control character or a line break" ;;
  esac
  [ "${#token}" -le 127 ] || die "the token in $src is longer than 127 characters"
}


# The address the health check connects to: the listening one, loopback for a wildcard.
probe_target() {
  port="${listen##*:}"
  host="${listen%:*}"
  case "$host" in
    0.0.0.0 | "") host=127.0.0.1 ;;
    "[::]") host=::1 ;;
    \[*\]) host="${host#\[}"; host="${host%\]}" ;;
  esac
}


case "$listen" in
  *:*) ;;
  *) die "SENSIM_LISTEN=$listen must be ADDR:PORT" ;;
esac
read_token

if [ "${1:-}" = health ]; then
  shift
  probe_target
  if [ -n "$token" ]; then
    export SENSIM_TOKEN="$token"
  else
    unset SENSIM_TOKEN
  fi
  exec sensim_probe "$@" --timeout "${SENSIM_PROBE_TIMEOUT_MS:-3000}" \
    "$host" "$port"
fi

for arg in "$@"; do
  case "$arg" in
    --listen | --listen=* | --token | --token=* | --token-file | --token-file=*)
      die "$arg: set SENSIM_LISTEN / SENSIM_TOKEN / SENSIM_TOKEN_FILE instead" ;;
  esac
done
unset SENSIM_TOKEN SENSIM_TOKEN_FILE
if [ -n "$token" ]; then
  # the token reaches sensimd on its standard input, never on its command line (which `ps`
  # shows to every user of the host)
  exec sensimd --listen "$listen" --token-file /dev/stdin "$@" <<EOF
$token
EOF
fi
exec sensimd --listen "$listen" "$@"
