"""``buffer(count)`` and ``buffer_with_time(timespan)``: emit the items in lists.

Threading:  ``buffer`` sends lists downstream on the source's thread; there is
            no queue. ``buffer_with_time`` sends them from its drain, on the
            source's thread or the scheduler's executor, one at a time, in the
            subscriber's ``contextvars`` context.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

from flowpy._checks import none_error, require_positive_int, require_publisher, require_seconds
from flowpy._demand import MAX_DEMAND
from flowpy.flow import Publisher, Subscriber, Subscription
from flowpy.operators._base import Relay, StagePublisher, TrackedStagePublisher
from flowpy.operators._timed import TimedStage
from flowpy.operators._tracking import Stage
from flowpy.schedulers import Scheduler, resolve_scheduler

__all__ = ["buffer", "buffer_with_time"]

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

    def _pass_complete(self) -> None:
        """Pass the last, shorter list on, if any, then complete."""
        items, self._items = self._items, []
        if items and not self.done:  # demand for it is open: fewer than count * n items came
            self._downstream.on_next(items)
        super()._pass_complete()

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


class _TimeBuffer(TimedStage[list[T]], Generic[T]):
    """Collects items into a list; a periodic timer (or the list reaching ``max_count``) emits it."""

    __slots__ = ("_items_now", "_max_count", "_scheduler", "_timespan")

    def __init__(
        self, downstream: Subscriber[list[T]], timespan: float, max_count: int | None, scheduler: Scheduler
    ) -> None:
        super().__init__(downstream, "buffer_with_time")
        self._scheduler = scheduler
        self._timespan = timespan
        self._max_count = max_count
        self._items_now: list[T] = []  # guarded by self._lock: the list being filled

    def _start(self, subscription: Subscription) -> None:
        with self._lock:
            self._restart_locked()
        super()._start(subscription)

    def _restart_locked(self) -> None:
        self.set_timer_locked(lambda: self._scheduler.schedule_periodic(self._tick, self._timespan, self._timespan))

    def on_next(self, item: T) -> None:
        """Add ``item`` to the list; a full list (``max_count``) is emitted now and the clock restarts.

        Raises:
            TypeError: if ``item`` is ``None`` (rule 2.13).
        """
        if item is None:
            raise none_error("item", "2.13")
        if self.cancelled:
            return
        timer = None
        with self._lock:
            items = self._items_now
            items.append(item)
            if len(items) != self._max_count:
                return
            self._items_now = []
            admitted = self.admit_locked(items, f"a full list of {len(items)} items")
            if admitted:
                timer = self.stop_timer_locked()
                self._restart_locked()
        if timer is not None:
            timer.cancel()
        self._signal()

    def _tick(self) -> None:
        with self._lock:
            items, self._items_now = self._items_now, []
            self.admit_locked(items, f"a list of {len(items)} items")
        self._signal()

    def _upstream_completed_locked(self) -> None:
        items, self._items_now = self._items_now, []
        self.admit_locked(items, f"its last list of {len(items)} items")


def buffer_with_time(
    source: Publisher[T], timespan: float, max_count: int | None = None, *, scheduler: Scheduler | None = None
) -> Publisher[list[T]]:
    """Emit the items of ``source`` in a list every ``timespan`` seconds (or whenever ``max_count`` are in it)::

        source:  -1-2-3----4---------5-|
        buffer_with_time(5 dashes)
        result:  -----[1,2,3]-[4]-[]-[5]|    (ticks at 5, 10, 15, and the rest at completion)

    A list is emitted at every tick, empty ones included, and when
    ``source`` completes; a full list (``max_count``) is emitted at once and
    restarts the clock (RxJava 3's ``buffer(timespan, unit, count)``). An
    error is signalled at once and the list being filled is dropped.

    Demand: requests everything from ``source``. A list due with no demand
    ends the stream with :class:`~flowpy.errors.MissingBackpressureError`;
    put ``on_backpressure_buffer(n)`` (or ``_latest``, ``_drop``) after it
    for a slow subscriber. The list being filled holds at most
    ``max_count`` items, or what ``source`` sends in one ``timespan`` when
    ``max_count`` is ``None``.

    Raises:
        TypeError: if ``source`` is not a publisher, ``timespan`` is not a
            number, ``max_count`` is not an int or ``scheduler`` not a Scheduler.
        ValueError: if ``timespan`` is not positive or not finite, or ``max_count`` is not positive.
    """
    require_publisher(source, "source")
    every = require_seconds(timespan, "timespan", positive=True)
    limit = None if max_count is None else require_positive_int(max_count, "max_count")
    clock = resolve_scheduler(scheduler)

    def connect(subscriber: Subscriber[list[T]], track: Callable[[Stage], None]) -> None:
        stage: _TimeBuffer[T] = _TimeBuffer(subscriber, every, limit, clock)
        track(stage)
        source.subscribe(stage)

    return TrackedStagePublisher("buffer_with_time", connect, 0 if limit is None else limit)
