"""``interval`` and ``timer``: sources that emit on a scheduler's clock.

Both follow RxJava 3's ``Flowable.interval`` and ``Flowable.timer``: time does
not wait for demand, so a tick that finds the subscriber without demand
ends the stream with :class:`~flowpy.errors.MissingBackpressureError`; put an
``on_backpressure_*`` operator after them to drop, keep the latest or buffer
instead (docs/operators.md, "Time").

Threading:  ``on_subscribe`` runs on the subscribing thread; the items and the
            terminal signal on the scheduler's executor (or on the thread of a
            ``request`` that lets a queued tick go), one at a time, in the
            subscriber's ``contextvars`` context.
"""

from __future__ import annotations

from flowpy._checks import require_seconds, require_subscriber
from flowpy._signals import signal_subscribe
from flowpy.flow import Publisher, Subscriber
from flowpy.operators._timed import Emitter
from flowpy.schedulers import Scheduler, resolve_scheduler

__all__ = ["interval", "timer"]


class _Ticks(Emitter[int]):
    """One subscription to ``interval`` or ``timer``: a periodic (or one-shot) timer; demand admits each tick."""

    __slots__ = ("_count", "_first", "_period", "_scheduler")

    def __init__(
        self, downstream: Subscriber[int], name: str, scheduler: Scheduler, first: float, period: float | None
    ) -> None:
        super().__init__(downstream, name)
        self._scheduler = scheduler
        self._first = first
        self._period = period  # None: one tick, then complete
        self._count = 0  # guarded by self._lock: the value of the next tick

    def start(self) -> None:
        """Hand the subscriber its subscription, then start the clock."""
        if not signal_subscribe(self.downstream, self):
            return
        self._release()
        period = self._period
        with self._lock:
            if period is None:
                self.set_timer_locked(lambda: self._scheduler.schedule(self._tick, self._first))
            else:
                self.set_timer_locked(lambda: self._scheduler.schedule_periodic(self._tick, self._first, period))

    def _tick(self) -> None:
        with self._lock:
            value = self._count
            self._count = value + 1
            admitted = self.admit_locked(value, f"tick {value}" if self._period is not None else "its item")
            if admitted and self._period is None:
                self.complete_locked()
        self._signal()


class _TickPublisher(Publisher[int]):
    """A cold publisher: each subscription gets its own clock."""

    __slots__ = ("_first", "_name", "_period", "_scheduler")

    def __init__(self, name: str, first: float, period: float | None, scheduler: Scheduler) -> None:
        self._name = name
        self._first = first
        self._period = period
        self._scheduler = scheduler

    def subscribe(self, subscriber: Subscriber[int]) -> None:
        """Start a clock for ``subscriber``.

        Raises:
            TypeError: if ``subscriber`` is ``None`` (rule 1.9).
        """
        require_subscriber(subscriber)
        _Ticks(subscriber, self._name, self._scheduler, self._first, self._period).start()

    def __repr__(self) -> str:
        return f"<{self._name} publisher>"


def interval(
    period: float, initial_delay: float | None = None, *, scheduler: Scheduler | None = None
) -> Publisher[int]:
    """Emit 0, 1, 2, ... every ``period`` seconds, the first after ``initial_delay`` (default: ``period``)::

        subscribe at 0;  interval(1.0)
        result:  ----0----1----2----3-- ...      (at 1.0, 2.0, 3.0, 4.0 s)

    Ticks follow the scheduler's fixed rate: the k-th is due at
    ``initial_delay + k * period`` after the subscription, so no drift
    accumulates. It never completes; ``cancel`` stops the timer.

    Demand: a source that cannot slow down. A tick is emitted if the
    subscriber has requested it; a tick that finds no demand cancels the
    timer and ends the stream with
    :class:`~flowpy.errors.MissingBackpressureError` (RxJava's rule).
    Nothing is buffered beyond the ticks already requested; for a slow
    subscriber, put ``on_backpressure_drop()`` (skip ticks),
    ``on_backpressure_latest()`` or ``on_backpressure_buffer(n)`` after it.

    Args:
        period: seconds between ticks.
        initial_delay: seconds before the first tick; ``None`` for ``period``.
        scheduler: the clock and the executor; default
            :func:`~flowpy.schedulers.default_scheduler`.

    Raises:
        TypeError: if a time is not a number or ``scheduler`` is not a Scheduler.
        ValueError: if ``period`` is not positive, ``initial_delay`` is
            negative, or either is not finite.
    """
    every = require_seconds(period, "period", positive=True)
    first = every if initial_delay is None else require_seconds(initial_delay, "initial_delay")
    return _TickPublisher("interval", first, every, resolve_scheduler(scheduler))


def timer(delay: float, *, scheduler: Scheduler | None = None) -> Publisher[int]:
    """Emit ``0`` after ``delay`` seconds, then complete::

        subscribe at 0;  timer(2.0)
        result:  ----------0|      (at 2.0 s)

    Demand: the item is emitted if it was requested by then; otherwise the
    stream ends with :class:`~flowpy.errors.MissingBackpressureError`, as in
    RxJava (``on_backpressure_buffer(1)`` after it waits for the request
    instead). ``cancel`` before the delay stops the timer.

    Raises:
        TypeError: if ``delay`` is not a number or ``scheduler`` is not a Scheduler.
        ValueError: if ``delay`` is negative or not finite.
    """
    return _TickPublisher("timer", require_seconds(delay, "delay"), None, resolve_scheduler(scheduler))
