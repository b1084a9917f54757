"""Backpressure operators: for sources that cannot slow down.

Each requests everything from its source (demand ``2**63 - 1``) and decides
what to do with items the subscriber has not asked for yet: keep them in a
bounded buffer (``on_backpressure_buffer``), keep only the latest
(``on_backpressure_latest``) or drop them (``on_backpressure_drop``).

Threading:  ``on_backpressure_drop`` signals on the source's thread; the
            buffering operators deliver from a drain loop on whichever thread
            made progress possible (the source's, or a ``request``'s), one
            thread at a time (rule 1.3).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import Any, Generic, Literal, TypeVar

from flowpy._checks import none_error, require_callable, require_positive_int, require_publisher
from flowpy._demand import MAX_DEMAND, add_demand, unfilled_demand
from flowpy._signals import reraise_fatal
from flowpy.flow import Publisher, Subscriber, Subscription
from flowpy.operators._base import Relay, TrackedStagePublisher
from flowpy.operators._queue import HeadSubscriber, QueueDrain
from flowpy.operators._tracking import Stage
from flowpy.snapshots import SubscriberSnapshot

__all__ = ["OverflowPolicy", "on_backpressure_buffer", "on_backpressure_drop", "on_backpressure_latest"]

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)

OverflowPolicy = Literal["error", "drop_oldest", "drop_latest"]
"""What ``on_backpressure_buffer`` does with an item that finds the buffer full."""

_POLICIES: tuple[OverflowPolicy, ...] = ("error", "drop_oldest", "drop_latest")


class _OverflowSubscriber(HeadSubscriber):
    """Requests everything and applies the overflow policy to what does not fit."""

    __slots__ = ("_policy",)

    def __init__(self, parent: QueueDrain[Any], capacity: int, policy: OverflowPolicy) -> None:
        super().__init__(parent, capacity, "on_backpressure_buffer's upstream", delay_error=True)
        self._policy = policy
        if policy == "drop_oldest":
            # append() then evicts the oldest item atomically, and only if the buffer is full.
            self.queue = deque(maxlen=capacity)

    def start(self) -> None:
        """Ask the upstream for everything it has (rule 3.17)."""
        if self.subscription is not None and not self.parent.cancelled:
            self.subscription.request(MAX_DEMAND)

    def _admit_over_capacity(self) -> bool:
        """Apply the overflow policy; ``drop_oldest`` queues the item (the bounded deque evicts)."""
        if self._policy == "drop_oldest":
            self.parent.dropped += 1  # the append evicts one (unless the drain took one meanwhile)
            return True
        if self._policy == "drop_latest":
            self.parent.dropped += 1
        else:
            self.overflow()
        return False

    def overflow_message(self) -> str:
        return f"on_backpressure_buffer overflowed its capacity of {self.prefetch} items"

    def poll(self) -> Any:
        """Take the next item; nothing to replenish, everything was requested."""
        return self.queue.popleft()


class _BufferStage(QueueDrain[T], Generic[T]):
    __slots__ = ()

    def __init__(self, downstream: Subscriber[T], capacity: int, policy: OverflowPolicy) -> None:
        super().__init__(downstream)
        self.upstream = _OverflowSubscriber(self, capacity, policy)


def on_backpressure_buffer(
    source: Publisher[T], capacity: int = 256, *, on_overflow: OverflowPolicy = "error"
) -> Publisher[T]:
    """Request everything from ``source``; keep up to ``capacity`` items the subscriber has not asked for::

        source:   --1--2--3--4--|     (request(1) after 4 arrived; capacity 2)
        on_backpressure_buffer(2, on_overflow="drop_oldest")
        result:   --1-----------3-4|

    ``on_overflow`` says what happens to an item that finds the buffer full:
    ``"error"`` cancels ``source`` and signals
    :class:`~flowpy.errors.MissingBackpressureError` at once (the buffered
    items are dropped); ``"drop_oldest"`` drops the oldest buffered item to
    make room; ``"drop_latest"`` drops the arriving item. An error from
    ``source`` arrives after the buffered items.

    Raises:
        TypeError: if ``source`` is not a publisher or ``capacity`` is not an int.
        ValueError: if ``capacity`` is not positive or ``on_overflow`` is not a policy.
    """
    require_publisher(source, "source")
    require_positive_int(capacity, "capacity")
    if on_overflow not in _POLICIES:
        raise ValueError(f"on_overflow must be one of 'error', 'drop_oldest', 'drop_latest', got {on_overflow!r}")

    def connect(subscriber: Subscriber[T], track: Callable[[Stage], None]) -> None:
        stage = _BufferStage(subscriber, capacity, on_overflow)
        track(stage)
        source.subscribe(stage.upstream)

    return TrackedStagePublisher("on_backpressure_buffer", connect, capacity)


def on_backpressure_latest(source: Publisher[T]) -> Publisher[T]:
    """Request everything from ``source``; keep only the latest item the subscriber has not taken::

        source:   --1--2--3--4--|     (request(1) at the start and after 3 arrived)
        on_backpressure_latest()
        result:   --1-------3-----|

    The same as ``on_backpressure_buffer(source, 1, on_overflow="drop_oldest")``.
    """
    return on_backpressure_buffer(source, 1, on_overflow="drop_oldest")


class _DropStage(Relay, Generic[T]):
    """Passes an item on if the subscriber has demand for it, else drops it; no queue."""

    __slots__ = ("__weakref__", "_dropped", "_emitted", "_lock", "_on_drop", "_requested")

    def __init__(self, downstream: Subscriber[T], on_drop: Callable[[T], object] | None) -> None:
        super().__init__(downstream)
        self._on_drop = on_drop
        self._emitted = 0  # delivering thread only
        self._dropped = 0  # delivering thread only: items dropped for want of demand
        # Guarded by self._lock; read racily by on_next, which can only see it too small.
        self._lock = threading.Lock()
        self._requested = 0

    def on_subscribe(self, subscription: Subscription) -> None:
        """Hand this stage to the downstream, then request everything (rule 3.17).

        Raises:
            TypeError: if ``subscription`` is ``None`` (rule 2.13).
        """
        super().on_subscribe(subscription)
        if self.upstream is subscription and not self.done:
            subscription.request(MAX_DEMAND)

    def on_next(self, item: T) -> None:
        """Pass ``item`` on if demand is open, else give it to ``on_drop``.

        Raises:
            TypeError: if ``item`` is ``None`` (rule 2.13).
        """
        if item is None:
            raise none_error("item", "2.13")
        if self.done:
            return
        if self._emitted < self._requested:
            self._emitted += 1
            self._downstream.on_next(item)
            return
        self._dropped += 1
        on_drop = self._on_drop
        if on_drop is not None:
            try:
                on_drop(item)
            except BaseException as error:
                self.cancel()
                self._downstream.on_error(error)
                reraise_fatal(error)

    def reading(self) -> SubscriberSnapshot | None:
        """This stage's demand and counters (nothing is buffered), or ``None`` once it ended (racy)."""
        if self.done:
            return None
        emitted = self._emitted
        return SubscriberSnapshot(
            self._downstream, 0, 0, unfilled_demand(self._requested, emitted), emitted, self._dropped
        )

    def request(self, n: int) -> None:
        """Add ``n`` to the demand; an invalid ``n`` goes upstream, which signals the error (rule 3.9)."""
        if self._upstream_for(n) is None:
            return
        with self._lock:
            self._requested = add_demand(self._requested, n)


def on_backpressure_drop(source: Publisher[T], on_drop: Callable[[T], object] | None = None) -> Publisher[T]:
    """Request everything from ``source``; drop the items the subscriber has not asked for::

        source:   --1--2--3--4--|     (request(1) at the start and after 3 arrived)
        on_backpressure_drop()
        result:   --1--------4--|

    ``on_drop(item)`` is called, on the source's thread, for each dropped
    item; if it raises, ``source`` is cancelled and the error signalled.
    Nothing is queued: an item goes on only if the subscriber's demand is
    open when it arrives.

    Raises:
        TypeError: if ``source`` is not a publisher or ``on_drop`` is not callable.
    """
    require_publisher(source, "source")
    if on_drop is not None:
        require_callable(on_drop, "on_drop")

    def connect(subscriber: Subscriber[T], track: Callable[[Stage], None]) -> None:
        stage: _DropStage[T] = _DropStage(subscriber, on_drop)
        track(stage)
        source.subscribe(stage)

    return TrackedStagePublisher("on_backpressure_drop", connect, 0)  # capacity 0: no queue
