"""Skipping a TCK test: one exception type, and the reasons the TCK skips with.

A verification skips a test by raising :class:`SkipTest`, with or without
pytest: it subclasses :class:`unittest.SkipTest`, which pytest (and
``unittest``) report as skipped, and the runner of :mod:`flowpy.tck.runner`
reports it as :attr:`~flowpy.tck.runner.Status.SKIPPED`. Code that wants to
tell a skip from a failure catches :class:`SkipTest`, whoever runs the test.

The ``SKIPPING_*`` constants are the reasons the TCK skips with (the start of
the reason where details follow), so a test of a verification can pin them;
they port the Java TCK's constants of the same names.
"""

from __future__ import annotations

import unittest
from typing import NoReturn

__all__ = [
    "NOT_VERIFIED",
    "OPTIONAL_SKIP",
    "SKIPPING_NO_ERROR_PUBLISHER_AVAILABLE",
    "SKIPPING_OPTIONAL_TEST_FAILED",
    "SKIPPING_STOCHASTIC_TEST",
    "SKIPPING_TOO_FEW_ELEMENTS",
    "SKIPPING_TOO_FEW_SUBSCRIBERS",
    "SKIPPING_UNABLE_TO_COMPLETE",
    "SkipTest",
    "skip",
]

NOT_VERIFIED = "not verified by this TCK"
"""The reason every ``untested_`` test skips with."""

SKIPPING_OPTIONAL_TEST_FAILED = "Skipped because tested publisher does NOT implement this OPTIONAL requirement"
"""The start of the reason an ``optional_`` test skips with when it fails; ``": <failure>"`` follows."""

OPTIONAL_SKIP = SKIPPING_OPTIONAL_TEST_FAILED
"""The former name of :data:`SKIPPING_OPTIONAL_TEST_FAILED`."""

SKIPPING_NO_ERROR_PUBLISHER_AVAILABLE = (
    "Skipping, because no error state Publisher provided, and the test requires it. "
    "Please implement create_failed_publisher to run this test."
)
"""The reason a test that needs ``create_failed_publisher()`` skips when it returns ``None``."""

SKIPPING_STOCHASTIC_TEST = "Skipping @Stochastic test because `skip_stochastic_tests()` returned `True`!"
"""The reason a ``stochastic_`` test skips when ``skip_stochastic_tests()`` is true."""

SKIPPING_TOO_FEW_ELEMENTS = "Unable to run this test, as required elements nr: "
"""The start of the reason a test skips when ``max_elements_from_publisher()`` is below what it needs."""

SKIPPING_UNABLE_TO_COMPLETE = (
    "Unable to run this test, as it requires an on_complete signal, which this Publisher is unable to "
    "provide (as signalled by returning PUBLISHER_UNABLE_TO_SIGNAL_ON_COMPLETE from "
    "max_elements_from_publisher())"
)
"""The reason a test that needs ``on_complete`` skips for a publisher that never completes."""

SKIPPING_TOO_FEW_SUBSCRIBERS = "Unable to run this test, as it requires "
"""The start of the reason a processor test skips when ``max_supported_subscribers()`` is too low."""


class SkipTest(unittest.SkipTest):
    """Raised to skip a TCK test; pytest, ``unittest`` and the runner report it as skipped.

    The same type is raised whether or not pytest is loaded. ``reason``
    (also ``str(exc)``) says why.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def skip(reason: str) -> NoReturn:
    """Skip the running test with ``reason``.

    Raises:
        SkipTest: always.
    """
    raise SkipTest(reason)
