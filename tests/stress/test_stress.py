"""The bounded stress group: the topologies of tests/stress/engine.py over a fixed set of seeds.

Each case is one reproducible scenario; a failure names the command that
reruns it (``python benchmarks/stress.py --kind KIND --seed SEED``). Longer
runs over more seeds: see docs/performance.md, "Stress runs".
"""

from __future__ import annotations

import pytest

from tests.stress.engine import KINDS, run

SEEDS = range(100)


@pytest.mark.timeout(90)
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("kind", KINDS)
def test_scenario_keeps_every_subscriber_consistent(kind: str, seed: int) -> None:
    run(kind, seed, timeout=30.0)
