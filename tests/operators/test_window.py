"""window_with_count and window_with_time: windows are Flowables of one subscriber each."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flowpy import operators
from flowpy.errors import MissingBackpressureError
from flowpy.flowable import Flowable
from flowpy.sources import RangePublisher
from flowpy.testing import TestScheduler, TestSubscriber
from tests.context_helpers import ContextRecorder, in_context, in_fresh_thread
from tests.operators.conftest import HotSource, Spy, drive, items_lists, patterns
from tests.support import Recorder

UNBOUNDED = 2**63 - 1


def contents(windows: list[Flowable[Any]]) -> list[list[Any]]:
    return [window.test().values for window in windows]


# --- window_with_count ---------------------------------------------------------------------


def test_exact_windows_split_the_stream() -> None:
    outer = Flowable.range(0, 7).window_with_count(3).test()
    outer.assert_value_count(3).assert_complete()
    assert all(isinstance(window, Flowable) for window in outer.values)
    assert contents(outer.values) == [[0, 1, 2], [3, 4, 5], [6]]


def test_overlapping_and_skipping_windows_follow_rxjava() -> None:
    overlapping = Flowable.range(0, 5).window_with_count(3, 1).test()
    assert contents(overlapping.values) == [[0, 1, 2], [1, 2, 3], [2, 3, 4], [3, 4], [4]]
    skipping = Flowable.range(0, 10).window_with_count(2, 3).test()
    assert contents(skipping.values) == [[0, 1], [3, 4], [6, 7], [9]]


@settings(max_examples=60, deadline=None)
@given(items=items_lists, count=st.integers(1, 5), skip=st.integers(1, 6), pattern=patterns)
def test_windows_match_list_slices_under_any_request_pattern(
    items: list[int], count: int, skip: int, pattern: list[int]
) -> None:
    recorder = drive(operators.window_with_count(Flowable.just(*items), count, skip), pattern)
    got = []
    for window in recorder.items:
        subscriber: TestSubscriber[int] = TestSubscriber()
        window.subscribe(subscriber)
        got.append(subscriber.assert_complete().values)
    assert got == [items[i : i + count] for i in range(0, len(items), skip)]


@pytest.mark.parametrize(
    ("count", "skip", "n", "first", "later"),
    [(3, 3, 2, 6, 6), (2, 3, 2, 2 * 2 + 1, 6), (3, 1, 2, 3 + 1, 2)],
    ids=["exact", "skip", "overlap"],
)
def test_window_demand_asks_for_the_items_of_the_windows_requested(
    count: int, skip: int, n: int, first: int, later: int
) -> None:
    spy = Spy(HotSource())
    Flowable(spy).window_with_count(count, skip).test(initial_request=0).request(n).request(n)
    assert spy.subscription.requests == [first, later]


def test_unbounded_demand_stays_unbounded() -> None:
    spy = Spy(HotSource())
    Flowable(spy).window_with_count(3).test()
    assert spy.subscription.requests == [UNBOUNDED]


def test_a_window_keeps_its_items_until_its_subscriber_asks() -> None:
    outer = Flowable.range(0, 4).window_with_count(4).test()
    (window,) = outer.values
    inner = window.test(initial_request=1)
    inner.assert_values(0).assert_not_complete()
    inner.request(10).assert_result(0, 1, 2, 3)


def test_a_window_serves_one_subscriber() -> None:
    (window,) = Flowable.range(0, 2).window_with_count(2).test().values
    window.test().assert_result(0, 1)
    second = window.test()
    second.assert_failure(RuntimeError)
    assert str(second.errors[0]) == "a window serves one subscriber; share() it to have more"


def test_windows_nobody_subscribes_to_do_not_stall_the_others() -> None:
    outer = Flowable.range(0, 9).window_with_count(3).test()
    outer.assert_value_count(3).assert_complete()
    assert outer.values[2].test().values == [6, 7, 8]


def test_cancelling_the_outer_keeps_open_windows_and_cancels_the_source_when_they_are_done() -> None:
    source = HotSource()
    outer = Flowable(source).window_with_count(3).test()
    source.emit(0)
    (window,) = outer.values
    inner = window.test()
    outer.cancel()
    assert not source.cancelled  # the open window still wants items
    source.emit(1, 2, 3)  # 3 would open a window: none is opened for a cancelled outer
    inner.assert_result(0, 1, 2)
    assert source.cancelled
    assert len(outer.values) == 1


def test_cancelling_the_only_window_and_the_outer_cancels_the_source() -> None:
    source = HotSource()
    outer = Flowable(source).window_with_count(3).test()
    source.emit(0)
    inner = outer.values[0].test()
    inner.cancel()
    assert not source.cancelled  # the outer still wants windows
    outer.cancel()
    assert source.cancelled


def test_source_error_fails_open_windows_after_their_items_and_the_outer() -> None:
    source = HotSource()
    outer = Flowable(source).window_with_count(3).test()
    source.emit(0, 1)
    source.fail(KeyError("x"))
    outer.assert_error(KeyError)
    outer.values[0].test().assert_failure(KeyError, 0, 1)


def test_invalid_outer_request_fails_the_outer_and_its_open_windows() -> None:
    source = HotSource()
    outer = Flowable(source).window_with_count(3).test(initial_request=1)
    source.emit(0)
    outer.request(0)
    outer.assert_error(ValueError)
    outer.values[0].test().assert_failure(ValueError, 0)
    assert source.cancelled


def test_window_items_go_to_the_window_subscribers_context() -> None:
    source = HotSource()
    outer = Flowable(source).window_with_count(2).test()
    source.emit(0)
    recorder = ContextRecorder(initial=UNBOUNDED)
    in_context("window-subscriber", lambda: outer.values[0].subscribe(recorder))
    in_fresh_thread(lambda: source.emit(1))
    assert recorder.items == [0, 1]
    assert recorder.completed
    assert recorder.values() == {"window-subscriber"}


def test_window_count_must_be_positive() -> None:
    with pytest.raises(ValueError, match=r"^skip must be positive, got 0$"):
        operators.window_with_count(RangePublisher(0, 1), 2, 0)


# --- window_with_time ------------------------------------------------------------------------


def play(scheduler: TestScheduler, source: HotSource, script: list[tuple[float, Any]]) -> None:
    for at, item in script:
        scheduler.advance_time_to(at)
        if item == "|":
            source.complete()
        else:
            source.emit(item)


def test_time_windows_open_at_subscription_and_at_each_tick() -> None:
    scheduler = TestScheduler()
    source = HotSource()
    outer = Flowable(source).window_with_time(1.0, scheduler=scheduler).test()
    outer.assert_value_count(1)
    play(scheduler, source, [(0.0, 1), (0.3, 2), (1.5, 3), (2.2, 4), (2.5, 5), (2.7, "|")])
    outer.assert_complete()
    assert contents(outer.values) == [[1, 2], [3], [4, 5]]
    assert scheduler.pending == 0


def test_time_windows_with_max_count_close_early_and_keep_the_ticks_pace() -> None:
    scheduler = TestScheduler()
    source = HotSource()
    outer = Flowable(source).window_with_time(1.0, 2, scheduler=scheduler).test()
    play(scheduler, source, [(0.0, 1), (0.1, 2), (0.2, 3), (1.1, 4), (1.2, "|")])
    assert contents(outer.values) == [[1, 2], [3], [4]]


def test_time_window_without_demand_fails_with_missing_backpressure() -> None:
    scheduler = TestScheduler()
    source = HotSource()
    outer = Flowable(source).window_with_time(1.0, scheduler=scheduler).test(initial_request=1)
    source.emit(1)
    scheduler.advance_time_by(1.0)
    outer.assert_error(MissingBackpressureError)
    assert str(outer.errors[0]).startswith("window_with_time could not emit a window for lack of requests")
    outer.values[0].test().assert_result(1)
    assert source.cancelled
    assert scheduler.pending == 0


def test_time_windows_need_a_request_in_on_subscribe() -> None:
    scheduler = TestScheduler()
    outer = Flowable(HotSource()).window_with_time(1.0, scheduler=scheduler).test(initial_request=0)
    outer.assert_failure(MissingBackpressureError)


def test_cancelled_outer_lets_the_open_time_window_finish_then_cancels_the_source() -> None:
    scheduler = TestScheduler()
    source = HotSource()
    outer = Flowable(source).window_with_time(1.0, scheduler=scheduler).test()
    inner = outer.values[0].test()
    outer.cancel()
    source.emit(1)
    assert not source.cancelled
    scheduler.advance_time_by(1.0)
    inner.assert_result(1)
    assert source.cancelled
    assert scheduler.pending == 0
    outer.assert_value_count(1)


def test_time_window_source_error_fails_the_window_and_the_outer() -> None:
    scheduler = TestScheduler()
    source = HotSource()
    outer = Flowable(source).window_with_time(1.0, scheduler=scheduler).test()
    source.emit(1)
    source.fail(KeyError("x"))
    outer.assert_error(KeyError)
    outer.values[0].test().assert_failure(KeyError, 1)
    assert scheduler.pending == 0


@pytest.mark.parametrize("round_", range(10))
def test_time_window_boundaries_from_another_thread_keep_every_item_in_order(
    tiny_switch_interval: None, round_: int
) -> None:
    scheduler = TestScheduler()
    source = HotSource()
    outer = Flowable(source).window_with_time(1.0, scheduler=scheduler).test()
    advancer = threading.Thread(target=lambda: [scheduler.advance_time_by(1.0) for _ in range(50)])
    advancer.start()
    source.emit(*range(200))
    advancer.join(10)
    source.complete()
    assert [item for window in contents(outer.values) for item in window] == list(range(200))
    outer.assert_complete()


def test_time_window_outer_on_next_raising_keyboard_interrupt_at_a_tick_propagates_and_stops_new_windows() -> None:
    scheduler = TestScheduler()
    source = HotSource()
    calls: list[Any] = []

    def interrupt_second(window: Any) -> None:
        calls.append(window)
        if len(calls) == 2:
            raise KeyboardInterrupt

    recorder = Recorder(initial=5, on_next_hook=interrupt_second)
    operators.window_with_time(source, 1.0, scheduler=scheduler).subscribe(recorder)
    with pytest.raises(KeyboardInterrupt):
        scheduler.advance_time_by(1.0)
    scheduler.advance_time_by(1.0)  # the second window is open: the outer is gone, so it closes and nothing follows
    assert len(recorder.items) == 2
    assert source.cancelled
    assert scheduler.pending == 0


def test_items_go_straight_to_the_open_window_while_the_outer_subscriber_is_busy_on_the_timer_thread() -> None:
    # Nothing may queue inside the operator behind a busy boundary: the source would outrun it without bound.
    scheduler = TestScheduler()
    source = HotSource()
    entered, release = threading.Event(), threading.Event()

    class BusyOuter(TestSubscriber[Any]):
        def on_next(self, item: Any) -> None:
            super().on_next(item)
            if len(self.values) == 2:  # the second window, emitted by the timer's boundary
                entered.set()
                release.wait(10)

    outer = BusyOuter()
    operators.window_with_time(source, 1.0, scheduler=scheduler).subscribe(outer)
    advancer = threading.Thread(target=lambda: scheduler.advance_time_by(1.0))
    advancer.start()
    try:
        assert entered.wait(10)
        source.emit(*range(1000))
        assert outer.values[1].queued == 1000
    finally:
        release.set()
        advancer.join(10)
    source.complete()
    outer.assert_complete()
