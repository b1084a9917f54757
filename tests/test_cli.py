"""The ``flowpy`` command: its subcommands and its usage errors (``flowpy tck`` has tests/tck/test_cli.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def flowpy(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "flowpy", *args],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), **env},
        capture_output=True,
        text=True,
        timeout=100,
        check=False,
    )


@pytest.mark.timeout(120)
def test_job_subcommand_is_the_flights_job() -> None:
    done = flowpy("job", "--help")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: ") and "--output" in done.stdout and "--remote" in done.stdout


@pytest.mark.timeout(120)
def test_job_subcommand_without_the_spark_extra_is_one_line_naming_it(tmp_path: Path) -> None:
    # A pyspark that cannot be imported, as when the extra is not installed.
    (tmp_path / "pyspark").mkdir()
    (tmp_path / "pyspark" / "__init__.py").write_text("raise ImportError('No module named pyspark')\n")
    done = subprocess.run(
        [sys.executable, "-m", "flowpy", "job", "--limit", "10", "--output", str(tmp_path / "out")],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])},
        capture_output=True,
        text=True,
        timeout=100,
        check=False,
    )
    assert done.returncode == 1
    assert done.stderr == "flights job: flowpy.spark needs pyspark: install it with: pip install 'flowpy[spark]'\n"
    assert not (tmp_path / "out").exists()


def test_unknown_subcommand_is_a_usage_error() -> None:
    done = flowpy("frob")
    assert done.returncode == 2 and done.stderr.splitlines()[-1].startswith("flowpy: error: argument COMMAND")
