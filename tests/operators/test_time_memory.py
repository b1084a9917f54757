"""The buffering time operators hold no more than their bound behind a slow subscriber.

The workloads of benchmarks/memory.py (benchmarks/_time_workloads.py), at 50,000
items: a reference kept per item would show as at least 50,000 allocated blocks.
"""

from __future__ import annotations

import pytest

from benchmarks._leaks import footprint
from benchmarks._time_workloads import WORKLOADS, run

ITEMS = 50_000


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", list(WORKLOADS))
def test_memory_stays_flat_behind_a_slow_subscriber(name: str) -> None:
    run(name, ITEMS // 10)  # warm up
    before = footprint()
    run(name, ITEMS)  # what arrives depends on the timing (sample may take none): only the memory is asserted
    growth = footprint().growth_since(before)
    assert growth.blocks < ITEMS // 10, f"{growth.blocks} blocks more after {ITEMS} items through {name}"
