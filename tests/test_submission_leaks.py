"""Reference leaks in the core: memory and object counts stay flat under load.

Every test runs once per core (the ``core`` fixture, tests/core_impl.py),
on publishers built from ``core.SubmissionPublisher``. A reference the core
keeps by mistake (a missing ``Py_DECREF`` in C, a list that only grows in
Python) keeps each item or subscriber alive, so the footprint would grow with
the workload; here it must not. The workloads are in benchmarks/_leaks.py;
benchmarks/memory.py runs them at full size (10 million items, 200,000
subscribe/cancel cycles).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from benchmarks._leaks import Footprint, error_cycles, footprint, never_requesting, stream, subscribe_cancel
from flowpy.executors import DaemonThreadPool
from tests.core_impl import Core


@pytest.fixture
def pool() -> Iterator[DaemonThreadPool]:
    pool = DaemonThreadPool(2)
    yield pool
    pool.shutdown()


def assert_flat(growth: Footprint, workload: int) -> None:
    """Far below one object or block per unit of work; resident memory within 5 MB."""
    assert growth.blocks < workload // 50, growth
    assert growth.gc_objects < 500, growth
    assert growth.resident_mb < 5, growth


@pytest.mark.timeout(300)
def test_a_million_items_leave_no_trace(core: Core, pool: DaemonThreadPool) -> None:
    stream(core.SubmissionPublisher, 100_000, pool)
    before = footprint()
    assert stream(core.SubmissionPublisher, 1_000_000, pool) == 1_000_000
    assert_flat(footprint().growth_since(before), 1_000_000)


@pytest.mark.timeout(300)
def test_twenty_thousand_subscribe_cancel_cycles_leave_no_trace(core: Core) -> None:
    subscribe_cancel(core.SubmissionPublisher, 2_000)
    before = footprint()
    assert subscribe_cancel(core.SubmissionPublisher, 20_000) == 20_000  # every subscriber was freed
    assert_flat(footprint().growth_since(before), 20_000)


@pytest.mark.timeout(300)
def test_a_million_offers_to_a_subscriber_that_never_requests_stay_bounded(core: Core) -> None:
    never_requesting(core.SubmissionPublisher, 10_000)
    before = footprint()
    assert never_requesting(core.SubmissionPublisher, 1_000_000) == 1_000_000 - 256
    assert_flat(footprint().growth_since(before), 1_000_000)


@pytest.mark.timeout(300)
def test_error_paths_leave_no_trace(core: Core) -> None:
    error_cycles(core.SubmissionPublisher, 500)
    before = footprint()
    assert error_cycles(core.SubmissionPublisher, 5_000) == 10_000
    assert_flat(footprint().growth_since(before), 5_000)
