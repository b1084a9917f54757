"""The operators that hold items stay flat in memory under a subscriber that asks for one item at a time.

The workloads are in benchmarks/_buffering.py; benchmarks/memory.py runs them
at 10 million items.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from benchmarks._buffering import WORKLOADS
from benchmarks._leaks import footprint

ITEMS = 200_000


@pytest.mark.timeout(300)
@pytest.mark.parametrize(("name", "workload"), WORKLOADS, ids=[name for name, _ in WORKLOADS])
def test_operator_holding_items_leaves_no_trace_after_many_items(name: str, workload: Callable[[int], int]) -> None:
    workload(ITEMS // 10)
    before = footprint()
    delivered = workload(ITEMS)
    growth = footprint().growth_since(before)
    assert delivered == (256 if name.startswith("take_last") else ITEMS)
    assert growth.blocks < ITEMS // 50, growth
    assert growth.gc_objects < 500, growth
    assert growth.resident_mb < 5, growth
