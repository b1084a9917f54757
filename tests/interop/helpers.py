"""Test doubles for the interop tests: a publisher driven by hand."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from flowpy import flow
from tests.support import Recorder


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


class WaitingRecorder(Recorder):
    """A :class:`Recorder` whose signals notify a condition, so a test can wait for a state."""

    def __init__(self, initial: int = 0) -> None:
        super().__init__(initial)
        self.changed = threading.Condition()

    def _notify(self) -> None:
        with self.changed:
            self.changed.notify_all()

    def on_next(self, item: Any) -> None:
        super().on_next(item)
        self._notify()

    def on_error(self, error: BaseException) -> None:
        super().on_error(error)
        self._notify()

    def on_complete(self) -> None:
        super().on_complete()
        self._notify()

    def wait_for_items(self, count: int, timeout: float = 5.0) -> None:
        """Wait until ``count`` items have arrived.

        Raises:
            AssertionError: if they have not within ``timeout`` seconds.
        """
        with self.changed:
            arrived = self.changed.wait_for(lambda: len(self.items) >= count, timeout)
        assert arrived, f"{len(self.items)} of {count} items arrived within {timeout} s"


class ThreadsafeCallCounter:
    """Counts the ``call_soon_threadsafe`` calls made on ``loop`` from now on."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.calls = 0
        original = loop.call_soon_threadsafe

        def counting(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            return original(*args, **kwargs)

        loop.call_soon_threadsafe = counting  # type: ignore[method-assign]
