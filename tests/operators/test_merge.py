"""merge and concat: many publishers, bounded prefetch each."""

from __future__ import annotations

from collections import deque
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flowpy import operators
from flowpy.errors import MissingBackpressureError
from flowpy.operators._queue import QueueSubscriber
from flowpy.sources import RangePublisher, error, just
from tests.operators.conftest import WAIT, Spy, before_each_failure, drive, items_lists, patterns
from tests.sources_helpers import SpyPublisher
from tests.support import Recorder


def test_merge_emits_round_robin_from_ready_sources() -> None:
    recorder = Recorder()
    operators.merge(just(1, 2, 3), just(10, 20)).subscribe(recorder)
    recorder.request(10)
    assert recorder.items == [1, 10, 2, 20, 3]
    assert recorder.completed


def test_merge_never_requests_more_than_prefetch_per_source() -> None:
    first, second = Spy(RangePublisher(0, 1000)), Spy(RangePublisher(1000, 1000))
    recorder = Recorder()
    operators.merge(first, second, prefetch=8).subscribe(recorder)
    assert first.subscription.requests == [8]
    assert second.subscription.requests == [8]
    recorder.request(10)  # five from each: fewer than 6 (75 % of 8) taken from either
    assert first.subscription.requests == [8]
    assert second.subscription.requests == [8]
    recorder.request(4)  # seven from each: 6 taken, so 6 more asked of each
    assert first.subscription.requests == [8, 6]
    assert second.subscription.requests == [8, 6]
    for spy in (first, second):
        taken = sum(1 for x in recorder.items if (x < 1000) == (spy is first))
        assert spy.subscription.total - taken <= 8


def test_merge_error_cancels_the_other_sources() -> None:
    spy = Spy(RangePublisher(0, 100))
    recorder = Recorder()
    operators.merge(spy, error(KeyError("x"))).subscribe(recorder)
    assert isinstance(recorder.error, KeyError)
    assert spy.subscription.cancelled.is_set()


def test_an_inner_error_is_never_completed_by_a_drain_that_runs_while_it_is_recorded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # An inner's on_error may arrive on a producer thread while another
    # thread's drain pass runs: such a pass must not find the inner exhausted
    # without the failure and complete the downstream.
    before_each_failure(monkeypatch, lambda coordinator: coordinator._signal())
    source = SpyPublisher()
    recorder = Recorder()
    operators.merge(source).subscribe(recorder)
    recorder.request(1)
    assert source.subscriber is not None
    source.subscriber.on_error(KeyError("inner"))
    assert not recorder.completed
    assert isinstance(recorder.error, KeyError)


def test_an_overflowing_inner_is_never_completed_by_a_request_that_drains_it_meanwhile(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    source = SpyPublisher()
    recorder = Recorder()
    operators.merge(source, prefetch=2).subscribe(recorder)
    before_each_failure(monkeypatch, lambda coordinator: recorder.request(2))
    assert source.subscriber is not None
    for item in range(3):
        source.subscriber.on_next(item)
    assert not recorder.completed
    assert isinstance(recorder.error, MissingBackpressureError)


def test_merge_source_over_prefetch_signals_missing_backpressure() -> None:
    source = SpyPublisher()
    recorder = Recorder()
    operators.merge(source, prefetch=2).subscribe(recorder)
    assert source.subscriber is not None
    for item in range(3):
        source.subscriber.on_next(item)
    assert isinstance(recorder.error, MissingBackpressureError)
    assert source.cancelled.is_set()


def test_merge_of_nothing_completes() -> None:
    recorder = Recorder()
    operators.merge().subscribe(recorder)
    assert recorder.completed


def test_merge_not_a_publisher_raises_type_error() -> None:
    with pytest.raises(TypeError, match=r"^publishers\[1\] must be a Publisher, got 5$"):
        operators.merge(just(1), 5)  # type: ignore[arg-type]


def test_concat_subscribes_next_only_after_previous_completed() -> None:
    first = SpyPublisher()
    second = Spy(just(3, 4))
    recorder = Recorder()
    operators.concat(first, second).subscribe(recorder)
    recorder.request(10)
    assert second.subscriptions == []
    assert first.subscriber is not None
    first.subscriber.on_next(1)
    first.subscriber.on_next(2)
    assert second.subscriptions == []
    first.subscriber.on_complete()
    assert recorder.items == [1, 2, 3, 4]
    assert recorder.completed


@pytest.mark.timeout(60)
@pytest.mark.usefixtures("tiny_switch_interval")
def test_merge_of_asynchronous_sources_loses_and_duplicates_nothing() -> None:
    for _ in range(10):
        sources = [operators.observe_on(RangePublisher(k * 1000, 200), prefetch=5) for k in range(4)]
        recorder = Recorder()
        operators.merge(*sources, prefetch=3).subscribe(recorder)
        for _ in range(100):
            recorder.request(9)
        assert recorder.done.wait(WAIT)
        assert sorted(recorder.items) == sorted(x for k in range(4) for x in range(k * 1000, k * 1000 + 200))
        for k in range(4):
            assert [x for x in recorder.items if k * 1000 <= x < k * 1000 + 1000] == list(
                range(k * 1000, k * 1000 + 200)
            )
        assert recorder.violations == []


@settings(max_examples=40, deadline=None)
@given(lists=st.lists(items_lists, max_size=4), pattern=patterns)
def test_merge_contains_every_item_in_source_order_under_any_pattern(
    lists: list[list[int]], pattern: list[int]
) -> None:
    tagged = [[(index, x) for x in items] for index, items in enumerate(lists)]
    recorder = drive(operators.merge(*(just(*items) for items in tagged), prefetch=2), pattern)
    assert sorted(recorder.items) == sorted(x for items in tagged for x in items)
    for index, items in enumerate(tagged):
        assert [x for x in recorder.items if x[0] == index] == items


@settings(max_examples=40, deadline=None)
@given(lists=st.lists(items_lists, max_size=4), pattern=patterns)
def test_concat_matches_list_concatenation_under_any_pattern(lists: list[list[int]], pattern: list[int]) -> None:
    recorder = drive(operators.concat(*(just(*items) for items in lists), prefetch=2), pattern)
    assert recorder.items == [x for items in lists for x in items]


# --- The ready ring -----------------------------------------------------------------------


def test_merge_completes_many_sources_without_demand_beyond_their_items() -> None:
    recorder = Recorder()
    operators.merge(*[just(k, k + 100) for k in range(50)], prefetch=2).subscribe(recorder)
    recorder.request(100)  # exactly the items: on_complete needs no more (rule 1.4)
    assert recorder.completed
    assert recorder.items == [x for k in range(50) for x in (k,)] + [k + 100 for k in range(50)]


def test_merge_item_arriving_as_the_drain_finds_its_inner_empty_is_delivered() -> None:
    # The window between the drain seeing an inner's queue empty and clearing
    # its `scheduled` flag: a producer that appends then finds the flag still
    # set leaves it to the drain, which must look at the queue once more.
    source = SpyPublisher()
    armed: list[bool] = []

    class ArrivesWhenFoundEmpty(deque[int]):
        def __len__(self) -> int:
            length = super().__len__()
            if length == 0 and armed:
                armed.clear()
                assert source.subscriber is not None
                source.subscriber.on_next(2)  # on the drain's thread, as another thread could at this moment
            return length

    recorder = Recorder(on_next_hook=lambda item: armed.append(True) if item == 1 else None)
    operators.merge(source, just(), prefetch=4).subscribe(recorder)
    inner = source.subscriber
    assert isinstance(inner, QueueSubscriber)
    inner.queue = ArrivesWhenFoundEmpty()
    recorder.request(5)
    inner.on_next(1)
    assert recorder.items == [1, 2]


def test_flat_map_over_a_thousand_live_inners_delivers_everything_in_inner_order() -> None:
    recorder = Recorder()
    result = operators.flat_map(
        operators.group_by(RangePublisher(0, 20_000), lambda x: x % 1000), lambda group: group, max_concurrency=1000
    )
    result.subscribe(recorder)
    recorder.request(2**63 - 1)
    assert recorder.completed
    assert sorted(recorder.items) == list(range(20_000))
    for key in (0, 1, 999):
        assert [x for x in recorder.items if x % 1000 == key] == list(range(key, 20_000, 1000))


@pytest.mark.parametrize("combine", [operators.concat, operators.merge])
@pytest.mark.timeout(60)
def test_merge_and_concat_nested_300_deep_deliver_everything(combine: Any) -> None:
    # Each level's drain subscribes the level below inside its pass: the
    # trampoline keeps that from recursing through all 300 on one stack.
    nested: Any = RangePublisher(0, 5)
    for _ in range(300):
        nested = combine(nested, just(-1))
    recorder = drive(nested, [1, 2, 3])
    assert sorted(recorder.items) == sorted([0, 1, 2, 3, 4] + [-1] * 300)
    if combine is operators.concat:
        assert recorder.items == [0, 1, 2, 3, 4] + [-1] * 300
    assert recorder.completed
