"""map: one output per input, demand passed through."""

from __future__ import annotations

import pytest
from hypothesis import given, settings

from flowpy import operators
from flowpy.sources import RangePublisher, just
from tests.operators.conftest import Spy, drive, items_lists, patterns
from tests.support import Recorder


def test_map_items_transformed_in_order() -> None:
    recorder = Recorder()
    operators.map(just(1, 2, 3), lambda x: x * 10).subscribe(recorder)
    recorder.request(10)
    assert recorder.items == [10, 20, 30]
    assert recorder.completed


def test_map_request_passes_through_unchanged() -> None:
    spy = Spy(RangePublisher(0, 100))
    recorder = Recorder()
    operators.map(spy, str).subscribe(recorder)
    recorder.request(3)
    recorder.request(4)
    assert spy.subscription.requests == [3, 4]
    assert recorder.items == [str(n) for n in range(7)]


def test_map_function_raises_cancels_upstream_and_signals_error() -> None:
    spy = Spy(RangePublisher(0, 100))
    recorder = Recorder()

    def explode(x: int) -> int:
        if x == 2:
            raise KeyError(x)
        return x

    operators.map(spy, explode).subscribe(recorder)
    recorder.request(10)
    assert recorder.items == [0, 1]
    assert isinstance(recorder.error, KeyError)
    assert spy.subscription.cancelled.is_set()
    assert recorder.violations == []


def test_map_function_returns_none_signals_type_error() -> None:
    recorder = Recorder()
    operators.map(just(1), lambda x: None).subscribe(recorder)
    recorder.request(1)
    assert isinstance(recorder.error, TypeError)
    assert str(recorder.error).startswith("map function must not return None (rule 2.13), got None from ")


def test_map_not_callable_raises_type_error() -> None:
    with pytest.raises(TypeError, match=r"^fn must be callable, got 3$"):
        operators.map(just(1), 3)  # type: ignore[arg-type]


def test_map_source_not_publisher_raises_type_error() -> None:
    with pytest.raises(TypeError, match=r"^source must be a Publisher, got \[1\]$"):
        operators.map([1], str)  # type: ignore[arg-type]


@settings(max_examples=60, deadline=None)
@given(items=items_lists, pattern=patterns)
def test_map_matches_list_map_under_any_request_pattern(items: list[int], pattern: list[int]) -> None:
    recorder = drive(operators.map(just(*items), lambda x: x * 3 + 1), pattern)
    assert recorder.items == [x * 3 + 1 for x in items]
    assert recorder.completed
