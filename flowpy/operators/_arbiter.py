"""A downstream subscription whose upstream can change: the unfilled demand follows it.

``timeout`` switches to a fallback publisher, ``delay_subscription``
subscribes its source late: in both the downstream keeps one subscription
while the upstream behind it is missing for a while or replaced.
:class:`SubscriptionArbiter` is that subscription (RxJava's
``SubscriptionArbiter``): it keeps the demand that no item has filled yet,
passes ``request`` to the current upstream (or keeps it until one comes),
asks a new upstream for what is still unfilled, and cancels whatever
upstream it has or gets after ``cancel``.
"""

from __future__ import annotations

import threading

from flowpy._demand import MAX_DEMAND, add_demand, check_request
from flowpy._signals import call_subscription
from flowpy.flow import Subscription

__all__ = ["SubscriptionArbiter"]


class SubscriptionArbiter(Subscription):
    """The downstream's subscription over an upstream that can be set later or replaced.

    Demand: ``request(n)`` adds to the unfilled demand and goes to the
    current upstream; :meth:`set_upstream` requests the unfilled demand from
    the new upstream; the owner reports the items it passed on with
    :meth:`produced` before it replaces the upstream. An invalid ``n`` is
    passed to the upstream (kept until there is one), so that the upstream
    signals the rule 3.9 error in order with its items.
    """

    __slots__ = ("_arbiter_lock", "_current", "_invalid", "_unfilled", "is_cancelled")

    def __init__(self) -> None:
        self._arbiter_lock = threading.Lock()  # a leaf lock: no subscription method is called under it
        # --- Guarded by self._arbiter_lock ---------------------------------------
        self._current: Subscription | None = None
        self._unfilled = 0  # requested and not yet produced; MAX_DEMAND is unbounded
        self._invalid: list[object] = []  # invalid requests made before there was an upstream
        self.is_cancelled = False  # set once by cancel()

    def request(self, n: int) -> None:
        """Add ``n`` to the unfilled demand and request it from the current upstream (rules 3.8, 3.17)."""
        with self._arbiter_lock:
            if self.is_cancelled:
                return  # rule 3.6
            if check_request(n) is None:
                self._unfilled = add_demand(self._unfilled, n)
            elif self._current is None:
                self._invalid.append(n)
                return
            current = self._current
        if current is not None:
            call_subscription(current, n)

    def produced(self, n: int) -> None:
        """Subtract ``n`` items passed on from the unfilled demand (unbounded demand stays unbounded)."""
        with self._arbiter_lock:
            if self._unfilled != MAX_DEMAND:
                self._unfilled = max(0, self._unfilled - n)

    def set_upstream(self, subscription: Subscription) -> None:
        """Make ``subscription`` the upstream and request the unfilled demand from it.

        The previous upstream is forgotten, not cancelled (the owner ends it).
        After :meth:`cancel`, ``subscription`` is cancelled instead (rule 2.6).
        """
        with self._arbiter_lock:
            cancelled = self.is_cancelled
            if not cancelled:
                self._current = subscription
                unfilled = self._unfilled
                invalid, self._invalid = self._invalid, []
        if cancelled:
            call_subscription(subscription, None)
            return
        if unfilled:
            call_subscription(subscription, unfilled)
        for n in invalid:
            call_subscription(subscription, n)  # type: ignore[arg-type]

    def detach(self) -> Subscription | None:
        """Forget the current upstream (it is over) and return it."""
        with self._arbiter_lock:
            current, self._current = self._current, None
        return current

    def cancel(self) -> None:
        """Cancel the current upstream and any later one; idempotent (rules 3.5, 3.7)."""
        with self._arbiter_lock:
            if self.is_cancelled:
                return
            self.is_cancelled = True
            current, self._current = self._current, None
            self._invalid.clear()
        if current is not None:
            call_subscription(current, None)
