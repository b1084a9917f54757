"""``buffer(count)``: emit the items in lists of ``count``."""

from __future__ import annotations

from typing import Any, Generic, TypeVar

from flowpy._demand import MAX_DEMAND, check_request
from flowpy.flow import Publisher, Subscriber, Subscription
from flowpy.operators._base import require_positive, require_publisher, require_subscriber

__all__ = ["buffer"]

T = TypeVar("T")


class _BufferSubscriber(Subscriber[T], Subscription, Generic[T]):
    """Collects items into lists on the delivering thread; no queue, no lock."""

    __slots__ = ("_count", "_done", "_downstream", "_items", "_upstream")

    def __init__(self, downstream: Subscriber[list[T]], count: int) -> None:
        self._downstream = downstream
        self._count = count
        self._upstream: Subscription | None = None
        self._done = False  # ended: terminal passed on, cancelled or failed
        self._items: list[T] = []  # delivering thread only: the list being filled

    def on_subscribe(self, subscription: Subscription) -> None:
        if subscription is None:
            raise TypeError("subscription must not be None (rule 2.13)")
        if self._upstream is not None:
            subscription.cancel()  # rule 2.5
            return
        self._upstream = subscription
        self._downstream.on_subscribe(self)

    def on_next(self, item: T) -> None:
        if item is None:
            raise TypeError("on_next item must not be None (rule 2.13)")
        if self._done:
            return
        items = self._items
        items.append(item)
        if len(items) == self._count:
            self._items = []
            self._downstream.on_next(items)

    def on_error(self, error: BaseException) -> None:
        if error is None:
            raise TypeError("on_error error must not be None (rule 2.13)")
        if not self._done:
            self._done = True
            self._items = []
            self._downstream.on_error(error)

    def on_complete(self) -> None:
        if self._done:
            return
        self._done = True
        items, self._items = self._items, []
        if items:  # demand for it is open: fewer than the count*n requested items came
            self._downstream.on_next(items)
        self._downstream.on_complete()

    def request(self, n: int) -> None:
        """Ask upstream for ``n * count`` items (capped at ``2**63 - 1``); an invalid ``n`` goes up as is."""
        upstream = self._upstream
        if self._done or upstream is None:
            return
        if check_request(n) is None:
            n = min(n * self._count, MAX_DEMAND)
        upstream.request(n)

    def cancel(self) -> None:
        """Cancel upstream; idempotent (rules 3.5, 3.7)."""
        if not self._done:
            self._done = True
            if self._upstream is not None:
                self._upstream.cancel()


class _BufferPublisher(Publisher[list[Any]]):
    __slots__ = ("_count", "_source")

    def __init__(self, source: Publisher[Any], count: int) -> None:
        self._source = source
        self._count = count

    def subscribe(self, subscriber: Subscriber[list[Any]]) -> None:
        require_subscriber(subscriber)
        self._source.subscribe(_BufferSubscriber(subscriber, self._count))


def buffer(source: Publisher[T], count: int) -> Publisher[list[T]]:
    """Emit the items of ``source`` in lists of ``count``; the last list may be shorter::

        source:  --1--2--3--4--5--|
        buffer(2)
        result:  -----[1,2]-[3,4]-[5]|

    Demand: ``request(n)`` asks ``source`` for ``n * count`` items.

    Raises:
        TypeError: if ``source`` is not a publisher or ``count`` is not an int.
        ValueError: if ``count`` is not positive.
    """
    require_publisher(source, "source")
    require_positive(count, "count")
    return _BufferPublisher(source, count)
