"""Test doubles shared by the tests of sources, subscribers and processors."""

from __future__ import annotations

import sys
import threading
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from flowpy.flow import Publisher, Subscriber, Subscription

WAIT = 10.0  # seconds: the bound of every wait in these tests


class Recorder(Subscriber[Any]):
    """Records every signal and checks rule 1.1 and the signal grammar as they arrive.

    Args:
        initial: requested in on_subscribe (0 for none).
        per_item: requested synchronously from each on_next (0 for none).
        cancel_after: cancel from on_next once this many items arrived.
    """

    def __init__(self, initial: int = 0, per_item: int = 0, cancel_after: int | None = None) -> None:
        self.initial = initial
        self.per_item = per_item
        self.cancel_after = cancel_after
        self.subscription: Subscription | None = None
        self.items: list[Any] = []
        self.error: BaseException | None = None
        self.completed = False
        self.requested = 0
        self.violations: list[str] = []
        self.subscribe_count = 0
        self.done = threading.Event()
        self.subscribed = threading.Event()
        self.item_arrived = threading.Condition()
        self._active = 0  # signals in progress, to detect overlap (rule 1.3)
        self.threads: set[str] = set()

    def _enter(self, name: str) -> None:
        self._active += 1
        if self._active != 1:
            self.violations.append(f"{name} overlapped another signal")
        if self.done.is_set():
            self.violations.append(f"{name} after the terminal signal")
        self.threads.add(threading.current_thread().name)

    def on_subscribe(self, subscription: Subscription) -> None:
        self._enter("on_subscribe")
        self.subscribe_count += 1
        self.subscription = subscription
        self._active -= 1
        self.subscribed.set()
        if self.initial:
            self.request(self.initial)

    def on_next(self, item: Any) -> None:
        self._enter("on_next")
        if self.subscription is None:
            self.violations.append("on_next before on_subscribe")
        with self.item_arrived:
            self.items.append(item)
            self.item_arrived.notify_all()
        if len(self.items) > self.requested:
            self.violations.append(f"item {len(self.items)} arrived with {self.requested} requested")
        self._active -= 1
        if self.cancel_after is not None and len(self.items) >= self.cancel_after:
            self.cancel()
        elif self.per_item:
            self.request(self.per_item)

    def on_error(self, error: BaseException) -> None:
        self._enter("on_error")
        self.error = error
        self._active -= 1
        self.done.set()

    def on_complete(self) -> None:
        self._enter("on_complete")
        self.completed = True
        self._active -= 1
        self.done.set()

    def request(self, n: int) -> None:
        if isinstance(n, int) and not isinstance(n, bool) and n > 0:
            self.requested += n
        assert self.subscription is not None
        self.subscription.request(n)

    def cancel(self) -> None:
        assert self.subscription is not None
        self.subscription.cancel()

    def wait_subscribed(self) -> None:
        assert self.subscribed.wait(WAIT), f"no on_subscribe within {WAIT}s"

    def wait_done(self) -> None:
        assert self.done.wait(WAIT), f"no terminal signal within {WAIT}s; items={self.items[-5:]}"

    def wait_items(self, count: int) -> None:
        with self.item_arrived:
            assert self.item_arrived.wait_for(lambda: len(self.items) >= count, WAIT), (
                f"{len(self.items)} items after {WAIT}s, expected {count}"
            )


class ManualExecutor:
    """Queues tasks; the test runs them one by one, deterministically."""

    def __init__(self) -> None:
        self.tasks: deque[Callable[[], object]] = deque()

    def execute(self, task: Callable[[], object]) -> None:
        self.tasks.append(task)

    def run_one(self) -> None:
        self.tasks.popleft()()

    def run_all(self, limit: int = 10_000) -> int:
        ran = 0
        while self.tasks:
            assert ran < limit, "tasks keep coming"
            self.run_one()
            ran += 1
        return ran


class RejectingExecutor:
    """Refuses every task, like a shut-down pool."""

    def execute(self, task: Callable[[], object]) -> None:
        raise RuntimeError("cannot schedule new tasks after shutdown")


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


@contextmanager
def fast_switching() -> Iterator[None]:
    """Switch threads as often as possible, to shake out races; restores the interval."""
    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(previous)


def stack_depth() -> int:
    """The number of frames on the calling thread's stack."""
    frame = sys._getframe(1)
    depth = 0
    while frame is not None:
        depth += 1
        frame = frame.f_back  # type: ignore[assignment]
    return depth
