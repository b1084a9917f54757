"""ManualPublisher: the fake upstream a test drives by hand.

Port of ``org.reactivestreams.tck.TestEnvironment.ManualPublisher`` (Reactive
Streams TCK 1.0.4): the subscriber under test subscribes to it, the test
sends each signal on its own thread and watches what the subscriber requests
and whether it cancels.
"""

from __future__ import annotations

from typing import Any, TypeVar

from flowpy import flow
from flowpy.tck.signals import Environment, Latch, Promise, Receptacle

__all__ = ["ManualPublisher"]

T = TypeVar("T")


class _Subscription(flow.Subscription):
    """The subscription a :class:`ManualPublisher` gives: it records requests and the cancel."""

    __slots__ = ("_publisher",)

    def __init__(self, publisher: ManualPublisher[Any]) -> None:
        self._publisher = publisher

    def request(self, n: int) -> None:
        self._publisher.requests.add(n)

    def cancel(self) -> None:
        self._publisher.cancelled.close()

    def __repr__(self) -> str:
        return f"ManualPublisher.Subscription({self._publisher!r})"


class ManualPublisher(flow.Publisher[T]):
    """A publisher for one subscriber, driven by the test thread.

    ``subscribe`` calls ``on_subscribe`` synchronously; the subscription
    records each ``request(n)`` in :attr:`requests` and ``cancel`` closes
    :attr:`cancelled`. ``send_next``/``send_completion``/``send_error`` call
    the subscriber on the calling thread.
    """

    def __init__(self, env: Environment) -> None:
        self.env = env
        self.subscriber: Promise[flow.Subscriber[T]] = Promise(env)
        self.requests: Receptacle[int] = Receptacle(env)
        self.cancelled = Latch(env)
        self.pending_demand = 0
        self._subscription = _Subscription(self)

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

    def expect_request(
        self, timeout_millis: int | None = None, message: str = "Did not receive expected `request` call"
    ) -> int:
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
        self.cancelled.expect_close("Did not receive expected cancelling of upstream subscription", timeout_millis)

    @property
    def is_cancelled(self) -> bool:
        """Whether the subscriber cancelled."""
        return self.cancelled.is_closed
