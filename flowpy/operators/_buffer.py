"""``buffer(count)``: emit the items in lists of ``count``.

Threading:  lists go downstream on the source's thread; there is no queue.
"""

from __future__ import annotations

from typing import Generic, TypeVar

from flowpy._checks import none_error, require_positive_int, require_publisher
from flowpy._demand import MAX_DEMAND
from flowpy.flow import Publisher, Subscriber
from flowpy.operators._base import Relay, StagePublisher

__all__ = ["buffer"]

T = TypeVar("T")


class _BufferSubscriber(Relay, Generic[T]):
    """Collects items into lists on the delivering thread; no queue, no lock."""

    __slots__ = ("_count", "_items")

    def __init__(self, downstream: Subscriber[list[T]], count: int) -> None:
        super().__init__(downstream)
        self._count = count
        self._items: list[T] = []  # delivering thread only: the list being filled

    def on_next(self, item: T) -> None:
        """Add ``item`` to the list; pass the list on when it holds ``count`` items.

        Raises:
            TypeError: if ``item`` is ``None`` (rule 2.13).
        """
        if item is None:
            raise none_error("item", "2.13")
        if self.done:
            return
        items = self._items
        items.append(item)
        if len(items) == self._count:
            self._items = []
            self._downstream.on_next(items)

    def on_complete(self) -> None:
        """Pass the last, shorter list on, if any, then complete."""
        items, self._items = self._items, []
        if items and not self.done:  # demand for it is open: fewer than count * n items came
            self._downstream.on_next(items)
        super().on_complete()

    def request(self, n: int) -> None:
        """Ask upstream for ``n * count`` items (capped at ``2**63 - 1``); an invalid ``n`` goes up as is."""
        upstream = self._upstream_for(n)
        if upstream is not None:
            upstream.request(min(n * self._count, MAX_DEMAND))


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
    require_positive_int(count, "count")
    return StagePublisher("buffer", lambda subscriber: source.subscribe(_BufferSubscriber(subscriber, count)))
