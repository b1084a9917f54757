"""delay and delay_subscription in virtual time."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flowpy import operators
from flowpy.errors import MissingBackpressureError
from flowpy.flowable import Flowable
from flowpy.sources import RangePublisher
from flowpy.testing import TestScheduler, TestSubscriber
from tests.context_helpers import REQUEST_ID, ContextRecorder, in_context, in_fresh_thread
from tests.operators.conftest import HotSource, Spy

UNBOUNDED = 2**63 - 1


def timed(values: list[Any]) -> list[tuple[Any, float]]:
    return [(v.value, v.timestamp) for v in values]


# --- delay ----------------------------------------------------------------------------------


def test_delay_shifts_each_item_and_the_completion() -> None:
    scheduler = TestScheduler()
    source = HotSource()
    subscriber = Flowable(source).delay(2.0, scheduler=scheduler).timestamp(scheduler=scheduler).test()
    source.emit(1)
    scheduler.advance_time_by(0.5)
    source.emit(2)
    scheduler.advance_time_by(1.0)
    source.emit(3)
    source.complete()
    scheduler.advance_time_by(1.0)
    assert timed(subscriber.values) == [(1, 2.0), (2, 2.5)]
    subscriber.assert_not_complete()
    scheduler.advance_time_by(1.0)
    assert timed(subscriber.values) == [(1, 2.0), (2, 2.5), (3, 3.5)]
    subscriber.assert_complete()
    assert scheduler.pending == 0


def test_delay_does_not_delay_an_error_and_drops_what_it_holds() -> None:
    scheduler = TestScheduler()
    source = HotSource()
    subscriber = Flowable(source).delay(2.0, scheduler=scheduler).test()
    source.emit(1)
    scheduler.advance_time_by(1.0)
    source.fail(KeyError("now"))
    subscriber.assert_failure(KeyError)
    scheduler.advance_time_by(5.0)
    subscriber.assert_no_values()
    assert scheduler.pending == 0


def test_delay_requests_only_what_the_subscriber_asked_for_up_to_prefetch() -> None:
    scheduler = TestScheduler()
    spy = Spy(RangePublisher(0, 100))
    subscriber = Flowable(spy).delay(1.0, scheduler=scheduler, prefetch=4).test(initial_request=0)
    assert spy.subscription.requests == []
    subscriber.request(2)
    assert spy.subscription.requests == [2]
    subscriber.request(10)
    assert spy.subscription.total == 4  # at most prefetch held
    scheduler.advance_time_by(1.0)
    subscriber.assert_values(0, 1, 2, 3)
    assert spy.subscription.total == 8  # topped up as items were delivered
    scheduler.advance_time_by(1.0)
    subscriber.assert_values(*range(8))


def test_delay_source_sending_more_than_requested_fails_with_missing_backpressure() -> None:
    scheduler = TestScheduler()
    source = HotSource()
    subscriber = Flowable(source).delay(1.0, scheduler=scheduler, prefetch=2).test()
    source.emit(1, 2, 3)
    subscriber.assert_failure(MissingBackpressureError)
    assert source.cancelled


def test_delay_cancel_drops_the_held_items_and_the_timer() -> None:
    scheduler = TestScheduler()
    source = HotSource()
    subscriber = Flowable(source).delay(1.0, scheduler=scheduler).test()
    source.emit(1, 2)
    subscriber.cancel()
    assert source.cancelled
    assert scheduler.pending == 0
    scheduler.advance_time_by(5.0)
    subscriber.assert_no_values()


def test_delay_zero_delivers_at_once() -> None:
    scheduler = TestScheduler()
    subscriber = Flowable.range(0, 3).delay(0, scheduler=scheduler).test()
    subscriber.assert_result(0, 1, 2)
    assert scheduler.pending == 0


@settings(max_examples=50, deadline=None)
@given(
    gaps=st.lists(st.integers(min_value=0, max_value=20), max_size=20),
    wait=st.integers(0, 15),
    pattern=st.lists(st.integers(1, 5), max_size=10),
)
def test_delay_output_is_the_input_shifted(gaps: list[int], wait: int, pattern: list[int]) -> None:
    scheduler = TestScheduler()
    source = HotSource()
    subscriber = Flowable(source).delay(wait / 10, scheduler=scheduler).timestamp(scheduler=scheduler).test()
    now = 0
    for i, gap in enumerate(gaps):
        now += gap
        scheduler.advance_time_to(now / 10)
        source.emit(i)
    source.complete()
    scheduler.advance_time_by(10.0)
    assert [v for v, _ in timed(subscriber.values)] == list(range(len(gaps)))
    arrivals = [sum(gaps[: i + 1]) for i in range(len(gaps))]
    assert [round(at * 10) for _, at in timed(subscriber.values)] == [a + wait for a in arrivals]
    subscriber.assert_complete()


def test_delay_emits_in_the_subscribers_context() -> None:
    scheduler = TestScheduler()
    recorder = ContextRecorder(initial=UNBOUNDED)
    in_context("request-1", lambda: operators.delay(RangePublisher(0, 3), 1.0, scheduler=scheduler).subscribe(recorder))
    in_fresh_thread(lambda: (REQUEST_ID.set("advancer"), scheduler.advance_time_by(2.0)))
    assert recorder.items == [0, 1, 2]
    assert recorder.completed
    assert recorder.values() == {"request-1"}


def test_delay_on_next_raising_keyboard_interrupt_cancels_and_propagates() -> None:
    scheduler = TestScheduler()
    source = HotSource()

    class Interrupting(TestSubscriber[Any]):
        def on_next(self, item: Any) -> None:
            super().on_next(item)
            raise KeyboardInterrupt

    subscriber = Interrupting()
    operators.delay(source, 1.0, scheduler=scheduler).subscribe(subscriber)
    source.emit(1, 2)
    with pytest.raises(KeyboardInterrupt):
        scheduler.advance_time_by(1.0)
    assert source.cancelled
    assert scheduler.pending == 0
    subscriber.assert_values(1)


def test_delay_bad_prefetch_raises_value_error() -> None:
    with pytest.raises(ValueError, match=r"^prefetch must be positive, got 0$"):
        operators.delay(RangePublisher(0, 1), 1.0, prefetch=0)


@pytest.mark.timeout(60)
def test_delay_on_the_default_scheduler_keeps_order_and_completes() -> None:
    Flowable.range(0, 500).delay(0.01).test().await_done(10).assert_result(*range(500))


# --- delay_subscription -------------------------------------------------------------------------


def test_delay_subscription_subscribes_the_source_after_the_delay() -> None:
    scheduler = TestScheduler()
    source = HotSource()
    subscriber = Flowable(source).delay_subscription(2.0, scheduler=scheduler).test(initial_request=3)
    subscriber.assert_subscribed()
    assert source.subscriber is None
    scheduler.advance_time_by(2.0)
    assert source.subscriber is not None
    assert source.subscription.requests == [3]  # what the subscriber asked for meanwhile
    source.emit(1, 2)
    source.complete()
    subscriber.assert_result(1, 2)


def test_delay_subscription_passes_later_requests_through() -> None:
    scheduler = TestScheduler()
    spy = Spy(RangePublisher(0, 10))
    subscriber = Flowable(spy).delay_subscription(1.0, scheduler=scheduler).test(initial_request=0)
    subscriber.request(2)
    scheduler.advance_time_by(1.0)
    subscriber.request(3)
    subscriber.assert_values(0, 1, 2, 3, 4)
    assert spy.subscription.requests == [2, 3]


def test_delay_subscription_cancelled_before_the_delay_never_subscribes() -> None:
    scheduler = TestScheduler()
    source = HotSource()
    subscriber = Flowable(source).delay_subscription(2.0, scheduler=scheduler).test()
    subscriber.cancel()
    assert scheduler.pending == 0
    scheduler.advance_time_by(5.0)
    assert source.subscriber is None


def test_delay_subscription_invalid_request_ends_the_stream_at_once() -> None:
    scheduler = TestScheduler()
    source = HotSource()
    subscriber = Flowable(source).delay_subscription(1.0, scheduler=scheduler).test(initial_request=0)
    subscriber.request(0)
    subscriber.assert_error(ValueError)
    assert scheduler.pending == 0
    scheduler.advance_time_by(1.0)
    assert source.subscriber is None


def test_delay_subscription_subscribes_in_the_subscribers_context() -> None:
    scheduler = TestScheduler()
    seen: list[str] = []

    class Source(HotSource):
        def subscribe(self, subscriber: Any) -> None:
            seen.append(REQUEST_ID.get("<unset>"))
            RangePublisher(0, 2).subscribe(subscriber)

    recorder = ContextRecorder(initial=UNBOUNDED)
    in_context(
        "request-1", lambda: operators.delay_subscription(Source(), 1.0, scheduler=scheduler).subscribe(recorder)
    )
    in_fresh_thread(lambda: scheduler.advance_time_by(1.0))
    assert seen == ["request-1"]
    assert recorder.items == [0, 1]
    assert recorder.values() == {"request-1"}
