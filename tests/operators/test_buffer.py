"""buffer(count): lists of count items; request(n) asks for n * count."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flowpy import operators
from flowpy.sources import RangePublisher, just
from tests.operators.conftest import Spy, drive, items_lists, patterns
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
