"""The ``flowpy`` command: ``flowpy tck …`` runs a TCK verification, ``flowpy job …`` the flights job.

Each subcommand takes the options of the module behind it (``flowpy tck
--help``, ``flowpy job --help``); ``python -m flowpy`` is the same command:
the console script, too, puts the current directory first on the import
path, so ``flowpy tck publisher mymodule:make_publisher`` finds
``mymodule.py`` in the directory it runs from.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

__all__ = ["main"]

_PROG = "flowpy"


def _tck(argv: Sequence[str]) -> int:
    from flowpy.tck.cli import main

    return main(argv, prog=f"{_PROG} tck")


def _job(argv: Sequence[str]) -> int:
    from flowpy.spark.job import main  # imports pyspark only when the job runs

    return main(argv)


_COMMANDS = {
    "tck": (_tck, "run a Reactive Streams TCK verification against an importable factory"),
    "job": (_job, "replay the 2013 New York flights through flowpy into Parquet on Spark (extra 'spark')"),
}


def _current_directory_first() -> None:
    """Put the current directory first on ``sys.path``, as ``python -m`` does (not under ``-P`` or ``-I``).

    A console script starts with its own directory there instead, and
    ``MODULE:FACTORY`` targets next to the user would not import.
    """
    if sys.flags.isolated or getattr(sys.flags, "safe_path", False):  # safe_path: Python 3.11+
        return
    cwd = os.getcwd()
    if not sys.path or os.path.abspath(sys.path[0] or os.curdir) != cwd:
        sys.path.insert(0, cwd)


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``flowpy COMMAND [OPTIONS]``; return the exit status."""
    _current_directory_first()
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in _COMMANDS:
        run, _ = _COMMANDS[argv[0]]
        return run(argv[1:])  # the subcommand parses its own options, --help included
    parser = argparse.ArgumentParser(prog=_PROG, description="flowpy's command line.")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, (_, summary) in _COMMANDS.items():
        commands.add_parser(name, help=f"{summary} (see: {_PROG} {name} --help)")
    parser.parse_args(argv)  # only reached without a known command: prints help or the usage error
    return 2
