"""Snapshots of the queueing operators' stages (flowpy/operators/_tracking.py)."""

from __future__ import annotations

import gc
from typing import Any

from flowpy import operators
from flowpy._demand import MAX_DEMAND
from flowpy.flow import Publisher
from flowpy.snapshots import PublisherSnapshot, SubscriberSnapshot, SupportsSnapshot
from tests.sources_helpers import SpyPublisher
from tests.support import ManualExecutor, Recorder


def _snapshot(publisher: Publisher[Any]) -> PublisherSnapshot:
    assert isinstance(publisher, SupportsSnapshot)
    return publisher.snapshot()


def _feed(source: SpyPublisher, items: range) -> None:
    assert source.subscriber is not None
    for item in items:
        source.subscriber.on_next(item)


def test_observe_on_snapshot_queue_demand_and_delivered() -> None:
    source = SpyPublisher()
    executor = ManualExecutor()
    recorder = Recorder()
    stage = operators.observe_on(source, executor, prefetch=8)
    stage.subscribe(recorder)
    _feed(source, range(5))
    executor.run_all()
    assert _snapshot(stage) == PublisherSnapshot(False, 8, (SubscriberSnapshot(recorder, 5, 8, 0, 0, 0),))
    recorder.request(3)
    executor.run_all()
    assert _snapshot(stage).subscribers == (SubscriberSnapshot(recorder, 2, 8, 0, 3, 0),)


def test_observe_on_snapshot_forgets_a_completed_stage() -> None:
    source = SpyPublisher()
    executor = ManualExecutor()
    recorder = Recorder(initial=10)
    stage = operators.observe_on(source, executor, prefetch=8)
    stage.subscribe(recorder)
    _feed(source, range(2))
    assert source.subscriber is not None
    source.subscriber.on_complete()
    executor.run_all()
    assert recorder.completed
    assert _snapshot(stage).subscribers == ()


def test_observe_on_snapshot_holds_its_stages_weakly() -> None:
    source = SpyPublisher()
    executor = ManualExecutor()
    stage = operators.observe_on(source, executor, prefetch=8)
    stage.subscribe(Recorder())
    executor.run_all()
    assert _snapshot(stage).number_of_subscribers == 1
    source.subscriber = None  # the only strong path to the stage, besides its cycle with the recorder
    gc.collect()
    assert _snapshot(stage).subscribers == ()


def test_one_snapshot_reading_per_subscription() -> None:
    first_source, second_source = SpyPublisher(), SpyPublisher()
    sources = iter([first_source, second_source])

    class Switch(Publisher[Any]):
        def subscribe(self, subscriber: Any) -> None:
            next(sources).subscribe(subscriber)

    stage = operators.observe_on(Switch(), ManualExecutor(), prefetch=4)
    first, second = Recorder(), Recorder()
    stage.subscribe(first)
    stage.subscribe(second)
    _feed(first_source, range(1))
    _feed(second_source, range(3))
    readings = {reading.subscriber: reading.buffered for reading in _snapshot(stage).subscribers}
    assert readings == {first: 1, second: 3}


def test_on_backpressure_buffer_drop_latest_counts_drops() -> None:
    source = SpyPublisher()
    recorder = Recorder()
    stage = operators.on_backpressure_buffer(source, 2, on_overflow="drop_latest")
    stage.subscribe(recorder)
    _feed(source, range(5))
    assert _snapshot(stage).subscribers == (SubscriberSnapshot(recorder, 2, 2, 0, 0, 3),)
    recorder.request(1)
    assert recorder.items == [0]
    assert _snapshot(stage).subscribers == (SubscriberSnapshot(recorder, 1, 2, 0, 1, 3),)


def test_on_backpressure_latest_counts_evictions_as_drops() -> None:
    source = SpyPublisher()
    recorder = Recorder()
    stage = operators.on_backpressure_latest(source)
    stage.subscribe(recorder)
    _feed(source, range(4))
    assert _snapshot(stage).subscribers == (SubscriberSnapshot(recorder, 1, 1, 0, 0, 3),)
    recorder.request(1)
    assert recorder.items == [3]


def test_on_backpressure_drop_counts_items_without_demand() -> None:
    source = SpyPublisher()
    recorder = Recorder(initial=2)
    dropped: list[int] = []
    stage = operators.on_backpressure_drop(source, dropped.append)
    stage.subscribe(recorder)
    _feed(source, range(5))
    assert dropped == [2, 3, 4]
    assert _snapshot(stage) == PublisherSnapshot(False, 0, (SubscriberSnapshot(recorder, 0, 0, 0, 2, 3),))
    recorder.request(MAX_DEMAND)
    _feed(source, range(5, 6))
    assert _snapshot(stage).subscribers == (SubscriberSnapshot(recorder, 0, 0, MAX_DEMAND, 3, 3),)
    recorder.cancel()
    assert _snapshot(stage).subscribers == ()


def test_merge_snapshot_sums_the_inner_queues() -> None:
    first, second = SpyPublisher(), SpyPublisher()
    recorder = Recorder()
    stage = operators.merge(first, second, prefetch=4)
    stage.subscribe(recorder)
    _feed(first, range(2))
    _feed(second, range(10, 13))
    assert _snapshot(stage) == PublisherSnapshot(False, 4, (SubscriberSnapshot(recorder, 5, 8, 0, 0, 0),))
    recorder.request(4)
    assert len(recorder.items) == 4
    assert _snapshot(stage).subscribers == (SubscriberSnapshot(recorder, 1, 8, 0, 4, 0),)


def test_flat_map_snapshot_counts_the_inners_it_made() -> None:
    outer = SpyPublisher()
    inners = [SpyPublisher(), SpyPublisher()]
    recorder = Recorder()
    stage = operators.flat_map(outer, lambda index: inners[index], prefetch=4)
    stage.subscribe(recorder)
    _feed(outer, range(2))
    _feed(inners[0], range(3))
    assert _snapshot(stage).subscribers == (SubscriberSnapshot(recorder, 3, 8, 0, 0, 0),)
    recorder.request(2)
    assert _snapshot(stage).subscribers == (SubscriberSnapshot(recorder, 1, 8, 0, 2, 0),)


def test_zip_snapshot_sums_the_source_queues_and_forgets_the_stage_at_the_end() -> None:
    first, second = SpyPublisher(), SpyPublisher()
    recorder = Recorder()
    stage = operators.zip(first, second, prefetch=4)
    stage.subscribe(recorder)
    _feed(first, range(3))
    _feed(second, range(10, 11))
    assert _snapshot(stage) == PublisherSnapshot(False, 4, (SubscriberSnapshot(recorder, 4, 8, 0, 0, 0),))
    recorder.request(5)
    assert recorder.items == [(0, 10)]
    assert _snapshot(stage).subscribers == (SubscriberSnapshot(recorder, 2, 8, 4, 1, 0),)
    assert second.subscriber is not None
    second.subscriber.on_complete()
    assert recorder.completed
    assert _snapshot(stage).subscribers == ()
