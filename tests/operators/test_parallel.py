"""parallel, the rail operators, sequential, and the reduce and sorted joins."""

from __future__ import annotations

import logging
import operator
import os
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flowpy import operators
from flowpy.errors import MissingBackpressureError
from flowpy.executors import DaemonThreadPool, direct_executor
from flowpy.flow import Publisher, Subscriber, Subscription
from flowpy.operators import ParallelPublisher
from flowpy.operators._parallel import default_rails
from flowpy.operators._parallel_join import reduce_rails, sorted_rails
from flowpy.sources import RangePublisher, error, just
from flowpy.submission import SubmissionPublisher
from flowpy.testing import TestSubscriber
from tests.context_helpers import REQUEST_ID, ContextRecorder, in_context, in_fresh_thread
from tests.operators.conftest import Spy, StubSubscription

WAIT = 10.0
MAX = 2**63 - 1


@pytest.fixture
def pool() -> Iterator[DaemonThreadPool]:
    executor = DaemonThreadPool(4, thread_name_prefix="parallel")
    try:
        yield executor
    finally:
        executor.shutdown()


def rails_of(publisher: ParallelPublisher[Any], *initial: int) -> list[TestSubscriber[Any]]:
    """Subscribe one TestSubscriber per rail, requesting ``initial[i]`` (everything when not given)."""
    subscribers = [TestSubscriber[Any](initial[i] if i < len(initial) else MAX) for i in range(publisher.rails)]
    publisher.subscribe(subscribers)
    return subscribers


# --- Dealing ---------------------------------------------------------------------------------


def test_parallel_deals_round_robin_when_every_rail_has_demand() -> None:
    rails = rails_of(operators.parallel(RangePublisher(0, 9), 3))
    assert [r.values for r in rails] == [[0, 3, 6], [1, 4, 7], [2, 5, 8]]
    for rail in rails:
        rail.assert_complete()


def test_parallel_deals_only_to_rails_that_have_demand() -> None:
    rails = rails_of(operators.parallel(RangePublisher(0, 10), 2), 0, MAX)
    rails[0].assert_no_values().assert_complete()  # on_complete needs no demand (rule 1.4)
    rails[1].assert_result(*range(10))


def test_parallel_slow_rail_does_not_hold_the_others_back() -> None:
    rails = rails_of(operators.parallel(RangePublisher(0, 100), 3, prefetch=4), 1, MAX, MAX)
    assert rails[0].values == [0]
    assert sorted(rails[1].values + rails[2].values) == list(range(1, 100))


def test_parallel_requests_prefetch_then_replenishes_at_three_quarters() -> None:
    spy = Spy(RangePublisher(0, 100))
    rails = rails_of(operators.parallel(spy, 2, prefetch=8), 0, 0)
    assert spy.subscription.requests == [8]
    rails[0].request(3)
    rails[1].request(3)
    assert spy.subscription.requests == [8, 6]
    assert spy.delivered - 6 <= 8


@settings(max_examples=30, deadline=None)
@given(
    count=st.integers(min_value=1, max_value=4),
    prefetch=st.integers(min_value=1, max_value=8),
    script=st.lists(st.tuples(st.integers(0, 3), st.integers(1, 6)), max_size=30),
)
def test_parallel_delivers_each_item_once_within_each_rails_demand(
    count: int, prefetch: int, script: list[tuple[int, int]]
) -> None:
    spy = Spy(RangePublisher(0, 50))
    rails = rails_of(operators.parallel(spy, count, prefetch=prefetch), *([0] * count))
    for who, n in script:
        rails[who % count].request(n)
        assert spy.delivered - sum(len(r.values) for r in rails) <= prefetch
    for rail in rails:
        rail.request(MAX)
    for rail in rails:
        rail.assert_complete()  # TestSubscriber checks rules 1.1 and 1.3 as it goes
    assert sorted(v for r in rails for v in r.values) == list(range(50))


def test_parallel_default_rails_is_the_number_of_cpus() -> None:
    expected = getattr(os, "process_cpu_count", os.cpu_count)() or 1
    assert default_rails() == expected
    assert operators.parallel(just(1)).rails == expected


def test_parallel_wrong_number_of_subscribers_is_refused() -> None:
    rails = [TestSubscriber[int]() for _ in range(3)]
    spy = Spy(RangePublisher(0, 5))
    operators.parallel(spy, 2).subscribe(rails)
    for rail in rails:
        rail.assert_error(ValueError).assert_no_values()
        assert str(rail.errors[0]) == "a parallel publisher with 2 rails needs 2 subscribers, got 3"
    assert spy.subscriptions == []


def test_parallel_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match=r"^rails must be positive, got 0$"):
        operators.parallel(just(1), 0)
    with pytest.raises(ValueError, match=r"^prefetch must be positive, got 0$"):
        operators.parallel(just(1), 2, prefetch=0)
    with pytest.raises(TypeError, match=r"^subscriber must not be None \(rule 1\.9\)$"):
        operators.parallel(just(1), 2).subscribe([TestSubscriber(), None])  # type: ignore[list-item]
    with pytest.raises(TypeError, match=r"^rails must be a ParallelPublisher, got 3$"):
        operators.sequential(3)  # type: ignore[arg-type]


def test_parallel_cancelled_rail_is_skipped_and_the_last_cancel_cancels_the_source() -> None:
    spy = Spy(RangePublisher(0, 100))
    rails = rails_of(operators.parallel(spy, 2, prefetch=4), 0, 0)
    rails[0].cancel()
    rails[1].request(5)
    assert rails[1].values == [0, 1, 2, 3, 4]
    assert not spy.subscription.cancelled.is_set()
    rails[1].cancel()
    assert spy.subscription.cancelled.is_set()


def test_parallel_upstream_error_goes_to_every_rail_at_once() -> None:
    source = SubmissionPublisher[int](executor=direct_executor)
    rails = rails_of(operators.parallel(source, 2), 0, 0)
    source.submit(1)
    failure = RuntimeError("source failed")
    source.close_exceptionally(failure)
    for rail in rails:
        rail.assert_error(failure).assert_no_values()


def test_parallel_upstream_sending_more_than_requested_fails_every_rail() -> None:
    class Floods(Publisher[int]):
        def subscribe(self, subscriber: Subscriber[int]) -> None:
            subscriber.on_subscribe(StubSubscription())
            for i in range(5):
                subscriber.on_next(i)

    rails = rails_of(operators.parallel(Floods(), 2, prefetch=2), 0, 0)
    for rail in rails:
        rail.assert_error(MissingBackpressureError)
    assert str(rails[0].errors[0]) == "parallel's source sent more than the 2 items requested"


def test_parallel_invalid_request_fails_only_that_rail() -> None:
    rails = rails_of(operators.parallel(RangePublisher(0, 10), 2), 0, 0)
    rails[0].request(-1)
    rails[0].assert_error(ValueError)
    assert "3.9" in str(rails[0].errors[0])
    rails[1].request(MAX).assert_result(*range(10))


def test_parallel_rail_raising_in_on_next_is_reported_and_the_others_go_on(caplog: pytest.LogCaptureFixture) -> None:
    class Raises(TestSubscriber[int]):
        def on_next(self, item: int) -> None:
            super().on_next(item)
            raise ValueError("bad rail")

    bad, good = Raises(), TestSubscriber[int]()
    with caplog.at_level(logging.ERROR, logger="flowpy"):
        operators.parallel(RangePublisher(0, 10), 2).subscribe([bad, good])
    bad.assert_values(0).assert_not_complete()
    good.assert_result(*range(1, 10))
    assert len([r for r in caplog.records if "bad rail" in r.getMessage()]) == 1


def test_parallel_rail_raising_in_on_subscribe_is_failed_and_the_others_go_on() -> None:
    class Raises(TestSubscriber[int]):
        def on_subscribe(self, subscription: Subscription) -> None:
            super().on_subscribe(subscription)
            raise ValueError("no")

    bad, good = Raises(), TestSubscriber[int]()
    operators.parallel(RangePublisher(0, 4), 2).subscribe([bad, good])
    bad.assert_error(ValueError).assert_no_values()
    good.assert_result(0, 1, 2, 3)


def test_parallel_keyboard_interrupt_in_a_rail_ends_every_rail_and_propagates() -> None:
    class Interrupts(TestSubscriber[int]):
        def on_next(self, item: int) -> None:
            super().on_next(item)
            raise KeyboardInterrupt

    spy = Spy(RangePublisher(0, 100))
    other: TestSubscriber[int] = TestSubscriber()
    with pytest.raises(KeyboardInterrupt):
        operators.parallel(spy, 2, prefetch=4).subscribe([Interrupts(), other])
    assert spy.subscription.cancelled.is_set()
    other.assert_error(KeyboardInterrupt)


def test_parallel_of_a_failed_source_fails_every_rail() -> None:
    failure = RuntimeError("nope")
    for rail in rails_of(operators.parallel(error(failure), 3)):
        rail.assert_error(failure)


# --- Rail operators -----------------------------------------------------------------------


def test_through_applies_the_operator_to_each_rail_and_fuses_a_chain() -> None:
    counted: list[Subscriber[Any]] = []
    base = operators.parallel(RangePublisher(0, 10), 2)

    class Counting(Publisher[Any]):
        def __init__(self, rail: Publisher[Any]) -> None:
            self.rail = rail

        def subscribe(self, subscriber: Subscriber[Any]) -> None:
            counted.append(subscriber)
            self.rail.subscribe(subscriber)

    chained = (
        base.through(lambda rail: operators.map(rail, lambda x: x * 10))
        .through(lambda rail: operators.filter(rail, lambda x: x % 20 == 0))
        .through(Counting)
    )
    rails = rails_of(chained)
    assert [r.values for r in rails] == [[0, 20, 40, 60, 80], []]
    assert len(counted) == 2  # one stage per rail: map and filter fused into it


def test_through_operator_that_does_not_subscribe_is_an_error() -> None:
    lazy = operators.parallel(just(1), 1).through(lambda rail: just(2))
    with pytest.raises(RuntimeError, match=r"did not subscribe to its rail in subscribe\(\)$"):
        lazy.subscribe([TestSubscriber()])


# --- sequential ------------------------------------------------------------------------------


def test_sequential_merges_the_rails_with_backpressure() -> None:
    spy = Spy(RangePublisher(0, 1000))
    merged = operators.sequential(operators.parallel(spy, 3, prefetch=8), prefetch=4)
    result: TestSubscriber[int] = TestSubscriber(0)
    merged.subscribe(result)
    result.request(5)
    assert len(result.values) == 5
    assert spy.delivered <= 8 + 3 * 4  # the dealer's queue and a queue of 4 per rail, at most
    result.request(MAX)
    result.assert_complete()
    assert sorted(result.values) == list(range(1000))


def test_sequential_cancelled_in_on_subscribe_never_subscribes_the_source() -> None:
    spy = Spy(RangePublisher(0, 10))
    result: TestSubscriber[int] = TestSubscriber()
    result.cancel()
    operators.sequential(operators.parallel(spy, 2)).subscribe(result)
    assert spy.subscriptions == []


def test_sequential_rail_error_cancels_the_others() -> None:
    failure = RuntimeError("rail failed")
    spy = Spy(RangePublisher(0, 100))

    def fail_on_7(x: int) -> int:
        if x == 7:
            raise failure
        return x

    rails = operators.parallel(spy, 2, prefetch=4).through(lambda rail: operators.map(rail, fail_on_7))
    result: TestSubscriber[int] = TestSubscriber()
    operators.sequential(rails).subscribe(result)
    result.assert_error(failure)
    assert spy.subscription.cancelled.is_set()


# --- reduce and sorted ----------------------------------------------------------------------------


def test_reduce_folds_each_rail_then_the_rails() -> None:
    result: TestSubscriber[int] = TestSubscriber(0)
    reduce_rails(operators.parallel(RangePublisher(1, 100), 4), operator.add).subscribe(result)
    result.assert_no_values().assert_not_complete()  # the one item waits for a request
    result.request(1).assert_result(5050)


def test_reduce_combines_the_rails_in_rail_order() -> None:
    result: TestSubscriber[str] = TestSubscriber()
    reduce_rails(operators.parallel(just("a", "b", "c", "d"), 2), operator.add).subscribe(result)
    result.assert_result("acbd")  # rail 0 folds a, c; rail 1 folds b, d


def test_reduce_of_nothing_completes_empty() -> None:
    result: TestSubscriber[int] = TestSubscriber()
    reduce_rails(operators.parallel(just(), 3), operator.add).subscribe(result)
    result.assert_result()


def test_reduce_function_failure_cancels_the_rails_and_fails() -> None:
    spy = Spy(RangePublisher(0, 100))
    failure = ZeroDivisionError("boom")

    def add_until_10(a: int, b: int) -> int:
        if b == 10:
            raise failure
        return a + b

    result: TestSubscriber[int] = TestSubscriber()
    reduce_rails(operators.parallel(spy, 2, prefetch=4), add_until_10).subscribe(result)
    result.assert_error(failure).assert_no_values()
    assert spy.subscription.cancelled.is_set()


def test_reduce_returning_none_fails_with_type_error() -> None:
    def nothing(a: Any, b: Any) -> Any:
        return None

    result: TestSubscriber[Any] = TestSubscriber()
    reduce_rails(operators.parallel(just(1, 2, 3), 2), nothing).subscribe(result)
    result.assert_error(TypeError)
    assert str(result.errors[0]) == f"parallel reduce's fn must not return None (rule 2.13), got None from {nothing!r}"


def test_sorted_merges_the_sorted_rails_as_the_subscriber_requests() -> None:
    result: TestSubscriber[int] = TestSubscriber(0)
    sorted_rails(operators.parallel(just(5, 3, 9, 1, 7, 2, 8), 3)).subscribe(result)
    result.request(2).assert_values(1, 2).assert_not_complete()
    result.request(MAX).assert_result(1, 2, 3, 5, 7, 8, 9)


def test_sorted_with_key_and_reverse() -> None:
    result: TestSubscriber[str] = TestSubscriber()
    words = just("pear", "fig", "banana", "kiwi", "apple")
    sorted_rails(operators.parallel(words, 2), len, reverse=True).subscribe(result)
    assert result.values[0] == "banana"
    assert [len(w) for w in result.values] == [6, 5, 4, 4, 3]


def test_sorted_key_failure_fails_the_result() -> None:
    result: TestSubscriber[Any] = TestSubscriber()
    sorted_rails(operators.parallel(just(3, "x", 1), 1)).subscribe(result)
    result.assert_error(TypeError).assert_no_values()


def test_sorted_rail_error_cancels_the_others_and_fails() -> None:
    failure = RuntimeError("source failed")
    source = SubmissionPublisher[int](executor=direct_executor)
    result: TestSubscriber[int] = TestSubscriber()
    sorted_rails(operators.parallel(source, 2)).subscribe(result)
    source.submit(2)
    source.close_exceptionally(failure)
    result.assert_error(failure).assert_no_values()


def test_joins_cancelled_before_the_rails_end_cancel_the_source() -> None:
    spy = Spy(RangePublisher(0, 100))
    source = SubmissionPublisher[int](executor=direct_executor)
    result: TestSubscriber[int] = TestSubscriber()
    sorted_rails(operators.parallel(source, 2)).subscribe(result)
    source.submit(1)
    result.cancel()
    assert source.number_of_subscribers == 0
    cancelled: TestSubscriber[int] = TestSubscriber()
    cancelled.cancel()
    reduce_rails(operators.parallel(spy, 2), operator.add).subscribe(cancelled)
    assert spy.subscriptions == []


def test_joins_reject_bad_arguments() -> None:
    rails = operators.parallel(just(1), 2)
    with pytest.raises(TypeError, match=r"^fn must be callable, got 1$"):
        reduce_rails(rails, 1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^key must be callable or None, got 1$"):
        sorted_rails(rails, 1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^rails must be a ParallelPublisher, got 1$"):
        reduce_rails(1, operator.add)  # type: ignore[arg-type]


# --- run_on: threads and contexts ------------------------------------------------------------


def test_run_on_runs_the_rails_at_the_same_time_on_different_threads(pool: DaemonThreadPool) -> None:
    both_running = threading.Barrier(2, timeout=WAIT)
    threads: dict[int, set[int]] = {0: set(), 1: set()}

    def meet(x: int) -> int:
        if x < 2:
            both_running.wait()  # passes only if rail 0 and rail 1 run at once
        threads[x % 2].add(threading.get_ident())
        return x

    rails = operators.parallel(RangePublisher(0, 20), 2).through(
        lambda rail: operators.map(operators.observe_on(rail, pool, prefetch=4), meet)
    )
    result: TestSubscriber[int] = TestSubscriber()
    operators.sequential(rails).subscribe(result)
    result.await_done(WAIT).assert_complete()
    assert sorted(result.values) == list(range(20))
    assert threading.get_ident() not in threads[0] | threads[1]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("run", range(10))
def test_run_on_pipeline_delivers_every_item_once(pool: DaemonThreadPool, tiny_switch_interval: None, run: int) -> None:
    count = 3000
    rails = (
        operators.parallel(operators.observe_on(RangePublisher(0, count), pool, prefetch=16), 4, prefetch=16)
        .through(lambda rail: operators.observe_on(rail, pool, prefetch=4))
        .through(lambda rail: operators.filter(operators.map(rail, lambda x: x * 2), lambda x: x % 3 != 0))
    )
    result: TestSubscriber[int] = TestSubscriber()
    operators.sequential(rails, prefetch=8).subscribe(result)
    result.await_done(WAIT * 3).assert_complete()
    assert sorted(result.values) == [x * 2 for x in range(count) if (x * 2) % 3 != 0]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("run", range(5))
def test_run_on_reduce_and_sorted_across_threads(pool: DaemonThreadPool, tiny_switch_interval: None, run: int) -> None:
    count = 2000

    def rails() -> ParallelPublisher[int]:
        return operators.parallel(RangePublisher(0, count), 3, prefetch=8).through(
            lambda rail: operators.observe_on(rail, pool, prefetch=4)
        )

    total: TestSubscriber[int] = TestSubscriber()
    reduce_rails(rails(), operator.add).subscribe(total)
    ordered: TestSubscriber[int] = TestSubscriber()
    sorted_rails(rails(), lambda x: -x).subscribe(ordered)
    total.await_done(WAIT).assert_result(sum(range(count)))
    ordered.await_done(WAIT).assert_result(*reversed(range(count)))


def test_run_on_functions_and_signals_see_the_subscribe_context(pool: DaemonThreadPool) -> None:
    source = SubmissionPublisher[int](executor=pool)
    seen: set[str] = set()
    lock = threading.Lock()

    def record(x: int) -> int:
        with lock:
            seen.add(REQUEST_ID.get("<unset>"))
        return x

    rails = operators.parallel(source, 2).through(
        lambda rail: operators.map(operators.observe_on(rail, pool, prefetch=2), record)
    )
    recorder = ContextRecorder(MAX)
    in_context("request-1", operators.sequential(rails).subscribe, recorder)

    def produce() -> None:
        REQUEST_ID.set("producer")
        for i in range(30):
            source.submit(i)
        source.close()

    in_fresh_thread(produce)
    assert recorder.done.wait(WAIT)
    assert sorted(recorder.items) == list(range(30))
    assert recorder.values() == {"request-1"}
    assert seen == {"request-1"}


def test_reduce_keyboard_interrupt_fails_the_result_cancels_the_source_and_propagates() -> None:
    spy = Spy(RangePublisher(0, 100))

    def interrupted(a: int, b: int) -> int:
        if b == 9:
            raise KeyboardInterrupt
        return a + b

    result: TestSubscriber[int] = TestSubscriber()
    with pytest.raises(KeyboardInterrupt):
        reduce_rails(operators.parallel(spy, 2, prefetch=4), interrupted).subscribe(result)
    result.assert_error(KeyboardInterrupt).assert_no_values()
    assert spy.subscription.cancelled.is_set()
