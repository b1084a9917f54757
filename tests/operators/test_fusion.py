"""Fusion: chained synchronous operators run as one stage on the delivering thread."""

from __future__ import annotations

import itertools
import random
import threading
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flowpy import operators
from flowpy.executors import DaemonThreadPool
from flowpy.flowable import Flowable
from flowpy.operators._fused import FusedPublisher, FusedSubscriber
from flowpy.sources import RangePublisher, just
from tests.operators.conftest import WAIT, Spy, drive, items_lists, patterns
from tests.support import Recorder


def test_fusion_map_filter_take_subscribes_one_subscriber_upstream() -> None:
    spy = Spy(RangePublisher(0, 100))
    chain = operators.take(operators.filter(operators.map(spy, lambda x: x * 2), lambda x: x % 3 == 0), 4)
    recorder = Recorder()
    chain.subscribe(recorder)
    recorder.request(10)
    assert recorder.items == [0, 6, 12, 18]
    assert len(spy.subscriptions) == 1
    assert len(spy.subscribers) == 1
    assert isinstance(spy.subscribers[0], FusedSubscriber)
    assert recorder.subscription is spy.subscribers[0]


def test_fusion_chain_is_one_publisher_with_all_steps() -> None:
    chain = Flowable.range(0, 10).map(str).filter(bool).skip(1).take_while(bool).scan(lambda a, b: a + b).take(3)
    publisher = chain.publisher
    assert isinstance(publisher, FusedPublisher)
    assert [type(step).__name__ for step in publisher.steps] == [
        "_Map",
        "_Filter",
        "_Skip",
        "_TakeWhile",
        "_Scan",
        "_Take",
    ]


def test_fusion_steps_run_on_the_thread_that_delivers_upstream_items() -> None:
    pool = DaemonThreadPool(1, thread_name_prefix="upstream")
    try:
        seen: set[str] = set()

        def note(x: Any) -> Any:
            seen.add(threading.current_thread().name)
            return x

        upstream = operators.subscribe_on(RangePublisher(0, 50), pool)
        recorder = Recorder()
        operators.take(operators.filter(operators.map(upstream, note), lambda x: note(x) is not None), 20).subscribe(
            recorder
        )
        assert recorder.subscribed.wait(WAIT)
        recorder.request(100)
        assert recorder.done.wait(WAIT)
        assert recorder.items == list(range(20))
        assert seen == {"upstream-0"}
        assert recorder.violations == []
    finally:
        pool.shutdown()


def test_fusion_boundary_operator_starts_a_new_stage() -> None:
    fused = operators.map(RangePublisher(0, 3), str)
    bounded = operators.map(operators.observe_on(fused), str)
    assert isinstance(bounded, FusedPublisher)
    assert len(bounded.steps) == 1


def _apply_to_list(steps: list[tuple[str, int]], items: list[int]) -> list[int]:
    for kind, k in steps:
        if kind == "map":
            items = [x + k for x in items]
        elif kind == "filter":
            items = [x for x in items if x % k]
        elif kind == "take":
            items = items[:k]
        elif kind == "skip":
            items = items[k:]
        elif kind == "take_while":
            items = list(itertools.takewhile(lambda x, k=k: x < k * 10, items))
        else:
            items = list(itertools.accumulate(items, lambda a, b: a - b))
    return items


def _apply_to_publisher(steps: list[tuple[str, int]], publisher: Any) -> Any:
    for kind, k in steps:
        if kind == "map":
            publisher = operators.map(publisher, lambda x, k=k: x + k)
        elif kind == "filter":
            publisher = operators.filter(publisher, lambda x, k=k: x % k)
        elif kind == "take":
            publisher = operators.take(publisher, k)
        elif kind == "skip":
            publisher = operators.skip(publisher, k)
        elif kind == "take_while":
            publisher = operators.take_while(publisher, lambda x, k=k: x < k * 10)
        else:
            publisher = operators.scan(publisher, lambda a, b: a - b)
    return publisher


step_lists = st.lists(
    st.tuples(st.sampled_from(["map", "filter", "take", "skip", "take_while", "scan"]), st.integers(2, 6)),
    max_size=6,
)


@settings(max_examples=150, deadline=None)
@given(steps=step_lists, items=items_lists, pattern=patterns)
def test_fusion_any_chain_matches_list_operations_under_any_request_pattern(
    steps: list[tuple[str, int]], items: list[int], pattern: list[int]
) -> None:
    spy = Spy(just(*items))
    recorder = drive(_apply_to_publisher(steps, spy), pattern)
    assert recorder.items == _apply_to_list(steps, items)
    assert len(spy.subscriptions) == 1
    takes = [k for kind, k in steps if kind == "take"]
    if takes and all(kind in ("map", "take", "take_while", "scan") for kind, _ in steps):
        assert spy.subscription.total <= min(takes)  # a cap is never exceeded upstream


def test_fusion_chains_of_one_shape_share_a_compiled_factory() -> None:
    first = operators.take(operators.map(RangePublisher(0, 5), str), 2)
    second = operators.take(operators.map(RangePublisher(0, 9), repr), 3)
    recorders = Recorder(), Recorder()
    first.subscribe(recorders[0])
    second.subscribe(recorders[1])
    for recorder in recorders:
        recorder.request(5)
    assert recorders[0].items == ["0", "1"]
    assert recorders[1].items == ["0", "1", "2"]
    assert isinstance(first, FusedPublisher) and isinstance(second, FusedPublisher)
    assert first._compiled is not None and second._compiled is not None
    assert first._compiled[0] is second._compiled[0]


def test_fusion_a_thousand_predicate_stages_run_as_one_stage() -> None:
    # Each step's code sits at the level of the others: no nesting per
    # step, so the chain compiles at any length.
    filtered = Flowable.range(0, 20)
    waited = Flowable.range(0, 20)
    for _ in range(1000):
        filtered = filtered.filter(lambda x: x % 3)
        waited = waited.take_while(lambda x: x < 15)
    assert filtered.to_list().result(WAIT) == [x for x in range(20) if x % 3]
    assert waited.to_list().result(WAIT) == list(range(15))


@pytest.mark.parametrize("seed", [1, 2])  # chains that let 50 and 9 items through
@pytest.mark.timeout(60)
def test_fusion_a_long_chain_of_every_kind_matches_list_operations(seed: int) -> None:
    rng = random.Random(seed)
    # Mostly steps that keep items, so that some reach the end of 1,500 steps.
    kept = {"take": 40, "skip": 1, "take_while": 10**12}  # the k that keeps most items
    steps = []
    for _ in range(1500):
        kind = rng.choice(["filter", "skip", "take_while", "scan", "take"]) if rng.random() < 0.01 else "map"
        steps.append((kind, kept.get(kind, rng.randint(2, 6))))
    items = list(range(-30, 30))
    recorder = drive(_apply_to_publisher(steps, just(*items)), [3, 5])
    assert recorder.items == _apply_to_list(steps, items)
    assert recorder.completed
