"""Small publishers and subscribers that the operator tests drive by hand."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterable, Iterator
from typing import Any

import pytest

from flowpy._demand import MAX_DEMAND, add_demand, check_request
from flowpy.flow import Publisher, Subscriber, Subscription


class SourceSubscription(Subscription):
    """One subscription of :class:`ListSource`: emits on the requesting thread, trampolined (rule 3.3)."""

    def __init__(self, source: ListSource, subscriber: Subscriber[Any]) -> None:
        self.source = source
        self.subscriber = subscriber
        self.iterator: Iterator[Any] = iter(source.items)
        self.requests: list[Any] = []
        self.cancelled = False
        self.emitted = 0
        self._lock = threading.Lock()
        self._demand = 0
        self._emitting = False
        self._done = False
        self._error: BaseException | None = None

    def request(self, n: int) -> None:
        with self._lock:
            self.requests.append(n)
            if self.cancelled or self._done:
                return
            error = check_request(n)
            if error is not None:
                self._error = error
            else:
                self._demand = add_demand(self._demand, n)
            if self._emitting:
                return
            self._emitting = True
        self._emit()

    def _emit(self) -> None:
        subscriber = self.subscriber
        while True:
            with self._lock:
                if self.cancelled:
                    self._emitting = False
                    return
                if self._error is not None:
                    error, self._done = self._error, True
                    self._emitting = False
                    break
                if self._demand == 0:
                    self._emitting = False
                    return
                if self._demand != MAX_DEMAND:
                    self._demand -= 1
            try:
                item = next(self.iterator)
            except StopIteration:
                with self._lock:
                    self._done = True
                    self._emitting = False
                subscriber.on_complete()
                return
            self.emitted += 1
            subscriber.on_next(item)
        subscriber.on_error(error)

    def cancel(self) -> None:
        with self._lock:
            self.cancelled = True


class ListSource(Publisher[Any]):
    """A cold, synchronous publisher of ``items`` that records every subscription."""

    def __init__(self, items: Iterable[Any]) -> None:
        self.items = items
        self.subscriptions: list[SourceSubscription] = []

    def subscribe(self, subscriber: Subscriber[Any]) -> None:
        if subscriber is None:
            raise TypeError("subscriber must not be None")
        subscription = SourceSubscription(self, subscriber)
        self.subscriptions.append(subscription)
        subscriber.on_subscribe(subscription)

    @property
    def requested(self) -> int:
        """Total demand asked of the last subscription."""
        return sum(n for n in self.subscriptions[-1].requests if isinstance(n, int) and n > 0)


class ManualSubscription(Subscription):
    def __init__(self) -> None:
        self.requests: list[int] = []
        self.cancelled = threading.Event()
        self.requested_event = threading.Condition()

    def request(self, n: int) -> None:
        with self.requested_event:
            self.requests.append(n)
            self.requested_event.notify_all()

    def cancel(self) -> None:
        self.cancelled.set()

    @property
    def total(self) -> int:
        return sum(self.requests)

    def wait_total(self, n: int, timeout: float = 5.0) -> bool:
        with self.requested_event:
            return self.requested_event.wait_for(lambda: self.total >= n, timeout)


class ManualSource(Publisher[Any]):
    """A publisher whose signals the test sends itself, through ``subscribers``."""

    def __init__(self) -> None:
        self.subscribers: list[Subscriber[Any]] = []
        self.subscriptions: list[ManualSubscription] = []

    def subscribe(self, subscriber: Subscriber[Any]) -> None:
        subscription = ManualSubscription()
        self.subscribers.append(subscriber)
        self.subscriptions.append(subscription)
        subscriber.on_subscribe(subscription)

    @property
    def subscriber(self) -> Subscriber[Any]:
        return self.subscribers[-1]

    @property
    def subscription(self) -> ManualSubscription:
        return self.subscriptions[-1]


class Recorder(Subscriber[Any]):
    """Records signals; checks it never gets more than it requested and signals are serial."""

    def __init__(self, initial: int = 0) -> None:
        self.initial = initial
        self.items: list[Any] = []
        self.errors: list[BaseException] = []
        self.completed = 0
        self.subscription: Subscription | None = None
        self.requested = 0
        self.violations: list[str] = []
        self.threads: set[str] = set()
        self.done = threading.Event()
        self._condition = threading.Condition()
        self._inside = False

    def _enter(self, what: str) -> None:
        if self._inside:
            self.violations.append(f"concurrent {what}")
        self._inside = True
        self.threads.add(threading.current_thread().name)
        if self.done.is_set():
            self.violations.append(f"{what} after terminal signal")

    def on_subscribe(self, subscription: Subscription) -> None:
        if self.subscription is not None:
            self.violations.append("second on_subscribe")
        self.subscription = subscription
        if self.initial:
            self.request(self.initial)

    def on_next(self, item: Any) -> None:
        self._enter("on_next")
        with self._condition:
            self.items.append(item)
            if len(self.items) > self.requested:
                self.violations.append(f"item {len(self.items)} beyond demand {self.requested}")
            self._condition.notify_all()
        self._inside = False

    def on_error(self, error: BaseException) -> None:
        self._enter("on_error")
        self.errors.append(error)
        self._inside = False
        self.done.set()

    def on_complete(self) -> None:
        self._enter("on_complete")
        self.completed += 1
        self._inside = False
        self.done.set()

    def request(self, n: int) -> None:
        with self._condition:
            self.requested = add_demand(self.requested, n) if n > 0 else self.requested
        assert self.subscription is not None
        self.subscription.request(n)

    def cancel(self) -> None:
        assert self.subscription is not None
        self.subscription.cancel()

    def wait_items(self, n: int, timeout: float = 10.0) -> bool:
        with self._condition:
            return self._condition.wait_for(lambda: len(self.items) >= n, timeout)

    def await_done(self, timeout: float = 10.0) -> Recorder:
        assert self.done.wait(timeout), f"no terminal signal; items={self.items[-5:]}"
        return self

    def assert_clean(self) -> None:
        assert self.violations == []


def naturals() -> Iterator[int]:
    n = 0
    while True:
        yield n
        n += 1


@pytest.fixture
def fast_switching() -> Iterator[None]:
    """Switch threads as often as possible, to shake out races; restores the interval."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(old)
