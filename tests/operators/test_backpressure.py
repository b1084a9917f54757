"""on_backpressure_buffer / _drop / _latest: for sources that cannot slow down."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flowpy import operators
from flowpy.errors import MissingBackpressureError
from flowpy.sources import RangePublisher, just
from tests.operators.conftest import WAIT, Spy, drive, items_lists, patterns
from tests.sources_helpers import SpyPublisher
from tests.support import Recorder


def _push(source: SpyPublisher, *items: int) -> None:
    assert source.subscriber is not None
    for item in items:
        source.subscriber.on_next(item)


def test_on_backpressure_buffer_requests_everything_upstream() -> None:
    spy = Spy(RangePublisher(0, 5))
    recorder = Recorder()
    operators.on_backpressure_buffer(spy, 10).subscribe(recorder)
    assert spy.subscription.requests == [2**63 - 1]
    recorder.request(2)
    assert recorder.items == [0, 1]
    recorder.request(5)
    assert recorder.items == [0, 1, 2, 3, 4]
    assert recorder.completed


def test_on_backpressure_buffer_overflow_error_signals_at_once() -> None:
    source = SpyPublisher()
    recorder = Recorder()
    operators.on_backpressure_buffer(source, 2).subscribe(recorder)
    _push(source, 1, 2, 3)
    assert isinstance(recorder.error, MissingBackpressureError)
    assert str(recorder.error) == "on_backpressure_buffer overflowed its capacity of 2 items"
    assert recorder.items == []
    assert source.cancelled.is_set()


def test_on_backpressure_buffer_drop_oldest_keeps_newest() -> None:
    source = SpyPublisher()
    recorder = Recorder()
    operators.on_backpressure_buffer(source, 2, on_overflow="drop_oldest").subscribe(recorder)
    _push(source, 1, 2, 3, 4)
    recorder.request(5)
    assert recorder.items == [3, 4]


def test_on_backpressure_buffer_drop_latest_keeps_oldest() -> None:
    source = SpyPublisher()
    recorder = Recorder()
    operators.on_backpressure_buffer(source, 2, on_overflow="drop_latest").subscribe(recorder)
    _push(source, 1, 2, 3, 4)
    recorder.request(5)
    assert recorder.items == [1, 2]


def test_on_backpressure_buffer_unknown_policy_raises_at_construction() -> None:
    with pytest.raises(
        ValueError, match=r"^on_overflow must be one of 'error', 'drop_oldest', 'drop_latest', got 'block'$"
    ):
        operators.on_backpressure_buffer(just(1), 4, on_overflow="block")  # type: ignore[arg-type]


def test_on_backpressure_latest_keeps_only_the_latest() -> None:
    source = SpyPublisher()
    recorder = Recorder()
    operators.on_backpressure_latest(source).subscribe(recorder)
    recorder.request(1)
    _push(source, 1, 2, 3)
    recorder.request(1)
    _push(source, 4)
    recorder.request(1)
    assert recorder.items == [1, 3, 4]


def test_on_backpressure_drop_delivers_only_with_open_demand() -> None:
    source = SpyPublisher()
    dropped: list[int] = []
    recorder = Recorder()
    operators.on_backpressure_drop(source, dropped.append).subscribe(recorder)
    assert source.requests == [2**63 - 1]
    recorder.request(1)
    _push(source, 1, 2, 3)
    recorder.request(2)
    _push(source, 4, 5, 6)
    assert recorder.items == [1, 4, 5]
    assert dropped == [2, 3, 6]


def test_on_backpressure_drop_callback_raises_signals_error() -> None:
    source = SpyPublisher()
    recorder = Recorder()
    operators.on_backpressure_drop(source, lambda item: 1 / 0).subscribe(recorder)
    _push(source, 1)
    assert isinstance(recorder.error, ZeroDivisionError)
    assert source.cancelled.is_set()


@settings(max_examples=50, deadline=None)
@given(items=items_lists, capacity=st.integers(min_value=40, max_value=60), pattern=patterns)
def test_on_backpressure_buffer_large_enough_loses_nothing(items: list[int], capacity: int, pattern: list[int]) -> None:
    recorder = drive(operators.on_backpressure_buffer(just(*items), capacity), pattern)
    assert recorder.items == items


@settings(max_examples=50, deadline=None)
@given(items=items_lists, capacity=st.integers(min_value=1, max_value=5), pattern=patterns)
def test_on_backpressure_buffer_drop_oldest_delivers_a_subsequence_ending_with_the_last_items(
    items: list[int], capacity: int, pattern: list[int]
) -> None:
    tagged = list(enumerate(items))
    recorder = drive(operators.on_backpressure_buffer(just(*tagged), capacity, on_overflow="drop_oldest"), pattern)
    # A synchronous source fills the buffer before any request: the last `capacity` items survive.
    assert recorder.items == tagged[-capacity:]


@settings(max_examples=50, deadline=None)
@given(items=items_lists, pattern=patterns)
def test_on_backpressure_drop_and_latest_deliver_subsequences_within_demand(
    items: list[int], pattern: list[int]
) -> None:
    tagged = list(enumerate(items))
    dropped = drive(operators.on_backpressure_drop(just(*tagged)), pattern)
    latest = drive(operators.on_backpressure_latest(just(*tagged)), pattern)
    # A synchronous source emits everything before the first request: drop keeps
    # nothing, latest keeps the last item.
    assert dropped.items == []
    assert latest.items == tagged[-1:]


@pytest.mark.timeout(60)
@pytest.mark.usefixtures("tiny_switch_interval")
def test_on_backpressure_buffer_with_asynchronous_source_keeps_order_under_interleavings() -> None:
    for round_ in range(20):
        source = operators.observe_on(RangePublisher(0, 2000), prefetch=16)
        recorder = Recorder()
        operators.on_backpressure_buffer(source, 1 + round_ % 8, on_overflow="drop_oldest").subscribe(recorder)
        while not recorder.done.is_set():
            recorder.request(1 + round_ % 3)
            if len(recorder.items) > 2000:
                break
        assert recorder.done.wait(WAIT)
        assert recorder.violations == []
        assert recorder.completed
        assert recorder.items == sorted(set(recorder.items))  # a subsequence, in order, no duplicates
        assert recorder.items[-1] == 1999  # the newest item is never the one dropped
