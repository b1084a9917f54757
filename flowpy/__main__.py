"""``python -m flowpy``: the ``flowpy`` command (:mod:`flowpy.cli`)."""

import sys

from flowpy.cli import main

if __name__ == "__main__":
    sys.exit(main())
