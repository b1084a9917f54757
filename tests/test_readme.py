"""The README's code and the quickstart example work as shown."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.test_examples_streams import run_example

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.timeout(60)
def test_readme_python_snippets_run() -> None:
    readme = (ROOT / "README.md").read_text()
    snippets = re.findall(r"```python\n(.*?)```", readme, flags=re.DOTALL)
    assert len(snippets) >= 2
    for snippet in snippets:
        exec(compile(snippet, "README.md", "exec"), {"__name__": "readme"})


@pytest.mark.timeout(90)
def test_quickstart_example_shows_the_slow_subscriber_pacing_the_producers() -> None:
    out = run_example("quickstart.py")
    assert "2 producers submitted 1000 items" in out
    assert "fast subscriber: 1000 items in 1 request(s)" in out
    assert "slow subscriber: 1000 items in 126 requests of 8" in out
    lag = re.search(r"largest lag reported by submit\(\): (\d+) \(buffer capacity 16\)", out)
    assert lag is not None and 1 <= int(lag.group(1)) <= 16
    blocked = re.search(r"producers spent ([\d.]+) s blocked in submit\(\)", out)
    assert blocked is not None and float(blocked.group(1)) > 0


def test_readme_test_command_is_what_ci_runs() -> None:
    readme = (ROOT / "README.md").read_text()
    command = re.search(r"## Run the tests\n\n```sh\n(.*?)\n```", readme, flags=re.DOTALL)
    assert command is not None
    ci = (ROOT / ".ci" / "run").read_text()
    assert command.group(1) in ci.splitlines()
