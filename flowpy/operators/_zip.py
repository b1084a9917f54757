"""``zip``: combine the n-th items of several publishers.

Each source gets a bounded queue of ``prefetch`` items; a row goes out when
every queue has a head and the subscriber has demand.

Threading:  rows go downstream from a drain loop that runs on whichever
            thread made progress possible, one thread at a time (rule 1.3).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from flowpy._checks import require_callable, require_positive_int, require_publisher
from flowpy._signals import reraise_fatal, signal_subscribe
from flowpy.flow import Publisher, Subscriber
from flowpy.operators._base import DemandDrain, TrackedStagePublisher
from flowpy.operators._queue import QueueSubscriber
from flowpy.operators._tracking import Stage
from flowpy.snapshots import SubscriberSnapshot

__all__ = ["zip_"]


class _ZipCoordinator(DemandDrain):
    """The downstream's subscription: emits ``fn(*heads)`` while every queue has a head."""

    __slots__ = ("_downstream", "_fn", "inners")

    def __init__(self, downstream: Subscriber[Any], fn: Callable[..., Any] | None, count: int, prefetch: int) -> None:
        super().__init__()
        self._downstream = downstream
        self._fn = fn
        self.inners = tuple(QueueSubscriber(self, prefetch, f"zip source {index}") for index in range(count))

    def _cancel_upstream(self) -> None:
        self._end()

    def reading(self) -> SubscriberSnapshot | None:
        """The sources' queues and this stage's counters, or ``None`` once it ended (racy).

        ``buffered`` sums the queues; ``capacity`` is ``prefetch`` for each source.
        """
        if self.cancelled:
            return None
        inners = self.inners
        buffered = sum(len(inner.queue) for inner in inners)
        return SubscriberSnapshot(
            self._downstream, buffered, inners[0].prefetch * len(inners), self._requested, self.delivered, 0
        )

    def _has_work(self) -> bool:
        return self._requested > 0 and all(inner.queue for inner in self.inners)

    def _signal_downstream_error(self, error: BaseException) -> None:
        self._downstream.on_error(error)

    def _end(self) -> None:
        self.cancelled = True
        for inner in self.inners:
            inner.cancel()

    def _drain(self) -> None:
        inners = self.inners
        if self.cancelled:
            self._end()
            return
        downstream = self._downstream
        failure = self._failure
        if failure is not None:
            self._end()
            downstream.on_error(failure)
            return
        requested = self._requested
        emitted = 0
        fn = self._fn
        while True:
            # A source that is done with an empty queue ends the zip: no row can be completed.
            if any(inner.exhausted for inner in inners):
                self._end()
                downstream.on_complete()
                return
            if emitted == requested or not all(inner.queue for inner in inners):
                break
            result: Any = tuple([inner.poll() for inner in inners])
            if fn is not None:
                try:
                    result = fn(*result)
                    if result is None:
                        raise TypeError(f"zip function must not return None (rule 2.13), got None from {fn!r}")
                except BaseException as error:
                    self._end()
                    downstream.on_error(error)
                    reraise_fatal(error)
                    return
            downstream.on_next(result)
            emitted += 1
            if self.cancelled or self._failure is not None:
                return  # the next pass ends the stream
        self._produced(emitted, requested)


def _zip_into(
    subscriber: Subscriber[Any],
    publishers: tuple[Publisher[Any], ...],
    fn: Callable[..., Any] | None,
    prefetch: int,
    track: Callable[[Stage], None],
) -> None:
    """Subscribe ``subscriber`` to a coordinator that zips ``publishers``."""
    coordinator = _ZipCoordinator(subscriber, fn, len(publishers), prefetch)
    track(coordinator)
    if not signal_subscribe(subscriber, coordinator):
        return  # cancelled: no source is subscribed
    for publisher, inner in zip(publishers, coordinator.inners, strict=True):
        if coordinator.cancelled:
            break
        publisher.subscribe(inner)
    coordinator._release()


def zip_(*publishers: Publisher[Any], fn: Callable[..., Any] | None = None, prefetch: int = 256) -> Publisher[Any]:
    """Emit ``fn(a, b, ...)`` of the n-th items of each publisher, or the tuple ``(a, b, ...)``::

        first:   --1-----2-----3--|
        second:  -----a-----b--|
        result:  -----(1,a)-(2,b)-|

    Demand: each publisher is asked for ``prefetch`` items and for 75 % of
    that again as its items are consumed, so none has more than ``prefetch``
    queued. Completes as soon as one publisher has completed and its queue is
    empty (the rest are cancelled), like the builtin ``zip``; the first error
    cancels the rest and is signalled at once.

    Raises:
        TypeError: if an argument is not a publisher or ``fn`` is not callable.
        ValueError: if ``prefetch`` is not positive or no publisher is given.
    """
    for index, publisher in enumerate(publishers):
        require_publisher(publisher, f"publishers[{index}]")
    if not publishers:
        raise ValueError("zip must be given at least one publisher, got none")
    if fn is not None:
        require_callable(fn, "fn")
    require_positive_int(prefetch, "prefetch")
    return TrackedStagePublisher(
        "zip", lambda subscriber, track: _zip_into(subscriber, publishers, fn, prefetch, track), prefetch
    )
