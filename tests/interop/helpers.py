"""Test doubles for the interop tests: a publisher driven by hand."""

from __future__ import annotations

import threading
from typing import Any

from flowpy import flow


class ManualSubscription(flow.Subscription):
    """Records every request and cancel it receives."""

    def __init__(self) -> None:
        self.requests: list[Any] = []
        self.cancelled = threading.Event()

    @property
    def requested(self) -> int:
        return sum(n for n in self.requests if isinstance(n, int))

    def request(self, n: int) -> None:
        self.requests.append(n)

    def cancel(self) -> None:
        self.cancelled.set()


class ManualPublisher(flow.Publisher[Any]):
    """Hands a :class:`ManualSubscription` to each subscriber; the test sends the signals."""

    def __init__(self) -> None:
        self.subscribers: list[flow.Subscriber[Any]] = []
        self.subscriptions: list[ManualSubscription] = []

    def subscribe(self, subscriber: flow.Subscriber[Any]) -> None:
        subscription = ManualSubscription()
        self.subscribers.append(subscriber)
        self.subscriptions.append(subscription)
        subscriber.on_subscribe(subscription)

    @property
    def subscriber(self) -> flow.Subscriber[Any]:
        (subscriber,) = self.subscribers
        return subscriber

    @property
    def subscription(self) -> ManualSubscription:
        (subscription,) = self.subscriptions
        return subscription
