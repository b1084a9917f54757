"""``timeout``: fail, or switch to a fallback, when the source is silent for too long.

Threading:  items pass on the source's thread. The timeout itself is
            signalled (or the fallback subscribed) on the scheduler's
            executor, in the subscriber's ``contextvars`` context; a timeout
            never overlaps an item being delivered (rule 1.3).
"""

from __future__ import annotations

import enum
import threading
from typing import Generic, TypeVar

from flowpy._checks import none_error, require, require_publisher, require_seconds
from flowpy._context import capture
from flowpy._signals import signal_subscribe
from flowpy.errors import StreamTimeoutError
from flowpy.flow import Publisher, Subscriber, Subscription
from flowpy.operators._arbiter import SubscriptionArbiter
from flowpy.operators._base import StagePublisher
from flowpy.operators._timed import TOLERANCE
from flowpy.schedulers import Cancellable, Scheduler, resolve_scheduler

__all__ = ["timeout"]

T = TypeVar("T")


class _State(enum.Enum):
    WAITING = "waiting for the source"
    TIMED_OUT = "timed out"
    ENDED = "ended"


# Implementation overview
#
# One timer per subscription, moved lazily: an item does not reschedule it,
# it only records when its delivery ended (_last). When the timer fires
# early it schedules itself for what is left. The race between an item and
# the timeout is decided under self._lock: an item marks itself under way
# (_busy) while the state is WAITING, and the timer times out only while
# nothing is under way, so the timeout is never signalled during an
# on_next (rule 1.3) and an item is never passed on after it.


class _Timeout(SubscriptionArbiter, Subscriber[T], Generic[T]):
    """The subscriber to the source, and the downstream's subscription (which can move to the fallback)."""

    __slots__ = (
        "_busy",
        "_context",
        "_downstream",
        "_emitted",
        "_fallback",
        "_last",
        "_lock",
        "_now",
        "_scheduler",
        "_seconds",
        "_state",
        "_subscribed",
        "_timer",
    )

    def __init__(
        self, downstream: Subscriber[T], seconds: float, scheduler: Scheduler, fallback: Publisher[T] | None
    ) -> None:
        super().__init__()
        self._downstream = downstream
        self._seconds = seconds
        self._scheduler = scheduler
        self._now = scheduler.now
        self._fallback = fallback
        self._context = capture()  # the subscriber's: the timeout runs on the executor
        self._emitted = 0  # the source's thread only: items passed on
        self._lock = threading.Lock()
        # --- Guarded by self._lock -------------------------------------------------
        self._state = _State.WAITING
        self._timer: Cancellable | None = None
        self._subscribed = False  # the source's on_subscribe came (rule 2.5 for any later one)
        # --- Written by the source's thread; read under the lock by the timer -----
        self._busy = False  # an on_next is under way downstream
        self._last = 0.0  # when the last signal (or the subscription) ended

    # --- The source ---------------------------------------------------------------

    def on_subscribe(self, subscription: Subscription) -> None:
        """Hand the subscriber its subscription, request what it asked for, start the clock.

        Raises:
            TypeError: if ``subscription`` is ``None`` (rule 2.13).
        """
        require(subscription, "subscription", "2.13")
        with self._lock:
            second, self._subscribed = self._subscribed, True
        if second:
            subscription.cancel()  # rule 2.5
            return
        if not signal_subscribe(self._downstream, self):
            subscription.cancel()
            return
        with self._lock:
            self._last = self._now()
            if self._state is _State.WAITING:
                self._timer = self._scheduler.schedule(self._fire, self._seconds)
        self.set_upstream(subscription)

    def on_next(self, item: T) -> None:
        """Pass ``item`` on, unless the timeout came first; the clock restarts when it returns.

        Raises:
            TypeError: if ``item`` is ``None`` (rule 2.13).
        """
        if item is None:
            raise none_error("item", "2.13")
        with self._lock:
            if self._state is not _State.WAITING:
                return
            self._busy = True
        self._emitted += 1
        try:
            self._downstream.on_next(item)
        finally:
            self._last = self._now()
            self._busy = False  # a timer that still reads True only looks again later

    def on_error(self, error: BaseException) -> None:
        """Pass the source's error on, unless the timeout came first.

        Raises:
            TypeError: if ``error`` is ``None`` (rule 2.13).
        """
        require(error, "error", "2.13")
        if self._end():
            self._downstream.on_error(error)

    def on_complete(self) -> None:
        """Pass the source's completion on, unless the timeout came first."""
        if self._end():
            self._downstream.on_complete()

    def _end(self) -> bool:
        """Stop the clock; return whether the stream was still waiting for the source."""
        with self._lock:
            waiting = self._state is _State.WAITING
            if waiting:
                self._state = _State.ENDED
            timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()
        return waiting

    # --- The timer ---------------------------------------------------------------------

    def _fire(self) -> None:
        with self._lock:
            self._timer = None
            if self._state is not _State.WAITING:
                return
            left = self._last + self._seconds - self._now()
            if self._busy or left > TOLERANCE:  # an item came (or is being delivered) meanwhile
                self._timer = self._scheduler.schedule(self._fire, self._seconds if self._busy else left)
                return
            self._state = _State.TIMED_OUT
        source = self.detach()
        if source is not None:
            source.cancel()
        if self._context is None:
            self._timed_out()
        else:
            self._context.run(self._timed_out)

    def _timed_out(self) -> None:
        fallback = self._fallback
        if fallback is None:
            self._downstream.on_error(
                StreamTimeoutError(f"the source signalled nothing for {self._seconds:g} s and was cancelled (timeout)")
            )
            return
        self.produced(self._emitted)  # final: no item is passed on after the timeout
        fallback.subscribe(_FallbackSubscriber(self, self._downstream))

    def cancel(self) -> None:
        """Cancel the source (or the fallback) and the clock; idempotent (rules 3.5, 3.7)."""
        self._end()
        super().cancel()


class _FallbackSubscriber(Subscriber[T], Generic[T]):
    """Passes the fallback's signals on; its subscription becomes the arbiter's upstream."""

    __slots__ = ("_arbiter", "_downstream", "_subscribed")

    def __init__(self, arbiter: SubscriptionArbiter, downstream: Subscriber[T]) -> None:
        self._arbiter = arbiter
        self._downstream = downstream
        self._subscribed = False  # the fallback's thread only

    def on_subscribe(self, subscription: Subscription) -> None:
        """Request the unfilled demand from the fallback; cancel a second subscription (rule 2.5).

        Raises:
            TypeError: if ``subscription`` is ``None`` (rule 2.13).
        """
        require(subscription, "subscription", "2.13")
        if self._subscribed:
            subscription.cancel()
            return
        self._subscribed = True
        self._arbiter.set_upstream(subscription)

    def on_next(self, item: T) -> None:
        """Pass ``item`` on."""
        self._downstream.on_next(item)

    def on_error(self, error: BaseException) -> None:
        """Pass the fallback's error on.

        Raises:
            TypeError: if ``error`` is ``None`` (rule 2.13).
        """
        require(error, "error", "2.13")
        self._downstream.on_error(error)

    def on_complete(self) -> None:
        """Pass the fallback's completion on."""
        self._downstream.on_complete()


def timeout(
    source: Publisher[T],
    seconds: float,
    *,
    fallback: Publisher[T] | None = None,
    scheduler: Scheduler | None = None,
) -> Publisher[T]:
    """Fail with :class:`~flowpy.errors.StreamTimeoutError` (or switch to ``fallback``) when ``source`` is silent::

        source:   -1--2----------3--|
        timeout(5 dashes)
        result:   -1--2-----X              (StreamTimeoutError)

        timeout(5 dashes, fallback=-a-b-|)
        result:   -1--2------a-b-|

    The clock starts when ``source`` gives its subscription and restarts
    when each ``on_next`` returns (RxJava 3's ``timeout(time)``); when
    ``seconds`` pass with no signal, ``source`` is cancelled and the
    subscriber gets ``StreamTimeoutError``, a :class:`TimeoutError`, or
    ``fallback``'s items. A timeout counts whatever the reason for the
    silence, a subscriber that requests nothing included.

    Demand: passed through to ``source``; on a switch, ``fallback`` is asked
    for the demand the source left unfilled. Nothing is buffered.

    Raises:
        TypeError: if ``source`` or ``fallback`` is not a publisher,
            ``seconds`` is not a number or ``scheduler`` is not a Scheduler.
        ValueError: if ``seconds`` is not positive or not finite.
    """
    require_publisher(source, "source")
    if fallback is not None:
        require_publisher(fallback, "fallback")
    wait = require_seconds(seconds, "seconds", positive=True)
    clock = resolve_scheduler(scheduler)
    return StagePublisher("timeout", lambda subscriber: source.subscribe(_Timeout(subscriber, wait, clock, fallback)))
