"""skip: drops the first n items; adds n to the first request."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flowpy import operators
from flowpy.sources import RangePublisher, just
from tests.operators.conftest import Spy, drive, items_lists, patterns
from tests.support import Recorder


def test_skip_three_then_request_two_requests_five_upstream() -> None:
    spy = Spy(RangePublisher(0, 100))
    recorder = Recorder()
    operators.skip(spy, 3).subscribe(recorder)
    recorder.request(2)
    assert spy.subscription.requests == [5]
    assert recorder.items == [3, 4]
    recorder.request(1)
    assert spy.subscription.requests == [5, 1]
    assert recorder.items == [3, 4, 5]


def test_skip_more_than_available_completes_empty() -> None:
    recorder = Recorder()
    operators.skip(just(1, 2), 5).subscribe(recorder)
    recorder.request(1)
    assert recorder.items == []
    assert recorder.completed


def test_skip_zero_returns_source_unchanged() -> None:
    source = just(1)
    assert operators.skip(source, 0) is source


def test_skip_negative_count_raises_value_error() -> None:
    with pytest.raises(ValueError, match=r"^count must be non-negative, got -2$"):
        operators.skip(just(1), -2)


@settings(max_examples=60, deadline=None)
@given(items=items_lists, count=st.integers(min_value=0, max_value=45), pattern=patterns)
def test_skip_matches_list_slice_under_any_request_pattern(items: list[int], count: int, pattern: list[int]) -> None:
    recorder = drive(operators.skip(just(*items), count), pattern)
    assert recorder.items == items[count:]
    assert recorder.completed
