"""Workloads for the buffering time operators with a slow subscriber: memory must stay flat.

Each pushes ``items`` fresh int objects through one operator (on the default
scheduler, with timers of a millisecond, so they fire throughout the run)
into a subscriber that asks for few items at a time and spends a few
microseconds on each: it is always behind. (Through ``delay``, it asks for
1,024 at a time: one at a time would let one item through per delay, by
the definition of demand.) An operator that held what the
subscriber has not taken, beyond its documented bound, would grow with
``items``. Used by benchmarks/memory.py (10 million items) and
tests/operators/test_time_memory.py (bounded sizes).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from flowpy.flow import Publisher, Subscriber, Subscription
from flowpy.flowable import Flowable
from flowpy.sources import RangePublisher

__all__ = ["WORKLOADS", "SlowSubscriber", "run"]

FIRST = 1_000_000  # not the cached small ints: each item is allocated


class SlowSubscriber(Subscriber[Any]):
    """Requests ``batch`` items at a time and spends ``work`` seconds on each (a busy wait, no sleep)."""

    def __init__(self, batch: int = 1, work: float = 5e-6) -> None:
        self.batch = batch
        self.work = work
        self.count = 0
        self.error: BaseException | None = None
        self.done = threading.Event()
        self.subscription: Subscription | None = None

    def on_subscribe(self, subscription: Subscription) -> None:
        self.subscription = subscription
        subscription.request(self.batch)

    def on_next(self, item: Any) -> None:
        self.count += 1
        if isinstance(item, Flowable):
            item.subscribe(lambda _: None)  # take the window's items, at once
        deadline = time.perf_counter() + self.work
        while time.perf_counter() < deadline:
            pass
        if self.count % self.batch == 0:  # the whole batch was taken: ask for the next
            assert self.subscription is not None
            self.subscription.request(self.batch)

    def on_error(self, error: BaseException) -> None:
        self.error = error
        self.done.set()

    def on_complete(self) -> None:
        self.done.set()


def _source(items: int) -> Flowable[int]:
    return Flowable(RangePublisher(FIRST, items))


WORKLOADS: dict[str, tuple[Callable[[int], Publisher[Any]], int]] = {
    "delay(0.001, prefetch=1024)": (lambda n: _source(n).delay(0.001, prefetch=1024), 1024),
    "debounce(0.001).on_backpressure_latest()": (lambda n: _source(n).debounce(0.001).on_backpressure_latest(), 1),
    "sample(0.001).on_backpressure_latest()": (lambda n: _source(n).sample(0.001).on_backpressure_latest(), 1),
    "buffer_with_time(0.001, 1000).on_backpressure_latest()": (
        lambda n: _source(n).buffer_with_time(0.001, 1000).on_backpressure_latest(),
        1,
    ),
    "window_with_count(1000), one window at a time": (lambda n: _source(n).window_with_count(1000), 1),
    "window_with_time(0.001, 1000).on_backpressure_drop()": (
        lambda n: _source(n).window_with_time(0.001, 1000).on_backpressure_drop(),
        1,
    ),
}
"""Each: the pipeline for ``n`` items, and how many items the slow subscriber asks for at a time."""


def run(name: str, items: int, work: float = 5e-6) -> int:
    """Run the workload ``name`` to its end; return what the slow subscriber received."""
    build, batch = WORKLOADS[name]
    subscriber = SlowSubscriber(batch, work)
    build(items).subscribe(subscriber)
    if not subscriber.done.wait(1200):
        raise RuntimeError(f"{name} did not end")
    if subscriber.error is not None:
        raise RuntimeError(f"{name} failed: {subscriber.error!r}") from subscriber.error
    return subscriber.count
