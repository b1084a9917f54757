"""The bounded stress group: the topologies of tests/stress/engine.py over a fixed set of seeds.

Each case is one reproducible scenario; a failure names the command that
reruns it (``python benchmarks/stress.py --kind KIND --seed SEED``). Longer
runs over more seeds: see docs/performance.md, "Stress runs".
"""

from __future__ import annotations

import pytest

from tests.stress.engine import KINDS, run

SEEDS = range(100)

BOUNDED_KINDS = tuple(kind for kind in KINDS if kind != "interrupt")
"""Every kind but ``interrupt``, which ``benchmarks/stress.py --kind interrupt`` runs: about 1 scenario in 200
fails there, an interrupt inside ``threading.Condition.wait`` after it released the producer lock and before
it took it back (docs/performance.md, "Stress runs")."""


@pytest.mark.timeout(90)
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("kind", BOUNDED_KINDS)
def test_scenario_keeps_every_subscriber_consistent(kind: str, seed: int) -> None:
    run(kind, seed, timeout=30.0)
