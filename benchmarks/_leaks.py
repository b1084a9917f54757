"""Workloads that would show a reference leak in the core, and how to measure one.

A reference count the core forgets to drop keeps objects alive: each leaked
item or subscriber stays allocated. So each workload runs once to warm up,
then again at full size between two :func:`footprint` readings; a leak shows
as growth proportional to the size (``sys.getallocatedblocks`` grows by at
least one block per leaked object, ``gc`` counts grow per leaked container,
resident memory by its bytes), while a correct core stays flat. Each
workload takes the SubmissionPublisher class it runs on (one of
``flowpy.submission.TWINS``). Used by tests/test_submission_leaks.py
(bounded sizes) and benchmarks/memory.py (10 million items, 200,000
subscribe/cancel cycles).
"""

from __future__ import annotations

import gc
import os
import sys
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from flowpy.executors import DaemonThreadPool, direct_executor
from flowpy.flow import Subscriber, Subscription
from flowpy.submission import SubmissionPublisher

__all__ = ["Footprint", "PublisherClass", "error_cycles", "footprint", "never_requesting", "stream", "subscribe_cancel"]

MAX = 2**63 - 1

PublisherClass = type[SubmissionPublisher[Any]]
"""The SubmissionPublisher class a workload runs on: one core's twin."""


@dataclass(frozen=True)
class Footprint:
    """What the process holds: resident memory, objects tracked by ``gc``, allocated blocks."""

    resident_mb: float
    gc_objects: int
    blocks: int

    def growth_since(self, before: Footprint) -> Footprint:
        return Footprint(
            self.resident_mb - before.resident_mb, self.gc_objects - before.gc_objects, self.blocks - before.blocks
        )


def resident_mb() -> float:
    """Current resident set size in MB (Linux /proc), 0.0 where there is none."""
    try:
        with open("/proc/self/statm") as statm:
            pages = int(statm.read().split()[1])
    except OSError:
        return 0.0
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def footprint() -> Footprint:
    """Collect garbage, then read the footprint."""
    gc.collect()
    return Footprint(resident_mb(), len(gc.get_objects()), sys.getallocatedblocks())


class Counter(Subscriber[Any]):
    """Requests ``initial`` (default unbounded) and counts items; ``done`` is set at the end."""

    def __init__(self, initial: int = MAX) -> None:
        self.initial = initial
        self.count = 0
        self.done = threading.Event()
        self.subscription: Subscription | None = None

    def on_subscribe(self, subscription: Subscription) -> None:
        self.subscription = subscription
        if self.initial:
            subscription.request(self.initial)

    def on_next(self, item: Any) -> None:
        self.count += 1

    def on_error(self, error: BaseException) -> None:
        self.done.set()

    def on_complete(self) -> None:
        self.done.set()


def stream(publisher_class: PublisherClass, items: int, pool: DaemonThreadPool) -> int:
    """``items`` fresh int objects from one producer to one subscriber on ``pool``; returns those delivered."""
    publisher: SubmissionPublisher[int] = publisher_class(pool, 256)
    counter = Counter()
    publisher.subscribe(counter)
    submit = publisher.submit
    for i in range(1_000_000, 1_000_000 + items):  # not the cached small ints: each item is allocated
        submit(i)
    publisher.close()
    if not counter.done.wait(600):
        raise RuntimeError("the stream did not complete")
    return counter.count


def subscribe_cancel(publisher_class: PublisherClass, cycles: int) -> int:
    """``cycles`` times: subscribe, deliver one item, buffer one, cancel. Returns the subscribers finalised."""
    publisher: SubmissionPublisher[int] = publisher_class(direct_executor, 4)
    finalised = [0]

    def count() -> None:
        finalised[0] += 1

    for i in range(cycles):
        counter = Counter(initial=1)
        weakref.finalize(counter, count)
        publisher.subscribe(counter)
        publisher.submit(1_000_000 + i)  # delivered
        publisher.submit(2_000_000 + i)  # buffered, dropped by the cancel
        assert counter.subscription is not None
        counter.subscription.cancel()
        del counter
    publisher.close()
    gc.collect()
    return finalised[0]


class NeverRequests(Subscriber[int]):
    def on_subscribe(self, subscription: Subscription) -> None:
        self.subscription = subscription

    def on_next(self, item: int) -> None:
        raise AssertionError("nothing was requested")

    def on_error(self, error: BaseException) -> None:
        raise AssertionError(error)

    def on_complete(self) -> None:
        return None


def never_requesting(publisher_class: PublisherClass, offers: int) -> int:
    """``offers`` offers to a subscriber that never requests (the buffer fills once); returns the drops."""
    publisher: SubmissionPublisher[int] = publisher_class(direct_executor, 256)
    publisher.subscribe(NeverRequests())
    offer = publisher.offer
    dropped = 0
    for i in range(1_000_000, 1_000_000 + offers):
        if offer(i) < 0:
            dropped += 1
    publisher.close()
    return dropped


class _Refusing:
    """An executor that runs tasks at once until ``refuse`` is set, then raises."""

    def __init__(self) -> None:
        self.refuse = False

    def execute(self, task: Callable[[], object]) -> None:
        if self.refuse:
            raise RuntimeError("refused")
        task()


def error_cycles(publisher_class: PublisherClass, cycles: int) -> int:
    """``cycles`` times through the error paths: on_next raising (with a handler), a refused task.

    Returns how many subscribers got ``on_error``.
    """
    errors = [0]

    class Failing(Counter):
        def on_next(self, item: Any) -> None:
            raise ValueError(f"bad item {item}")

        def on_error(self, error: BaseException) -> None:
            errors[0] += 1

    handled: list[int] = [0]

    def handler(subscriber: Any, error: BaseException) -> None:
        handled[0] += 1

    for i in range(cycles):
        publisher: SubmissionPublisher[int] = publisher_class(direct_executor, 4, handler)
        publisher.subscribe(Failing())
        publisher.submit(1_000_000 + i)
        executor = _Refusing()
        refused: SubmissionPublisher[int] = publisher_class(executor, 4)
        counter = Counter(initial=0)
        refused.subscribe(counter)
        executor.refuse = True
        assert counter.subscription is not None
        counter.subscription.request(1)  # refused: on_error with the executor's exception
        errors[0] += counter.done.is_set()
        publisher.close()
        refused.close()
    if handled[0] != cycles:
        raise AssertionError(f"handler ran {handled[0]} times for {cycles} failures")
    return errors[0]
