"""Helpers for the operator tests: a publisher wrapper that records demand, and request-pattern driving."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import strategies as st

from flowpy.flow import Publisher, Subscriber, Subscription
from flowpy.operators._merge import _Coordinator
from tests.support import GatedSlot, Recorder

WAIT = 10.0  # seconds; only ever reached when a test is about to fail


class RecordedSubscription(Subscription):
    """Forwards to a real subscription, recording every request and cancel."""

    def __init__(self, inner: Subscription) -> None:
        self.inner = inner
        self.requests: list[Any] = []
        self.cancelled = threading.Event()

    def request(self, n: int) -> None:
        self.requests.append(n)
        self.inner.request(n)

    def cancel(self) -> None:
        self.cancelled.set()
        self.inner.cancel()

    @property
    def total(self) -> int:
        """The sum of the valid requests."""
        return sum(n for n in self.requests if isinstance(n, int) and n > 0)


class StubSubscription(Subscription):
    """A subscription with no publisher behind it: records requests and cancels."""

    def __init__(self) -> None:
        self.requests: list[int] = []
        self.cancels = 0

    def request(self, n: int) -> None:
        self.requests.append(n)

    def cancel(self) -> None:
        self.cancels += 1


class GatedPublisher(Publisher[Any]):
    """Hands its subscriber a :class:`StubSubscription`: in ``subscribe``, or later with ``hold``.

    With ``before``, the subscriber's slot (its attribute ``slot``) is first
    replaced by a :class:`GatedSlot` that runs ``before(subscriber)`` between
    the subscriber's own checks and its slot's decision.
    """

    def __init__(
        self, before: Callable[[Any], object] | None = None, slot: str = "_slot", *, hold: bool = False
    ) -> None:
        self.before = before
        self.slot = slot
        self.hold = hold  # on_subscribe waits for arrive(), as from a publisher on another thread
        self.subscriber: Subscriber[Any] | None = None
        self.subscription = StubSubscription()

    def subscribe(self, subscriber: Subscriber[Any]) -> None:
        self.subscriber = subscriber
        if not self.hold:
            self.arrive()

    def arrive(self) -> None:
        """Signal ``on_subscribe`` to the subscriber, through the gate if there is one."""
        subscriber = self.subscriber
        assert subscriber is not None
        before = self.before
        if before is not None:
            setattr(subscriber, self.slot, GatedSlot(lambda: before(subscriber)))
        subscriber.on_subscribe(self.subscription)


class _Tap(Subscriber[Any]):
    def __init__(self, spy: Spy, downstream: Subscriber[Any]) -> None:
        self.spy = spy
        self.downstream = downstream

    def on_subscribe(self, subscription: Subscription) -> None:
        recorded = RecordedSubscription(subscription)
        self.spy.subscriptions.append(recorded)
        self.spy.subscribers.append(self.downstream)
        self.downstream.on_subscribe(recorded)

    def on_next(self, item: Any) -> None:
        self.spy.delivered += 1
        self.downstream.on_next(item)

    def on_error(self, error: BaseException) -> None:
        self.downstream.on_error(error)

    def on_complete(self) -> None:
        self.downstream.on_complete()


class Spy(Publisher[Any]):
    """Wraps a publisher and records, per subscription, who subscribed and what was requested."""

    def __init__(self, inner: Publisher[Any]) -> None:
        self.inner = inner
        self.subscriptions: list[RecordedSubscription] = []
        self.subscribers: list[Subscriber[Any]] = []
        self.delivered = 0

    def subscribe(self, subscriber: Subscriber[Any]) -> None:
        self.inner.subscribe(_Tap(self, subscriber))

    @property
    def subscription(self) -> RecordedSubscription:
        """The last subscription."""
        return self.subscriptions[-1]


def drive(publisher: Publisher[Any], pattern: list[int]) -> Recorder:
    """Subscribe a recorder, request each amount of ``pattern`` in turn, then everything.

    Returns the recorder once the stream has ended; fails if it broke a rule on the way.
    """
    recorder = Recorder()
    publisher.subscribe(recorder)
    assert recorder.subscribed.wait(WAIT)
    for n in pattern:
        if recorder.done.is_set():
            break
        recorder.request(n)
    if not recorder.done.is_set():
        recorder.request(2**63 - 1)
    assert recorder.done.wait(WAIT), f"no terminal signal; {len(recorder.items)} items"
    assert recorder.violations == []
    return recorder


patterns = st.lists(st.integers(min_value=1, max_value=7), max_size=12)
"""Random request patterns: the amounts a subscriber asks for, one after the other."""

items_lists = st.lists(st.integers(min_value=-50, max_value=50), max_size=40)
"""Random inputs."""


def before_each_failure(monkeypatch: pytest.MonkeyPatch, action: Callable[[_Coordinator[Any]], object]) -> None:
    """Run ``action(coordinator)`` whenever a merge coordinator is told of a failure, just before it records it.

    What another thread may do in that window (a drain pass, a request), forced.
    """
    fail = _Coordinator.fail

    def fail_after_action(self: _Coordinator[Any], error: BaseException) -> None:
        action(self)
        fail(self, error)

    monkeypatch.setattr(_Coordinator, "fail", fail_after_action)


class HotSource(Publisher[Any]):
    """A source the test drives, which ignores demand (a sensor, a hot publisher).

    ``subscribe`` gives the subscriber a :class:`StubSubscription` at once;
    ``emit``, ``complete`` and ``fail`` signal it on the calling thread.
    """

    def __init__(self) -> None:
        self.subscription = StubSubscription()
        self.subscriber: Subscriber[Any] | None = None

    def subscribe(self, subscriber: Subscriber[Any]) -> None:
        self.subscriber = subscriber
        subscriber.on_subscribe(self.subscription)

    def emit(self, *items: Any) -> None:
        assert self.subscriber is not None
        for item in items:
            self.subscriber.on_next(item)

    def complete(self) -> None:
        assert self.subscriber is not None
        self.subscriber.on_complete()

    def fail(self, error: BaseException) -> None:
        assert self.subscriber is not None
        self.subscriber.on_error(error)

    @property
    def cancelled(self) -> bool:
        return self.subscription.cancels > 0


# --- Resubscribing operators: a source that behaves differently per subscription ---


def then_fail(items: list[Any], error: BaseException) -> Publisher[Any]:
    """A cold publisher of ``items`` (on demand), then ``error``."""
    from flowpy import operators, sources

    return operators.concat(sources.just(*items), sources.error(error))


class Attempts(Spy):
    """Each subscription gets the next publisher of ``publishers`` (the last one again once they run out).

    As a :class:`Spy`, it records every subscription's requests and cancel, one per attempt.
    """

    def __init__(self, *publishers: Publisher[Any]) -> None:
        from flowpy import operators

        self.count = 0  # subscriptions so far

        def next_publisher() -> Publisher[Any]:
            publisher = publishers[min(self.count, len(publishers) - 1)]
            self.count += 1
            return publisher

        super().__init__(operators.defer(next_publisher))
