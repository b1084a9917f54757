"""Run the SubmissionPublisher core tests against both implementations.

The compiled core (``flowpy._cbuffered``) and the pure-Python reference
(``flowpy._buffered``) must behave the same, so the core test modules listed
in :data:`CORE_MODULES` run once per implementation: the ``core_impl``
fixture of tests/conftest.py switches the class that
:class:`~flowpy.submission.SubmissionPublisher` builds its subscriptions from.
When the compiled core was not built, its runs are skipped with the reason.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from flowpy import _impl

__all__ = ["CORE_MODULES", "core_params", "not_built_reason", "use_core"]

CORE_MODULES = frozenset(
    {
        "test_context",
        "test_submission",
        "test_submission_concurrency",
        "test_submission_core",
        "test_submission_interrupts",
        "test_submission_many",
        "test_submission_leaks",
        "test_processors",
        "test_submission_publisher_tck",
        "test_exit",
        "test_processors_tck",
        "test_snapshots",
    }
)
"""Test modules (by last name) whose every test runs once per implementation."""


def not_built_reason() -> str | None:
    """Why the compiled core cannot be tested here, or ``None`` if it can."""
    if _impl.CBufferedSubscription is not None:
        return None
    if _impl.extensions_disabled():
        return "compiled core disabled by FLOWPY_NO_EXTENSIONS"
    return "compiled core flowpy._cbuffered not built (no C compiler or Python headers at install time)"


@contextmanager
def use_core(name: str) -> Iterator[None]:
    """Make SubmissionPublisher use implementation ``name`` inside the block; skip if it is not built."""
    reason = not_built_reason() if name == "c" else None
    if reason is not None:
        pytest.skip(reason)
    with _impl.using("c" if name == "c" else "python"):
        yield


def core_params() -> list[Any]:
    """``pytest.param`` per implementation; the compiled one skips when it was not built."""
    reason = not_built_reason()
    return [
        pytest.param("python", id="python"),
        pytest.param("c", id="c", marks=() if reason is None else pytest.mark.skip(reason=reason)),
    ]
