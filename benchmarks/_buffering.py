"""Workloads for the operators that hold items, under a subscriber that asks for one item at a time.

Each operator states how much it may hold (docs/operators.md, "Demand
contract"): ``take_last(n)`` its last ``n`` items, ``concat_map`` its
``prefetch`` source items, ``switch_map`` the current inner's queue,
``combine_latest`` ``prefetch`` rows per source, ``on_backpressure_latest``
one item, ``replay(256)`` 256 items behind its fastest subscriber,
``group_by`` ``prefetch`` items in all its groups. Streamed through them, ``N`` fresh items must leave the footprint
flat (benchmarks/_leaks.py measures it). Used by
tests/operators/test_buffering_memory.py (bounded sizes) and
benchmarks/memory.py (10 million items).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from flowpy.flow import Publisher, Subscriber, Subscription
from flowpy.flowable import Flowable

__all__ = ["WORKLOADS", "Trickle"]

_FIRST = 1_000_000  # items from here on are not CPython's cached small ints: each one is allocated


class Trickle(Subscriber[Any]):
    """The slowest subscriber there is: requests one item, then one more after each."""

    def __init__(self) -> None:
        self.count = 0
        self.done = threading.Event()
        self.subscription: Subscription | None = None

    def on_subscribe(self, subscription: Subscription) -> None:
        self.subscription = subscription
        subscription.request(1)

    def on_next(self, item: Any) -> None:
        self.count += 1
        assert self.subscription is not None
        self.subscription.request(1)

    def on_error(self, error: BaseException) -> None:
        self.done.set()
        raise error

    def on_complete(self) -> None:
        self.done.set()


def _run(publisher: Publisher[Any]) -> int:
    subscriber = Trickle()
    publisher.subscribe(subscriber)
    if not subscriber.done.wait(600):
        raise RuntimeError("the stream did not complete")
    return subscriber.count


def take_last(items: int) -> int:
    """``items`` items into ``take_last(256)``; returns the 256 delivered."""
    return _run(Flowable.range(_FIRST, items).take_last(256))


def concat_map(items: int) -> int:
    """``items`` items, each mapped to a one-item publisher; returns the items delivered."""
    return _run(Flowable.range(_FIRST, items).concat_map(Flowable.just))


def switch_map(items: int) -> int:
    """``items // 100`` items, each switched to a publisher of 100; returns the items delivered."""
    return _run(Flowable.range(_FIRST, items // 100).switch_map(lambda x: Flowable.range(x, 100)))


def combine_latest(items: int) -> int:
    """``items`` items combined with one constant; returns the rows delivered."""
    return _run(Flowable.combine_latest(Flowable.just(0), Flowable.range(_FIRST, items)))


def retry(items: int) -> int:
    """``items // 10`` subscriptions of 10 items each, every one failing at the end; returns the items delivered."""
    attempt = Flowable.range(_FIRST, 10).concat_with(Flowable.error(RuntimeError("again")))
    return _run(attempt.retry(items // 10 - 1).on_error_return(lambda error: -1)) - 1


# --- Grouping, sharing, parallel ---


class _Unbounded(Subscriber[Any]):
    """The fastest subscriber there is: requests everything and drops it."""

    def on_subscribe(self, subscription: Subscription) -> None:
        subscription.request(2**63 - 1)

    def on_next(self, item: Any) -> None:
        return None

    def on_error(self, error: BaseException) -> None:
        raise error

    def on_complete(self) -> None:
        return None


class _ReplayedBesideAFastOne(Publisher[Any]):
    """``replay(256)`` of ``items`` items, with an unbounded subscriber already on it; connects on subscribe."""

    def __init__(self, items: int) -> None:
        self._replayed = Flowable.range(_FIRST, items).replay(256)
        self._replayed.subscribe(_Unbounded())

    def subscribe(self, subscriber: Subscriber[Any]) -> None:
        self._replayed.subscribe(subscriber)
        self._replayed.connect()


def through_trickle(publisher: Publisher[Any]) -> int:
    """Stream ``publisher`` into a :class:`Trickle`; return the items it received."""
    return _run(publisher)


def replayed(items: int) -> Publisher[Any]:
    """``replay(256)`` of ``items`` items beside a fast subscriber: the slow one paces it 256 items behind."""
    return _ReplayedBesideAFastOne(items)


def grouped(items: int) -> Publisher[Any]:
    """``items`` items split into 100 groups by ``group_by``, merged back by ``flat_map``."""
    return Flowable.range(_FIRST, items).group_by(lambda x: x % 100).flat_map(lambda g: g, max_concurrency=100)


WORKLOADS: list[tuple[str, Callable[[int], int]]] = [
    ("take_last(256)", take_last),
    ("concat_map(just), prefetch 2", concat_map),
    ("switch_map to 100 items each", switch_map),
    ("combine_latest(just(0), range)", combine_latest),
    ("retry, 10 items per subscription", retry),
    ("replay(256) beside a fast subscriber", lambda items: through_trickle(replayed(items))),
    ("group_by(x % 100).flat_map(group)", lambda items: through_trickle(grouped(items))),
]
"""(name, workload(items) -> items delivered), for the tables of benchmarks/memory.py."""
