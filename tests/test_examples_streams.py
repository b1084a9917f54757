"""The stream examples run to completion and print what happened."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def run_example(name: str, *args: str) -> str:
    """Run ``examples/<name>`` with this checkout's flowpy; return its output after a clean exit."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    completed = subprocess.run(
        [sys.executable, str(ROOT / "examples" / name), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=ROOT,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stderr == ""
    return completed.stdout


@pytest.mark.timeout(90)
def test_cold_sync_stream_example_shows_repeatable_flat_stack_stream() -> None:
    out = run_example("cold_sync_stream.py")
    assert "first subscriber: completed after [1, 2, 3, 4, 5]" in out
    assert "cold: both subscribers got the same sequence: True" in out
    assert "third subscriber: cancelled after [1, 2] by returning False" in out
    depths = [line for line in out.splitlines() if "stack depths seen in on_next" in line]
    assert len(depths) == 1 and depths[0].count(",") == 1, depths  # "[n]": one depth only
    assert "pulled through iterate(prefetch=2): [1, 4, 9, 16, 25]" in out


@pytest.mark.timeout(90)
def test_cold_async_stream_example_shows_demand_pacing() -> None:
    out = run_example("cold_async_stream.py")
    assert "consumed 20 of 20 produced items" in out and "sum = 1900" in out
    ahead = [line for line in out.splitlines() if "never more than" in line]
    assert ahead and int(ahead[0].split("never more than ")[1].split()[0]) <= 2


@pytest.mark.timeout(90)
def test_hot_async_stream_example_delivers_everything_at_the_slow_pace() -> None:
    out = run_example("hot_async_stream.py")
    assert "2 sensors submitted 400 readings" in out
    assert "dashboard (fast) received 400, archiver (slow) received 400" in out
    assert "both subscribers saw each sensor's readings in the same order: True" in out
    backlog = [line for line in out.splitlines() if "largest backlog" in line]
    assert backlog and int(backlog[0].split(": ")[1].split()[0]) <= 8


@pytest.mark.timeout(90)
def test_multicast_example_shares_one_source_in_lock_step() -> None:
    out = run_example("multicast.py")
    assert "paced consumer pulled [0, 1, 2, 3, 4]" in out
    assert "the same as the paced one first: True" in out
    assert "last subscriber left: the source was cancelled" in out


@pytest.mark.parametrize(
    "name", ["quickstart.py", "cold_sync_stream.py", "cold_async_stream.py", "hot_async_stream.py", "multicast.py"]
)
def test_examples_answer_help_with_their_description(name: str) -> None:
    out = run_example(name, "--help")
    first_line = (ROOT / "examples" / name).read_text().split('"""')[1].splitlines()[0]
    assert out.startswith(f"usage: {name} [-h]\n\n{first_line}\n")
