"""Cold publishers: over an iterable, over a range, and of fixed signals.

A *cold* publisher starts producing only when subscribed, and produces the
whole sequence afresh for each subscriber (rule 1.11: each subscription is
unicast). Use them to feed a pipeline from data you already have; use
:class:`flowpy.SubmissionPublisher` for items that arrive over time (hot).

* :class:`IterablePublisher` is asynchronous: each subscription gets its own
  iterator and signals on an executor, at most ``batch_size`` items per task.
* :class:`RangePublisher` and :func:`just` are synchronous: items are emitted
  on the thread that calls ``request``, trampolined so that a ``request``
  made from inside ``on_next`` never nests (rule 3.3, depth 1).
* :func:`empty` and :func:`error` signal their terminal at once, without
  demand (rules 2.9, 2.10).

Protocol:   ``request(n <= 0)`` ends a subscription with ``on_error(ValueError)``
            (rule 3.9), a non-``int`` ``n`` with ``on_error(TypeError)``;
            demand saturates at ``2**63 - 1`` (rule 3.17); ``request`` and
            ``cancel`` never raise (rules 3.15, 3.16); ``cancel`` drops the
            subscriber (rule 3.13). An empty source completes right after
            ``on_subscribe``, without demand.
Threading:  every method is thread-safe. A subscriber method that raises is
            logged on the ``flowpy`` logger and its subscription cancelled
            (rule 2.13).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Generic, TypeVar

from flowpy._checks import none_error, require_int, require_non_negative_int, require_positive_int, require_subscriber
from flowpy._core.pull import END, DemandSubscription
from flowpy._demand import add_demand, check_request
from flowpy._signals import on_next_raised, reraise_fatal, signal_subscribe, signal_terminal
from flowpy.executors import DEFAULT, Default, Executor, resolve_execute
from flowpy.flow import Publisher, Subscriber, Subscription

__all__ = ["IterablePublisher", "RangePublisher", "empty", "error", "just"]

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)

# Implementation overview
#
# _SequenceSubscription (RangePublisher, just) follows the Reactive Streams
# example RangePublisher: the outstanding demand doubles as the
# "work in progress" marker. The thread whose request() lifts it from 0 runs
# the emission loop; a request() made meanwhile (from on_next or another
# thread) only adds to it, and the loop sees the addition when it checks in
# under the lock before leaving. Emission is serial (rule 1.3) and a request
# from on_next returns at once, so the stack never grows (rule 3.3).
#
# _IterableSubscription hands its work to a SerialDrain on the executor:
# on_subscribe, each batch of items and the terminal signal all run in
# executor tasks, one at a time.


# --- Synchronous sequences ---------------------------------------------------


class _SequenceSubscription(Subscription, Generic[T]):
    """Emits ``items`` on the requesting thread, trampolined (rules 1.3, 3.3)."""

    __slots__ = ("_cancelled", "_error", "_index", "_items", "_lock", "_requested", "_subscriber")

    def __init__(self, subscriber: Subscriber[T], items: Sequence[T]) -> None:
        self._subscriber: Subscriber[T] | None = subscriber
        self._items = items
        self._lock = threading.Lock()
        # --- Guarded by self._lock ---------------------------------------
        # Demand since the emission loop last went idle, saturated at
        # MAX_DEMAND. Nonzero exactly while one thread runs _emit().
        self._requested = 0
        # The first invalid request; the emitting thread signals it.
        self._error: BaseException | None = None
        # --- Written only by the emitting thread ------------------------
        self._index = 0  # next position in items
        # --- Set once by any thread; the loop checks it before each item -
        self._cancelled = False

    def request(self, n: int) -> None:
        """Add ``n`` to the demand; emits on this thread unless a loop is already running."""
        error = check_request(n)
        if error is not None:
            with self._lock:
                if self._error is None:
                    self._error = error
            n = 1  # wakes the loop, which signals the error before any item
        lock = self._lock
        lock.acquire()  # not `with`: this is the per-item path of request(1) from on_next
        current = self._requested
        self._requested = add_demand(current, n)
        lock.release()
        if current == 0 and not self._cancelled:
            self._emit()

    def cancel(self) -> None:
        """Stop emitting and drop the subscriber (rules 3.5, 3.7, 3.13)."""
        self._cancelled = True
        self._subscriber = None

    def _start(self) -> None:
        """Run the loop once without demand: an empty sequence completes (no item can go out)."""
        with self._lock:
            current = self._requested
            if current == 0:
                self._requested = 1
        if current == 0:
            self._emit()

    def _finish(self) -> Subscriber[T] | None:
        """Mark the subscription done; return the subscriber if it was not cancelled."""
        subscriber = self._subscriber
        self._cancelled = True
        self._subscriber = None
        return subscriber

    def _emit(self) -> None:
        # Caller raised self._requested from 0: it owns the loop until it
        # sets it back to 0.
        subscriber = self._subscriber
        if subscriber is None:
            return
        on_next = subscriber.on_next
        items = self._items
        end = len(items)
        index = self._index
        with self._lock:
            requested = self._requested
        emitted = 0
        try:
            while True:
                if self._error is not None:
                    target = self._finish()
                    if target is not None:
                        signal_terminal(target, self._error)
                    return
                stop = index + requested - emitted
                if stop > end:
                    stop = end
                for item in items[index:stop]:  # a range slices to a range, a tuple copies
                    if self._cancelled:
                        return
                    on_next(item)
                emitted += stop - index
                index = stop
                if index == end:
                    target = self._finish()
                    if target is not None:
                        signal_terminal(target, None)
                    return
                # Only this thread lowers _requested, so a larger value read
                # without the lock is real new demand; the lock is needed
                # only to go idle atomically.
                total = self._requested
                if total == emitted:
                    with self._lock:
                        total = self._requested
                        if total == emitted:
                            self._requested = 0
                            self._index = index
                            return
                requested = total
        except BaseException as exc:
            self._cancelled = True
            self._subscriber = None
            on_next_raised(subscriber, exc)
            reraise_fatal(exc)


class _SequencePublisher(Publisher[T_co]):
    """A synchronous cold publisher of the items of a sequence."""

    __slots__ = ("_items",)

    def __init__(self, items: Sequence[T_co]) -> None:
        self._items = items

    def subscribe(self, subscriber: Subscriber[T_co]) -> None:
        """Send ``on_subscribe``; items then follow on the threads that call ``request``.

        Raises:
            TypeError: if ``subscriber`` is ``None`` (rule 1.9).
        """
        require_subscriber(subscriber)
        subscription = _SequenceSubscription(subscriber, self._items)
        if signal_subscribe(subscriber, subscription) and not self._items:
            subscription._start()


class RangePublisher(_SequencePublisher[int]):
    """Publishes ``start, start + 1, ..., start + count - 1`` to each subscriber.

    Synchronous: ``on_subscribe`` runs inside ``subscribe``, and items are
    emitted on the thread that calls ``request``. A ``request`` made from
    inside ``on_next`` returns at once and the running loop serves it, so the
    recursion depth stays 1 however many items are requested one by one
    (rule 3.3).

    Example:
        >>> from flowpy.subscribers import collect
        >>> collect(RangePublisher(1, 3)).result()
        [1, 2, 3]
    """

    __slots__ = ("_count", "_start")

    def __init__(self, start: int, count: int) -> None:
        """Args:
            start: the first value.
            count: how many values; ``0`` makes a publisher that completes at once.

        Raises:
            TypeError: if ``start`` or ``count`` is not an ``int``.
            ValueError: if ``count`` is negative.
        """
        require_int(start, "start")
        require_non_negative_int(count, "count")
        super().__init__(range(start, start + count))
        self._start = start
        self._count = count

    def __repr__(self) -> str:
        return f"RangePublisher(start={self._start!r}, count={self._count!r})"


def just(*items: T) -> Publisher[T]:
    """Return a synchronous cold publisher of ``items``, in order.

    Like :class:`RangePublisher`, it emits on the requesting thread with
    recursion depth 1; with no items it behaves as :func:`empty`.

    Raises:
        TypeError: if an item is ``None`` (rule 2.13).
    """
    for position, item in enumerate(items):
        if item is None:
            raise TypeError(f"items must not be None (rule 2.13), got None at position {position}")
    return _SequencePublisher(items)


# --- Terminal publishers -------------------------------------------------------


class _TerminalSubscription(Subscription):
    """The subscription of :func:`empty` and :func:`error`: nothing to request."""

    __slots__ = ("_cancelled", "_error", "_lock")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # --- Guarded by self._lock: both set once, before the terminal --
        self._cancelled = False
        self._error: BaseException | None = None  # first invalid request (rule 3.9)

    def request(self, n: int) -> None:
        """Record an invalid request for the terminal signal; valid demand is moot."""
        error = check_request(n)
        if error is not None:
            with self._lock:
                if not self._cancelled and self._error is None:
                    self._error = error

    def cancel(self) -> None:
        """Suppress the terminal signal if it was not sent yet."""
        with self._lock:
            self._cancelled = True

    def _close(self) -> tuple[bool, BaseException | None]:
        """End the subscription; return whether it was live and its request error."""
        with self._lock:
            live = not self._cancelled
            self._cancelled = True
            return live, self._error


class _TerminalPublisher(Publisher[T_co]):
    """Signals ``on_subscribe`` then at once ``on_error(failure)`` or ``on_complete``."""

    __slots__ = ("_failure",)

    def __init__(self, failure: BaseException | None) -> None:
        self._failure = failure

    def subscribe(self, subscriber: Subscriber[T_co]) -> None:
        """Send ``on_subscribe``, then the terminal signal unless cancelled meanwhile.

        Raises:
            TypeError: if ``subscriber`` is ``None`` (rule 1.9).
        """
        require_subscriber(subscriber)
        subscription = _TerminalSubscription()
        if not signal_subscribe(subscriber, subscription):
            return
        live, request_error = subscription._close()
        if live:
            signal_terminal(subscriber, self._failure if request_error is None else request_error)

    def __repr__(self) -> str:
        if self._failure is None:
            return "flowpy.sources.empty()"
        return f"flowpy.sources.error({self._failure!r})"


_EMPTY: _TerminalPublisher[object] = _TerminalPublisher(None)


def empty() -> Publisher[T]:
    """Return a publisher that completes each subscriber right after ``on_subscribe`` (rule 2.9)."""
    return _EMPTY  # type: ignore[return-value]


def error(exception: BaseException) -> Publisher[T]:
    """Return a publisher that fails each subscriber with ``exception`` right after ``on_subscribe``.

    Every subscriber receives the same exception object (rule 2.10).

    Raises:
        TypeError: if ``exception`` is not an exception instance.
    """
    if not isinstance(exception, BaseException):
        raise TypeError(f"exception must be an exception instance, got {exception!r}")
    return _TerminalPublisher(exception)


# --- Asynchronous iterables ------------------------------------------------------


class _IterableSubscription(DemandSubscription, Generic[T]):
    """One subscriber's walk over its own iterator, signalled on the executor.

    Demand, cancellation and the rule 3.9 error are the
    :class:`~flowpy._core.pull.DemandSubscription`'s; the drain here looks
    one item ahead, so that it completes right after the last item.
    """

    __slots__ = (
        "_batch_size",
        "_budget",
        "_iterable",
        "_iterator",
        "_next",
        "_subscribed",
        "_subscriber",
    )

    def __init__(
        self,
        subscriber: Subscriber[T],
        iterable: Iterable[T],
        execute: Callable[..., object],
        batch_size: int,
    ) -> None:
        self._subscriber: Subscriber[T] | None = subscriber
        self._iterable: Iterable[T] | None = iterable
        self._batch_size = batch_size
        super().__init__(execute, self._drain, self._rejected)
        # --- Touched only inside the serial drain ----------------------
        self._subscribed = False  # on_subscribe was signalled
        self._iterator: Iterator[T] | None = None
        self._next: object = END  # the item after the last emitted one (look-ahead)
        self._budget = 0  # items this task may still emit before yielding the thread

    def cancel(self) -> None:
        """Stop signalling and drop the subscriber and the iterator (rules 3.5, 3.7, 3.13)."""
        with self._lock:
            self._cancelled = True
        self._subscriber = None
        self._iterator = None
        self._iterable = None

    def _take_terminal(self) -> Subscriber[T] | None:
        """End the subscription; return the subscriber if it still was to be signalled."""
        with self._lock:
            live = not self._cancelled
            self._cancelled = True
        subscriber = self._subscriber
        self._subscriber = None
        self._iterator = None
        self._iterable = None
        return subscriber if live else None

    def _terminate(self, failure: BaseException | None) -> None:
        target = self._take_terminal()
        if target is not None:
            signal_terminal(target, failure)

    def _rejected(self, exc: BaseException) -> None:
        # The executor refused the task; this thread owns the signals now.
        subscriber = self._subscriber
        if subscriber is not None and not self._subscribed:
            self._subscribed = True
            if not signal_subscribe(subscriber, self):
                return
        self._terminate(exc)

    def _open(self, subscriber: Subscriber[T]) -> bool:
        """Signal ``on_subscribe`` and look ahead one item; return whether to go on."""
        self._subscribed = True
        try:
            iterator = iter(self._iterable)  # type: ignore[arg-type]
        except BaseException as exc:
            if signal_subscribe(subscriber, self):
                self._terminate(exc)
            reraise_fatal(exc)
            return False
        self._iterator = iterator
        if not signal_subscribe(subscriber, self):
            return False
        return self._advance(iterator)

    def _advance(self, iterator: Iterator[T]) -> bool:
        """Fetch the next item into the look-ahead; on the end or a failure, terminate.

        A ``None`` item is the iterable's failure: ``on_error(TypeError)``
        (rule 2.13), and the iterator is dropped.
        """
        if self._cancelled:
            return False
        try:
            self._next = next(iterator, END)
        except BaseException as exc:
            self._terminate(exc)
            reraise_fatal(exc)
            return False
        if self._next is END:
            self._terminate(None)
            return False
        if self._next is None:
            self._terminate(none_error("item", "2.13"))
            return False
        return True

    def _drain(self, first: bool) -> bool:
        subscriber = self._subscriber
        if subscriber is None:
            return False
        if first:
            self._budget = self._batch_size
        if not self._subscribed and not self._open(subscriber):
            return False
        _, error, demand = self._pending()
        if error is not None:
            self._terminate(error)
            return False
        iterator = self._iterator
        if iterator is None:
            return False
        count = min(demand, self._budget)
        emitted = 0
        try:
            while emitted < count and not self._cancelled:
                item = self._next
                emitted += 1
                subscriber.on_next(item)  # type: ignore[arg-type]
                if not self._advance(iterator):
                    break
        except BaseException as exc:
            if self._subscriber is not None:  # else the iterator raised, and _advance ended the stream
                self.cancel()
                on_next_raised(subscriber, exc)
            reraise_fatal(exc)
            return False
        self._budget -= emitted
        return self._produced(emitted) and self._budget == 0


class IterablePublisher(Publisher[T_co]):
    """Publishes the items of an iterable, asynchronously, to each subscriber.

    Each subscriber gets a fresh iterator (``iter(iterable)`` is called for
    it), so the iterable must be re-iterable to serve more than one
    subscriber; a one-shot iterator serves the first and completes the rest.
    All signals run on ``executor``, serially per subscriber; a task emits at
    most ``batch_size`` items and then yields its thread.

    The publisher looks one item ahead (like Java's ``hasNext``): it learns
    that the iterable is exhausted as soon as the last item was emitted, and
    completes without waiting for more demand; an empty iterable completes
    right after ``on_subscribe``. An exception from ``iter()`` or ``next()``
    is signalled with ``on_error``, and so is a ``None`` item, as
    ``TypeError("item must not be None (rule 2.13)")``, in place of that
    item (the iterator is then dropped). Cancelling drops the iterator, which
    closes a generator when it is garbage-collected.

    Example:
        >>> from flowpy.subscribers import collect
        >>> collect(IterablePublisher("abc")).result(timeout=5)
        ['a', 'b', 'c']
    """

    __slots__ = ("_batch_size", "_execute", "_iterable")

    def __init__(
        self,
        iterable: Iterable[T_co],
        *,
        executor: Executor | Default = DEFAULT,
        batch_size: int = 1024,
    ) -> None:
        """Args:
            iterable: the items; iterated once per subscriber.
            executor: where signals run; the shared default pool if left out.
            batch_size: the most items one executor task emits.

        Raises:
            TypeError: if ``iterable`` is not iterable, ``executor`` is ``None``
                or not an executor, or ``batch_size`` is not an ``int``.
            ValueError: if ``batch_size`` is not positive.
        """
        if not isinstance(iterable, Iterable):
            raise TypeError(f"iterable must be iterable, got {iterable!r}")
        self._batch_size = require_positive_int(batch_size, "batch_size")
        self._iterable = iterable
        self._execute = resolve_execute(executor)

    def subscribe(self, subscriber: Subscriber[T_co]) -> None:
        """Start a subscription; ``on_subscribe`` and everything after it run on the executor.

        If the executor refuses the task, ``on_subscribe`` and then
        ``on_error`` with the executor's exception are signalled on this thread.

        Raises:
            TypeError: if ``subscriber`` is ``None`` (rule 1.9).
        """
        require_subscriber(subscriber)
        subscription = _IterableSubscription(subscriber, self._iterable, self._execute, self._batch_size)
        subscription._serial.signal()

    def __repr__(self) -> str:
        return f"IterablePublisher({self._iterable!r}, batch_size={self._batch_size!r})"
