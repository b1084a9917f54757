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


CONSOLE_SCRIPT = """\
# -*- coding: utf-8 -*-
import re
import sys
from flowpy.cli import main
if __name__ == '__main__':
    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])
    sys.exit(main())
"""
"""The ``flowpy`` launcher pip writes for the ``flowpy = "flowpy.cli:main"`` entry point."""


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    "flags",
    [
        [],
        pytest.param(["-P"], marks=pytest.mark.skipif(sys.version_info < (3, 11), reason="-P is Python 3.11+")),
    ],
)
def test_console_script_imports_targets_from_the_current_directory_as_python_m_does(
    flags: list[str], tmp_path: Path
) -> None:
    # A console script starts with its own directory first on sys.path, not the current one.
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "flowpy").write_text(CONSOLE_SCRIPT)
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "mymodule.py").write_text(
        "from tests.tck.reference import range_publisher\n\n\n"
        "def make_publisher(elements):\n"
        "    return range_publisher(elements)\n"
    )
    args = ["tck", "publisher", "mymodule:make_publisher", "-k", "spec309", "--timeout", "300"]

    def command(*launcher: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, *flags, *launcher, *args],
            cwd=tmp_path / "work",
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            capture_output=True,
            text=True,
            timeout=100,
            check=False,
        )

    script = command(str(tmp_path / "bin" / "flowpy"))
    module = command("-m", "flowpy")
    if flags:  # safe_path: neither puts the current directory on sys.path
        not_found = "ModuleNotFoundError: No module named 'mymodule'"
        assert script.returncode == module.returncode == 2
        assert not_found in script.stderr and not_found in module.stderr
    else:
        assert (script.returncode, script.stderr) == (0, "")
        assert script.stdout == module.stdout and script.stdout.splitlines()[-1] == "3 passed, 0 failed, 0 skipped"
