"""Machinery of the time operators: delivering what time, not demand, makes due.

A timer that fires (a tick of ``interval``, the end of a ``debounce`` pause,
a ``sample``, the end of a time window) has an item to deliver *now*; time
does not wait for the subscriber. As in RxJava, such an item is delivered if
the subscriber has demand for it and otherwise ends the stream with
:class:`~flowpy.errors.MissingBackpressureError`, which an
``on_backpressure_*`` operator after the time operator turns into dropping,
keeping the latest or buffering (docs/operators.md, "Time").

:class:`Emitter` is that rule, written once: the downstream's subscription
(a :class:`~flowpy.operators._base.DemandDrain`), a queue of items already
admitted against the subscriber's demand, the operator's one timer, and the
end of the stream. :class:`TimedStage` adds the upstream side for the
operators that have a source. Every signal to the subscriber goes out from
the drain, which runs on whichever thread made progress possible (a timer's
executor thread, the upstream's thread, a ``request``) one at a time (rule
1.3), in the subscriber's ``contextvars`` context (flowpy/_context.py).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any, Final, Generic, TypeVar

from flowpy._checks import require
from flowpy._core.upstream import UpstreamSlot
from flowpy._demand import MAX_DEMAND, add_demand, check_request
from flowpy._signals import signal_subscribe
from flowpy.errors import MissingBackpressureError
from flowpy.flow import Subscriber, Subscription
from flowpy.operators._base import DemandDrain
from flowpy.schedulers import Cancellable
from flowpy.snapshots import SubscriberSnapshot

__all__ = ["TOLERANCE", "Emitter", "TimedStage", "missing_backpressure"]

T = TypeVar("T")

TOLERANCE: Final = 1e-9
"""Seconds by which a deadline may still lie ahead and count as reached.

Deadlines are sums of floats (an arrival time plus a timeout), and a clock
reading at the due time can fall an ulp short of them; without the
tolerance, a virtual clock would reschedule the same instant for ever.
"""


def missing_backpressure(name: str, what: str) -> MissingBackpressureError:
    """The error of a time operator that had ``what`` to emit and no demand for it."""
    return MissingBackpressureError(
        f"{name} could not emit {what} for lack of requests; "
        f"put on_backpressure_drop(), on_backpressure_latest() or on_backpressure_buffer() after it"
    )


class Emitter(DemandDrain, Generic[T]):
    """The downstream's subscription of a time operator: delivers admitted items, then the end.

    A subclass makes its items ready with :meth:`admit_locked` (demand-checked:
    time-driven items) or :meth:`queue_locked` (items whose demand the
    operator ensured itself), ends the stream with :meth:`complete_locked`
    or :meth:`fail`, and keeps its one timer with :meth:`set_timer_locked`,
    all under ``self._lock``, calling :meth:`_signal` after releasing it.
    The timer is cancelled when the stream ends here, however it ends.
    """

    __slots__ = ("_completing", "_items", "_name", "_open", "_stopped", "_terminated", "_timer", "downstream")

    def __init__(self, downstream: Subscriber[T], name: str) -> None:
        super().__init__()
        self.downstream = downstream
        self._name = name
        self._terminated = False  # drain only: a terminal signal went downstream
        # --- Guarded by self._lock --------------------------------------------
        self._items: deque[T] = deque()  # appended under the lock; popped by the drain alone
        self._open = 0  # demand not yet taken by an admitted item; MAX_DEMAND is unbounded
        self._completing = False  # complete once the ready items are delivered
        self._timer: Cancellable | None = None  # the operator's one timer
        self._stopped = False  # the stream ended here: no timer may be set any more

    # --- For subclasses, under self._lock ----------------------------------------

    def admit_locked(self, item: T, what: str) -> bool:
        """Make ``item`` ready if the subscriber has demand for it; else fail the stream. Caller holds the lock.

        Returns whether ``item`` was admitted. ``what`` names it in the
        :class:`~flowpy.errors.MissingBackpressureError` message.
        """
        if self._stopped or self._failure is not None:
            return False
        opened = self._open
        if opened == 0:
            self._failure = missing_backpressure(self._name, what)
            return False
        if opened != MAX_DEMAND:
            self._open = opened - 1
        self._items.append(item)
        return True

    def queue_locked(self, item: T) -> None:
        """Make ``item`` ready without a demand check (the operator requested it for demand). Caller holds the lock."""
        if not self._stopped:
            self._items.append(item)

    def complete_locked(self) -> None:
        """Complete once the ready items are delivered. Caller holds the lock."""
        self._completing = True

    def set_timer_locked(self, schedule: Callable[[], Cancellable]) -> None:
        """Keep the timer ``schedule()`` returns as the operator's one timer, unless the stream has ended.

        Caller holds the lock and has no timer set (or has let the old one go).
        ``schedule`` must not run the function before it returns (the
        :class:`~flowpy.schedulers.Scheduler` contract).
        """
        if not self._stopped:
            self._timer = schedule()

    def stop_timer_locked(self) -> Cancellable | None:
        """Forget the timer and return it for the caller to cancel after releasing the lock."""
        timer, self._timer = self._timer, None
        return timer

    def _stop(self) -> None:
        """The stream ended here: cancel the timer and set no other."""
        with self._lock:
            self._stopped = True
            timer = self.stop_timer_locked()
        if timer is not None:
            timer.cancel()

    # --- Subscription ------------------------------------------------------------

    def request(self, n: int) -> None:
        """Add ``n`` to the demand (rules 3.8, 3.17); an invalid ``n`` fails the stream (rule 3.9)."""
        if check_request(n) is None:
            with self._lock:
                self._open = add_demand(self._open, n)
        super().request(n)

    # --- The drain ----------------------------------------------------------------------

    def _cancel_upstream(self) -> None:
        self._stop()
        self._items.clear()

    def _signal_downstream_error(self, error: BaseException) -> None:
        if not self._terminated:
            self._terminated = True
            self.downstream.on_error(error)

    def _terminate(self, error: BaseException | None) -> None:
        self._terminated = True
        self.cancelled = True
        self._cancel_upstream()
        if error is None:
            self.downstream.on_complete()
        else:
            self.downstream.on_error(error)

    def _has_work(self) -> bool:
        return bool(self._items) and self._requested > 0

    def _drain(self) -> None:
        if self._terminated:
            return
        if self.cancelled:
            self._cancel_upstream()
            return
        if self._failure is not None:
            self._terminate(self._failure)
            return
        ready = self._items
        on_next = self.downstream.on_next
        requested = self._requested
        emitted = 0
        while True:
            completing = self._completing  # read before the queue: no item is made ready after it
            if not ready:
                if completing:
                    self._terminate(None)
                    return
                break
            if emitted == requested or self.cancelled or self._failure is not None:
                break
            on_next(ready.popleft())
            emitted += 1
        self._produced(emitted, requested)

    def reading(self) -> SubscriberSnapshot | None:
        """This stage's ready items and counters, or ``None`` once it ended (racy, for monitoring)."""
        if self.cancelled or self._terminated:
            return None
        ready = len(self._items)
        return SubscriberSnapshot(self.downstream, ready, ready, self._requested, self.delivered, self.dropped)


class TimedStage(Emitter[T], Subscriber[Any]):
    """An :class:`Emitter` that is also the subscriber to the operator's source.

    ``on_subscribe`` hands the downstream this stage as its subscription,
    then calls :meth:`_start` (request upstream, start the timer). An error
    from upstream is signalled at once, dropping the ready items (RxJava's
    default); ``on_complete`` calls :meth:`_upstream_completed`. Subclasses
    implement ``on_next``, which must ignore items once :attr:`cancelled`
    is set (rule 2.8).
    """

    __slots__ = ("upstream",)

    def __init__(self, downstream: Subscriber[T], name: str) -> None:
        super().__init__(downstream, name)
        self.upstream = UpstreamSlot()  # the one source subscription (rule 2.5)

    def on_subscribe(self, subscription: Subscription) -> None:
        """Give the downstream this stage as its subscription, then start.

        Raises:
            TypeError: if ``subscription`` is ``None`` (rule 2.13).
        """
        if not self.upstream.accept(subscription):  # refused once cancelled: _cancel_upstream() ends the slot
            return
        if not signal_subscribe(self.downstream, self):
            return  # it cancelled this stage, whose drain cancelled the upstream
        self._release()
        self._start(subscription)

    def _start(self, subscription: Subscription) -> None:
        """Request from upstream and start the timer; by default, request everything (rule 3.17)."""
        subscription.request(MAX_DEMAND)

    def on_error(self, error: BaseException) -> None:
        """Signal the upstream's error now; the ready items are dropped.

        Raises:
            TypeError: if ``error`` is ``None`` (rule 2.13).
        """
        require(error, "error", "2.13")
        self._stop()
        self.fail(error)

    def on_complete(self) -> None:
        """Let :meth:`_upstream_completed` decide what is still emitted, then complete."""
        with self._lock:
            timer = self.stop_timer_locked()
            self._upstream_completed_locked()
            self.complete_locked()
            self._stopped = True  # a timer that fires now finds nothing more to emit
        if timer is not None:
            timer.cancel()
        self._signal()

    def _upstream_completed_locked(self) -> None:
        """Make ready what the operator emits at the end (say, a last buffer). Caller holds the lock."""

    def _cancel_upstream(self) -> None:
        super()._cancel_upstream()
        self.upstream.cancel()
