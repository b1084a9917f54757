"""Subscribers: bases to build on, a callback subscriber, and blocking consumption.

* :class:`SyncSubscriber` handles each item on the publisher's thread and
  requests one at a time: subclass it and implement ``when_next``.
* :class:`AsyncSubscriber` hands every signal to an executor and handles
  them there, one at a time (rule 2.2): implement ``when_next``,
  ``when_complete`` and ``when_error``.
* :class:`LambdaSubscriber` calls plain functions and requests in batches.
* :func:`iterate` turns a publisher into a blocking iterator; :func:`collect`
  gathers all items into a :class:`concurrent.futures.Future`.

Protocol:   every subscriber here cancels a second subscription (rule 2.5),
            raises ``TypeError`` for a ``None`` argument (rule 2.13), never
            calls the subscription from ``on_error``/``on_complete``
            (rule 2.3) and ignores signals after its terminal one or after it
            cancelled (rule 2.8). A callback that raises cancels the
            subscription and is reported as the stream's error.
Threading:  ``on_*`` methods may be called from any thread, serially
            (rule 1.3). ``cancel()`` and ``close()`` are thread-safe.
"""

from __future__ import annotations

import enum
import threading
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from types import TracebackType
from typing import TypeVar

from flowpy._checks import check_timeout, none_error, require, require_callable, require_positive_int, require_publisher
from flowpy._consumer import no_result, subscribe_future
from flowpy._context import capture
from flowpy._core.serial import SerialDrain
from flowpy._core.upstream import UpstreamSlot
from flowpy._demand import MAX_DEMAND, replenish_limit
from flowpy._signals import call_subscription, report, reraise_fatal
from flowpy.executors import DEFAULT, Default, Executor, resolve_execute
from flowpy.flow import Publisher, Subscriber, Subscription

__all__ = [
    "AsyncSubscriber",
    "BlockingIterator",
    "LambdaSubscriber",
    "SyncSubscriber",
    "collect",
    "iterate",
]

T = TypeVar("T")
T_contra = TypeVar("T_contra", contravariant=True)


def _check_prefetch(prefetch: object) -> int:
    return min(require_positive_int(prefetch, "prefetch"), MAX_DEMAND)


# --- SyncSubscriber ------------------------------------------------------------


class SyncSubscriber(Subscriber[T_contra], ABC):
    """A subscriber that handles items on the publisher's thread, one request at a time.

    Implement :meth:`when_next`; override :meth:`when_complete` and
    :meth:`when_error` to learn how the stream ended. ``when_next`` returns
    ``True`` for the next item (``request(1)``) or ``False`` to cancel. If
    it raises, the subscription is cancelled and ``when_error`` receives the
    exception. Use it only for quick handling: it runs inside the
    publisher's call (rule 2.2); otherwise use :class:`AsyncSubscriber`.
    """

    def __init__(self) -> None:
        self._upstream = UpstreamSlot()  # the one subscription (rule 2.5)
        self._done = False  # a terminal signal arrived or this side cancelled

    @abstractmethod
    def when_next(self, item: T_contra) -> bool:
        """Handle one item; return whether to receive the next one."""

    def when_complete(self) -> None:
        """Called once when the stream completes. The default does nothing."""

    def when_error(self, error: BaseException) -> None:
        """Called once when the stream fails, or ``when_next`` raised. The default logs ``error``."""
        report(error, f"{self!r} received on_error")

    def on_subscribe(self, subscription: Subscription) -> None:
        """Keep the first subscription and ``request(1)``; cancel any later one (rule 2.5).

        Raises:
            TypeError: if ``subscription`` is ``None`` (rule 2.13).
        """
        if self._upstream.accept(subscription):  # kept before request: it may emit at once (rule 3.10)
            call_subscription(subscription, 1)

    @property
    def _subscription(self) -> Subscription | None:
        return self._upstream.current

    def on_next(self, item: T_contra) -> None:
        """Pass ``item`` to :meth:`when_next`, then request one more or cancel.

        Raises:
            TypeError: if ``item`` is ``None`` (rule 2.13).
        """
        if item is None:  # inline: once per item; only a failure calls
            raise none_error("item", "2.13")
        subscription = self._subscription
        if self._done or subscription is None:
            return
        _handle_one(self, subscription, item)

    def _finish(self) -> None:
        """Become done and cancel the subscription (rule 2.6)."""
        self._done = True
        self._upstream.cancel()

    def on_error(self, error: BaseException) -> None:
        """Pass ``error`` to :meth:`when_error` unless already done.

        Raises:
            TypeError: if ``error`` is ``None`` (rule 2.13).
        """
        require(error, "error", "2.13")
        if not self._done:
            self._done = True
            self.when_error(error)

    def on_complete(self) -> None:
        """Call :meth:`when_complete` unless already done."""
        if not self._done:
            self._done = True
            self.when_complete()


# --- AsyncSubscriber -----------------------------------------------------------


class _Signal(enum.Enum):
    SUBSCRIBE = "on_subscribe"
    NEXT = "on_next"
    ERROR = "on_error"
    COMPLETE = "on_complete"


class AsyncSubscriber(Subscriber[T_contra], ABC):
    """A subscriber that handles its signals on an executor, serially, one request at a time.

    The ``on_*`` methods only check their argument and queue the signal; the
    handling runs in executor tasks, never two at once, and each task handles
    at most ``batch_size`` signals before yielding its thread. Implement
    :meth:`when_next` (return ``True`` for the next item, ``False`` to
    cancel), :meth:`when_complete` and :meth:`when_error`. If ``when_next``
    raises, the subscription is cancelled and ``when_error`` receives the
    exception. If the executor refuses a task, the subscription is cancelled
    and ``when_error`` receives the executor's exception on the refused
    thread. Do not override the ``on_*`` methods.
    """

    def __init__(self, executor: Executor | Default = DEFAULT, *, batch_size: int = 64) -> None:
        """Args:
            executor: where signals are handled; the shared default pool if left out.
            batch_size: the most signals one task handles.

        Raises:
            TypeError: if ``executor`` is ``None`` or not an executor, or
                ``batch_size`` is not an ``int``.
            ValueError: if ``batch_size`` is not positive.
        """
        self._batch_size = require_positive_int(batch_size, "batch_size")
        # Appended by any thread (deque appends are atomic), popped only by the drain.
        self._signals: deque[tuple[_Signal, object]] = deque()
        # The handling runs in a copy of the context that on_subscribe came in
        # (a flowpy publisher calls it in the context current at subscribe()).
        self._serial = SerialDrain(resolve_execute(executor), self._drain, self._rejected, context=None)
        # --- Written only inside the serial drain (or on rejection) -------
        self._upstream = UpstreamSlot()  # the one subscription (rule 2.5)
        self._done = False  # also read, racily, by _enqueue to drop late signals

    @abstractmethod
    def when_next(self, item: T_contra) -> bool:
        """Handle one item on the executor; return whether to receive the next one."""

    @abstractmethod
    def when_complete(self) -> None:
        """Handle the completion of the stream, on the executor."""

    @abstractmethod
    def when_error(self, error: BaseException) -> None:
        """Handle the failure of the stream (or of ``when_next``), on the executor."""

    def on_subscribe(self, subscription: Subscription) -> None:
        """Queue the subscription; raises ``TypeError`` for ``None`` (rule 2.13).

        The first call's context (copied) is the one every handler runs in.
        """
        require(subscription, "subscription", "2.13")
        if self._serial.context is None:
            self._serial.context = capture()
        self._enqueue(_Signal.SUBSCRIBE, subscription)

    def on_next(self, item: T_contra) -> None:
        """Queue an item; raises ``TypeError`` for ``None`` (rule 2.13)."""
        if item is None:  # inline: once per item; only a failure calls
            raise none_error("item", "2.13")
        self._enqueue(_Signal.NEXT, item)

    def on_error(self, error: BaseException) -> None:
        """Queue the failure; raises ``TypeError`` for ``None`` (rule 2.13)."""
        require(error, "error", "2.13")
        self._enqueue(_Signal.ERROR, error)

    def on_complete(self) -> None:
        """Queue the completion."""
        self._enqueue(_Signal.COMPLETE, None)

    def _enqueue(self, kind: _Signal, value: object) -> None:
        if self._done:  # racy read: the drain (or a refused task) ended this subscriber
            if kind is _Signal.SUBSCRIBE:
                call_subscription(value, None)  # type: ignore[arg-type]  # rule 2.5
            return  # the drain would drop it (rule 2.8)
        self._signals.append((kind, value))
        self._serial.signal()

    @property
    def _subscription(self) -> Subscription | None:
        return self._upstream.current

    def _finish(self) -> None:
        """Become done and cancel the subscription (rule 2.6); only from the drain."""
        self._done = True
        self._upstream.cancel()

    def _rejected(self, exc: BaseException) -> None:
        if not self._upstream.connected:
            # on_subscribe was refused: cancel the subscription it carried.
            for kind, value in self._signals:
                if kind is _Signal.SUBSCRIBE:
                    self._upstream.accept(value)  # type: ignore[arg-type]
                    break
        self._signals.clear()
        if not self._done:
            self._finish()
            self.when_error(exc)

    def _drain(self, first: bool) -> bool:
        signals = self._signals
        for _ in range(self._batch_size):
            if not signals:
                return False
            kind, value = signals.popleft()
            if self._done:
                if kind is _Signal.SUBSCRIBE:
                    call_subscription(value, None)  # type: ignore[arg-type]
                continue
            if kind is _Signal.NEXT:
                self._handle_next(value)  # type: ignore[arg-type]
            elif kind is _Signal.SUBSCRIBE:
                self._handle_subscribe(value)  # type: ignore[arg-type]
            elif kind is _Signal.COMPLETE:
                self._done = True
                self.when_complete()
            else:
                self._done = True
                self.when_error(value)  # type: ignore[arg-type]
        return bool(signals)

    def _handle_subscribe(self, subscription: Subscription) -> None:
        if self._upstream.accept(subscription):
            call_subscription(subscription, 1)

    def _handle_next(self, item: T_contra) -> None:
        subscription = self._subscription
        if subscription is None:
            return  # rule 1.9 broken by the publisher: no subscription to request from
        _handle_one(self, subscription, item)


def _handle_one(
    owner: SyncSubscriber[T_contra] | AsyncSubscriber[T_contra], subscription: Subscription, item: T_contra
) -> None:
    """Pass ``item`` to ``owner.when_next``; then request one more, or finish.

    If ``when_next`` raises, ``owner`` finishes (cancelling the subscription)
    and ``when_error`` receives the exception (re-raised after if it is not
    an ``Exception``).
    """
    try:
        more = owner.when_next(item)
    except BaseException as exc:
        owner._finish()
        owner.when_error(exc)
        reraise_fatal(exc)
        return
    if more:
        call_subscription(subscription, 1)
    else:
        owner._finish()


# --- LambdaSubscriber ----------------------------------------------------------


def _ignore(item: object) -> None:
    """Drop an item that arrives after the end of the stream (rule 2.8)."""
    return None


class LambdaSubscriber(Subscriber[T_contra]):
    """A subscriber made of callbacks that requests in batches.

    It requests ``prefetch`` items on subscription and, each time three
    quarters of a window were consumed, requests that many more, so at most
    ``prefetch`` items are ever outstanding. ``prefetch=MAX_DEMAND``
    (``2**63 - 1``) requests everything at once.

    Callbacks run on the publisher's thread. If ``on_next`` raises, the
    subscription is cancelled and ``on_error`` receives the exception.
    Without an ``on_error`` callback, errors are logged on the ``flowpy``
    logger. :meth:`cancel` may be called from any thread, also before
    the subscription arrives.

    Example:
        >>> from flowpy.sources import RangePublisher
        >>> seen = []
        >>> RangePublisher(0, 3).subscribe(LambdaSubscriber(seen.append))
        >>> seen
        [0, 1, 2]
    """

    __slots__ = (
        "_deliver",
        "_done",
        "_limit",
        "_next",
        "_on_complete",
        "_on_error",
        "_prefetch",
        "_remaining",
        "_upstream",
    )

    def __init__(
        self,
        on_next: Callable[[T_contra], object],
        on_error: Callable[[BaseException], object] | None = None,
        on_complete: Callable[[], object] | None = None,
        *,
        prefetch: int = 256,
    ) -> None:
        """Args:
            on_next: called with each item.
            on_error: called once with the failure.
            on_complete: called once at the end.
            prefetch: the most items outstanding; the first request.

        Raises:
            TypeError: if ``on_next`` is not callable or ``prefetch`` not an ``int``.
            ValueError: if ``prefetch`` is not positive.
        """
        require_callable(on_next, "on_next")
        self._next = on_next
        self._on_error = on_error
        self._on_complete = on_complete
        self._prefetch = _check_prefetch(prefetch)
        self._limit = replenish_limit(self._prefetch)
        self._upstream = UpstreamSlot()  # the one subscription (rule 2.5); cancel() may come first
        # --- Touched by the signalling thread (serial, rule 1.3) ---------
        self._remaining = self._limit  # items until the next replenishing request
        self._done = False  # terminal seen, or on_next raised
        # on_next while live, a no-op once done: one call, no flag test per item
        self._deliver: Callable[[T_contra], object] = on_next

    @property
    def is_done(self) -> bool:
        """Whether the stream ended (terminal signal, failed callback or :meth:`cancel`)."""
        return self._done or self._upstream.cancelled

    @property
    def _subscription(self) -> Subscription | None:
        return self._upstream.current

    def cancel(self) -> None:
        """Cancel the subscription (now, or as soon as it arrives); thread-safe and idempotent."""
        self._upstream.cancel()

    def on_subscribe(self, subscription: Subscription) -> None:
        """Keep the first subscription and request ``prefetch``; cancel any later one.

        Raises:
            TypeError: if ``subscription`` is ``None`` (rule 2.13).
        """
        if self._upstream.accept(subscription):  # refused once done: _end() and _fail() end the slot
            call_subscription(subscription, self._prefetch)

    def on_next(self, item: T_contra) -> None:
        """Pass ``item`` to the callback; replenish the window when due.

        Raises:
            TypeError: if ``item`` is ``None`` (rule 2.13).
        """
        if item is None:
            raise none_error("item", "2.13")
        try:
            self._deliver(item)
        except BaseException as exc:
            self._fail(exc)
            reraise_fatal(exc)
            return
        remaining = self._remaining - 1
        if remaining:
            self._remaining = remaining
            return
        self._remaining = self._limit
        subscription = self._upstream.current  # None once cancelled
        if subscription is not None and not self._done:
            call_subscription(subscription, self._limit)

    def _end(self) -> None:
        """Ignore all later signals (rule 2.8) and refuse any later subscription (rule 2.5)."""
        self._done = True
        self._deliver = _ignore
        self._upstream.detach()

    def _fail(self, exc: BaseException) -> None:
        subscription = self._subscription
        self._end()
        if subscription is not None:
            call_subscription(subscription, None)
        self._signal_error(exc)

    def _signal_error(self, error: BaseException) -> None:
        if self._on_error is None:
            report(error, f"{self!r} has no on_error callback")
            return
        try:
            self._on_error(error)
        except BaseException as exc:
            report(exc, f"on_error callback of {self!r} raised")
            reraise_fatal(exc)

    def on_error(self, error: BaseException) -> None:
        """Pass ``error`` to the ``on_error`` callback (or log it), once.

        Raises:
            TypeError: if ``error`` is ``None`` (rule 2.13).
        """
        require(error, "error", "2.13")
        if self._done:
            return
        self._end()
        self._signal_error(error)

    def on_complete(self) -> None:
        """Call the ``on_complete`` callback, once."""
        if self._done:
            return
        self._end()
        if self._on_complete is not None:
            try:
                self._on_complete()
            except BaseException as exc:
                report(exc, f"on_complete callback of {self!r} raised")
                reraise_fatal(exc)

    def __repr__(self) -> str:
        return f"<LambdaSubscriber on_next={self._next!r} prefetch={self._prefetch}>"


# --- collect -------------------------------------------------------------------


def consume(publisher: Publisher[T], fn: Callable[[T], object]) -> Future[None]:
    """Subscribe to ``publisher`` and call ``fn(item)`` for every item, with unbounded demand.

    Returns:
        A future of ``None``, set when the stream completes, failed with the
        stream's error or with what ``fn`` raised (which cancels the
        subscription). Cancelling the future cancels the subscription.

    Raises:
        TypeError: if ``publisher`` is not a publisher or ``fn`` is not callable.
    """
    require_publisher(publisher)
    require_callable(fn, "fn")
    return subscribe_future(publisher, fn, no_result)


def collect(publisher: Publisher[T]) -> Future[list[T]]:
    """Subscribe to ``publisher`` and gather all its items, with unbounded demand.

    Returns:
        A future of the list of items in delivery order, set when the stream
        completes, or failed with the stream's error. Cancelling the future
        cancels the subscription.

    Raises:
        TypeError: if ``publisher`` is not a publisher.
    """
    require_publisher(publisher)
    items: list[T] = []
    return subscribe_future(publisher, items.append, lambda: items)


# --- iterate -------------------------------------------------------------------


class _BlockingSubscriber(Subscriber[T]):
    """Buffers up to ``prefetch`` items for a consuming thread."""

    def __init__(self, prefetch: int) -> None:
        self.prefetch = prefetch
        self.limit = replenish_limit(prefetch)
        # Serialises this side's request/cancel calls (rule 2.7): the
        # publisher's thread requests in on_subscribe, the consumer later.
        self.calls = threading.Lock()
        self.lock = threading.Lock()
        # Notified when an item or the terminal signal arrives.
        self.arrived = threading.Condition(self.lock)
        # --- Guarded by self.lock ------------------------------------------
        self.items: deque[T] = deque()
        self.terminal: BaseException | None = None
        self.ended = False  # terminal signal received
        self.cancelled = False  # the consumer closed the iterator
        # The one subscription (rule 2.5); cancel() may come before it.
        self.upstream = UpstreamSlot()

    def on_subscribe(self, subscription: Subscription) -> None:
        if self.upstream.accept(subscription):
            with self.calls:
                call_subscription(subscription, self.prefetch)

    def on_next(self, item: T) -> None:
        if item is None:  # inline: once per item; only a failure calls
            raise none_error("item", "2.13")
        with self.lock:
            if self.ended or self.cancelled:
                return
            self.items.append(item)
            self.arrived.notify()

    def on_error(self, error: BaseException) -> None:
        require(error, "error", "2.13")
        self._end(error)

    def on_complete(self) -> None:
        self._end(None)

    def _end(self, error: BaseException | None) -> None:
        with self.lock:
            if self.ended:
                return
            self.ended = True
            self.terminal = error
            self.arrived.notify()
        self.upstream.detach()

    def request(self, n: int) -> None:
        with self.lock:
            ended = self.ended
        subscription = None if ended else self.upstream.current
        if subscription is not None:
            with self.calls:
                call_subscription(subscription, n)

    def cancel(self) -> None:
        with self.lock:
            self.cancelled = True
            self.items.clear()
        with self.calls:
            self.upstream.cancel()


class BlockingIterator(Iterator[T]):
    """The iterator returned by :func:`iterate`; close it to cancel the subscription.

    Closing happens on :meth:`close`, at the end of a ``with`` block, when the
    iterator is garbage-collected (so ``break`` out of a ``for`` loop over
    ``iterate(...)`` cancels at once in CPython), and after a timeout.
    """

    def __init__(self, publisher: Publisher[T], prefetch: int, timeout: float | None) -> None:
        self._subscriber: _BlockingSubscriber[T] = _BlockingSubscriber(prefetch)
        self._timeout = timeout
        self._consumed = 0  # items taken since the last replenishing request
        self._closed = False
        publisher.subscribe(self._subscriber)

    def __iter__(self) -> BlockingIterator[T]:
        return self

    def __next__(self) -> T:
        """Return the next item, waiting for it.

        Raises:
            StopIteration: when the stream completed or the iterator was closed.
            TimeoutError: if no signal came within ``timeout`` seconds (the
                subscription is then cancelled).
            BaseException: the stream's error, as the publisher signalled it.
        """
        if self._closed:
            raise StopIteration
        subscriber = self._subscriber
        with subscriber.lock:
            if not subscriber.arrived.wait_for(lambda: subscriber.items or subscriber.ended, self._timeout):
                timed_out = True
            else:
                timed_out = False
                if subscriber.items:
                    item = subscriber.items.popleft()
                else:
                    self._closed = True
                    error = subscriber.terminal
                    if error is None:
                        raise StopIteration
                    raise error
        if timed_out:
            self.close()
            raise TimeoutError(f"no signal from the publisher within timeout={self._timeout!r} seconds")
        self._consumed += 1
        if self._consumed == subscriber.limit:
            self._consumed = 0
            subscriber.request(subscriber.limit)
        return item

    def close(self) -> None:
        """Cancel the subscription and drop buffered items; idempotent."""
        if not self._closed:
            self._closed = True
            self._subscriber.cancel()

    def __enter__(self) -> BlockingIterator[T]:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def __del__(self) -> None:
        if not getattr(self, "_closed", True):
            self.close()


def iterate(publisher: Publisher[T], *, prefetch: int = 256, timeout: float | None = None) -> BlockingIterator[T]:
    """Subscribe to ``publisher`` and return a blocking iterator over its items.

    At most ``prefetch`` items are requested ahead of the consumer; three
    quarters of the window are re-requested once consumed. Leaving the loop
    early (``break``, an exception, ``close()``, a ``with`` block) cancels
    the subscription, and the publisher sees ``cancel`` (rule 2.6).

    Args:
        publisher: the source; subscribed at once.
        prefetch: the most items buffered ahead of the consumer.
        timeout: the longest wait, in seconds, for each signal; ``None`` waits
            forever. One beyond ``threading.TIMEOUT_MAX`` (``inf`` included)
            waits that long, about 292 years.

    Raises:
        TypeError: if ``publisher`` is not a publisher, ``prefetch`` is not an
            ``int`` or ``timeout`` is not a number or ``None``.
        ValueError: if ``prefetch`` is not positive, or ``timeout`` is negative or NaN.
    """
    require_publisher(publisher)
    checked = _check_prefetch(prefetch)
    seconds = None if timeout is None else check_timeout(timeout)
    return BlockingIterator(publisher, checked, seconds)
