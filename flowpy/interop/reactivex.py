"""ReactiveX interop: publishers as Observables, and Observables as publishers.

An Observable pushes as fast as its source produces: it has no
backpressure. :func:`to_observable` turns a publisher into one that requests
in batches, so the publisher still sees demand: each batch is requested
again as the observer's ``on_next`` calls return. :func:`from_observable`
goes the other way and must decide what happens to items that arrive while
the subscriber has not asked for them: that is the ``strategy``, one of the
backpressure operators of :mod:`flowpy.operators` (``buffer``, ``drop``,
``latest``, ``error``), applied to the Observable as a push source.

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
from typing import Generic, TypeVar, cast

from flowpy._extras import missing_extra

try:
    import reactivex
    from reactivex import Observable, abc
    from reactivex.disposable import Disposable
except ImportError as _error:
    raise missing_extra(__name__, "reactivex", "rx") from _error

from flowpy import flow
from flowpy._checks import none_error, require, require_positive_int, require_publisher, require_subscriber
from flowpy._demand import check_request, replenish_limit
from flowpy._signals import reraise_fatal, signal_subscribe
from flowpy.executors import DEFAULT, Default, Executor, resolve_execute
from flowpy.flow import default_buffer_size
from flowpy.interop._common import ForwardingSubscriber
from flowpy.operators import BackpressureStrategy, DropHandler, on_backpressure
from flowpy.operators._observe_on import observe_on_demand

__all__ = ["DropHandler", "Strategy", "from_observable", "to_observable"]

T = TypeVar("T")

Strategy = BackpressureStrategy
"""What :func:`from_observable` does with an item the subscriber has not asked for (the operators' vocabulary)."""

# Implementation overview
#
# from_observable is a composition, not a second implementation of the
# strategies: _ObservableSource (the Observable as a push source that never
# waits for demand) -> operators.on_backpressure(strategy) (the strategy's
# operator, which requests everything and decides on the Observable's thread)
# -> operators._observe_on.observe_on_demand (the executor hop, whose queue
# holds only items the subscriber requested, at most `capacity`).


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
        TypeError: if ``publisher`` is not a publisher or ``request_batch`` is not an int.
        ValueError: if ``request_batch`` is not positive.
    """
    require_publisher(publisher)
    batch = require_positive_int(request_batch, "request_batch")

    def subscribe(observer: abc.ObserverBase[T], scheduler: abc.SchedulerBase | None = None) -> Disposable:
        subscriber = _ObserverSubscriber(observer, batch)
        publisher.subscribe(subscriber)
        return Disposable(subscriber.cancel)

    return reactivex.create(subscribe)


# --- from_observable ------------------------------------------------------------


class _ObservableSubscription(flow.Subscription, Generic[T]):
    """Forwards one Observable subscription to a backpressure stage, on the Observable's thread.

    A source without backpressure: it emits as the Observable does. Its
    subscriber is a backpressure operator's stage, which requests unbounded
    demand inside ``on_subscribe``, before :meth:`start` subscribes to the
    Observable; so the Observable's signals are the only ones after that,
    and they are serial (rule 1.3).
    """

    __slots__ = ("_disposable", "_error", "_lock", "_subscriber")

    def __init__(self, subscriber: flow.Subscriber[T]) -> None:
        # --- Guarded by self._lock -----------------------------------------
        self._lock = threading.Lock()
        self._subscriber: flow.Subscriber[T] | None = subscriber  # None once ended or cancelled
        self._disposable: abc.DisposableBase | None = None  # the Observable subscription, once known
        self._error: BaseException | None = None  # a rule 3.9 error, signalled by start()

    def request(self, n: int) -> None:
        """Check ``n`` (rule 3.9); any valid demand lets the Observable push freely (its subscriber asked for all)."""
        error = check_request(n)
        if error is not None:
            with self._lock:
                if self._error is None:
                    self._error = error

    def cancel(self) -> None:
        """Dispose of the Observable subscription; nothing more is forwarded (rules 3.5, 3.7, 3.13)."""
        with self._lock:
            self._subscriber = None
            disposable, self._disposable = self._disposable, None
        if disposable is not None:
            disposable.dispose()

    def start(self, observable: Observable[T]) -> None:
        """After ``on_subscribe`` returned: subscribe to ``observable``, unless it ended meanwhile."""
        with self._lock:
            error, self._error = self._error, None
        if error is not None:
            self._end(error)
            return
        if self._subscriber is None:
            return
        disposable = observable.subscribe(self._on_next, self._on_error, self._on_completed)
        with self._lock:
            if self._subscriber is not None:
                self._disposable = disposable
                return
        disposable.dispose()  # ended while subscribing: nothing more is wanted

    def _on_next(self, item: T) -> None:
        subscriber = self._subscriber
        if subscriber is None:
            return
        if item is None:
            self.cancel()
            subscriber.on_error(TypeError("observable must not emit None (rule 2.13)"))
            return
        subscriber.on_next(item)

    def _on_error(self, error: Exception) -> None:
        self._end(error)

    def _on_completed(self) -> None:
        self._end(None)

    def _end(self, error: BaseException | None) -> None:
        with self._lock:
            subscriber, self._subscriber = self._subscriber, None
            self._disposable = None  # an Observable that ended needs no disposing
        if subscriber is None:
            return
        if error is None:
            subscriber.on_complete()
        else:
            subscriber.on_error(error)


class _ObservableSource(flow.Publisher[T]):
    """An Observable as a push source, for a backpressure operator to subscribe to."""

    __slots__ = ("_observable",)

    def __init__(self, observable: Observable[T]) -> None:
        self._observable = observable

    def subscribe(self, subscriber: flow.Subscriber[T]) -> None:
        """Signal ``on_subscribe``, then subscribe to the Observable for this subscriber."""
        require_subscriber(subscriber)
        subscription: _ObservableSubscription[T] = _ObservableSubscription(subscriber)
        if signal_subscribe(subscriber, subscription):  # rule 2.13
            subscription.start(self._observable)

    def __repr__(self) -> str:
        return f"<observable source {self._observable!r}>"


class _ObservablePublisher(flow.Publisher[T]):
    """The publisher returned by :func:`from_observable`: the composition, with a readable repr."""

    __slots__ = ("_capacity", "_observable", "_publisher", "_strategy")

    def __init__(
        self, observable: Observable[T], strategy: Strategy, capacity: int, publisher: flow.Publisher[T]
    ) -> None:
        self._observable = observable
        self._strategy = strategy
        self._capacity = capacity
        self._publisher = publisher

    def subscribe(self, subscriber: flow.Subscriber[T]) -> None:
        """Subscribe ``subscriber`` to its own Observable subscription, strategy stage and executor hop.

        Raises:
            TypeError: if ``subscriber`` is ``None`` (rule 1.9).
        """
        self._publisher.subscribe(subscriber)

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

    The Observable cannot wait, so its items go through the backpressure
    operator named by ``strategy`` (:func:`flowpy.operators.on_backpressure`),
    on the Observable's thread, and then through a queue of at most
    ``capacity`` requested items to ``executor``, which delivers them. What
    happens to an item the subscriber has not requested:

    ``"buffer"``
        ``on_backpressure_buffer(capacity)``: it waits, with up to
        ``capacity`` other unrequested items; one more fails the stream with
        :class:`~flowpy.errors.MissingBackpressureError`.
    ``"drop"``
        ``on_backpressure_drop(on_drop)``: it is discarded and passed to ``on_drop``.
    ``"latest"``
        ``on_backpressure_latest(on_drop)``: it is kept as the latest item,
        replacing (and passing to ``on_drop``) the one kept before, and
        delivered when demand arrives.
    ``"error"``
        ``on_backpressure_error()``: it fails the stream with
        :class:`~flowpy.errors.MissingBackpressureError`.

    A failure ends the subscription at once: queued items are dropped and the
    Observable subscription is disposed. The Observable's own ``on_error`` and
    ``on_completed`` are delivered after the queued items; with ``"latest"``,
    after the latest item too, once requested. Cancelling disposes the
    Observable subscription.

    Args:
        observable: any ReactiveX Observable, hot or cold.
        strategy: one of ``"buffer"``, ``"drop"``, ``"latest"``, ``"error"``.
        capacity: the most requested items queued for the executor per
            subscriber; with ``"buffer"``, also the most unrequested ones.
        on_drop: called as ``on_drop(item)`` on the Observable's thread for
            each discarded item; only with ``"drop"`` and ``"latest"``. If it
            raises, the stream ends with that error.
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
    staged = on_backpressure(_ObservableSource(observable), strategy, capacity=capacity, on_drop=on_drop)
    execute = resolve_execute(executor)
    return _ObservablePublisher(observable, strategy, capacity, observe_on_demand(staged, execute, capacity))
