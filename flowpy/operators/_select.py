"""Parts of a stream: ``take_until``, ``take_last``, ``last``, ``element_at``, ``first`` and ``ignore_elements``.

``first`` and ``element_at`` are fused compositions of ``skip`` and
``take``, so they request no more than they need; ``take_last`` and
``last`` must see the end of the stream, so they request everything and
keep the last ``n`` items; ``ignore_elements`` requests everything and keeps
nothing; ``take_until`` passes the stream through until a second publisher
signals.
"""

from __future__ import annotations

from collections import deque
from typing import Any, TypeVar

from flowpy._checks import none_error, require_non_negative_int, require_publisher
from flowpy._demand import MAX_DEMAND
from flowpy.flow import Publisher, Subscriber
from flowpy.operators._base import Relay, StagePublisher
from flowpy.operators._queue import HeadSubscriber, QueueDrain
from flowpy.operators._sequence import Companion, SequenceStage
from flowpy.operators._take import skip, take

__all__ = ["element_at", "first", "ignore_elements", "last", "take_last", "take_until"]

T = TypeVar("T")


# --- take_until -------------------------------------------------------------------


class _TakeUntil(SequenceStage):
    """The source as one attempt; the first signal of ``other`` ends the stream."""

    __slots__ = ("_other", "_other_publisher")

    def __init__(self, downstream: Subscriber[Any], source: Publisher[Any], other: Publisher[Any]) -> None:
        super().__init__(downstream)
        self._pending = source
        self._other_publisher = other
        self._other = Companion(lambda item: self._terminate(None), self._terminate, lambda: self._terminate(None))

    def _started(self) -> None:
        self._other.request(MAX_DEMAND)
        self._other_publisher.subscribe(self._other)

    def _release(self) -> None:
        self._other.cancel()


def take_until(source: Publisher[T], other: Publisher[Any]) -> Publisher[T]:
    """Emit the items of ``source`` until ``other`` emits or completes; then cancel both and complete::

        source:  --1--2--3--4--5--|
        other:   ---------x
        take_until(other)
        result:  --1--2--3|

    ``other`` is subscribed first (with unbounded demand), so a signal it
    sends at once ends the stream before ``source`` is subscribed. An error
    from ``other`` cancels ``source`` and fails the stream; the end of
    ``source`` cancels ``other``. As RxJava 3, ``other`` completing without
    an item ends the stream too.

    Demand: passed through to ``source``; ``other`` is asked for everything.
    Nothing is buffered.

    Raises:
        TypeError: if ``source`` or ``other`` is not a publisher.
    """
    require_publisher(source, "source")
    require_publisher(other, "other")
    return StagePublisher("take_until", lambda subscriber: _TakeUntil(subscriber, source, other).start())


# --- take_last / last -----------------------------------------------------------------


class _LastItems(HeadSubscriber):
    """Requests everything; keeps the last ``count`` items and lets the drain deliver them after the end."""

    __slots__ = ()

    def __init__(self, parent: QueueDrain[Any], count: int) -> None:
        super().__init__(parent, count, "take_last's source")
        self.queue = deque(maxlen=count)  # evicts the oldest item by itself

    def start(self) -> None:
        """Ask for everything: only the end of the stream says which items are the last."""
        if self.subscription is not None and not self.parent.cancelled:
            self.subscription.request(MAX_DEMAND)

    def on_next(self, item: Any) -> None:
        """Keep ``item`` among the last ``count``; nothing goes downstream before the end.

        Raises:
            TypeError: if ``item`` is ``None`` (rule 2.13).
        """
        if item is None:
            raise none_error("item", "2.13")
        if not self.done:
            self.queue.append(item)  # the drain reads the queue only once done is set


class _TakeLast(QueueDrain[T]):
    __slots__ = ()

    def __init__(self, downstream: Subscriber[T], count: int) -> None:
        super().__init__(downstream)
        self.upstream = _LastItems(self, count)

    def _has_work(self) -> bool:
        return self.upstream.done and super()._has_work()

    def _drain(self) -> None:
        if self.upstream.done or self.cancelled or self._failure is not None:
            super()._drain()


def take_last(source: Publisher[T], count: int) -> Publisher[T]:
    """Emit the last ``count`` items of ``source`` once it completes::

        source:  --1--2--3--4--|
        take_last(2)
        result:  --------------3-4|

    Demand: requests everything from ``source`` and keeps its last
    ``count`` items (a ring of ``count``: memory is bounded by ``count``,
    whatever the length of the stream); after the completion, delivers them
    as the subscriber requests. An error is signalled at once and the kept
    items dropped (RxJava's ``takeLast``). ``take_last(0)`` keeps nothing.

    Raises:
        TypeError: if ``source`` is not a publisher or ``count`` is not an int.
        ValueError: if ``count`` is negative.
    """
    require_publisher(source, "source")
    require_non_negative_int(count, "count")

    def connect(subscriber: Subscriber[T]) -> None:
        stage: _TakeLast[T] = _TakeLast(subscriber, count)
        source.subscribe(stage.upstream)

    return StagePublisher("take_last", connect)


def last(source: Publisher[T]) -> Publisher[T]:
    """Emit the last item of ``source`` once it completes; nothing if it is empty::

        source:  --1--2--3--|
        last()
        result:  -----------3|

    ``take_last(source, 1)``: requests everything, keeps one item. As
    RxJava's ``lastElement``, an empty source completes empty; chain
    ``default_if_empty(item)`` for a default.

    Raises:
        TypeError: if ``source`` is not a publisher.
    """
    return take_last(source, 1)


# --- element_at / first -------------------------------------------------------------


def element_at(source: Publisher[T], index: int) -> Publisher[T]:
    """Emit only the item at ``index`` (0-based), then cancel ``source`` and complete::

        source:  --a--b--c--d--|
        element_at(2)
        result:  --------c|

    ``skip(index)`` then ``take(1)``, fused: the first request asks
    ``source`` for ``index + 1`` items, and no more; nothing is buffered. As RxJava's
    ``elementAt``, a source with fewer items completes empty; chain
    ``default_if_empty(item)`` for a default.

    Raises:
        TypeError: if ``source`` is not a publisher or ``index`` is not an int.
        ValueError: if ``index`` is negative.
    """
    require_publisher(source, "source")
    require_non_negative_int(index, "index")
    return take(skip(source, index), 1)


def first(source: Publisher[T]) -> Publisher[T]:
    """Emit the first item of ``source``, then cancel it and complete; nothing if it is empty::

        source:  --1--2--3--|
        first()
        result:  --1|

    ``take(1)``: requests one item, buffers none. As RxJava's ``firstElement``, an empty
    source completes empty; chain ``default_if_empty(item)`` for a default.

    Raises:
        TypeError: if ``source`` is not a publisher.
    """
    return take(source, 1)


# --- ignore_elements -------------------------------------------------------------------


class _IgnoreElements(Relay):
    """Requests everything, drops every item, passes the terminal signal on."""

    __slots__ = ()

    def _started(self) -> None:
        """The downstream has its subscription: request everything (rule 3.17)."""
        upstream = self.upstream
        assert upstream is not None  # set before the hand-off
        upstream.request(MAX_DEMAND)

    def on_next(self, item: Any) -> None:
        """Drop ``item``.

        Raises:
            TypeError: if ``item`` is ``None`` (rule 2.13).
        """
        if item is None:
            raise none_error("item", "2.13")

    def request(self, n: int) -> None:
        """Nothing to deliver; an invalid ``n`` still goes up, so that the source signals rule 3.9."""
        self._upstream_for(n)


def ignore_elements(source: Publisher[T]) -> Publisher[T]:
    """Drop every item; pass on only the completion or the error::

        source:  --1--2--3--|
        ignore_elements()
        result:  -----------|

    Demand: requests everything from ``source`` at once (the terminal signal
    needs no demand); the subscriber's requests are not needed. Nothing is
    buffered.

    Raises:
        TypeError: if ``source`` is not a publisher.
    """
    require_publisher(source, "source")
    return StagePublisher("ignore_elements", lambda subscriber: source.subscribe(_IgnoreElements(subscriber)))
