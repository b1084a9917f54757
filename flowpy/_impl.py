"""Which implementation of the SubmissionPublisher core runs: compiled or pure Python.

This is the one place that chooses. :mod:`flowpy._buffered` is the reference
implementation of :class:`BufferedSubscription`; ``flowpy._cbuffered`` is its
compiled twin, built by ``pip install`` when a C compiler and the Python
headers are present. The compiled one is used when it was built, unless the
environment variable ``FLOWPY_NO_EXTENSIONS`` is set to anything but ``""``
or ``"0"`` when flowpy is imported. Both behave the same; only the speed
differs. :data:`flowpy.implementation` tells which one is active.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Final, Literal

from flowpy._buffered import BufferedSubscription as PythonBufferedSubscription
from flowpy.flow import Subscription

__all__ = [
    "BufferedSubscription",
    "CBufferedSubscription",
    "PythonBufferedSubscription",
    "extensions_disabled",
    "implementation",
    "using",
]


def extensions_disabled() -> bool:
    """Whether ``FLOWPY_NO_EXTENSIONS`` asks for pure Python (set, and not ``"0"``)."""
    return os.environ.get("FLOWPY_NO_EXTENSIONS", "") not in ("", "0")


CBufferedSubscription: type[Subscription] | None = None
"""The compiled class, or ``None`` if it was not built or is disabled."""

if not extensions_disabled():
    try:
        from flowpy._cbuffered import BufferedSubscription as _Compiled
    except ImportError:  # not built: no compiler or headers at install time
        pass
    else:
        Subscription.register(_Compiled)
        CBufferedSubscription = _Compiled

implementation: Final[Literal["c", "python"]] = "python" if CBufferedSubscription is None else "c"
"""``"c"`` if the compiled core is active, ``"python"`` if the pure-Python one is."""

if TYPE_CHECKING:
    # Both classes have the same interface; type checkers see the reference.
    BufferedSubscription = PythonBufferedSubscription
else:
    BufferedSubscription: Any = PythonBufferedSubscription if CBufferedSubscription is None else CBufferedSubscription


@contextmanager
def using(name: Literal["c", "python"]) -> Iterator[None]:
    """Make SubmissionPublisher build its subscriptions from implementation ``name`` inside the block.

    For tests and benchmarks, which compare the two in one process; not
    thread-safe, and only subscriptions made inside the block are affected.

    Raises:
        LookupError: if ``name`` is ``"c"`` and the compiled core is not available.
    """
    if name == "python":
        chosen: Any = PythonBufferedSubscription
    elif CBufferedSubscription is not None:
        chosen = CBufferedSubscription
    else:
        raise LookupError("the compiled core is not available: not built, or FLOWPY_NO_EXTENSIONS is set")
    submission = sys.modules["flowpy.submission"]
    previous = getattr(submission, "BufferedSubscription")  # noqa: B009 - a module seen as untyped here
    setattr(submission, "BufferedSubscription", chosen)  # noqa: B010
    try:
        yield
    finally:
        setattr(submission, "BufferedSubscription", previous)  # noqa: B010
