"""Demand arithmetic shared by every subscription in flowpy (rules 3.9, 3.17)."""

from __future__ import annotations

__all__ = ["MAX_DEMAND", "add_demand", "check_request"]

MAX_DEMAND = 2**63 - 1
"""``Long.MAX_VALUE``: demand at or above it is unbounded (rule 3.17)."""


def add_demand(current: int, n: int) -> int:
    """Return ``current + n``, saturated at :data:`MAX_DEMAND` (rule 3.17)."""
    total = current + n
    return MAX_DEMAND if total >= MAX_DEMAND else total


def check_request(n: object, subscriber: object = None) -> BaseException | None:
    """Return the error that ``request(n)`` must signal, or ``None`` if ``n`` is valid.

    ``n`` must be a positive ``int``; ``bool`` is not a demand. The error is
    meant for ``on_error``: ``request`` itself returns normally (rule 3.16).
    """
    if type(n) is int:
        if n > 0:
            return None
        return ValueError(
            f"{subscriber!r} violated the Reactive Streams rule 3.9 by requesting a "
            f"non-positive number of elements: non-positive subscription request, got {n!r}"
        )
    if isinstance(n, int) and not isinstance(n, bool):
        return None if n > 0 else check_request(int(n), subscriber)
    return TypeError(f"request(n) takes a positive int (rule 3.9), got {n!r}")
