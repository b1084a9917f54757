"""A subscription that pulls items from a source only while there is demand.

Both the DataFrame publisher and the downstream side of the Spark processor
are "pull on demand" publishers: the subscriber's ``request(n)`` lets a drain
task take up to ``n`` items from a source and hand them to ``on_next``.
:class:`PullSubscription` is that drain, written once; a subclass says where
items come from (:meth:`PullSubscription._next`, :meth:`PullSubscription._at_end`)
and what to release when the subscription ends.
"""

from __future__ import annotations

import threading
from abc import abstractmethod
from collections.abc import Callable
from typing import Final, Generic, TypeVar, Union

from flowpy._demand import MAX_DEMAND, add_demand, check_request
from flowpy.executors import Task
from flowpy.flow import Subscriber, Subscription

__all__ = ["EMPTY", "END", "PullSubscription", "Pulled"]

T = TypeVar("T")


class _Marker:
    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def __repr__(self) -> str:
        return self._name


EMPTY: Final = _Marker("EMPTY")
"""Returned by ``_next`` when no item is available yet; the source calls ``signal()`` later."""

END: Final = _Marker("END")
"""Returned by ``_next`` when the source is exhausted."""

Pulled = Union[T, _Marker]  # noqa: UP007 - a runtime alias on 3.10

# Implementation overview
#
# All signals to the subscriber run in one drain task at a time, so they are
# serial (rule 1.3) without holding a lock across them. `_scheduled` is the
# "a drain task is queued or running" flag; whoever sets it from False to True
# hands a drain to the executor. A signal that arrives while a drain runs sets
# `_again`, which the drain checks under the lock before it clears
# `_scheduled`: no wake-up is lost. The first drain delivers on_subscribe, so
# a request made inside on_subscribe cannot race it to on_next.


class PullSubscription(Subscription, Generic[T]):
    """Delivers items pulled from a source, never more than requested (rule 1.1).

    Subclasses implement :meth:`_next`, :meth:`_at_end` and :meth:`_release`;
    each runs on the drain task only, so sources need no lock of their own
    for what the drain alone touches. A source whose items arrive later calls
    :meth:`signal` when they do.
    """

    def __init__(self, subscriber: Subscriber[T], execute: Callable[[Task], object]) -> None:
        self._subscriber = subscriber
        self._execute = execute
        self._lock = threading.Lock()
        # --- Guarded by self._lock ----------------------------------------
        self._demand = 0  # unfilled request(n) total; MAX_DEMAND is unbounded
        self._cancelled = False  # set once by cancel() or by the drain ending the stream
        self._request_error: BaseException | None = None  # rule 3.9 error to signal
        self._scheduled = True  # a drain is queued or running; starts True for the first one
        self._again = False  # something happened while the drain ran: drain once more
        # --- Touched only by the drain task ---------------------------------
        self._subscribed = False  # on_subscribe was delivered
        self._finished = False  # the stream ended and _release() ran

    # -- Subscription ---------------------------------------------------------

    def request(self, n: int) -> None:
        """Add ``n`` to the demand; ``n <= 0`` ends the stream with ``on_error`` (rule 3.9)."""
        error = check_request(n)
        with self._lock:
            if self._cancelled:
                return  # rule 3.6
            if error is None:
                self._demand = add_demand(self._demand, n)
            elif self._request_error is None:
                self._request_error = error
        self.signal()

    def cancel(self) -> None:
        """Stop pulling; the source is released by the drain task (rules 3.5, 3.7)."""
        with self._lock:
            if self._cancelled:
                return
            self._cancelled = True
        self._interrupt()
        self.signal()

    # -- For the source -------------------------------------------------------

    def start(self) -> None:
        """Run the first drain, which delivers ``on_subscribe``; call once, after construction."""
        self._hand_over()

    def signal(self) -> None:
        """Ask for a drain: demand, cancellation or new items arrived."""
        with self._lock:
            if self._scheduled:
                self._again = True
                return
            self._scheduled = True
        self._hand_over()

    @property
    def cancelled(self) -> bool:
        """Whether the stream was cancelled or ended (racy: for monitoring)."""
        return self._cancelled

    @abstractmethod
    def _next(self) -> Pulled[T]:
        """Return the next item, :data:`EMPTY` or :data:`END`; may block. Drain task only."""

    @abstractmethod
    def _at_end(self) -> bool:
        """Return whether the source is exhausted, without consuming an item. Drain task only.

        Called whenever the demand is filled, so that ``on_complete`` needs no
        further request (rule 1.4); a lazy source that has not started yet
        answers ``False``.
        """

    def _failure(self) -> BaseException | None:
        """Return an error to signal now, whatever the demand (rule 1.4). Drain task only."""
        return None

    @abstractmethod
    def _release(self) -> None:
        """Free the source; called once, on the drain task, when the stream ends."""

    def _interrupt(self) -> None:
        """Hook run by ``cancel()`` on the caller's thread to unblock a pending ``_next``."""

    # -- The drain --------------------------------------------------------------

    def _hand_over(self) -> None:
        try:
            self._execute(self._drain)
        except BaseException as exc:  # the executor refused: end the stream here
            self._refused(exc)

    def _refused(self, error: BaseException) -> None:
        # _scheduled stays True, so no other drain can start: this thread owns the signals.
        if not self._subscribed:
            self._subscribed = True
            try:
                self._subscriber.on_subscribe(self)
            except BaseException:
                self._end()
                return
        self._end()
        self._subscriber.on_error(error)

    def _end(self) -> None:
        with self._lock:
            self._cancelled = True
        if not self._finished:
            self._finished = True
            self._release()

    def _drain(self) -> None:
        subscriber = self._subscriber
        if not self._subscribed:
            self._subscribed = True
            try:
                subscriber.on_subscribe(self)
            except BaseException:  # rule 2.13: the subscriber broke; treat as cancelled
                self._end()
                return
        while True:
            with self._lock:
                self._again = False
                cancelled = self._cancelled
                error = self._request_error
                demand = self._demand
            if self._finished:
                return
            if cancelled:
                self._end()
                return
            if error is not None:
                self._end()
                subscriber.on_error(error)
                return
            emitted = 0
            exhausted = False  # the source had nothing more to give now
            try:
                failure = self._failure()
                if failure is not None:
                    self._end()
                    subscriber.on_error(failure)
                    return
                while emitted < demand and not self._cancelled:
                    item = self._next()
                    if item is EMPTY:
                        exhausted = True
                        break
                    if item is END:
                        self._end()
                        subscriber.on_complete()
                        return
                    subscriber.on_next(item)  # type: ignore[arg-type]
                    emitted += 1
                if (exhausted or emitted == demand) and not self._cancelled and self._at_end():
                    self._end()
                    subscriber.on_complete()
                    return
            except BaseException as exc:
                after_cancel = self._cancelled
                self._end()
                if not after_cancel:  # a failure caused by cancel() is not reported
                    subscriber.on_error(exc)
                return
            with self._lock:
                if demand != MAX_DEMAND:
                    self._demand -= emitted
                if not self._again and not self._cancelled and (exhausted or self._demand == 0):
                    self._scheduled = False
                    return
