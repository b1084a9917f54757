"""SubmissionPublisher under real threads: loss, duplication, order, wake-ups.

Every test runs once per core: it asks for the ``core`` fixture
(tests/conftest.py, tests/core_impl.py) and builds its publisher from it.
"""

from __future__ import annotations

import random
import threading
from typing import Any

import pytest

from flowpy import ClosedPublisherError
from flowpy.executors import DaemonThreadPool
from flowpy.flow import Subscriber, Subscription
from flowpy.submission import SubmissionPublisher
from tests.core_impl import Core

MAX = 2**63 - 1


class Checker(Subscriber[tuple[int, int]]):
    """Requests in batches, checks per-producer order and demand, counts items."""

    def __init__(self, producers: int, batch: int, rng: random.Random, cancel_after: int | None = None) -> None:
        self.batch = batch
        self.rng = rng
        self.cancel_after = cancel_after
        self.next_seq = [0] * producers
        self.received = 0
        self.outstanding = 0
        self.errors: list[str] = []
        self.done = threading.Event()
        self.completed = False
        self.subscription: Subscription | None = None
        self.busy = threading.Lock()

    def _request(self, n: int) -> None:
        assert self.subscription is not None
        self.outstanding = min(self.outstanding + n, MAX)
        self.subscription.request(n)

    def on_subscribe(self, subscription: Subscription) -> None:
        self.subscription = subscription
        self._request(self.batch)

    def on_next(self, item: tuple[int, int]) -> None:
        if not self.busy.acquire(blocking=False):
            self.errors.append("overlapping on_next")
        try:
            producer, seq = item
            if seq != self.next_seq[producer]:
                self.errors.append(f"producer {producer}: got {seq}, expected {self.next_seq[producer]}")
            self.next_seq[producer] = seq + 1
            self.received += 1
            if self.outstanding != MAX:
                self.outstanding -= 1
                if self.outstanding < 0:
                    self.errors.append("more on_next than requested")
                if self.outstanding == 0:
                    self._request(self.rng.randint(1, self.batch))
            if self.cancel_after is not None and self.received == self.cancel_after:
                assert self.subscription is not None
                self.subscription.cancel()
                self.done.set()
        finally:
            self.busy.release()

    def on_error(self, error: BaseException) -> None:
        self.errors.append(f"on_error({error!r})")
        self.done.set()

    def on_complete(self) -> None:
        self.completed = True
        self.done.set()


def run_producers(publisher: SubmissionPublisher[Any], producers: int, items: int) -> None:
    def produce(producer: int) -> None:
        for seq in range(items):
            publisher.submit((producer, seq))

    threads = [threading.Thread(target=produce, args=(p,)) for p in range(producers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


@pytest.mark.timeout(240)
def test_four_producers_four_subscribers_nothing_lost_duplicated_or_reordered(core: Core) -> None:
    producers, items = 4, 250_000
    rng = random.Random(7)
    pool = DaemonThreadPool(4)
    publisher: SubmissionPublisher[tuple[int, int]] = core.SubmissionPublisher(pool, 256)
    checkers = [Checker(producers, batch, rng) for batch in (MAX, 256, 64, 1)]
    for checker in checkers:
        publisher.subscribe(checker)
    run_producers(publisher, producers, items)
    publisher.close()
    for checker in checkers:
        assert checker.done.wait(120)
        assert checker.errors == []
        assert checker.completed
        assert checker.next_seq == [items] * producers
        assert checker.received == producers * items


@pytest.mark.timeout(120)
def test_lost_wake_up_regression_each_item_after_the_previous_was_consumed(core: Core) -> None:
    rounds = 10_000
    consumed = threading.Semaphore(0)
    seen: list[int] = []

    def on_item(item: int) -> None:
        seen.append(item)
        consumed.release()

    publisher: SubmissionPublisher[int] = core.SubmissionPublisher(DaemonThreadPool(2), 4)
    future = publisher.consume(on_item)
    errors: list[str] = []

    def produce() -> None:
        for i in range(rounds):
            publisher.submit(i)
            if not consumed.acquire(timeout=20):
                errors.append(f"item {i} was never delivered")
                return
        publisher.close()

    producer = threading.Thread(target=produce)
    producer.start()
    producer.join(100)
    assert errors == []
    assert future.result(timeout=20) is None
    assert seen == list(range(rounds))


@pytest.mark.timeout(120)
@pytest.mark.usefixtures("tiny_switch_interval")
@pytest.mark.parametrize("seed", range(25))
def test_random_interleavings_keep_every_subscriber_consistent(core: Core, seed: int) -> None:
    rng = random.Random(seed)
    producers, items = 2, 300
    pool = DaemonThreadPool(3)
    publisher: SubmissionPublisher[tuple[int, int]] = core.SubmissionPublisher(pool, rng.choice([1, 2, 8, 32]))
    cancelling = Checker(producers, rng.randint(1, 8), rng, cancel_after=rng.randint(1, items))
    checkers = [Checker(producers, rng.choice([1, 3, 16, MAX]), rng) for _ in range(2)]
    for checker in [*checkers, cancelling]:
        publisher.subscribe(checker)
    run_producers(publisher, producers, items)
    publisher.close()
    for checker in checkers:
        assert checker.done.wait(60)
        assert checker.errors == [] and checker.completed
        assert checker.next_seq == [items] * producers
    assert cancelling.done.wait(60)
    assert cancelling.errors == []


@pytest.mark.timeout(60)
@pytest.mark.usefixtures("tiny_switch_interval")
@pytest.mark.parametrize("seed", range(10))
def test_close_races_with_blocked_producers_without_hanging(core: Core, seed: int) -> None:
    rng = random.Random(seed)
    publisher: SubmissionPublisher[tuple[int, int]] = core.SubmissionPublisher(DaemonThreadPool(2), 1)
    slow = Checker(2, 1, rng)
    publisher.subscribe(slow)
    accepted = [0, 0]

    def produce(producer: int) -> None:
        for seq in range(10_000):
            try:
                publisher.submit((producer, seq))
            except ClosedPublisherError:
                return
            accepted[producer] = seq + 1

    threads = [threading.Thread(target=produce, args=(p,)) for p in range(2)]
    for thread in threads:
        thread.start()
    threading.Event().wait(rng.random() / 100)
    publisher.close()
    for thread in threads:
        thread.join(30)
        assert not thread.is_alive()
    assert slow.done.wait(30)
    assert slow.errors == [] and slow.completed
    assert slow.next_seq == accepted
