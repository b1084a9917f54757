"""Verifying a third-party publisher with flowpy.tck (the example of docs/tck.md)."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from flowpy import flow
from flowpy.tck import PublisherVerification, TestEnvironment


class ListPublisher(flow.Publisher[str]):
    """Publishes the items of a list, on the thread that calls request()."""

    def __init__(self, items: Sequence[str]) -> None:
        self.items = items

    def subscribe(self, subscriber: flow.Subscriber[str]) -> None:
        if subscriber is None:
            raise TypeError("subscriber must not be None (rule 1.9)")
        subscriber.on_subscribe(_ListSubscription(self.items, subscriber))


class _ListSubscription(flow.Subscription):
    def __init__(self, items: Sequence[str], subscriber: flow.Subscriber[str]) -> None:
        self.items = items
        self.subscriber: flow.Subscriber[str] | None = subscriber
        self.lock = threading.Lock()
        self.index = 0
        self.demand = 0  # > 0 while an emit loop runs: request() from on_next only adds to it

    def request(self, n: int) -> None:
        with self.lock:
            if self.subscriber is None:
                return  # cancelled: a no-op (rule 3.6)
            if n <= 0:
                subscriber, self.subscriber = self.subscriber, None
            else:
                running = self.demand > 0
                self.demand = min(self.demand + n, 2**63 - 1)  # rule 3.17
                if running:
                    return  # the running loop emits it (rule 3.3)
        if n <= 0:
            subscriber.on_error(ValueError(f"non-positive subscription request (rule 3.9): {n}"))
            return
        self._emit()

    def _emit(self) -> None:
        while True:
            with self.lock:
                subscriber = self.subscriber
                if subscriber is None:
                    return
                if self.index == len(self.items):
                    self.subscriber = None  # drop it (rule 3.13)
                    item = None
                else:
                    item = self.items[self.index]
                    self.index += 1
            if item is None:
                subscriber.on_complete()
                return
            subscriber.on_next(item)
            with self.lock:
                self.demand -= 1
                if self.demand == 0:
                    return

    def cancel(self) -> None:
        with self.lock:
            self.subscriber = None  # stop, and drop the subscriber (rules 3.12, 3.13)


class TestListPublisher(PublisherVerification[str]):
    def create_test_environment(self) -> TestEnvironment:
        return TestEnvironment(default_timeout_millis=1000, default_no_signals_timeout_millis=20)

    def create_publisher(self, elements: int) -> flow.Publisher[str]:
        return ListPublisher([f"item {i}" for i in range(elements)])

    def max_elements_from_publisher(self) -> int:
        return 1_000  # a list has to fit in memory: tests needing more skip


def test_docs_show_this_module_verbatim() -> None:
    from pathlib import Path

    docs = (Path(__file__).resolve().parents[2] / "docs" / "tck.md").read_text()
    code = Path(__file__).read_text().split('"""\n\n', 1)[1].split("\n\n\ndef test_docs_show")[0]
    assert code in docs
