"""TestEnvironment: the timeouts and the async-error list of one test.

Port of ``org.reactivestreams.tck.TestEnvironment`` (Reactive Streams TCK
1.0.4). A verification owns one environment per test. Signals arriving on
other threads cannot fail a test by raising, so every helper here *flops*:
it records an :class:`AssertionError` (or the received exception) in the
environment's async-error list, and the test re-raises the first one at its
end (:meth:`TestEnvironment.verify_no_async_errors_no_delay`).

Timeouts are milliseconds, as in Java, and default to 100 ms. The environment
variables ``DEFAULT_TIMEOUT_MILLIS``, ``DEFAULT_NO_SIGNALS_TIMEOUT_MILLIS`` and
``DEFAULT_POLL_TIMEOUT_MILLIS`` override the defaults; values passed in code
override the variables.

Differences from Java: waits block on conditions and queues instead of
sleeping and polling, so a test ends as soon as its outcome is known;
:meth:`Receptacle.expect_error` waits the whole timeout (the 1.0.4 ``=-``
bug made it wait one poll interval).

The waiting helpers (:mod:`flowpy.tck.signals`), the test subscribers
(:mod:`flowpy.tck.subscribers`) and :class:`ManualPublisher`
(:mod:`flowpy.tck.manual_publisher`) live in modules of their own, below this
one: they see the environment through :class:`flowpy.tck.signals.Environment`,
so none of them imports this module. Their names stay importable from here.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import NoReturn, TypeVar

from flowpy import flow
from flowpy._checks import check_timeout
from flowpy.tck.manual_publisher import ManualPublisher
from flowpy.tck.signals import (
    TEST_BUFFER_SIZE,
    Latch,
    Promise,
    Receptacle,
    SubscriberBufferOverflowError,
)
from flowpy.tck.skips import SkipTest, skip
from flowpy.tck.subscribers import (
    BlackholeSubscriberWithSubscriptionSupport,
    ManualSubscriber,
    ManualSubscriberWithSubscriptionSupport,
    TestSubscriber,
)

__all__ = [
    "DEFAULT_TIMEOUT_MILLIS",
    "TEST_BUFFER_SIZE",
    "BlackholeSubscriberWithSubscriptionSupport",
    "Latch",
    "ManualPublisher",
    "ManualSubscriber",
    "ManualSubscriberWithSubscriptionSupport",
    "Promise",
    "Receptacle",
    "SkipTest",
    "SubscriberBufferOverflowError",
    "TestEnvironment",
    "TestException",
    "TestSubscriber",
    "skip",
]

T = TypeVar("T")

DEFAULT_TIMEOUT_MILLIS = 100
"""The Java TCK's default for all three timeouts."""


class TestException(RuntimeError):
    """The exception the TCK signals itself; its message is ``Test Exception: Boom!``."""

    __test__ = False  # not a pytest test class

    def __init__(self) -> None:
        super().__init__("Test Exception: Boom!")


def _env_millis(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"environment variable {name} must be an integer (milliseconds), got {raw!r}") from None


class TestEnvironment:
    """Timeouts and the async-error list shared by one test.

    Args:
        default_timeout_millis: how long to wait for an expected signal;
            default ``DEFAULT_TIMEOUT_MILLIS`` from the environment, else 100.
        default_no_signals_timeout_millis: how long to watch for a signal
            that must not come; default the variable
            ``DEFAULT_NO_SIGNALS_TIMEOUT_MILLIS``, else the default timeout.
        default_poll_timeout_millis: the wait slice of ``expect_error``;
            default the variable ``DEFAULT_POLL_TIMEOUT_MILLIS``, else the
            default timeout.
        print_debug: print ``[TCK-DEBUG]`` lines.

    Raises:
        ValueError: if an environment variable is not an integer.
    """

    __test__ = False  # not a pytest test class

    def __init__(
        self,
        default_timeout_millis: int | None = None,
        default_no_signals_timeout_millis: int | None = None,
        default_poll_timeout_millis: int | None = None,
        *,
        print_debug: bool = False,
    ) -> None:
        timeout = default_timeout_millis if default_timeout_millis is not None else self.env_default_timeout_millis()
        no_signals = (
            default_no_signals_timeout_millis
            if default_no_signals_timeout_millis is not None
            else _env_millis("DEFAULT_NO_SIGNALS_TIMEOUT_MILLIS", timeout)
        )
        poll = (
            default_poll_timeout_millis
            if default_poll_timeout_millis is not None
            else _env_millis("DEFAULT_POLL_TIMEOUT_MILLIS", timeout)
        )
        for name, value in (
            ("default_timeout_millis", timeout),
            ("default_no_signals_timeout_millis", no_signals),
            ("default_poll_timeout_millis", poll),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be a non-negative int, got {value!r}")
        self._timeout_millis = timeout
        self._no_signals_millis = no_signals
        self._poll_millis = poll
        self._print_debug = print_debug
        # --- Guarded by self._errors_changed -----------------------------
        # (error, message) in arrival order; notified on every flop.
        self._errors_changed = threading.Condition(threading.Lock())
        self._errors: list[tuple[BaseException, str]] = []

    def __repr__(self) -> str:
        return (
            f"TestEnvironment(default_timeout_millis={self._timeout_millis}, "
            f"default_no_signals_timeout_millis={self._no_signals_millis}, "
            f"default_poll_timeout_millis={self._poll_millis})"
        )

    # --- Timeouts ---------------------------------------------------------

    @staticmethod
    def env_default_timeout_millis() -> int:
        """The default timeout configured for the process, in milliseconds.

        The environment variable ``DEFAULT_TIMEOUT_MILLIS``, else
        :data:`DEFAULT_TIMEOUT_MILLIS` (100); what ``TestEnvironment()`` uses
        when no timeout is passed (Java's ``envDefaultTimeoutMillis()``).

        Raises:
            ValueError: if the variable is set and not an integer.
        """
        return _env_millis("DEFAULT_TIMEOUT_MILLIS", DEFAULT_TIMEOUT_MILLIS)

    @staticmethod
    def env_default_no_signals_timeout_millis() -> int:
        """The no-signals timeout configured for the process, in milliseconds.

        The variable ``DEFAULT_NO_SIGNALS_TIMEOUT_MILLIS``, else
        :meth:`env_default_timeout_millis` (Java's ``envDefaultNoSignalsTimeoutMillis()``).

        Raises:
            ValueError: if a variable is set and not an integer.
        """
        return _env_millis("DEFAULT_NO_SIGNALS_TIMEOUT_MILLIS", TestEnvironment.env_default_timeout_millis())

    @staticmethod
    def env_default_poll_timeout_millis() -> int:
        """The poll timeout configured for the process, in milliseconds.

        The variable ``DEFAULT_POLL_TIMEOUT_MILLIS``, else
        :meth:`env_default_timeout_millis` (Java's ``envDefaultPollTimeoutMillis()``).

        Raises:
            ValueError: if a variable is set and not an integer.
        """
        return _env_millis("DEFAULT_POLL_TIMEOUT_MILLIS", TestEnvironment.env_default_timeout_millis())

    @property
    def default_timeout_millis(self) -> int:
        """How long to wait for an expected signal, in milliseconds."""
        return self._timeout_millis

    @property
    def default_no_signals_timeout_millis(self) -> int:
        """How long to watch for a signal that must not arrive, in milliseconds."""
        return self._no_signals_millis

    @property
    def default_poll_timeout_millis(self) -> int:
        """The wait slice of ``expect_error``, in milliseconds."""
        return self._poll_millis

    # --- Flop machinery ---------------------------------------------------

    def flop(self, message: str, error: BaseException | None = None) -> None:
        """Record a failure without raising.

        Args:
            message: what went wrong.
            error: the exception received, stored as is (so ``expect_error``
                can find it); when ``None`` an ``AssertionError(message)``
                is stored.
        """
        stored = AssertionError(message) if error is None else error
        self.debug(f"flop: {message}")
        with self._errors_changed:
            self._errors.append((stored, message))
            self._errors_changed.notify_all()

    def flop_and_fail(self, message: str) -> NoReturn:
        """Record a failure and raise it as :class:`AssertionError`."""
        self.flop(message)
        raise AssertionError(message)

    def flop_and_raise_first(self, message: str) -> NoReturn:
        """Record a failure, then raise the first failure recorded in this test.

        Where the Java TCK only records a failure and goes on, so that the
        test's final check reports the *first* recorded error, this stops at
        once yet reports the same error: a symptom (a timeout) never hides
        its cause (an illegal signal recorded before it).

        Raises:
            AssertionError: as :meth:`verify_no_async_errors_no_delay`.
        """
        self.flop(message)
        self.verify_no_async_errors_no_delay()
        raise AssertionError(message)  # only if the errors were cleared concurrently

    @property
    def async_errors(self) -> list[BaseException]:
        """A snapshot of the recorded errors, oldest first."""
        with self._errors_changed:
            return [error for error, _ in self._errors]

    def clear_async_errors(self) -> None:
        """Forget every recorded error."""
        with self._errors_changed:
            self._errors.clear()

    def drop_async_error(self) -> BaseException | None:
        """Remove and return the oldest recorded error, or ``None``."""
        with self._errors_changed:
            return self._errors.pop(0)[0] if self._errors else None

    def verify_no_async_errors_no_delay(self) -> None:
        """Raise the oldest recorded error, if any.

        Raises:
            AssertionError: the recorded one, or one wrapping a recorded
                exception of another type.
        """
        with self._errors_changed:
            first = self._errors[0] if self._errors else None
        if first is None:
            return
        error, message = first
        if isinstance(error, AssertionError):
            raise error
        raise AssertionError(f"Async error during test execution: {message}") from error

    def verify_no_async_errors(self, delay_millis: int | None = None) -> None:
        """Fail if an error is recorded now or within ``delay_millis``.

        Waits at most ``delay_millis`` (default: the no-signals timeout),
        and returns early with the failure as soon as one is recorded.

        Raises:
            AssertionError: as :meth:`verify_no_async_errors_no_delay`.
        """
        delay = self._no_signals_millis if delay_millis is None else delay_millis
        with self._errors_changed:
            self._errors_changed.wait_for(lambda: bool(self._errors), check_timeout(delay, "delay_millis", millis=True))
        self.verify_no_async_errors_no_delay()

    def expect_async_error(self, total_timeout_millis: int, poll_millis: int) -> BaseException | None:
        """Remove and return the oldest recorded error, waiting up to the timeout.

        Returns ``None`` when none arrived. The wait is woken by every flop,
        and re-checks at least every ``poll_millis``.
        """
        deadline = time.monotonic() + check_timeout(total_timeout_millis, "total_timeout_millis", millis=True)
        poll = max(check_timeout(poll_millis, "poll_millis", millis=True), 0.001)
        with self._errors_changed:
            if not self._await_error_locked(deadline, poll):
                return None
            return self._errors.pop(0)[0]

    def _await_error_locked(self, deadline: float, poll: float) -> bool:
        # Caller holds self._errors_changed. Returns whether an error is recorded
        # by the deadline. A method of its own: a loop in a lock's with block could
        # lose the lock to a Ctrl-C on CPython 3.12+ (docs/internals.md, "Loops and locks").
        while not self._errors:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            self._errors_changed.wait(min(remaining, poll))
        return True

    def debug(self, message: str) -> None:
        """Print ``[TCK-DEBUG] message`` when debugging is on."""
        if self._print_debug:
            print(f"[TCK-DEBUG] {message}", file=sys.stderr)

    # --- Subscribing ------------------------------------------------------

    def subscribe(
        self,
        publisher: flow.Publisher[T],
        subscriber: TestSubscriber[T],
        timeout_millis: int | None = None,
    ) -> None:
        """Subscribe and wait for ``on_subscribe``.

        Raises:
            AssertionError: if no subscription arrived within the timeout, or
                an async error was recorded.
        """
        timeout = self._timeout_millis if timeout_millis is None else timeout_millis
        publisher.subscribe(subscriber)
        subscriber.subscription.expect_completion(
            timeout, f"Could not subscribe {subscriber!r} to Publisher {publisher!r}"
        )
        self.verify_no_async_errors_no_delay()

    def new_manual_subscriber(
        self, publisher: flow.Publisher[T], timeout_millis: int | None = None
    ) -> ManualSubscriberWithSubscriptionSupport[T]:
        """Subscribe a new manual subscriber to ``publisher`` and return it."""
        subscriber: ManualSubscriberWithSubscriptionSupport[T] = ManualSubscriberWithSubscriptionSupport(self)
        self.subscribe(publisher, subscriber, timeout_millis)
        return subscriber

    def new_blackhole_subscriber(self, publisher: flow.Publisher[T]) -> BlackholeSubscriberWithSubscriptionSupport[T]:
        """Subscribe a new blackhole subscriber to ``publisher`` and return it."""
        subscriber: BlackholeSubscriberWithSubscriptionSupport[T] = BlackholeSubscriberWithSubscriptionSupport(self)
        self.subscribe(publisher, subscriber)
        return subscriber
