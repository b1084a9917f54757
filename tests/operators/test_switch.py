"""switch_map: only the publisher of the latest item is followed."""

from __future__ import annotations

from typing import Any

import pytest

from flowpy import operators
from flowpy.executors import DaemonThreadPool, direct_executor
from flowpy.flow import Publisher
from flowpy.flowable import Flowable
from flowpy.sources import RangePublisher, error, just
from flowpy.submission import SubmissionPublisher
from tests.operators.conftest import GatedPublisher, Spy, then_fail
from tests.sources_helpers import SpyPublisher
from tests.support import Recorder

WAIT = 10.0


def _hot() -> SubmissionPublisher[Any]:
    return SubmissionPublisher(executor=direct_executor)


def test_switch_map_follows_the_latest_inner_and_cancels_the_one_before() -> None:
    outer = _hot()
    inners = {"a": _hot(), "b": _hot()}
    spied = {key: Spy(inner) for key, inner in inners.items()}
    subscriber = Flowable.from_publisher(outer).switch_map(lambda key: spied[key]).test()
    outer.submit("a")
    inners["a"].submit(1)
    inners["a"].submit(2)
    outer.submit("b")
    inners["a"].submit(3)  # a was replaced: ignored
    inners["b"].submit(5)
    outer.close()
    subscriber.assert_values(1, 2, 5).assert_not_complete()  # b is still going
    inners["b"].close()
    subscriber.assert_result(1, 2, 5)
    assert spied["a"].subscription.cancelled.is_set()


def test_switch_map_drops_the_queued_items_of_a_replaced_inner() -> None:
    outer = _hot()
    subscriber = Flowable.from_publisher(outer).switch_map(lambda x: just(x, x + 1)).test(initial_request=1)
    outer.submit(10)  # 10 delivered, 11 queued
    outer.submit(20)  # 11 dropped with its inner
    subscriber.request(5)
    outer.close()
    subscriber.assert_result(10, 20, 21)


def test_switch_map_asks_the_source_for_everything_and_the_inner_for_prefetch() -> None:
    source = Spy(just(0))
    inner = Spy(RangePublisher(0, 100))
    subscriber = Flowable.from_publisher(source).switch_map(lambda _: inner, prefetch=8).test(initial_request=0)
    assert source.subscription.requests == [2**63 - 1]
    assert inner.subscription.requests == [8]
    subscriber.request(6)  # six delivered: 75 % of 8, asked for again
    assert inner.subscription.requests == [8, 6]
    subscriber.request(1000).assert_value_count(100).assert_complete()


def test_switch_map_demand_carries_over_to_the_next_inner() -> None:
    outer = _hot()
    subscriber = Flowable.from_publisher(outer).switch_map(lambda x: just(x, x, x)).test(initial_request=4)
    outer.submit(1)
    outer.submit(2)
    outer.close()
    subscriber.assert_values(1, 1, 1, 2).request(5).assert_result(1, 1, 1, 2, 2, 2)


def test_switch_map_error_of_a_replaced_inner_is_ignored_and_of_the_current_one_fails() -> None:
    outer = _hot()
    inners = {"a": _hot(), "b": _hot()}
    subscriber = Flowable.from_publisher(outer).switch_map(lambda key: inners[key]).test()
    outer.submit("a")
    outer.submit("b")
    inners["a"].close_exceptionally(RuntimeError("stale"))
    subscriber.assert_no_errors()
    failure = RuntimeError("current")
    inners["b"].close_exceptionally(failure)
    subscriber.assert_error(failure)


@pytest.mark.parametrize("where", ["source", "function"])
def test_switch_map_failure_of_the_source_or_function_cancels_the_inner(where: str) -> None:
    failure = RuntimeError(where)
    inner = Spy(_hot())

    def fn(x: int) -> Publisher[Any]:
        if x == 1 and where == "function":
            raise failure
        return inner

    subscriber = Flowable.from_publisher(then_fail([0], failure) if where == "source" else just(0, 1)).switch_map(fn)
    subscriber.test().assert_error(failure)
    assert inner.subscription.cancelled.is_set()


def test_switch_map_function_returning_a_non_publisher_fails() -> None:
    subscriber = Flowable.just(1).switch_map(lambda x: x).test()  # type: ignore[arg-type, return-value]
    subscriber.assert_error(TypeError)
    assert str(subscriber.errors[0]) == "switch_map function result must be a Publisher, got 1"


def test_switch_map_cancel_cancels_the_source_and_the_inner() -> None:
    source, inner = Spy(_hot()), Spy(_hot())
    subscriber = Flowable.from_publisher(source).switch_map(lambda x: inner).test()
    source.inner.submit(1)  # type: ignore[attr-defined]
    subscriber.cancel()
    assert source.subscription.cancelled.is_set()
    assert inner.subscription.cancelled.is_set()


def test_switch_map_empty_source_completes() -> None:
    Flowable.empty().switch_map(lambda x: just(x)).test().assert_result()


def test_switch_map_error_of_the_source_after_the_inners_fails_at_once() -> None:
    failure = RuntimeError("x")
    Flowable.from_publisher(error(failure)).switch_map(lambda x: just(x)).test().assert_error(failure)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("run", range(10))
def test_switch_map_inners_on_threads_deliver_only_increasing_runs(run: int, tiny_switch_interval: None) -> None:
    pool = DaemonThreadPool(2, thread_name_prefix="switch")
    try:
        subscriber = (
            Flowable.range(0, 50)
            .switch_map(lambda x: Flowable.from_iterable([(x, n) for n in range(20)], executor=pool), prefetch=4)
            .test()
            .await_done(WAIT)
        )
        subscriber.assert_complete()
        values = subscriber.values
        assert values[-20:] == [(49, n) for n in range(20)]  # the last inner is followed to its end
        assert values == sorted(values)  # never back to an inner that was replaced
    finally:
        pool.shutdown()


def test_switch_map_prefetch_must_be_positive() -> None:
    with pytest.raises(ValueError, match=r"^prefetch must be positive, got 0$"):
        operators.switch_map(just(1), just, prefetch=0)


def test_switch_map_inner_subscription_arriving_as_the_downstream_cancels_is_cancelled() -> None:
    recorder = Recorder()
    inner = GatedPublisher(lambda _: recorder.cancel())  # the stage's sweep runs in the inner's window
    source = SpyPublisher()
    operators.switch_map(source, lambda _: inner).subscribe(recorder)
    assert source.subscriber is not None
    source.subscriber.on_next(1)
    assert inner.subscription.cancels == 1
    assert inner.subscription.requests == []


def test_switch_map_inner_made_after_the_downstream_cancelled_is_cancelled_on_arrival() -> None:
    recorder = Recorder()
    inner = GatedPublisher()

    def cancel_then_map(_: object) -> Publisher[Any]:
        recorder.cancel()  # the stage's sweep is over before this inner exists
        return inner

    source = SpyPublisher()
    operators.switch_map(source, cancel_then_map).subscribe(recorder)
    assert source.subscriber is not None
    source.subscriber.on_next(1)
    assert inner.subscription.cancels == 1
    assert inner.subscription.requests == []
