"""``concurrent.futures`` interop: a future as a publisher, a stream as a future.

:func:`from_future` is a publisher of the one value a
:class:`concurrent.futures.Future` settles with. :func:`consume` and
:func:`collect` subscribe to any publisher and return a real
:class:`~concurrent.futures.Future` that settles when the stream ends, like the
JDK's ``SubmissionPublisher.consume`` returns a ``CompletableFuture``.

Protocol:   :func:`from_future` signals at most one ``on_next``, and only after
            ``request(n)`` (rule 1.1); ``request(n <= 0)`` gets ``on_error``
            (rule 3.9).
Threading:  :func:`from_future`'s signals run on the thread that settles the
            future, or inside ``request`` if it was already settled.
            :func:`consume`'s ``fn`` runs where the publisher delivers.
Backpressure: :func:`consume` and :func:`collect` request without bound, as
            the JDK's ``consume`` does: the consumer keeps up by running ``fn``
            inside ``on_next``, and a :func:`collect`-ed list grows with the
            stream.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future
from typing import Any, Generic, TypeVar

from flowpy import flow
from flowpy._checks import require_subscriber
from flowpy._demand import check_request
from flowpy._signals import signal_subscribe
from flowpy.subscribers import collect, consume

__all__ = ["collect", "consume", "from_future"]

T = TypeVar("T")
R = TypeVar("R")


# --- from_future ---------------------------------------------------------------


class _FutureSubscription(flow.Subscription, Generic[T]):
    """One subscriber's view of a future: the value is signalled once requested."""

    __slots__ = ("_error", "_future", "_lock", "_requested", "_subscriber")

    def __init__(self, future: Future[T], subscriber: flow.Subscriber[T]) -> None:
        self._future = future
        # --- Guarded by self._lock -------------------------------------
        self._lock = threading.Lock()
        # The subscriber until the terminal signal is claimed or the
        # subscription is cancelled; None afterwards (rules 1.7, 3.13).
        self._subscriber: flow.Subscriber[T] | None = subscriber
        self._requested = False  # a valid request(n) arrived
        self._error: BaseException | None = None  # a rule 3.9 violation to signal

    def request(self, n: int) -> None:
        """Ask for the value; any ``n >= 1`` is enough (rules 3.8, 3.9)."""
        error = check_request(n)
        with self._lock:
            if self._subscriber is None:
                return
            if error is not None:
                self._error = error
            else:
                self._requested = True
        self._try_signal()

    def cancel(self) -> None:
        """Forget the subscriber; the future itself is left alone (rule 3.5)."""
        with self._lock:
            self._subscriber = None

    def _try_signal(self) -> None:
        """Signal the end once it is due; exactly one caller wins the subscriber.

        A rule 3.9 error, a failed or cancelled future and a ``None`` result
        are signalled as soon as known (rules 1.4, 2.9, 2.10); a value waits
        for a request (rule 1.1). Called from ``request`` and from the
        future's done callback.
        """
        future = self._future
        with self._lock:
            subscriber = self._subscriber
            error = self._error
            if subscriber is None or (error is None and not future.done()):
                return
            if error is None and not self._requested and _has_value(future):
                return
            self._subscriber = None
        if error is not None:
            subscriber.on_error(error)
            return
        try:
            value = future.result(timeout=0)
        except BaseException as exc:  # the future's exception, or CancelledError
            subscriber.on_error(exc)
            return
        if value is not None:
            subscriber.on_next(value)
        subscriber.on_complete()


def _has_value(future: Future[Any]) -> bool:
    """Whether a settled ``future`` holds an item: a result that is not ``None``."""
    return not future.cancelled() and future.exception(timeout=0) is None and future.result(timeout=0) is not None


class _FuturePublisher(flow.Publisher[T]):
    """The publisher returned by :func:`from_future`."""

    __slots__ = ("_future",)

    def __init__(self, future: Future[T]) -> None:
        self._future = future

    def subscribe(self, subscriber: flow.Subscriber[T]) -> None:
        """Send ``on_subscribe``; the value follows the first ``request`` once the future settles.

        Raises:
            TypeError: if ``subscriber`` is ``None`` (rule 1.9).
        """
        require_subscriber(subscriber)
        subscription = _FutureSubscription(self._future, subscriber)
        if not signal_subscribe(subscriber, subscription):  # rule 2.13: cancelled, and on_error sent
            return
        self._future.add_done_callback(lambda _future: subscription._try_signal())  # at once if settled

    def __repr__(self) -> str:
        return f"<from_future {self._future!r}>"


def from_future(future: Future[T]) -> flow.Publisher[T]:
    """Return a publisher of the value that ``future`` settles with.

    Each subscriber gets ``on_next(value)`` then ``on_complete()`` once it
    has requested and the future has a result. A result of ``None``
    completes without an item (items are never ``None``, rule 2.13); a
    failed future signals ``on_error`` with its exception, a cancelled one
    with :class:`concurrent.futures.CancelledError`; these need no request
    (rules 1.4, 2.9, 2.10). Cancelling a subscription does not cancel the
    future, which other code may share.

    Args:
        future: a :class:`concurrent.futures.Future`, settled or not.

    Raises:
        TypeError: if ``future`` is not a ``concurrent.futures.Future``.
    """
    if not isinstance(future, Future):
        raise TypeError(f"future must be a concurrent.futures.Future, got {future!r}")
    return _FuturePublisher(future)
