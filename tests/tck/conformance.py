"""The checks of the TCK's own conformance suite: a verification test must fail, skip or pass.

Each check takes the :class:`~flowpy.tck.runner.Outcome` of one verification
test, from :func:`outcome` (a direct call on a verification instance) or
from :func:`~flowpy.tck.runner.run_test`, and fails the pytest test with
the outcome when it is not the expected one. A failure's message is looked
for in the exception and its causes (five deep), as the upstream
``TCKVerificationSupport.findDeepErrorMessage`` does.

The verification builders return instances whose factory hooks return the
given objects, with the timeouts of :func:`environment`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

from flowpy import flow
from flowpy.executors import Executor
from flowpy.tck import (
    IdentityProcessorVerification,
    PublisherVerification,
    SubscriberBlackboxVerification,
    SubscriberWhiteboxVerification,
    TestEnvironment,
    WhiteboxSubscriberProbe,
)
from flowpy.tck.runner import Outcome, Status, run_callable

TIMEOUT_MILLIS = 500
"""The default timeout of the suite's environments: long enough for a loaded machine."""

NO_SIGNALS_TIMEOUT_MILLIS = 50
"""How long the suite watches for signals that must not come."""


def environment() -> TestEnvironment:
    """The environment of every verification in the suite."""
    return TestEnvironment(TIMEOUT_MILLIS, NO_SIGNALS_TIMEOUT_MILLIS)


def outcome(run: Callable[[], object], name: str = "") -> Outcome:
    """Run ``run`` (one verification test, called directly) and return how it ended."""
    return run_callable(name, run)


def run(verification: Any, test: str) -> Outcome:
    """Run the test method ``test`` of ``verification``, then forget its class's helper executor."""
    try:
        return outcome(lambda: getattr(verification, test)(), test)
    finally:
        teardown = getattr(type(verification), "teardown_class", None)
        if teardown is not None:
            teardown()


def _messages(error: BaseException | None) -> Iterator[str]:
    for _ in range(5):
        if error is None:
            return
        yield f"{type(error).__name__}: {error}"
        error = error.__cause__ or error.__context__


def require_failure(result: Outcome, message_part: str) -> Outcome:
    """The test must have failed with ``message_part`` in its message or one of its causes."""
    assert result.status is Status.FAILED, f"expected the TCK to fail with '... {message_part} ...', got {result}"
    found = message_part in result.message or any(message_part in text for text in _messages(result.exception))
    assert found, f"expected the TCK to fail with '... {message_part} ...', yet it failed with: {result.message}"
    return result


def require_skip(result: Outcome, message_part: str) -> Outcome:
    """The test must have been skipped with ``message_part`` in its reason."""
    assert result.status is Status.SKIPPED, f"expected the TCK to skip with '... {message_part} ...', got {result}"
    assert message_part in result.message, (
        f"expected the TCK to skip with '... {message_part} ...', yet it skipped with: {result.message}"
    )
    return result


def require_pass(result: Outcome) -> Outcome:
    """The test must have passed (an optional test must not have skipped)."""
    assert result.status is Status.PASSED, f"expected the TCK to pass, got {result}"
    return result


# --- Verification builders ----------------------------------------------------------


def publisher_verification(
    publisher: flow.Publisher[int], failed: flow.Publisher[int] | None = None, **hooks: Any
) -> PublisherVerification[int]:
    """A publisher verification of ``publisher`` (for every element count) and ``failed``.

    ``hooks`` override further methods, e.g. ``max_elements_from_publisher=lambda self: 0``.
    """

    class Custom(PublisherVerification[int]):
        def create_test_environment(self) -> TestEnvironment:
            return environment()

        def create_publisher(self, elements: int) -> flow.Publisher[int]:
            return publisher

        def create_failed_publisher(self) -> flow.Publisher[int] | None:
            return failed

    for name, hook in hooks.items():
        setattr(Custom, name, hook)
    return Custom()


def whitebox_verification(
    make: Callable[[WhiteboxSubscriberProbe[int]], flow.Subscriber[int]], executor: Executor
) -> SubscriberWhiteboxVerification[int]:
    """A whitebox verification of ``make(probe)``, its helper publisher on ``executor`` (the caller's)."""

    class Custom(SubscriberWhiteboxVerification[int]):
        def create_test_environment(self) -> TestEnvironment:
            return environment()

        def create_subscriber(self, probe: WhiteboxSubscriberProbe[int]) -> flow.Subscriber[int]:
            return make(probe)

        def publisher_executor_service(self) -> Executor:
            return executor

    return Custom()


def blackbox_verification(subscriber: flow.Subscriber[int], executor: Executor) -> SubscriberBlackboxVerification[int]:
    """A blackbox verification of ``subscriber`` (the same one for every test), its helper publisher on ``executor``."""

    class Custom(SubscriberBlackboxVerification[int]):
        def create_test_environment(self) -> TestEnvironment:
            return environment()

        def create_subscriber(self) -> flow.Subscriber[int]:
            return subscriber

        def publisher_executor_service(self) -> Executor:
            return executor

    return Custom()


class Scheduler:
    """Runs functions later, each on a timer thread of its own; :meth:`close` cancels and joins them all."""

    def __init__(self, delay_millis: int) -> None:
        self.delay_millis = delay_millis
        self._timers: list[threading.Timer] = []

    def schedule(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` after ``delay_millis``."""
        timer = threading.Timer(self.delay_millis / 1000, fn)
        timer.daemon = True
        self._timers.append(timer)
        timer.start()

    def close(self) -> None:
        """Cancel what has not run yet, and wait for what is running."""
        for timer in self._timers:
            timer.cancel()
        for timer in self._timers:
            timer.join(10)


def processor_verification(
    processor: Callable[[], flow.Processor[int, int]], executor: Executor, **hooks: Any
) -> IdentityProcessorVerification[int]:
    """An identity processor verification of ``processor()``, its helper publisher on ``executor``.

    ``hooks`` override further methods, e.g. ``max_supported_subscribers=lambda self: 1``.
    """

    class Custom(IdentityProcessorVerification[int]):
        def create_test_environment(self) -> TestEnvironment:
            return environment()

        def create_identity_processor(self, buffer_size: int) -> flow.Processor[int, int]:
            return processor()

        def publisher_executor_service(self) -> Executor:
            return executor

    for name, hook in hooks.items():
        setattr(Custom, name, hook)
    return Custom()
