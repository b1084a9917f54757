"""scan: the running fold, one output per input."""

from __future__ import annotations

import itertools
import operator

from hypothesis import given, settings

from flowpy import operators
from flowpy.sources import RangePublisher, just
from tests.operators.conftest import Spy, drive, items_lists, patterns
from tests.support import Recorder


def test_scan_without_initial_emits_running_sums() -> None:
    recorder = Recorder()
    operators.scan(just(1, 2, 3), operator.add).subscribe(recorder)
    recorder.request(5)
    assert recorder.items == [1, 3, 6]
    assert recorder.completed


def test_scan_with_initial_does_not_emit_the_seed() -> None:
    recorder = Recorder()
    operators.scan(just(1, 2, 3), operator.add, 100).subscribe(recorder)
    recorder.request(5)
    assert recorder.items == [101, 103, 106]


def test_scan_request_passes_through_unchanged() -> None:
    spy = Spy(RangePublisher(0, 10))
    recorder = Recorder()
    operators.scan(spy, operator.add, 0).subscribe(recorder)
    recorder.request(2)
    assert spy.subscription.requests == [2]


def test_scan_state_is_per_subscription() -> None:
    summed = operators.scan(just(1, 2), operator.add)
    first, second = Recorder(), Recorder()
    summed.subscribe(first)
    first.request(5)
    summed.subscribe(second)
    second.request(5)
    assert first.items == second.items == [1, 3]


def test_scan_function_returns_none_signals_type_error() -> None:
    recorder = Recorder()
    operators.scan(just(1, 2), lambda a, b: None).subscribe(recorder)
    recorder.request(5)
    assert recorder.items == [1]
    assert isinstance(recorder.error, TypeError)


@settings(max_examples=60, deadline=None)
@given(items=items_lists, pattern=patterns)
def test_scan_matches_itertools_accumulate_under_any_request_pattern(items: list[int], pattern: list[int]) -> None:
    recorder = drive(operators.scan(just(*items), operator.sub, 7), pattern)
    assert recorder.items == list(itertools.accumulate(items, operator.sub, initial=7))[1:]
