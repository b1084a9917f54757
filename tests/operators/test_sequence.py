"""SequenceStage, the machinery of the resubscribing operators, seen through ``retry``, ``repeat`` and ``concat_map``.

Demand carried from one attempt to the next, the trampoline, late and
second subscriptions, invalid requests, cancellation, raising subscribers,
threads and the subscribe-time context.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from flowpy import operators
from flowpy.executors import DaemonThreadPool
from flowpy.flow import Publisher, Subscriber
from flowpy.flowable import Flowable
from flowpy.sources import IterablePublisher, error, just
from flowpy.testing import TestSubscriber
from tests.context_helpers import MISSING, REQUEST_ID, in_context, in_fresh_thread
from tests.operators.conftest import Attempts, StubSubscription, then_fail

WAIT = 10.0


class Held(Publisher[Any]):
    """Keeps each subscriber; the test signals it by hand."""

    def __init__(self) -> None:
        self.subscribers: list[Subscriber[Any]] = []

    def subscribe(self, subscriber: Subscriber[Any]) -> None:
        self.subscribers.append(subscriber)


def test_sequence_demand_not_met_by_a_failed_attempt_is_requested_from_the_next() -> None:
    source = Attempts(then_fail([1, 2], RuntimeError("first")), just(1, 2, 3, 4, 5, 6))
    subscriber: TestSubscriber[int] = TestSubscriber(initial_request=5)
    operators.retry(source, 1).subscribe(subscriber)
    subscriber.assert_values(1, 2, 1, 2, 3).assert_not_complete()
    assert [s.requests for s in source.subscriptions] == [[5], [3]]
    subscriber.request(1).assert_values(1, 2, 1, 2, 3, 4)
    assert source.subscriptions[1].requests == [3, 1]


def test_sequence_request_made_between_attempts_goes_to_the_next_one() -> None:
    held = Held()
    subscriber: TestSubscriber[int] = TestSubscriber(initial_request=2)
    operators.retry(held, 1).subscribe(subscriber)
    first = held.subscribers[0]
    first.on_subscribe(StubSubscription())
    first.on_error(RuntimeError("no items"))
    subscriber.request(3)  # no attempt is subscribed yet: kept for the next
    second = held.subscribers[1]
    stub = StubSubscription()
    second.on_subscribe(stub)
    assert stub.requests == [5]


def test_sequence_second_subscription_of_one_attempt_is_cancelled() -> None:
    held = Held()
    operators.repeat(held, 2).subscribe(TestSubscriber())
    attempt = held.subscribers[0]
    kept, extra = StubSubscription(), StubSubscription()
    attempt.on_subscribe(kept)
    attempt.on_subscribe(extra)
    assert (kept.cancels, extra.cancels) == (0, 1)
    assert extra.requests == []


def test_sequence_signals_of_an_attempt_after_its_end_are_ignored() -> None:
    held = Held()
    subscriber: TestSubscriber[int] = TestSubscriber()
    operators.retry(held, 1).subscribe(subscriber)
    first = held.subscribers[-1]
    first.on_subscribe(StubSubscription())
    first.on_error(RuntimeError("first"))
    first.on_next(99)  # rule 1.7 broken upstream: the attempt is over
    first.on_complete()
    second = held.subscribers[-1]
    assert second is not first
    second.on_subscribe(StubSubscription())
    second.on_next(1)
    subscriber.assert_values(1).assert_not_complete().assert_no_errors()


def test_sequence_invalid_request_fails_at_once_and_is_not_retried() -> None:
    source = Attempts(just(1, 2, 3))
    subscriber: TestSubscriber[int] = TestSubscriber(initial_request=1)
    operators.retry(source).subscribe(subscriber)
    subscriber.request(0)
    subscriber.assert_values(1).assert_error(ValueError)
    assert "rule 3.9" in str(subscriber.errors[0])
    assert source.count == 1
    assert source.subscription.cancelled.is_set()


def test_sequence_invalid_request_inside_on_next_is_signalled_after_it_returns() -> None:
    class RequestsZero(TestSubscriber[int]):
        def on_next(self, item: int) -> None:
            super().on_next(item)
            self.request(0)

    subscriber = RequestsZero(initial_request=1)
    operators.repeat(just(1, 2), 3).subscribe(subscriber)
    subscriber.assert_values(1).assert_error(ValueError)  # no overlap: TestSubscriber records it as a violation


def test_sequence_cancel_between_attempts_stops_resubscribing() -> None:
    held = Held()
    subscriber: TestSubscriber[int] = TestSubscriber()
    operators.retry(held).subscribe(subscriber)
    first = held.subscribers[0]
    first.on_subscribe(StubSubscription())
    subscriber.cancel()
    first.on_error(RuntimeError("after the cancel"))
    assert len(held.subscribers) == 1
    subscriber.assert_no_errors().assert_not_complete()


def test_sequence_cancel_cancels_the_current_attempt() -> None:
    source = Attempts(then_fail([], RuntimeError("first")), just(1, 2, 3))
    subscriber: TestSubscriber[int] = TestSubscriber(initial_request=1)
    operators.retry(source).subscribe(subscriber)
    subscriber.cancel()
    assert source.subscriptions[1].cancelled.is_set()
    subscriber.assert_values(1).assert_not_complete()


@pytest.mark.timeout(60)
def test_sequence_a_million_resubscriptions_to_a_source_that_ends_at_once_use_constant_stack() -> None:
    # Each attempt ends inside subscribe(): recursion would overflow long before the end.
    Flowable.just(1).repeat(1_000_000).test().assert_value_count(1_000_000).assert_complete()
    failure = RuntimeError("always")
    Flowable.error(failure).retry(1_000_000).test().assert_error(failure).assert_no_values()


@pytest.mark.timeout(60)
def test_sequence_a_million_retry_when_resubscriptions_use_constant_stack() -> None:
    failure = RuntimeError("always")
    subscriber = Flowable.error(failure).retry_when(lambda errors: errors.take(1_000_000)).test()
    subscriber.assert_complete().assert_no_values()


@pytest.mark.timeout(60)
def test_sequence_a_million_synchronous_inners_of_concat_map_use_constant_stack() -> None:
    subscriber = Flowable.range(0, 1_000_000).concat_map(lambda x: just(x)).test()
    subscriber.assert_value_count(1_000_000).assert_complete()


def test_sequence_resubscribes_in_the_subscriber_context_whatever_thread_failed() -> None:
    seen: list[str] = []
    attempts = iter(range(3))

    class Recording(Publisher[int]):
        def subscribe(self, subscriber: Subscriber[int]) -> None:
            seen.append(REQUEST_ID.get(MISSING))
            attempt = next(attempts)
            if attempt < 2:
                # The failure comes from a thread whose context has another value.
                in_fresh_thread(lambda: (REQUEST_ID.set("other"), error(RuntimeError("x")).subscribe(subscriber)))
            else:
                just(7).subscribe(subscriber)

    subscriber: TestSubscriber[int] = TestSubscriber()
    in_context("request-1", operators.retry(Recording(), 5).subscribe, subscriber)
    subscriber.assert_result(7)
    assert seen == ["request-1", "request-1", "request-1"]


def test_sequence_downstream_raising_in_on_next_ends_the_stage_without_resubscribing() -> None:
    class Raising(TestSubscriber[int]):
        def on_next(self, item: int) -> None:
            super().on_next(item)
            raise RuntimeError("subscriber bug")

    source = Attempts(just(1, 2))
    subscriber = Raising()
    operators.repeat(source, 5).subscribe(subscriber)  # the source reports the raise (rule 2.13)
    subscriber.assert_values(1).assert_not_complete().assert_no_errors()
    assert source.count == 1
    assert source.subscription.cancelled.is_set()


def test_sequence_keyboard_interrupt_in_on_next_propagates_and_ends_the_stage() -> None:
    class Interrupted(TestSubscriber[int]):
        def on_next(self, item: int) -> None:
            super().on_next(item)
            raise KeyboardInterrupt

    source = Attempts(just(1, 2))
    subscriber = Interrupted()
    with pytest.raises(KeyboardInterrupt):
        operators.retry(source, 5).subscribe(subscriber)
    subscriber.assert_values(1).assert_not_complete().assert_no_errors()
    assert source.count == 1


@pytest.mark.timeout(60)
@pytest.mark.parametrize("run", range(20))
def test_sequence_requests_from_threads_racing_resubscriptions_deliver_exactly_the_demand(
    run: int, tiny_switch_interval: None
) -> None:
    pool = DaemonThreadPool(2, thread_name_prefix="sequence-race")
    try:
        # Every attempt delivers three items on the pool, then fails; 40 items in all.
        failing = operators.concat(IterablePublisher(range(3), executor=pool), error(RuntimeError("again")))
        subscriber: TestSubscriber[int] = TestSubscriber(initial_request=0)
        operators.take(operators.retry(failing), 40).subscribe(subscriber)
        threads = [threading.Thread(target=lambda: [subscriber.request(1) for _ in range(10)]) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        subscriber.await_done(WAIT).assert_value_count(40).assert_complete()
        assert subscriber.values == [0, 1, 2] * 13 + [0]
    finally:
        pool.shutdown()
