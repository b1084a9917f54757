"""on_backpressure_buffer / _drop / _latest: for sources that cannot slow down."""

from __future__ import annotations

import threading
from collections import deque
from typing import Any

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


# --- on_drop, on_backpressure_error and the strategy vocabulary --------------------------


@pytest.mark.parametrize(
    ("policy", "delivered", "dropped"),
    [("drop_oldest", [3, 4], [1, 2]), ("drop_latest", [1, 2], [3, 4])],
)
def test_on_backpressure_buffer_tells_on_drop_of_each_dropped_item(
    policy: Any, delivered: list[int], dropped: list[int]
) -> None:
    source = SpyPublisher()
    drops: list[int] = []
    recorder = Recorder()
    operators.on_backpressure_buffer(source, 2, on_overflow=policy, on_drop=drops.append).subscribe(recorder)
    _push(source, 1, 2, 3, 4)
    recorder.request(5)
    assert recorder.items == delivered
    assert drops == dropped


def test_on_backpressure_latest_tells_on_drop_of_each_replaced_item() -> None:
    source = SpyPublisher()
    drops: list[int] = []
    recorder = Recorder()
    operators.on_backpressure_latest(source, drops.append).subscribe(recorder)
    recorder.request(1)
    _push(source, 1, 2, 3, 4)
    source_subscriber = source.subscriber
    assert source_subscriber is not None
    source_subscriber.on_complete()
    assert recorder.items == [1] and not recorder.completed  # 4 waits for demand, and the completion after it
    recorder.request(1)
    assert recorder.items == [1, 4] and recorder.completed
    assert drops == [2, 3]


@pytest.mark.parametrize(
    "make",
    [
        lambda source, fail: operators.on_backpressure_buffer(source, 1, on_overflow="drop_latest", on_drop=fail),
        lambda source, fail: operators.on_backpressure_latest(source, fail),
    ],
)
def test_a_raising_on_drop_cancels_the_source_and_fails_the_stream_at_once(make: Any) -> None:
    source = SpyPublisher()
    error = RuntimeError("cannot drop")

    def fail(_item: int) -> None:
        raise error

    recorder = Recorder()
    make(source, fail).subscribe(recorder)
    _push(source, 1, 2)
    assert source.cancelled.is_set()
    assert recorder.kinds() == ["on_subscribe", "on_error"]  # ahead of the buffered item
    assert recorder.error is error
    _push(source, 3)  # after the end: ignored (rule 2.8)
    assert recorder.kinds() == ["on_subscribe", "on_error"]


def test_on_backpressure_error_passes_requested_items_and_fails_on_the_first_unrequested_one() -> None:
    source = SpyPublisher()
    recorder = Recorder()
    operators.on_backpressure_error(source).subscribe(recorder)
    assert source.requests == [2**63 - 1]
    recorder.request(2)
    _push(source, 1, 2, 3)
    assert recorder.items == [1, 2]
    assert isinstance(recorder.error, MissingBackpressureError)
    assert str(recorder.error) == "on_backpressure_error: the source emitted more than the 2 items requested"
    assert source.cancelled.is_set()
    _push(source, 4)
    assert recorder.kinds() == ["on_subscribe", "on_next", "on_next", "on_error"]


def test_on_backpressure_error_with_enough_demand_completes() -> None:
    recorder = drive(operators.on_backpressure_error(RangePublisher(0, 3)), [])
    assert recorder.error is not None  # a synchronous source emits before the first request
    recorder = Recorder(initial=3)
    operators.on_backpressure_error(RangePublisher(0, 3)).subscribe(recorder)
    assert recorder.items == [0, 1, 2] and recorder.completed


@pytest.mark.parametrize(
    ("strategy", "kwargs", "delivered", "error"),
    [
        ("buffer", {"capacity": 2}, [1], MissingBackpressureError),  # 2 waiting, the 4th overflows
        ("drop", {}, [1], None),
        ("latest", {}, [1, 4], None),
        ("error", {}, [1], MissingBackpressureError),
    ],
)
def test_on_backpressure_selects_the_operator_named_by_the_strategy(
    strategy: Any, kwargs: dict[str, Any], delivered: list[int], error: type | None
) -> None:
    source = SpyPublisher()
    recorder = Recorder(initial=1)
    operators.on_backpressure(source, strategy, **kwargs).subscribe(recorder)
    _push(source, 1, 2, 3, 4)
    if error is None:
        source_subscriber = source.subscriber
        assert source_subscriber is not None
        source_subscriber.on_complete()
    recorder.request(5)
    assert recorder.items == delivered
    assert (type(recorder.error) if recorder.error else None) is error
    assert recorder.done.is_set()


@pytest.mark.parametrize(
    ("call", "kind", "message"),
    [
        (
            lambda: operators.on_backpressure(just(1), "block"),  # type: ignore[arg-type]
            ValueError,
            r"^strategy must be one of 'buffer', 'drop', 'latest', 'error', got 'block'$",
        ),
        (lambda: operators.on_backpressure(just(1), capacity=0), ValueError, r"^capacity must be positive, got 0$"),
        (
            lambda: operators.on_backpressure(just(1), "error", on_drop=print),
            ValueError,
            r"^on_drop must be None with strategy='error', which never drops items; use strategy='drop' or 'latest'$",
        ),
        (
            lambda: operators.on_backpressure_buffer(just(1), on_drop=print),
            ValueError,
            r"^on_drop must be None with on_overflow='error', which never drops items; "
            r"use on_overflow='drop_oldest' or 'drop_latest'$",
        ),
        (
            lambda: operators.on_backpressure_latest(just(1), 3),  # type: ignore[arg-type]
            TypeError,
            r"^on_drop must be callable or None, got 3$",
        ),
        (lambda: operators.on_backpressure_error(3), TypeError, r"^source must be a Publisher, got 3$"),  # type: ignore[arg-type]
    ],
)
def test_backpressure_arguments_are_checked_when_the_operator_is_built(call: Any, kind: type, message: str) -> None:
    with pytest.raises(kind, match=message):
        call()


@pytest.mark.timeout(60)
@pytest.mark.usefixtures("tiny_switch_interval")
@pytest.mark.parametrize("capacity", [1, 3])
def test_drop_oldest_accounts_for_every_item_while_the_drain_races_the_evictions(capacity: int) -> None:
    total = 3000
    for round_ in range(10):
        drops: list[int] = []
        source = operators.observe_on(RangePublisher(0, total), prefetch=8)
        recorder = Recorder()
        stage = operators.on_backpressure_buffer(source, capacity, on_overflow="drop_oldest", on_drop=drops.append)
        stage.subscribe(recorder)
        while not recorder.done.wait(0):
            recorder.request(1 + round_ % 3)
        assert recorder.completed and recorder.violations == []
        assert recorder.items == sorted(recorder.items)
        assert sorted(recorder.items + drops) == list(range(total))  # delivered or dropped, exactly once
        assert recorder.items[-1] == total - 1  # the newest item is never the one dropped


def test_a_drain_that_finds_the_queue_empty_during_an_eviction_is_signalled_again() -> None:
    source = SpyPublisher()
    drops: list[int] = []
    recorder = Recorder()
    operators.on_backpressure_buffer(source, 1, on_overflow="drop_oldest", on_drop=drops.append).subscribe(recorder)
    _push(source, 1)  # the buffer is full; nothing requested yet
    evicting, resume = threading.Event(), threading.Event()

    class Gated(deque[int]):
        """Holds the evicting thread between its popleft and its append."""

        def popleft(self) -> int:
            item = super().popleft()
            if threading.current_thread() is evictor:
                evicting.set()
                assert resume.wait(WAIT)
            return item

    upstream = recorder.subscription.upstream  # type: ignore[union-attr]
    upstream.queue = Gated(upstream.queue)
    evictor = threading.Thread(target=_push, args=(source, 2))
    evictor.start()
    assert evicting.wait(WAIT)
    recorder.request(1)  # this drain pass finds the queue empty, mid-eviction, and ends
    assert recorder.items == []
    resume.set()
    evictor.join(WAIT)
    assert recorder.items == [2]  # the eviction's append signalled the drain again
    assert drops == [1]


@pytest.mark.timeout(60)
def test_on_backpressure_buffer_300_stages_deliver_everything_under_any_demand() -> None:
    # An item crossing the stages is handed down the trampoline every
    # NESTING stages instead of recursing through all 300.
    chain: Any = RangePublisher(0, 50)
    for _ in range(300):
        chain = operators.on_backpressure_buffer(chain)
    recorder = drive(chain, [1, 3, 7])
    assert recorder.items == list(range(50))
    assert recorder.completed


def test_on_backpressure_buffer_ends_with_on_error_when_the_downstream_runs_out_of_stack() -> None:
    # A RecursionError out of the downstream's on_next is the pipeline's, not
    # a broken subscriber's: the stream ends with on_error, not only a log.
    spy = Spy(RangePublisher(0, 10))

    def exhausted(item: int) -> None:
        if item == 3:
            raise RecursionError("maximum recursion depth exceeded")

    recorder = Recorder(on_next_hook=exhausted)
    operators.on_backpressure_buffer(spy).subscribe(recorder)
    recorder.request(10)
    assert recorder.done.wait(WAIT)
    assert isinstance(recorder.error, RecursionError)
    assert recorder.items == [0, 1, 2, 3]
    assert spy.subscription.cancelled.is_set()
    assert recorder.violations == []
