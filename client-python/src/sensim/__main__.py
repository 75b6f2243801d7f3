# SPDX-License-Identifier: MIT
"""``python -m sensim``: the command line (sensim.cli)."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
