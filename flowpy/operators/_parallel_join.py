"""``reduce`` and ``sorted`` of a :class:`~flowpy.operators._parallel.ParallelPublisher`.

Both collect each rail on the rail's own thread (the fold of ``reduce``, the
list and its sort of ``sorted``: the work that runs in parallel), then,
when the last rail has completed, combine the rails' results into one
publisher: the fold of the rails' values for ``reduce``, a k-way merge of
the sorted lists for ``sorted``. The combined items are delivered as the
subscriber requests them (:class:`~flowpy._core.pull.PullSubscription`).

Threading:  each rail's items are folded where that rail delivers; the
            rails' results are combined on the thread whose rail completed
            last; the subscriber is signalled from a serial drain on the
            thread that made progress possible, in the context it
            subscribed in.
"""

from __future__ import annotations

import functools
import heapq
import threading
from collections.abc import Callable, Iterator
from typing import Any, Final, Generic, TypeVar

from flowpy._checks import none_error, require, require_callable, require_callable_or_none
from flowpy._core.pull import EMPTY, END, Pulled, PullSubscription
from flowpy._core.sentinels import Sentinel
from flowpy._core.upstream import UpstreamSlot
from flowpy._demand import MAX_DEMAND
from flowpy._signals import reraise_fatal
from flowpy.executors import direct_executor
from flowpy.flow import Publisher, Subscriber, Subscription
from flowpy.operators._base import StagePublisher
from flowpy.operators._parallel import ParallelPublisher

__all__ = ["reduce_rails", "sorted_rails"]

T = TypeVar("T")
A = TypeVar("A")

_NOTHING: Final = Sentinel("NOTHING")
"""A rail that had no item, and the empty look-ahead."""


class _Collector(Subscriber[Any]):
    """Collects one rail: requests everything and folds each item into its accumulator, on the rail's thread."""

    __slots__ = ("_accumulator", "_done", "_index", "_join", "_slot")

    def __init__(self, join: _Join[Any, Any], index: int) -> None:
        self._join = join
        self._index = index
        self._accumulator = join.initial()  # touched only by this rail's signals, which are serial
        self._slot = UpstreamSlot()  # the rail's subscription (rule 2.5)
        self._done = False  # the rail ended here: later signals are ignored (rule 2.8)

    def on_subscribe(self, subscription: Subscription) -> None:
        """Keep the rail's subscription and request everything from it.

        Raises:
            TypeError: if ``subscription`` is ``None`` (rule 2.13).
        """
        if self._slot.accept(subscription):
            subscription.request(MAX_DEMAND)

    def on_next(self, item: Any) -> None:
        """Fold ``item`` into the rail's accumulator; a raising function fails the whole result.

        Raises:
            TypeError: if ``item`` is ``None`` (rule 2.13).
        """
        if item is None:
            raise none_error("item", "2.13")
        if self._done:
            return
        try:
            self._accumulator = self._join.step(self._accumulator, item)
        except BaseException as error:
            self._done = True
            self._slot.cancel()
            self._join.fail(error)
            reraise_fatal(error)

    def on_error(self, error: BaseException) -> None:
        """Fail the whole result with the rail's error.

        Raises:
            TypeError: if ``error`` is ``None`` (rule 2.13).
        """
        require(error, "error", "2.13")
        if not self._done:
            self._done = True
            self._join.fail(error)

    def on_complete(self) -> None:
        """Finish the rail's accumulator (on this thread) and hand it to the join."""
        if self._done:
            return
        self._done = True
        try:
            result = self._join.finish(self._accumulator)
        except BaseException as error:
            self._join.fail(error)
            reraise_fatal(error)
            return
        self._join.rail_done(self._index, result)

    def cancel(self) -> None:
        """Cancel the rail."""
        self._done = True
        self._slot.cancel()


class _Join(PullSubscription[T], Generic[T, A]):
    """The subscriber's subscription: delivers the rails' combined results once every rail completed."""

    def __init__(
        self,
        subscriber: Subscriber[T],
        rails: int,
        initial: Callable[[], A],
        step: Callable[[A, Any], A],
        finish: Callable[[A], A],
        combine: Callable[[list[A]], Iterator[T]],
    ) -> None:
        super().__init__(subscriber, direct_executor.execute)
        self.initial = initial  # makes a rail's first accumulator
        self.step = step  # folds one item into a rail's accumulator, on the rail's thread
        self.finish = finish  # finishes a rail's accumulator, on the rail's thread
        self._combine = combine  # the rails' results, in rail order, to the items to emit
        self._state_lock = threading.Lock()
        # --- Guarded by self._state_lock ---------------------------------------
        self._results: list[Any] = [_NOTHING] * rails
        self._remaining = rails  # rails not yet completed
        self._error: BaseException | None = None  # the first failure
        # Set once by the thread that completed the last rail, before it signals the drain.
        self._output: Iterator[T] | None = None
        # --- Drain only -------------------------------------------------------------
        self._peeked: Any = _NOTHING  # one item read ahead by _at_end()
        self.collectors = [_Collector(self, index) for index in range(rails)]

    def rail_done(self, index: int, result: A) -> None:
        """Record rail ``index``'s result; the last rail combines them all and lets the drain deliver."""
        with self._state_lock:
            self._results[index] = result
            self._remaining -= 1
            last = self._remaining == 0 and self._error is None
        if not last:
            return
        try:
            self._output = self._combine(self._results)
        except BaseException as error:
            self.fail(error)
            reraise_fatal(error)
            return
        self.signal()

    def fail(self, error: BaseException) -> None:
        """Record the first failure, cancel every rail, and let the drain signal it."""
        with self._state_lock:
            first = self._error is None
            if first:
                self._error = error
        if first:
            self._cancel_rails()
            self.signal()

    def _cancel_rails(self) -> None:
        for collector in self.collectors:
            collector.cancel()

    # --- PullSubscription --------------------------------------------------------

    def _failure(self) -> BaseException | None:
        return self._error

    def _next(self) -> Pulled[T]:
        item = self._peeked
        if item is not _NOTHING:
            self._peeked = _NOTHING
            return item  # type: ignore[no-any-return]
        output = self._output
        if output is None:
            return EMPTY
        return next(output, END)

    def _at_end(self) -> bool:
        output = self._output
        if output is None:
            return False
        if self._peeked is _NOTHING:
            self._peeked = next(output, END)
        return self._peeked is END

    def _release(self) -> None:
        self._cancel_rails()


def _join(
    rails: ParallelPublisher[Any],
    name: str,
    initial: Callable[[], A],
    step: Callable[[A, Any], A],
    finish: Callable[[A], A],
    combine: Callable[[list[A]], Iterator[T]],
) -> Publisher[T]:
    if not isinstance(rails, ParallelPublisher):
        raise TypeError(f"rails must be a ParallelPublisher, got {rails!r}")
    count = rails.rails

    def connect(subscriber: Subscriber[T]) -> None:
        join: _Join[T, A] = _Join(subscriber, count, initial, step, finish, combine)
        join.start()  # delivers on_subscribe
        if not join.cancelled:
            rails.subscribe(join.collectors)

    return StagePublisher(name, connect)


def reduce_rails(rails: ParallelPublisher[T], fn: Callable[[T, T], T]) -> Publisher[T]:
    """Fold each rail with ``fn``, then fold the rails' values with ``fn``: one item, or none if there were none::

        rail 0:  --1-----3--|
        rail 1:  -----2-----4--|
        result:  ---------------10|      (fn = add: (1 + 3) + (2 + 4))

    Demand: every rail is asked for everything (each rail's fold runs where
    the rail delivers: with ``run_on``, on its own executor task); the one
    item is delivered when the subscriber has requested it. The rails'
    values are combined in rail order. Buffers one value per rail. The
    first error (a rail's, or ``fn`` raising) cancels every rail and is
    signalled at once.

    Raises:
        TypeError: if ``fn`` is not callable.
    """
    require_callable(fn, "fn")

    def step(accumulator: Any, item: T) -> Any:
        return item if accumulator is _NOTHING else fn(accumulator, item)

    def combine(results: list[Any]) -> Iterator[T]:
        values = [value for value in results if value is not _NOTHING]
        if not values:
            return iter(())
        total = functools.reduce(fn, values)
        if total is None:
            raise TypeError(f"parallel reduce's fn must not return None (rule 2.13), got None from {fn!r}")
        return iter((total,))

    return _join(rails, "parallel reduce", lambda: _NOTHING, step, lambda value: value, combine)


def sorted_rails(
    rails: ParallelPublisher[T], key: Callable[[T], Any] | None = None, *, reverse: bool = False
) -> Publisher[T]:
    """Sort each rail on its own thread, then merge the sorted rails into one sorted publisher::

        rail 0:  --5-----1--|
        rail 1:  -----4-----2--|
        result:  ---------------1-2-4-5|

    Demand: every rail is asked for everything and kept in a list, which is
    sorted with ``key`` and ``reverse`` as :func:`sorted` does, where the
    rail delivers; the merge (:func:`heapq.merge`) then yields items as the
    subscriber requests them. Buffers every item (sorting needs them all).
    Items with equal keys come out in rail order, not source order. The
    first error (a rail's, or ``key`` raising) cancels every rail and is
    signalled at once.

    Raises:
        TypeError: if ``key`` is neither ``None`` nor callable.
    """
    require_callable_or_none(key, "key")

    def add(items: list[T], item: T) -> list[T]:
        items.append(item)
        return items

    def finish(items: list[T]) -> list[T]:
        items.sort(key=key, reverse=reverse)
        return items

    def combine(results: list[list[T]]) -> Iterator[T]:
        return heapq.merge(*results, key=key, reverse=reverse)  # type: ignore[arg-type]  # key as sorted() takes it

    return _join(rails, "parallel sorted", list, add, finish, combine)
