"""The one upstream subscription of a subscriber (rule 2.5).

Rule 2.5: a subscriber that already has an active subscription must cancel
any further one it is given. :class:`UpstreamSlot` is that decision, written
once, for every subscriber and processor in flowpy: the first subscription
is kept, a later one is cancelled, and so is one that arrives after the
owner cancelled (rule 2.6: the owner may cancel before the subscription is
there) or after it ended.
"""

from __future__ import annotations

import threading

from flowpy._checks import require
from flowpy._signals import call_subscription
from flowpy.flow import Subscription

__all__ = ["UpstreamSlot"]


class UpstreamSlot:
    """Holds the first upstream subscription; cancels later ones and honours an early cancel.

    Thread-safe. Cancelling a refused or released subscription goes through
    :func:`flowpy._signals.call_subscription`, so a raising ``cancel`` is
    reported rather than thrown at the publisher (rule 3.15). No method is
    called on a subscription while the slot's lock is held.
    """

    __slots__ = ("_lock", "cancelled", "connected", "current")

    def __init__(self) -> None:
        self._lock = threading.Lock()  # a leaf lock: nothing is called while it is held
        # --- Written under self._lock; read racily ------------------------
        self.current: Subscription | None = None  # the kept subscription; None before accept() and after detach()
        self.connected = False  # a subscription was kept; set once
        self.cancelled = False  # cancel() was called; set once

    def accept(self, subscription: Subscription, *, is_open: bool = True) -> bool:
        """Keep ``subscription`` if it is the first, the slot was not cancelled and ``is_open``.

        Otherwise ``subscription`` is cancelled (rules 2.5, 2.6) and ``False`` returned.

        Raises:
            TypeError: if ``subscription`` is ``None`` (rule 2.13).
        """
        require(subscription, "subscription", "2.13")
        with self._lock:
            accepted = is_open and not self.connected and not self.cancelled
            if accepted:
                self.connected = True
                self.current = subscription
        if not accepted:
            call_subscription(subscription, None)
        return accepted

    def detach(self) -> Subscription | None:
        """Forget the subscription (after its terminal signal, or to cancel it); return it."""
        with self._lock:
            subscription, self.current = self.current, None
        return subscription

    def cancel(self) -> None:
        """Cancel the kept subscription, once; a subscription arriving later is cancelled too."""
        with self._lock:
            self.cancelled = True
            subscription, self.current = self.current, None
        if subscription is not None:
            call_subscription(subscription, None)
