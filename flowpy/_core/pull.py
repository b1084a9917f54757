"""Subscriptions that pull items from a source only while there is demand.

:class:`DemandSubscription` is the state every pull-on-demand subscription
shares: the outstanding demand (rules 3.8, 3.17), the first invalid request
(rule 3.9), cancellation (rules 3.5-3.7), and the
:class:`~flowpy._core.serial.SerialDrain` that delivers. Its ``request`` is
the one implementation of "add to the demand and wake the drain".

:class:`PullSubscription` builds the generic drain on it: a subclass says
where items come from (:meth:`PullSubscription._next`,
:meth:`PullSubscription._at_end`) and what to release when the subscription
ends. The DataFrame publisher and the Spark processor's downstream use it;
``IterablePublisher`` builds its own look-ahead drain on
:class:`DemandSubscription`.
"""

from __future__ import annotations

import threading
from abc import abstractmethod
from collections.abc import Callable
from typing import Final, Generic, TypeVar, Union

from flowpy._core.sentinels import Sentinel
from flowpy._core.serial import SerialDrain
from flowpy._demand import MAX_DEMAND, add_demand, check_request
from flowpy._signals import on_next_raised, signal_subscribe, signal_terminal
from flowpy.flow import Subscriber, Subscription

__all__ = ["EMPTY", "END", "DemandSubscription", "PullSubscription", "Pulled"]

T = TypeVar("T")


EMPTY: Final = Sentinel("EMPTY")
"""Returned by ``_next`` when no item is available yet; the source calls ``signal()`` later."""

END: Final = Sentinel("END")
"""Returned by ``_next`` when the source is exhausted."""

Pulled = Union[T, Sentinel]  # noqa: UP007 - a runtime alias on 3.10

# Implementation overview
#
# All signals to the subscriber run in the passes of one SerialDrain (from
# flowpy._core.serial), so they are serial (rule 1.3) without a lock held across
# them, and a request, cancel or source signal that arrives during a pass
# makes the drain run once more. The first pass delivers on_subscribe, so a
# request made inside on_subscribe cannot race it to on_next. A pass emits at
# most _BUDGET items and then yields its thread to the executor's other tasks.

_BUDGET = 1_024  # items per executor task before it yields the thread


class DemandSubscription(Subscription):
    """Demand, cancellation and the first invalid request of a subscription served by a drain.

    ``request(n)`` adds to the demand (saturating at ``MAX_DEMAND``, rule
    3.17) or records the rule 3.9 error, then signals the drain; after a
    cancel it does nothing (rule 3.6). ``request`` never raises (rule 3.16)
    and never calls the subscriber, so a ``request`` from inside ``on_next``
    only counts a signal: recursion stays bounded (rule 3.3). The drain
    reads the state with :meth:`_pending` and reports deliveries with
    :meth:`_produced`.
    """

    __slots__ = ("_cancelled", "_demand", "_lock", "_request_error", "_serial")

    def __init__(
        self,
        execute: Callable[[Callable[[], object]], object],
        drain: Callable[[bool], bool],
        on_reject: Callable[[BaseException], None],
    ) -> None:
        self._serial = SerialDrain(execute, drain, on_reject)
        self._lock = threading.Lock()
        # --- Guarded by self._lock ----------------------------------------
        self._demand = 0  # unfilled request(n) total; MAX_DEMAND is unbounded
        self._cancelled = False  # set once by cancel() or by the drain ending the stream
        self._request_error: BaseException | None = None  # the first rule 3.9 error, to signal

    def request(self, n: int) -> None:
        """Add ``n`` to the demand; ``n <= 0`` ends the stream with ``on_error`` (rules 3.8, 3.9, 3.17)."""
        error = check_request(n)
        with self._lock:
            if self._cancelled:
                return  # rule 3.6
            if error is None:
                self._demand = add_demand(self._demand, n)
            elif self._request_error is None:
                self._request_error = error
        self._serial.signal()

    def _pending(self) -> tuple[bool, BaseException | None, int]:
        """Return ``(cancelled, request_error, demand)``, read together. Drain only."""
        with self._lock:
            return self._cancelled, self._request_error, self._demand

    def _produced(self, emitted: int) -> bool:
        """Subtract ``emitted`` from the demand; return whether demand is left and not cancelled. Drain only."""
        with self._lock:
            if self._demand != MAX_DEMAND:  # unbounded demand is never used up (rule 3.17)
                self._demand -= emitted
            return self._demand > 0 and not self._cancelled


class PullSubscription(DemandSubscription, Generic[T]):
    """Delivers items pulled from a source, never more than requested (rule 1.1).

    Subclasses implement :meth:`_next`, :meth:`_at_end` and :meth:`_release`;
    each runs on the drain only, so sources need no lock of their own for
    what the drain alone touches. A source whose items arrive later calls
    :meth:`signal` when they do. A subscriber method that raises is logged
    and its subscription cancelled (rule 2.13).
    """

    def __init__(self, subscriber: Subscriber[T], execute: Callable[[Callable[[], object]], object]) -> None:
        super().__init__(execute, self._drain, self._refused)
        self._subscriber = subscriber
        # --- Touched only by the drain --------------------------------------
        self._subscribed = False  # on_subscribe was delivered
        self._finished = False  # the stream ended and _release() ran

    # -- Subscription ---------------------------------------------------------

    def cancel(self) -> None:
        """Stop pulling; the source is released by the drain (rules 3.5, 3.7)."""
        with self._lock:
            if self._cancelled:
                return
            self._cancelled = True
        self._interrupt()
        self._serial.signal()

    # -- For the source -------------------------------------------------------

    def start(self) -> None:
        """Run the first drain pass, which delivers ``on_subscribe``; call once, after construction."""
        self._serial.signal()

    def signal(self) -> None:
        """Ask for a drain pass: new items arrived, or the source ended."""
        self._serial.signal()

    @property
    def cancelled(self) -> bool:
        """Whether the stream was cancelled or ended (racy: for monitoring)."""
        return self._cancelled

    @abstractmethod
    def _next(self) -> Pulled[T]:
        """Return the next item, :data:`EMPTY` or :data:`END`; may block. Drain only."""

    @abstractmethod
    def _at_end(self) -> bool:
        """Return whether the source is exhausted, without consuming an item. Drain only.

        Called whenever the demand is filled or the source returned
        :data:`EMPTY`, so that ``on_complete`` needs no further request
        (rule 1.4); a lazy source that has not started yet answers ``False``.
        """

    def _failure(self) -> BaseException | None:
        """Return an error to signal now, whatever the demand (rule 1.4). Drain only."""
        return None

    @abstractmethod
    def _release(self) -> None:
        """Free the source; called once, on the drain, when the stream ends."""

    def _interrupt(self) -> None:
        """Hook run by ``cancel()`` on the caller's thread to unblock a pending ``_next``."""

    # -- The drain --------------------------------------------------------------

    def _end(self) -> None:
        with self._lock:
            self._cancelled = True
        if not self._finished:
            self._finished = True
            self._release()

    def _terminate(self, error: BaseException | None) -> None:
        self._end()
        signal_terminal(self._subscriber, error)

    def _refused(self, error: BaseException) -> None:
        # The executor refused the drain: this thread owns the signals now.
        if not self._subscribed:
            self._subscribed = True
            if not signal_subscribe(self._subscriber, self):
                self._end()
                return
        self._terminate(error)

    def _drain(self, first: bool) -> bool:
        if self._finished:
            return False
        if not self._subscribed:
            self._subscribed = True
            if not signal_subscribe(self._subscriber, self):
                self._end()
                return False
        cancelled, error, demand = self._pending()
        if cancelled:
            self._end()
            return False
        if error is not None:
            self._terminate(error)
            return False
        budget = min(demand, _BUDGET)
        emitted = 0
        exhausted = False  # the source had nothing more to give now
        try:
            failure = self._failure()
            if failure is not None:
                self._terminate(failure)
                return False
            while emitted < budget and not self._cancelled:
                item = self._next()
                if item is EMPTY:
                    exhausted = True
                    break
                if self._cancelled:  # cancelled while _next() blocked: the item is not wanted (rule 3.12)
                    break
                if item is END:
                    self._terminate(None)
                    return False
                emitted += 1
                if not self._deliver(item):  # type: ignore[arg-type]
                    return False
            if (exhausted or emitted == demand) and not self._cancelled and self._at_end():
                self._terminate(None)
                return False
        except BaseException as exc:  # the source failed
            if self._cancelled:  # a failure caused by cancel() is not reported
                self._end()
            else:
                self._terminate(exc)
            return False
        more = self._produced(emitted) and not exhausted
        return more and emitted == _BUDGET  # yield the thread, then go on

    def _deliver(self, item: T) -> bool:
        """Call ``on_next``; if it raised, end the stream, log, and return ``False`` (rule 2.13)."""
        try:
            self._subscriber.on_next(item)
        except BaseException as exc:
            self._end()
            on_next_raised(self._subscriber, exc)
            return False
        return True
