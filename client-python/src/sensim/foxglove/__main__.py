# SPDX-License-Identifier: MIT
"""``python -m sensim.foxglove``: the bridge's command line (sensim.foxglove.cli)."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
