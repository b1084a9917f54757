"""ReactiveX interop: publishers as Observables, and Observables as publishers.

An Observable pushes as fast as its source produces: it has no
backpressure. :func:`to_observable` turns a publisher into one that requests
in batches, so the publisher still sees demand: each batch is requested
again as the observer's ``on_next`` calls return. :func:`from_observable`
goes the other way and must decide what happens to items that arrive while
the subscriber has not asked for them: that is the ``strategy``, the
"while parked: buffer, drop, latest" choice of the RxJava backpressure
design.

Protocol:   :func:`from_observable` signals ``on_error(ValueError)`` for
            ``request(n <= 0)`` (rule 3.9) and ``on_error(TypeError)`` for a
            ``None`` item (rule 2.13); overflow is
            :class:`~flowpy.errors.MissingBackpressureError`.
Threading:  :func:`from_observable` receives items on the Observable's thread
            and delivers them on ``executor``, one task at a time per
            subscriber, so a slow subscriber never blocks the Observable.
            :func:`to_observable` calls the observer wherever the publisher
            delivers.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import Any, Final, Generic, Literal, TypeVar, cast, get_args

from flowpy._extras import missing_extra

try:
    import reactivex
    from reactivex import Observable, abc
    from reactivex.disposable import Disposable
except ImportError as _error:
    raise missing_extra(__name__, "reactivex", "rx") from _error

from flowpy import flow
from flowpy._checks import none_error, require, require_positive_int, require_subscriber
from flowpy._core.serial import SerialDrain
from flowpy._demand import MAX_DEMAND, add_demand, check_request, replenish_limit
from flowpy._signals import reraise_fatal, signal_subscribe
from flowpy.errors import MissingBackpressureError
from flowpy.executors import DEFAULT, Default, Executor, Task, resolve_execute
from flowpy.flow import default_buffer_size
from flowpy.interop._common import ForwardingSubscriber

__all__ = ["DropHandler", "Strategy", "from_observable", "to_observable"]

T = TypeVar("T")

Strategy = Literal["buffer", "drop", "latest", "error"]
"""What :func:`from_observable` does with an item the subscriber has no room for."""

DropHandler = Callable[[T], object]
"""``on_drop(item)``: told of each item that the ``"drop"`` or ``"latest"`` strategy discards."""

_STRATEGIES: Final = get_args(Strategy)

# Implementation overview
#
# Each subscription of from_observable has a bounded queue filled on the
# Observable's thread (push) and drained on the executor by a SerialDrain
# (flowpy._core.serial), one pass at a time, no faster than the demand. Every
# decision is taken under the subscription's lock; every signal is sent
# outside it, by the drain, which alone may call the subscriber after
# on_subscribe (rule 1.3). Producers and request() signal the drain only when
# something is deliverable; the SerialDrain runs a pass for every signal, so
# no wake-up is lost.


# --- to_observable --------------------------------------------------------------


class _ObserverSubscriber(ForwardingSubscriber[T]):
    """Forwards to an Rx observer, requesting ``batch`` items at a time."""

    __slots__ = ("_consumed", "_limit", "_observer")

    def __init__(self, observer: abc.ObserverBase[T], batch: int) -> None:
        super().__init__(batch)
        self._observer = observer
        self._limit = replenish_limit(batch)  # request again after this many items
        self._consumed = 0  # items since the last request; < self._limit

    def on_next(self, item: T) -> None:
        if item is None:
            raise none_error("item", "2.13")
        try:
            self._observer.on_next(item)
        except BaseException as exc:  # the observer failed: stop the stream and tell it
            self.cancel()
            self._observer.on_error(exc)  # type: ignore[arg-type]  # a BaseException too, then re-raised
            reraise_fatal(exc)
            return
        self._consumed += 1
        if self._consumed == self._limit:
            self._consumed = 0
            self.request(self._limit)

    def on_error(self, error: BaseException) -> None:
        require(error, "error", "2.13")
        self._observer.on_error(cast(Exception, error))

    def on_complete(self) -> None:
        self._observer.on_completed()


def to_observable(publisher: flow.Publisher[T], *, request_batch: int = 128) -> Observable[T]:
    """Return a cold Observable that subscribes to ``publisher`` for each observer.

    The subscription requests ``request_batch`` items, and requests again
    each time three quarters of them have been passed to the observer, whose
    ``on_next`` runs on the publisher's delivery thread: a slow observer
    therefore slows the publisher. Disposing cancels the subscription. If the
    observer's ``on_next`` raises, the subscription is cancelled and the
    observer gets ``on_error`` with that exception.

    Args:
        publisher: any Flow publisher.
        request_batch: the most items requested ahead of the observer.

    Raises:
        TypeError: if ``publisher`` is ``None`` or ``request_batch`` is not an int.
        ValueError: if ``request_batch`` is not positive.
    """
    require(publisher, "publisher")
    batch = require_positive_int(request_batch, "request_batch")

    def subscribe(observer: abc.ObserverBase[T], scheduler: abc.SchedulerBase | None = None) -> Disposable:
        subscriber = _ObserverSubscriber(observer, batch)
        publisher.subscribe(subscriber)
        return Disposable(subscriber.cancel)

    return reactivex.create(subscribe)


# --- from_observable ------------------------------------------------------------

_EMPTY: Final[Any] = object()  # the "latest" slot holds nothing
_COMPLETE: Final[Any] = object()  # the Observable completed


class _ObservableSubscription(flow.Subscription, Generic[T]):
    """One subscriber's bounded queue between an Observable and the executor."""

    __slots__ = (
        "_capacity",
        "_demand",
        "_disposable",
        "_error",
        "_execute",
        "_latest",
        "_lock",
        "_on_drop",
        "_queue",
        "_serial",
        "_started",
        "_strategy",
        "_subscriber",
        "_terminal",
    )

    def __init__(
        self,
        subscriber: flow.Subscriber[T],
        strategy: Strategy,
        capacity: int,
        on_drop: DropHandler[T] | None,
        execute: Callable[[Task], object],
    ) -> None:
        self._strategy = strategy
        self._capacity = capacity
        self._on_drop = on_drop
        self._execute = execute
        self._serial = SerialDrain(execute, self._drain, self._refused)
        # --- Guarded by self._lock -----------------------------------------
        self._lock = threading.Lock()
        # None once the subscription ended: cancelled, or terminal signal claimed.
        self._subscriber: flow.Subscriber[T] | None = subscriber
        self._queue: deque[T] = deque()  # never longer than self._capacity
        self._latest: Any = _EMPTY  # "latest": the newest item that had no room, waiting for demand
        self._demand = 0  # requested and not yet delivered; MAX_DEMAND is unbounded
        self._terminal: Any = None  # _COMPLETE or the Observable's error; delivered after the queue
        self._error: BaseException | None = None  # overflow or rule 3.9: delivered at once, queue dropped
        self._started = False  # on_subscribe has returned; until then no task starts (rule 1.3)
        self._disposable: abc.DisposableBase | None = None  # the Observable subscription, once known

    # --- Subscription (the subscriber's thread) --------------------------------

    def request(self, n: int) -> None:
        """Add ``n`` to the demand; ``n <= 0`` ends with ``on_error`` (rules 3.8, 3.9, 3.17)."""
        error = check_request(n)
        with self._lock:
            if self._subscriber is None or self._error is not None:
                return  # rule 3.6
            if error is not None:
                self._fail_now(error)
            else:
                self._demand = add_demand(self._demand, n)
                self._promote_latest()
            run = self._deliverable()
        if error is not None:
            self._dispose()
        if run:
            self._serial.signal()

    def cancel(self) -> None:
        """Dispose of the Observable subscription and drop queued items (rules 3.5, 3.7, 3.13)."""
        with self._lock:
            self._subscriber = None
            self._queue.clear()
            self._latest = _EMPTY
        self._dispose()

    # --- Observer (the Observable's thread) ------------------------------------

    def push(self, item: T) -> None:
        if item is None:
            self._fail(TypeError("observable must not emit None (rule 2.13)"))
            return
        dropped: Any = _EMPTY
        overflow: MissingBackpressureError | None = None
        with self._lock:
            if self._subscriber is None or self._error is not None or self._terminal is not None:
                return
            queued = len(self._queue)
            # "buffer" queues ahead of demand; the others only what was requested.
            wanted = self._strategy == "buffer" or queued < self._demand
            if wanted and queued < self._capacity:
                self._queue.append(item)
            elif self._strategy == "drop":
                dropped = item
            elif self._strategy == "latest":
                dropped, self._latest = self._latest, item
            else:
                overflow = self._overflow_error()
                self._fail_now(overflow)
            run = self._deliverable()
        if overflow is not None:
            self._dispose()
        elif dropped is not _EMPTY and self._on_drop is not None:
            self._on_drop(dropped)
        if run:
            self._serial.signal()

    def fail(self, error: BaseException) -> None:
        self._end(error)

    def complete(self) -> None:
        self._end(_COMPLETE)

    # --- Lifecycle -------------------------------------------------------------

    def start(self, observable: Observable[T]) -> None:
        """After ``on_subscribe`` returned: allow delivery, then subscribe to ``observable``."""
        with self._lock:
            self._started = True
            live = self._subscriber is not None and self._error is None
            run = self._deliverable()
        if run:
            self._serial.signal()
        if not live:
            return
        disposable = observable.subscribe(self.push, self.fail, self.complete)
        with self._lock:
            if self._subscriber is not None and self._error is None and self._terminal is None:
                self._disposable = disposable
                return
        disposable.dispose()  # ended while subscribing: nothing more is wanted

    def _end(self, terminal: Any) -> None:
        with self._lock:
            if self._subscriber is None or self._error is not None or self._terminal is not None:
                return
            self._terminal = terminal
            self._disposable = None  # an Observable that ended needs no disposing
            run = self._deliverable()
        if run:
            self._serial.signal()

    def _fail(self, error: BaseException) -> None:
        with self._lock:
            if self._subscriber is None or self._error is not None:
                return
            self._fail_now(error)
            run = self._deliverable()
        self._dispose()
        if run:
            self._serial.signal()

    def _dispose(self) -> None:
        with self._lock:
            disposable, self._disposable = self._disposable, None
        if disposable is not None:
            disposable.dispose()

    # --- Helpers; the caller holds self._lock -------------------------------------

    def _overflow_error(self) -> MissingBackpressureError:
        if self._strategy == "buffer":
            return MissingBackpressureError(
                f"subscriber must keep up with the observable: its buffer of {self._capacity} "
                "items is full (strategy='buffer')"
            )
        return MissingBackpressureError(
            "subscriber must request before the observable emits: "
            f"an item arrived with {self._demand} requested and {len(self._queue)} queued (strategy='error')"
        )

    def _fail_now(self, error: BaseException) -> None:
        """End with ``error`` ahead of anything queued. Caller holds self._lock."""
        self._error = error
        self._queue.clear()
        self._latest = _EMPTY

    def _promote_latest(self) -> None:
        """Queue the waiting "latest" item if demand and room allow. Caller holds self._lock."""
        if self._latest is not _EMPTY and len(self._queue) < min(self._demand, self._capacity):
            self._queue.append(self._latest)
            self._latest = _EMPTY

    def _deliverable(self) -> bool:
        """Whether the drain has a signal to send now. Caller holds self._lock."""
        if not self._started or self._subscriber is None:
            return False
        return self._error is not None or bool(self._queue and self._demand > 0) or self._at_end()

    def _at_end(self) -> bool:
        return self._terminal is not None and not self._queue and self._latest is _EMPTY

    def signal_subscribe(self) -> bool:
        """:func:`~flowpy._signals.signal_subscribe` in the subscriber's context; only from ``subscribe``."""
        subscriber = self._subscriber
        assert subscriber is not None, "the first signal"
        context = self._serial.context  # the subscriber's, captured at subscribe()
        if context is None:
            return signal_subscribe(subscriber, self)
        subscribed: bool = context.run(signal_subscribe, subscriber, self)
        return subscribed

    # --- The drain task (the executor) ---------------------------------------------

    def _refused(self, exc: BaseException) -> None:
        # The executor refused the drain: end with its error (rules 3.15, 3.16).
        with self._lock:
            subscriber, self._subscriber = self._subscriber, None
            self._queue.clear()
        self._dispose()
        if subscriber is not None:
            subscriber.on_error(exc)

    def _drain(self, first: bool) -> bool:
        while True:
            with self._lock:
                subscriber = self._subscriber
                if subscriber is None:
                    return False
                terminal: Any = self._error
                if terminal is None and self._at_end():
                    terminal = self._terminal
                if terminal is not None:
                    self._subscriber = None
                    self._queue.clear()
                else:
                    count = min(self._demand, len(self._queue))
                    if count == 0:
                        return False
                    batch = [self._queue.popleft() for _ in range(count)]
                    if self._demand != MAX_DEMAND:
                        self._demand -= count
                    self._promote_latest()
            if terminal is _COMPLETE:
                subscriber.on_complete()
                return False
            if terminal is not None:
                subscriber.on_error(terminal)
                return False
            for item in batch:
                if self._subscriber is None:
                    break  # cancelled: stop early (rule 3.12)
                subscriber.on_next(item)


class _ObservablePublisher(flow.Publisher[T]):
    """The publisher returned by :func:`from_observable`."""

    __slots__ = ("_capacity", "_execute", "_observable", "_on_drop", "_strategy")

    def __init__(
        self,
        observable: Observable[T],
        strategy: Strategy,
        capacity: int,
        on_drop: DropHandler[T] | None,
        execute: Callable[[Task], object],
    ) -> None:
        self._observable = observable
        self._strategy = strategy
        self._capacity = capacity
        self._on_drop = on_drop
        self._execute = execute

    def subscribe(self, subscriber: flow.Subscriber[T]) -> None:
        """Signal ``on_subscribe``, then subscribe to the Observable for this subscriber.

        Raises:
            TypeError: if ``subscriber`` is ``None`` (rule 1.9).
        """
        require_subscriber(subscriber)
        subscription = _ObservableSubscription(subscriber, self._strategy, self._capacity, self._on_drop, self._execute)
        if subscription.signal_subscribe():  # rule 2.13
            subscription.start(self._observable)

    def __repr__(self) -> str:
        return f"<from_observable {self._observable!r} strategy={self._strategy!r} capacity={self._capacity}>"


def from_observable(
    observable: Observable[T],
    *,
    strategy: Strategy = "buffer",
    capacity: int = default_buffer_size(),
    on_drop: DropHandler[T] | None = None,
    executor: Executor | Default = DEFAULT,
) -> flow.Publisher[T]:
    """Return a publisher that subscribes to ``observable`` once per subscriber.

    Each subscriber has a queue of at most ``capacity`` items between the
    Observable's thread and ``executor``, which delivers no faster than the
    subscriber requests. What happens to an item the subscriber is not ready
    for is ``strategy``:

    ``"buffer"``
        queue it even without demand; when ``capacity`` items wait, fail
        with :class:`~flowpy.errors.MissingBackpressureError`.
    ``"drop"``
        queue it only if requested; otherwise discard it (the newest item)
        and pass it to ``on_drop``.
    ``"latest"``
        queue it only if requested; otherwise keep it as the latest item,
        replacing (and passing to ``on_drop``) the one kept before, and
        deliver it when demand arrives.
    ``"error"``
        queue it only if requested; otherwise fail with
        :class:`~flowpy.errors.MissingBackpressureError`.

    A failure ends the subscription at once: queued items are dropped and the
    Observable subscription is disposed. The Observable's own ``on_error`` and
    ``on_completed`` are delivered after the queued items; with ``"latest"``,
    after the latest item too, once requested. Cancelling disposes the
    Observable subscription.

    Args:
        observable: any ReactiveX Observable, hot or cold.
        strategy: one of ``"buffer"``, ``"drop"``, ``"latest"``, ``"error"``.
        capacity: the most items queued per subscriber.
        on_drop: called as ``on_drop(item)`` on the Observable's thread for
            each discarded item; only with ``"drop"`` and ``"latest"``.
        executor: where subscribers are called; left out, the shared
            :func:`~flowpy.executors.default_executor`.

    Raises:
        TypeError: if ``observable`` is not an Observable, ``capacity`` is
            not an int, ``on_drop`` is not callable, or ``executor`` is
            ``None`` or not an executor.
        ValueError: if ``strategy`` is unknown, ``capacity`` is not
            positive, or ``on_drop`` is given with ``"buffer"`` or ``"error"``.
    """
    if not isinstance(observable, Observable):
        raise TypeError(f"observable must be a reactivex.Observable, got {observable!r}")
    if strategy not in _STRATEGIES:
        raise ValueError(f"strategy must be one of {', '.join(map(repr, _STRATEGIES))}, got {strategy!r}")
    capacity = require_positive_int(capacity, "capacity")
    if on_drop is not None:
        if not callable(on_drop):
            raise TypeError(f"on_drop must be callable or None, got {on_drop!r}")
        if strategy not in ("drop", "latest"):
            raise ValueError(
                f"on_drop must be None with strategy={strategy!r}, which never drops items; "
                "use strategy='drop' or 'latest'"
            )
    execute = resolve_execute(executor)
    return _ObservablePublisher(observable, strategy, capacity, on_drop, execute)
