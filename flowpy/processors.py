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

import dataclasses
import threading
from collections import deque
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from flowpy._checks import none_error, require, require_callable, require_positive_int, require_subscriber
from flowpy._context import bind, capture
from flowpy._core.serial import SerialDrain
from flowpy._core.upstream import UpstreamSlot
from flowpy._demand import add_demand, check_request, replenish_limit, unfilled_demand
from flowpy._signals import (
    call_subscription,
    chain_fatal,
    report,
    reraise_fatal,
    signal_subscribe,
    signal_terminal,
)
from flowpy.errors import ClosedPublisherError, MissingBackpressureError
from flowpy.executors import DEFAULT, Default, Executor
from flowpy.flow import Processor, Subscriber, Subscription, default_buffer_size
from flowpy.snapshots import PublisherSnapshot, SubscriberSnapshot
from flowpy.submission import SubmissionPublisher

__all__ = ["MulticastProcessor", "TransformProcessor"]

T = TypeVar("T")
R = TypeVar("R")

# Implementation overview (MulticastProcessor)
#
# Upstream items go into a bounded deque; one "drain" loop at a time moves
# them to every subscriber: an inline SerialDrain. Whoever signals it idle
# (on_next, a request, a cancel, a subscribe) runs the loop; anyone else
# only counts a signal, and the running loop goes round once more before it
# leaves. So every subscriber sees signals serially (rule 1.3), a request
# from inside on_next returns at once (rule 3.3), and no subscriber method
# runs under the lock.
#
# Each pass takes a snapshot of the subscribers and of the queue's length
# and emits min(requested - emitted, length) items to all of them: lock
# step. Only items queued before the snapshot go out, so every item reaches
# every subscriber that joined before it was queued. The terminal
# signal goes out when the upstream ended *and* the queue is empty; at that
# moment the subscriber tuple is swapped for the terminal state, so a
# subscriber arriving later gets the terminal signal from subscribe().


class _View(Generic[T]):
    """What one drain pass of a :class:`MulticastProcessor` works on, read under its lock.

    One instance per processor, refilled before each pass (no allocation
    per item); only the thread running the drain touches it.
    """

    __slots__ = ("available", "demand", "done", "error", "failed", "subscribers", "terminated", "upstream")

    def __init__(self) -> None:
        self.subscribers: tuple[_MulticastSubscription[T], ...] = ()  # the subscribers this pass serves
        self.demand = -1  # their least demand; -1 without subscribers
        # Items queued when the pass was claimed: the most it may deliver. An
        # item queued later may follow a subscriber that joined after the
        # claim, so it waits for the next pass, which serves that one too.
        self.available = 0
        self.failed: list[_MulticastSubscription[T]] = []  # detached for invalid requests: to signal
        self.upstream: Subscription | None = None  # to cancel: the failed ones were the last subscribers
        self.done = False  # the upstream had signalled its terminal
        self.error: BaseException | None = None  # the upstream's failure, if done with one
        self.terminated = False  # the subscribers were given their terminal signal


class _MulticastSubscription(Subscription, Generic[T]):
    """One subscriber's link to a :class:`MulticastProcessor`."""

    __slots__ = ("cancelled", "context", "deliver", "emitted", "error", "parent", "requested", "subscriber")

    def __init__(self, parent: MulticastProcessor[T], subscriber: Subscriber[T]) -> None:
        self.parent = parent
        self.subscriber = subscriber
        # The subscriber's copy of the context current at subscribe() (flowpy/_context.py):
        # its signals run there whichever thread drives the drain. Entered only by the
        # drain loop, which runs on one thread at a time, and by subscribe() before
        # the subscription joins the loop.
        self.context = context = capture()
        # Looked up once, called per item.
        self.deliver = bind(context, subscriber.on_next)
        # --- Guarded by parent._lock -------------------------------------
        self.requested = 0  # total requested, saturated at MAX_DEMAND
        self.cancelled = False  # set once, by cancel() or by a terminal signal
        self.error: BaseException | None = None  # first invalid request (rule 3.9)
        # --- Written only by the drain loop ------------------------------
        self.emitted = 0  # items delivered; requested - emitted is the demand

    def signal_terminal(self, error: BaseException | None) -> None:
        """:func:`~flowpy._signals.signal_terminal` in the subscriber's context."""
        context = self.context
        if context is None:
            signal_terminal(self.subscriber, error)
        else:
            context.run(signal_terminal, self.subscriber, error)

    def request(self, n: int) -> None:
        """Add ``n`` to this subscriber's demand (rules 3.8, 3.9, 3.17)."""
        self.parent._request(self, n)

    def cancel(self) -> None:
        """Leave the processor; the last one to leave cancels the upstream (rules 3.5, 3.13)."""
        self.parent._cancel(self)


class MulticastProcessor(Processor[T, T]):
    """Dispatches one upstream to many subscribers, in lock step, with prefetch.

    It requests ``prefetch`` items from its upstream, queues them, and
    re-requests three quarters of the window each time that many were
    delivered (:func:`flowpy._demand.replenish_limit`). Every
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
        self._limit = replenish_limit(prefetch)  # consumed items that trigger the next request
        # Appended by the upstream's on_next, popped only by the drain loop
        # (a pass pops no more than the `available` items _prepare counted);
        # holds at most `prefetch` items while the upstream obeys rule 1.1.
        self._queue: deque[T] = deque()
        self._lock = threading.Lock()
        # --- Guarded by self._lock ---------------------------------------
        self._subscribers: tuple[_MulticastSubscription[T], ...] = ()  # copy on write
        self._terminated = False  # subscribers were given their terminal; no more join
        self._done = False  # the upstream signalled its terminal; set once
        self._error: BaseException | None = None  # the upstream's failure, if any
        self._failures = False  # some subscription holds an invalid-request error
        # --- Written only by the drain loop ------------------------------
        self._consumed = 0  # items taken from the queue since the last upstream request
        self._view: _View[T] = _View()  # written by _prepare, read by the pass that follows
        # Runs _pass on the thread that made progress possible, one at a time;
        # _prepare runs under self._lock as each pass is claimed.
        self._signal = SerialDrain.inline(self._pass, lock=self._lock, prepare=self._prepare).signal
        # --- Guarded by its own (leaf) lock, also taken under self._lock --
        self._upstream = UpstreamSlot()

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

    def snapshot(self) -> PublisherSnapshot:
        """Read the queue and each subscriber's counters, for monitoring; takes no lock.

        The queue is shared, so every subscriber shows its length as
        ``buffered`` and ``prefetch`` as ``capacity``; ``demand`` is what it
        requested and has not received, ``delivered`` the items handed to it
        (counted once per drain pass); nothing is ever dropped. ``closed`` is
        whether subscribers were given their terminal signal. Approximate
        across subscribers (see :mod:`flowpy.snapshots`).
        """
        buffered = len(self._queue)
        prefetch = self._prefetch
        subscribers = tuple(
            SubscriberSnapshot(s.subscriber, buffered, prefetch, unfilled_demand(s.requested, s.emitted), s.emitted, 0)
            for s in self._subscribers
            if not s.cancelled
        )
        return PublisherSnapshot(self._terminated, prefetch, subscribers)

    # --- Publisher side ------------------------------------------------------

    def subscribe(self, subscriber: Subscriber[T]) -> None:
        """Attach ``subscriber``; after the end of the stream it gets the terminal signal at once.

        Raises:
            TypeError: if ``subscriber`` is ``None`` (rule 1.9).
        """
        require_subscriber(subscriber)
        subscription = _MulticastSubscription(self, subscriber)
        context = subscription.context
        subscribed = (
            signal_subscribe(subscriber, subscription)
            if context is None
            else context.run(signal_subscribe, subscriber, subscription)
        )
        if not subscribed:  # before it can be signalled (rule 1.9)
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
            subscription.signal_terminal(error)
        else:
            self._signal()

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
        self._signal()

    def _cancel(self, subscription: _MulticastSubscription[T]) -> None:
        with self._lock:
            if subscription.cancelled:
                return
            upstream = self._remove(subscription)
        if upstream is not None:
            call_subscription(upstream, None)
        self._signal()  # the leaver may have been the slowest one

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
        if self._upstream.accept(subscription):  # refused once ended: every end goes through the slot
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
        self._signal()

    def _overflow(self) -> None:
        self._upstream.cancel()
        self._end(MissingBackpressureError(f"upstream sent more than the {self._prefetch} items requested (rule 1.1)"))

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
        self._signal()

    # --- The drain loop ------------------------------------------------------

    def _prepare(self) -> None:
        """Read the state for the next pass into ``self._view``; detach subscriptions with invalid requests.

        Caller holds self._lock (the SerialDrain calls it as it claims a pass).
        """
        view = self._view
        subscribers = self._subscribers
        if self._failures:
            self._failures = False
            failed = [s for s in subscribers if s.error is not None]
            upstream = None
            for subscription in failed:
                upstream = self._remove(subscription) or upstream
            view.failed = failed
            view.upstream = upstream
            subscribers = self._subscribers
        demand = -1
        for subscription in subscribers:
            remaining = subscription.requested - subscription.emitted
            if demand < 0 or remaining < demand:
                demand = remaining
        view.subscribers = subscribers
        view.demand = demand
        view.available = len(self._queue)
        view.done = self._done
        view.error = self._error
        view.terminated = self._terminated

    def _pass(self, first: bool) -> bool:
        """One pass of the drain loop over the state :meth:`_prepare` read; returns ``False``.

        Delivers up to the least demand of the items that were queued when
        the pass was claimed, to the subscribers read then: an item queued
        since may follow a subscriber that joined since, so it is left to the
        next pass (the signal that queued it counts one), which serves that
        subscriber too.
        A subscriber whose ``on_next`` raises is cancelled and the error
        reported (rule 2.13); the others go on. A raised ``BaseException``
        that is not an ``Exception`` ends the processor and is re-raised at
        the end of the pass; a later one in the same pass is re-raised
        instead, chained to it (:func:`~flowpy._signals.chain_fatal`). ``done`` was read before the queue is checked
        for emptiness: every item precedes the terminal signal, so
        done-then-empty means nothing is left.
        """
        view = self._view
        if view.failed:
            failed, view.failed = view.failed, []
            for subscription in failed:
                subscription.signal_terminal(subscription.error)
        if view.upstream is not None:
            upstream, view.upstream = view.upstream, None
            call_subscription(upstream, None)
        queue = self._queue
        if view.terminated:
            queue.clear()
            return False
        subscribers = view.subscribers
        if not subscribers:
            return False
        demand = min(view.demand, view.available)
        fatal: BaseException | None = None
        if demand > 0:
            limit = self._limit
            consumed = self._consumed
            emitted = 0
            while emitted < demand:
                item = queue.popleft()
                for subscription in subscribers:
                    if subscription.cancelled:
                        continue
                    try:
                        subscription.deliver(item)
                    except BaseException as exc:
                        subscription.cancel()
                        report(exc, f"on_next of {subscription.subscriber!r} raised (rule 2.13)")
                        if not isinstance(exc, Exception):
                            fatal = chain_fatal(fatal, exc)
                emitted += 1
                consumed += 1
                if consumed == limit:
                    consumed = 0
                    current = self._upstream.current
                    if current is not None:
                        call_subscription(current, limit)
            self._consumed = consumed
            for subscription in subscribers:
                subscription.emitted += emitted
        if view.done and not queue:
            self._terminate(view.error)
        elif fatal is not None:
            self._abort(fatal)
        if fatal is not None:
            raise fatal
        return False

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
                subscription.signal_terminal(error)
            except BaseException as exc:  # not an Exception: the others still get their signal
                fatal = chain_fatal(fatal, exc)
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
    connected, it cancels the upstream and closes. Closing it (``close()``,
    ``close_exceptionally()``) cancels the upstream, now or as soon as it
    arrives.

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
        self._upstream = UpstreamSlot()
        self._count_lock = threading.Lock()
        # --- Guarded by self._count_lock ---------------------------------
        self._started = False  # the first item was requested; set once
        self._downstream = 0  # subscribers counted by subscribe() that have not left
        # The wrapper of each of those subscribers: one per subscriber, so that
        # subscribing it again hands the publisher the same object, which it
        # recognises as a duplicate by identity.
        self._wrappers: list[_Downstream[R]] = []

    # --- Subscriber side -----------------------------------------------------

    def on_subscribe(self, subscription: Subscription) -> None:
        """Accept the first upstream and request one item; cancel any later one (rule 2.5).

        Raises:
            TypeError: if ``subscription`` is ``None`` (rule 2.13).
        """
        if self._upstream.accept(subscription):  # refused once closed: close() cancels the slot
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

    def close(self) -> None:
        """:meth:`SubmissionPublisher.close`; the upstream is cancelled too, now or as soon as it arrives."""
        super().close()
        self._upstream.cancel()  # after a terminal it was detached: nothing left to cancel (rule 2.4)

    def close_exceptionally(self, error: BaseException) -> None:
        """:meth:`SubmissionPublisher.close_exceptionally`; the upstream is cancelled too, now or as soon as it arrives.

        Raises:
            TypeError: if ``error`` is ``None`` or not an exception.
        """
        super().close_exceptionally(error)
        self._upstream.cancel()

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
            wrapper = self._wrapper_of(subscriber)
            fresh = wrapper is None
            if wrapper is None:
                wrapper = _Downstream(self, subscriber)
                self._wrappers.append(wrapper)
                self._downstream += 1
        added = False
        try:
            added = self._subscribe(wrapper)  # a duplicate: the publisher signals the existing subscription
        finally:
            if fresh and not added:  # refused by the executor: it never joined
                self._forget(wrapper)
        self._start()

    def is_subscribed(self, subscriber: Subscriber[R]) -> bool:
        """Whether ``subscriber`` has an open subscription here.

        Raises:
            TypeError: if ``subscriber`` is ``None``.
        """
        if subscriber is None:
            return super().is_subscribed(subscriber)
        with self._count_lock:
            wrapper = self._wrapper_of(subscriber)
        return wrapper is not None and super().is_subscribed(wrapper)

    def _wrapper_of(self, subscriber: Subscriber[R]) -> _Downstream[R] | None:
        """The wrapper of ``subscriber`` (the same object, or an equal one), if it has not left.

        Caller holds self._count_lock.
        """
        for wrapper in self._wrappers:
            if wrapper.wrapped is subscriber or wrapper.wrapped == subscriber:
                return wrapper
        return None

    def _forget(self, wrapper: _Downstream[R]) -> bool:
        """Uncount ``wrapper``'s subscriber; return whether it was the last one."""
        with self._count_lock:
            if not any(w is wrapper for w in self._wrappers):
                return False  # forgotten already (a refused subscribe that also signalled it)
            self._wrappers.remove(wrapper)
            self._downstream -= 1
            return self._downstream == 0

    @property
    def subscribers(self) -> list[Subscriber[R]]:
        """A new list of the subscribers of open subscriptions (for monitoring)."""
        return [s.wrapped if isinstance(s, _Downstream) else s for s in super().subscribers]

    def snapshot(self) -> PublisherSnapshot:
        """:meth:`SubmissionPublisher.snapshot`, naming each subscriber as given to :meth:`subscribe`."""
        snapshot = super().snapshot()
        readings = tuple(
            dataclasses.replace(r, subscriber=r.subscriber.wrapped) if isinstance(r.subscriber, _Downstream) else r
            for r in snapshot.subscribers
        )
        return dataclasses.replace(snapshot, subscribers=readings)

    def _left(self, wrapper: _Downstream[R]) -> None:
        last = self._forget(wrapper)
        if last and self._upstream.current is not None and not self.is_closed:
            self._upstream.cancel()
            self.close()


class _Downstream(Subscriber[R]):
    """Wraps a subscriber of a :class:`TransformProcessor` to see it leave.

    The processor keeps one wrapper per subscriber (``_wrappers``), so a
    duplicate ``subscribe`` hands the publisher the very same object.
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
        self.processor._left(self)

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
