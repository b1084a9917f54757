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

from collections.abc import AsyncIterator, Callable, Hashable, Iterable
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, Generic, TypeVar, overload

from flowpy import operators, sources
from flowpy._checks import is_subscriber, none_error, require_publisher
from flowpy._core.sentinels import NO_INITIAL
from flowpy._demand import MAX_DEMAND
from flowpy.executors import DEFAULT, Default, Executor
from flowpy.flow import Publisher, Subscriber, Subscription, default_buffer_size
from flowpy.operators import (
    BackpressureStrategy,
    ConnectablePublisher,
    GroupedPublisher,
    Notification,
    OverflowPolicy,
    TimeInterval,
    Timestamped,
)
from flowpy.schedulers import Scheduler
from flowpy.subscribers import BlockingIterator, LambdaSubscriber
from flowpy.testing import TestSubscriber

if TYPE_CHECKING:
    from flowpy.interop.asyncio import PublisherAsyncIterator
    from flowpy.parallel import ParallelFlowable

__all__ = ["ConnectableFlowable", "Flowable", "GroupedFlowable"]

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)
R = TypeVar("R")
K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


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

    # --- Time: sources ----------------------------------------------------------

    @staticmethod
    def interval(
        period: float, initial_delay: float | None = None, *, scheduler: Scheduler | None = None
    ) -> Flowable[int]:
        """Emit 0, 1, 2, ... every ``period`` seconds (see :func:`flowpy.operators.interval`)."""
        return Flowable(operators.interval(period, initial_delay, scheduler=scheduler))

    @staticmethod
    def timer(delay: float, *, scheduler: Scheduler | None = None) -> Flowable[int]:
        """Emit 0 after ``delay`` seconds, then complete (see :func:`flowpy.operators.timer`)."""
        return Flowable(operators.timer(delay, scheduler=scheduler))

    # --- Sources: defer, using, combine_latest, amb ------------------------

    @staticmethod
    def defer(factory: Callable[[], Publisher[T]]) -> Flowable[T]:
        """A publisher made by ``factory()`` for each subscriber (see :func:`flowpy.operators.defer`)."""
        return Flowable(operators.defer(factory))

    @staticmethod
    def using(
        resource_factory: Callable[[], R],
        flowable_factory: Callable[[R], Publisher[T]],
        disposer: Callable[[R], object],
    ) -> Flowable[T]:
        """Stream from a resource made and disposed of per subscriber (see :func:`flowpy.operators.using`)."""
        return Flowable(operators.using(resource_factory, flowable_factory, disposer))

    @staticmethod
    def combine_latest(
        *sources: Publisher[Any], combiner: Callable[..., Any] | None = None, prefetch: int = 256
    ) -> Flowable[Any]:
        """The latest items of all sources whenever one emits (see :func:`flowpy.operators.combine_latest`)."""
        return Flowable(operators.combine_latest(*sources, combiner=combiner, prefetch=prefetch))

    @staticmethod
    def amb(*sources: Publisher[T]) -> Flowable[T]:
        """Follow the first source that signals (see :func:`flowpy.operators.amb`)."""
        return Flowable(operators.amb(*sources))

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

    # --- Time -------------------------------------------------------------------

    def delay(self, seconds: float, *, scheduler: Scheduler | None = None, prefetch: int = 256) -> Flowable[T_co]:
        """Emit each item ``seconds`` later (see :func:`flowpy.operators.delay`)."""
        return Flowable(operators.delay(self._publisher, seconds, scheduler=scheduler, prefetch=prefetch))

    def delay_subscription(self, seconds: float, *, scheduler: Scheduler | None = None) -> Flowable[T_co]:
        """Subscribe to this flowable ``seconds`` later (see :func:`flowpy.operators.delay_subscription`)."""
        return Flowable(operators.delay_subscription(self._publisher, seconds, scheduler=scheduler))

    def timeout(
        self, seconds: float, *, fallback: Publisher[T_co] | None = None, scheduler: Scheduler | None = None
    ) -> Flowable[T_co]:
        """Fail, or switch to ``fallback``, after ``seconds`` of silence (see :func:`flowpy.operators.timeout`)."""
        return Flowable(operators.timeout(self._publisher, seconds, fallback=fallback, scheduler=scheduler))

    def debounce(self, seconds: float, *, scheduler: Scheduler | None = None) -> Flowable[T_co]:
        """Emit an item after ``seconds`` without a newer one (see :func:`flowpy.operators.debounce`)."""
        return Flowable(operators.debounce(self._publisher, seconds, scheduler=scheduler))

    def sample(self, period: float, *, scheduler: Scheduler | None = None) -> Flowable[T_co]:
        """Emit the latest item every ``period`` seconds (see :func:`flowpy.operators.sample`)."""
        return Flowable(operators.sample(self._publisher, period, scheduler=scheduler))

    def throttle_first(self, seconds: float, *, scheduler: Scheduler | None = None) -> Flowable[T_co]:
        """Emit an item, drop those of the next ``seconds`` (fused; see :func:`flowpy.operators.throttle_first`)."""
        return Flowable(operators.throttle_first(self._publisher, seconds, scheduler=scheduler))

    def buffer_with_time(
        self, timespan: float, max_count: int | None = None, *, scheduler: Scheduler | None = None
    ) -> Flowable[list[T_co]]:
        """Emit the items in a list every ``timespan`` seconds (see :func:`flowpy.operators.buffer_with_time`)."""
        return Flowable(operators.buffer_with_time(self._publisher, timespan, max_count, scheduler=scheduler))

    def window_with_count(self, count: int, skip: int | None = None) -> Flowable[Flowable[T_co]]:
        """Emit windows of ``count`` items, each a Flowable (see :func:`flowpy.operators.window_with_count`)."""
        return Flowable(operators.map(operators.window_with_count(self._publisher, count, skip), Flowable))

    def window_with_time(
        self, timespan: float, max_count: int | None = None, *, scheduler: Scheduler | None = None
    ) -> Flowable[Flowable[T_co]]:
        """Emit a window every ``timespan`` seconds, each a Flowable (see :func:`flowpy.operators.window_with_time`)."""
        windows = operators.window_with_time(self._publisher, timespan, max_count, scheduler=scheduler)
        return Flowable(operators.map(windows, Flowable))

    def timestamp(self, *, scheduler: Scheduler | None = None) -> Flowable[Timestamped[T_co]]:
        """Emit each item with ``scheduler.now()`` (fused; see :func:`flowpy.operators.timestamp`)."""
        return Flowable(operators.timestamp(self._publisher, scheduler=scheduler))

    def time_interval(self, *, scheduler: Scheduler | None = None) -> Flowable[TimeInterval[T_co]]:
        """Emit each item with the seconds since the one before (fused; see :func:`flowpy.operators.time_interval`)."""
        return Flowable(operators.time_interval(self._publisher, scheduler=scheduler))

    # --- Error recovery: retry, retry_when, on_error_resume, on_error_return ---

    def retry(
        self, times: int | None = None, *, predicate: Callable[[BaseException], object] | None = None
    ) -> Flowable[T_co]:
        """Resubscribe on failure, at most ``times`` times (see :func:`flowpy.operators.retry`)."""
        return Flowable(operators.retry(self._publisher, times, predicate=predicate))

    def retry_when(self, handler: Callable[[Flowable[BaseException]], Publisher[Any]]) -> Flowable[T_co]:
        """Resubscribe when ``handler``'s publisher says so (see :func:`flowpy.operators.retry_when`)."""
        return Flowable(operators.retry_when(self._publisher, handler))

    def on_error_resume(self, fn: Callable[[BaseException], Publisher[T_co]]) -> Flowable[T_co]:
        """Go on with ``fn(error)`` after a failure (see :func:`flowpy.operators.on_error_resume`)."""
        return Flowable(operators.on_error_resume(self._publisher, fn))

    def on_error_return(self, fn: Callable[[BaseException], T_co]) -> Flowable[T_co]:
        """Emit ``fn(error)`` and complete after a failure (see :func:`flowpy.operators.on_error_return`)."""
        return Flowable(operators.on_error_return(self._publisher, fn))

    # --- Rx transforms: concat_map, switch_map, distinct, ... -----------------

    def concat_map(self, fn: Callable[[T_co], Publisher[R]], prefetch: int = 2) -> Flowable[R]:
        """Emit the publishers ``fn`` maps the items to, one after another (see :func:`flowpy.operators.concat_map`)."""
        return Flowable(operators.concat_map(self._publisher, fn, prefetch))

    def switch_map(self, fn: Callable[[T_co], Publisher[R]], *, prefetch: int = 256) -> Flowable[R]:
        """Emit the publisher of the latest item only (see :func:`flowpy.operators.switch_map`)."""
        return Flowable(operators.switch_map(self._publisher, fn, prefetch=prefetch))

    def distinct(self, key_fn: Callable[[T_co], Hashable] | None = None) -> Flowable[T_co]:
        """Drop items whose key was seen before (fused; see :func:`flowpy.operators.distinct`)."""
        return Flowable(operators.distinct(self._publisher, key_fn))

    def distinct_until_changed(self, key_fn: Callable[[T_co], object] | None = None) -> Flowable[T_co]:
        """Drop an item whose key equals the last one's (fused; see :func:`flowpy.operators.distinct_until_changed`)."""
        return Flowable(operators.distinct_until_changed(self._publisher, key_fn))

    def with_latest_from(
        self, other: Publisher[Any], combiner: Callable[[T_co, Any], Any] | None = None
    ) -> Flowable[Any]:
        """Pair each item with the latest of ``other`` (see :func:`flowpy.operators.with_latest_from`)."""
        return Flowable(operators.with_latest_from(self._publisher, other, combiner))

    def start_with(self, *items: T_co) -> Flowable[T_co]:  # type: ignore[misc]
        """Emit ``items`` first (see :func:`flowpy.operators.start_with`)."""
        return Flowable(operators.start_with(self._publisher, *items))

    def default_if_empty(self, item: T_co) -> Flowable[T_co]:  # type: ignore[misc]
        """Emit ``item`` if the stream is empty (see :func:`flowpy.operators.default_if_empty`)."""
        return Flowable(operators.default_if_empty(self._publisher, item))

    def repeat(self, times: int | None = None) -> Flowable[T_co]:
        """Subscribe ``times`` times in all, one after another (see :func:`flowpy.operators.repeat`)."""
        return Flowable(operators.repeat(self._publisher, times))

    def materialize(self) -> Flowable[Notification[T_co]]:
        """Every signal as a :class:`~flowpy.operators.Notification` item (see :func:`flowpy.operators.materialize`)."""
        return Flowable(operators.materialize(self._publisher))

    def dematerialize(self: Flowable[Notification[R]]) -> Flowable[R]:
        """Notification items back into signals (fused; see :func:`flowpy.operators.dematerialize`)."""
        return Flowable(operators.dematerialize(self._publisher))

    # --- Rx filters: skip_while, take_until, take_last, element_at, ... -------

    def skip_while(self, predicate: Callable[[T_co], object]) -> Flowable[T_co]:
        """Drop items while ``predicate`` holds (fused; see :func:`flowpy.operators.skip_while`)."""
        return Flowable(operators.skip_while(self._publisher, predicate))

    def take_until(self, other: Publisher[Any]) -> Flowable[T_co]:
        """Emit until ``other`` emits or completes (see :func:`flowpy.operators.take_until`)."""
        return Flowable(operators.take_until(self._publisher, other))

    def take_last(self, count: int) -> Flowable[T_co]:
        """Emit the last ``count`` items at the end (see :func:`flowpy.operators.take_last`)."""
        return Flowable(operators.take_last(self._publisher, count))

    def element_at(self, index: int) -> Flowable[T_co]:
        """Emit only the item at ``index`` (fused; see :func:`flowpy.operators.element_at`)."""
        return Flowable(operators.element_at(self._publisher, index))

    def first(self) -> Flowable[T_co]:
        """Emit only the first item (fused; see :func:`flowpy.operators.first`)."""
        return Flowable(operators.first(self._publisher))

    def last(self) -> Flowable[T_co]:
        """Emit only the last item, at the end (see :func:`flowpy.operators.last`)."""
        return Flowable(operators.last(self._publisher))

    def ignore_elements(self) -> Flowable[T_co]:
        """Pass on only the terminal signal (see :func:`flowpy.operators.ignore_elements`)."""
        return Flowable(operators.ignore_elements(self._publisher))

    # --- Hooks: do_on_*, do_finally ---------------------------------------------

    def do_on_next(self, fn: Callable[[T_co], object]) -> Flowable[T_co]:
        """Call ``fn(item)`` for each item (fused; see :func:`flowpy.operators.do_on_next`)."""
        return Flowable(operators.do_on_next(self._publisher, fn))

    def do_on_error(self, fn: Callable[[BaseException], object]) -> Flowable[T_co]:
        """Call ``fn(error)`` on failure (see :func:`flowpy.operators.do_on_error`)."""
        return Flowable(operators.do_on_error(self._publisher, fn))

    def do_on_complete(self, fn: Callable[[], object]) -> Flowable[T_co]:
        """Call ``fn()`` on completion (see :func:`flowpy.operators.do_on_complete`)."""
        return Flowable(operators.do_on_complete(self._publisher, fn))

    def do_on_subscribe(self, fn: Callable[[Subscription], object]) -> Flowable[T_co]:
        """Call ``fn(subscription)`` on subscribe (see :func:`flowpy.operators.do_on_subscribe`)."""
        return Flowable(operators.do_on_subscribe(self._publisher, fn))

    def do_on_request(self, fn: Callable[[int], object]) -> Flowable[T_co]:
        """Call ``fn(n)`` for each request (see :func:`flowpy.operators.do_on_request`)."""
        return Flowable(operators.do_on_request(self._publisher, fn))

    def do_on_cancel(self, fn: Callable[[], object]) -> Flowable[T_co]:
        """Call ``fn()`` on cancel (see :func:`flowpy.operators.do_on_cancel`)."""
        return Flowable(operators.do_on_cancel(self._publisher, fn))

    def do_finally(self, fn: Callable[[], object]) -> Flowable[T_co]:
        """Call ``fn()`` once the stream is over (see :func:`flowpy.operators.do_finally`)."""
        return Flowable(operators.do_finally(self._publisher, fn))

    # --- Grouping, sharing, parallel ---------------------------------------------

    @overload
    def group_by(
        self, key_fn: Callable[[T_co], K], value_fn: None = None, *, prefetch: int = 256
    ) -> Flowable[GroupedFlowable[K, T_co]]: ...

    @overload
    def group_by(
        self, key_fn: Callable[[T_co], K], value_fn: Callable[[T_co], V], *, prefetch: int = 256
    ) -> Flowable[GroupedFlowable[K, V]]: ...

    def group_by(
        self, key_fn: Callable[[T_co], K], value_fn: Callable[[T_co], Any] | None = None, *, prefetch: int = 256
    ) -> Flowable[GroupedFlowable[K, Any]]:
        """Split into one :class:`GroupedFlowable` per key (see :func:`flowpy.operators.group_by`)."""
        groups = operators.group_by(self._publisher, key_fn, value_fn, prefetch=prefetch)
        return Flowable(operators.map(groups, GroupedFlowable))

    def replay(self, buffer_size: int | None = None) -> ConnectableFlowable[T_co]:
        """A multicast flowable that starts on ``connect()`` and replays (see :func:`flowpy.operators.replay`)."""
        return ConnectableFlowable(operators.replay(self._publisher, buffer_size))

    def cache(self) -> Flowable[T_co]:
        """Subscribe once, keep every item, replay them to every subscriber (see :func:`flowpy.operators.cache`)."""
        return Flowable(operators.cache(self._publisher))

    def parallel(self, rails: int | None = None, prefetch: int = 256) -> ParallelFlowable[T_co]:
        """Deal the items out to ``rails`` rails (CPUs when ``None``; see :func:`flowpy.operators.parallel`)."""
        from flowpy.parallel import ParallelFlowable  # parallel builds on this module

        return ParallelFlowable(operators.parallel(self._publisher, rails, prefetch))

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

    # --- Testing ----------------------------------------------------------

    def test(self, initial_request: int = MAX_DEMAND) -> TestSubscriber[T_co]:
        """Subscribe a :class:`~flowpy.testing.TestSubscriber` that requests ``initial_request``, and return it.

        Raises:
            TypeError: if ``initial_request`` is not an int.
            ValueError: if ``initial_request`` is negative.
        """
        subscriber: TestSubscriber[T_co] = TestSubscriber(initial_request)
        self._publisher.subscribe(subscriber)
        return subscriber

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


# --- Grouping, sharing, parallel ---------------------------------------------------


class GroupedFlowable(Flowable[T_co], Generic[K, T_co]):
    """One group of :meth:`Flowable.group_by`: the items whose key is :attr:`key`, for one subscriber.

    Subscribe inside the ``on_next`` that delivers the group (``flat_map``
    does), or it is abandoned (see :func:`flowpy.operators.group_by`).
    """

    __slots__ = ()

    _publisher: GroupedPublisher[K, T_co]

    def __init__(self, group: GroupedPublisher[K, T_co]) -> None:
        super().__init__(group)

    @property
    def key(self) -> K:
        """The key that all the group's items share."""
        return self._publisher.key

    def __repr__(self) -> str:
        return f"GroupedFlowable(key={self.key!r})"
