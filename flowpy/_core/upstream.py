"""The one upstream subscription of a subscriber (rule 2.5).

Rule 2.5: a subscriber that already has an active subscription must cancel
any further one it is given. :class:`UpstreamSlot` is that decision, written
once, for every subscriber and processor in flowpy: the first subscription
is kept, a later one is cancelled, and so is one that arrives after the
owner cancelled (rule 2.6: the owner may cancel before the subscription is
there) or after it ended.

The slot is the only record of "cancelled" or "ended" that its decision
reads: an owner that ends or cancels says so to the slot (:meth:`cancel`,
:meth:`detach`), never only to a flag of its own. A subscription arriving
on another thread at that moment is then either kept before it (and
cancelled or released by it) or refused after it; a flag read outside the
slot's lock would leave a subscription kept after the owner's cancel had
found none, neither requested nor cancelled.
"""

from __future__ import annotations

import threading

from flowpy._checks import require
from flowpy._signals import call_subscription
from flowpy.flow import Subscription

__all__ = ["UpstreamSlot"]


class UpstreamSlot:
    """Holds the first upstream subscription; cancels later ones and honours an early cancel or end.

    Thread-safe. Cancelling a refused or released subscription goes through
    :func:`flowpy._signals.call_subscription`, so a raising ``cancel`` is
    reported rather than thrown at the publisher (rule 3.15). No method is
    called on a subscription while the slot's lock is held.
    """

    __slots__ = ("_lock", "cancelled", "closed", "connected", "current")

    def __init__(self) -> None:
        self._lock = threading.Lock()  # a leaf lock: nothing is called while it is held
        # --- Written under self._lock; read racily ------------------------
        # accept() decides on connected and closed under the lock, and cancel()
        # and detach() set closed under it: so a subscription is either kept
        # before the owner ends (and handed to cancel() or detach()) or refused.
        self.current: Subscription | None = None  # the kept subscription; None before accept() and after the end
        self.connected = False  # a subscription was kept; set once
        self.closed = False  # cancel() or detach() was called: nothing is kept any more; set once
        self.cancelled = False  # cancel() was called; set once

    def accept(self, subscription: Subscription) -> bool:
        """Keep ``subscription`` if it is the first and the slot was neither cancelled nor detached.

        Otherwise ``subscription`` is cancelled (rules 2.5, 2.6) and ``False`` returned.

        Raises:
            TypeError: if ``subscription`` is ``None`` (rule 2.13).
        """
        require(subscription, "subscription", "2.13")
        with self._lock:
            accepted = not self.connected and not self.closed
            if accepted:
                self.connected = True
                self.current = subscription
        if not accepted:
            call_subscription(subscription, None)
        return accepted

    def detach(self) -> Subscription | None:
        """End the slot without cancelling: forget the subscription and return it; a later one is cancelled.

        For an owner that ended: after the upstream's terminal signal (rule
        2.4: nothing to cancel), or to cancel the returned subscription itself.
        """
        with self._lock:
            self.closed = True
            subscription, self.current = self.current, None
        return subscription

    def cancel(self) -> None:
        """Cancel the kept subscription, once; a subscription arriving later is cancelled too (rule 2.6)."""
        with self._lock:
            self.closed = True
            self.cancelled = True
            subscription, self.current = self.current, None
        if subscription is not None:
            call_subscription(subscription, None)
