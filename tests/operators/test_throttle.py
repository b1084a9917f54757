"""debounce, sample and throttle_first in virtual time: what is emitted, when, and what is asked of the source."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flowpy import operators
from flowpy.errors import MissingBackpressureError
from flowpy.flow import Publisher
from flowpy.flowable import Flowable
from flowpy.operators._fused import FusedPublisher
from flowpy.sources import RangePublisher
from flowpy.testing import TestScheduler, TestSubscriber
from tests.context_helpers import REQUEST_ID, ContextRecorder, in_context, in_fresh_thread
from tests.operators.conftest import GatedPublisher, HotSource, Spy
from tests.support import Recorder

UNBOUNDED = 2**63 - 1


def timed(values: list[Any]) -> list[tuple[Any, float]]:
    return [(v.value, v.timestamp) for v in values]


def play(scheduler: TestScheduler, source: HotSource, script: list[tuple[float, Any]]) -> None:
    """At each time, emit the item (or complete for "|")."""
    for at, item in script:
        scheduler.advance_time_to(at)
        if item == "|":
            source.complete()
        else:
            source.emit(item)


def run(
    build: Callable[[Flowable[Any], TestScheduler], Flowable[Any]],
    script: list[tuple[float, Any]],
    until: float = 20.0,
    initial_request: int = UNBOUNDED,
) -> tuple[TestSubscriber[Any], HotSource, TestScheduler]:
    scheduler = TestScheduler()
    source = HotSource()
    subscriber = build(Flowable(source), scheduler).timestamp(scheduler=scheduler).test(initial_request)
    play(scheduler, source, script)
    scheduler.advance_time_to(until)
    return subscriber, source, scheduler


# --- debounce --------------------------------------------------------------------------------


def test_debounce_emits_an_item_after_a_pause_and_the_last_at_completion() -> None:
    script = [(0.0, 1), (0.3, 2), (0.6, 3), (2.0, 4), (2.5, 5), (4.0, 6), (4.5, "|")]
    subscriber, source, scheduler = run(lambda f, s: f.debounce(1.0, scheduler=s), script)
    assert timed(subscriber.values) == [(3, 1.6), (5, 3.5), (6, 4.5)]
    subscriber.assert_complete()
    assert source.subscription.requests == [UNBOUNDED]
    assert scheduler.pending == 0


def test_debounce_drops_the_held_item_on_error() -> None:
    scheduler = TestScheduler()
    source = HotSource()
    subscriber = Flowable(source).debounce(1.0, scheduler=scheduler).test()
    source.emit(1)
    scheduler.advance_time_by(0.5)
    source.fail(KeyError("boom"))
    subscriber.assert_failure(KeyError)
    assert scheduler.pending == 0


def test_debounce_item_due_without_demand_fails_with_missing_backpressure() -> None:
    subscriber, source, scheduler = run(lambda f, s: f.debounce(1.0, scheduler=s), [(0.0, 1)], initial_request=0)
    subscriber.assert_failure(MissingBackpressureError)
    assert str(subscriber.errors[0]).startswith("debounce could not emit an item for lack of requests")
    assert source.cancelled
    assert scheduler.pending == 0


def test_debounce_with_on_backpressure_latest_keeps_the_newest_quiet_item() -> None:
    script = [(0.0, 1), (2.0, 2), (4.0, 3)]
    subscriber, _, _ = run(
        lambda f, s: f.debounce(1.0, scheduler=s).on_backpressure_latest(), script, initial_request=1
    )
    assert [v.value for v in subscriber.values] == [1]
    subscriber.request(1)
    assert [v.value for v in subscriber.values] == [1, 3]
    subscriber.assert_no_errors()


def test_debounce_cancel_stops_the_timer_and_the_source() -> None:
    scheduler = TestScheduler()
    source = HotSource()
    subscriber = Flowable(source).debounce(1.0, scheduler=scheduler).test()
    source.emit(1)
    subscriber.cancel()
    assert source.cancelled
    assert scheduler.pending == 0
    source.emit(2)  # in flight after cancel (rule 2.8): ignored
    scheduler.advance_time_by(5.0)
    subscriber.assert_no_values()


def test_debounce_zero_emits_each_item_at_the_next_trigger_unless_replaced() -> None:
    scheduler = TestScheduler()
    source = HotSource()
    subscriber = Flowable(source).debounce(0, scheduler=scheduler).test()
    source.emit(1, 2)
    scheduler.trigger_actions()
    source.emit(3)
    scheduler.trigger_actions()
    subscriber.assert_values(2, 3)


def test_debounce_uses_one_timer_however_many_items_come() -> None:
    scheduler = TestScheduler()
    source = HotSource()
    Flowable(source).debounce(1.0, scheduler=scheduler).test()
    for i in range(1000):
        source.emit(i)
        assert scheduler.pending == 1


@settings(max_examples=60, deadline=None)
@given(gaps=st.lists(st.integers(min_value=0, max_value=30), min_size=1, max_size=25), wait=st.integers(1, 20))
def test_debounce_matches_the_definition(gaps: list[int], wait: int) -> None:
    # Times in tenths of a second: an item is emitted iff the next one comes `wait` or more after it.
    times = []
    now = 0
    for gap in gaps:
        now += gap
        times.append(now)
    script: list[tuple[float, Any]] = [(t / 10, i) for i, t in enumerate(times)]
    subscriber, _, _ = run(lambda f, s: f.debounce(wait / 10, scheduler=s), script, until=(now + 100) / 10)
    expected = [
        (i, round((t + wait) / 10, 9)) for i, t in enumerate(times) if i + 1 == len(times) or times[i + 1] - t >= wait
    ]
    assert [(v, round(at, 9)) for v, at in timed(subscriber.values)] == expected


# --- sample ------------------------------------------------------------------------------------


def test_sample_emits_the_latest_item_at_each_tick_and_drops_the_unsampled_rest() -> None:
    script = [(0.0, 1), (0.3, 2), (0.6, 3), (2.5, 4), (2.7, 5), (3.2, 6), (3.5, "|")]
    subscriber, source, scheduler = run(lambda f, s: f.sample(1.0, scheduler=s), script)
    assert timed(subscriber.values) == [(3, 1.0), (5, 3.0)]
    subscriber.assert_complete()
    assert source.subscription.requests == [UNBOUNDED]
    assert scheduler.pending == 0


def test_sample_tick_without_demand_fails_with_missing_backpressure() -> None:
    subscriber, source, scheduler = run(lambda f, s: f.sample(1.0, scheduler=s), [(0.0, 1)], initial_request=0)
    subscriber.assert_failure(MissingBackpressureError)
    assert str(subscriber.errors[0]).startswith("sample could not emit a sample for lack of requests")
    assert source.cancelled
    assert scheduler.pending == 0


def test_sample_error_is_signalled_at_once() -> None:
    scheduler = TestScheduler()
    source = HotSource()
    subscriber = Flowable(source).sample(1.0, scheduler=scheduler).test()
    source.emit(1)
    source.fail(ValueError("x"))
    subscriber.assert_failure(ValueError)
    assert scheduler.pending == 0


def test_sample_cancel_stops_the_clock() -> None:
    scheduler = TestScheduler()
    source = HotSource()
    subscriber = Flowable(source).sample(1.0, scheduler=scheduler).test()
    assert scheduler.pending == 1
    subscriber.cancel()
    assert scheduler.pending == 0
    assert source.cancelled


# --- throttle_first -------------------------------------------------------------------------


def test_throttle_first_lets_the_first_item_of_each_window_through() -> None:
    script = [(0.0, 1), (0.3, 2), (0.9, 3), (1.0, 4), (1.5, 5), (3.0, 6), (3.5, "|")]
    subscriber, _, scheduler = run(lambda f, s: f.throttle_first(1.0, scheduler=s), script)
    assert timed(subscriber.values) == [(1, 0.0), (4, 1.0), (6, 3.0)]
    subscriber.assert_complete()
    assert scheduler.pending == 0  # no timer at all


def test_throttle_first_fuses_with_its_neighbours() -> None:
    scheduler = TestScheduler()
    chain = operators.map(
        operators.throttle_first(operators.map(RangePublisher(0, 5), abs), 1, scheduler=scheduler), abs
    )
    assert isinstance(chain, FusedPublisher)
    assert len(chain.steps) == 3


def test_throttle_first_asks_again_for_what_it_drops() -> None:
    scheduler = TestScheduler()
    spy = Spy(RangePublisher(0, 100))
    subscriber = Flowable(spy).throttle_first(1.0, scheduler=scheduler).test(initial_request=1)
    subscriber.assert_values(0)
    subscriber.request(1)  # every item now comes inside the window: all dropped, each asked for again
    subscriber.assert_values(0).assert_complete()
    assert spy.delivered == 100
    assert subscriber.violations == []


def test_throttle_first_never_fails_for_lack_of_demand() -> None:
    scheduler = TestScheduler()
    spy = Spy(RangePublisher(0, 10))
    subscriber = Flowable(spy).throttle_first(0.5, scheduler=scheduler).test(initial_request=0)
    scheduler.advance_time_by(3.0)
    subscriber.assert_no_values().assert_no_errors()
    assert spy.subscription.requests == []


# --- All three ----------------------------------------------------------------------------------

BUILDERS: dict[str, Callable[[Publisher[Any], TestScheduler], Publisher[Any]]] = {
    "debounce": lambda p, s: operators.debounce(p, 1.0, scheduler=s),
    "sample": lambda p, s: operators.sample(p, 1.0, scheduler=s),
    "throttle_first": lambda p, s: operators.throttle_first(p, 1.0, scheduler=s),
}


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_invalid_request_fails_the_stream(name: str) -> None:
    scheduler = TestScheduler()
    source = HotSource()
    subscriber: TestSubscriber[Any] = TestSubscriber(initial_request=0)
    BUILDERS[name](source, scheduler).subscribe(subscriber)
    subscriber.request(0)
    if name == "throttle_first":  # fused: the invalid request goes to the source, which signals it
        assert source.subscription.requests == [0]
        return
    subscriber.assert_error(ValueError)
    assert source.cancelled
    assert scheduler.pending == 0


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_emissions_run_in_the_subscribers_context(name: str) -> None:
    scheduler = TestScheduler()
    source = HotSource()
    recorder = ContextRecorder(initial=UNBOUNDED)
    in_context("request-1", lambda: BUILDERS[name](source, scheduler).subscribe(recorder))

    def produce_and_advance() -> None:
        REQUEST_ID.set("producer")
        source.emit(1)
        scheduler.advance_time_by(1.5)
        source.emit(2)
        scheduler.advance_time_by(1.0)
        source.complete()

    in_fresh_thread(produce_and_advance)
    assert recorder.completed
    assert recorder.items
    if name == "throttle_first":  # fused: no hop of its own, signals run where the source signals, as map's do
        assert {value for signal, value in recorder.seen if signal != "on_subscribe"} == {"producer"}
    else:
        assert recorder.values() == {"request-1"}


@pytest.mark.parametrize("name", ["debounce", "sample"])
def test_timer_emission_raising_keyboard_interrupt_cancels_the_source_and_propagates(name: str) -> None:
    scheduler = TestScheduler()
    source = HotSource()

    class Interrupting(TestSubscriber[Any]):
        def on_next(self, item: Any) -> None:
            super().on_next(item)
            raise KeyboardInterrupt

    subscriber = Interrupting()
    BUILDERS[name](source, scheduler).subscribe(subscriber)
    source.emit(1)
    with pytest.raises(KeyboardInterrupt):
        scheduler.advance_time_by(2.0)
    assert source.cancelled
    assert scheduler.pending == 0
    subscriber.assert_values(1)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda: operators.debounce(RangePublisher(0, 1), -1),
            r"^seconds must be a finite number of seconds >= 0, got -1$",
        ),
        (lambda: operators.sample(RangePublisher(0, 1), 0), r"^period must be a finite number of seconds > 0, got 0$"),
        (
            lambda: operators.throttle_first(RangePublisher(0, 1), float("nan")),
            r"^seconds must be a finite number of seconds >= 0, got nan$",
        ),
    ],
)
def test_bad_times_raise_value_error(call: Callable[[], object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()


@pytest.mark.timeout(60)
def test_debounce_on_the_default_scheduler_emits_the_last_of_a_burst() -> None:
    Flowable.range(0, 1000).debounce(0.05).test().await_done(10).assert_result(999)


@pytest.mark.parametrize("round_", range(8))
@pytest.mark.parametrize("name", ["debounce", "sample"])
def test_items_racing_the_timer_on_another_thread_keep_order_and_the_rules(
    tiny_switch_interval: None, name: str, round_: int
) -> None:
    # The source's thread stores items without a lock while another thread fires the timers.
    scheduler = TestScheduler()
    source = HotSource()
    subscriber: TestSubscriber[int] = TestSubscriber()
    BUILDERS[name](source, scheduler).subscribe(subscriber)
    advancer = threading.Thread(target=lambda: [scheduler.advance_time_by(0.5) for _ in range(300)])
    advancer.start()
    source.emit(*range(3000))
    advancer.join(30)
    source.complete()
    subscriber.assert_no_errors().assert_complete()
    values = subscriber.values
    assert values == sorted(set(values))  # each item at most once, in order
    if name == "debounce":
        assert values[-1] == 2999  # the last item is emitted at completion, or was already
    assert scheduler.pending == 0


def test_debounce_source_subscription_arriving_as_the_stage_is_cancelled_is_cancelled() -> None:
    source = GatedPublisher(lambda stage: stage.cancel(), slot="upstream")  # cancelled in the window
    recorder = Recorder()
    operators.debounce(source, 1.0, scheduler=TestScheduler()).subscribe(recorder)
    assert source.subscription.cancels == 1
    assert source.subscription.requests == []
    assert recorder.signals == []  # refused before the downstream was handed the stage
