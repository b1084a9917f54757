"""The two SubmissionPublisher cores, for tests that run once on each.

A test (or a fixture it uses) that asks for the ``core`` fixture of
tests/conftest.py runs once per core, and builds what it tests from that core:
``core.SubmissionPublisher(...)``, ``core.BufferedSubscription(...)``. No list
of modules decides it: whatever needs a core says so by asking for one. A test
that imports :class:`flowpy.SubmissionPublisher` instead tests the core this
process chose (``flowpy.implementation``). When the compiled core was not
built, or ``FLOWPY_NO_EXTENSIONS`` disabled it, its runs are skipped with the
reason.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from flowpy import _impl, submission

__all__ = ["CORES", "CTL_BITS", "Core", "core_params", "not_built_reason"]


CTL_BITS: dict[str, int] = {
    "RUNNING": 0x001,
    "PENDING": 0x002,
    "QUEUED": 0x004,
    "COMPLETE": 0x008,
    "STOP": 0x010,
    "CLOSED": 0x020,
    "OPENED": 0x040,
    "ALERT": 0x080,
    "WAITING": 0x100,
}
"""The bits of a subscription's state word, by name, as both cores must define them (docs/internals.md)."""


@dataclass(frozen=True)
class Core:
    """One core: its name and the classes a test builds from it."""

    name: str
    """``"python"`` or ``"c"``."""
    SubmissionPublisher: type[submission.SubmissionPublisher[Any]]
    """The SubmissionPublisher twin on this core."""
    BufferedSubscription: type[Any]
    """The core's per-subscriber subscription."""
    ProducerLock: Callable[[], Any]
    """A new producer lock of the core."""

    def __repr__(self) -> str:
        return f"<core {self.name}>"


CORES: dict[str, Core] = {
    "python": Core("python", submission._PySubmissionPublisher, _impl.PythonBufferedSubscription, threading.RLock),
}
"""The cores available in this process, by name; each names its classes where they are defined, not through the
twin, so that a twin built on another core's classes is caught."""
if "c" in submission.TWINS:
    assert _impl.CBufferedSubscription is not None and _impl.CProducerLock is not None
    CORES["c"] = Core("c", submission.TWINS["c"], _impl.CBufferedSubscription, _impl.CProducerLock)


def not_built_reason() -> str | None:
    """Why the compiled core cannot be tested here, or ``None`` if it can."""
    if "c" in CORES:
        return None
    if _impl.extensions_disabled():
        return "compiled core disabled by FLOWPY_NO_EXTENSIONS"
    return "compiled core flowpy._cbuffered not built (no C compiler or Python headers at install time)"


def core_params() -> list[Any]:
    """``pytest.param`` per core name; the compiled one skips when it is not available."""
    reason = not_built_reason()
    return [
        pytest.param("python", id="python"),
        pytest.param("c", id="c", marks=() if reason is None else pytest.mark.skip(reason=reason)),
    ]
