"""Small helpers shared by the interop adapters."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TypeVar

from flowpy import flow
from flowpy._demand import MAX_DEMAND

__all__ = ["ForwardingSubscriber", "check_positive", "post_to_loop", "replenish_limit", "require", "run_on_loop"]

T = TypeVar("T")


def require(value: object, name: str) -> None:
    """Raise ``TypeError("<name> must not be None")`` if ``value`` is ``None``."""
    if value is None:
        raise TypeError(f"{name} must not be None")


def check_positive(name: str, value: object) -> int:
    """Return ``value`` if it is a positive ``int`` (``bool`` is not one).

    Raises:
        TypeError: if ``value`` is not an ``int``.
        ValueError: if ``value`` is not positive.
    """
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} must be an int, got {value!r}")
    if value <= 0:
        raise ValueError(f"{name} must be positive, got {value!r}")
    return value


def replenish_limit(prefetch: int) -> int:
    """Return how many consumed items trigger the next ``request``.

    A consumer that keeps ``prefetch`` items requested asks for more once it
    has consumed three quarters of them (at least one), as Reactor's
    ``limitRate`` does: large enough to batch requests, small enough that the
    source rarely runs dry while the request travels. Unbounded demand
    (``2**63 - 1``) is never replenished.
    """
    return prefetch if prefetch >= MAX_DEMAND else max(1, prefetch - (prefetch >> 2))


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
        if subscription is None:
            raise TypeError("subscription must not be None (rule 2.13)")
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
