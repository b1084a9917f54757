"""take_while: items while a predicate holds; cancels at the first that fails."""

from __future__ import annotations

import itertools

from hypothesis import given, settings

from flowpy import operators
from flowpy.sources import RangePublisher, just
from tests.operators.conftest import Spy, drive, items_lists, patterns
from tests.support import Recorder


def test_take_while_stops_at_first_failing_item_and_cancels() -> None:
    spy = Spy(RangePublisher(0, 2**62))
    recorder = Recorder()
    operators.take_while(spy, lambda x: x < 4).subscribe(recorder)
    recorder.request(100)
    assert recorder.items == [0, 1, 2, 3]
    assert recorder.completed
    assert spy.subscription.cancelled.is_set()
    assert spy.delivered == 5


def test_take_while_predicate_raises_signals_error() -> None:
    recorder = Recorder()
    operators.take_while(just(1, 0), lambda x: 1 / x).subscribe(recorder)
    recorder.request(5)
    assert recorder.items == [1]
    assert isinstance(recorder.error, ZeroDivisionError)


@settings(max_examples=60, deadline=None)
@given(items=items_lists, pattern=patterns)
def test_take_while_matches_itertools_under_any_request_pattern(items: list[int], pattern: list[int]) -> None:
    recorder = drive(operators.take_while(just(*items), lambda x: x > -40), pattern)
    assert recorder.items == list(itertools.takewhile(lambda x: x > -40, items))
    assert recorder.completed
