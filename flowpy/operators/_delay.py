"""``delay`` and ``delay_subscription``: shift a stream, or its start, later in time.

``delay`` holds each item for ``seconds`` after it arrived, in a queue of
at most ``prefetch`` items: it requests upstream only what the subscriber
asked for (up to ``prefetch`` ahead), so every item that falls due has
demand waiting for it and nothing is ever dropped or failed for lack of
demand. ``delay_subscription`` subscribes to its source ``seconds`` after
the subscriber subscribed.

Threading:  ``delay`` delivers from its drain, on the scheduler's executor (or
            on the thread of a ``request`` that finds items due), one at a
            time, in the subscriber's ``contextvars`` context.
            ``delay_subscription`` subscribes to the source on the scheduler's
            executor, in the subscriber's context, so the source's signals
            (and its own executor hops) run in it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

from flowpy._checks import none_error, require_positive_int, require_publisher, require_seconds
from flowpy.flow import Publisher, Subscriber
from flowpy.operators._base import StagePublisher, TrackedStagePublisher
from flowpy.operators._observe_on import OnDemandDrain, OnDemandHead
from flowpy.operators._sequence import SequenceStage
from flowpy.operators._timed import TOLERANCE
from flowpy.operators._tracking import Stage
from flowpy.schedulers import Cancellable, Scheduler, resolve_scheduler

__all__ = ["delay", "delay_subscription"]

T = TypeVar("T")

_NEVER = float("inf")


class _DelayHead(OnDemandHead):
    """Queues ``(due, item)`` pairs and asks the parent to wake when the first falls due."""

    __slots__ = ("_now", "_seconds", "completion_due")

    parent: _Delay[Any]

    def __init__(self, parent: _Delay[Any], prefetch: int, seconds: float, scheduler: Scheduler) -> None:
        # An error is not delayed: it fails the parent at once, dropping the queue (RxJava's default).
        super().__init__(parent, prefetch, "delay's upstream", delay_error=False)
        self._seconds = seconds
        self._now = scheduler.now
        self.completion_due = _NEVER  # written before done is set; read by the drain after it sees done

    def on_next(self, item: Any) -> None:
        """Queue ``item``, due ``seconds`` from now.

        Raises:
            TypeError: if ``item`` is ``None`` (rule 2.13).
        """
        if item is None:
            raise none_error("item", "2.13")
        if self.done:
            return
        if len(self.queue) >= self.prefetch:  # more than was requested (rule 1.1)
            self.overflow()
            return
        due = self._now() + self._seconds
        self.queue.append((due, item))
        self.parent.wake_at(due)

    def on_complete(self) -> None:
        """Complete ``seconds`` from now, after the items queued before."""
        if self.done:
            return
        due = self._now() + self._seconds
        self.completion_due = due
        self.done = True
        self.parent.wake_at(due)

    def poll(self) -> Any:
        """Take the next item (its due time was checked by the drain)."""
        return self.queue.popleft()[1]


class _Delay(OnDemandDrain[T], Generic[T]):
    """Delivers each queued item at its due time; one timer, for the earliest due time not yet reached."""

    __slots__ = ("_now", "_scheduler", "_stopped", "_timer", "_timer_due")

    upstream: _DelayHead

    def __init__(self, downstream: Subscriber[T], seconds: float, scheduler: Scheduler, prefetch: int) -> None:
        super().__init__(downstream, None, prefetch, lambda parent: _DelayHead(self, prefetch, seconds, scheduler))
        self._scheduler = scheduler
        self._now = scheduler.now
        # --- Guarded by self._lock ------------------------------------------------
        self._timer: Cancellable | None = None
        self._timer_due = _NEVER  # when the timer fires
        self._stopped = False  # the stream ended here: no timer any more

    def wake_at(self, due: float) -> None:
        """Make sure the drain runs at ``due``: keep the timer if it fires by then, else move it earlier."""
        with self._lock:
            if self._stopped or self._timer_due <= due + TOLERANCE:
                return
            old = self._timer
            self._timer = self._scheduler.schedule(self._fire, max(0.0, due - self._now()))
            self._timer_due = due
        if old is not None:
            old.cancel()

    def _fire(self) -> None:
        with self._lock:
            self._timer = None
            self._timer_due = _NEVER
        self._signal()

    def _stop(self) -> None:
        with self._lock:
            self._stopped = True
            timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()

    def _cancel_upstream(self) -> None:
        self._stop()
        super()._cancel_upstream()

    def _terminate(self, error: BaseException | None) -> None:
        self._stop()
        super()._terminate(error)

    def _has_work(self) -> bool:
        queue = self.upstream.queue
        return bool(queue) and self._requested > 0 and queue[0][0] <= self._now() + TOLERANCE

    def _drain(self) -> None:
        upstream = self.upstream
        if self._terminated:
            return
        if self.cancelled:
            self._cancel_upstream()
            return
        if self._failure is not None:
            self._terminate(self._failure)
            return
        queue = upstream.queue
        poll = upstream.poll
        on_next = self.downstream.on_next
        requested = self._requested
        reached = self._now() + TOLERANCE
        emitted = 0
        while True:
            done = upstream.done  # read before the queue: no item follows it
            if not queue:
                if done:
                    if upstream.completion_due <= reached:
                        self._terminate(None)
                        return
                    self.wake_at(upstream.completion_due)
                break
            due = queue[0][0]
            if due > reached:
                self.wake_at(due)
                break
            if emitted == requested or self.cancelled or self._failure is not None:
                break
            on_next(poll())
            emitted += 1
        self._produced(emitted, requested)


def delay(
    source: Publisher[T], seconds: float, *, scheduler: Scheduler | None = None, prefetch: int = 256
) -> Publisher[T]:
    """Emit each item of ``source`` ``seconds`` after it arrived, and complete ``seconds`` after it did::

        source:  -1-2---3-|
        delay(2 dashes)
        result:  ---1-2---3-|

    An error is not delayed: it is signalled at once and the items still
    held are dropped (RxJava 3's ``delay(time)``, ``delayError`` false).

    Demand: requests upstream what the subscriber requested, at most
    ``prefetch`` ahead of what was delivered, and holds at most ``prefetch``
    items; each item therefore has demand when it falls due. The rate it
    can carry is ``prefetch / seconds`` items per second (256 items a second
    for ``delay(1.0)``): raise ``prefetch`` to the rate times the delay for
    a faster stream. An upstream that sends more than requested ends the
    stream with :class:`~flowpy.errors.MissingBackpressureError`.

    Raises:
        TypeError: if ``source`` is not a publisher, ``seconds`` is not a
            number, ``scheduler`` is not a Scheduler or ``prefetch`` not an int.
        ValueError: if ``seconds`` is negative or not finite, or ``prefetch`` is not positive.
    """
    require_publisher(source, "source")
    wait = require_seconds(seconds, "seconds")
    require_positive_int(prefetch, "prefetch")
    clock = resolve_scheduler(scheduler)

    def connect(subscriber: Subscriber[T], track: Callable[[Stage], None]) -> None:
        stage = _Delay(subscriber, wait, clock, prefetch)
        track(stage)
        source.subscribe(stage.upstream)

    return TrackedStagePublisher("delay", connect, prefetch)


class _DelaySubscription(SequenceStage):
    """A sequence of one publisher, subscribed when the delay is over."""

    __slots__ = ("_scheduler", "_seconds", "_source", "_timer")

    def __init__(
        self, downstream: Subscriber[Any], source: Publisher[Any], seconds: float, scheduler: Scheduler
    ) -> None:
        super().__init__(downstream)
        self._source = source
        self._seconds = seconds
        self._scheduler = scheduler
        self._timer: Cancellable | None = None  # guarded by self._lock

    def _started(self) -> None:
        with self._lock:
            if not self.cancelled:
                self._timer = self._scheduler.schedule(self._due, self._seconds)

    def _due(self) -> None:
        self._pending = self._source
        self._resume()  # the stage's loop subscribes it, in the subscriber's context

    def _release(self) -> None:
        with self._lock:
            timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()


def delay_subscription(source: Publisher[T], seconds: float, *, scheduler: Scheduler | None = None) -> Publisher[T]:
    """Subscribe to ``source`` ``seconds`` after the subscriber subscribed::

        subscribe at 0
        delay_subscription(3 dashes)
        source (subscribed at 3):  ---1--2--|
        result:                    ------1--2--|

    The subscriber gets its subscription at once; what it requests
    meanwhile is requested from ``source`` when it is subscribed, and
    ``cancel`` before then means ``source`` is never subscribed. The
    subscribe runs on the scheduler's executor, in the subscriber's
    ``contextvars`` context.

    Demand: passed through (held until ``source`` is subscribed); an
    invalid ``request(n)`` ends the stream at once (rule 3.9).

    Raises:
        TypeError: if ``source`` is not a publisher, ``seconds`` is not a
            number or ``scheduler`` is not a Scheduler.
        ValueError: if ``seconds`` is negative or not finite.
    """
    require_publisher(source, "source")
    wait = require_seconds(seconds, "seconds")
    clock = resolve_scheduler(scheduler)
    return StagePublisher(
        "delay_subscription", lambda subscriber: _DelaySubscription(subscriber, source, wait, clock).start()
    )
