"""``flat_map``, ``merge`` and ``concat``: many inner publishers, one output.

Each inner publisher gets its own bounded queue of ``prefetch`` items and
exerts its own backpressure upstream; the subscriber's demand is served from
those queues round-robin, one item per inner per round, so a slow inner never
blocks a fast one and a fast one never floods the others. The number of
inners subscribed at once is bounded by ``max_concurrency`` (the vertical
growth is bounded by ``prefetch``).

``merge(*publishers)`` subscribes to all of them at once; ``concat`` is the
same machinery with ``max_concurrency=1``, so it subscribes to the next
publisher only when the previous one has completed and been drained.

Threading:  items go downstream from a drain loop that runs on whichever
            thread made progress possible (an inner's ``on_next``, a
            ``request``), one thread at a time (rule 1.3); ``request`` and
            ``cancel`` may come from any thread.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from functools import partial
from typing import Any, Generic, TypeVar

from flowpy._checks import none_error, require, require_callable, require_positive_int, require_publisher
from flowpy._core.serial import trampoline
from flowpy._core.upstream import UpstreamSlot
from flowpy._demand import MAX_DEMAND
from flowpy._signals import reraise_fatal, signal_subscribe
from flowpy.flow import Publisher, Subscriber, Subscription
from flowpy.operators._base import DemandDrain, TrackedStagePublisher
from flowpy.operators._queue import QueueSubscriber
from flowpy.operators._tracking import Stage
from flowpy.snapshots import SubscriberSnapshot

__all__ = ["concat", "flat_map", "merge"]

T = TypeVar("T")
R = TypeVar("R")
T_co = TypeVar("T_co", covariant=True)


# Implementation overview
#
# _Coordinator is the downstream's subscription and owns the drain loop
# (DemandDrain). Inners (_Inner, a QueueSubscriber) are added by the thread
# that subscribes them (the outer's on_next for flat_map, the drain itself
# for merge/concat) under self._lock, and removed only by the drain. Each
# inner appends to its own deque on its publisher's thread and signals the
# drain; only the drain polls, which replenishes 75 % of prefetch at a time.
#
# The drain never scans every inner, so an item costs the same with 2
# inners or 1,000: an inner with queued items is on the ready ring
# (self._ring) exactly while its `scheduled` flag is set. The drain takes
# the inner at the front, delivers one item and puts it at the back while it
# has more (one item per inner per round: round-robin); an inner found empty
# is unscheduled, and rescheduled at once if an item came meanwhile. Its
# producer appends first and reads the flag second; the drain clears the
# flag first and reads the queue second; so at least one of them sees the
# other, and schedule() (under the lock) puts the inner on the ring once.
# An inner that completes is also put on self._ended, so that the drain
# retires it without demand (rule 1.4) once its queue is empty.
#
# New inners come from a "feed": for flat_map, the outer subscription, asked
# for max_concurrency items at first and for one more each time an inner is
# retired; for merge/concat, an iterator of publishers that the drain pulls
# from while fewer than max_concurrency inners are active.


class _Inner(QueueSubscriber):
    """One inner publisher's queue; it puts itself on the coordinator's ready ring when it has items."""

    __slots__ = ("scheduled",)

    parent: _Coordinator[Any]

    def __init__(self, parent: _Coordinator[Any], prefetch: int, name: str) -> None:
        super().__init__(parent, prefetch, name)
        self.scheduled = False  # on the ready ring, or being served by the drain

    def on_next(self, item: Any) -> None:
        """Queue ``item``, put this inner on the ready ring, and signal the drain.

        The per-item path of :meth:`QueueSubscriber.on_next`, plus the ring.

        Raises:
            TypeError: if ``item`` is ``None`` (rule 2.13).
        """
        if item is None:
            raise none_error("item", "2.13")
        if self.done:
            return
        if len(self.queue) >= self.prefetch and not self._admit_over_capacity(item):
            return
        self.queue.append(item)
        parent = self.parent
        if not self.scheduled:  # read after the append (see the overview)
            parent.schedule(self)
        if not parent.draining:
            parent._signal()

    def on_complete(self) -> None:
        """Mark the upstream done and let the drain retire this inner once its queue is empty."""
        if self.done:
            return
        self.done = True
        self.parent.ended(self)


class _Coordinator(DemandDrain, Generic[T]):
    """The downstream's subscription: serves its demand from the inners' queues."""

    __slots__ = (
        "_downstream",
        "_ended",
        "_feed",
        "_inners",
        "_outer",
        "_retired",
        "_ring",
        "_terminated",
        "max_concurrency",
        "outer_done",
        "prefetch",
    )

    def __init__(
        self,
        downstream: Subscriber[T],
        max_concurrency: int,
        prefetch: int,
        feed: Iterator[Publisher[T]] | None,
    ) -> None:
        super().__init__()
        self._downstream = downstream
        self.max_concurrency = max_concurrency
        self.prefetch = prefetch
        self._feed = feed  # merge/concat: publishers to subscribe; None for flat_map
        self._outer: Subscription | None = None  # flat_map: the source of inner publishers
        self.outer_done = False  # no inner publisher will be added any more
        # Guarded by self._lock: added to by inner(), removed from by the drain.
        self._inners: dict[_Inner, None] = {}  # the active inners, in the order they came
        # The inners with queued items, each once: appended under self._lock by
        # schedule(), and by the drain for an inner it keeps; popped by the drain.
        self._ring: deque[_Inner] = deque()
        self._ended: deque[_Inner] = deque()  # inners whose upstream completed; popped by the drain
        # --- Drain only ---------------------------------------------------
        self._retired = 0  # inners retired in this pass
        self._terminated = False

    def add(self, publisher: Publisher[T]) -> None:
        """Subscribe to ``publisher`` as a new inner."""
        publisher.subscribe(self.inner("inner publisher"))

    def inner(self, name: str) -> QueueSubscriber:
        """A new inner, not yet subscribed to anything; ``name`` is what its overflow error calls its source.

        Once this coordinator was cancelled, the inner is stopped instead of
        added: its subscription is cancelled as it arrives (the drain's
        :meth:`_cancel_all` has taken, or will take, every inner added before).
        """
        inner = _Inner(self, self.prefetch, name)
        with self._lock:
            late = self.cancelled  # set before _cancel_all takes this lock
            if not late:
                self._inners[inner] = None
        if late:
            inner.stop()
        return inner

    def schedule(self, inner: _Inner) -> None:
        """Put ``inner`` on the ready ring unless it is on it already."""
        with self._lock:
            if inner.scheduled:
                return
            inner.scheduled = True
            self._ring.append(inner)

    def ended(self, inner: _Inner) -> None:
        """Say that ``inner``'s upstream completed; the drain retires it once its queue is empty."""
        self._ended.append(inner)
        self._signal()

    def outer_complete(self) -> None:
        """Say that no inner publisher will be added any more."""
        self.outer_done = True
        self._signal()

    def _signal_downstream_error(self, error: BaseException) -> None:
        if not self._terminated:
            self._terminated = True
            self._downstream.on_error(error)

    def _cancel_upstream(self) -> None:
        self._cancel_all()

    def reading(self) -> SubscriberSnapshot | None:
        """The inners' queues and this stage's counters, or ``None`` once it ended (racy).

        ``buffered`` sums the active inners' queues; ``capacity`` is
        ``prefetch`` for each of them.
        """
        if self.cancelled or self._terminated:
            return None
        inners = self._inners.copy()  # one atomic copy; the dict changes under other threads
        buffered = sum(len(inner.queue) for inner in inners)
        return SubscriberSnapshot(
            self._downstream, buffered, self.prefetch * len(inners), self._requested, self.delivered, 0
        )

    def _has_work(self) -> bool:
        return (self._requested > 0 and bool(self._ring)) or bool(self._ended)

    def _cancel_all(self) -> None:
        self.cancelled = True
        if self._outer is not None:
            self._outer.cancel()
        with self._lock:
            inners = list(self._inners)
            self._inners.clear()
            self._ring.clear()
        self._ended.clear()
        for inner in inners:
            inner.cancel()

    def _drain(self) -> None:
        if self._terminated:
            return
        if self.cancelled:
            self._cancel_all()
            return
        failure = self._failure
        if failure is not None:
            self._terminated = True
            self._cancel_all()
            self._downstream.on_error(failure)
            return
        self._feed_inners()
        requested = self._requested
        self._retired = 0
        emitted = self._emit(requested)
        if emitted < 0:  # cancelled or failed meanwhile: the next pass ends it
            return
        self._produced(emitted, requested)
        ended = self._ended
        while ended:
            inner = ended.popleft()
            if not inner.queue:  # else the emit loop retires it after its last item
                self._retire(inner)
        retired = self._retired
        if retired:
            if self._feed is not None:
                self._feed_inners()
            elif self._outer is not None and self.max_concurrency != MAX_DEMAND and not self.outer_done:
                self._outer.request(retired)
        if self.outer_done and not self._inners and self._failure is None and not self.cancelled:
            self._terminated = True
            self.cancelled = True
            self._downstream.on_complete()

    def _emit(self, requested: int) -> int:
        """Deliver round-robin from the ready ring; return the count, or -1 if the stream ended."""
        on_next = self._downstream.on_next
        ring = self._ring
        emitted = 0
        while emitted != requested and ring:
            inner = ring.popleft()
            queue = inner.queue
            if queue:
                on_next(inner.poll())
                emitted += 1
                if self.cancelled or self._failure is not None:
                    return -1
                if queue:
                    ring.append(inner)  # still scheduled: to the back of the ring
                    continue
            inner.scheduled = False  # then look at the queue again (see the overview)
            if queue:
                self.schedule(inner)
            elif inner.done:
                self._retire(inner)
        return emitted

    def _retire(self, inner: _Inner) -> None:
        """Forget an exhausted inner, once; drain only."""
        with self._lock:
            if inner not in self._inners:
                return
            del self._inners[inner]
        self._retired += 1

    def _feed_inners(self) -> None:
        """merge/concat: subscribe further publishers while below ``max_concurrency``."""
        feed = self._feed
        if feed is None or self.outer_done:
            return
        while len(self._inners) < self.max_concurrency and not self.cancelled:
            try:
                publisher = next(feed)
            except StopIteration:
                self.outer_done = True
                return
            self.add(publisher)


class _Outer(Subscriber[Any], Generic[T, R]):
    """flat_map's subscriber to the source: maps each item to an inner publisher."""

    __slots__ = ("_coordinator", "_downstream", "_fn", "_upstream")

    def __init__(
        self, downstream: Subscriber[R], fn: Callable[[T], Publisher[R]], max_concurrency: int, prefetch: int
    ) -> None:
        self._downstream = downstream
        self._fn = fn
        self._coordinator: _Coordinator[R] = _Coordinator(downstream, max_concurrency, prefetch, None)
        self._upstream = UpstreamSlot()  # keeps the first source subscription (rule 2.5)

    def on_subscribe(self, subscription: Subscription) -> None:
        """Hand the coordinator to the downstream, then ask the source for ``max_concurrency`` publishers.

        A later subscription is cancelled and the first kept (rule 2.5). The
        coordinator delivers nothing before the downstream's ``on_subscribe``
        has returned, so the rest goes through the trampoline, as a queue
        stage's does (:meth:`flowpy.operators._queue.HeadSubscriber.on_subscribe`).

        Raises:
            TypeError: if ``subscription`` is ``None`` (rule 2.13).
        """
        if self._upstream.accept(subscription):
            trampoline(partial(self._open, subscription))

    def _open(self, subscription: Subscription) -> None:
        coordinator = self._coordinator
        coordinator._outer = subscription  # the coordinator requests and cancels it from here on
        if not signal_subscribe(self._downstream, coordinator):
            return  # it cancelled the coordinator, whose pass cancelled the source
        coordinator._release()
        if not coordinator.cancelled:
            subscription.request(coordinator.max_concurrency)

    def on_next(self, item: T) -> None:
        if item is None:
            raise none_error("item", "2.13")
        coordinator = self._coordinator
        if coordinator.cancelled or coordinator.outer_done:
            return
        try:
            publisher = self._fn(item)
            require_publisher(publisher, "flat_map function result")
        except BaseException as error:
            # The failure before outer_done, as in on_error.
            coordinator.fail(error)
            coordinator.outer_done = True
            reraise_fatal(error)
            return
        coordinator.add(publisher)

    def on_error(self, error: BaseException) -> None:
        require(error, "error", "2.13")
        # The failure is recorded before the source counts as done: a drain on
        # another thread that finds it done and no inner left must also find
        # the failure, or it would complete the downstream in its place.
        self._coordinator.fail(error)
        self._coordinator.outer_done = True

    def on_complete(self) -> None:
        self._coordinator.outer_complete()


def _merge_into(
    subscriber: Subscriber[T],
    publishers: tuple[Publisher[T], ...],
    max_concurrency: int,
    prefetch: int,
    track: Callable[[Stage], None],
) -> None:
    """Subscribe ``subscriber`` to a coordinator that merges ``publishers``."""
    coordinator: _Coordinator[T] = _Coordinator(subscriber, max_concurrency, prefetch, iter(publishers))
    track(coordinator)
    if signal_subscribe(subscriber, coordinator):
        coordinator._release()


def _check_publishers(publishers: Iterable[object]) -> None:
    for index, publisher in enumerate(publishers):
        require_publisher(publisher, f"publishers[{index}]")


def flat_map(
    source: Publisher[T],
    fn: Callable[[T], Publisher[R]],
    *,
    max_concurrency: int = 256,
    prefetch: int = 256,
) -> Publisher[R]:
    """Map each item of ``source`` to a publisher and merge their items::

        source:  --a-----b--------|
        inner a:   --1--2|
        inner b:         --3--4|
        result:  ----1--2--3--4---|

    Demand: asks ``source`` for ``max_concurrency`` items (256 by default),
    then one more each time an inner completes; asks each inner
    for ``prefetch`` items and for 75 % of that again as they are consumed,
    so no inner ever has more than ``prefetch`` items queued or requested.
    The subscriber's demand is served round-robin from the inners' queues.
    The first error (from ``source``, an inner or ``fn``) cancels the rest
    and is signalled at once.

    Raises:
        TypeError: if ``fn`` is not callable.
        ValueError: if ``max_concurrency`` or ``prefetch`` is not positive.
    """
    require_publisher(source, "source")
    require_callable(fn, "fn")
    require_positive_int(max_concurrency, "max_concurrency")
    require_positive_int(prefetch, "prefetch")
    concurrency = min(max_concurrency, MAX_DEMAND)

    def connect(subscriber: Subscriber[R], track: Callable[[Stage], None]) -> None:
        outer: _Outer[Any, R] = _Outer(subscriber, fn, concurrency, prefetch)
        track(outer._coordinator)
        source.subscribe(outer)

    return TrackedStagePublisher("flat_map", connect, prefetch)


def merge(*publishers: Publisher[T], prefetch: int = 256) -> Publisher[T]:
    """Subscribe to all ``publishers`` at once and emit their items as they come::

        first:   --1-----3--|
        second:  -----2-----4--|
        result:  --1--2--3--4--|

    Demand: each publisher is asked for ``prefetch`` items and for 75 % of
    that again as its items are consumed; the subscriber's demand is served
    round-robin. Completes when all have completed; the first error cancels
    the others and is signalled at once.

    Raises:
        TypeError: if an argument is not a publisher.
        ValueError: if ``prefetch`` is not positive.
    """
    _check_publishers(publishers)
    require_positive_int(prefetch, "prefetch")
    concurrency = max(len(publishers), 1)
    return TrackedStagePublisher(
        "merge", lambda subscriber, track: _merge_into(subscriber, publishers, concurrency, prefetch, track), prefetch
    )


def concat(*publishers: Publisher[T], prefetch: int = 256) -> Publisher[T]:
    """Emit all items of each publisher in turn, subscribing to the next when one completes::

        first:   --1--2|
        second:         --3--4|
        result:  --1--2----3--4|

    Demand: only one publisher is subscribed at a time, asked for
    ``prefetch`` items and for 75 % of that again as they are consumed.

    Raises:
        TypeError: if an argument is not a publisher.
        ValueError: if ``prefetch`` is not positive.
    """
    _check_publishers(publishers)
    require_positive_int(prefetch, "prefetch")
    return TrackedStagePublisher(
        "concat", lambda subscriber, track: _merge_into(subscriber, publishers, 1, prefetch, track), prefetch
    )
