"""take_until, take_last, last, element_at, first and ignore_elements."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flowpy import operators
from flowpy.executors import direct_executor
from flowpy.flowable import Flowable
from flowpy.operators._fused import FusedPublisher
from flowpy.sources import RangePublisher, empty, error, just
from flowpy.submission import SubmissionPublisher
from flowpy.testing import TestSubscriber
from tests.operators.conftest import Spy, drive, items_lists, patterns

WAIT = 10.0


def _hot() -> SubmissionPublisher[Any]:
    return SubmissionPublisher(executor=direct_executor)


# --- take_until --------------------------------------------------------------------------


@pytest.mark.parametrize("signal", ["item", "completion"])
def test_take_until_other_item_or_completion_cancels_the_source_and_completes(signal: str) -> None:
    source, other = Spy(_hot()), Spy(_hot())
    subscriber = Flowable.from_publisher(source).take_until(other).test()
    source.inner.submit(1)  # type: ignore[attr-defined]
    source.inner.submit(2)  # type: ignore[attr-defined]
    if signal == "item":
        other.inner.submit("stop")  # type: ignore[attr-defined]
    else:
        other.inner.close()  # type: ignore[attr-defined]
    subscriber.assert_result(1, 2)
    assert source.subscription.cancelled.is_set()
    assert other.subscription.requests == [2**63 - 1]


def test_take_until_other_error_cancels_the_source_and_fails() -> None:
    source, other = Spy(_hot()), _hot()
    subscriber = Flowable.from_publisher(source).take_until(other).test()
    failure = RuntimeError("x")
    other.close_exceptionally(failure)
    subscriber.assert_error(failure)
    assert source.subscription.cancelled.is_set()


def test_take_until_end_of_the_source_cancels_other() -> None:
    other = Spy(_hot())
    Flowable.just(1, 2).take_until(other).test().assert_result(1, 2)
    assert other.subscription.cancelled.is_set()


def test_take_until_other_signalling_at_once_ends_the_stream_before_the_source_is_subscribed() -> None:
    source = Spy(RangePublisher(0, 10))
    Flowable.from_publisher(source).take_until(just("now")).test().assert_result()
    assert source.subscriptions == []


def test_take_until_passes_demand_through_to_the_source() -> None:
    source = Spy(RangePublisher(0, 10))
    subscriber = Flowable.from_publisher(source).take_until(_hot()).test(initial_request=2)
    subscriber.request(3).assert_values(0, 1, 2, 3, 4)
    assert source.subscription.requests == [2, 3]


def test_take_until_other_completing_while_an_item_is_delivered_waits_for_it() -> None:
    inside, release = threading.Event(), threading.Event()

    class Slow(TestSubscriber[int]):
        def on_next(self, item: int) -> None:
            super().on_next(item)
            inside.set()
            assert release.wait(WAIT)

    source, other = _hot(), _hot()
    subscriber = Slow()
    operators.take_until(source, other).subscribe(subscriber)
    delivering = threading.Thread(target=source.submit, args=(1,))
    delivering.start()
    assert inside.wait(WAIT)
    other.close()
    subscriber.assert_values(1).assert_not_complete()
    release.set()
    delivering.join(WAIT)
    subscriber.assert_result(1)


# --- take_last / last --------------------------------------------------------------------


def test_take_last_emits_the_last_items_after_the_completion_as_requested() -> None:
    source = Spy(RangePublisher(0, 10))
    subscriber = Flowable.from_publisher(source).take_last(3).test(initial_request=0)
    assert source.subscription.requests == [2**63 - 1]
    subscriber.assert_no_values().assert_not_complete()
    subscriber.request(2).assert_values(7, 8).assert_not_complete()
    subscriber.request(1).assert_result(7, 8, 9)


def test_take_last_keeps_at_most_count_items() -> None:
    hot = _hot()
    publisher = operators.take_last(hot, 4)
    subscriber: TestSubscriber[int] = TestSubscriber()
    publisher.subscribe(subscriber)
    for item in range(10_000):
        hot.submit(item)
    subscriber.assert_no_values()
    hot.close()
    subscriber.assert_result(9996, 9997, 9998, 9999)


def test_take_last_error_is_signalled_at_once_and_the_items_dropped() -> None:
    failure = RuntimeError("x")
    Flowable.from_publisher(operators.concat(just(1, 2), error(failure))).take_last(2).test().assert_error(
        failure
    ).assert_no_values()


def test_take_last_zero_and_fewer_items_than_count() -> None:
    Flowable.range(0, 5).take_last(0).test().assert_result()
    Flowable.range(0, 2).take_last(5).test().assert_result(0, 1)


def test_last_is_the_last_item_or_nothing() -> None:
    Flowable.range(0, 5).last().test().assert_result(4)
    Flowable.empty().last().test().assert_result()
    Flowable.empty().last().default_if_empty(-1).test().assert_result(-1)


@settings(max_examples=60, deadline=None)
@given(items=items_lists, count=st.integers(min_value=0, max_value=45), pattern=patterns)
def test_take_last_matches_a_list_slice_under_any_request_pattern(
    items: list[int], count: int, pattern: list[int]
) -> None:
    recorder = drive(operators.take_last(just(*items), count), pattern)
    assert recorder.items == (items[-count:] if count else [])
    assert recorder.completed


def test_take_last_negative_count_raises() -> None:
    with pytest.raises(ValueError, match=r"^count must be non-negative, got -1$"):
        operators.take_last(just(1), -1)


# --- element_at / first ------------------------------------------------------------------


def test_element_at_requests_index_plus_one_and_cancels_after_the_item() -> None:
    source = Spy(RangePublisher(0, 10**12))
    Flowable.from_publisher(source).element_at(3).test().assert_result(3)
    assert source.subscription.requests == [4]
    assert source.subscription.cancelled.is_set()
    assert isinstance(operators.element_at(just(1), 0), FusedPublisher)


def test_element_at_beyond_the_end_completes_empty() -> None:
    Flowable.range(0, 3).element_at(3).test().assert_result()


def test_first_requests_one_item() -> None:
    source = Spy(RangePublisher(5, 10**12))
    Flowable.from_publisher(source).first().test().assert_result(5)
    assert source.subscription.requests == [1]
    Flowable.from_publisher(empty()).first().test().assert_result()


def test_element_at_negative_index_raises() -> None:
    with pytest.raises(ValueError, match=r"^index must be non-negative, got -1$"):
        operators.element_at(just(1), -1)


# --- ignore_elements ------------------------------------------------------------------------


def test_ignore_elements_passes_only_the_terminal_signal_without_demand() -> None:
    source = Spy(RangePublisher(0, 10))
    Flowable.from_publisher(source).ignore_elements().test(initial_request=0).assert_result()
    assert source.subscription.requests == [2**63 - 1]
    failure = RuntimeError("x")
    Flowable.from_publisher(error(failure)).ignore_elements().test(initial_request=0).assert_error(failure)


def test_ignore_elements_invalid_request_goes_up_and_fails() -> None:
    hot = _hot()
    subscriber = Flowable.from_publisher(hot).ignore_elements().test(initial_request=0)
    subscriber.request(0)
    subscriber.assert_error(ValueError)
