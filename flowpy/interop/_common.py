"""Small helpers shared by the interop adapters."""

from __future__ import annotations

import asyncio
import threading
from abc import abstractmethod
from collections import deque
from collections.abc import Callable
from typing import TypeVar

from flowpy import flow
from flowpy._checks import none_error, require
from flowpy._core.upstream import UpstreamSlot

__all__ = ["ForwardingSubscriber", "Inbox", "SingleSubscriber", "post_to_loop", "run_on_loop"]

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


class Inbox(ForwardingSubscriber[T]):
    """A forwarding subscriber that buffers signals for one consuming task of an event loop.

    Signals may come from any thread: ``on_next`` appends to :attr:`_items`,
    ``on_error``/``on_complete`` set :attr:`_error` then :attr:`_done`, and
    each then calls :meth:`_wake` to rouse the consumer. The consumer pops
    :attr:`_items` and requests only what it has popped, so at most
    ``initial`` items are ever buffered.
    """

    __slots__ = ("_done", "_error", "_items")

    def __init__(self, initial: int) -> None:
        super().__init__(initial)
        # Appended by on_next; popped only by the consuming task.
        self._items: deque[T] = deque()
        self._done = False  # set by on_complete/on_error after the last append
        self._error: BaseException | None = None  # written before _done

    def on_next(self, item: T) -> None:
        if item is None:
            raise none_error("item", "2.13")
        self._items.append(item)
        self._wake()

    def on_error(self, error: BaseException) -> None:
        require(error, "error", "2.13")
        self._error = error
        self._done = True
        self._wake()

    def on_complete(self) -> None:
        self._done = True
        self._wake()

    @abstractmethod
    def _wake(self) -> None:
        """Rouse the consuming task if it waits; called after every signal, on the signalling thread."""


class SingleSubscriber:
    """The guard of a publisher that serves one subscriber: only the first :meth:`claim` wins."""

    __slots__ = ("_lock", "_taken")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._taken = False  # guarded by _lock: the one subscriber has come

    def claim(self) -> bool:
        """Return ``True`` for the first caller only (thread-safe)."""
        with self._lock:
            taken, self._taken = self._taken, True
        return not taken
