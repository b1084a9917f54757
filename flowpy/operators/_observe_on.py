"""``observe_on``: an asynchronous boundary with a bounded queue.

The upstream delivers into a queue of at most ``prefetch`` items; a drain
task on the executor delivers from it to the subscriber, as far as the
subscriber's demand allows. This is the operator to use when a fast source
must not run the subscriber's code on its own thread.

Threading:  ``on_subscribe`` reaches the subscriber on the thread that
            subscribed; every later signal runs on the executor, one drain
            task at a time (rule 1.3). If the executor refuses a task, the
            source is cancelled and the subscriber gets the executor's
            exception through ``on_error``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

from flowpy._checks import require_positive_int, require_publisher
from flowpy.executors import DEFAULT, Default, Executor, Task, resolve_execute
from flowpy.flow import Publisher, Subscriber
from flowpy.operators._base import TrackedStagePublisher
from flowpy.operators._queue import HeadSubscriber, QueueDrain
from flowpy.operators._tracking import Stage

__all__ = ["observe_on"]

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
