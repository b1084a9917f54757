"""Processors: stages that are both a subscriber and a publisher (rule 4.1).

* :class:`MulticastProcessor` shares one upstream among any number of
  subscribers, in lock step, with a bounded prefetch.
* :class:`TransformProcessor` applies a function to each item and publishes
  the results through its own :class:`~flowpy.SubmissionPublisher` buffers.

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
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from flowpy._checks import none_error, require, require_callable, require_positive_int, require_subscriber
from flowpy._demand import add_demand, check_request
from flowpy._signals import call_subscription, report, reraise_fatal, signal_subscribe, signal_terminal
from flowpy.errors import ClosedPublisherError, MissingBackpressureError
from flowpy.executors import DEFAULT, Default, Executor
from flowpy.flow import Processor, Subscriber, Subscription, default_buffer_size
from flowpy.submission import SubmissionPublisher

__all__ = ["MulticastProcessor", "TransformProcessor"]

T = TypeVar("T")
R = TypeVar("R")

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


class _Upstream:
    """A processor's one upstream subscription: the first is kept, later ones cancelled (rule 2.5)."""

    __slots__ = ("_lock", "_subscription", "connected")

    def __init__(self) -> None:
        self._lock = threading.Lock()  # a leaf lock: nothing is called while it is held
        # --- Guarded by self._lock ---------------------------------------
        self._subscription: Subscription | None = None  # None before accept() and after detach()
        self.connected = False  # a subscription was accepted; set once

    @property
    def current(self) -> Subscription | None:
        """The live upstream subscription, if any (racy: re-check with :meth:`detach`)."""
        return self._subscription

    def accept(self, subscription: Subscription, *, is_open: bool) -> bool:
        """Keep ``subscription`` if it is the first and the processor ``is_open``; else cancel it.

        Raises:
            TypeError: if ``subscription`` is ``None`` (rule 2.13).
        """
        require(subscription, "subscription", "2.13")
        with self._lock:
            accepted = is_open and not self.connected
            if accepted:
                self.connected = True
                self._subscription = subscription
        if not accepted:
            call_subscription(subscription, None)
        return accepted

    def detach(self) -> Subscription | None:
        """Forget the subscription (after its terminal signal, or to cancel it); return it."""
        with self._lock:
            subscription, self._subscription = self._subscription, None
        return subscription

    def cancel(self) -> None:
        """Detach and cancel the subscription, if there is one."""
        subscription = self.detach()
        if subscription is not None:
            call_subscription(subscription, None)


class _MulticastSubscription(Subscription, Generic[T]):
    """One subscriber's link to a :class:`MulticastProcessor`."""

    __slots__ = ("cancelled", "deliver", "emitted", "error", "parent", "requested", "subscriber")

    def __init__(self, parent: MulticastProcessor[T], subscriber: Subscriber[T]) -> None:
        self.parent = parent
        self.subscriber = subscriber
        self.deliver = subscriber.on_next  # looked up once, called per item
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
        self._prefetch = require_positive_int(prefetch, "prefetch")
        self._limit = prefetch - (prefetch >> 1)  # replenish at half the window
        # Appended by the upstream's on_next, popped by the drain loop;
        # holds at most `prefetch` items while the upstream obeys rule 1.1.
        self._queue: deque[T] = deque()
        self._lock = threading.Lock()
        # --- Guarded by self._lock ---------------------------------------
        self._subscribers: tuple[_MulticastSubscription[T], ...] = ()  # copy on write
        self._terminated = False  # subscribers were given their terminal; no more join
        self._done = False  # the upstream signalled its terminal; set once
        self._error: BaseException | None = None  # the upstream's failure, if any
        self._wip = 0  # drain requests not yet served; nonzero while a loop runs
        self._failures = False  # some subscription holds an invalid-request error
        # --- Written only by the drain loop ------------------------------
        self._consumed = 0  # items taken from the queue since the last upstream request
        # --- Guarded by its own (leaf) lock, also taken under self._lock --
        self._upstream = _Upstream()

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
        require_subscriber(subscriber)
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
                self._failures = True
        self._drain()

    def _cancel(self, subscription: _MulticastSubscription[T]) -> None:
        with self._lock:
            if subscription.cancelled:
                return
            upstream = self._remove(subscription)
        if upstream is not None:
            call_subscription(upstream, None)
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
        if self._subscribers or not self._upstream.connected or self._terminated:
            return None
        self._terminated = True  # reference counting: the last one out ends the stream
        return self._upstream.detach()

    # --- Subscriber side -----------------------------------------------------

    def on_subscribe(self, subscription: Subscription) -> None:
        """Accept the first upstream and request ``prefetch``; cancel any later one (rule 2.5).

        Raises:
            TypeError: if ``subscription`` is ``None`` (rule 2.13).
        """
        if self._upstream.accept(subscription, is_open=not self._terminated):
            call_subscription(subscription, self._prefetch)

    def on_next(self, item: T) -> None:
        """Queue ``item`` and deliver what the subscribers' demand allows.

        Raises:
            TypeError: if ``item`` is ``None`` (rule 2.13).
        """
        if item is None:
            raise none_error("item", "2.13")
        if self._done or self._terminated:
            return  # after our terminal or our cancel (rule 2.8)
        if len(self._queue) >= self._prefetch:
            self._overflow()
            return
        self._queue.append(item)
        self._drain()

    def _overflow(self) -> None:
        self._upstream.cancel()
        self._end(MissingBackpressureError(
            f"upstream sent more than the {self._prefetch} items requested (rule 1.1)"
        ))

    def on_error(self, error: BaseException) -> None:
        """Pass ``error`` to every subscriber after the queued items (rule 4.2).

        Raises:
            TypeError: if ``error`` is ``None`` (rule 2.13).
        """
        require(error, "error", "2.13")
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
        self._upstream.detach()
        self._drain()

    # --- The drain loop ------------------------------------------------------

    def _drain(self) -> None:
        # Locks are taken with acquire/release rather than `with`: this runs
        # once per upstream item. Nothing between them can raise.
        lock = self._lock
        lock.acquire()
        self._wip += 1
        if self._wip != 1:
            lock.release()
            return
        view = self._view()
        lock.release()
        missed = 1
        queue = self._queue
        fatal: BaseException | None = None  # an on_next raised it; re-raised when the loop stops
        while True:
            subscribers, demand, failed, upstream, done, error, terminated = view
            for subscription in failed:
                signal_terminal(subscription.subscriber, subscription.error)
            if upstream is not None:
                call_subscription(upstream, None)
            if terminated:
                queue.clear()
            elif subscribers:
                if demand > 0 and queue:
                    fatal = self._emit(subscribers, demand) or fatal
                if done and not queue:
                    self._terminate(error)
                    if fatal is not None:
                        raise fatal
                    return  # the loop never runs again
                if fatal is not None:
                    self._abort(fatal)  # the loop never runs again
                    raise fatal
            lock.acquire()
            self._wip -= missed
            missed = self._wip
            if missed == 0:
                lock.release()
                if fatal is not None:
                    raise fatal
                return
            view = self._view()
            lock.release()

    def _view(self) -> tuple[
        tuple[_MulticastSubscription[T], ...],
        int,
        list[_MulticastSubscription[T]],
        Subscription | None,
        bool,
        BaseException | None,
        bool,
    ]:
        """One consistent view for a drain pass; detaches subscriptions with invalid requests.

        Returns the subscribers, their least demand, the failed ones (to
        signal), an upstream to cancel (if the failed were the last), and
        ``done``, ``error``, ``terminated``. ``done`` is read before the
        caller checks the queue for emptiness: every item precedes the
        terminal signal, so done-then-empty means nothing is left.
        Caller holds self._lock.
        """
        subscribers = self._subscribers
        failed: list[_MulticastSubscription[T]] = []
        upstream = None
        if self._failures:
            self._failures = False
            failed = [s for s in subscribers if s.error is not None]
            for subscription in failed:
                upstream = self._remove(subscription) or upstream
            subscribers = self._subscribers
        demand = -1
        for subscription in subscribers:
            remaining = subscription.requested - subscription.emitted
            if demand < 0 or remaining < demand:
                demand = remaining
        return subscribers, demand, failed, upstream, self._done, self._error, self._terminated

    def _emit(self, subscribers: tuple[_MulticastSubscription[T], ...], demand: int) -> BaseException | None:
        """Deliver up to ``demand`` queued items to every subscriber; only from the drain loop.

        A subscriber whose ``on_next`` raises is cancelled and the error
        reported (rule 2.13); the others go on. Returns the first raised
        ``BaseException`` that is not an ``Exception``, for the loop to
        re-raise once it has stopped.
        """
        fatal: BaseException | None = None
        queue = self._queue
        limit = self._limit
        consumed = self._consumed
        emitted = 0
        while emitted < demand and queue:
            item = queue.popleft()
            for subscription in subscribers:
                if subscription.cancelled:
                    continue
                try:
                    subscription.deliver(item)
                except BaseException as exc:
                    subscription.cancel()
                    report(exc, f"on_next of {subscription.subscriber!r} raised (rule 2.13)")
                    if fatal is None and not isinstance(exc, Exception):
                        fatal = exc
            emitted += 1
            consumed += 1
            if consumed == limit:
                consumed = 0
                upstream = self._upstream.current
                if upstream is not None:
                    call_subscription(upstream, limit)
        self._consumed = consumed
        for subscription in subscribers:
            subscription.emitted += emitted
        return fatal

    def _abort(self, error: BaseException) -> None:
        """End everything before re-raising ``error`` from a subscriber's ``on_next``; only from the drain loop.

        ``error`` is no ``Exception`` (say, ``KeyboardInterrupt``): re-raised
        to the upstream, it makes the upstream drop this processor (rule
        2.13), so the upstream is cancelled here and every other subscriber
        gets ``on_error(error)`` rather than waiting forever.
        """
        self._upstream.cancel()
        self._terminate(error)

    def _terminate(self, error: BaseException | None) -> None:
        with self._lock:
            subscribers, self._subscribers = self._subscribers, ()
            self._terminated = True
            for subscription in subscribers:
                subscription.cancelled = True
        fatal: BaseException | None = None
        for subscription in subscribers:
            try:
                signal_terminal(subscription.subscriber, error)
            except BaseException as exc:  # not an Exception: the others still get their signal
                fatal = fatal or exc
        if fatal is not None:
            raise fatal

    def __repr__(self) -> str:
        state = "terminated" if self._terminated else "connected" if self._upstream.connected else "unconnected"
        return f"<MulticastProcessor prefetch={self._prefetch} {state} subscribers={len(self._subscribers)}>"



# --- TransformProcessor ----------------------------------------------------------------


class TransformProcessor(SubmissionPublisher[R], Processor[T, R], Generic[T, R]):
    """A processor that publishes ``fn(item)`` for each upstream item.

    It is a :class:`~flowpy.SubmissionPublisher`: each subscriber has its own
    buffer of ``max_buffer_capacity`` items, delivered on ``executor``, and
    the whole publisher API (``number_of_subscribers``,
    ``estimate_maximum_lag()``, ``close()``, ...) is available. Upstream it
    requests one item at a time, as in the JDK's ``TransformProcessor``
    example: the first once it has a subscriber (so no item is published to
    nobody), the next once the result of the last one was handed to
    ``submit``, which blocks while a subscriber's buffer is full, so the
    slowest subscriber paces the upstream.

    Upstream ``on_complete`` closes the publisher (subscribers complete after
    their buffered items); upstream ``on_error`` closes it exceptionally
    (rule 4.2). If ``fn`` raises or returns ``None``, the upstream is
    cancelled and subscribers receive ``on_error`` with that exception. When
    the last subscriber leaves (cancels, or fails) while the processor is
    connected, it cancels the upstream and closes.

    Example:
        >>> from flowpy.sources import RangePublisher
        >>> from flowpy.subscribers import collect
        >>> squares = TransformProcessor(lambda n: n * n)
        >>> result = collect(squares)
        >>> RangePublisher(1, 4).subscribe(squares)
        >>> result.result(timeout=5)
        [1, 4, 9, 16]
    """

    def __init__(
        self,
        fn: Callable[[T], R],
        *,
        executor: Executor | Default = DEFAULT,
        max_buffer_capacity: int = default_buffer_size(),
    ) -> None:
        """Args:
            fn: the transformation; it runs on the upstream's thread.
            executor: where subscribers are called; the shared default pool if left out.
            max_buffer_capacity: the most items buffered per subscriber.

        Raises:
            TypeError: if ``fn`` is not callable or ``executor`` is ``None``
                or not an executor.
            ValueError: if ``max_buffer_capacity`` is not positive.
        """
        require_callable(fn, "fn")
        if executor is DEFAULT:
            super().__init__(max_buffer_capacity=max_buffer_capacity)
        else:
            super().__init__(executor, max_buffer_capacity)
        self._fn = fn
        self._upstream = _Upstream()
        self._count_lock = threading.Lock()
        # --- Guarded by self._count_lock ---------------------------------
        self._started = False  # the first item was requested; set once
        self._downstream = 0  # subscribers counted by subscribe() that have not left

    # --- Subscriber side -----------------------------------------------------

    def on_subscribe(self, subscription: Subscription) -> None:
        """Accept the first upstream and request one item; cancel any later one (rule 2.5).

        Raises:
            TypeError: if ``subscription`` is ``None`` (rule 2.13).
        """
        if self._upstream.accept(subscription, is_open=not self.is_closed):
            self._start()

    def _start(self) -> None:
        """Request the first item once both an upstream and a subscriber are there."""
        upstream = self._upstream.current
        with self._count_lock:
            start = upstream is not None and self._downstream > 0 and not self._started
            if start:
                self._started = True
        if start:
            call_subscription(upstream, 1)  # type: ignore[arg-type]

    def on_next(self, item: T) -> None:
        """Publish ``fn(item)``, blocking while a subscriber's buffer is full; then request one more.

        Raises:
            TypeError: if ``item`` is ``None`` (rule 2.13).
        """
        if item is None:
            raise none_error("item", "2.13")
        upstream = self._upstream.current
        if upstream is None:
            return  # after cancel (rule 2.8)
        try:
            result = self._fn(item)
        except BaseException as exc:
            self._fail(exc)
            reraise_fatal(exc)
            return
        if result is None:
            self._fail(TypeError(f"fn must not return None (rule 2.13), got None for {item!r}"))
            return
        try:
            self.submit(result)
        except ClosedPublisherError:
            self._upstream.cancel()  # closed by its owner: nobody will read more
            return
        except BaseException as exc:
            # A KeyboardInterrupt or the like from a subscriber this submit ran
            # inline (that subscription is already ended): this stage ends
            # too, then it goes on, as it would from fn.
            self._fail(exc)
            reraise_fatal(exc)
            return
        call_subscription(upstream, 1)

    def on_error(self, error: BaseException) -> None:
        """Close exceptionally: subscribers receive ``error`` (rule 4.2).

        Raises:
            TypeError: if ``error`` is ``None`` (rule 2.13).
        """
        require(error, "error", "2.13")
        self._upstream.detach()
        self.close_exceptionally(error)

    def on_complete(self) -> None:
        """Close: subscribers complete after their buffered items."""
        self._upstream.detach()
        self.close()

    def _fail(self, error: BaseException) -> None:
        self._upstream.cancel()
        self.close_exceptionally(error)

    # --- Publisher side: reference counting ------------------------------------

    def subscribe(self, subscriber: Subscriber[R]) -> None:
        """Add ``subscriber`` as :meth:`SubmissionPublisher.subscribe` does.

        Raises:
            TypeError: if ``subscriber`` is ``None`` (rule 1.9).
        """
        require_subscriber(subscriber)
        # Counted from here, not from its on_subscribe (which runs later, on
        # the executor): another subscriber leaving meanwhile must not find
        # this one uncounted, cancel the upstream and complete it early.
        with self._count_lock:
            self._downstream += 1
        added = False
        try:
            added = self._subscribe(_Downstream(self, subscriber))
        finally:
            if not added:  # refused by the executor, or a duplicate: it never joined
                with self._count_lock:
                    self._downstream -= 1
        self._start()

    @property
    def subscribers(self) -> list[Subscriber[R]]:
        """A new list of the subscribers of open subscriptions (for monitoring)."""
        return [s.wrapped if isinstance(s, _Downstream) else s for s in super().subscribers]

    def _left(self) -> None:
        with self._count_lock:
            self._downstream -= 1
            last = self._downstream == 0
        if last and self._upstream.current is not None and not self.is_closed:
            self._upstream.cancel()
            self.close()


class _Downstream(Subscriber[R]):
    """Wraps a subscriber of a :class:`TransformProcessor` to see it leave.

    Equal to (and hashed as) the subscriber it wraps, so that duplicate
    subscription checks and ``is_subscribed`` see the user's object.
    """

    def __init__(self, processor: TransformProcessor[Any, R], wrapped: Subscriber[R]) -> None:
        self.processor = processor
        self.wrapped = wrapped
        self.gone = False  # left once: cancelled or terminated
        self.lock = threading.Lock()
        self.on_next = wrapped.on_next  # type: ignore[method-assign]  # no extra call per item

    def on_subscribe(self, subscription: Subscription) -> None:
        self.wrapped.on_subscribe(_DownstreamSubscription(self, subscription))

    def on_next(self, item: R) -> None:
        self.wrapped.on_next(item)

    def on_error(self, error: BaseException) -> None:
        self.leave()
        self.wrapped.on_error(error)

    def on_complete(self) -> None:
        self.leave()
        self.wrapped.on_complete()

    def leave(self) -> None:
        with self.lock:
            if self.gone:
                return
            self.gone = True
        self.processor._left()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, _Downstream):
            other = other.wrapped
        return self.wrapped is other or bool(self.wrapped == other)

    def __hash__(self) -> int:
        return hash(self.wrapped)

    def __repr__(self) -> str:
        return repr(self.wrapped)


class _DownstreamSubscription(Subscription):
    """Forwards to the processor's subscription and reports a cancel to the wrapper."""

    __slots__ = ("downstream", "subscription")

    def __init__(self, downstream: _Downstream[R], subscription: Subscription) -> None:
        self.downstream = downstream
        self.subscription = subscription

    def request(self, n: int) -> None:
        self.subscription.request(n)

    def cancel(self) -> None:
        self.subscription.cancel()
        self.downstream.leave()
