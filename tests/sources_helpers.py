"""Test doubles for the tests of sources, subscribers and processors (beside tests.support)."""

from __future__ import annotations

import sys
import threading
from typing import Any

from flowpy.flow import Publisher, Subscriber, Subscription
from tests.support import Recorder, RejectingExecutor

WAIT = 10.0  # seconds: the bound of every wait in these tests


class SyncRecorder(Recorder):
    """A :class:`Recorder` whose initial request comes after ``on_subscribe`` returned its
    bookkeeping: a synchronous publisher may emit from inside that request (rule 3.10),
    which is not an overlap of signals."""

    def on_subscribe(self, subscription: Subscription) -> None:
        initial, self.initial = self.initial, 0
        super().on_subscribe(subscription)
        self.initial = initial
        if initial:
            self.request(initial)


def make_recorder(initial: int = 0, per_item: int = 0, cancel_after: int | None = None) -> Recorder:
    """A recorder that requests ``initial`` on subscribe, then from each ``on_next``
    requests ``per_item`` (if nonzero) or cancels once ``cancel_after`` items arrived."""

    def hook(item: Any) -> None:
        if cancel_after is not None and len(result.items) >= cancel_after:
            result.cancel()
        elif per_item:
            result.request(per_item)

    result = SyncRecorder(initial, hook)
    return result


def rejecting() -> RejectingExecutor:
    """An executor that refuses every task, like a pool that was shut down."""
    return RejectingExecutor(0, RuntimeError("cannot schedule new tasks after shutdown"))


def wait_done(subscriber: Recorder) -> None:
    assert subscriber.done.wait(WAIT), f"no terminal signal within {WAIT}s; last items {subscriber.items[-5:]}"


class SpyPublisher(Publisher[Any]):
    """A publisher driven by the test: records requests and cancels of its one subscription."""

    def __init__(self) -> None:
        self.subscriber: Subscriber[Any] | None = None
        self.requests: list[int] = []
        self.cancelled = threading.Event()
        self.requested_event = threading.Condition()

    def subscribe(self, subscriber: Subscriber[Any]) -> None:
        self.subscriber = subscriber
        spy = self

        class _Subscription(Subscription):
            def request(self, n: int) -> None:
                with spy.requested_event:
                    spy.requests.append(n)
                    spy.requested_event.notify_all()

            def cancel(self) -> None:
                spy.cancelled.set()

        subscriber.on_subscribe(_Subscription())

    @property
    def total_requested(self) -> int:
        return sum(self.requests)

    def wait_requested(self, total: int) -> None:
        with self.requested_event:
            assert self.requested_event.wait_for(lambda: self.total_requested >= total, WAIT)


def stack_depth() -> int:
    """The number of frames on the calling thread's stack."""
    frame = sys._getframe(1)
    depth = 0
    while frame is not None:
        depth += 1
        frame = frame.f_back  # type: ignore[assignment]
    return depth


class CancelSpy(Publisher[Any]):
    """Wraps a publisher and records the requests and the cancel of each subscription."""

    def __init__(self, inner: Publisher[Any]) -> None:
        self.inner = inner
        self.requests: list[int] = []
        self.cancelled = threading.Event()

    def subscribe(self, subscriber: Subscriber[Any]) -> None:
        spy = self

        class _Subscriber(Subscriber[Any]):
            def on_subscribe(self, subscription: Subscription) -> None:
                class _Subscription(Subscription):
                    def request(self, n: int) -> None:
                        spy.requests.append(n)
                        subscription.request(n)

                    def cancel(self) -> None:
                        spy.cancelled.set()
                        subscription.cancel()

                subscriber.on_subscribe(_Subscription())

            def on_next(self, item: Any) -> None:
                subscriber.on_next(item)

            def on_error(self, error: BaseException) -> None:
                subscriber.on_error(error)

            def on_complete(self) -> None:
                subscriber.on_complete()

        self.inner.subscribe(_Subscriber())
