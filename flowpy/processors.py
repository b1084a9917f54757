"""Processors: stages that are both a subscriber and a publisher (rule 4.1).

* :class:`MulticastProcessor` shares one upstream among any number of
  subscribers, in lock step, with a bounded prefetch.

Protocol:   ``request(n <= 0)`` ends that subscription with
            ``on_error(ValueError)`` (rule 3.9), a non-``int`` ``n`` with
            ``on_error(TypeError)``; demand saturates at ``2**63 - 1``
            (rule 3.17); ``request`` and ``cancel`` never raise (rules 3.15,
            3.16). A second upstream subscription is cancelled (rule 2.5).
Threading:  every method is thread-safe; see each class for where signals run.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Generic, TypeVar

from flowpy._demand import add_demand, check_request
from flowpy._signals import report, signal_subscribe, signal_terminal
from flowpy.errors import MissingBackpressureError
from flowpy.flow import Processor, Subscriber, Subscription

__all__ = ["MulticastProcessor"]

T = TypeVar("T")

# Implementation overview (MulticastProcessor)
#
# Upstream items go into a bounded deque; one "drain" loop at a time moves
# them to every subscriber. Whoever raises the work-in-progress count from
# 0 (on_next, a request, a cancel, a subscribe) runs the loop; anyone else
# only bumps the count, and the running loop goes round once more before it
# leaves. So every subscriber sees signals serially (rule 1.3), a request
# from inside on_next returns at once (rule 3.3), and no subscriber method
# runs under the lock.
#
# Each pass takes a snapshot of the subscribers and emits
# min(requested - emitted) items to all of them: lock step. The terminal
# signal goes out when the upstream ended *and* the queue is empty; at that
# moment the subscriber tuple is swapped for the terminal state, so a
# subscriber arriving later gets the terminal signal from subscribe().


class _MulticastSubscription(Subscription, Generic[T]):
    """One subscriber's link to a :class:`MulticastProcessor`."""

    __slots__ = ("cancelled", "emitted", "error", "parent", "requested", "subscriber")

    def __init__(self, parent: MulticastProcessor[T], subscriber: Subscriber[T]) -> None:
        self.parent = parent
        self.subscriber = subscriber
        # --- Guarded by parent._lock -------------------------------------
        self.requested = 0  # total requested, saturated at MAX_DEMAND
        self.cancelled = False  # set once, by cancel() or by a terminal signal
        self.error: BaseException | None = None  # first invalid request (rule 3.9)
        # --- Written only by the drain loop ------------------------------
        self.emitted = 0  # items delivered; requested - emitted is the demand

    def request(self, n: int) -> None:
        """Add ``n`` to this subscriber's demand (rules 3.8, 3.9, 3.17)."""
        self.parent._request(self, n)

    def cancel(self) -> None:
        """Leave the processor; the last one to leave cancels the upstream (rules 3.5, 3.13)."""
        self.parent._cancel(self)


class MulticastProcessor(Processor[T, T]):
    """Dispatches one upstream to many subscribers, in lock step, with prefetch.

    It requests ``prefetch`` items from its upstream, queues them, and
    re-requests half the window each time half of it was delivered. Every
    subscriber receives the same items in the same order, none skipped: an
    item goes out only when *every* current subscriber has demand for it,
    so the slowest subscriber paces the others (and the upstream).

    Subscribers may come and go at any time. One that arrives while the
    stream runs receives the items queued from then on. The terminal signal
    follows the queued items; a subscriber arriving after it receives the
    terminal signal at once. When the last subscriber cancels after the
    processor was connected to an upstream, the processor cancels the
    upstream and ends: later subscribers receive ``on_complete`` at once.
    Before an upstream arrives, subscribers may come and go freely.

    An upstream that sends more than was requested breaks rule 1.1: it is
    cancelled and every subscriber receives
    :class:`~flowpy.errors.MissingBackpressureError`.

    Threading: the processor has no executor. Signals run on the thread that
    made progress possible: the upstream's ``on_next`` thread, or the thread
    of a subscriber's ``request``, ``cancel`` or ``subscribe``.

    Example:
        >>> from flowpy.sources import RangePublisher
        >>> from flowpy.subscribers import collect
        >>> processor = MulticastProcessor(prefetch=4)
        >>> first, second = collect(processor), collect(processor)
        >>> RangePublisher(0, 3).subscribe(processor)
        >>> first.result(), second.result()
        ([0, 1, 2], [0, 1, 2])
    """

    def __init__(self, prefetch: int = 256) -> None:
        """Args:
            prefetch: how many upstream items are requested ahead and queued.

        Raises:
            TypeError: if ``prefetch`` is not an ``int``.
            ValueError: if ``prefetch`` is not positive.
        """
        if not isinstance(prefetch, int) or isinstance(prefetch, bool):
            raise TypeError(f"prefetch must be an int, got {prefetch!r}")
        if prefetch <= 0:
            raise ValueError(f"prefetch must be > 0, got {prefetch!r}")
        self._prefetch = prefetch
        self._limit = prefetch - (prefetch >> 1)  # replenish at half the window
        # Appended by the upstream's on_next, popped by the drain loop;
        # holds at most `prefetch` items while the upstream obeys rule 1.1.
        self._queue: deque[T] = deque()
        self._lock = threading.Lock()
        # --- Guarded by self._lock ---------------------------------------
        self._subscribers: tuple[_MulticastSubscription[T], ...] = ()  # copy on write
        self._terminated = False  # subscribers were given their terminal; no more join
        self._upstream: Subscription | None = None
        self._connected = False  # an upstream subscription was accepted; set once
        self._done = False  # the upstream signalled its terminal; set once
        self._error: BaseException | None = None  # the upstream's failure, if any
        self._wip = 0  # drain requests not yet served; nonzero while a loop runs
        # --- Written only by the drain loop ------------------------------
        self._consumed = 0  # items taken from the queue since the last upstream request

    @property
    def prefetch(self) -> int:
        """How many items are requested from the upstream ahead of the subscribers."""
        return self._prefetch

    @property
    def has_subscribers(self) -> bool:
        """Whether at least one subscriber is attached (racy: for monitoring)."""
        return bool(self._subscribers)

    @property
    def number_of_subscribers(self) -> int:
        """How many subscribers are attached (racy: for monitoring)."""
        return len(self._subscribers)

    # --- Publisher side ------------------------------------------------------

    def subscribe(self, subscriber: Subscriber[T]) -> None:
        """Attach ``subscriber``; after the end of the stream it gets the terminal signal at once.

        Raises:
            TypeError: if ``subscriber`` is ``None`` (rule 1.9).
        """
        if subscriber is None:
            raise TypeError("subscriber must not be None (rule 1.9)")
        subscription = _MulticastSubscription(self, subscriber)
        if not signal_subscribe(subscriber, subscription):  # before it can be signalled (rule 1.9)
            return
        with self._lock:
            late = self._terminated
            if subscription.cancelled:
                return
            if late:
                subscription.cancelled = True
            else:
                self._subscribers = (*self._subscribers, subscription)
            error = self._error
        if late:
            signal_terminal(subscriber, error)
        else:
            self._drain()

    def _request(self, subscription: _MulticastSubscription[T], n: int) -> None:
        error = check_request(n)
        with self._lock:
            if subscription.cancelled:
                return
            if error is None:
                subscription.requested = add_demand(subscription.requested, n)
            elif subscription.error is None:
                subscription.error = error
        self._drain()

    def _cancel(self, subscription: _MulticastSubscription[T]) -> None:
        with self._lock:
            if subscription.cancelled:
                return
            upstream = self._remove(subscription)
        if upstream is not None:
            upstream.cancel()
        self._drain()  # the leaver may have been the slowest one

    def _remove(self, subscription: _MulticastSubscription[T]) -> Subscription | None:
        """Detach ``subscription``; return the upstream to cancel if it was the last one.

        Caller holds self._lock.
        """
        subscription.cancelled = True
        subscribers = self._subscribers
        if subscription not in subscribers:
            return None
        self._subscribers = tuple(s for s in subscribers if s is not subscription)
        if self._subscribers or not self._connected or self._terminated:
            return None
        self._terminated = True  # reference counting: the last one out ends the stream
        upstream, self._upstream = self._upstream, None
        return upstream

    # --- Subscriber side -----------------------------------------------------

    def on_subscribe(self, subscription: Subscription) -> None:
        """Accept the first upstream and request ``prefetch``; cancel any later one (rule 2.5).

        Raises:
            TypeError: if ``subscription`` is ``None`` (rule 2.13).
        """
        if subscription is None:
            raise TypeError("subscription must not be None (rule 2.13)")
        with self._lock:
            accept = not self._connected and not self._terminated
            if accept:
                self._connected = True
                self._upstream = subscription
        if accept:
            subscription.request(self._prefetch)
        else:
            subscription.cancel()

    def on_next(self, item: T) -> None:
        """Queue ``item`` and deliver what the subscribers' demand allows.

        Raises:
            TypeError: if ``item`` is ``None`` (rule 2.13).
        """
        if item is None:
            raise TypeError("item must not be None (rule 2.13)")
        if self._done or self._terminated:
            return  # after our terminal or our cancel (rule 2.8)
        if len(self._queue) >= self._prefetch:
            self._overflow()
            return
        self._queue.append(item)
        self._drain()

    def _overflow(self) -> None:
        with self._lock:
            upstream, self._upstream = self._upstream, None
        if upstream is not None:
            upstream.cancel()
        self._end(MissingBackpressureError(
            f"upstream sent more than the {self._prefetch} items requested (rule 1.1)"
        ))

    def on_error(self, error: BaseException) -> None:
        """Pass ``error`` to every subscriber after the queued items (rule 4.2).

        Raises:
            TypeError: if ``error`` is ``None`` (rule 2.13).
        """
        if error is None:
            raise TypeError("error must not be None (rule 2.13)")
        self._end(error)

    def on_complete(self) -> None:
        """Complete every subscriber after the queued items."""
        self._end(None)

    def _end(self, error: BaseException | None) -> None:
        with self._lock:
            if self._done:
                return
            self._done = True
            self._error = error
            self._upstream = None
        self._drain()

    # --- The drain loop ------------------------------------------------------

    def _drain(self) -> None:
        with self._lock:
            self._wip += 1
            if self._wip != 1:
                return
        missed = 1
        queue = self._queue
        while True:
            with self._lock:
                subscribers = self._subscribers
                terminated = self._terminated
                failed = [s for s in subscribers if s.error is not None]
                upstream = None
                for subscription in failed:
                    upstream = self._remove(subscription) or upstream
                if failed:
                    subscribers = self._subscribers
                demand = min((s.requested - s.emitted for s in subscribers), default=0)
                done = self._done
                error = self._error
            for subscription in failed:
                signal_terminal(subscription.subscriber, subscription.error)
            if upstream is not None:
                upstream.cancel()
            if terminated:
                queue.clear()
            elif subscribers:
                if demand:
                    self._emit(subscribers, demand)
                if done and not queue:
                    self._terminate(error)
                    return  # the loop never runs again
            with self._lock:
                self._wip -= missed
                missed = self._wip
                if missed == 0:
                    return

    def _emit(self, subscribers: tuple[_MulticastSubscription[T], ...], demand: int) -> None:
        """Deliver up to ``demand`` queued items to every subscriber; only from the drain loop."""
        queue = self._queue
        targets = [(s, s.subscriber.on_next) for s in subscribers]
        limit = self._limit
        consumed = self._consumed
        emitted = 0
        while emitted < demand and queue:
            item = queue.popleft()
            for subscription, on_next in targets:
                if subscription.cancelled:
                    continue
                try:
                    on_next(item)
                except BaseException as exc:
                    subscription.cancel()
                    report(exc, f"on_next of {subscription.subscriber!r} raised (rule 2.13)")
            emitted += 1
            consumed += 1
            if consumed == limit:
                consumed = 0
                upstream = self._upstream
                if upstream is not None:
                    upstream.request(limit)
        self._consumed = consumed
        for subscription in subscribers:
            subscription.emitted += emitted

    def _terminate(self, error: BaseException | None) -> None:
        with self._lock:
            subscribers, self._subscribers = self._subscribers, ()
            self._terminated = True
            for subscription in subscribers:
                subscription.cancelled = True
        for subscription in subscribers:
            signal_terminal(subscription.subscriber, error)

    def __repr__(self) -> str:
        state = "terminated" if self._terminated else "connected" if self._connected else "unconnected"
        return f"<MulticastProcessor prefetch={self._prefetch} {state} subscribers={len(self._subscribers)}>"

