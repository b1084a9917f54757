"""Calls across the publisher/subscriber boundary that must not raise.

Rule 2.13: when a subscriber method raises, the publisher considers the
subscription cancelled and reports the error "in a way suited to the
runtime": here, the ``flowpy`` logger, with the traceback. Rules 3.15 and
3.16 give subscription methods the same duty towards subscribers.
"""

from __future__ import annotations

import logging
from typing import TypeVar

from flowpy.flow import Subscriber, Subscription

__all__ = ["call_subscription", "report", "signal_subscribe", "signal_terminal"]

T = TypeVar("T")

_logger = logging.getLogger("flowpy")


def report(error: BaseException, context: str) -> None:
    """Log ``error`` with its traceback at ERROR level on the ``flowpy`` logger.

    Args:
        error: the exception that could not be signalled.
        context: what was being done, e.g. ``"on_next of <subscriber> raised (rule 2.13)"``.
    """
    _logger.error("%s: %r", context, error, exc_info=error)


def signal_subscribe(subscriber: Subscriber[T], subscription: Subscription) -> bool:
    """Call ``on_subscribe``; if it raised, cancel, log, and return ``False`` (rule 2.13)."""
    try:
        subscriber.on_subscribe(subscription)
    except BaseException as exc:
        subscription.cancel()
        report(exc, f"on_subscribe of {subscriber!r} raised (rule 2.13)")
        return False
    return True


def signal_terminal(subscriber: Subscriber[T], error: BaseException | None) -> None:
    """Call ``on_error(error)``, or ``on_complete()`` if ``error`` is ``None``; log a raise (rule 2.13)."""
    try:
        if error is None:
            subscriber.on_complete()
        else:
            subscriber.on_error(error)
    except BaseException as exc:
        name = "on_complete" if error is None else "on_error"
        report(exc, f"{name} of {subscriber!r} raised (rule 2.13)")


def call_subscription(subscription: Subscription, n: int | None) -> None:
    """Call ``request(n)``, or ``cancel()`` if ``n`` is ``None``; log a raise (rules 3.15, 3.16)."""
    try:
        if n is None:
            subscription.cancel()
        else:
            subscription.request(n)
    except BaseException as exc:
        name = "cancel" if n is None else "request"
        report(exc, f"{name} of {subscription!r} raised (rules 3.15, 3.16)")
