"""Flowable: the operators of :mod:`flowpy.operators` as chained methods.

A :class:`Flowable` wraps any :class:`~flowpy.flow.Publisher` and is one
itself, so it can be handed to anything that takes a publisher, and any
publisher can be lifted into one with :meth:`Flowable.from_publisher`::

    >>> from flowpy.flowable import Flowable
    >>> Flowable.range(0, 10).map(lambda x: x * x).filter(lambda x: x % 2).to_list().result()
    [1, 9, 25, 49, 81]

Nothing happens until a subscriber subscribes; each subscription runs the
chain afresh. Synchronous operators chained together (``map``, ``filter``,
``take``, ``skip``, ``take_while``, ``scan``) fuse into one stage: one
subscriber to the upstream, applying them in line on the thread that
delivers the upstream's items.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, Generic, TypeVar, overload

from flowpy import operators, sources
from flowpy._checks import is_subscriber, none_error, require_publisher
from flowpy._core.sentinels import NO_INITIAL
from flowpy.executors import DEFAULT, Default, Executor
from flowpy.flow import Publisher, Subscriber, default_buffer_size
from flowpy.operators import BackpressureStrategy, ConnectablePublisher, OverflowPolicy
from flowpy.subscribers import BlockingIterator, LambdaSubscriber

if TYPE_CHECKING:
    from flowpy.interop.asyncio import PublisherAsyncIterator

__all__ = ["ConnectableFlowable", "Flowable"]

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)
R = TypeVar("R")


class Flowable(Publisher[T_co]):
    """A publisher with the operators as methods; each returns a new :class:`Flowable`.

    Every method documents its demand contract in the operator of the same
    name in :mod:`flowpy.operators`.
    """

    __slots__ = ("_publisher",)

    def __init__(self, publisher: Publisher[T_co]) -> None:
        """Wrap ``publisher``; prefer :meth:`from_publisher`, which does not wrap twice.

        Raises:
            TypeError: if ``publisher`` is not a publisher.
        """
        require_publisher(publisher)
        self._publisher = publisher

    @property
    def publisher(self) -> Publisher[T_co]:
        """The wrapped publisher."""
        return self._publisher

    # --- Sources ----------------------------------------------------------

    @staticmethod
    def from_publisher(publisher: Publisher[T]) -> Flowable[T]:
        """Return ``publisher`` as a :class:`Flowable` (itself, if it is one)."""
        if isinstance(publisher, Flowable):
            return publisher
        return Flowable(publisher)

    @staticmethod
    def from_iterable(
        iterable: Iterable[T], *, executor: Executor | Default = DEFAULT, batch_size: int = 1024
    ) -> Flowable[T]:
        """Publish the items of ``iterable`` on ``executor`` (see :class:`~flowpy.sources.IterablePublisher`)."""
        return Flowable(sources.IterablePublisher(iterable, executor=executor, batch_size=batch_size))

    @staticmethod
    def range(start: int, count: int) -> Flowable[int]:
        """Publish ``count`` ints from ``start``: ``range(5, 3)`` is 5, 6, 7 (RxJava's ``range``, not Python's).

        ``Flowable.range(start, count)`` publishes ``start, ..., start + count - 1``
        on the requesting thread; Python's ``range(start, stop)`` stops before
        ``stop``. See :class:`~flowpy.sources.RangePublisher`.
        """
        return Flowable(sources.RangePublisher(start, count))

    @staticmethod
    def just(*items: T) -> Flowable[T]:
        """Publish ``items`` on the requesting thread (see :func:`flowpy.sources.just`)."""
        return Flowable(sources.just(*items))

    @staticmethod
    def empty() -> Flowable[Any]:
        """A publisher that completes at once (see :func:`flowpy.sources.empty`)."""
        return Flowable(sources.empty())

    @staticmethod
    def error(exception: BaseException) -> Flowable[Any]:
        """A publisher that fails at once with ``exception`` (see :func:`flowpy.sources.error`)."""
        return Flowable(sources.error(exception))

    @staticmethod
    def merge(*publishers: Publisher[T], prefetch: int = 256) -> Flowable[T]:
        """Merge ``publishers`` (see :func:`flowpy.operators.merge`)."""
        return Flowable(operators.merge(*publishers, prefetch=prefetch))

    @staticmethod
    def concat(*publishers: Publisher[T], prefetch: int = 256) -> Flowable[T]:
        """Concatenate ``publishers`` (see :func:`flowpy.operators.concat`)."""
        return Flowable(operators.concat(*publishers, prefetch=prefetch))

    @staticmethod
    def zip(*publishers: Publisher[Any], fn: Callable[..., Any] | None = None, prefetch: int = 256) -> Flowable[Any]:
        """Zip ``publishers``, into tuples unless ``fn`` is given (see :func:`flowpy.operators.zip`)."""
        return Flowable(operators.zip(*publishers, fn=fn, prefetch=prefetch))

    # --- Subscribing ------------------------------------------------------

    @overload
    def subscribe(self, subscriber: Subscriber[T_co], /) -> None: ...

    @overload
    def subscribe(
        self,
        on_next: Callable[[T_co], object],
        /,
        on_error: Callable[[BaseException], object] | None = None,
        on_complete: Callable[[], object] | None = None,
        *,
        prefetch: int = 256,
    ) -> LambdaSubscriber[T_co]: ...

    def subscribe(
        self,
        subscriber: Any,
        /,
        on_error: Callable[[BaseException], object] | None = None,
        on_complete: Callable[[], object] | None = None,
        *,
        prefetch: int = 256,
    ) -> LambdaSubscriber[T_co] | None:
        """Subscribe a :class:`~flowpy.flow.Subscriber`, or callbacks.

        ``subscribe(subscriber)`` is the publisher's ``subscribe`` (rule 1.9).
        ``subscribe(on_next, on_error=None, on_complete=None, prefetch=256)``
        subscribes a :class:`~flowpy.subscribers.LambdaSubscriber` and
        returns it; its ``cancel()`` stops the stream.

        A subscriber is anything with a callable ``on_subscribe``, a
        :class:`~flowpy.flow.Subscriber` or a duck-typed one.

        Raises:
            TypeError: if ``subscriber`` is ``None``, or neither a subscriber nor callable.
        """
        if subscriber is None:
            raise none_error("subscriber", "1.9")
        if is_subscriber(subscriber):
            self._publisher.subscribe(subscriber)
            return None
        if not callable(subscriber):
            raise TypeError(f"subscriber must be a Subscriber or an on_next callable, got {subscriber!r}")
        return operators.subscribe(self._publisher, subscriber, on_error, on_complete, prefetch=prefetch)

    # --- Fused (synchronous) operators ----------------------------------------

    def map(self, fn: Callable[[T_co], R]) -> Flowable[R]:
        """Emit ``fn(item)`` for each item (fused; see :func:`flowpy.operators.map`)."""
        return Flowable(operators.map(self._publisher, fn))

    def filter(self, predicate: Callable[[T_co], object]) -> Flowable[T_co]:
        """Emit the items that pass ``predicate`` (fused; see :func:`flowpy.operators.filter`)."""
        return Flowable(operators.filter(self._publisher, predicate))

    def take(self, count: int) -> Flowable[T_co]:
        """Emit the first ``count`` items (fused; see :func:`flowpy.operators.take`)."""
        return Flowable(operators.take(self._publisher, count))

    def skip(self, count: int) -> Flowable[T_co]:
        """Drop the first ``count`` items (fused; see :func:`flowpy.operators.skip`)."""
        return Flowable(operators.skip(self._publisher, count))

    def take_while(self, predicate: Callable[[T_co], object]) -> Flowable[T_co]:
        """Emit items while ``predicate`` holds (fused; see :func:`flowpy.operators.take_while`)."""
        return Flowable(operators.take_while(self._publisher, predicate))

    def scan(self, fn: Callable[[R, T_co], R], initial: R = NO_INITIAL) -> Flowable[R]:
        """Emit the running fold (fused; see :func:`flowpy.operators.scan`)."""
        if initial is NO_INITIAL:
            return Flowable(operators.scan(self._publisher, fn))
        return Flowable(operators.scan(self._publisher, fn, initial))

    # --- Stages of their own ------------------------------------------------

    def buffer(self, count: int) -> Flowable[list[T_co]]:
        """Emit lists of ``count`` items (see :func:`flowpy.operators.buffer`)."""
        return Flowable(operators.buffer(self._publisher, count))

    def observe_on(self, executor: Executor | Default = DEFAULT, *, prefetch: int = 256) -> Flowable[T_co]:
        """Deliver on ``executor`` through a bounded queue (see :func:`flowpy.operators.observe_on`)."""
        return Flowable(operators.observe_on(self._publisher, executor, prefetch=prefetch))

    def subscribe_on(self, executor: Executor | Default = DEFAULT) -> Flowable[T_co]:
        """Subscribe and request on ``executor`` (see :func:`flowpy.operators.subscribe_on`)."""
        return Flowable(operators.subscribe_on(self._publisher, executor))

    def flat_map(
        self, fn: Callable[[T_co], Publisher[R]], *, max_concurrency: int = 256, prefetch: int = 256
    ) -> Flowable[R]:
        """Merge the publishers ``fn`` maps the items to (see :func:`flowpy.operators.flat_map`)."""
        return Flowable(operators.flat_map(self._publisher, fn, max_concurrency=max_concurrency, prefetch=prefetch))

    def merge_with(self, *others: Publisher[T_co], prefetch: int = 256) -> Flowable[T_co]:
        """Merge this flowable with ``others`` (see :func:`flowpy.operators.merge`)."""
        return Flowable(operators.merge(self._publisher, *others, prefetch=prefetch))

    def concat_with(self, *others: Publisher[T_co], prefetch: int = 256) -> Flowable[T_co]:
        """Emit this flowable's items, then those of ``others`` (see :func:`flowpy.operators.concat`)."""
        return Flowable(operators.concat(self._publisher, *others, prefetch=prefetch))

    def zip_with(
        self, *others: Publisher[Any], fn: Callable[..., Any] | None = None, prefetch: int = 256
    ) -> Flowable[Any]:
        """Zip this flowable with ``others``, into tuples unless ``fn`` is given (see :func:`flowpy.operators.zip`)."""
        return Flowable(operators.zip(self._publisher, *others, fn=fn, prefetch=prefetch))

    def on_backpressure(
        self,
        strategy: BackpressureStrategy = "buffer",
        *,
        capacity: int = 256,
        on_drop: Callable[[T_co], object] | None = None,
    ) -> Flowable[T_co]:
        """Apply the backpressure operator named by ``strategy`` (see :func:`flowpy.operators.on_backpressure`)."""
        return Flowable(operators.on_backpressure(self._publisher, strategy, capacity=capacity, on_drop=on_drop))

    def on_backpressure_buffer(
        self,
        capacity: int = 256,
        *,
        on_overflow: OverflowPolicy = "error",
        on_drop: Callable[[T_co], object] | None = None,
    ) -> Flowable[T_co]:
        """Buffer what the subscriber has not asked for (see :func:`flowpy.operators.on_backpressure_buffer`)."""
        return Flowable(
            operators.on_backpressure_buffer(self._publisher, capacity, on_overflow=on_overflow, on_drop=on_drop)
        )

    def on_backpressure_drop(self, on_drop: Callable[[T_co], object] | None = None) -> Flowable[T_co]:
        """Drop what the subscriber has not asked for (see :func:`flowpy.operators.on_backpressure_drop`)."""
        return Flowable(operators.on_backpressure_drop(self._publisher, on_drop))

    def on_backpressure_error(self) -> Flowable[T_co]:
        """Fail on an item the subscriber has not asked for (see :func:`flowpy.operators.on_backpressure_error`)."""
        return Flowable(operators.on_backpressure_error(self._publisher))

    def on_backpressure_latest(self, on_drop: Callable[[T_co], object] | None = None) -> Flowable[T_co]:
        """Keep only the latest item not yet asked for (see :func:`flowpy.operators.on_backpressure_latest`)."""
        return Flowable(operators.on_backpressure_latest(self._publisher, on_drop))

    def publish(self, prefetch: int = 256) -> ConnectableFlowable[T_co]:
        """A multicast flowable that starts on ``connect()`` (see :func:`flowpy.operators.publish`)."""
        return ConnectableFlowable(operators.publish(self._publisher, prefetch))

    def share(self, prefetch: int = 256) -> ConnectableFlowable[T_co]:
        """A multicast flowable that starts with its first subscriber (see :func:`flowpy.operators.share`)."""
        return ConnectableFlowable(operators.share(self._publisher, prefetch))

    # --- Terminals ----------------------------------------------------------

    def to_list(self) -> Future[list[T_co]]:
        """A future of all items (see :func:`flowpy.operators.to_list`)."""
        return operators.to_list(self._publisher)

    def reduce(self, fn: Callable[[R, T_co], R], initial: R) -> Future[R]:
        """A future of the fold of all items (see :func:`flowpy.operators.reduce`)."""
        return operators.reduce(self._publisher, fn, initial)

    def blocking_iter(self, prefetch: int = 256, *, timeout: float | None = None) -> BlockingIterator[T_co]:
        """A blocking iterator with at most ``prefetch`` items ahead (see :func:`flowpy.operators.blocking_iter`)."""
        return operators.blocking_iter(self._publisher, prefetch, timeout=timeout)

    def to_async_iterator(self, *, prefetch: int = default_buffer_size()) -> PublisherAsyncIterator[T_co]:
        """Subscribe now and return an asyncio async iterator with at most ``prefetch`` items requested ahead.

        See :func:`flowpy.interop.asyncio.to_async_iterator`: it requests
        ``prefetch`` items, then three quarters of ``prefetch`` each time the
        consumer has taken as many, and cancels the subscription when the loop
        is left (``break``, an exception, or the consuming task cancelled) once
        the iterator is finalised, or at once on ``aclose()``.

        Raises:
            TypeError: if ``prefetch`` is not an int.
            ValueError: if ``prefetch`` is not positive.
        """
        # Imported here: interop sits above flowable in the module layering.
        from flowpy.interop.asyncio import to_async_iterator

        return to_async_iterator(self._publisher, prefetch=prefetch)

    def __aiter__(self) -> AsyncIterator[T_co]:
        """``async for item in flowable``: :meth:`to_async_iterator` with the default prefetch.

        Each ``async for`` subscribes afresh; it needs a running asyncio loop
        (with anyio or trio, use :mod:`flowpy.interop.anyio`).
        """
        return self.to_async_iterator().__aiter__()

    def __repr__(self) -> str:
        return f"Flowable({self._publisher!r})"


class ConnectableFlowable(Flowable[T_co], Generic[T_co]):
    """A multicast :class:`Flowable`; :meth:`connect` subscribes its source."""

    __slots__ = ()

    _publisher: ConnectablePublisher[Any]

    def __init__(self, publisher: ConnectablePublisher[T_co]) -> None:
        super().__init__(publisher)

    def connect(self) -> None:
        """Subscribe the shared source; later calls do nothing (see :func:`flowpy.operators.publish`)."""
        self._publisher.connect()
