"""What every verification shares: its environment, skipping, and the helper executor."""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

from flowpy import flow
from flowpy.executors import DaemonThreadPool, Executor
from flowpy.tck.environment import SkipTest, TestEnvironment, skip
from flowpy.tck.helper_publisher import helper_publisher

__all__ = ["NOT_VERIFIED", "OPTIONAL_SKIP", "Verification", "WithHelperPublisher", "rule_of", "verification_tests"]

T = TypeVar("T")

NOT_VERIFIED = "not verified by this TCK"
"""The reason every ``untested_`` test skips with."""

OPTIONAL_SKIP = "Skipped because tested publisher does NOT implement this OPTIONAL requirement"
"""The start of the reason an ``optional_`` test skips with when it fails."""

_RULE = re.compile(r"_spec(\d)(\d\d)_")


def rule_of(test_name: str) -> str:
    """Return the spec rule a test verifies, ``"1.9"`` for ``..._spec109_...``, else ``""``."""
    match = _RULE.search(test_name)
    return f"{match.group(1)}.{int(match.group(2))}" if match else ""


def verification_tests(cls: type) -> list[str]:
    """Return the names of the ``test_*`` methods of ``cls``, in definition order (bases first)."""
    seen: dict[str, None] = {}
    for klass in reversed(cls.__mro__):
        for name, value in vars(klass).items():
            if name.startswith("test_") and callable(value):
                seen[name] = None
    return list(seen)


class Verification:
    """Base of the verifications: the test environment and the skip helpers.

    A verification is used by subclassing it in a pytest module with a class
    named ``Test...``; pytest creates one instance per test and calls
    :meth:`setup_method` before it. Override :meth:`create_test_environment`
    to choose the timeouts.
    """

    _env: TestEnvironment | None = None

    def create_test_environment(self) -> TestEnvironment:
        """Return the environment of one test; default ``TestEnvironment()`` (100 ms timeouts)."""
        return TestEnvironment()

    @property
    def env(self) -> TestEnvironment:
        """This test's environment, created on first use by :meth:`create_test_environment`."""
        if self._env is None:
            self._env = self.create_test_environment()
        return self._env

    def setup_method(self, method: object = None) -> None:
        """Start a test with no recorded async errors."""
        self.env.clear_async_errors()

    def untested(self) -> None:
        """Skip a test of a rule this TCK cannot verify."""
        skip(NOT_VERIFIED)

    def optional(self, body: Callable[[], None]) -> None:
        """Run ``body``; a failure skips the test instead, as the rule is optional."""
        try:
            body()
        except (Exception, AssertionError) as exc:
            if isinstance(exc, SkipTest):
                raise
            skip(f"{OPTIONAL_SKIP}: {exc}")


class WithHelperPublisher:
    """The helper publisher that feeds the subscriber verifications.

    Its executor is created by :meth:`publisher_executor_service` once per
    class (``setup_class``) and shut down by ``teardown_class``.
    """

    _executors: ClassVar[dict[type, Executor]] = {}
    _counter = itertools.count()

    def create_element(self, element: int) -> Any:
        """Return the element with id ``element``; default the id itself. May be called concurrently."""
        return element

    def publisher_executor_service(self) -> Executor:
        """Return a new executor for the helper publisher; default a pool of 4 daemon threads."""
        return DaemonThreadPool(4, thread_name_prefix=f"flowpy-tck-{next(self._counter)}")

    def helper_executor(self) -> Executor:
        """The executor of this class, created on first use."""
        cls = type(self)
        executor = WithHelperPublisher._executors.get(cls)
        if executor is None:
            executor = WithHelperPublisher._executors[cls] = self.publisher_executor_service()
        return executor

    @classmethod
    def setup_class(cls) -> None:
        """Nothing to do: the executor is created on first use."""

    @classmethod
    def teardown_class(cls) -> None:
        """Shut down the helper executor of this class, if one was created."""
        executor = WithHelperPublisher._executors.pop(cls, None)
        shutdown = getattr(executor, "shutdown", None)
        if callable(shutdown):
            shutdown(wait=False)

    def create_helper_publisher(self, elements: int) -> flow.Publisher[Any]:
        """Return an asynchronous publisher of ``create_element(0..elements-1)``.

        Above ``2**31 - 1`` elements it is infinite.
        """
        return helper_publisher(elements, self.helper_executor(), self.create_element)
