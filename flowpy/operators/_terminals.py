"""Terminal operations: consume a publisher into a future, an iterator or callbacks."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from typing import TypeVar

from flowpy._checks import require_callable, require_publisher
from flowpy._consumer import subscribe_future
from flowpy.flow import Publisher
from flowpy.subscribers import BlockingIterator, LambdaSubscriber, collect, iterate

__all__ = ["blocking_iter", "reduce", "subscribe", "to_list"]

T = TypeVar("T")
R = TypeVar("R")


def to_list(source: Publisher[T]) -> Future[list[T]]:
    """Return a future of all the items of ``source``, in order.

    Requests everything (rule 3.17). The future fails with the stream's
    error; cancelling it cancels the subscription.
    """
    require_publisher(source, "source")
    return collect(source)


def reduce(source: Publisher[T], fn: Callable[[R, T], R], initial: R) -> Future[R]:
    """Return a future of ``fn(...fn(fn(initial, item0), item1)..., itemN)``.

    ``initial`` for an empty stream, like :func:`functools.reduce` with an
    initializer. Requests everything (rule 3.17); a raising ``fn`` cancels
    the subscription and fails the future; cancelling the future cancels
    the subscription.

    Raises:
        TypeError: if ``source`` is not a publisher or ``fn`` is not callable.
    """
    require_publisher(source, "source")
    require_callable(fn, "fn")
    accumulator = initial

    def on_next(item: T) -> None:
        nonlocal accumulator
        accumulator = fn(accumulator, item)

    return subscribe_future(source, on_next, lambda: accumulator)


def blocking_iter(source: Publisher[T], prefetch: int = 256, *, timeout: float | None = None) -> BlockingIterator[T]:
    """Return a blocking iterator over ``source`` that keeps at most ``prefetch`` items ahead.

    Leaving the loop early (``break``, ``close()``, a ``with`` block)
    cancels the subscription. See :func:`flowpy.subscribers.iterate`.
    """
    require_publisher(source, "source")
    return iterate(source, prefetch=prefetch, timeout=timeout)


def subscribe(
    source: Publisher[T],
    on_next: Callable[[T], object],
    on_error: Callable[[BaseException], object] | None = None,
    on_complete: Callable[[], object] | None = None,
    *,
    prefetch: int = 256,
) -> LambdaSubscriber[T]:
    """Subscribe callbacks to ``source``; return the subscriber, whose ``cancel()`` stops the stream.

    Requests ``prefetch`` items and 75 % of that again as they are consumed.
    See :class:`flowpy.subscribers.LambdaSubscriber`.

    Raises:
        TypeError: if ``on_next`` is not callable.
    """
    require_publisher(source, "source")
    subscriber: LambdaSubscriber[T] = LambdaSubscriber(on_next, on_error, on_complete, prefetch=prefetch)
    source.subscribe(subscriber)
    return subscriber
