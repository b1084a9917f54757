"""The bounded stress group: the topologies of tests/stress/engine.py over a fixed set of seeds.

Each case is one reproducible scenario; a failure names the command that
reruns it (``python benchmarks/stress.py --kind KIND --seed SEED``). Longer
runs over more seeds: see docs/performance.md, "Stress runs".
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.stress.engine import KINDS, run

SEEDS = range(100)

IN_PROCESS_KINDS = tuple(kind for kind in KINDS if kind != "interrupt")
"""The kinds run in the test process; ``interrupt`` runs in an interpreter of its own (below)."""

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(90)
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("kind", IN_PROCESS_KINDS)
def test_scenario_keeps_every_subscriber_consistent(kind: str, seed: int) -> None:
    run(kind, seed, timeout=30.0)


@pytest.mark.timeout(300)
def test_interrupt_scenarios_keep_every_subscriber_consistent() -> None:
    # In a fresh interpreter: the asynchronous interrupts this kind raises
    # into producer threads leave the process unfit for tests that trace the
    # main thread (sys.settrace) afterwards, which then hang.
    result = subprocess.run(
        [sys.executable, "benchmarks/stress.py", "--kind", "interrupt", "--seeds", f"{SEEDS.start}:{SEEDS.stop}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert f"{len(SEEDS)} scenarios" in result.stdout, result.stdout[-2000:]
