"""interval and timer: ticks on a scheduler's clock, admitted by demand or failing with MissingBackpressureError."""

from __future__ import annotations

from typing import Any

import pytest

from flowpy import operators
from flowpy.errors import MissingBackpressureError
from flowpy.flowable import Flowable
from flowpy.testing import TestScheduler, TestSubscriber
from tests.context_helpers import REQUEST_ID, ContextRecorder, in_context, in_fresh_thread

WAIT = 10.0


def timed(values: list[Any]) -> list[tuple[Any, float]]:
    return [(v.value, v.timestamp) for v in values]


def test_interval_emits_counts_one_period_apart_from_one_period_after_subscription() -> None:
    scheduler = TestScheduler()
    subscriber = Flowable.interval(1.0, scheduler=scheduler).timestamp(scheduler=scheduler).test()
    scheduler.advance_time_by(0.999)
    subscriber.assert_no_values()
    scheduler.advance_time_by(3.001)
    assert timed(subscriber.values) == [(0, 1.0), (1, 2.0), (2, 3.0), (3, 4.0)]
    subscriber.assert_not_complete().assert_no_errors()
    subscriber.cancel()
    assert scheduler.pending == 0


def test_interval_initial_delay_sets_the_first_tick() -> None:
    scheduler = TestScheduler()
    subscriber = Flowable.interval(2.0, 0.5, scheduler=scheduler).timestamp(scheduler=scheduler).test()
    scheduler.advance_time_by(5.0)
    assert timed(subscriber.values) == [(0, 0.5), (1, 2.5), (2, 4.5)]


def test_interval_zero_initial_delay_ticks_at_the_next_trigger() -> None:
    scheduler = TestScheduler()
    subscriber = Flowable.interval(1.0, 0, scheduler=scheduler).test()
    subscriber.assert_no_values()
    scheduler.trigger_actions()
    subscriber.assert_values(0)


def test_interval_ten_thousand_virtual_periods_do_not_drift() -> None:
    scheduler = TestScheduler()
    subscriber = Flowable.interval(0.001, scheduler=scheduler).timestamp(scheduler=scheduler).test()
    for _ in range(10_000):
        scheduler.advance_time_by(0.001)
    assert len(subscriber.values) == 10_000
    assert subscriber.values[-1].timestamp == 10.0


def test_interval_tick_without_demand_fails_with_missing_backpressure_and_stops() -> None:
    scheduler = TestScheduler()
    subscriber = Flowable.interval(1.0, scheduler=scheduler).test(initial_request=2)
    scheduler.advance_time_by(3.0)
    subscriber.assert_failure(MissingBackpressureError, 0, 1)
    assert str(subscriber.errors[0]) == (
        "interval could not emit tick 2 for lack of requests; "
        "put on_backpressure_drop(), on_backpressure_latest() or on_backpressure_buffer() after it"
    )
    assert scheduler.pending == 0


def test_interval_with_on_backpressure_drop_skips_the_ticks_nobody_asked_for() -> None:
    scheduler = TestScheduler()
    subscriber = Flowable.interval(1.0, scheduler=scheduler).on_backpressure_drop().test(initial_request=1)
    scheduler.advance_time_by(5.0)
    subscriber.request(1)
    scheduler.advance_time_by(1.0)
    subscriber.assert_values(0, 5).assert_no_errors()


def test_interval_with_on_backpressure_latest_keeps_the_newest_tick() -> None:
    scheduler = TestScheduler()
    subscriber = Flowable.interval(1.0, scheduler=scheduler).on_backpressure_latest().test(initial_request=1)
    scheduler.advance_time_by(5.0)
    subscriber.request(1)
    subscriber.assert_values(0, 4).assert_no_errors()


def test_interval_request_made_between_ticks_covers_the_next() -> None:
    scheduler = TestScheduler()
    subscriber = Flowable.interval(1.0, scheduler=scheduler).test(initial_request=0)
    subscriber.request(1)
    scheduler.advance_time_by(1.0)
    subscriber.request(2)
    scheduler.advance_time_by(2.0)
    subscriber.assert_values(0, 1, 2).assert_no_errors()


def test_interval_cancel_stops_the_timer() -> None:
    scheduler = TestScheduler()
    subscriber = Flowable.interval(1.0, scheduler=scheduler).test()
    scheduler.advance_time_by(1.0)
    subscriber.cancel()
    assert scheduler.pending == 0
    scheduler.advance_time_by(5.0)
    subscriber.assert_values(0)


def test_interval_invalid_request_fails_the_stream_and_stops_the_timer() -> None:
    scheduler = TestScheduler()
    subscriber = Flowable.interval(1.0, scheduler=scheduler).test(initial_request=0)
    subscriber.request(-1)
    subscriber.assert_error(ValueError)
    assert str(subscriber.errors[0]) == "non-positive subscription request: n must be > 0 (rule 3.9), got -1"
    assert scheduler.pending == 0


def test_interval_each_subscription_has_its_own_clock() -> None:
    scheduler = TestScheduler()
    ticks = Flowable.interval(1.0, scheduler=scheduler)
    first = ticks.test()
    scheduler.advance_time_by(1.5)
    second = ticks.test()
    scheduler.advance_time_by(1.0)
    first.assert_values(0, 1)
    second.assert_values(0)


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: operators.interval(0), ValueError, r"^period must be a finite number of seconds > 0, got 0$"),
        (
            lambda: operators.interval(1, -1),
            ValueError,
            r"^initial_delay must be a finite number of seconds >= 0, got -1$",
        ),
        (lambda: operators.timer("soon"), TypeError, r"^delay must be a number of seconds, got 'soon'$"),
        (
            lambda: operators.interval(1, scheduler=object()),
            TypeError,
            r"^scheduler must be a Scheduler \(now, schedule, schedule_periodic\) or None, got <object object at",
        ),
    ],
)
def test_bad_arguments_raise(call: Any, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        call()


def test_timer_emits_zero_after_the_delay_then_completes() -> None:
    scheduler = TestScheduler()
    subscriber = Flowable.timer(2.0, scheduler=scheduler).timestamp(scheduler=scheduler).test()
    scheduler.advance_time_by(1.9)
    subscriber.assert_no_values().assert_not_complete()
    scheduler.advance_time_by(0.1)
    assert timed(subscriber.values) == [(0, 2.0)]
    subscriber.assert_complete()
    assert scheduler.pending == 0


def test_timer_without_demand_fails_with_missing_backpressure() -> None:
    scheduler = TestScheduler()
    subscriber = Flowable.timer(1.0, scheduler=scheduler).test(initial_request=0)
    scheduler.advance_time_by(1.0)
    subscriber.assert_failure(MissingBackpressureError)
    assert "timer could not emit its item for lack of requests" in str(subscriber.errors[0])


def test_timer_with_on_backpressure_buffer_waits_for_the_request() -> None:
    scheduler = TestScheduler()
    subscriber = Flowable.timer(1.0, scheduler=scheduler).on_backpressure_buffer(1).test(initial_request=0)
    scheduler.advance_time_by(5.0)
    subscriber.assert_no_values()
    subscriber.request(1).assert_result(0)


def test_timer_cancelled_before_the_delay_never_fires() -> None:
    scheduler = TestScheduler()
    subscriber = Flowable.timer(1.0, scheduler=scheduler).test()
    subscriber.cancel()
    assert scheduler.pending == 0
    scheduler.advance_time_by(2.0)
    subscriber.assert_no_values().assert_not_complete()


def test_ticks_run_in_the_subscribers_context_whichever_thread_advances() -> None:
    scheduler = TestScheduler()
    recorder = ContextRecorder(initial=2)
    in_context("request-1", lambda: Flowable.interval(1.0, scheduler=scheduler).subscribe(recorder))
    in_fresh_thread(lambda: (REQUEST_ID.set("advancer"), scheduler.advance_time_by(3.0)))
    assert recorder.items == [0, 1]
    assert isinstance(recorder.error, MissingBackpressureError)
    assert recorder.values() == {"request-1"}
    assert recorder.violations == []


def test_on_next_raising_keyboard_interrupt_stops_the_timer_and_propagates() -> None:
    scheduler = TestScheduler()

    class Interrupting(TestSubscriber[int]):
        def on_next(self, item: int) -> None:
            super().on_next(item)
            raise KeyboardInterrupt

    subscriber = Interrupting()
    operators.interval(1.0, scheduler=scheduler).subscribe(subscriber)
    with pytest.raises(KeyboardInterrupt):
        scheduler.advance_time_by(1.0)
    assert scheduler.pending == 0
    scheduler.advance_time_by(5.0)
    subscriber.assert_values(0)


@pytest.mark.timeout(60)
def test_interval_on_the_default_scheduler_ticks_in_order_in_real_time() -> None:
    subscriber = Flowable.interval(0.005).take(20).test()
    subscriber.await_done(WAIT).assert_result(*range(20))


@pytest.mark.timeout(60)
def test_interval_with_on_backpressure_drop_keeps_the_rules_under_many_interleavings(
    tiny_switch_interval: None,
) -> None:
    # TestSubscriber records overlapping signals (rule 1.3) and unrequested items (rule 1.1).
    for _ in range(5):
        subscriber = Flowable.interval(0.001).on_backpressure_drop().take(30).test(initial_request=0)
        for _ in range(30):
            subscriber.request(1)
        subscriber.await_done(WAIT).assert_value_count(30).assert_complete()
