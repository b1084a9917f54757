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
from collections.abc import Callable, Iterator
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


class PythonPublisherCore:
    """The base of :class:`~flowpy.submission.SubmissionPublisher` without the compiled core: nothing.

    The compiled ``PublisherCore`` holds the state that the compiled
    ``submit`` reads (``_lock``, ``_subscriptions``, ``_turn``,
    ``_turn_waiters``, ``_blocked``, ``_closed``) in slots; here they are
    plain attributes.
    """

    __slots__ = ()


CBufferedSubscription: type[Subscription] | None = None
"""The compiled class, or ``None`` if it was not built or is disabled."""
CPublisherCore: type | None = None
"""The compiled base of SubmissionPublisher, with its ``submit``; ``None`` as above."""
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

if TYPE_CHECKING:
    # Both classes have the same interface; type checkers see the reference.
    BufferedSubscription = PythonBufferedSubscription
    PublisherCore = PythonPublisherCore
else:
    BufferedSubscription: Any = PythonBufferedSubscription if CBufferedSubscription is None else CBufferedSubscription
    # The base class is fixed when flowpy.submission is imported; which submit
    # runs is chosen by flowpy.submission.select_core (see using()).
    PublisherCore: Any = PythonPublisherCore if CPublisherCore is None else CPublisherCore


@contextmanager
def using(name: Literal["c", "python"]) -> Iterator[None]:
    """Make SubmissionPublisher use implementation ``name`` inside the block.

    Its subscriptions, its producer lock and its ``submit`` come from that
    core. For tests and benchmarks, which compare the two in one process; not
    thread-safe. Subscriptions and publishers made inside the block keep
    their core's objects; ``submit`` is switched for every publisher.

    Raises:
        LookupError: if ``name`` is ``"c"`` and the compiled core is not available.
    """
    if name != "python" and CBufferedSubscription is None:
        raise LookupError("the compiled core is not available: not built, or FLOWPY_NO_EXTENSIONS is set")
    submission = sys.modules["flowpy.submission"]
    previous = submission.core_name()
    submission.select_core(name)
    try:
        yield
    finally:
        submission.select_core(previous)
