"""take: the first n items; caps upstream demand at n and cancels after the n-th."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flowpy import operators
from flowpy.sources import RangePublisher, just
from tests.operators.conftest import Spy, drive, items_lists, patterns
from tests.support import Recorder

INFINITE = 2**62


def test_take_on_infinite_source_requests_at_most_n_and_cancels_after_nth() -> None:
    spy = Spy(RangePublisher(0, INFINITE))
    recorder = Recorder()
    operators.take(spy, 5).subscribe(recorder)
    recorder.request(2**63 - 1)
    assert recorder.items == [0, 1, 2, 3, 4]
    assert recorder.completed
    assert spy.subscription.total == 5
    assert spy.subscription.cancelled.is_set()


def test_take_small_requests_pass_through_until_cap() -> None:
    spy = Spy(RangePublisher(0, INFINITE))
    recorder = Recorder()
    operators.take(spy, 5).subscribe(recorder)
    recorder.request(2)
    recorder.request(2)
    recorder.request(7)
    assert spy.subscription.requests == [2, 2, 1]
    assert recorder.items == [0, 1, 2, 3, 4]
    recorder_after = len(spy.subscription.requests)
    assert recorder_after == 3


def test_take_zero_completes_at_once_without_requesting() -> None:
    spy = Spy(RangePublisher(0, INFINITE))
    recorder = Recorder()
    operators.take(spy, 0).subscribe(recorder)
    assert recorder.completed
    assert spy.subscription.requests == []
    assert spy.subscription.cancelled.is_set()


def test_take_fewer_items_than_count_completes_with_source() -> None:
    recorder = Recorder()
    operators.take(just(1, 2), 5).subscribe(recorder)
    recorder.request(10)
    assert recorder.items == [1, 2]
    assert recorder.completed


def test_take_negative_count_raises_value_error() -> None:
    with pytest.raises(ValueError, match=r"^count must be non-negative, got -1$"):
        operators.take(just(1), -1)


def test_take_bool_count_raises_type_error() -> None:
    with pytest.raises(TypeError, match=r"^count must be an int, got True$"):
        operators.take(just(1), True)


@settings(max_examples=60, deadline=None)
@given(items=items_lists, count=st.integers(min_value=0, max_value=45), pattern=patterns)
def test_take_matches_list_slice_under_any_request_pattern(items: list[int], count: int, pattern: list[int]) -> None:
    spy = Spy(just(*items))
    recorder = drive(operators.take(spy, count), pattern)
    assert recorder.items == items[:count]
    assert recorder.completed
    assert spy.subscription.total <= count
