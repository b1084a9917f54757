"""Snapshots of SubmissionPublisher (both cores), TransformProcessor and MulticastProcessor.

The SubmissionPublisher tests run once per core (the ``core`` fixture,
tests/core_impl.py), on publishers built from ``core.SubmissionPublisher``.
The processors' run once: MulticastProcessor is the same code whichever core
runs, and TransformProcessor is a SubmissionPublisher on the core this
process chose (the free-threaded CI job runs the whole core suite once per
core, each in a process of its own).
"""

from __future__ import annotations

import dataclasses
import threading
from typing import Any

import pytest

from flowpy import MulticastProcessor, SubmissionPublisher, TransformProcessor
from flowpy._demand import MAX_DEMAND
from flowpy.executors import DaemonThreadPool, direct_executor
from flowpy.flow import Subscription
from flowpy.snapshots import PublisherSnapshot, SubscriberSnapshot, SupportsSnapshot
from tests.core_impl import Core
from tests.support import ManualExecutor, Recorder


def _publisher(core: Core, executor: Any, capacity: int = 4) -> SubmissionPublisher[int]:
    return core.SubmissionPublisher(executor=executor, max_buffer_capacity=capacity)


def _only(snapshot: PublisherSnapshot) -> SubscriberSnapshot:
    (reading,) = snapshot.subscribers
    return reading


def _subscription(publisher: SubmissionPublisher[Any]) -> Any:
    (subscription,) = publisher._subscriptions
    return subscription


def test_snapshot_items_held_by_a_subscriber_without_demand_are_buffered(core: Core) -> None:
    executor = ManualExecutor()
    publisher = _publisher(core, executor)
    recorder = Recorder()
    publisher.subscribe(recorder)
    executor.run_all()
    for item in range(3):
        publisher.submit(item)
    snapshot = publisher.snapshot()
    assert snapshot == PublisherSnapshot(False, 4, (SubscriberSnapshot(recorder, 3, 4, 0, 0, 0),))
    assert snapshot.number_of_subscribers == 1
    assert snapshot.maximum_lag == publisher.estimate_maximum_lag() == 3
    assert snapshot.minimum_demand == publisher.estimate_minimum_demand() == -3
    publisher.close()


def test_snapshot_delivered_and_demand_after_a_request_is_served(core: Core) -> None:
    executor = ManualExecutor()
    publisher = _publisher(core, executor)
    recorder = Recorder()
    publisher.subscribe(recorder)
    executor.run_all()
    for item in range(3):
        publisher.submit(item)
    recorder.request(5)
    executor.run_all()
    assert recorder.items == [0, 1, 2]
    assert _only(publisher.snapshot()) == SubscriberSnapshot(recorder, 0, 4, 2, 3, 0)
    publisher.close()


def test_snapshot_unbounded_demand_stays_unbounded_and_counts_delivered(core: Core) -> None:
    publisher = _publisher(core, direct_executor, capacity=2)
    recorder = Recorder(initial=MAX_DEMAND)
    publisher.subscribe(recorder)
    for item in range(10):
        publisher.submit(item)
    assert _only(publisher.snapshot()) == SubscriberSnapshot(recorder, 0, 2, MAX_DEMAND, 10, 0)
    publisher.close()


def test_snapshot_offer_to_a_full_buffer_counts_a_drop_per_subscriber(core: Core) -> None:
    executor = ManualExecutor()
    publisher = _publisher(core, executor, capacity=2)
    full, roomy = Recorder(), Recorder()
    publisher.subscribe(full)
    executor.run_all()
    publisher.submit(0)
    publisher.submit(1)
    publisher.subscribe(roomy)
    executor.run_all()
    assert publisher.offer(2) == -1
    retried: list[Any] = []

    def retry(subscriber: Any, item: int) -> bool:
        retried.append(item)
        return True

    assert publisher.offer(3, retry) == -1
    assert retried == [3]  # retried once, still full: one drop, not two
    readings = {reading.subscriber: reading for reading in publisher.snapshot().subscribers}
    assert readings[full] == SubscriberSnapshot(full, 2, 2, 0, 0, 2)
    assert readings[roomy] == SubscriberSnapshot(roomy, 2, 2, 0, 0, 0)
    publisher.close()


def test_snapshot_drop_saved_by_the_retry_is_not_counted(core: Core) -> None:
    executor = ManualExecutor()
    publisher = _publisher(core, executor, capacity=1)
    recorder = Recorder(initial=1)
    publisher.subscribe(recorder)
    executor.run_all()  # on_subscribe and its request(1): no task left
    publisher.submit(0)  # starts a task, not run yet

    def make_room(subscriber: Any, item: int) -> bool:
        executor.run_all()  # delivers 0: the retry finds room
        return True

    assert publisher.offer(1, make_room) == 1
    assert _only(publisher.snapshot()) == SubscriberSnapshot(recorder, 1, 1, 0, 1, 0)
    publisher.close()


def test_snapshot_delivered_counts_only_on_next_calls_that_returned(core: Core) -> None:
    def fail_on_second(item: int) -> None:
        if item == 1:
            raise ValueError("second item refused")

    executor = ManualExecutor()
    publisher = _publisher(core, executor)
    recorder = Recorder(on_next_hook=fail_on_second)
    publisher.subscribe(recorder)
    executor.run_all()
    for item in range(3):
        publisher.submit(item)
    subscription = _subscription(publisher)
    recorder.request(3)
    executor.run_all()
    assert recorder.items == [0, 1]
    assert isinstance(recorder.error, ValueError)
    assert (subscription.delivered, subscription.dropped) == (1, 0)
    assert publisher.snapshot().subscribers == ()  # closed subscriptions are not listed
    publisher.close()


def test_snapshot_batch_cut_short_by_cancel_counts_what_was_delivered(core: Core) -> None:
    recorder = Recorder(on_next_hook=lambda item: recorder.cancel())
    executor = ManualExecutor()
    publisher = _publisher(core, executor)
    publisher.subscribe(recorder)
    executor.run_all()
    for item in range(3):
        publisher.submit(item)
    subscription = _subscription(publisher)
    recorder.request(3)
    executor.run_all()
    assert recorder.items == [0]
    assert subscription.is_closed
    assert subscription.delivered == 1
    publisher.close()


def test_snapshot_counters_are_read_only(core: Core) -> None:
    executor = ManualExecutor()
    publisher = _publisher(core, executor)
    publisher.subscribe(Recorder())
    subscription = _subscription(publisher)
    with pytest.raises(AttributeError):
        subscription.delivered = 5
    with pytest.raises(AttributeError):
        subscription.dropped = 5
    publisher.close()
    executor.run_all()


def test_snapshot_delivered_after_completion_and_closed_publisher(core: Core) -> None:
    executor = ManualExecutor()
    publisher = _publisher(core, executor)
    recorder = Recorder(initial=10)
    publisher.subscribe(recorder)
    for item in range(3):
        publisher.submit(item)
    subscription = _subscription(publisher)
    publisher.close()
    assert publisher.snapshot() == PublisherSnapshot(True, 4, ())
    executor.run_all()
    assert recorder.completed
    assert subscription.delivered == 3
    assert subscription.readings() == (0, 7, 3, 0)


def test_snapshot_does_not_wait_for_the_producers_lock(core: Core) -> None:
    executor = ManualExecutor()
    publisher = _publisher(core, executor)
    recorder = Recorder()
    publisher.subscribe(recorder)
    executor.run_all()
    publisher.submit(1)
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with publisher._lock:  # as a producer does for a whole submit
            held.set()
            release.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert held.wait(10)
        assert _only(publisher.snapshot()).buffered == 1
    finally:
        release.set()
        holder.join(10)
    publisher.close()


def test_snapshot_is_frozen_and_slotted(core: Core) -> None:
    publisher = _publisher(core, ManualExecutor())
    snapshot = publisher.snapshot()
    assert isinstance(publisher, SupportsSnapshot)
    with pytest.raises(dataclasses.FrozenInstanceError):
        snapshot.closed = True  # type: ignore[misc]
    assert not hasattr(snapshot, "__dict__")
    assert not hasattr(SubscriberSnapshot(None, 0, 0, 0, 0, 0), "__dict__")
    publisher.close()


def test_snapshot_of_an_empty_publisher_has_neutral_estimates(core: Core) -> None:
    publisher = _publisher(core, ManualExecutor())
    snapshot = publisher.snapshot()
    assert (snapshot.number_of_subscribers, snapshot.maximum_lag, snapshot.minimum_demand) == (0, 0, 0)
    publisher.close()


def test_transform_processor_snapshot_shows_its_subscribers_buffers() -> None:
    executor = ManualExecutor()
    processor: TransformProcessor[int, int] = TransformProcessor(lambda x: x * 10, executor=executor)
    source: SubmissionPublisher[int] = SubmissionPublisher(executor=direct_executor, max_buffer_capacity=4)
    source.subscribe(processor)
    recorder = Recorder()
    processor.subscribe(recorder)
    executor.run_all()
    source.submit(1)
    executor.run_all()
    reading = _only(processor.snapshot())
    assert (reading.subscriber, reading.buffered, reading.demand, reading.delivered) == (recorder, 1, 0, 0)
    processor.close()
    source.close()


# --- MulticastProcessor ----------------------------------------------------------


class _Upstream(Subscription):
    def __init__(self) -> None:
        self.requested = 0
        self.cancelled = False

    def request(self, n: int) -> None:
        self.requested += n

    def cancel(self) -> None:
        self.cancelled = True


def test_multicast_snapshot_shows_the_shared_queue_per_subscriber() -> None:
    processor: MulticastProcessor[int] = MulticastProcessor(prefetch=4)
    slow, fast = Recorder(), Recorder(initial=MAX_DEMAND)
    processor.subscribe(slow)
    processor.subscribe(fast)
    processor.on_subscribe(_Upstream())
    for item in range(3):
        processor.on_next(item)
    readings = {reading.subscriber: reading for reading in processor.snapshot().subscribers}
    assert readings[slow] == SubscriberSnapshot(slow, 3, 4, 0, 0, 0)
    assert readings[fast] == SubscriberSnapshot(fast, 3, 4, MAX_DEMAND, 0, 0)
    slow.request(2)
    readings = {reading.subscriber: reading for reading in processor.snapshot().subscribers}
    assert readings[slow] == SubscriberSnapshot(slow, 1, 4, 0, 2, 0)
    assert readings[fast] == SubscriberSnapshot(fast, 1, 4, MAX_DEMAND, 2, 0)
    assert not processor.snapshot().closed


def test_multicast_snapshot_after_termination_is_closed_and_empty() -> None:
    processor: MulticastProcessor[int] = MulticastProcessor(prefetch=4)
    recorder = Recorder(initial=1)
    processor.subscribe(recorder)
    processor.on_subscribe(_Upstream())
    processor.on_next(1)
    processor.on_complete()
    assert recorder.completed
    assert processor.snapshot() == PublisherSnapshot(True, 4, ())


# --- Under concurrency ------------------------------------------------------------


class _Requested(Recorder):
    """A Recorder that says when its initial request has been made."""

    def __init__(self, initial: int) -> None:
        super().__init__(initial)
        self.requested_all = threading.Event()

    def on_subscribe(self, subscription: Subscription) -> None:
        super().on_subscribe(subscription)
        self.requested_all.set()


@pytest.mark.timeout(60)
@pytest.mark.usefixtures("tiny_switch_interval")
def test_snapshot_counters_under_concurrent_delivery_add_up(core: Core) -> None:
    items = 20_000
    pool = DaemonThreadPool(2, thread_name_prefix="snapshots")
    try:
        publisher: SubmissionPublisher[int] = core.SubmissionPublisher(executor=pool, max_buffer_capacity=16)
        recorder = _Requested(initial=MAX_DEMAND)
        publisher.subscribe(recorder)
        assert recorder.requested_all.wait(30)  # every snapshot below sees the unbounded demand
        subscription = _subscription(publisher)
        drops = 0
        readings: list[SubscriberSnapshot] = []
        for item in range(items):
            status = publisher.offer(item)
            if status < 0:
                drops -= status
            if item % 64 == 0:
                readings.extend(publisher.snapshot().subscribers)
        publisher.close()
        assert recorder.done.wait(30)
        assert subscription.dropped == drops
        assert subscription.delivered == len(recorder.items) == items - drops
        delivered = [reading.delivered for reading in readings]
        assert delivered == sorted(delivered)  # one writer, counted forward only
        for reading in readings:
            assert 0 <= reading.buffered <= 16
            assert reading.demand == MAX_DEMAND
            assert reading.delivered + reading.buffered + reading.dropped <= items
    finally:
        pool.shutdown()
