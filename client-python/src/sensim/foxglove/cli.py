# SPDX-License-Identifier: MIT
"""The bridge's command line, ``python -m sensim.foxglove``:

    python -m sensim.foxglove --port 7700 --environment demo            # every sensor
    python -m sensim.foxglove --sensor 10 --sensor 11 --listen 0.0.0.0:8765
    python -m sensim.foxglove --frame sensor_10=world:0,0,1.5           # a static lidar

Prints one line, ``sensim foxglove bridge on ws://HOST:PORT (page http://HOST:PORT/)``, once
it listens, then serves until SIGINT or SIGTERM (exit 0). Exit status 1: it cannot listen;
2: a usage error. The same command line is ``python -m sensim foxglove`` (and ``sensim foxglove``
once installed). add_arguments() and run() let a larger command line offer it as a subcommand.
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import signal
import sys
from typing import Optional, Sequence

from ..cli import port_arg
from .bridge import Bridge, parse_address

__all__ = ["main", "add_arguments", "run"]


def _frame(text: str) -> tuple[str, str, list[float]]:
    """CHILD=PARENT:x,y,z[,qx,qy,qz,qw] -> (child, parent, 7 numbers)."""
    child, sep, rest = text.partition("=")
    parent, sep2, numbers = rest.rpartition(":")
    try:
        values = [float(v) for v in numbers.split(",")]
    except ValueError:
        values = []
    if not (sep and sep2 and child and parent and len(values) in (3, 7)
            and all(math.isfinite(v) for v in values)):
        raise argparse.ArgumentTypeError(
            f"expected CHILD=PARENT:x,y,z or CHILD=PARENT:x,y,z,qx,qy,qz,qw (finite numbers), "
            f"got {text!r}")
    if len(values) == 3:
        values += [0.0, 0.0, 0.0, 1.0]
    if not any(values[3:]):
        raise argparse.ArgumentTypeError(f"the quaternion of {text!r} is zero")
    return child, parent, values


def _address(text: str) -> tuple[str, int]:
    try:
        return parse_address(text, "--listen")
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}")
    return value


def add_arguments(ap: argparse.ArgumentParser) -> None:
    env = os.environ.get
    ap.add_argument("--host", default=env("SENSIM_HOST", "127.0.0.1"),
                    help="sensimd's address (default $SENSIM_HOST or 127.0.0.1)")
    # a string default goes through the type too: a bad $SENSIM_PORT is a usage error
    ap.add_argument("--port", type=port_arg, default=env("SENSIM_PORT", "7700"),
                    help="sensimd's port (default $SENSIM_PORT or 7700)")
    ap.add_argument("--token", default=env("SENSIM_TOKEN"), help="sensimd's --token")
    ap.add_argument("-e", "--environment", default="default",
                    help="the environment to observe (default: default)")
    ap.add_argument("-s", "--sensor", type=_count, action="append", dest="sensors",
                    metavar="ID", help="serve this sensor (repeat; default: every sensor "
                    "the daemon describes)")
    ap.add_argument("--probe-ids", type=_count, default=256, metavar="N",
                    help="without --sensor, against a daemon without Describe, look for "
                    "sensors among ids 1..N (default 256)")
    ap.add_argument("--listen", type=_address, default=("127.0.0.1", 8765),
                    metavar="HOST:PORT", help="where viewers connect (default "
                    "127.0.0.1:8765; port 0 picks a free one)")
    ap.add_argument("--encoding", choices=("raw", "zstd", "quantized_zstd"), default="raw",
                    help="how the daemon sends clouds to the bridge (default raw)")
    ap.add_argument("--frame", type=_frame, action="append", default=[],
                    metavar="CHILD=PARENT:x,y,z[,qx,qy,qz,qw]",
                    help="a fixed transform on /tf, e.g. sensor_10=world:0,0,1.5 (repeat)")
    ap.add_argument("--viewer-max-bytes", type=_count, default=16 << 20, metavar="N",
                    help="queued bytes per viewer before the oldest messages are dropped "
                    "(default 16 MiB)")
    ap.add_argument("--max-viewers", type=_count, default=16, metavar="N",
                    help="simultaneous viewers (default 16)")
    ap.add_argument("--log-level", choices=("error", "warning", "info", "debug"),
                    default="info")


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(name)s %(levelname)s: %(message)s")
    logging.getLogger("sensim.foxglove.websockets").setLevel(logging.WARNING)
    bridge = Bridge(args.host, args.port, environment=args.environment, token=args.token,
                    sensors=args.sensors, listen=args.listen, encoding=args.encoding,
                    viewer_max_bytes=args.viewer_max_bytes, max_viewers=args.max_viewers,
                    probe_ids=args.probe_ids)
    try:
        bridge.start()
    except OSError as exc:
        print(f"sensim foxglove: cannot listen on {args.listen[0]}:{args.listen[1]}: {exc}",
              file=sys.stderr)
        return 1
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: bridge.request_stop())
    try:
        for child, parent, pose in args.frame:
            bridge.set_frame(child, parent, pose)
        print(f"sensim foxglove bridge on {bridge.url} (page {bridge.page_url})", flush=True)
        while not bridge.wait(1.0):
            pass
    finally:
        bridge.close()
    return 0


def main(argv: Optional[Sequence[str]] = None, prog: str = "python -m sensim.foxglove") -> int:
    """Run the bridge's command line on `argv` (default sys.argv[1:]); `prog` names it in
    usage and help (``sensim foxglove`` when reached through sensim's command line)."""
    ap = argparse.ArgumentParser(prog=prog,
                                 description="Serve a sensimd environment to Foxglove "
                                 "(foxglove.websocket.v1) and to a built-in 3D page.")
    add_arguments(ap)
    return run(ap.parse_args(argv))
