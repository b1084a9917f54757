"""filter: items that pass; drops are asked for again."""

from __future__ import annotations

from hypothesis import given, settings

from flowpy import operators
from flowpy.sources import RangePublisher, just
from tests.operators.conftest import Spy, drive, items_lists, patterns
from tests.sources_helpers import SpyPublisher
from tests.support import Recorder


def test_filter_keeps_passing_items_in_order() -> None:
    recorder = Recorder()
    operators.filter(just(1, 2, 3, 4, 5, 6), lambda x: x % 2 == 0).subscribe(recorder)
    recorder.request(10)
    assert recorder.items == [2, 4, 6]
    assert recorder.completed


def test_filter_replenishes_dropped_items_until_demand_is_met() -> None:
    spy = Spy(RangePublisher(0, 1000))
    recorder = Recorder()
    operators.filter(spy, lambda x: x % 3 == 0).subscribe(recorder)
    recorder.request(4)
    assert recorder.items == [0, 3, 6, 9]
    # 10 items arrived for 4 passed: the 6 drops were asked for again, never more.
    assert spy.delivered == 10
    assert spy.subscription.total == 10


def test_filter_replenishes_only_after_requested_items_arrived() -> None:
    source = SpyPublisher()
    recorder = Recorder()
    operators.filter(source, lambda x: x > 0).subscribe(recorder)
    recorder.request(3)
    assert source.requests == [3]
    assert source.subscriber is not None
    source.subscriber.on_next(0)  # dropped; two requested items still to come
    assert source.requests == [3]
    source.subscriber.on_next(1)
    source.subscriber.on_next(2)  # all three arrived: the drop is asked for again
    assert source.requests == [3, 1]
    source.subscriber.on_next(3)
    assert recorder.items == [1, 2, 3]
    assert source.requests == [3, 1]


def test_filter_unbounded_demand_never_replenishes() -> None:
    spy = Spy(RangePublisher(0, 100))
    recorder = Recorder()
    operators.filter(spy, lambda x: x % 10 == 0).subscribe(recorder)
    recorder.request(2**63 - 1)
    assert recorder.items == list(range(0, 100, 10))
    assert spy.subscription.requests == [2**63 - 1]


def test_filter_predicate_raises_signals_error_and_cancels() -> None:
    spy = Spy(RangePublisher(0, 100))
    recorder = Recorder()
    operators.filter(spy, lambda x: 1 / (x - 3)).subscribe(recorder)
    recorder.request(10)
    assert recorder.items == [0, 1, 2]
    assert isinstance(recorder.error, ZeroDivisionError)
    assert spy.subscription.cancelled.is_set()


@settings(max_examples=60, deadline=None)
@given(items=items_lists, pattern=patterns)
def test_filter_matches_builtin_filter_under_any_request_pattern(items: list[int], pattern: list[int]) -> None:
    spy = Spy(just(*items))
    recorder = drive(operators.filter(spy, lambda x: x % 3 != 0), pattern)
    assert recorder.items == [x for x in items if x % 3 != 0]
    assert recorder.completed
