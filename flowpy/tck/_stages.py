"""Test stages shared by the subscriber and processor verifications.

A stage is a :class:`ManualPublisher` that the subscriber under test
subscribes to; the elements it sends come from the helper publisher through a
manual subscriber (``tees``), so they are real elements of type ``T``.
"""

from __future__ import annotations

import threading
from typing import Any, Generic, TypeVar

from flowpy import flow
from flowpy.tck.environment import TestEnvironment, TestException
from flowpy.tck.manual_publisher import ManualPublisher
from flowpy.tck.signals import Latch
from flowpy.tck.subscribers import ManualSubscriberWithSubscriptionSupport

__all__ = [
    "NO_OP_SUBSCRIPTION",
    "ElementStage",
    "SecondSubscription",
    "TerminalSignalScope",
    "forbidden_call_subscription",
    "null_signal_check",
    "terminal_signal_check",
]

T = TypeVar("T")

LONG_MAX = 2**63 - 1


class ElementStage(ManualPublisher[T], Generic[T]):
    """A manual publisher whose elements come from an infinite helper publisher."""

    env: TestEnvironment  # the whole environment: a stage also subscribes (ManualPublisher needs less)

    def __init__(self, env: TestEnvironment, helper: flow.Publisher[T]) -> None:
        super().__init__(env)
        self.last_t: T | None = None
        self.tees: ManualSubscriberWithSubscriptionSupport[T] = env.new_manual_subscriber(helper)

    def next_t(self) -> T:
        """Take the next element from the helper publisher."""
        self.last_t = self.tees.request_next_element()
        return self.last_t

    def signal_next(self) -> T:
        """Send the next element to the subscriber under test and return it."""
        element = self.next_t()
        self.send_next(element)
        return element

    def close(self) -> None:
        """Stop the helper publisher's stream."""
        if self.tees.subscription.is_completed:
            self.tees.subscription.value().cancel()


class TerminalSignalScope:
    """Marks the thread while the TCK calls ``on_complete``/``on_error`` (rule 2.3).

    Java's TCK finds a marker method in the stack trace; a thread-local
    flag does the same without walking the stack.
    """

    def __init__(self, signal: str) -> None:
        self.signal = signal
        self._local = threading.local()

    @property
    def active(self) -> bool:
        """Whether the current thread is inside the terminal signal."""
        return bool(getattr(self._local, "active", False))

    def __enter__(self) -> TerminalSignalScope:
        self._local.active = True
        return self

    def __exit__(self, *exc: object) -> None:
        self._local.active = False


# The subscriptions below are classes of the module's, not made per test:
# CPython 3.13t never frees a class made once a thread has started, nor what
# its methods keep (docs/internals.md, "Classes made at run time").


class _ForbiddenCallSubscription(flow.Subscription):
    __slots__ = ("_env", "_scope")

    def __init__(self, env: TestEnvironment, scope: TerminalSignalScope) -> None:
        self._env = env
        self._scope = scope

    def request(self, n: int) -> None:
        if self._scope.active:
            self._env.flop(
                f"Subscription::request MUST NOT be called from Subscriber::{self._scope.signal} (Rule 2.3)!"
            )

    def cancel(self) -> None:
        if self._scope.active:
            self._env.flop(f"Subscription::cancel MUST NOT be called from Subscriber::{self._scope.signal} (Rule 2.3)!")

    def __repr__(self) -> str:
        return f"Subscription(forbidden inside {self._scope.signal})"


def forbidden_call_subscription(env: TestEnvironment, scope: TerminalSignalScope) -> flow.Subscription:
    """Return a subscription that flops when called from inside ``scope`` (rule 2.3)."""
    return _ForbiddenCallSubscription(env, scope)


class SecondSubscription(flow.Subscription):
    """A second subscription given to a subscriber that has one: it must be cancelled (rule 2.5).

    Closes ``cancelled`` when cancelled. A request on it flops when
    ``flop_on_request`` (the blackbox test), else it is ignored.
    """

    __slots__ = ("_cancelled", "_env", "_flop_on_request")

    def __init__(self, env: TestEnvironment, cancelled: Latch, *, flop_on_request: bool) -> None:
        self._env = env
        self._cancelled = cancelled
        self._flop_on_request = flop_on_request

    def request(self, n: int) -> None:
        if self._flop_on_request:
            self._env.flop(
                f"Subscriber illegally called `subscription.request({n})` on a second subscription (rule 2.5)"
            )

    def cancel(self) -> None:
        self._cancelled.close()

    def __repr__(self) -> str:
        return "SecondSubscription(should get cancelled)"


class _NoOpSubscription(flow.Subscription):
    def request(self, n: int) -> None:
        return None

    def cancel(self) -> None:
        return None

    def __repr__(self) -> str:
        return "NoOpSubscription"


NO_OP_SUBSCRIPTION: flow.Subscription = _NoOpSubscription()


def null_signal_check(env: TestEnvironment, subscriber: flow.Subscriber[Any], signal: str) -> None:
    """Call ``subscriber.<signal>(None)``; it must raise :class:`TypeError` (rule 2.13).

    Raises:
        AssertionError: if it returned normally or raised something else.
    """
    method = getattr(subscriber, signal)
    try:
        method(None)
    except TypeError:
        env.verify_no_async_errors_no_delay()
        return
    except Exception as exc:
        raise AssertionError(f"{signal}(None) raised {exc!r} instead of TypeError (rule 2.13)") from exc
    raise AssertionError(f"{signal}(None) did not raise TypeError (rule 2.13)")


def terminal_signal_check(env: TestEnvironment, subscriber: flow.Subscriber[Any], signal: str) -> None:
    """Rule 2.3: ``subscriber`` must not call its subscription from ``on_complete``/``on_error``.

    Subscribes ``subscriber`` to a subscription that flops when called from
    inside the terminal signal, then sends that signal on this thread.

    Raises:
        AssertionError: if the subscription was called from inside the signal.
    """
    scope = TerminalSignalScope(signal)
    subscriber.on_subscribe(forbidden_call_subscription(env, scope))
    with scope:
        if signal == "on_complete":
            subscriber.on_complete()
        else:
            subscriber.on_error(TestException())
    env.verify_no_async_errors_no_delay()
