"""Correct reference implementations the TCK must pass: a range publisher, two subscribers, a processor.

They exist to show that the verifications accept what the rules allow; the
broken variants in ``broken.py`` derive from them with one defect each.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Any, Generic, TypeVar

from flowpy import flow
from flowpy._demand import MAX_DEMAND, add_demand, check_request
from flowpy.executors import Executor, as_execute
from flowpy.tck import SubscriberPuppet, WhiteboxSubscriberProbe

T = TypeVar("T")


# --- A synchronous, trampolined range publisher --------------------------------


class RangePublisher(flow.Publisher[int]):
    """Publishes ``start .. start + count - 1`` on the thread that calls ``request``.

    Emission is trampolined: only the ``request`` that raises the demand from
    zero emits, so ``on_next -> request`` never recurses (rule 3.3).
    """

    def __init__(self, start: int, count: int) -> None:
        self.start = start
        self.count = count

    def subscribe(self, subscriber: flow.Subscriber[int]) -> None:
        if subscriber is None:
            raise TypeError("subscriber must not be None (rule 1.9)")
        subscriber.on_subscribe(RangeSubscription(subscriber, self.start, self.start + self.count))

    def __repr__(self) -> str:
        return f"RangePublisher({self.start}, {self.count})"


class RangeSubscription(flow.Subscription):
    def __init__(self, subscriber: flow.Subscriber[int], index: int, end: int) -> None:
        self.subscriber: flow.Subscriber[int] | None = subscriber
        self.index = index
        self.end = end
        # --- Guarded by self.lock ------------------------------------------
        self.lock = threading.Lock()
        self.requested = 0  # outstanding demand; > 0 means an emit loop runs
        self.error: BaseException | None = None  # a rule 3.9 violation to signal
        self.cancelled = False

    def request(self, n: int) -> None:
        with self.lock:
            if self.cancelled:
                return
            error = check_request(n)
            if error is not None:
                self.error = error
                n = 1  # start the loop, which signals the error
            running = self.requested > 0
            self.requested = add_demand(self.requested, n)
            if running:
                return
        self.emit()

    def emit(self) -> None:
        while True:
            with self.lock:
                subscriber = self.subscriber
                if self.cancelled or subscriber is None:
                    return
                error, self.error = self.error, None
                if error is not None or self.index == self.end:
                    self._cancel_locked()
                else:
                    item = self.index
                    self.index += 1
            if error is not None:
                subscriber.on_error(error)
                return
            if self.subscriber is None:
                subscriber.on_complete()
                return
            subscriber.on_next(item)
            with self.lock:
                # Decremented only after on_next returned, so that a request
                # made inside on_next sees a running loop and does not recurse.
                if self.requested != MAX_DEMAND:
                    self.requested -= 1
                if self.requested == 0:
                    return

    def _cancel_locked(self) -> None:
        self.cancelled = True
        self.subscriber = None  # rule 3.13

    def cancel(self) -> None:
        with self.lock:
            self._cancel_locked()


# --- Subscribers -------------------------------------------------------------------


class SyncSubscriber(flow.Subscriber[T]):
    """Requests one item at a time, on the publisher's thread, and keeps what it receives."""

    def __init__(self) -> None:
        self.subscription: flow.Subscription | None = None
        self.received: list[T] = []

    def on_subscribe(self, subscription: flow.Subscription) -> None:
        if subscription is None:
            raise TypeError("subscription must not be None (rule 2.13)")
        if self.subscription is not None:
            subscription.cancel()  # rule 2.5
            return
        self.subscription = subscription  # before request: on_next may come inside it (rule 3.10)
        subscription.request(1)

    def on_next(self, item: T) -> None:
        if item is None:
            raise TypeError("item must not be None (rule 2.13)")
        if self.subscription is not None:
            self.received.append(item)
            self.subscription.request(1)

    def on_error(self, error: BaseException) -> None:
        if error is None:
            raise TypeError("error must not be None (rule 2.13)")

    def on_complete(self) -> None:
        return None


class WhiteboxSyncSubscriber(SyncSubscriber[T]):
    """A SyncSubscriber that reports to a whitebox probe."""

    def __init__(self, probe: WhiteboxSubscriberProbe[T]) -> None:
        super().__init__()
        self.probe = probe

    def on_subscribe(self, subscription: flow.Subscription) -> None:
        super().on_subscribe(subscription)
        current = self.subscription
        assert current is not None

        class Puppet(SubscriberPuppet):
            def trigger_request(self, elements: int) -> None:
                current.request(elements)

            def signal_cancel(self) -> None:
                current.cancel()

        self.probe.register_on_subscribe(Puppet())

    def on_next(self, item: T) -> None:
        super().on_next(item)
        self.probe.register_on_next(item)

    def on_error(self, error: BaseException) -> None:
        super().on_error(error)
        self.probe.register_on_error(error)

    def on_complete(self) -> None:
        super().on_complete()
        self.probe.register_on_complete()


class AsyncSubscriber(flow.Subscriber[T]):
    """Handles every signal on an executor, one at a time, in arrival order (rules 2.2, 2.7, 2.11).

    The signal methods check for ``None`` on the caller's thread (rule 2.13)
    and queue the signal; ``request``/``cancel`` by the puppet are queued the
    same way, so calls on the subscription are serial.
    """

    def __init__(self, executor: Executor) -> None:
        self._execute = as_execute(executor)
        self._queue: deque[tuple[str, Any]] = deque()
        # --- Guarded by self._lock ---------------------------------------
        self._lock = threading.Lock()
        self._scheduled = False  # a drain task is queued or running
        # --- Touched only by the drain task ------------------------------
        self.subscription: flow.Subscription | None = None
        self.done = False
        self.received: list[T] = []

    def on_subscribe(self, subscription: flow.Subscription) -> None:
        if subscription is None:
            raise TypeError("subscription must not be None (rule 2.13)")
        self._signal("subscribe", subscription)

    def on_next(self, item: T) -> None:
        if item is None:
            raise TypeError("item must not be None (rule 2.13)")
        self._signal("next", item)

    def on_error(self, error: BaseException) -> None:
        if error is None:
            raise TypeError("error must not be None (rule 2.13)")
        self._signal("error", error)

    def on_complete(self) -> None:
        self._signal("complete", None)

    def _signal(self, kind: str, value: Any) -> None:
        self._queue.append((kind, value))
        with self._lock:
            if self._scheduled:
                return
            self._scheduled = True
        self._execute(self._drain)

    def _drain(self) -> None:
        while True:
            while self._queue:
                kind, value = self._queue.popleft()
                if not self.done or kind == "subscribe":
                    self._handle(kind, value)
            with self._lock:
                if not self._queue:
                    self._scheduled = False
                    return

    def _handle(self, kind: str, value: Any) -> None:
        if kind == "subscribe":
            if self.subscription is not None or self.done:
                value.cancel()  # rule 2.5
                return
            self.subscription = value
            self.when_subscribed(value)
            value.request(1)
        elif kind == "next":
            self.received.append(value)
            self.when_next(value)
            if self.subscription is not None and not self.done:
                self.subscription.request(1)
        elif kind == "request":
            if self.subscription is not None and not self.done:
                self.subscription.request(value)
        elif kind == "cancel":
            if self.subscription is not None and not self.done:
                self.done = True
                self.subscription.cancel()
        elif kind == "error":
            self.done = True  # rule 2.4: the subscription is not touched again
            self.when_error(value)
        else:
            self.done = True
            self.when_complete()

    # Hooks, run on the executor.
    def when_subscribed(self, subscription: flow.Subscription) -> None:
        return None

    def when_next(self, item: T) -> None:
        return None

    def when_error(self, error: BaseException) -> None:
        return None

    def when_complete(self) -> None:
        return None


class WhiteboxAsyncSubscriber(AsyncSubscriber[T]):
    """An AsyncSubscriber that reports to a whitebox probe from its executor."""

    def __init__(self, executor: Executor, probe: WhiteboxSubscriberProbe[T]) -> None:
        super().__init__(executor)
        self.probe = probe

    def when_subscribed(self, subscription: flow.Subscription) -> None:
        subscriber = self

        class Puppet(SubscriberPuppet):
            def trigger_request(self, elements: int) -> None:
                subscriber._signal("request", elements)

            def signal_cancel(self) -> None:
                subscriber._signal("cancel", None)

        self.probe.register_on_subscribe(Puppet())

    def when_next(self, item: T) -> None:
        self.probe.register_on_next(item)

    def when_error(self, error: BaseException) -> None:
        self.probe.register_on_error(error)

    def when_complete(self) -> None:
        self.probe.register_on_complete()


# --- Processors ---------------------------------------------------------------------


class _TerminatingProcessor(flow.Processor[T, T]):
    """A processor whose upstream terminal signals both go to ``_terminate``."""

    def on_error(self, error: BaseException) -> None:
        if error is None:
            raise TypeError("error must not be None (rule 2.13)")
        self._terminate(error)

    def on_complete(self) -> None:
        self._terminate(True)

    def _terminate(self, terminal: BaseException | bool) -> None:
        """Handle the error, or ``True`` for completion."""
        raise NotImplementedError


# A pass-through processor.


class IdentityProcessor(_TerminatingProcessor[T]):
    """A unicast processor: one downstream, whose demand goes upstream unchanged.

    Requests made before the upstream subscription arrives, or inside the
    downstream's ``on_subscribe``, are held and forwarded once both exist; a
    terminal signal that arrives before the downstream is ready is held the
    same way (rule 4.2 passes it on as soon as possible). A second downstream
    is rejected with ``on_subscribe`` then ``on_error`` (rule 1.9).
    """

    def __init__(self) -> None:
        # --- Guarded by self._lock -----------------------------------------
        self._lock = threading.Lock()
        self._upstream: flow.Subscription | None = None
        self._downstream: flow.Subscriber[T] | None = None  # None again after cancel (rule 3.13)
        self._subscribed = False  # a downstream was accepted
        self._ready = False  # the downstream's on_subscribe has returned
        self._pending = 0  # demand not yet forwarded upstream
        self._invalid: int | None = None  # a non-positive request to forward upstream (rule 3.9)
        self._terminal: BaseException | bool | None = None  # held error, or True for completion
        self._cancelled = False

    # Upstream side.

    def on_subscribe(self, subscription: flow.Subscription) -> None:
        if subscription is None:
            raise TypeError("subscription must not be None (rule 2.13)")
        with self._lock:
            duplicate = self._upstream is not None
            if not duplicate:
                self._upstream = subscription
            cancelled = self._cancelled
            flush = self._take_demand_locked() if self._ready else None
        if duplicate or cancelled:
            subscription.cancel()  # rule 2.5
        elif flush is not None:
            self._forward(subscription, *flush)

    def on_next(self, item: T) -> None:
        if item is None:
            raise TypeError("item must not be None (rule 2.13)")
        downstream = self._downstream
        if downstream is not None:
            downstream.on_next(item)

    def _terminate(self, terminal: BaseException | bool) -> None:
        with self._lock:
            if not self._ready:
                self._terminal = terminal
                return
            downstream, self._downstream = self._downstream, None
        if downstream is not None:
            _deliver(downstream, terminal)

    # Downstream side.

    def subscribe(self, subscriber: flow.Subscriber[T]) -> None:
        if subscriber is None:
            raise TypeError("subscriber must not be None (rule 1.9)")
        with self._lock:
            rejected = self._subscribed
            if not rejected:
                self._subscribed = True
                self._downstream = subscriber
        if rejected:
            subscriber.on_subscribe(_Rejected())
            subscriber.on_error(RuntimeError("IdentityProcessor supports only one subscriber (rule 1.9)"))
            return
        subscriber.on_subscribe(_Downstream(self))
        with self._lock:
            self._ready = True
            terminal, self._terminal = self._terminal, None
            upstream = self._upstream
            flush = self._take_demand_locked() if upstream is not None else None
            if terminal is not None:
                self._downstream = None
        if upstream is not None and flush is not None:
            self._forward(upstream, *flush)
        if terminal is not None:
            _deliver(subscriber, terminal)

    def _take_demand_locked(self) -> tuple[int, int | None]:
        # Caller holds self._lock.
        pending, invalid = self._pending, self._invalid
        self._pending, self._invalid = 0, None
        return pending, invalid

    @staticmethod
    def _forward(upstream: flow.Subscription, pending: int, invalid: int | None) -> None:
        if invalid is not None:
            upstream.request(invalid)  # the upstream signals the rule 3.9 error through us
        elif pending:
            upstream.request(pending)

    def _request(self, n: int) -> None:
        with self._lock:
            if self._cancelled:
                return
            upstream = self._upstream if self._ready else None
            if upstream is None:
                if check_request(n) is None:
                    self._pending = add_demand(self._pending, n)
                else:
                    self._invalid = n
                return
        upstream.request(n)

    def _cancel(self) -> None:
        with self._lock:
            self._cancelled = True
            self._downstream = None
            upstream = self._upstream
        if upstream is not None:
            upstream.cancel()


def _deliver(subscriber: flow.Subscriber[T], terminal: BaseException | bool) -> None:
    if terminal is True:
        subscriber.on_complete()
    else:
        assert isinstance(terminal, BaseException)
        subscriber.on_error(terminal)


class _Downstream(flow.Subscription):
    def __init__(self, processor: IdentityProcessor[Any]) -> None:
        self._processor = processor

    def request(self, n: int) -> None:
        self._processor._request(n)

    def cancel(self) -> None:
        self._processor._cancel()


class _Rejected(flow.Subscription):
    def request(self, n: int) -> None:
        return None

    def cancel(self) -> None:
        return None


def range_publisher(elements: int) -> RangePublisher:
    """The runner's factory for :class:`RangePublisher`."""
    return RangePublisher(0, elements)


# A multicast processor.


class MulticastProcessor(_TerminatingProcessor[T]):
    """Sends every item to every subscriber present when it arrives.

    Upstream demand is one item at a time, asked for while some subscriber
    has more demand than items queued for it; each subscriber has its own
    queue, so a slow one does not hold the others back (no coordinated
    emission). Items that arrive before anyone subscribed are never
    requested. A terminal signal goes to every subscriber at once, ahead of
    queued items (rule 4.2).

    Every signal is delivered under one re-entrant lock, by whichever thread
    drains; a drain already running on this thread absorbs the work of
    nested calls, so recursion stays bounded (rule 3.3).
    """

    def __init__(self) -> None:
        self._lock = threading.RLock()
        # --- Guarded by self._lock -----------------------------------------
        self._upstream: flow.Subscription | None = None
        self._in_flight = False  # an upstream request(1) is unanswered
        self._subscriptions: list[_MulticastSubscription[T]] = []
        self._terminal: BaseException | bool | None = None  # error, or True once completed
        self._draining = False

    # Upstream side.

    def on_subscribe(self, subscription: flow.Subscription) -> None:
        if subscription is None:
            raise TypeError("subscription must not be None (rule 2.13)")
        with self._lock:
            if self._upstream is not None or self._terminal is not None:
                duplicate = True
            else:
                duplicate = False
                self._upstream = subscription
        if duplicate:
            subscription.cancel()  # rule 2.5
        else:
            self._drain()

    def on_next(self, item: T) -> None:
        if item is None:
            raise TypeError("item must not be None (rule 2.13)")
        with self._lock:
            self._in_flight = False
            for subscription in self._subscriptions:
                subscription.queue.append(item)
        self._drain()

    def _terminate(self, terminal: BaseException | bool) -> None:
        with self._lock:
            if self._terminal is None:
                self._terminal = terminal
        self._drain()

    # Downstream side.

    def subscribe(self, subscriber: flow.Subscriber[T]) -> None:
        if subscriber is None:
            raise TypeError("subscriber must not be None (rule 1.9)")
        subscription = _MulticastSubscription(self, subscriber)
        with self._lock:
            subscriber.on_subscribe(subscription)
            self._subscriptions.append(subscription)
        self._drain()

    def _drain(self) -> None:
        with self._lock:
            if self._draining:
                return  # the drain below on this thread picks the work up
            self._draining = True
            try:
                self._drain_locked()
            finally:
                self._draining = False

    def _drain_locked(self) -> None:
        # Caller holds self._lock.
        progress = True
        while progress:
            progress = False
            for subscription in list(self._subscriptions):
                subscriber = subscription.subscriber
                if subscription.error is not None:
                    self._subscriptions.remove(subscription)
                    error, subscription.error = subscription.error, None
                    subscription.subscriber = None
                    if subscriber is not None:
                        subscriber.on_error(error)
                    progress = True
                elif subscriber is None:
                    self._subscriptions.remove(subscription)
                elif self._terminal is not None and (not subscription.queue or self._terminal is not True):
                    self._subscriptions.remove(subscription)
                    subscription.subscriber = None
                    _deliver(subscriber, self._terminal)
                    progress = True
                elif subscription.queue and subscription.demand > 0:
                    if subscription.demand != MAX_DEMAND:
                        subscription.demand -= 1
                    subscriber.on_next(subscription.queue.popleft())
                    progress = True
            wanted = any(s.demand > len(s.queue) for s in self._subscriptions if s.subscriber is not None)
            if wanted and self._terminal is None and self._upstream is not None and not self._in_flight:
                self._in_flight = True
                self._upstream.request(1)
                progress = True


class _MulticastSubscription(flow.Subscription, Generic[T]):
    def __init__(self, processor: MulticastProcessor[T], subscriber: flow.Subscriber[T]) -> None:
        self.processor = processor
        self.subscriber: flow.Subscriber[T] | None = subscriber  # None once cancelled or terminated
        self.queue: deque[T] = deque()
        self.demand = 0
        self.error: BaseException | None = None  # a rule 3.9 violation to signal

    def request(self, n: int) -> None:
        with self.processor._lock:
            if self.subscriber is None:
                return
            error = check_request(n)
            if error is not None:
                self.error = error
            else:
                self.demand = add_demand(self.demand, n)
        self.processor._drain()

    def cancel(self) -> None:
        processor = self.processor
        with processor._lock:
            if self.subscriber is None:
                return
            self.subscriber = None  # rule 3.13: the drain removes this subscription
            self.queue.clear()
            upstream = processor._upstream
            if all(s.subscriber is None for s in processor._subscriptions) and upstream is not None:
                # The last subscriber left: nobody needs the upstream any more.
                processor._terminal = processor._terminal or CancelledUpstream()
                upstream.cancel()


class CancelledUpstream(RuntimeError):
    """Signalled to subscribers arriving after the last one cancelled and the upstream was cancelled."""

    def __init__(self) -> None:
        super().__init__("MulticastProcessor cancelled its upstream when its last subscriber cancelled")


def multicast_processor(buffer_size: int) -> MulticastProcessor[int]:
    """The runner's factory for :class:`MulticastProcessor` (it buffers per subscriber, without bound)."""
    return MulticastProcessor()
