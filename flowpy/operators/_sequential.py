"""One publisher after another: ``concat_map``, ``start_with``, ``repeat`` and ``default_if_empty``.

Each is a :class:`~flowpy.operators._sequence.SequenceStage`: the
subscriber's demand goes to the publisher subscribed now, and what it did
not meet goes to the next one. Items go straight through, with no queue;
only ``concat_map`` queues source items (at most ``prefetch``) waiting for
their turn to be mapped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from flowpy._checks import require_callable, require_non_negative_int, require_positive_int, require_publisher
from flowpy.flow import Publisher, Subscriber
from flowpy.operators._base import StagePublisher
from flowpy.operators._queue import QueueSubscriber
from flowpy.operators._sequence import SequenceStage
from flowpy.sources import empty, just

__all__ = ["concat_map", "default_if_empty", "repeat", "start_with"]

T = TypeVar("T")
R = TypeVar("R")


# --- concat_map -------------------------------------------------------------------


class _ConcatMap(SequenceStage):
    """Maps queued source items to publishers, one at a time, when the previous one completed.

    It is the parent of the :class:`QueueSubscriber` that queues the source's
    items (:class:`~flowpy.operators._queue.QueueParent`); its loop is the
    only reader of that queue.
    """

    __slots__ = ("_fn", "_source", "outer")

    draining = False  # the loop does not re-read the queue on its own: every source item signals it

    def __init__(
        self, downstream: Subscriber[Any], source: Publisher[Any], fn: Callable[[Any], Publisher[Any]], prefetch: int
    ) -> None:
        super().__init__(downstream)
        self._source = source
        self._fn = fn
        self.outer = QueueSubscriber(self, prefetch, "concat_map's source")

    def _started(self) -> None:
        self._source.subscribe(self.outer)

    def _signal(self) -> None:
        self._resume()

    def fail(self, error: BaseException) -> None:
        """The source failed (or sent more than requested): end the stream at once."""
        self._terminate(error)

    def _next_publisher(self) -> Publisher[Any] | None:
        outer = self.outer
        done = outer.done  # read before the queue: no item follows it
        if outer.queue:
            ok, publisher = self._guard(self._map, outer.poll())
            return publisher if ok else None
        if done:
            self._terminate(None)
        return None

    def _map(self, item: Any) -> Publisher[Any]:
        publisher = self._fn(item)
        require_publisher(publisher, "concat_map function result")
        return publisher

    def _ended(self, error: BaseException | None, produced: int) -> None:
        if error is not None:
            self._terminate(error)
        else:
            self._resume()

    def _release(self) -> None:
        self.outer.stop()


def concat_map(source: Publisher[T], fn: Callable[[T], Publisher[R]], prefetch: int = 2) -> Publisher[R]:
    """Map each item to a publisher and emit their items in order, one publisher at a time::

        source:   --a-----b----------|
        inner a:    --1--2|
        inner b:          --3--4|
        result:   ----1--2--3--4-----|

    The next item is mapped (``fn`` called) only when the previous
    publisher has completed, as RxJava's ``concatMap``.

    Demand: asks ``source`` for ``prefetch`` items (2 by default) and for
    75 % of that again as they are mapped, so at most ``prefetch`` source
    items wait. The subscriber's requests go straight to the current inner
    publisher, whose items go straight through (no queue); what it did not
    deliver is requested from the next one. An error from ``source``, an
    inner publisher or ``fn`` (or ``fn`` returning something that is not a
    publisher) cancels the rest and is signalled at once.

    Raises:
        TypeError: if ``source`` is not a publisher, ``fn`` is not callable or
            ``prefetch`` is not an int.
        ValueError: if ``prefetch`` is not positive.
    """
    require_publisher(source, "source")
    require_callable(fn, "fn")
    require_positive_int(prefetch, "prefetch")
    return StagePublisher("concat_map", lambda subscriber: _ConcatMap(subscriber, source, fn, prefetch).start())


# --- start_with ----------------------------------------------------------------


class _Concat(SequenceStage):
    """Subscribes the publishers of an iterator in turn; the first error ends the stream."""

    __slots__ = ("_publishers",)

    def __init__(self, downstream: Subscriber[Any], publishers: Iterator[Publisher[Any]]) -> None:
        super().__init__(downstream)
        self._publishers = publishers

    def _next_publisher(self) -> Publisher[Any] | None:
        publisher = next(self._publishers, None)
        if publisher is None:
            self._terminate(None)
        return publisher

    def _ended(self, error: BaseException | None, produced: int) -> None:
        if error is not None:
            self._terminate(error)
        else:
            self._resume()


def start_with(source: Publisher[T], *items: T) -> Publisher[T]:
    """Emit ``items`` first, then the items of ``source``::

        source:  -----3--4--|
        start_with(1, 2)
        result:  1-2--3--4--|

    ``source`` is subscribed once the items have been delivered (RxJava's
    ``startWithArray``: ``concat(just(*items), source)``). With no items, it
    is ``source`` itself.

    Demand: passed through; the items wait for demand, and what is left of
    it goes to ``source``. Nothing is buffered besides ``items``.

    Raises:
        TypeError: if ``source`` is not a publisher or an item is ``None`` (rule 2.13).
    """
    require_publisher(source, "source")
    if not items:
        return source
    first = just(*items)
    return StagePublisher("start_with", lambda subscriber: _Concat(subscriber, iter((first, source))).start())


# --- repeat --------------------------------------------------------------------


class _Repeat(SequenceStage):
    __slots__ = ("_remaining", "_source")

    def __init__(self, downstream: Subscriber[Any], source: Publisher[Any], times: int | None) -> None:
        super().__init__(downstream)
        self._source = source
        self._pending = source
        self._remaining = None if times is None else times - 1  # subscriptions left after this one

    def _ended(self, error: BaseException | None, produced: int) -> None:
        remaining = self._remaining
        if error is not None or remaining == 0:
            self._terminate(error)
            return
        if remaining is not None:
            self._remaining = remaining - 1
        self._pending = self._source
        self._resume()


def repeat(source: Publisher[T], times: int | None = None) -> Publisher[T]:
    """Subscribe to ``source`` again each time it completes: ``times`` subscriptions in all (``None``: forever)::

        source:  --1--2|
        repeat(3)
        result:  --1--2--1--2--1--2|

    As RxJava's ``repeat(n)``: ``repeat(1)`` is the source once, ``repeat(0)``
    completes at once without subscribing. An error is passed on and ends
    the repetition. Resubscription is trampolined: a synchronous source that
    completes at once can be repeated a million times in constant stack.

    Demand: the subscriber's requests go to the current subscription; what
    it did not meet goes to the next. Nothing is buffered.

    Raises:
        TypeError: if ``source`` is not a publisher or ``times`` is not an int or ``None``.
        ValueError: if ``times`` is negative.
    """
    require_publisher(source, "source")
    if times is not None:
        require_non_negative_int(times, "times")
        if times == 0:
            return empty()
    return StagePublisher("repeat", lambda subscriber: _Repeat(subscriber, source, times).start())


# --- default_if_empty ------------------------------------------------------------


class _DefaultIfEmpty(SequenceStage):
    __slots__ = ("_default",)

    def __init__(self, downstream: Subscriber[Any], source: Publisher[Any], default: Publisher[Any]) -> None:
        super().__init__(downstream)
        self._pending = source
        self._default: Publisher[Any] | None = default  # None once used

    def _ended(self, error: BaseException | None, produced: int) -> None:
        default = self._default
        if error is not None or produced or default is None:
            self._terminate(error)
            return
        self._default = None
        self._pending = default
        self._resume()


def default_if_empty(source: Publisher[T], item: T) -> Publisher[T]:
    """Emit ``item`` if ``source`` completes without emitting anything::

        source:  -----|
        default_if_empty(0)
        result:  -----0|

    Demand: passed through; ``item`` waits for the subscriber's demand (one
    item held at most). An error is passed on as it is.

    Raises:
        TypeError: if ``source`` is not a publisher or ``item`` is ``None`` (rule 2.13).
    """
    require_publisher(source, "source")
    if item is None:
        raise TypeError("item must not be None (rule 2.13)")
    default = just(item)
    return StagePublisher("default_if_empty", lambda subscriber: _DefaultIfEmpty(subscriber, source, default).start())
