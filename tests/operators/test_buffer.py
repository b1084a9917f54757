"""buffer(count) and buffer_with_time(timespan): lists of items, by count or by time."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flowpy import operators
from flowpy.errors import MissingBackpressureError
from flowpy.flowable import Flowable
from flowpy.sources import RangePublisher, just
from flowpy.testing import TestScheduler
from tests.context_helpers import ContextRecorder, in_context, in_fresh_thread
from tests.operators.conftest import HotSource, Spy, drive, items_lists, patterns
from tests.support import Recorder


def test_buffer_emits_full_lists_then_the_rest() -> None:
    recorder = Recorder()
    operators.buffer(just(1, 2, 3, 4, 5), 2).subscribe(recorder)
    recorder.request(10)
    assert recorder.items == [[1, 2], [3, 4], [5]]
    assert recorder.completed


def test_buffer_request_multiplies_by_count() -> None:
    spy = Spy(RangePublisher(0, 100))
    recorder = Recorder()
    operators.buffer(spy, 3).subscribe(recorder)
    recorder.request(2)
    assert spy.subscription.requests == [6]
    assert recorder.items == [[0, 1, 2], [3, 4, 5]]


def test_buffer_unbounded_request_stays_capped() -> None:
    spy = Spy(RangePublisher(0, 4))
    recorder = Recorder()
    operators.buffer(spy, 3).subscribe(recorder)
    recorder.request(2**63 - 1)
    assert spy.subscription.requests == [2**63 - 1]


def test_buffer_zero_count_raises_value_error() -> None:
    with pytest.raises(ValueError, match=r"^count must be positive, got 0$"):
        operators.buffer(just(1), 0)


@settings(max_examples=50, deadline=None)
@given(items=items_lists, count=st.integers(min_value=1, max_value=5), pattern=patterns)
def test_buffer_matches_list_chunks_under_any_request_pattern(items: list[int], count: int, pattern: list[int]) -> None:
    recorder = drive(operators.buffer(just(*items), count), pattern)
    assert recorder.items == [items[i : i + count] for i in range(0, len(items), count)]


# --- buffer_with_time ---------------------------------------------------------------------------


def _play(scheduler: TestScheduler, source: HotSource, script: list[tuple[float, Any]]) -> None:
    for at, item in script:
        scheduler.advance_time_to(at)
        if item == "|":
            source.complete()
        else:
            source.emit(item)


def test_buffer_with_time_emits_a_list_every_timespan_empty_ones_included_and_the_rest_at_completion() -> None:
    scheduler = TestScheduler()
    source = HotSource()
    subscriber = Flowable(source).buffer_with_time(1.0, scheduler=scheduler).timestamp(scheduler=scheduler).test()
    _play(scheduler, source, [(0.0, 1), (0.5, 2), (1.5, 3), (3.2, 4), (3.5, "|")])
    assert [(v.value, v.timestamp) for v in subscriber.values] == [
        ([1, 2], 1.0),
        ([3], 2.0),
        ([], 3.0),
        ([4], 3.5),
    ]
    subscriber.assert_complete()
    assert source.subscription.requests == [2**63 - 1]
    assert scheduler.pending == 0


def test_buffer_with_time_full_list_goes_at_once_and_restarts_the_clock() -> None:
    scheduler = TestScheduler()
    source = HotSource()
    subscriber = Flowable(source).buffer_with_time(1.0, 2, scheduler=scheduler).timestamp(scheduler=scheduler).test()
    _play(scheduler, source, [(0.0, 1), (0.6, 2), (1.2, 3), (1.7, "|")])
    assert [(v.value, v.timestamp) for v in subscriber.values] == [([1, 2], 0.6), ([3], 1.6), ([], 1.7)]


def test_buffer_with_time_list_due_without_demand_fails_with_missing_backpressure() -> None:
    scheduler = TestScheduler()
    source = HotSource()
    subscriber = Flowable(source).buffer_with_time(1.0, scheduler=scheduler).test(initial_request=1)
    source.emit(1)
    scheduler.advance_time_by(2.0)
    subscriber.assert_failure(MissingBackpressureError, [1])
    assert str(subscriber.errors[0]).startswith(
        "buffer_with_time could not emit a list of 0 items for lack of requests"
    )
    assert source.cancelled
    assert scheduler.pending == 0


def test_buffer_with_time_with_on_backpressure_buffer_holds_the_lists_for_a_slow_subscriber() -> None:
    scheduler = TestScheduler()
    source = HotSource()
    subscriber = Flowable(source).buffer_with_time(1.0, scheduler=scheduler).on_backpressure_buffer(8).test(0)
    source.emit(1)
    scheduler.advance_time_by(3.0)
    subscriber.request(3).assert_values([1], [], []).assert_no_errors()


def test_buffer_with_time_error_drops_the_list_being_filled() -> None:
    scheduler = TestScheduler()
    source = HotSource()
    subscriber = Flowable(source).buffer_with_time(1.0, scheduler=scheduler).test()
    source.emit(1)
    source.fail(KeyError("x"))
    subscriber.assert_failure(KeyError)
    assert scheduler.pending == 0


def test_buffer_with_time_cancel_stops_the_clock() -> None:
    scheduler = TestScheduler()
    source = HotSource()
    subscriber = Flowable(source).buffer_with_time(1.0, scheduler=scheduler).test()
    subscriber.cancel()
    assert source.cancelled
    assert scheduler.pending == 0


def test_buffer_with_time_lists_arrive_in_the_subscribers_context() -> None:
    scheduler = TestScheduler()
    source = HotSource()
    recorder = ContextRecorder(initial=2**63 - 1)
    in_context("request-1", lambda: operators.buffer_with_time(source, 1.0, scheduler=scheduler).subscribe(recorder))
    in_fresh_thread(lambda: (source.emit(1), scheduler.advance_time_by(1.0), source.complete()))
    assert recorder.items == [[1], []]
    assert recorder.values() == {"request-1"}


def test_buffer_with_time_bad_arguments_raise() -> None:
    with pytest.raises(ValueError, match=r"^timespan must be a finite number of seconds > 0, got 0$"):
        operators.buffer_with_time(just(1), 0)
    with pytest.raises(ValueError, match=r"^max_count must be positive, got 0$"):
        operators.buffer_with_time(just(1), 1, 0)


def test_buffer_with_time_on_next_raising_keyboard_interrupt_at_a_tick_cancels_and_propagates() -> None:
    scheduler = TestScheduler()
    source = HotSource()
    recorder = Recorder(initial=5, on_next_hook=_interrupt)
    operators.buffer_with_time(source, 1.0, scheduler=scheduler).subscribe(recorder)
    source.emit(1)
    with pytest.raises(KeyboardInterrupt):
        scheduler.advance_time_by(1.0)
    assert recorder.items == [[1]]
    assert source.cancelled
    assert scheduler.pending == 0


def test_buffer_with_time_snapshot_reports_the_lists_waiting_for_demand() -> None:
    scheduler = TestScheduler()
    source = HotSource()
    publisher = operators.buffer_with_time(source, 1.0, scheduler=scheduler)
    subscriber = Flowable(publisher).test(initial_request=0)
    subscriber.request(2)
    (reading,) = publisher.snapshot().subscribers  # type: ignore[attr-defined]
    assert reading.demand == 2
    assert reading.buffered == 0


def _interrupt(item: Any) -> None:
    raise KeyboardInterrupt
