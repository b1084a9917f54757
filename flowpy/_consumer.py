"""A subscriber that feeds every item to a function and settles a future when the stream ends.

It serves ``SubmissionPublisher.consume``, :func:`flowpy.subscribers.consume`,
:func:`flowpy.subscribers.collect` and the ``reduce`` terminal operator.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError
from contextlib import suppress
from typing import Generic, TypeVar

from flowpy._checks import none_error, require
from flowpy._core.upstream import UpstreamSlot
from flowpy._demand import MAX_DEMAND
from flowpy._signals import reraise_fatal
from flowpy.flow import Publisher, Subscriber, Subscription

__all__ = ["FutureSubscriber", "subscribe_future"]

T = TypeVar("T")
R = TypeVar("R")


class FutureSubscriber(Subscriber[T], Generic[T, R]):
    """Calls ``fn`` for each item, with unbounded demand, and settles ``future`` at the end.

    On ``on_complete`` the future gets ``result()``; on ``on_error`` that
    error. ``fn`` raising cancels the subscription and fails the future.
    Cancelling the future cancels the subscription (rule 2.6): the future
    stays pending until the stream ends, so ``cancel()`` always works.
    """

    __slots__ = ("_fn", "_future", "_result", "_upstream")

    def __init__(self, fn: Callable[[T], object], future: Future[R], result: Callable[[], R]) -> None:
        self._fn = fn
        self._future = future
        self._result = result
        self._upstream = UpstreamSlot()
        future.add_done_callback(self._on_future_done)

    def _on_future_done(self, future: Future[R]) -> None:
        # Through the slot: a subscription arriving from now on is refused (rule 2.5).
        if future.cancelled():
            self._upstream.cancel()
        else:
            self._upstream.detach()  # settled by the stream's end or by fn, which cancelled it

    def on_subscribe(self, subscription: Subscription) -> None:
        # rule 2.5; refused once the future is done (the future's callback ended the slot)
        if self._upstream.accept(subscription):
            subscription.request(MAX_DEMAND)

    def on_next(self, item: T) -> None:
        if item is None:
            raise none_error("item", "2.13")
        if self._future.done():
            return  # cancelled or failed; items still in flight are ignored (rule 2.8)
        try:
            self._fn(item)
        except BaseException as exc:
            subscription = self._upstream.current
            if subscription is not None:
                subscription.cancel()
            with suppress(InvalidStateError):  # cancelled meanwhile
                self._future.set_exception(exc)
            reraise_fatal(exc)

    def on_error(self, error: BaseException) -> None:
        require(error, "error", "2.13")
        with suppress(InvalidStateError):  # cancelled, or failed by fn
            self._future.set_exception(error)

    def on_complete(self) -> None:
        if self._future.done():
            return
        try:
            result = self._result()
        except BaseException as exc:
            with suppress(InvalidStateError):
                self._future.set_exception(exc)
            reraise_fatal(exc)
            return
        with suppress(InvalidStateError):  # cancelled meanwhile
            self._future.set_result(result)


def no_result() -> None:
    """The result of a future that only says when the stream ended (``consume``)."""
    return None


def subscribe_future(publisher: Publisher[T], fn: Callable[[T], object], result: Callable[[], R]) -> Future[R]:
    """Subscribe a :class:`FutureSubscriber` to ``publisher`` and return its future.

    ``result()`` gives the future's value at ``on_complete``; :func:`no_result` for none.
    """
    future: Future[R] = Future()
    publisher.subscribe(FutureSubscriber(fn, future, result))
    return future
