"""Small helpers shared by the interop adapters."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TypeVar

from flowpy import flow
from flowpy._checks import require

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

    Keeps the first subscription and cancels any later one (rule 2.5),
    requests ``initial`` items when it arrives, and honours a :meth:`cancel`
    that came before it. Subclasses implement the three other signals.
    """

    __slots__ = ("_cancelled", "_initial", "_subscription")

    def __init__(self, initial: int) -> None:
        self._initial = initial
        self._cancelled = False  # set once by cancel(); never cleared
        self._subscription: flow.Subscription | None = None  # written once, by on_subscribe

    def on_subscribe(self, subscription: flow.Subscription) -> None:
        require(subscription, "subscription", "2.13")
        if self._subscription is not None:
            subscription.cancel()  # rule 2.5
            return
        self._subscription = subscription
        if self._cancelled:  # cancel() ran before the subscription arrived
            subscription.cancel()
        else:
            subscription.request(self._initial)

    def request(self, n: int) -> None:
        """Request ``n`` more; only called after items arrived, so after ``on_subscribe``."""
        subscription = self._subscription
        if subscription is not None:
            subscription.request(n)

    def cancel(self) -> None:
        """Cancel the subscription, now or as soon as it arrives (rule 2.6)."""
        self._cancelled = True
        subscription = self._subscription
        if subscription is not None:
            subscription.cancel()
