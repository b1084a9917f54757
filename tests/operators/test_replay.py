"""replay and cache: one upstream subscription, every subscriber from its own position in the buffer."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flowpy import operators
from flowpy.errors import MissingBackpressureError
from flowpy.executors import DaemonThreadPool, direct_executor
from flowpy.flow import Publisher, Subscriber
from flowpy.flowable import ConnectableFlowable, Flowable
from flowpy.operators import ConnectablePublisher
from flowpy.operators._replay import ReplayProcessor
from flowpy.sources import RangePublisher, just
from flowpy.submission import SubmissionPublisher
from flowpy.testing import TestSubscriber
from tests.context_helpers import REQUEST_ID, ContextRecorder, in_context, in_fresh_thread
from tests.operators.conftest import GatedPublisher, Spy, StubSubscription

WAIT = 10.0
MAX = 2**63 - 1


@pytest.fixture
def pool() -> Iterator[DaemonThreadPool]:
    executor = DaemonThreadPool(4, thread_name_prefix="replay")
    try:
        yield executor
    finally:
        executor.shutdown()


def _processor(replayed: ConnectablePublisher[Any]) -> ReplayProcessor[Any]:
    processor = replayed._processor
    assert isinstance(processor, ReplayProcessor)
    return processor


def test_replay_starts_on_connect_and_every_subscriber_gets_every_item() -> None:
    spy = Spy(RangePublisher(0, 5))
    replayed = operators.replay(spy)
    first: TestSubscriber[int] = TestSubscriber()
    second: TestSubscriber[int] = TestSubscriber()
    replayed.subscribe(first)
    replayed.subscribe(second)
    assert spy.subscriptions == []
    replayed.connect()
    first.assert_result(0, 1, 2, 3, 4)
    second.assert_result(0, 1, 2, 3, 4)
    assert len(spy.subscriptions) == 1


def test_replay_late_subscriber_gets_everything_at_its_own_pace() -> None:
    replayed = operators.replay(RangePublisher(0, 10))
    early: TestSubscriber[int] = TestSubscriber(6)
    replayed.subscribe(early)
    replayed.connect()
    late: TestSubscriber[int] = TestSubscriber(2)
    replayed.subscribe(late)
    late.assert_values(0, 1).assert_not_complete()
    late.request(3)
    late.assert_values(0, 1, 2, 3, 4)  # replayed from the buffer: the source is not asked again
    late.request(10)
    late.assert_result(*range(10))  # now it wants more than the early one: it drives the source
    early.assert_values(*range(6)).assert_not_complete()
    early.request(10).assert_result(*range(10))


def test_replay_subscriber_after_the_end_is_replayed_the_buffer_then_completed() -> None:
    replayed = operators.replay(RangePublisher(0, 4))
    replayed.subscribe(TestSubscriber())
    replayed.connect()
    after: TestSubscriber[int] = TestSubscriber(0)
    replayed.subscribe(after)
    after.assert_no_values().assert_not_complete()
    after.request(2).assert_values(0, 1).assert_not_complete()
    after.request(2).assert_result(0, 1, 2, 3)


def test_replay_error_is_replayed_after_the_items() -> None:
    source = SubmissionPublisher[int](executor=direct_executor)
    replayed = operators.replay(source)
    replayed.connect()
    first: TestSubscriber[int] = TestSubscriber()
    replayed.subscribe(first)
    source.submit(1)
    failure = RuntimeError("gone")
    source.close_exceptionally(failure)
    later: TestSubscriber[int] = TestSubscriber()
    replayed.subscribe(later)
    first.assert_failure(failure, 1)
    later.assert_failure(failure, 1)


def test_replay_asks_the_source_for_what_the_most_demanding_subscriber_wants() -> None:
    spy = Spy(RangePublisher(0, 100))
    replayed = operators.replay(spy)
    a: TestSubscriber[int] = TestSubscriber(3)
    b: TestSubscriber[int] = TestSubscriber(5)
    replayed.subscribe(a)
    replayed.subscribe(b)
    replayed.connect()
    assert spy.subscription.total == 5
    a.request(1)
    assert spy.subscription.total == 5  # a's 4th item is already in the buffer
    a.assert_values(0, 1, 2, 3)
    b.assert_values(0, 1, 2, 3, 4)


def test_replay_with_buffer_size_replays_the_last_items_to_late_subscribers() -> None:
    replayed = operators.replay(RangePublisher(0, 10), 3)
    replayed.subscribe(TestSubscriber())
    replayed.connect()
    late: TestSubscriber[int] = TestSubscriber()
    replayed.subscribe(late)
    late.assert_result(7, 8, 9)


def test_replay_with_buffer_size_keeps_fast_subscribers_at_most_that_far_ahead() -> None:
    spy = Spy(RangePublisher(0, 1000))
    replayed = operators.replay(spy, 4)
    fast: TestSubscriber[int] = TestSubscriber()
    slow: TestSubscriber[int] = TestSubscriber(0)
    replayed.subscribe(fast)
    replayed.subscribe(slow)
    replayed.connect()
    fast.assert_values(0, 1, 2, 3)  # the slow one has none: the fast one waits 4 items ahead
    assert spy.subscription.total == 4
    slow.request(1)
    fast.assert_values(0, 1, 2, 3, 4)
    slow.request(2)
    fast.assert_values(0, 1, 2, 3, 4, 5, 6)
    assert spy.subscription.requests == [4, 1, 2]  # a synchronous source has nothing outstanding: no batching
    slow.request(MAX)
    fast.assert_result(*range(1000))
    slow.assert_result(*range(1000))


def test_replay_with_buffer_size_requests_in_batches_while_items_are_outstanding() -> None:
    upstream = StubSubscription()
    processor: ReplayProcessor[int] = ReplayProcessor(8)
    subscriber: TestSubscriber[int] = TestSubscriber()
    processor.subscribe(subscriber)
    processor.on_subscribe(upstream)
    assert upstream.requests == [8]
    for i in range(2):
        processor.on_next(i)
    assert upstream.requests == [8]  # 2 more allowed, 6 outstanding: wait for a batch of 6 (75 % of 8)
    for i in range(2, 6):
        processor.on_next(i)
    assert upstream.requests == [8, 6]
    for i in range(6, 14):
        processor.on_next(i)
    processor.on_complete()
    subscriber.assert_result(*range(14))


def test_replay_with_buffer_size_requests_at_once_when_nothing_is_outstanding() -> None:
    spy = Spy(RangePublisher(0, 100))
    replayed = operators.replay(spy, 8)
    single: TestSubscriber[int] = TestSubscriber(0)
    replayed.subscribe(single)
    replayed.connect()
    for _ in range(5):
        single.request(1)
    assert spy.subscription.requests == [1, 1, 1, 1, 1]
    single.assert_values(0, 1, 2, 3, 4)


@settings(max_examples=40, deadline=None)
@given(
    size=st.integers(min_value=1, max_value=6),
    script=st.lists(st.tuples(st.integers(0, 2), st.integers(1, 7)), min_size=1, max_size=40),
)
def test_replay_with_buffer_size_stays_lossless_and_bounded(size: int, script: list[tuple[int, int]]) -> None:
    spy = Spy(RangePublisher(0, 80))
    replayed = operators.replay(spy, size)
    processor = _processor(replayed)
    subscribers: list[TestSubscriber[int]] = [TestSubscriber(0)]
    replayed.subscribe(subscribers[0])
    replayed.connect()
    for who, n in script:
        if who == 2:  # a late subscriber: replayed the last `size` items at most
            late: TestSubscriber[int] = TestSubscriber(0)
            replayed.subscribe(late)
            subscribers.append(late)
            continue
        subscribers[who % len(subscribers)].request(n)
        assert len(processor._items) <= 3 * size
    for subscriber in subscribers:
        subscriber.request(MAX)
    subscribers[0].assert_result(*range(80))
    for subscriber in subscribers[1:]:
        subscriber.assert_complete()
        first = subscriber.values[0] if subscriber.values else 80
        assert subscriber.values == list(range(first, 80))  # no gap after it joined


def test_replay_subscribers_leaving_keep_the_source_connected() -> None:
    spy = Spy(RangePublisher(0, 10))
    replayed = operators.replay(spy)
    first: TestSubscriber[int] = TestSubscriber(3)
    replayed.subscribe(first)
    replayed.connect()
    first.cancel()
    assert not spy.subscription.cancelled.is_set()
    second: TestSubscriber[int] = TestSubscriber()
    replayed.subscribe(second)
    second.assert_result(*range(10))


def test_replay_invalid_request_fails_only_that_subscriber() -> None:
    replayed = operators.replay(RangePublisher(0, 3))
    bad: TestSubscriber[int] = TestSubscriber(0)
    good: TestSubscriber[int] = TestSubscriber()
    replayed.subscribe(bad)
    replayed.subscribe(good)
    bad.request(0)
    replayed.connect()
    bad.assert_error(ValueError).assert_no_values()
    assert "3.9" in str(bad.errors[0])
    good.assert_result(0, 1, 2)


def test_replay_subscriber_raising_is_cancelled_and_the_others_go_on(caplog: pytest.LogCaptureFixture) -> None:
    class Raises(TestSubscriber[int]):
        def on_next(self, item: int) -> None:
            super().on_next(item)
            raise ValueError("bad subscriber")

    replayed = operators.replay(RangePublisher(0, 5))
    bad = Raises()
    good: TestSubscriber[int] = TestSubscriber()
    replayed.subscribe(bad)
    replayed.subscribe(good)
    with caplog.at_level(logging.ERROR, logger="flowpy"):
        replayed.connect()
    bad.assert_values(0).assert_not_complete()
    good.assert_result(0, 1, 2, 3, 4)
    assert len([r for r in caplog.records if "bad subscriber" in r.getMessage()]) == 1


def test_replay_keyboard_interrupt_ends_every_subscriber_and_cancels_the_source() -> None:
    class Interrupts(TestSubscriber[int]):
        def on_next(self, item: int) -> None:
            super().on_next(item)
            if item == 1:
                raise KeyboardInterrupt

    spy = Spy(RangePublisher(0, 100))
    replayed = operators.replay(spy, 2)  # so that the source has not completed yet
    interrupts = Interrupts()
    other: TestSubscriber[int] = TestSubscriber()
    replayed.subscribe(interrupts)
    replayed.subscribe(other)
    with pytest.raises(KeyboardInterrupt):
        replayed.connect()
    assert spy.subscription.cancelled.is_set()
    other.assert_failure(KeyboardInterrupt, 0, 1)
    later: TestSubscriber[int] = TestSubscriber()
    replayed.subscribe(later)
    later.assert_error(KeyboardInterrupt).assert_no_values()


def test_replay_upstream_sending_more_than_requested_fails_with_missing_backpressure() -> None:
    class Floods(Publisher[int]):
        def subscribe(self, subscriber: Subscriber[int]) -> None:
            self.subscription = StubSubscription()
            subscriber.on_subscribe(self.subscription)
            for i in range(3):
                subscriber.on_next(i)

    source = Floods()
    replayed = operators.replay(source)
    subscriber: TestSubscriber[int] = TestSubscriber(1)
    replayed.subscribe(subscriber)
    replayed.connect()
    subscriber.assert_failure(MissingBackpressureError, 0)
    assert str(subscriber.errors[0]) == "upstream sent more than the 1 items requested (rule 1.1)"
    assert source.subscription.cancels == 1


def test_replay_second_upstream_is_cancelled() -> None:
    processor: ReplayProcessor[int] = ReplayProcessor()
    first, second = StubSubscription(), StubSubscription()
    processor.on_subscribe(first)
    processor.on_subscribe(second)
    assert second.cancels == 1 and first.cancels == 0


def test_replay_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match=r"^buffer_size must be positive, got 0$"):
        operators.replay(just(1), 0)
    with pytest.raises(TypeError, match=r"^buffer_size must be an int, got 1.5$"):
        operators.replay(just(1), 1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^subscriber must not be None \(rule 1\.9\)$"):
        operators.replay(just(1)).subscribe(None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^item must not be None \(rule 2\.13\)$"):
        ReplayProcessor[int]().on_next(None)  # type: ignore[arg-type]


def test_cache_subscribes_once_with_the_first_subscriber_and_requests_everything() -> None:
    spy = Spy(RangePublisher(0, 5))
    cached = operators.cache(spy)
    assert spy.subscriptions == []
    first: TestSubscriber[int] = TestSubscriber(2)
    cached.subscribe(first)
    assert spy.subscription.requests == [MAX]
    first.assert_values(0, 1)
    second: TestSubscriber[int] = TestSubscriber()
    cached.subscribe(second)
    second.assert_result(0, 1, 2, 3, 4)
    first.request(10).assert_result(0, 1, 2, 3, 4)
    assert len(spy.subscriptions) == 1


def test_cache_never_cancels_its_source() -> None:
    source = SubmissionPublisher[int](executor=direct_executor)
    cached = operators.cache(source)
    only: TestSubscriber[int] = TestSubscriber()
    cached.subscribe(only)
    source.submit(1)
    only.cancel()
    source.submit(2)
    source.close()
    later: TestSubscriber[int] = TestSubscriber()
    cached.subscribe(later)
    later.assert_result(1, 2)


def test_flowable_replay_and_cache() -> None:
    replayed = Flowable.range(0, 3).replay(2)
    assert isinstance(replayed, ConnectableFlowable)
    result = replayed.test()
    replayed.connect()
    result.assert_result(0, 1, 2)
    replayed.test().assert_result(1, 2)
    cached = Flowable.range(0, 3).map(lambda x: x * 10).cache()
    cached.test().assert_result(0, 10, 20)
    cached.test().assert_result(0, 10, 20)


# --- Threads and contexts ---------------------------------------------------------------


@pytest.mark.timeout(60)
@pytest.mark.parametrize("size", [None, 3])
@pytest.mark.parametrize("run", range(8))
def test_replay_subscribers_on_other_threads_receive_every_item_in_order(
    pool: DaemonThreadPool, tiny_switch_interval: None, size: int | None, run: int
) -> None:
    count = 2000
    replayed = operators.replay(Flowable.from_iterable(range(count), executor=pool), size)
    subscribers = [TestSubscriber[int](0) for _ in range(3)]
    for subscriber in subscribers:
        replayed.subscribe(subscriber)
    replayed.connect()

    def consume(subscriber: TestSubscriber[int]) -> None:
        requested = 0
        while requested < count:
            subscriber.request(7)
            requested += 7
            subscriber.await_count(min(requested, count), WAIT)

    threads = [threading.Thread(target=consume, args=(s,)) for s in subscribers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT * 3)
    for subscriber in subscribers:
        subscriber.await_done(WAIT).assert_result(*range(count))


def test_replay_signals_run_in_the_context_of_each_subscriber(pool: DaemonThreadPool) -> None:
    source = SubmissionPublisher[int](executor=pool)
    replayed = operators.replay(source)
    first, second = ContextRecorder(MAX), ContextRecorder(MAX)
    in_context("request-1", replayed.subscribe, first)
    replayed.connect()

    def produce() -> None:
        REQUEST_ID.set("producer")
        for i in range(10):
            source.submit(i)
        source.close()

    in_fresh_thread(produce)
    assert first.done.wait(WAIT)
    in_context("request-2", replayed.subscribe, second)
    assert second.done.wait(WAIT)
    assert first.values() == {"request-1"}
    assert second.values() == {"request-2"}
    assert second.items == list(range(10))


def test_replay_upstream_arriving_as_the_processor_ends_is_cancelled() -> None:
    source = GatedPublisher(lambda processor: processor.on_complete(), slot="_upstream")  # ends in the window
    replayed = operators.replay(source)
    subscriber: TestSubscriber[int] = TestSubscriber()
    replayed.subscribe(subscriber)
    replayed.connect()
    subscriber.assert_result()
    assert source.subscription.cancels == 1  # not kept by a processor that ended
    assert source.subscription.requests == []
