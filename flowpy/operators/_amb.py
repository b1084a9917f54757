"""``amb``: of several publishers, follow the first that signals; cancel the others.

Threading:  the winner's signals pass through on its own thread; the race
            is decided once, under a lock.
"""

from __future__ import annotations

import threading
from typing import Any, TypeVar

from flowpy._checks import none_error, require, require_publisher
from flowpy._demand import add_demand, check_request
from flowpy._signals import call_subscription, signal_subscribe
from flowpy.flow import Publisher, Subscriber, Subscription
from flowpy.operators._base import StagePublisher
from flowpy.sources import empty

__all__ = ["amb"]

T = TypeVar("T")


class _Contender(Subscriber[Any]):
    """One publisher in the race: its first signal claims the win, or finds it lost and cancels."""

    __slots__ = ("_race", "subscription", "won")

    def __init__(self, race: _Race) -> None:
        self._race = race
        self.subscription: Subscription | None = None  # set under the race's lock
        self.won = False  # this contender's thread only: the win was claimed

    def on_subscribe(self, subscription: Subscription) -> None:
        """Keep ``subscription`` and request the demand so far, unless the race is decided against it.

        Raises:
            TypeError: if ``subscription`` is ``None`` (rule 2.13).
        """
        require(subscription, "subscription", "2.13")
        self._race.enter(self, subscription)

    def _claim(self) -> bool:
        if self.won:
            return True
        self.won = self._race.claim(self)
        return self.won

    def on_next(self, item: Any) -> None:
        """Pass ``item`` on if this contender won.

        Raises:
            TypeError: if ``item`` is ``None`` (rule 2.13).
        """
        if item is None:
            raise none_error("item", "2.13")
        if self._claim():
            self._race.downstream.on_next(item)

    def on_error(self, error: BaseException) -> None:
        """Pass ``error`` on if this contender won.

        Raises:
            TypeError: if ``error`` is ``None`` (rule 2.13).
        """
        require(error, "error", "2.13")
        if self._claim():
            self._race.downstream.on_error(error)

    def on_complete(self) -> None:
        """Pass the completion on if this contender won."""
        if self._claim():
            self._race.downstream.on_complete()


class _Race(Subscription):
    """The downstream's subscription: demand goes to every contender until one wins, then to the winner."""

    __slots__ = ("_cancelled", "_lock", "_requested", "_winner", "contenders", "downstream")

    def __init__(self, downstream: Subscriber[Any], count: int) -> None:
        self.downstream = downstream
        self.contenders = tuple(_Contender(self) for _ in range(count))
        self._lock = threading.Lock()
        # --- Guarded by self._lock ----------------------------------------
        self._requested = 0  # requested so far, for contenders whose subscription comes later
        self._winner: _Contender | None = None  # set once
        self._cancelled = False

    @property
    def decided(self) -> bool:
        """Whether the race is over (won, or cancelled): no further publisher need be subscribed."""
        return self._winner is not None or self._cancelled

    def enter(self, contender: _Contender, subscription: Subscription) -> None:
        with self._lock:
            accepted = (
                contender.subscription is None
                and not self._cancelled
                and (self._winner is None or self._winner is contender)
            )
            if accepted:
                contender.subscription = subscription
                requested = self._requested
        if not accepted:
            call_subscription(subscription, None)  # lost, cancelled, or a second subscription (rule 2.5)
        elif requested:
            subscription.request(requested)

    def claim(self, contender: _Contender) -> bool:
        """Make ``contender`` the winner if none is yet, and cancel the others; return whether it won."""
        with self._lock:
            if self._cancelled or (self._winner is not None and self._winner is not contender):
                return False
            self._winner = contender
            subscriptions = [other.subscription for other in self.contenders]
        for other, subscription in zip(self.contenders, subscriptions, strict=True):
            if other is not contender and subscription is not None:
                call_subscription(subscription, None)
        return True

    def request(self, n: int) -> None:
        """Pass ``n`` to the winner, or to every contender until one wins (an invalid ``n`` too, rule 3.9)."""
        valid = check_request(n) is None
        with self._lock:
            if self._cancelled:
                return
            if valid:
                self._requested = add_demand(self._requested, n)
            winner = self._winner
            targets = [c.subscription for c in ((winner,) if winner is not None else self.contenders)]
        for subscription in targets:
            if subscription is not None:
                subscription.request(n)

    def cancel(self) -> None:
        """Cancel every contender (rules 3.5, 3.7)."""
        with self._lock:
            if self._cancelled:
                return
            self._cancelled = True
            subscriptions = [contender.subscription for contender in self.contenders]
        for subscription in subscriptions:
            if subscription is not None:
                call_subscription(subscription, None)


def amb(*sources: Publisher[T]) -> Publisher[T]:
    """Follow whichever of ``sources`` signals first (an item, an error or the completion); cancel the others::

        first:   -------1--2--|
        second:  ---a--b--|
        amb(first, second)
        result:  ---a--b--|

    The sources are subscribed in order, and no further one once a winner
    is known (a synchronous source that emits while being subscribed wins
    at once). With no sources it completes at once; with one it is that
    source.

    Demand: until a source wins, every request goes to every source; then
    only to the winner. Nothing is buffered.

    Raises:
        TypeError: if an argument is not a publisher.
    """
    for index, source in enumerate(sources):
        require_publisher(source, f"sources[{index}]")
    if not sources:
        return empty()
    if len(sources) == 1:
        return sources[0]

    def connect(subscriber: Subscriber[T]) -> None:
        race = _Race(subscriber, len(sources))
        if not signal_subscribe(subscriber, race):
            return
        for source, contender in zip(sources, race.contenders, strict=True):
            if race.decided:
                break
            source.subscribe(contender)

    return StagePublisher("amb", connect)
