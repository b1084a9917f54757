"""What every verification shares: its environment, skipping, and the helper executor."""

from __future__ import annotations

import itertools
import re
import threading
import weakref
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

from flowpy import flow
from flowpy._fork import at_fork_in_child
from flowpy._pool import DaemonThreadPool, Executor
from flowpy.tck.environment import TestEnvironment
from flowpy.tck.helper_publisher import helper_publisher
from flowpy.tck.skips import NOT_VERIFIED, OPTIONAL_SKIP, SKIPPING_OPTIONAL_TEST_FAILED, SkipTest, skip

__all__ = ["NOT_VERIFIED", "OPTIONAL_SKIP", "Verification", "WithHelperPublisher", "rule_of", "verification_tests"]

T = TypeVar("T")

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
            skip(f"{SKIPPING_OPTIONAL_TEST_FAILED}: {exc}")


class WithHelperPublisher:
    """The helper publisher that feeds the subscriber verifications.

    Its executor is what :meth:`publisher_executor_service` returns, asked
    once per verification class on first use. ``teardown_class`` shuts it
    down only if the TCK created it (the default
    :meth:`publisher_executor_service`); an executor the user returns from an
    override stays the user's: it is never shut down, so several
    verification classes may share it.
    """

    # --- Guarded by _executors_lock --------------------------------------
    # The helper executor of each verification class, and whether the TCK
    # created it (then teardown_class shuts it down).
    _executors: ClassVar[dict[type, tuple[Executor, bool]]] = {}
    _executors_lock: ClassVar[threading.Lock] = threading.Lock()
    # Pools made by the default publisher_executor_service, not yet claimed
    # by helper_executor; an override that calls super() hands one on.
    _created: ClassVar[weakref.WeakSet[Any]] = weakref.WeakSet()
    _counter = itertools.count()

    def create_element(self, element: int) -> Any:
        """Return the element with id ``element``; default the id itself. May be called concurrently."""
        return element

    def publisher_executor_service(self) -> Executor:
        """Return the executor for the helper publisher; default a new pool of 4 daemon threads.

        The default pool belongs to the TCK, which shuts it down in
        ``teardown_class``. Override to use an executor of your own; the TCK
        then never shuts it down.
        """
        pool = DaemonThreadPool(4, thread_name_prefix=f"flowpy-tck-{next(self._counter)}")
        with WithHelperPublisher._executors_lock:
            WithHelperPublisher._created.add(pool)
        return pool

    def helper_executor(self) -> Executor:
        """The executor of this class, from :meth:`publisher_executor_service` on first use."""
        cls = type(self)
        with WithHelperPublisher._executors_lock:
            entry = WithHelperPublisher._executors.get(cls)
        if entry is not None:
            return entry[0]
        executor = self.publisher_executor_service()
        owned = _claim_created(executor)
        with WithHelperPublisher._executors_lock:
            entry = WithHelperPublisher._executors.get(cls)
            if entry is None:
                entry = WithHelperPublisher._executors[cls] = (executor, owned)
                return executor
        if owned:  # another thread of the same class stored its executor first
            _shutdown(executor)
        return entry[0]

    @classmethod
    def setup_class(cls) -> None:
        """Nothing to do: the executor is created on first use."""

    @classmethod
    def teardown_class(cls) -> None:
        """Forget this class's helper executor; shut it down if the TCK created it."""
        with WithHelperPublisher._executors_lock:
            entry = WithHelperPublisher._executors.pop(cls, None)
        if entry is not None and entry[1]:
            _shutdown(entry[0])

    def create_helper_publisher(self, elements: int) -> flow.Publisher[Any]:
        """Return an asynchronous publisher of ``create_element(0..elements-1)``.

        Above ``2**31 - 1`` elements it is infinite.
        """
        return helper_publisher(elements, self.helper_executor(), self.create_element)


def _claim_created(executor: Executor) -> bool:
    """Whether the default ``publisher_executor_service`` created ``executor``; forgets it."""
    with WithHelperPublisher._executors_lock:
        try:
            created = executor in WithHelperPublisher._created
        except TypeError:  # not weak-referenceable: not one of the TCK's pools
            return False
        WithHelperPublisher._created.discard(executor)
    return created


def _shutdown(executor: Executor) -> None:
    shutdown = getattr(executor, "shutdown", None)
    if callable(shutdown):
        shutdown(wait=False)


@at_fork_in_child
def _reset_lock_in_child() -> None:
    """After ``os.fork()``, in the child: replace a lock another thread may have held (the pools empty themselves)."""
    WithHelperPublisher._executors_lock = threading.Lock()
