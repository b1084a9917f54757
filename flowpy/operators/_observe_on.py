"""``observe_on``: an asynchronous boundary with a bounded queue.

The upstream delivers into a queue of at most ``prefetch`` items; a drain
task on the executor delivers from it to the subscriber, as far as the
subscriber's demand allows. This is the operator to use when a fast source
must not run the subscriber's code on its own thread.

Threading:  ``on_subscribe`` reaches the subscriber on the thread that
            subscribed; every later signal runs on the executor, one drain
            task at a time (rule 1.3). If the executor refuses a task, the
            source is cancelled and the subscriber gets the executor's
            exception through ``on_error``, after its ``on_subscribe`` has
            returned.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

from flowpy._checks import require_positive_int, require_publisher
from flowpy._demand import MAX_DEMAND
from flowpy.executors import DEFAULT, Default, Executor, Task, resolve_execute
from flowpy.flow import Publisher, Subscriber
from flowpy.operators._base import TrackedStagePublisher
from flowpy.operators._queue import HeadSubscriber, QueueDrain
from flowpy.operators._tracking import Stage

__all__ = ["OnDemandDrain", "OnDemandHead", "observe_on", "observe_on_demand"]

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)


class _ObserveOn(QueueDrain[T], Generic[T]):
    """The downstream's subscription; its drain runs on the executor."""

    __slots__ = ()

    def __init__(self, downstream: Subscriber[T], execute: Callable[[Task], object], prefetch: int) -> None:
        super().__init__(downstream, execute)
        self.upstream = HeadSubscriber(self, prefetch, "observe_on's upstream", delay_error=True)


def observe_on(source: Publisher[T], executor: Executor | Default = DEFAULT, *, prefetch: int = 256) -> Publisher[T]:
    """Deliver the items of ``source`` on ``executor``, through a queue of at most ``prefetch``::

        source:   --1--2--3--|          (upstream thread)
        observe_on(pool)
        result:   ----1--2--3--|        (pool thread)

    Demand: requests ``prefetch`` from ``source`` at once, then 75 % of
    ``prefetch`` again each time the subscriber has taken that many, so the
    queue never holds more than ``prefetch`` items; the subscriber's own
    demand only decides how fast the queue drains. An upstream that sends
    more than requested is cancelled and the subscriber receives
    :class:`~flowpy.errors.MissingBackpressureError`. An upstream error
    arrives after the items queued before it; an invalid ``request(n)``
    fails the stream at once (rule 3.9).

    Args:
        source: the publisher to observe.
        executor: where the subscriber's methods run; default: the shared pool.
        prefetch: the queue's capacity and the first upstream request.

    Raises:
        TypeError: if ``executor`` is ``None`` or not an executor.
        ValueError: if ``prefetch`` is not positive.
    """
    require_publisher(source, "source")
    require_positive_int(prefetch, "prefetch")
    execute = resolve_execute(executor)

    def connect(subscriber: Subscriber[T], track: Callable[[Stage], None]) -> None:
        stage = _ObserveOn(subscriber, execute, prefetch)
        track(stage)
        source.subscribe(stage.upstream)

    return TrackedStagePublisher("observe_on", connect, prefetch)


# --- Requesting only what the subscriber asked for ----------------------------------


class OnDemandHead(HeadSubscriber):
    """The upstream side of :class:`OnDemandDrain`: requests only when the drain tops it up."""

    __slots__ = ()

    parent: OnDemandDrain[Any]

    def start(self) -> None:
        """Request what the subscriber asked for inside ``on_subscribe``, if anything."""
        self.parent.top_up()

    def poll(self) -> Any:
        """Take the next item; the drain tops up the requests once per pass."""
        return self.queue.popleft()


class OnDemandDrain(QueueDrain[T], Generic[T]):
    """A queue drain whose requests upstream follow the subscriber's demand, up to ``capacity`` ahead.

    With ``execute``, an executor hop (:func:`observe_on_demand`); without, the
    drain runs inline (``delay`` builds on it). ``head`` makes the upstream
    subscriber; it must be an :class:`OnDemandHead`.
    """

    __slots__ = ("_asked", "_capacity", "_taken")

    def __init__(
        self,
        downstream: Subscriber[T],
        execute: Callable[[Task], object] | None,
        capacity: int,
        head: Callable[[OnDemandDrain[T]], OnDemandHead] | None = None,
    ) -> None:
        super().__init__(downstream, execute)
        self._capacity = capacity
        # --- Guarded by self._lock, with the demand (self._requested) -------
        # Invariant after every top-up: asked - taken == min(unfilled demand, capacity),
        # the items requested upstream and not yet delivered (queued or on their way).
        self._asked = 0  # requested upstream in all
        self._taken = 0  # delivered downstream in all
        if head is None:
            self.upstream = OnDemandHead(self, capacity, "the upstream of an on-demand observe_on", delay_error=True)
        else:
            self.upstream = head(self)

    def request(self, n: int) -> None:
        """Add ``n`` to the demand, request the same upstream (up to ``capacity`` ahead), let the drain run."""
        super().request(n)
        self.top_up()

    def top_up(self) -> None:
        """Request upstream what the demand allows beyond what is already asked and undelivered."""
        subscription = self.upstream.subscription
        if subscription is None or self.cancelled:
            return  # start() tops up once the upstream is there
        with self._lock:
            wanted = min(self._requested, self._capacity) - (self._asked - self._taken)
            if wanted <= 0:
                return
            self._asked += wanted
        subscription.request(wanted)

    def _produced(self, emitted: int, requested: int) -> None:
        self.delivered += emitted
        if not emitted:
            return
        with self._lock:
            if requested != MAX_DEMAND:
                self._requested -= emitted
            self._taken += emitted
        self.top_up()


def observe_on_demand(source: Publisher[T], execute: Callable[[Task], object], capacity: int) -> Publisher[T]:
    """Deliver ``source`` on ``execute``, requesting upstream only what the subscriber requested.

    Unlike :func:`observe_on`, which requests ``prefetch`` ahead of the
    subscriber, this hop passes each ``request(n)`` upstream at once (on the
    requesting thread), keeping at most ``capacity`` items requested and
    undelivered; it tops the requests up as the drain delivers. So a source
    that decides by demand what to keep (the backpressure operators) sees
    the subscriber's own demand, and the queue holds only requested items.
    """

    def connect(subscriber: Subscriber[T], track: Callable[[Stage], None]) -> None:
        stage = OnDemandDrain(subscriber, execute, capacity)
        track(stage)
        source.subscribe(stage.upstream)

    return TrackedStagePublisher("observe_on_demand", connect, capacity)
