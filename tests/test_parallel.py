"""ParallelFlowable: the fluent form of parallel rails (flowpy/parallel.py)."""

from __future__ import annotations

import doctest
import operator
from collections.abc import Iterator

import pytest

import flowpy.parallel
from flowpy.executors import DaemonThreadPool
from flowpy.flowable import Flowable
from flowpy.operators._parallel import default_rails
from flowpy.parallel import ParallelFlowable
from flowpy.testing import TestSubscriber

WAIT = 10.0


@pytest.fixture
def pool() -> Iterator[DaemonThreadPool]:
    executor = DaemonThreadPool(2, thread_name_prefix="parallel-flowable")
    try:
        yield executor
    finally:
        executor.shutdown()


def test_parallel_run_on_map_filter_sequential(pool: DaemonThreadPool) -> None:
    result = (
        Flowable.range(0, 1000)
        .parallel(2)
        .run_on(pool, prefetch=8)
        .map(lambda x: x * 3)
        .filter(lambda x: x % 2 == 0)
        .sequential()
        .test()
    )
    result.await_done(WAIT).assert_complete()
    assert sorted(result.values) == [x * 3 for x in range(1000) if (x * 3) % 2 == 0]


def test_parallel_reduce_and_sorted(pool: DaemonThreadPool) -> None:
    rails = Flowable.range(0, 500).parallel(3).run_on(pool).map(lambda x: (x * 7919) % 500)
    rails.reduce(operator.add).test().await_done(WAIT).assert_result(sum(range(500)))
    rails.sorted().test().await_done(WAIT).assert_result(*range(500))
    rails.sorted(key=lambda x: -x).test().await_done(WAIT).assert_result(*range(499, -1, -1))
    rails.sorted(reverse=True).test().await_done(WAIT).assert_result(*range(499, -1, -1))


def test_parallel_rails_default_to_the_cpus() -> None:
    assert Flowable.just(1).parallel().rails == default_rails()
    assert Flowable.just(1).parallel(5).rails == 5


def test_parallel_subscribe_takes_one_subscriber_per_rail() -> None:
    rails = [TestSubscriber[int]() for _ in range(2)]
    Flowable.range(0, 4).parallel(2).subscribe(rails)
    rails[0].assert_result(0, 2)
    rails[1].assert_result(1, 3)


def test_parallel_flowable_checks_its_arguments_when_built() -> None:
    rails = Flowable.just(1).parallel(2)
    with pytest.raises(TypeError, match=r"^executor must not be None; leave it out to use the default executor$"):
        rails.run_on(None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^executor must be a concurrent\.futures\.Executor"):
        rails.run_on(3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^prefetch must be positive, got 0$"):
        rails.run_on(prefetch=0)
    with pytest.raises(TypeError, match=r"^fn must be callable, got 1$"):
        rails.map(1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^predicate must be callable, got 1$"):
        rails.filter(1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^rails must be a ParallelPublisher, got 1$"):
        ParallelFlowable(1)  # type: ignore[arg-type]


def test_parallel_run_on_default_executor() -> None:
    result = Flowable.range(0, 100).parallel(2).run_on().map(lambda x: x + 1).sequential().test()
    result.await_done(WAIT).assert_complete()
    assert sorted(result.values) == list(range(1, 101))


def test_parallel_flowable_repr_and_publisher() -> None:
    rails = Flowable.just(1).parallel(2)
    assert repr(rails).startswith("ParallelFlowable(<parallel publisher: 2 rails over ")
    assert rails.publisher.rails == 2


def test_parallel_module_example_runs() -> None:
    failures, tried = doctest.testmod(flowpy.parallel)
    assert tried > 0 and failures == 0
