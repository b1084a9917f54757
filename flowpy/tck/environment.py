"""TestEnvironment: timeouts, the async-error list, and the TCK's test doubles.

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
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import NoReturn, TypeVar

from flowpy import flow
from flowpy.tck.signals import (
    TEST_BUFFER_SIZE,
    E,
    Latch,
    Promise,
    Receptacle,
    SubscriberBufferOverflowError,
)
from flowpy.tck.skips import SkipTest, skip

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
        timeout = (
            default_timeout_millis
            if default_timeout_millis is not None
            else self.env_default_timeout_millis()
        )
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
        for name, value in (("default_timeout_millis", timeout), ("default_no_signals_timeout_millis",
                            no_signals), ("default_poll_timeout_millis", poll)):
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
            self._errors_changed.wait_for(lambda: bool(self._errors), delay / 1000)
        self.verify_no_async_errors_no_delay()

    def expect_async_error(self, total_timeout_millis: int, poll_millis: int) -> BaseException | None:
        """Remove and return the oldest recorded error, waiting up to the timeout.

        Returns ``None`` when none arrived. The wait is woken by every flop,
        and re-checks at least every ``poll_millis``.
        """
        deadline = time.monotonic() + total_timeout_millis / 1000
        with self._errors_changed:
            while not self._errors:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                self._errors_changed.wait(min(remaining, max(poll_millis, 1) / 1000))
            return self._errors.pop(0)[0]

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

    def new_blackhole_subscriber(
        self, publisher: flow.Publisher[T]
    ) -> BlackholeSubscriberWithSubscriptionSupport[T]:
        """Subscribe a new blackhole subscriber to ``publisher`` and return it."""
        subscriber: BlackholeSubscriberWithSubscriptionSupport[T] = BlackholeSubscriberWithSubscriptionSupport(
            self
        )
        self.subscribe(publisher, subscriber)
        return subscriber


# --- Test subscribers -----------------------------------------------------------


class TestSubscriber(flow.Subscriber[T]):
    """A subscriber for which every signal is unexpected (each one flops).

    Subclasses accept the signals they expect. ``subscription`` is completed
    by subclasses that accept ``on_subscribe``.
    """

    __test__ = False  # not a pytest test class

    def __init__(self, env: TestEnvironment) -> None:
        self.env = env
        self.subscription: Promise[flow.Subscription] = Promise(env)

    def on_subscribe(self, subscription: flow.Subscription) -> None:
        self.env.flop(f"Unexpected Subscriber::on_subscribe({subscription!r})")

    def on_next(self, item: T) -> None:
        self.env.flop(f"Unexpected Subscriber::on_next({item!r})")

    def on_error(self, error: BaseException) -> None:
        self.env.flop(f"Unexpected Subscriber::on_error({error!r})", error)

    def on_complete(self) -> None:
        self.env.flop("Unexpected Subscriber::on_complete()")

    def cancel(self) -> None:
        """Cancel the subscription; flops if none has arrived."""
        if self.subscription.is_completed:
            self.subscription.value().cancel()
        else:
            self.env.flop("Cannot cancel a subscription before having received it")


class ManualSubscriber(TestSubscriber[T]):
    """A test subscriber driven by the test: it requests only when told to."""

    def __init__(self, env: TestEnvironment) -> None:
        super().__init__(env)
        self.received: Receptacle[T] = Receptacle(env)

    def on_next(self, item: T) -> None:
        self.received.add(item)

    def on_complete(self) -> None:
        self.received.complete()

    def request(self, n: int) -> None:
        """Request ``n`` more elements."""
        self.subscription.value().request(n)

    def _timeout(self, timeout_millis: int | None) -> int:
        return self.env.default_timeout_millis if timeout_millis is None else timeout_millis

    def request_next_element(self, timeout_millis: int | None = None,
                             message: str = "Did not receive expected element") -> T:
        """``request(1)``, then return the element that must arrive."""
        self.request(1)
        return self.next_element(timeout_millis, message)

    def request_next_element_or_end_of_stream(
        self, timeout_millis: int | None = None,
        message: str = "Did not receive expected stream completion",
    ) -> tuple[bool, T | None]:
        """``request(1)``, then return ``(True, element)`` or ``(False, None)`` at completion."""
        self.request(1)
        return self.next_element_or_end_of_stream(timeout_millis, message)

    def request_end_of_stream(self, timeout_millis: int | None = None,
                              message: str = "Did not receive expected stream completion") -> None:
        """``request(1)``, then expect completion."""
        self.request(1)
        self.expect_completion(timeout_millis, message)

    def request_next_elements(self, elements: int, timeout_millis: int | None = None,
                              message: str = "Did not receive expected elements") -> list[T]:
        """``request(elements)``, then return that many elements."""
        self.request(elements)
        return self.next_elements(elements, timeout_millis, message)

    def next_element(self, timeout_millis: int | None = None,
                     message: str = "Did not receive expected element") -> T:
        """Return the next element."""
        return self.received.next(self._timeout(timeout_millis), message)

    def next_element_or_end_of_stream(
        self, timeout_millis: int | None = None,
        message: str = "Did not receive expected stream completion",
    ) -> tuple[bool, T | None]:
        """Return ``(True, element)``, or ``(False, None)`` at completion."""
        return self.received.next_or_end_of_stream(self._timeout(timeout_millis), message)

    def next_elements(self, elements: int, timeout_millis: int | None = None,
                      message: str = "Did not receive expected elements") -> list[T]:
        """Return the next ``elements`` elements, within one total timeout."""
        return self.received.next_n(elements, self._timeout(timeout_millis), message)

    def expect_next(self, expected: T, timeout_millis: int | None = None) -> None:
        """Expect ``expected`` (by ``==``) as the next element; flop otherwise."""
        received = self.next_element(timeout_millis, "Did not receive expected element on downstream")
        if received != expected:
            self.env.flop(f"Expected element {expected!r} on downstream but received {received!r}")

    def expect_completion(self, timeout_millis: int | None = None,
                          message: str = "Did not receive expected stream completion") -> None:
        """Expect completion next."""
        self.received.expect_completion(self._timeout(timeout_millis), message)

    def expect_error(self, error_type: type[E], timeout_millis: int | None = None,
                     poll_millis: int | None = None) -> E:
        """Wait for an ``on_error`` of ``error_type`` and return its exception."""
        return self.received.expect_error(
            error_type,
            self._timeout(timeout_millis),
            self.env.default_poll_timeout_millis if poll_millis is None else poll_millis,
            f"Expected on_error({error_type.__name__})",
        )

    def expect_error_with_message(self, error_type: type[E], alternatives: list[str],
                                  timeout_millis: int | None = None) -> E:
        """As :meth:`expect_error`; the message must also contain one of ``alternatives``."""
        error = self.expect_error(error_type, timeout_millis)
        text = str(error)
        if not any(part in text for part in alternatives):
            self.env.flop_and_fail(
                f"Got expected exception {type(error).__name__} but missing message part "
                f"(one of {alternatives!r}), was: {text!r}"
            )
        return error

    def expect_none(self, within_millis: int | None = None,
                    message: str = "Did not expect an element but got element") -> None:
        """Flop if any element or completion arrives within the no-signals timeout."""
        within = self.env.default_no_signals_timeout_millis if within_millis is None else within_millis
        self.received.expect_none(within, message)


class ManualSubscriberWithSubscriptionSupport(ManualSubscriber[T]):
    """A manual subscriber that accepts ``on_subscribe`` once and checks signal order (rule 1.9)."""

    def on_subscribe(self, subscription: flow.Subscription) -> None:
        self.env.debug(f"{self!r}::on_subscribe({subscription!r})")
        if self.subscription.is_completed:
            self.env.flop(f"Subscriber::on_subscribe called on an already-subscribed Subscriber {self!r}")
        else:
            self.subscription.complete(subscription)

    def on_next(self, item: T) -> None:
        if self.subscription.is_completed:
            super().on_next(item)
        else:
            self.env.flop(f"Subscriber::on_next({item!r}) called before Subscriber::on_subscribe")

    def on_complete(self) -> None:
        if self.subscription.is_completed:
            super().on_complete()
        else:
            self.env.flop("Subscriber::on_complete() called before Subscriber::on_subscribe")

    def on_error(self, error: BaseException) -> None:
        if self.subscription.is_completed:
            super().on_error(error)
        else:
            self.env.flop(f"Subscriber::on_error({error!r}) called before Subscriber::on_subscribe", error)


class BlackholeSubscriberWithSubscriptionSupport(ManualSubscriberWithSubscriptionSupport[T]):
    """A subscriber that drops every element; reading elements is an error."""

    def on_next(self, item: T) -> None:
        if not self.subscription.is_completed:
            self.env.flop(f"Subscriber::on_next({item!r}) called before Subscriber::on_subscribe")

    def next_element(self, timeout_millis: int | None = None,
                     message: str = "Did not receive expected element") -> T:
        """Not supported: a blackhole keeps no elements.

        Raises:
            RuntimeError: always.
        """
        raise RuntimeError("cannot call next_element() on a BlackholeSubscriberWithSubscriptionSupport")

    def next_elements(self, elements: int, timeout_millis: int | None = None,
                      message: str = "Did not receive expected elements") -> list[T]:
        """Not supported: a blackhole keeps no elements.

        Raises:
            RuntimeError: always.
        """
        raise RuntimeError("cannot call next_elements() on a BlackholeSubscriberWithSubscriptionSupport")


# --- The fake upstream -------------------------------------------------------------


class ManualPublisher(flow.Publisher[T]):
    """A publisher for one subscriber, driven by the test thread.

    ``subscribe`` calls ``on_subscribe`` synchronously; the subscription
    records each ``request(n)`` in :attr:`requests` and ``cancel`` closes
    :attr:`cancelled`. ``send_next``/``send_completion``/``send_error`` call
    the subscriber on the calling thread.
    """

    def __init__(self, env: TestEnvironment) -> None:
        self.env = env
        self.subscriber: Promise[flow.Subscriber[T]] = Promise(env)
        self.requests: Receptacle[int] = Receptacle(env)
        self.cancelled = Latch(env)
        self.pending_demand = 0
        publisher = self

        class _Subscription(flow.Subscription):
            def request(self, n: int) -> None:
                publisher.requests.add(n)

            def cancel(self) -> None:
                publisher.cancelled.close()

            def __repr__(self) -> str:
                return f"ManualPublisher.Subscription({publisher!r})"

        self._subscription = _Subscription()

    def subscribe(self, subscriber: flow.Subscriber[T]) -> None:
        if not self.subscriber.is_completed:
            self.subscriber.complete(subscriber)
            subscriber.on_subscribe(self._subscription)
        else:
            self.env.flop("TestPublisher doesn't support more than one Subscriber")

    def send_next(self, element: T) -> None:
        """Call ``on_next(element)`` on the subscriber."""
        if self.subscriber.is_completed:
            self.pending_demand -= 1
            self.subscriber.value().on_next(element)
        else:
            self.env.flop("Cannot send_next before having a Subscriber")

    def send_completion(self) -> None:
        """Call ``on_complete()`` on the subscriber."""
        if self.subscriber.is_completed:
            self.subscriber.value().on_complete()
        else:
            self.env.flop("Cannot send_completion before having a Subscriber")

    def send_error(self, error: BaseException) -> None:
        """Call ``on_error(error)`` on the subscriber."""
        if self.subscriber.is_completed:
            self.subscriber.value().on_error(error)
        else:
            self.env.flop("Cannot send_error before having a Subscriber")

    def expect_request(self, timeout_millis: int | None = None,
                       message: str = "Did not receive expected `request` call") -> int:
        """Return the next requested ``n``, adding it to the pending demand.

        Raises:
            AssertionError: on timeout, or if ``n <= 0`` (also flopped).
        """
        timeout = self.env.default_timeout_millis if timeout_millis is None else timeout_millis
        n = self.requests.next(timeout, message)
        if n <= 0:
            self.env.flop_and_fail(f"Requests cannot be zero or negative but received {n}")
        self.pending_demand += n
        return n

    def expect_exact_request(self, expected: int, timeout_millis: int | None = None) -> None:
        """Expect the next request to be ``request(expected)``."""
        n = self.expect_request(timeout_millis)
        if n != expected:
            self.env.flop(f"Received `request({n})` on upstream but expected `request({expected})`")

    def expect_no_request(self, timeout_millis: int | None = None) -> None:
        """Flop if a request arrives within the no-signals timeout."""
        within = self.env.default_no_signals_timeout_millis if timeout_millis is None else timeout_millis
        self.requests.expect_none(within, "Did not expect a `request` call")

    def expect_cancelling(self, timeout_millis: int | None = None) -> None:
        """Expect ``cancel()`` within the timeout."""
        self.cancelled.expect_close("Did not receive expected cancelling of upstream subscription",
                                    timeout_millis)

    @property
    def is_cancelled(self) -> bool:
        """Whether the subscriber cancelled."""
        return self.cancelled.is_closed

