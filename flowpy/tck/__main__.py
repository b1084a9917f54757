"""``python -m flowpy.tck KIND MODULE:FACTORY``: run one verification and print its table."""

from __future__ import annotations

import sys

from flowpy.tck.cli import main

if __name__ == "__main__":
    sys.exit(main())
