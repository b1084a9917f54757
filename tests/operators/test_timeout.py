"""timeout: StreamTimeoutError, or the fallback with the unfilled demand, after a silence."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from flowpy import operators
from flowpy.errors import StreamTimeoutError
from flowpy.flowable import Flowable
from flowpy.sources import RangePublisher
from flowpy.testing import TestScheduler, TestSubscriber
from tests.context_helpers import REQUEST_ID, ContextRecorder, in_context, in_fresh_thread
from tests.operators.conftest import HotSource, Spy

UNBOUNDED = 2**63 - 1


def test_timeout_fails_after_a_silence_and_cancels_the_source() -> None:
    scheduler = TestScheduler()
    source = HotSource()
    subscriber = Flowable(source).timeout(1.0, scheduler=scheduler).test()
    scheduler.advance_time_by(0.9)
    source.emit(1)
    scheduler.advance_time_by(0.9)
    source.emit(2)
    scheduler.advance_time_by(0.99)
    subscriber.assert_values(1, 2).assert_no_errors()
    scheduler.advance_time_by(0.01)
    subscriber.assert_failure(StreamTimeoutError, 1, 2)
    assert isinstance(subscriber.errors[0], TimeoutError)
    assert str(subscriber.errors[0]) == "the source signalled nothing for 1 s and was cancelled (timeout)"
    assert source.cancelled
    source.emit(3)  # in flight after the timeout: ignored
    subscriber.assert_values(1, 2)
    assert scheduler.pending == 0


def test_timeout_counts_from_the_subscription_for_the_first_item() -> None:
    scheduler = TestScheduler()
    subscriber = Flowable(HotSource()).timeout(2.0, scheduler=scheduler).test()
    scheduler.advance_time_by(2.0)
    subscriber.assert_failure(StreamTimeoutError)


def test_timeout_completion_in_time_stops_the_clock() -> None:
    scheduler = TestScheduler()
    subscriber = Flowable.range(0, 3).timeout(1.0, scheduler=scheduler).test()
    subscriber.assert_result(0, 1, 2)
    assert scheduler.pending == 0
    scheduler.advance_time_by(5.0)
    subscriber.assert_result(0, 1, 2)


def test_timeout_source_error_passes_through() -> None:
    scheduler = TestScheduler()
    source = HotSource()
    subscriber = Flowable(source).timeout(1.0, scheduler=scheduler).test()
    source.fail(KeyError("x"))
    subscriber.assert_failure(KeyError)
    assert scheduler.pending == 0


def test_timeout_switches_to_the_fallback_with_the_unfilled_demand() -> None:
    scheduler = TestScheduler()
    source = HotSource()
    fallback = Spy(RangePublisher(100, 10))
    subscriber = Flowable(source).timeout(1.0, fallback=fallback, scheduler=scheduler).test(initial_request=5)
    source.emit(1, 2)
    scheduler.advance_time_by(1.0)
    assert source.cancelled
    assert fallback.subscription.requests == [3]
    subscriber.assert_values(1, 2, 100, 101, 102).assert_no_errors()
    subscriber.request(20)
    subscriber.assert_result(1, 2, *range(100, 110))


def test_timeout_with_a_silent_fallback_never_times_out_again() -> None:
    scheduler = TestScheduler()
    subscriber = Flowable(HotSource()).timeout(1.0, fallback=HotSource(), scheduler=scheduler).test()
    scheduler.advance_time_by(10.0)
    subscriber.assert_no_values().assert_no_errors().assert_not_complete()
    assert scheduler.pending == 0


def test_timeout_cancel_cancels_the_fallback() -> None:
    scheduler = TestScheduler()
    fallback = HotSource()
    subscriber = Flowable(HotSource()).timeout(1.0, fallback=fallback, scheduler=scheduler).test()
    scheduler.advance_time_by(1.0)
    subscriber.cancel()
    assert fallback.cancelled


def test_timeout_waits_for_a_slow_on_next_and_restarts_when_it_returns() -> None:
    scheduler = TestScheduler()
    source = HotSource()

    class Slow(TestSubscriber[Any]):
        def on_next(self, item: Any) -> None:
            super().on_next(item)
            if item == 1:
                # The clock runs while on_next does: the timer must not time out during it (rule 1.3).
                in_fresh_thread(lambda: scheduler.advance_time_by(5.0))

    subscriber = Slow()
    operators.timeout(source, 1.0, scheduler=scheduler).subscribe(subscriber)
    source.emit(1)
    subscriber.assert_values(1).assert_no_errors()
    scheduler.advance_time_by(0.99)
    subscriber.assert_no_errors()
    scheduler.advance_time_by(0.01)
    subscriber.assert_failure(StreamTimeoutError, 1)


def test_timeout_invalid_request_is_signalled_by_the_source() -> None:
    scheduler = TestScheduler()
    subscriber = Flowable.range(0, 5).timeout(1.0, scheduler=scheduler).test(initial_request=0)
    subscriber.request(-3)
    subscriber.assert_error(ValueError)


def test_timeout_is_signalled_in_the_subscribers_context() -> None:
    scheduler = TestScheduler()
    recorder = ContextRecorder(initial=UNBOUNDED)
    in_context("request-1", lambda: operators.timeout(HotSource(), 1.0, scheduler=scheduler).subscribe(recorder))
    in_fresh_thread(lambda: (REQUEST_ID.set("advancer"), scheduler.advance_time_by(1.0)))
    assert isinstance(recorder.error, StreamTimeoutError)
    assert recorder.values() == {"request-1"}


def test_timeout_fallback_is_subscribed_in_the_subscribers_context() -> None:
    scheduler = TestScheduler()
    recorder = ContextRecorder(initial=UNBOUNDED)
    fallback = RangePublisher(0, 2)
    in_context(
        "request-1",
        lambda: operators.timeout(HotSource(), 1.0, fallback=fallback, scheduler=scheduler).subscribe(recorder),
    )
    in_fresh_thread(lambda: (REQUEST_ID.set("advancer"), scheduler.advance_time_by(1.0)))
    assert recorder.items == [0, 1]
    assert recorder.completed
    assert recorder.values() == {"request-1"}


def test_timeout_bad_arguments_raise() -> None:
    with pytest.raises(ValueError, match=r"^seconds must be a finite number of seconds > 0, got 0$"):
        operators.timeout(RangePublisher(0, 1), 0)
    with pytest.raises(TypeError, match=r"^fallback must be a Publisher, got 3$"):
        operators.timeout(RangePublisher(0, 1), 1, fallback=3)  # type: ignore[arg-type]


def test_second_subscription_from_the_source_is_cancelled() -> None:
    scheduler = TestScheduler()
    source = HotSource()
    subscriber = Flowable(source).timeout(1.0, scheduler=scheduler).test()
    extra = source.subscription.__class__()
    assert source.subscriber is not None
    source.subscriber.on_subscribe(extra)
    assert extra.cancels == 1
    subscriber.assert_no_errors()


@pytest.mark.timeout(60)
def test_timeout_race_between_items_and_the_timer_keeps_the_rules(tiny_switch_interval: None) -> None:
    # On the real scheduler, the timer fires on a pool thread while items arrive on another.
    for _ in range(20):
        source = HotSource()
        subscriber = Flowable(source).timeout(0.001).test()
        done = threading.Event()

        def produce(source: HotSource = source, done: threading.Event = done) -> None:
            for i in range(200):
                source.emit(i)
            source.complete()
            done.set()

        thread = threading.Thread(target=produce)
        thread.start()
        thread.join(10)
        assert done.is_set()
        subscriber.await_done(10)
        assert subscriber.violations == []
        assert subscriber.completions + len(subscriber.errors) == 1
        if subscriber.errors:
            subscriber.assert_error(StreamTimeoutError)
        else:
            assert subscriber.values == list(range(200))
