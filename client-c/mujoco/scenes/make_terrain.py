#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Writes terrain.png, the height field of vehicle.xml: 81 x 81 grey levels (MuJoCo
maps the lowest to 0 and the highest to the hfield's elevation size). Gentle waves, a flat
ring where the vehicle drives (radius 5 to 11 m around the centre) and a hill in one corner.

    /usr/bin/python3 client-c/mujoco/scenes/make_terrain.py
"""

import math
import pathlib
import struct
import zlib

N = 81            # samples per side
HALF = 20.0       # m, the hfield's half size (vehicle.xml: size="20 20 ...")


def height(x: float, y: float) -> float:
    """Relative height in [0, 1] at (x, y) metres from the centre (y up the image)."""
    r = math.hypot(x, y)
    waves = 0.5 + 0.5 * math.sin(0.45 * x) * math.cos(0.38 * y)
    hill = math.exp(-((x + 13.0) ** 2 + (y - 12.0) ** 2) / 18.0)
    flat = min(1.0, abs(r - 8.0) / 3.0) ** 2   # 0 on the vehicle's circle, 1 from 3 m off it
    return min(1.0, 0.35 * waves * flat + 0.6 * hill)


def png(path: pathlib.Path, rows: list) -> None:
    """An 8-bit greyscale PNG; rows[0] is the top of the image."""
    raw = b"".join(b"\x00" + bytes(r) for r in rows)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

    ihdr = struct.pack(">IIBBBBB", len(rows[0]), len(rows), 8, 0, 0, 0, 0)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr)
                     + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


def main() -> None:
    step = 2 * HALF / (N - 1)
    # MuJoCo puts the image's top row at +y (the last row of its grid)
    rows = [[round(255 * height(-HALF + c * step, HALF - r * step)) for c in range(N)]
            for r in range(N)]
    png(pathlib.Path(__file__).with_name("terrain.png"), rows)


if __name__ == "__main__":
    main()
