"""What becomes of accepted items when the interpreter exits.

The shared pool's threads are daemon threads, so they never keep the
interpreter alive (as the JDK's common pool does not). Left at that, a script
that submits and returns would lose the items still buffered, silently. At
exit flowpy therefore:

1. waits, for at most ``FLOWPY_EXIT_TIMEOUT`` seconds (default 5), until every
   :class:`~flowpy.executors.DaemonThreadPool` has run what it was handed, if
   some open subscription has buffered items and demand for them or a
   consumer task under way (``on_subscribe`` may yet request them); so what
   subscribers ask for is delivered, and ``on_complete`` after it;
2. then warns with :class:`~flowpy.errors.UndeliveredItemsWarning` (shown by
   default) about every open subscription that still holds items: the
   subscriber requested none of them, or delivery did not finish in time.

It never waits for items no subscriber asked for, and never longer than the
timeout. Executors of ``concurrent.futures`` join their own workers at exit,
before this runs. A child made by ``os.fork()`` inherits none of this: it
forgets the parent's subscriptions, so it neither waits nor warns about them.
"""

from __future__ import annotations

import atexit
import os
import threading
import warnings
import weakref
from time import monotonic
from typing import TYPE_CHECKING, Any

from flowpy._fork import at_fork_in_child
from flowpy._pool import live_pools
from flowpy.errors import UndeliveredItemsWarning

if TYPE_CHECKING:
    from flowpy._buffered import BufferedSubscription

__all__ = ["DEFAULT_EXIT_TIMEOUT", "exit_timeout", "track"]

DEFAULT_EXIT_TIMEOUT = 5.0
"""Seconds flowpy waits at exit for deliveries subscribers asked for."""

_lock = threading.Lock()
_subscriptions: weakref.WeakSet[BufferedSubscription[Any]] = weakref.WeakSet()  # guarded by _lock


def track(subscription: BufferedSubscription[Any]) -> None:
    """Look at ``subscription`` at exit (it is held weakly)."""
    with _lock:
        _subscriptions.add(subscription)


@at_fork_in_child
def _forget_in_child() -> None:
    """After ``os.fork()``, in the child: the parent's subscriptions are not the child's to wait for or warn about."""
    global _lock, _subscriptions
    _lock = threading.Lock()
    _subscriptions = weakref.WeakSet()


def exit_timeout() -> float:
    """The exit wait: ``FLOWPY_EXIT_TIMEOUT`` seconds if set to a number >= 0, else the default."""
    value = os.environ.get("FLOWPY_EXIT_TIMEOUT", "")
    try:
        timeout = float(value)
    except ValueError:
        return DEFAULT_EXIT_TIMEOUT
    return timeout if timeout >= 0 else DEFAULT_EXIT_TIMEOUT


def _holding() -> list[BufferedSubscription[Any]]:
    """The open subscriptions that still hold items."""
    with _lock:
        subscriptions = list(_subscriptions)
    return [s for s in subscriptions if not s.is_closed and s.lag()]


def _demand(subscription: BufferedSubscription[Any]) -> int:
    return subscription.estimate_demand() + subscription.lag()


def _at_exit() -> None:
    holding = _holding()
    if not holding:
        return
    timeout = exit_timeout()
    if any(s.has_task() or _demand(s) for s in holding):
        deadline = monotonic() + timeout
        for pool in live_pools():
            pool.wait_idle(max(0.0, deadline - monotonic()))
        holding = _holding()
    if not holding:
        return
    parts = []
    total = 0
    for subscription in holding:
        lag = subscription.lag()
        total += lag
        why = "delivery did not finish in time" if _demand(subscription) else "it had not requested them"
        parts.append(f"{lag} to {subscription.subscriber!r} ({why})")
    warnings.warn(
        f"{total} items accepted by SubmissionPublisher were never delivered at interpreter exit "
        f"(waited up to {timeout:g} s, FLOWPY_EXIT_TIMEOUT): {'; '.join(parts)}; "
        f"close the publisher and wait for its subscribers before exiting",
        UndeliveredItemsWarning,
        stacklevel=1,
    )


atexit.register(_at_exit)
