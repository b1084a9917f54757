"""Exception types of flowpy.

The JDK's exceptions map to Python's where one fits: ``NullPointerException``
is :class:`TypeError`, ``IllegalArgumentException`` is :class:`ValueError`.
``IllegalStateException`` becomes one of the classes below, each a
:class:`RuntimeError` that says whose action led to it.
"""

from __future__ import annotations

__all__ = [
    "ClosedPublisherError",
    "DuplicateSubscriptionError",
    "MissingBackpressureError",
]


class ClosedPublisherError(RuntimeError):
    """Your code closed the publisher, and then submitted to it.

    Raised by ``submit`` and ``offer`` after ``close()`` or
    ``close_exceptionally()``, and by a ``submit`` that was blocked when the
    publisher was closed.
    """


class DuplicateSubscriptionError(RuntimeError):
    """A subscriber subscribed to a publisher it was already subscribed to (rule 2.12).

    Signalled through ``on_error`` of the existing subscription.
    """


class MissingBackpressureError(RuntimeError):
    """A source produced more than was requested and the bounded buffer overflowed."""
