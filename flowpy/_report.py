"""Reporting failures that have nowhere else to go.

Rule 2.13: when a subscriber method raises, the publisher considers the
subscription cancelled and must report the error "in a way suited to the
runtime". In Python that is the ``flowpy`` logger, with the traceback.
"""

from __future__ import annotations

import logging

__all__ = ["report"]

_logger = logging.getLogger("flowpy")


def report(error: BaseException, context: str) -> None:
    """Log ``error`` with its traceback at ERROR level on the ``flowpy`` logger.

    Args:
        error: the exception that could not be signalled.
        context: what was being done, e.g. ``"on_next of <subscriber> raised (rule 2.13)"``.
    """
    _logger.error("%s: %r", context, error, exc_info=error)
