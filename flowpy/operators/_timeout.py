"""``timeout``: fail, or switch to a fallback, when the source is silent for too long.

The clock is a :class:`_Gate` between the source and its subscriber: it
passes the source's signals on and, after ``seconds`` of silence, cancels the
source and signals :class:`~flowpy.errors.StreamTimeoutError`. With a
fallback, the gate is the first publisher of a
:class:`~flowpy.operators._sequence.SequenceStage` (as ``on_error_resume``),
which subscribes the fallback when the gate times out, carrying the demand
the source left unfilled over to it.

Threading:  items pass on the source's thread. The timeout itself is
            signalled (or the fallback subscribed) on the scheduler's
            executor, in the subscriber's ``contextvars`` context; a timeout
            never overlaps an item being delivered (rule 1.3).
"""

from __future__ import annotations

import enum
import threading
from typing import Any, Generic, TypeVar

from flowpy._checks import none_error, require_publisher, require_seconds
from flowpy._context import capture
from flowpy.errors import StreamTimeoutError
from flowpy.flow import Publisher, Subscriber
from flowpy.operators._base import Relay, StagePublisher
from flowpy.operators._sequence import SequenceStage
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


class _Gate(Relay, Generic[T]):
    """Passes the source's signals on; after ``seconds`` of silence, cancels it and signals ``error``."""

    __slots__ = ("_busy", "_context", "_error", "_last", "_lock", "_now", "_scheduler", "_seconds", "_state", "_timer")

    def __init__(
        self, downstream: Subscriber[T], seconds: float, scheduler: Scheduler, error: StreamTimeoutError
    ) -> None:
        super().__init__(downstream)
        self._seconds = seconds
        self._scheduler = scheduler
        self._now = scheduler.now
        self._error = error  # what a timeout signals
        self._context = capture()  # the subscriber's: the timeout runs on the executor
        self._lock = threading.Lock()
        # --- Guarded by self._lock -------------------------------------------------
        self._state = _State.WAITING
        self._timer: Cancellable | None = None
        # --- Written by the source's thread; read under the lock by the timer -----
        self._busy = False  # an on_next is under way downstream
        self._last = 0.0  # when the last signal (or the subscription) ended

    def _started(self) -> None:
        """The subscriber has this gate as its subscription: start the clock."""
        with self._lock:
            self._last = self._now()
            if self._state is _State.WAITING and not self.done:
                self._timer = self._scheduler.schedule(self._fire, self._seconds)

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
        try:
            self._downstream.on_next(item)
        finally:
            self._last = self._now()
            self._busy = False  # a timer that still reads True only looks again later

    def request(self, n: int) -> None:
        """Pass ``request(n)`` to the source; an invalid ``n`` too, so that it signals the error (rule 3.9)."""
        upstream = self.upstream
        if upstream is not None and not self.done:
            upstream.request(n)

    def _end(self) -> bool:
        """End the stream here and stop the clock; return whether the source's signal may pass on."""
        with self._lock:
            waiting = self._state is _State.WAITING
            if waiting:
                self._state = _State.ENDED
            timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()
        return super()._end() and waiting

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
        self.done = True
        upstream = self.upstream
        if upstream is not None:
            upstream.cancel()
        if self._context is None:
            self._downstream.on_error(self._error)
        else:
            self._context.run(self._downstream.on_error, self._error)


def _timeout_error(seconds: float) -> StreamTimeoutError:
    return StreamTimeoutError(f"the source signalled nothing for {seconds:g} s and was cancelled (timeout)")


class _GatePublisher(Publisher[T], Generic[T]):
    """The source behind a gate that signals ``error``: the first publisher of a timeout with a fallback."""

    __slots__ = ("_error", "_scheduler", "_seconds", "_source")

    def __init__(self, source: Publisher[T], seconds: float, scheduler: Scheduler, error: StreamTimeoutError) -> None:
        self._source = source
        self._seconds = seconds
        self._scheduler = scheduler
        self._error = error

    def subscribe(self, subscriber: Subscriber[T]) -> None:
        self._source.subscribe(_Gate(subscriber, self._seconds, self._scheduler, self._error))


class _TimeoutFallback(SequenceStage):
    """The gated source, then ``fallback`` if the gate timed out (this subscription's own error, by identity)."""

    __slots__ = ("_error", "_fallback")

    def __init__(
        self, downstream: Subscriber[Any], source: Publisher[Any], seconds: float, scheduler: Scheduler, fallback: Any
    ) -> None:
        super().__init__(downstream)
        self._error = _timeout_error(seconds)
        self._fallback: Publisher[Any] | None = fallback
        self._pending = _GatePublisher(source, seconds, scheduler, self._error)

    def _ended(self, error: BaseException | None, produced: int) -> None:
        fallback, self._fallback = self._fallback, None
        if error is not self._error or fallback is None:
            self._terminate(error)
            return
        self._pending = fallback
        self._resume()


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
    for the demand the source left unfilled. Nothing is buffered. Without a
    fallback, an invalid ``request(n)`` goes to ``source``, which signals
    the rule 3.9 error; with one, the operator signals it at once (as
    ``on_error_resume`` does).

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
    if fallback is None:
        return StagePublisher(
            "timeout", lambda subscriber: source.subscribe(_Gate(subscriber, wait, clock, _timeout_error(wait)))
        )
    return StagePublisher(
        "timeout", lambda subscriber: _TimeoutFallback(subscriber, source, wait, clock, fallback).start()
    )
