"""Small helpers shared by the interop adapters."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from flowpy._demand import MAX_DEMAND

__all__ = ["check_positive", "replenish_limit", "require", "run_on_loop"]


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
