"""The TCK's test subscribers: one that flops on every signal, and the manual ones built on it.

Port of the subscribers nested in ``org.reactivestreams.tck.TestEnvironment``
(Reactive Streams TCK 1.0.4). :class:`TestSubscriber` flops every signal;
:class:`ManualSubscriber` keeps the elements it receives for the test to
take, and requests only when the test tells it to;
:class:`ManualSubscriberWithSubscriptionSupport` also accepts ``on_subscribe``
once and checks that it comes first (rule 1.9);
:class:`BlackholeSubscriberWithSubscriptionSupport` drops every element.
Each reports to the environment it was made with (a
:class:`~flowpy.tck.TestEnvironment`).
"""

from __future__ import annotations

from typing import TypeVar

from flowpy import flow
from flowpy.tck.signals import E, Environment, Promise, Receptacle

__all__ = [
    "BlackholeSubscriberWithSubscriptionSupport",
    "ManualSubscriber",
    "ManualSubscriberWithSubscriptionSupport",
    "TestSubscriber",
]

T = TypeVar("T")


class TestSubscriber(flow.Subscriber[T]):
    """A subscriber for which every signal is unexpected (each one flops).

    Subclasses accept the signals they expect. ``subscription`` is completed
    by subclasses that accept ``on_subscribe``.
    """

    __test__ = False  # not a pytest test class

    def __init__(self, env: Environment) -> None:
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

    def __init__(self, env: Environment) -> None:
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

    def request_next_element(
        self, timeout_millis: int | None = None, message: str = "Did not receive expected element"
    ) -> T:
        """``request(1)``, then return the element that must arrive."""
        self.request(1)
        return self.next_element(timeout_millis, message)

    def request_next_element_or_end_of_stream(
        self,
        timeout_millis: int | None = None,
        message: str = "Did not receive expected stream completion",
    ) -> tuple[bool, T | None]:
        """``request(1)``, then return ``(True, element)`` or ``(False, None)`` at completion."""
        self.request(1)
        return self.next_element_or_end_of_stream(timeout_millis, message)

    def request_end_of_stream(
        self, timeout_millis: int | None = None, message: str = "Did not receive expected stream completion"
    ) -> None:
        """``request(1)``, then expect completion."""
        self.request(1)
        self.expect_completion(timeout_millis, message)

    def request_next_elements(
        self, elements: int, timeout_millis: int | None = None, message: str = "Did not receive expected elements"
    ) -> list[T]:
        """``request(elements)``, then return that many elements."""
        self.request(elements)
        return self.next_elements(elements, timeout_millis, message)

    def next_element(self, timeout_millis: int | None = None, message: str = "Did not receive expected element") -> T:
        """Return the next element."""
        return self.received.next(self._timeout(timeout_millis), message)

    def next_element_or_end_of_stream(
        self,
        timeout_millis: int | None = None,
        message: str = "Did not receive expected stream completion",
    ) -> tuple[bool, T | None]:
        """Return ``(True, element)``, or ``(False, None)`` at completion."""
        return self.received.next_or_end_of_stream(self._timeout(timeout_millis), message)

    def next_elements(
        self, elements: int, timeout_millis: int | None = None, message: str = "Did not receive expected elements"
    ) -> list[T]:
        """Return the next ``elements`` elements, within one total timeout."""
        return self.received.next_n(elements, self._timeout(timeout_millis), message)

    def expect_next(self, expected: T, timeout_millis: int | None = None) -> None:
        """Expect ``expected`` (by ``==``) as the next element; flop otherwise."""
        received = self.next_element(timeout_millis, "Did not receive expected element on downstream")
        if received != expected:
            self.env.flop(f"Expected element {expected!r} on downstream but received {received!r}")

    def expect_completion(
        self, timeout_millis: int | None = None, message: str = "Did not receive expected stream completion"
    ) -> None:
        """Expect completion next."""
        self.received.expect_completion(self._timeout(timeout_millis), message)

    def expect_error(self, error_type: type[E], timeout_millis: int | None = None, poll_millis: int | None = None) -> E:
        """Wait for an ``on_error`` of ``error_type`` and return its exception."""
        return self.received.expect_error(
            error_type,
            self._timeout(timeout_millis),
            self.env.default_poll_timeout_millis if poll_millis is None else poll_millis,
            f"Expected on_error({error_type.__name__})",
        )

    def expect_error_with_message(
        self, error_type: type[E], alternatives: list[str], timeout_millis: int | None = None
    ) -> E:
        """As :meth:`expect_error`; the message must also contain one of ``alternatives``."""
        error = self.expect_error(error_type, timeout_millis)
        text = str(error)
        if not any(part in text for part in alternatives):
            self.env.flop_and_fail(
                f"Got expected exception {type(error).__name__} but missing message part "
                f"(one of {alternatives!r}), was: {text!r}"
            )
        return error

    def expect_none(
        self, within_millis: int | None = None, message: str = "Did not expect an element but got element"
    ) -> None:
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

    def next_element(self, timeout_millis: int | None = None, message: str = "Did not receive expected element") -> T:
        """Not supported: a blackhole keeps no elements.

        Raises:
            RuntimeError: always.
        """
        raise RuntimeError("cannot call next_element() on a BlackholeSubscriberWithSubscriptionSupport")

    def next_elements(
        self, elements: int, timeout_millis: int | None = None, message: str = "Did not receive expected elements"
    ) -> list[T]:
        """Not supported: a blackhole keeps no elements.

        Raises:
            RuntimeError: always.
        """
        raise RuntimeError("cannot call next_elements() on a BlackholeSubscriberWithSubscriptionSupport")
