"""concat_map, start_with, repeat and default_if_empty."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings

from flowpy import operators
from flowpy.errors import MissingBackpressureError
from flowpy.executors import DaemonThreadPool
from flowpy.flow import Publisher, Subscriber
from flowpy.flowable import Flowable
from flowpy.sources import IterablePublisher, RangePublisher, empty, error, just
from flowpy.testing import TestSubscriber
from tests.operators.conftest import Attempts, Spy, StubSubscription, drive, items_lists, patterns, then_fail

WAIT = 10.0


@pytest.fixture
def pool() -> Iterator[DaemonThreadPool]:
    executor = DaemonThreadPool(2, thread_name_prefix="sequential")
    try:
        yield executor
    finally:
        executor.shutdown()


# --- concat_map ------------------------------------------------------------------------


def test_concat_map_keeps_the_order_of_asynchronous_inners(pool: DaemonThreadPool) -> None:
    subscriber = Flowable.range(0, 50).concat_map(lambda x: IterablePublisher([x, x], executor=pool), prefetch=3).test()
    subscriber.await_done(WAIT).assert_result(*[x for x in range(50) for _ in range(2)])


def test_concat_map_maps_the_next_item_only_when_the_inner_before_completed() -> None:
    mapped: list[int] = []

    def inner(x: int) -> Publisher[int]:
        mapped.append(x)
        return just(x * 10, x * 10 + 1, x * 10 + 2)

    subscriber = Flowable.range(0, 3).concat_map(inner).test(initial_request=2)
    assert mapped == [0]  # the first inner has one item left
    subscriber.request(1)  # its last item: it completes
    assert mapped == [0, 1]
    subscriber.request(10).assert_result(0, 1, 2, 10, 11, 12, 20, 21, 22)


def test_concat_map_passes_the_demand_to_the_inner_and_carries_what_it_left() -> None:
    inners = [Spy(just(1, 2)), Spy(just(3, 4, 5))]
    subscriber = Flowable.range(0, 2).concat_map(lambda x: inners[x]).test(initial_request=3)
    subscriber.assert_values(1, 2, 3)
    assert inners[0].subscription.requests == [3]
    assert inners[1].subscription.requests == [1]
    subscriber.request(5).assert_result(1, 2, 3, 4, 5)


def test_concat_map_asks_the_source_for_prefetch_items_and_again_as_they_are_mapped() -> None:
    source = Spy(RangePublisher(0, 100))
    subscriber = Flowable.from_publisher(source).concat_map(lambda x: just(x), prefetch=4).test(initial_request=0)
    assert source.subscription.requests == [4]
    subscriber.request(3)  # three items mapped: 75 % of 4 consumed, so 3 more
    assert source.subscription.requests == [4, 3]
    subscriber.request(100).assert_value_count(100).assert_complete()
    assert source.subscription.total <= 100 + 4


@pytest.mark.parametrize("where", ["source", "inner"])
def test_concat_map_error_cancels_the_rest_and_is_signalled_at_once(where: str) -> None:
    failure = RuntimeError(where)
    inner = Spy(just(1, 2, 3))
    source = Spy(then_fail([0], failure) if where == "source" else just(0, 1))
    mapped = operators.concat_map(source, lambda x: inner if where == "source" else then_fail([1], failure))
    subscriber: TestSubscriber[int] = TestSubscriber(initial_request=1)
    mapped.subscribe(subscriber)
    subscriber.assert_failure(failure, 1)  # the source's error does not wait for the inner's items
    if where == "source":
        assert inner.subscription.cancelled.is_set()
    else:
        assert source.subscription.cancelled.is_set()


@pytest.mark.parametrize("result", ["raises", "not a publisher"])
def test_concat_map_bad_function_fails_and_cancels_the_source(result: str) -> None:
    def fn(x: int) -> Any:
        if result == "raises":
            raise LookupError("no inner")
        return x

    source = Spy(RangePublisher(0, 10))
    subscriber = Flowable.from_publisher(source).concat_map(fn).test()
    subscriber.assert_error(LookupError if result == "raises" else TypeError)
    if result == "not a publisher":
        assert str(subscriber.errors[0]) == "concat_map function result must be a Publisher, got 0"
    assert source.subscription.cancelled.is_set()


def test_concat_map_cancel_cancels_the_source_and_the_inner() -> None:
    source = Spy(RangePublisher(0, 10))
    inner = Spy(RangePublisher(0, 10))
    subscriber = Flowable.from_publisher(source).concat_map(lambda x: inner).test(initial_request=2)
    subscriber.cancel()
    assert source.subscription.cancelled.is_set()
    assert inner.subscription.cancelled.is_set()


def test_concat_map_source_sending_more_than_prefetch_fails_with_missing_backpressure() -> None:
    class Flooding(Publisher[int]):
        def subscribe(self, subscriber: Subscriber[int]) -> None:
            subscriber.on_subscribe(StubSubscription())
            for item in range(5):  # asked for 2
                subscriber.on_next(item)

    parked = Spy(Flowable.range(0, 1))
    subscriber = TestSubscriber[int](initial_request=0)
    operators.concat_map(Flooding(), lambda x: parked).subscribe(subscriber)
    subscriber.assert_error(MissingBackpressureError)
    assert str(subscriber.errors[0]) == "concat_map's source sent more than the 2 items requested"


@settings(max_examples=50, deadline=None)
@given(items=items_lists, pattern=patterns)
def test_concat_map_matches_a_nested_list_under_any_request_pattern(items: list[int], pattern: list[int]) -> None:
    recorder = drive(operators.concat_map(just(*items), lambda x: just(*range(abs(x) % 4))), pattern)
    assert recorder.items == [y for x in items for y in range(abs(x) % 4)]
    assert recorder.completed


def test_concat_map_prefetch_must_be_positive() -> None:
    with pytest.raises(ValueError, match=r"^prefetch must be positive, got 0$"):
        operators.concat_map(just(1), just, prefetch=0)


# --- start_with ---------------------------------------------------------------------


def test_start_with_emits_the_items_first_then_the_source_with_the_demand_left() -> None:
    source = Spy(RangePublisher(3, 5))
    subscriber = Flowable.from_publisher(source).start_with(1, 2).test(initial_request=1)
    subscriber.assert_values(1)
    assert source.subscriptions == []  # subscribed once the items are delivered
    subscriber.request(3).assert_values(1, 2, 3, 4)
    assert source.subscription.requests == [2]
    subscriber.request(10).assert_result(1, 2, 3, 4, 5, 6, 7)


def test_start_with_no_items_is_the_source_itself() -> None:
    source = just(1)
    assert operators.start_with(source) is source


def test_start_with_none_item_raises_type_error() -> None:
    with pytest.raises(TypeError, match=r"^items must not be None \(rule 2\.13\), got None at position 1$"):
        operators.start_with(just(1), 0, None)


def test_start_with_error_of_the_source_comes_after_the_items() -> None:
    failure = RuntimeError("x")
    Flowable.error(failure).start_with(1).test().assert_failure(failure, 1)


# --- repeat ---------------------------------------------------------------------------


def test_repeat_n_subscribes_n_times_in_all() -> None:
    source = Attempts(just(1, 2))
    Flowable.from_publisher(source).repeat(3).test().assert_result(1, 2, 1, 2, 1, 2)
    assert source.count == 3


def test_repeat_one_is_the_source_once_and_zero_completes_without_subscribing() -> None:
    once = Attempts(just(1))
    Flowable.from_publisher(once).repeat(1).test().assert_result(1)
    assert once.count == 1
    never = Attempts(just(1))
    Flowable.from_publisher(never).repeat(0).test().assert_result()
    assert never.count == 0


def test_repeat_forever_until_cancelled() -> None:
    source = Attempts(just(1, 2))
    Flowable.from_publisher(source).repeat().take(7).test().assert_result(1, 2, 1, 2, 1, 2, 1)
    assert source.count == 4
    assert source.subscription.cancelled.is_set()


def test_repeat_error_ends_the_repetition() -> None:
    failure = RuntimeError("x")
    source = Attempts(then_fail([1], failure), just(2))
    Flowable.from_publisher(source).repeat(5).test().assert_failure(failure, 1)
    assert source.count == 1


def test_repeat_carries_the_demand_to_the_next_subscription() -> None:
    source = Attempts(just(1, 2, 3))
    subscriber = Flowable.from_publisher(source).repeat(2).test(initial_request=5)
    subscriber.assert_values(1, 2, 3, 1, 2)
    assert [s.requests for s in source.subscriptions] == [[5], [2]]


def test_repeat_negative_times_raises_value_error() -> None:
    with pytest.raises(ValueError, match=r"^times must be non-negative, got -2$"):
        operators.repeat(just(1), -2)


# --- default_if_empty ----------------------------------------------------------------


def test_default_if_empty_emits_the_item_when_requested_if_the_source_was_empty() -> None:
    subscriber = Flowable.from_publisher(empty()).default_if_empty(9).test(initial_request=0)
    subscriber.assert_no_values().assert_not_complete()
    subscriber.request(1).assert_result(9)


def test_default_if_empty_passes_a_non_empty_source_through() -> None:
    source = Spy(RangePublisher(0, 3))
    subscriber = Flowable.from_publisher(source).default_if_empty(9).test(initial_request=2)
    assert source.subscription.requests == [2]
    subscriber.request(5).assert_result(0, 1, 2)


def test_default_if_empty_passes_an_error_on() -> None:
    failure = RuntimeError("x")
    Flowable.from_publisher(error(failure)).default_if_empty(9).test().assert_error(failure)


def test_default_if_empty_none_item_raises_type_error() -> None:
    with pytest.raises(TypeError, match=r"^item must not be None \(rule 2\.13\)$"):
        operators.default_if_empty(just(1), None)


@pytest.mark.timeout(60)
def test_concat_map_300_stages_deliver_everything() -> None:
    # Each stage's loop subscribes the next inner inside the loop of the
    # stage above: through the trampoline, not 300 stages deep on one stack.
    chain: Any = RangePublisher(0, 20)
    for _ in range(300):
        chain = operators.concat_map(chain, just)
    recorder = drive(chain, [1, 3, 7])
    assert recorder.items == list(range(20))
    assert recorder.completed
