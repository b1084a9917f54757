"""Demand arithmetic shared by every subscription in flowpy (rules 3.9, 3.17)."""

from __future__ import annotations

__all__ = ["MAX_DEMAND", "add_demand", "check_request", "replenish_limit", "unfilled_demand"]

MAX_DEMAND = 2**63 - 1
"""``Long.MAX_VALUE``: demand at or above it is unbounded (rule 3.17)."""


def add_demand(current: int, n: int) -> int:
    """Return ``current + n``, saturated at :data:`MAX_DEMAND` (rule 3.17)."""
    total = current + n
    return MAX_DEMAND if total >= MAX_DEMAND else total


def unfilled_demand(requested: int, emitted: int) -> int:
    """Return what is left of ``requested`` after ``emitted`` items; :data:`MAX_DEMAND` stays unbounded."""
    return MAX_DEMAND if requested == MAX_DEMAND else requested - emitted


def check_request(n: object) -> BaseException | None:
    """Return the error that ``request(n)`` must signal, or ``None`` if ``n`` is valid.

    ``n`` must be a positive ``int``; ``bool`` is not a demand. The error is
    meant for ``on_error``: ``request`` itself returns normally (rule 3.16).
    """
    if isinstance(n, int) and not isinstance(n, bool):
        if n > 0:
            return None
        return ValueError(f"non-positive subscription request: n must be > 0 (rule 3.9), got {n!r}")
    return TypeError(f"subscription request must be an int (rule 3.9), got {n!r}")


def replenish_limit(prefetch: int) -> int:
    """Return how many consumed items trigger the next ``request`` of a prefetch window.

    A consumer that keeps ``prefetch`` items requested asks for more once it
    has consumed three quarters of them (at least one), as Reactor's
    ``limitRate`` does: large enough to batch requests, small enough that the
    source rarely runs dry while the request travels. Unbounded demand
    (:data:`MAX_DEMAND`) is never replenished.
    """
    return prefetch if prefetch >= MAX_DEMAND else max(1, prefetch - (prefetch >> 2))
