"""Probes that let the TCK see inside a subscriber under test.

A *whitebox* subscriber reports each signal it receives to a
:class:`WhiteboxSubscriberProbe` and hands it a :class:`SubscriberPuppet`
through which the TCK makes it request and cancel. A *blackbox* subscriber is
observed from outside by a :class:`BlackboxSubscriberProxy`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Generic, TypeVar

from flowpy import flow
from flowpy.tck.environment import TestEnvironment
from flowpy.tck.signals import E, Promise, Receptacle

__all__ = [
    "BlackboxProbe",
    "BlackboxSubscriberProxy",
    "SubscriberPuppet",
    "SubscriptionPuppet",
    "WhiteboxSubscriberProbe",
]

T = TypeVar("T")


class SubscriberPuppet(ABC):
    """How the TCK drives a whitebox subscriber."""

    @abstractmethod
    def trigger_request(self, elements: int) -> None:
        """Make the subscriber eventually request at least ``elements`` more.

        It may request them one at a time; the TCK waits for each request.
        """

    @abstractmethod
    def signal_cancel(self) -> None:
        """Make the subscriber cancel its subscription (it may coalesce pending triggers)."""


class SubscriptionPuppet(SubscriberPuppet):
    """The puppet of a subscriber that requests and cancels on its subscription from any thread.

    ``trigger_request(n)`` calls ``subscription.request(n)``, ``signal_cancel``
    calls ``subscription.cancel()``, on the TCK's thread. A subscriber whose
    calls on the subscription must come from its own thread (rule 2.7)
    needs a puppet that routes them there.
    """

    def __init__(self, subscription: flow.Subscription) -> None:
        self.subscription = subscription

    def trigger_request(self, elements: int) -> None:
        self.subscription.request(elements)

    def signal_cancel(self) -> None:
        self.subscription.cancel()


class BlackboxProbe(Generic[T]):
    """Records the ``on_next``/``on_error``/``on_complete`` signals a subscriber received."""

    def __init__(self, env: TestEnvironment) -> None:
        self.env = env
        self.elements: Receptacle[T] = Receptacle(env)
        self.error: Promise[BaseException] = Promise(env)

    def register_on_next(self, element: T) -> None:
        """Record that the subscriber received ``element``."""
        self.elements.add(element)

    def register_on_complete(self) -> None:
        """Record completion; a second terminal signal flops (rule 1.7)."""
        if self.error.is_completed:
            self.env.flop("Subscriber received on_complete after on_error (rule 1.7)")
            return
        self.elements.complete()

    def register_on_error(self, error: BaseException) -> None:
        """Record ``error``; a second terminal signal flops (rule 1.7)."""
        if self.error.is_completed:
            self.env.flop(f"Subscriber received a second on_error({error!r}) (rule 1.7)")
            return
        self.error.complete(error)

    def expect_next(self, expected: T | None = None, timeout_millis: int | None = None) -> T:
        """Return the next element; if ``expected`` is given it must be equal."""
        timeout = self.env.default_timeout_millis if timeout_millis is None else timeout_millis
        element = self.elements.next(timeout, f"Subscriber did not call `register_on_next({expected!r})`")
        if expected is not None and element != expected:
            self.env.flop_and_fail(
                f"Received `on_next({element!r})` on downstream but expected `on_next({expected!r})`"
            )
        return element

    def expect_completion(
        self, timeout_millis: int | None = None, message: str = "Subscriber did not call `register_on_complete()`"
    ) -> None:
        """Expect the subscriber to have received ``on_complete``."""
        timeout = self.env.default_timeout_millis if timeout_millis is None else timeout_millis
        self.elements.expect_completion(timeout, message)

    def expect_error_of_type(self, error_type: type[E], timeout_millis: int | None = None) -> E:
        """Expect an ``on_error`` with an exception of ``error_type`` and return it."""
        timeout = self.env.default_timeout_millis if timeout_millis is None else timeout_millis
        self.error.expect_completion(timeout, "Subscriber did not call `register_on_error(error)`")
        error = self.error.value()
        if not isinstance(error, error_type):
            self.env.flop_and_fail(f"Subscriber received on_error({error!r}), expected {error_type.__name__}")
        return error

    def expect_error(self, expected: BaseException, timeout_millis: int | None = None) -> None:
        """Expect ``on_error`` with exactly ``expected`` (identity)."""
        error = self.expect_error_of_type(BaseException, timeout_millis)
        if error is not expected:
            self.env.flop_and_fail(f"Subscriber received on_error({error!r}), expected on_error({expected!r})")

    def expect_error_with_message(
        self, error_type: type[E], alternatives: list[str], timeout_millis: int | None = None
    ) -> E:
        """As :meth:`expect_error_of_type`; its message must contain one of ``alternatives``."""
        error = self.expect_error_of_type(error_type, timeout_millis)
        if not any(part in str(error) for part in alternatives):
            self.env.flop_and_fail(
                f"Got expected exception {type(error).__name__} but missing message part "
                f"(one of {alternatives!r}), was: {str(error)!r}"
            )
        return error

    def expect_none(self, within_millis: int | None = None) -> None:
        """Flop if an element or completion is registered within the no-signals timeout."""
        within = self.env.default_no_signals_timeout_millis if within_millis is None else within_millis
        self.elements.expect_none(within, "Expected nothing")


class WhiteboxSubscriberProbe(BlackboxProbe[T]):
    """A probe that also receives the subscriber's puppet from ``on_subscribe``.

    The subscriber under test calls :meth:`register_on_subscribe` from
    ``on_subscribe`` and the other ``register_*`` methods from the matching
    signal methods.
    """

    def __init__(self, env: TestEnvironment) -> None:
        super().__init__(env)
        self.puppet: Promise[SubscriberPuppet] = Promise(env)

    def register_on_subscribe(self, puppet: SubscriberPuppet) -> None:
        """Hand the TCK the puppet; calls after the first are ignored."""
        if not self.puppet.is_completed:
            self.puppet.complete(puppet)


class BlackboxSubscriberProxy(flow.Subscriber[T]):
    """Forwards every signal to a subscriber, recording it in a :class:`BlackboxProbe` first."""

    def __init__(self, probe: BlackboxProbe[T], subscriber: flow.Subscriber[T]) -> None:
        self.probe = probe
        self.subscriber = subscriber

    def on_subscribe(self, subscription: flow.Subscription) -> None:
        self.subscriber.on_subscribe(subscription)

    def on_next(self, item: T) -> None:
        self.probe.register_on_next(item)
        self.subscriber.on_next(item)

    def on_error(self, error: BaseException) -> None:
        self.probe.register_on_error(error)
        self.subscriber.on_error(error)

    def on_complete(self) -> None:
        self.probe.register_on_complete()
        self.subscriber.on_complete()
