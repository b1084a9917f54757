"""Latch, Promise and Receptacle: how the TCK waits for signals from other threads.

Each reports a broken expectation by flopping on its environment and, where
the test cannot go on, by raising the same :class:`AssertionError`. The
environment is seen through :class:`Environment`, the part of
:class:`~flowpy.tck.TestEnvironment` that the waiting helpers and the test
doubles use: this module sits below the environment and does not import it.
"""

from __future__ import annotations

import queue
import threading
import time
from typing import Any, Generic, NoReturn, Protocol, TypeVar

from flowpy._checks import check_timeout

__all__ = ["TEST_BUFFER_SIZE", "Environment", "Latch", "Promise", "Receptacle", "SubscriberBufferOverflowError"]

T = TypeVar("T")
E = TypeVar("E", bound=BaseException)

TEST_BUFFER_SIZE = 16
"""Buffer size used by the TCK's receptacles (times two) and processors."""

_END = object()  # end-of-stream marker in a Receptacle's queue
_TIMEOUT = object()  # returned by Receptacle._poll when nothing arrived in time


class Environment(Protocol):
    """What the waiting helpers and the test doubles need of their environment.

    :class:`~flowpy.tck.TestEnvironment` is the one the TCK passes; the
    members below are documented there.
    """

    @property
    def default_timeout_millis(self) -> int: ...

    @property
    def default_no_signals_timeout_millis(self) -> int: ...

    @property
    def default_poll_timeout_millis(self) -> int: ...

    def flop(self, message: str, error: BaseException | None = None) -> None: ...

    def flop_and_fail(self, message: str) -> NoReturn: ...

    def flop_and_raise_first(self, message: str) -> NoReturn: ...

    def expect_async_error(self, total_timeout_millis: int, poll_millis: int) -> BaseException | None: ...

    def debug(self, message: str) -> None: ...


class SubscriberBufferOverflowError(RuntimeError):
    """A test subscriber received more elements than its receptacle holds."""


class Latch:
    """A one-shot gate that can be re-opened; flops instead of raising."""

    def __init__(self, env: Environment) -> None:
        self._env = env
        self._event = threading.Event()

    def close(self) -> None:
        """Close the latch, releasing every waiter."""
        self._event.set()

    def re_open(self) -> None:
        """Open the latch again."""
        self._event = threading.Event()

    @property
    def is_closed(self) -> bool:
        """Whether :meth:`close` was called since the last :meth:`re_open`."""
        return self._event.is_set()

    def assert_open(self, message: str) -> None:
        """Flop ``message`` if the latch is closed."""
        if self.is_closed:
            self._env.flop(message)

    def assert_closed(self, message: str) -> None:
        """Flop ``message`` if the latch is open."""
        if not self.is_closed:
            self._env.flop(message)

    def expect_close(self, message: str, timeout_millis: int | None = None) -> None:
        """Wait for the latch to close; flop ``"<message> within N ms"`` if it does not."""
        timeout = self._env.default_timeout_millis if timeout_millis is None else timeout_millis
        if not self._event.wait(check_timeout(timeout, "timeout_millis", millis=True)):
            self._env.flop(f"{message} within {timeout} ms")


class Promise(Generic[T]):
    """A value assigned once, possibly on another thread."""

    def __init__(self, env: Environment) -> None:
        self._env = env
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._value: T | None = None  # set once, before self._event

    @classmethod
    def completed(cls, env: Environment, value: T) -> Promise[T]:
        """Return a promise already holding ``value``."""
        promise: Promise[T] = cls(env)
        promise.complete(value)
        return promise

    @property
    def is_completed(self) -> bool:
        """Whether the value has been assigned."""
        return self._event.is_set()

    def complete(self, value: T) -> None:
        """Assign the value; a second assignment flops."""
        with self._lock:
            if self._event.is_set():
                second = True
            else:
                second = False
                self._value = value
                self._event.set()
        if second:
            self._env.flop(
                f"Cannot complete a promise more than once! Present value: {self._value!r}, attempted to set: {value!r}"
            )

    def value(self) -> T:
        """Return the value.

        Raises:
            AssertionError: if it has not been assigned (also flopped).
        """
        if not self._event.is_set():
            self._env.flop_and_fail("Cannot access promise value before completion")
        return self._value  # type: ignore[return-value]

    def expect_completion(self, timeout_millis: int, message: str) -> None:
        """Wait for the value.

        Raises:
            AssertionError: if it did not arrive: ``"<message> within N ms"`` is
                flopped, and the first failure recorded in the test is raised
                (an earlier one, such as a signal before ``on_subscribe``,
                is the cause), as the Java TCK reports it.
        """
        if not self._event.wait(check_timeout(timeout_millis, "timeout_millis", millis=True)):
            self._env.flop_and_raise_first(f"{message} within {timeout_millis} ms")


class Receptacle(Generic[T]):
    """A stream of values with an end marker, filled by one thread and read by the test.

    Holds at most ``2 * TEST_BUFFER_SIZE`` unread values.
    """

    QUEUE_SIZE = 2 * TEST_BUFFER_SIZE

    def __init__(self, env: Environment) -> None:
        self._env = env
        self._queue: queue.Queue[Any] = queue.Queue(self.QUEUE_SIZE + 1)
        self._completed = Latch(env)

    def add(self, value: T) -> None:
        """Append ``value``.

        Raises:
            SubscriberBufferOverflowError: if ``QUEUE_SIZE`` values are unread (also flopped).
        """
        self._completed.assert_open(f"Unexpected element {value!r} received after stream completed")
        if self._queue.qsize() >= self.QUEUE_SIZE:
            message = f"Received more than bufferSize ({self.QUEUE_SIZE}) onNext signals"
            self._env.flop(message)
            raise SubscriberBufferOverflowError(message)
        self._queue.put_nowait(value)

    def complete(self) -> None:
        """Append the end marker; a second completion flops."""
        self._completed.assert_open("Unexpected additional complete signal received!")
        self._completed.close()
        self._queue.put_nowait(_END)

    def next(self, timeout_millis: int, message: str) -> T:
        """Return the next value.

        Raises:
            AssertionError: on timeout or end of stream (also flopped).
        """
        value = self._take(timeout_millis, message)
        if value is _END:
            self._env.flop_and_fail(f"Expected element but got end-of-stream: {message}")
        return value  # type: ignore[no-any-return]

    def next_or_end_of_stream(self, timeout_millis: int, message: str) -> tuple[bool, T | None]:
        """Return ``(True, value)``, or ``(False, None)`` at end of stream.

        Raises:
            AssertionError: on timeout (also flopped).
        """
        value = self._take(timeout_millis, message)
        return (False, None) if value is _END else (True, value)

    def next_n(self, elements: int, timeout_millis: int, message: str) -> list[T]:
        """Return the next ``elements`` values, all within one total timeout.

        Raises:
            AssertionError: on timeout or end of stream (also flopped).
        """
        deadline = time.monotonic() + check_timeout(timeout_millis, "timeout_millis", millis=True)
        result: list[T] = []
        while len(result) < elements:
            remaining_ms = max(0, round((deadline - time.monotonic()) * 1000))
            value = self._poll(remaining_ms)
            if value is _TIMEOUT:
                self._env.flop_and_fail(
                    f"{message} within {timeout_millis} ms: got {len(result)} of {elements} elements {result!r}"
                )
            if value is _END:
                self._env.flop_and_fail(
                    f"Expected {elements} elements but got {len(result)} and end-of-stream: {message}"
                )
            result.append(value)
        return result

    def expect_completion(self, timeout_millis: int, message: str) -> None:
        """Expect the end marker next.

        Raises:
            AssertionError: on timeout or if an element came instead: that is
                flopped, and the first failure recorded in the test is raised,
                as the Java TCK reports it (an illegal ``on_error`` before the
                missing completion is the cause, not the timeout).
        """
        value = self._poll(timeout_millis)
        if value is _TIMEOUT:
            self._env.flop_and_raise_first(f"{message} within {timeout_millis} ms")
        if value is not _END:
            self._env.flop_and_raise_first(f"Expected end-of-stream but got element {value!r}: {message}")

    def expect_none(self, within_millis: int, message: str) -> None:
        """Flop if a value or the end marker arrives within ``within_millis``."""
        value = self._poll(within_millis)
        if value is _TIMEOUT:
            return
        what = "end-of-stream" if value is _END else f"element {value!r}"
        self._env.flop(f"{message}: expected no signal but got {what}")

    def expect_error(self, error_type: type[E], total_timeout_millis: int, poll_millis: int, message: str) -> E:
        """Wait for an async error of ``error_type`` and return it.

        Waits the whole ``total_timeout_millis``; unlike TCK 1.0.4, whose
        ``=-`` bug cut the wait to one poll interval.

        Raises:
            AssertionError: if none arrived, or one of another type did (also flopped).
        """
        error = self._env.expect_async_error(total_timeout_millis, poll_millis)
        if error is None:
            self._env.flop_and_fail(f"{message} within {total_timeout_millis} ms")
        if not isinstance(error, error_type):
            self._env.flop_and_fail(f"{message}: got {type(error).__name__}: {error}")
        return error

    def _poll(self, timeout_millis: int) -> Any:
        """Return the next value, the end marker, or ``_TIMEOUT`` if none came within the timeout."""
        try:
            return self._queue.get(timeout=check_timeout(timeout_millis, "timeout_millis", millis=True))
        except queue.Empty:
            return _TIMEOUT  # the failure is raised by the caller, outside this handler: no chained Empty

    def _take(self, timeout_millis: int, message: str) -> Any:
        value = self._poll(timeout_millis)
        if value is _TIMEOUT:
            self._env.flop_and_fail(f"{message} within {timeout_millis} ms")
        return value
