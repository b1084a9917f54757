"""An inner publisher fed by its owner, for one subscriber: the groups of ``group_by``.

An operator that splits one upstream into inner publishers (``group_by``'s
groups; windows) pushes each inner's items into a :class:`UnicastQueue`,
which delivers them to the one subscriber the inner admits, as its demand
allows, from a :class:`~flowpy.operators._base.DemandDrain`. The owner
hears back through :class:`UnicastOwner`: how many items were consumed
(to replenish its own upstream), and when the inner is gone (its
subscriber cancelled, failed, or the stream ended).

An inner nobody subscribed to by a chosen moment can be *abandoned*
(:meth:`UnicastQueue.try_abandon`), as RxJava 3 does: the owner stops
feeding it and stops counting on its consumption; a subscriber that still
comes later receives what it holds.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Generic, Protocol, TypeVar

from flowpy._context import capture
from flowpy._signals import signal_subscribe
from flowpy.flow import Subscriber
from flowpy.operators._base import DemandDrain, reject_subscriber

__all__ = ["UnicastOwner", "UnicastQueue"]

T = TypeVar("T")


class UnicastOwner(Protocol):
    """What a :class:`UnicastQueue` tells the operator that feeds it."""

    def consumed(self, count: int) -> None:
        """``count`` items pushed into an inner were delivered or dropped: replenish. Any thread."""

    def detached(self, inner: UnicastQueue[Any]) -> None:
        """``inner`` takes no more items (cancelled, failed, ended); called once. Any thread."""


class UnicastQueue(DemandDrain, Generic[T]):
    """A queue of pushed items that one subscriber drains as its demand allows.

    The owner calls :meth:`push` and :meth:`end` from one thread at a time
    (its upstream's); the subscriber's ``request``, ``cancel`` and the
    deliveries may run on any thread, one pass at a time (rule 1.3). The
    queue is bounded by what the owner pushes: the owner counts every item
    as outstanding until :meth:`UnicastOwner.consumed` reports it.

    The first :meth:`subscribe` is the inner's subscriber; a second one is
    refused with ``on_error(RuntimeError)``. Its signals run in a copy of
    the context it subscribed in.
    """

    __slots__ = (
        "_abandoned",
        "_delay_error",
        "_detached",
        "_name",
        "_owner",
        "_terminated",
        "done",
        "error",
        "queue",
        "subscriber",
    )

    def __init__(self, owner: UnicastOwner, name: str, *, delay_error: bool = False) -> None:
        super().__init__()
        self._owner = owner
        self._name = name  # for messages: "group 'a'"
        self._delay_error = delay_error  # an error waits for the queued items, or goes ahead of them
        self.queue: deque[T] = deque()  # appended by push(), popped by the drain
        self.done = False  # end() was called; the queue may still hold items
        self.error: BaseException | None = None  # the error end() was given
        # --- Guarded by self._lock, with the demand --------------------------
        self.subscriber: Subscriber[T] | None = None  # the one subscriber; set once
        self._abandoned = False  # the owner gave up on it before anyone subscribed
        # --- Drain only -------------------------------------------------------
        self._terminated = False  # its terminal signal went out
        self._detached = False  # the owner was told

    # --- For the owner --------------------------------------------------------

    def push(self, item: T) -> None:
        """Queue ``item`` and let the drain deliver it; from the owner's upstream thread."""
        self.queue.append(item)
        # A running pass looks at the queue again before it ends, unless it
        # was cancelled: then this item is dropped (and counted) by the next pass.
        if not self.draining or self.cancelled:
            self._signal()

    def end(self, error: BaseException | None) -> None:
        """No more items: complete (or fail with ``error``) after the queued items."""
        if self.done:
            return
        self.error = error
        self.done = True
        self._signal()

    def try_abandon(self) -> bool:
        """Give up on this inner if nobody has subscribed yet; return whether it was abandoned.

        An abandoned inner no longer reports consumption: its owner counts
        its items as consumed when it abandons it.
        """
        with self._lock:
            if self.subscriber is not None or self._abandoned:
                return False
            self._abandoned = True
        return True

    # --- For the subscriber ---------------------------------------------------

    def subscribe(self, subscriber: Subscriber[T]) -> None:
        """Make ``subscriber`` the inner's one subscriber; refuse any later one with ``on_error``."""
        with self._lock:
            taken = self.subscriber is not None
            if not taken:
                self.subscriber = subscriber
        if taken:
            reject_subscriber(
                subscriber, RuntimeError(f"{self._name} allows one subscriber, and {self.subscriber!r} came first")
            )
            return
        self._serial.context = capture()  # before the first pass that can deliver
        if signal_subscribe(subscriber, self):
            self._release()

    # --- DemandDrain -----------------------------------------------------------

    def _has_work(self) -> bool:
        return bool(self.queue) and self._requested > 0

    def _drain(self) -> None:
        if self._terminated:
            return
        if self.cancelled:
            self._cancel_upstream()
            return
        failure = self._failure
        if failure is not None:
            self._terminate(failure)
            return
        if self.done and self.error is not None and not self._delay_error:
            self._terminate(self.error)
            return
        subscriber = self.subscriber
        assert subscriber is not None  # no pass delivers before subscribe() released it
        on_next = subscriber.on_next
        queue = self.queue
        requested = self._requested
        emitted = 0
        ended = False
        try:
            while True:
                done = self.done  # read before the queue: no item follows it
                if not queue:
                    ended = done
                    break
                if emitted == requested or self.cancelled or self._failure is not None:
                    break
                item = queue.popleft()
                emitted += 1  # counted before the call: an item whose on_next raised is consumed too
                on_next(item)
        finally:
            self._produced(emitted, requested)
            self._consumed(emitted)
        if ended:
            self._terminate(self.error)

    def _cancel_upstream(self) -> None:
        dropped = self._drop()
        self._detach()  # first: an owner left with nothing to feed need not replenish
        self._consumed(dropped)

    def _signal_downstream_error(self, error: BaseException) -> None:
        if not self._terminated:
            self._terminate(error)

    # --- Helpers (drain only) ------------------------------------------------------

    def _terminate(self, error: BaseException | None) -> None:
        self._terminated = True
        self.cancelled = True
        self._cancel_upstream()
        subscriber = self.subscriber
        assert subscriber is not None  # as in _drain
        if error is None:
            subscriber.on_complete()
        else:
            subscriber.on_error(error)

    def _drop(self) -> int:
        """Empty the queue; return how many items it held."""
        dropped = 0
        queue = self.queue
        while queue:  # popleft one by one: a push meanwhile is counted, not lost
            queue.popleft()
            dropped += 1
        return dropped

    def _consumed(self, count: int) -> None:
        if count and not self._abandoned:
            self._owner.consumed(count)

    def _detach(self) -> None:
        if not self._detached:
            self._detached = True
            self._owner.detached(self)

    def __repr__(self) -> str:
        return f"<{self._name}: {len(self.queue)} queued>"
