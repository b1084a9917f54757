"""Which implementation of the SubmissionPublisher core runs: compiled or pure Python.

This is the one place that chooses. :mod:`flowpy._buffered` is the reference
implementation of :class:`BufferedSubscription`; ``flowpy._cbuffered`` is its
compiled twin, built by ``pip install`` when a C compiler and the Python
headers are present. The compiled one is used when it was built, unless the
environment variable ``FLOWPY_NO_EXTENSIONS`` is set to anything but ``""``
or ``"0"`` when flowpy is imported. Both behave the same; only the speed
differs. :data:`flowpy.implementation` tells which one is active.

Both are complete and importable side by side (as CPython's ``asyncio`` has
``_PyFuture`` and ``_CFuture``): :mod:`flowpy.submission` builds one
SubmissionPublisher class on each, once, at import, and binds the public name
to the one chosen here (docs/internals.md).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, Final, Literal

from flowpy._buffered import BufferedSubscription as PythonBufferedSubscription
from flowpy.flow import Subscription

__all__ = [
    "CBufferedSubscription",
    "CProducerLock",
    "CPublisherCore",
    "PythonBufferedSubscription",
    "c_first_none",
    "extensions_disabled",
    "implementation",
]


def extensions_disabled() -> bool:
    """Whether ``FLOWPY_NO_EXTENSIONS`` asks for pure Python (set, and not ``"0"``)."""
    return os.environ.get("FLOWPY_NO_EXTENSIONS", "") not in ("", "0")


CBufferedSubscription: type[Subscription] | None = None
"""The compiled class, or ``None`` if it was not built or is disabled."""
CPublisherCore: type | None = None
"""The compiled base of the compiled SubmissionPublisher, with its producer path; ``None`` as above."""
CProducerLock: Callable[..., Any] | None = None
"""The compiled producer lock (``threading.RLock``'s interface); ``None`` as above."""
c_first_none: Callable[[list[Any]], int] | None = None
"""The compiled index of the first ``None`` in a list, for ``submit_many``; ``None`` as above."""

if not extensions_disabled():
    try:
        from flowpy._cbuffered import BufferedSubscription as _Compiled
        from flowpy._cbuffered import ProducerLock as _CompiledLock
        from flowpy._cbuffered import PublisherCore as _CompiledCore
        from flowpy._cbuffered import first_none as _compiled_first_none
    except ImportError:  # not built: no compiler or headers at install time
        pass
    else:
        Subscription.register(_Compiled)
        CBufferedSubscription = _Compiled
        CPublisherCore = _CompiledCore
        CProducerLock = _CompiledLock
        c_first_none = _compiled_first_none

implementation: Final[Literal["c", "python"]] = "python" if CBufferedSubscription is None else "c"
"""``"c"`` if the compiled core is active, ``"python"`` if the pure-Python one is."""
