"""The switch for context propagation (docs/submission-publisher.md, "Context propagation").

Every subscriber's signals run in a copy of the :mod:`contextvars` context
current when it subscribed, across every executor hop. That is on by
default; :func:`set_context_propagation` turns it off (or on again) for the
subscriptions made afterwards, which then run their signals in whatever
context the delivering thread has. Turn it off only for the last few percent
of the pure-Python core's throughput (docs/performance.md): the compiled
core pays nothing measurable for it.
"""

from __future__ import annotations

from flowpy import _context

__all__ = ["context_propagation", "set_context_propagation"]


def context_propagation() -> bool:
    """Whether subscriptions made now run their signals in a copy of the subscribing context."""
    return _context.enabled


def set_context_propagation(enabled: bool) -> None:
    """Turn context propagation on or off for the subscriptions made from now on, process-wide.

    Subscriptions that already exist keep what they had.

    Raises:
        TypeError: if ``enabled`` is not a ``bool``.
    """
    if type(enabled) is not bool:
        raise TypeError(f"set_context_propagation enabled must be a bool, got {enabled!r}")
    _context.enabled = enabled
