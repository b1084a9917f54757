"""Small helpers shared by the interop adapters."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TypeVar

from flowpy import flow
from flowpy._core.upstream import UpstreamSlot

__all__ = ["ForwardingSubscriber", "post_to_loop", "run_on_loop"]

T = TypeVar("T")


def run_on_loop(loop: asyncio.AbstractEventLoop, fn: Callable[[], object]) -> None:
    """Run ``fn`` on ``loop``'s thread: now if this is that thread, else soon.

    Calls from the loop's own thread run inline, keeping their order relative
    to the caller; calls from other threads go through
    ``call_soon_threadsafe``, which keeps their order among themselves.

    Raises:
        RuntimeError: if ``loop`` is closed and this is not its thread.
    """
    if asyncio._get_running_loop() is loop:
        fn()
    else:
        loop.call_soon_threadsafe(fn)


def post_to_loop(loop: asyncio.AbstractEventLoop, fn: Callable[[], object]) -> bool:
    """:func:`run_on_loop`, returning ``False`` instead of raising when ``loop`` is closed.

    For ``request`` and ``cancel``, which must return normally (rules 3.15,
    3.16): a closed loop means the stream it ran is gone.
    """
    try:
        run_on_loop(loop, fn)
    except RuntimeError:
        return False
    return True


class ForwardingSubscriber(flow.Subscriber[T]):
    """The subscription handling of a subscriber that forwards items to another library.

    Keeps the first subscription and cancels any later one (rule 2.5, an
    :class:`~flowpy._core.upstream.UpstreamSlot`), requests ``initial`` items
    when it arrives, and honours a :meth:`cancel` that came before it.
    Subclasses implement the three other signals.
    """

    __slots__ = ("_initial", "_upstream")

    def __init__(self, initial: int) -> None:
        self._initial = initial
        self._upstream = UpstreamSlot()

    @property
    def _cancelled(self) -> bool:
        """Whether :meth:`cancel` was called."""
        return self._upstream.cancelled

    def on_subscribe(self, subscription: flow.Subscription) -> None:
        if self._upstream.accept(subscription):
            subscription.request(self._initial)

    def request(self, n: int) -> None:
        """Request ``n`` more; only called after items arrived, so after ``on_subscribe``."""
        subscription = self._upstream.current
        if subscription is not None:
            subscription.request(n)

    def cancel(self) -> None:
        """Cancel the subscription, now or as soon as it arrives (rule 2.6)."""
        self._upstream.cancel()
