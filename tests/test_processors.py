"""Tests of flowpy.processors: MulticastProcessor and TransformProcessor.

Each test runs once. MulticastProcessor is the same code whichever core runs.
TransformProcessor is a SubmissionPublisher on the core this process chose
(``flowpy.implementation``); the free-threaded CI job runs the whole core
suite once per core, each in a process of its own.
"""

from __future__ import annotations

import logging
import random
import threading
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flowpy.errors import DuplicateSubscriptionError, MissingBackpressureError
from flowpy.executors import DaemonThreadPool, direct_executor
from flowpy.flow import Processor
from flowpy.processors import MulticastProcessor, TransformProcessor
from flowpy.sources import IterablePublisher, RangePublisher
from flowpy.submission import SubmissionPublisher
from flowpy.subscribers import LambdaSubscriber, collect, iterate
from tests.operators.conftest import StubSubscription
from tests.sources_helpers import WAIT, SpyPublisher, SyncRecorder, make_recorder, wait_done
from tests.support import GatedSlot, Recorder

# --- MulticastProcessor: lock step and prefetch ---------------------------------------


def connected(prefetch: int = 8) -> tuple[MulticastProcessor[Any], SpyPublisher]:
    processor: MulticastProcessor[Any] = MulticastProcessor(prefetch)
    upstream = SpyPublisher()
    upstream.subscribe(processor)
    return processor, upstream


def feed(upstream: SpyPublisher, *items: Any) -> None:
    for item in items:
        upstream.subscriber.on_next(item)  # type: ignore[union-attr]


def test_multicast_requests_prefetch_from_upstream_on_subscribe() -> None:
    _, upstream = connected(prefetch=8)
    assert upstream.requests == [8]


def test_multicast_slowest_subscriber_paces_the_others() -> None:
    processor, upstream = connected()
    fast, slow = make_recorder(initial=5), make_recorder(initial=2)
    processor.subscribe(fast)
    processor.subscribe(slow)
    feed(upstream, *range(5))
    assert fast.items == slow.items == [0, 1]
    slow.request(3)
    assert fast.items == slow.items == [0, 1, 2, 3, 4]
    assert fast.violations == slow.violations == []


def test_multicast_replenishes_three_quarters_of_the_prefetch_once_delivered() -> None:
    processor, upstream = connected(prefetch=8)
    subscriber = make_recorder(initial=100)
    processor.subscribe(subscriber)
    feed(upstream, *range(5))
    assert upstream.requests == [8]
    feed(upstream, 5)
    assert upstream.requests == [8, 6]
    feed(upstream, *range(6, 14))
    assert upstream.requests == [8, 6, 6]
    assert subscriber.items == list(range(14))


def test_multicast_queues_items_until_a_subscriber_requests() -> None:
    processor, upstream = connected(prefetch=4)
    feed(upstream, "a", "b")
    subscriber = make_recorder()
    processor.subscribe(subscriber)
    assert subscriber.items == []
    subscriber.request(5)
    assert subscriber.items == ["a", "b"]


def test_multicast_terminal_signal_follows_the_queued_items() -> None:
    processor, upstream = connected()
    subscriber = make_recorder(initial=1)
    processor.subscribe(subscriber)
    feed(upstream, 1, 2, 3)
    upstream.subscriber.on_complete()  # type: ignore[union-attr]
    assert subscriber.items == [1] and not subscriber.done.is_set()
    subscriber.request(2)
    assert subscriber.items == [1, 2, 3] and subscriber.completed


def test_multicast_error_without_queued_items_reaches_subscribers_without_demand() -> None:
    processor, upstream = connected()
    first, second = make_recorder(), make_recorder()
    processor.subscribe(first)
    processor.subscribe(second)
    failure = OSError("upstream broke")
    upstream.subscriber.on_error(failure)  # type: ignore[union-attr]
    assert first.error is failure and second.error is failure


@pytest.mark.parametrize("failure", [None, OSError("gone")])
def test_multicast_late_subscriber_gets_the_terminal_signal(failure: BaseException | None) -> None:
    processor, upstream = connected()
    if failure is None:
        upstream.subscriber.on_complete()  # type: ignore[union-attr]
    else:
        upstream.subscriber.on_error(failure)  # type: ignore[union-attr]
    processor.subscribe(make_recorder())  # the first one takes the terminal
    late = make_recorder()
    processor.subscribe(late)
    assert late.kinds() == ["on_subscribe", "on_error" if failure else "on_complete"]
    assert late.error is failure


def test_multicast_late_subscriber_joins_from_the_next_item() -> None:
    processor, upstream = connected()
    early = make_recorder(initial=10)
    processor.subscribe(early)
    feed(upstream, 0, 1)
    late = make_recorder(initial=10)
    processor.subscribe(late)
    feed(upstream, 2, 3)
    assert early.items == [0, 1, 2, 3]
    assert late.items == [2, 3]


@pytest.mark.parametrize(
    "make",
    [lambda: MulticastProcessor(8), lambda: TransformProcessor(abs, executor=direct_executor)],
    ids=["multicast", "transform"],
)
def test_processor_last_cancel_after_connection_cancels_upstream_and_ends(make: Any) -> None:
    processor = make()
    upstream = SpyPublisher()
    upstream.subscribe(processor)
    first, second = make_recorder(initial=1), make_recorder(initial=1)
    processor.subscribe(first)
    processor.subscribe(second)
    first.cancel()
    assert not upstream.cancelled.is_set()
    second.cancel()
    assert upstream.cancelled.is_set()
    later = make_recorder()
    processor.subscribe(later)
    assert later.done.wait(WAIT) and later.completed, "a subscriber after the end completes at once"


def test_multicast_cancel_before_connection_keeps_it_open() -> None:
    processor: MulticastProcessor[int] = MulticastProcessor(4)
    leaving = make_recorder()
    processor.subscribe(leaving)
    leaving.cancel()
    staying = make_recorder(initial=10)
    processor.subscribe(staying)
    RangePublisher(0, 3).subscribe(processor)
    assert staying.items == [0, 1, 2] and staying.completed


def test_multicast_leaving_slow_subscriber_unblocks_the_others() -> None:
    processor, upstream = connected()
    fast, slow = make_recorder(initial=5), make_recorder()
    processor.subscribe(fast)
    processor.subscribe(slow)
    feed(upstream, 0, 1, 2)
    assert fast.items == []
    slow.cancel()
    assert fast.items == [0, 1, 2]


def test_multicast_invalid_request_fails_only_that_subscriber() -> None:
    processor, upstream = connected()
    good, bad = make_recorder(initial=5), make_recorder(initial=5)
    processor.subscribe(good)
    processor.subscribe(bad)
    bad.subscription.request(0)  # type: ignore[union-attr]
    assert isinstance(bad.error, ValueError)
    with pytest.raises(ValueError, match=r"^non-positive subscription request: n must be > 0 \(rule 3\.9\), got 0$"):
        raise bad.error
    feed(upstream, 1, 2)
    assert good.items == [1, 2] and bad.items == []
    assert not upstream.cancelled.is_set()


def test_multicast_item_queued_while_a_pass_runs_reaches_the_subscriber_that_joined_before_it() -> None:
    # A pass serves the subscribers read as it was claimed. Here the pass of an
    # invalid request, made on another thread, is held in the failed one's
    # on_error, before it looks at the queue; meanwhile a subscriber joins and
    # then an item arrives. The item came after the subscriber joined, so it
    # must reach it: the running pass may not hand it to the old subscribers only.
    processor, upstream = connected()
    entered, gate = threading.Event(), threading.Event()

    class HeldOnError(SyncRecorder):
        def on_error(self, error: BaseException) -> None:
            entered.set()
            gate.wait(WAIT)
            super().on_error(error)

    first, failing = make_recorder(initial=5), HeldOnError(1)
    processor.subscribe(first)
    processor.subscribe(failing)
    requester = threading.Thread(target=failing.request, args=(0,))
    requester.start()
    assert entered.wait(WAIT)
    joined = make_recorder(initial=5)
    processor.subscribe(joined)  # the running pass goes round again for it
    feed(upstream, 1)
    gate.set()
    requester.join(WAIT)
    assert not requester.is_alive()
    assert isinstance(failing.error, ValueError)
    assert first.items == joined.items == [1]
    assert first.violations == joined.violations == []


def test_multicast_failing_subscriber_is_dropped_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    processor, upstream = connected()

    class Failing(SyncRecorder):
        def on_next(self, item: Any) -> None:
            raise RuntimeError("cannot take it")

    good, bad = make_recorder(initial=5), Failing(5)
    processor.subscribe(good)
    processor.subscribe(bad)
    with caplog.at_level(logging.ERROR, logger="flowpy"):
        feed(upstream, 1, 2)
    assert good.items == [1, 2]
    assert "cannot take it" in caplog.text and "rule 2.13" in caplog.text
    assert processor.number_of_subscribers == 1


def test_multicast_second_upstream_is_cancelled() -> None:
    processor, _ = connected()
    second = SpyPublisher()
    second.subscribe(processor)
    assert second.cancelled.is_set() and second.requests == []


def test_multicast_upstream_overflow_signals_missing_backpressure() -> None:
    processor, upstream = connected(prefetch=2)
    subscriber = make_recorder()
    processor.subscribe(subscriber)
    feed(upstream, 1, 2, 3)
    assert upstream.cancelled.is_set()
    subscriber.request(5)
    assert subscriber.items == [1, 2]
    assert isinstance(subscriber.error, MissingBackpressureError)
    assert str(subscriber.error) == "upstream sent more than the 2 items requested (rule 1.1)"


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda p: p.subscribe(None), r"^subscriber must not be None \(rule 1\.9\)$"),
        (lambda p: p.on_subscribe(None), r"^subscription must not be None \(rule 2\.13\)$"),
        (lambda p: p.on_next(None), r"^item must not be None \(rule 2\.13\)$"),
        (lambda p: p.on_error(None), r"^error must not be None \(rule 2\.13\)$"),
    ],
)
def test_multicast_none_argument_raises_type_error(call: Any, message: str) -> None:
    with pytest.raises(TypeError, match=message):
        call(MulticastProcessor())


@pytest.mark.parametrize(
    ("prefetch", "kind", "message"),
    [(0, ValueError, r"^prefetch must be positive, got 0$"), ("8", TypeError, r"^prefetch must be an int, got '8'$")],
)
def test_multicast_invalid_prefetch_raises(prefetch: Any, kind: type, message: str) -> None:
    with pytest.raises(kind, match=message):
        MulticastProcessor(prefetch)


def test_multicast_request_from_on_next_keeps_recursion_depth_one() -> None:
    processor: MulticastProcessor[int] = MulticastProcessor(16)
    nesting = [0, 0]

    def on_next(item: int) -> None:
        nesting[0] += 1
        nesting[1] = max(nesting)
        nesting[0] -= 1

    first = LambdaSubscriber(on_next, prefetch=1)
    second = make_recorder(initial=1, per_item=1)
    processor.subscribe(first)
    processor.subscribe(second)
    RangePublisher(0, 5000).subscribe(processor)
    assert second.items == list(range(5000)) and second.completed
    assert nesting[1] == 1


@settings(max_examples=60, deadline=None)
@given(
    prefetch=st.integers(min_value=1, max_value=16),
    count=st.integers(min_value=0, max_value=80),
    plans=st.lists(st.lists(st.integers(min_value=1, max_value=9), min_size=1, max_size=12), min_size=1, max_size=4),
)
def test_multicast_any_request_pattern_delivers_the_same_prefix_in_lock_step(
    prefetch: int, count: int, plans: list[list[int]]
) -> None:
    processor: MulticastProcessor[int] = MulticastProcessor(prefetch)
    subscribers = [make_recorder() for _ in plans]
    for subscriber in subscribers:
        processor.subscribe(subscriber)
    RangePublisher(0, count).subscribe(processor)
    for step in range(max(len(plan) for plan in plans)):
        for subscriber, plan in zip(subscribers, plans, strict=True):
            if step < len(plan) and not subscriber.done.is_set():
                subscriber.request(plan[step])
    least = min(s.requested for s in subscribers)
    for subscriber in subscribers:
        assert subscriber.violations == []
        assert subscriber.items == list(range(min(count, least)))
        assert subscriber.completed == (count <= least)


# --- MulticastProcessor: concurrency ----------------------------------------------------


@pytest.mark.timeout(90)
def test_multicast_eight_subscribers_of_random_speeds_get_identical_sequences() -> None:
    """100,000 items to 8 subscribers with random batch sizes, half of them on their own threads."""
    total = 100_000
    rng = random.Random(8)
    processor: MulticastProcessor[int] = MulticastProcessor(64)
    sequences: list[list[int]] = [[] for _ in range(8)]
    done = [threading.Event() for _ in range(4)]
    for index in range(4):
        processor.subscribe(
            LambdaSubscriber(sequences[index].append, None, done[index].set, prefetch=rng.randint(1, 64))
        )
    iterators = [iterate(processor, prefetch=rng.randint(1, 64), timeout=WAIT) for _ in range(4)]

    def drain(iterator: Any, into: list[int], seed: int) -> None:
        pace = random.Random(seed)
        for item in iterator:
            into.append(item)
            if pace.random() < 0.01:
                sum(range(pace.randint(0, 2000)))  # an uneven amount of work

    threads = [
        threading.Thread(target=drain, args=(iterator, sequences[4 + index], index))
        for index, iterator in enumerate(iterators)
    ]
    for thread in threads:
        thread.start()
    IterablePublisher(range(total), batch_size=256).subscribe(processor)
    for thread in threads:
        thread.join(60)
        assert not thread.is_alive()
    for event in done:
        assert event.wait(WAIT)
    expected = list(range(total))
    for sequence in sequences:
        assert sequence == expected


class Visitor(SyncRecorder):
    """Requests ``initial``, then ``per_item`` per item; ``enough`` is set after ``target``
    items or at the terminal signal, so the visiting thread knows when to leave."""

    def __init__(self, initial: int, per_item: int, target: int) -> None:
        self.enough = threading.Event()
        self.target = target
        self.per_item = per_item
        super().__init__(initial, self._on_item)

    def _on_item(self, item: int) -> None:
        if len(self.items) >= self.target:
            self.enough.set()
        elif self.per_item:
            self.request(self.per_item)

    def on_error(self, error: BaseException) -> None:
        super().on_error(error)
        self.enough.set()

    def on_complete(self) -> None:
        super().on_complete()
        self.enough.set()


@pytest.mark.timeout(90)
@pytest.mark.usefixtures("tiny_switch_interval")
def test_multicast_subscribers_coming_and_going_never_skip_items() -> None:
    """Under tiny switch intervals: an anchor sees everything; each visitor a gap-free run."""
    total = 20_000
    processor: MulticastProcessor[int] = MulticastProcessor(32)
    anchor = collect(processor)
    visitors: list[Visitor] = []
    finished = threading.Event()
    failures: list[BaseException] = []

    def visit(seed: int) -> None:
        try:
            wander(random.Random(seed))
        except BaseException as exc:
            failures.append(exc)

    def wander(rng: random.Random) -> None:
        while not finished.is_set():
            initial = rng.randint(1, 50)
            visitor = Visitor(initial, rng.choice([0, 1, 2]), rng.randint(1, initial))
            visitors.append(visitor)
            processor.subscribe(visitor)
            if rng.random() < 0.3:
                visitor.cancel()  # leave at once, from this thread
                continue
            assert visitor.enough.wait(WAIT), "a visitor with demand got nothing"
            visitor.cancel()
            if visitor.done.is_set():
                return

    threads = [threading.Thread(target=visit, args=(seed,)) for seed in range(3)]
    for thread in threads:
        thread.start()
    IterablePublisher(range(total), batch_size=64).subscribe(processor)
    assert anchor.result(timeout=60) == list(range(total))
    finished.set()
    for thread in threads:
        thread.join(WAIT)
        assert not thread.is_alive()
    assert failures == []
    assert len(visitors) > 3
    for visitor in visitors:
        assert visitor.violations == []
        if visitor.items:
            first = visitor.items[0]
            assert visitor.items == list(range(first, first + len(visitor.items)))


# --- TransformProcessor ---------------------------------------------------------------------


def test_transform_is_a_submission_publisher_and_a_processor() -> None:
    processor: TransformProcessor[int, str] = TransformProcessor(str)
    assert isinstance(processor, SubmissionPublisher) and isinstance(processor, Processor)
    processor.close()


def test_transform_publishes_fn_of_each_item() -> None:
    processor: TransformProcessor[int, str] = TransformProcessor(lambda n: f"<{n}>")
    result = collect(processor)
    RangePublisher(0, 4).subscribe(processor)
    assert result.result(timeout=WAIT) == ["<0>", "<1>", "<2>", "<3>"]


def test_transform_requests_one_item_at_a_time_once_it_has_a_subscriber() -> None:
    processor: TransformProcessor[int, int] = TransformProcessor(abs, executor=direct_executor)
    upstream = SpyPublisher()
    upstream.subscribe(processor)
    assert upstream.requests == []
    subscriber = make_recorder(initial=10)
    processor.subscribe(subscriber)
    assert upstream.requests == [1]
    feed(upstream, -1, -2)
    assert upstream.requests == [1, 1, 1]
    assert subscriber.items == [1, 2]
    processor.close()


def test_transform_fn_error_cancels_upstream_and_fails_downstream() -> None:
    def invert(n: int) -> float:
        return 1 / n

    processor: TransformProcessor[int, float] = TransformProcessor(invert, executor=direct_executor)
    upstream = SpyPublisher()
    upstream.subscribe(processor)
    subscriber = make_recorder(initial=10)
    processor.subscribe(subscriber)
    feed(upstream, 2, 0, 5)
    assert upstream.cancelled.is_set()
    assert subscriber.items == [0.5]
    assert isinstance(subscriber.error, ZeroDivisionError)


def test_transform_fn_returning_none_fails_downstream() -> None:
    processor: TransformProcessor[int, None] = TransformProcessor(lambda n: None, executor=direct_executor)
    upstream = SpyPublisher()
    upstream.subscribe(processor)
    subscriber = make_recorder(initial=1)
    processor.subscribe(subscriber)
    feed(upstream, 7)
    assert upstream.cancelled.is_set()
    with pytest.raises(TypeError, match=r"^fn must not return None \(rule 2\.13\), got None for 7$"):
        raise subscriber.error  # type: ignore[misc]


def test_transform_upstream_error_reaches_subscribers() -> None:
    processor: TransformProcessor[int, int] = TransformProcessor(abs, executor=direct_executor)
    subscriber = make_recorder(initial=1)
    processor.subscribe(subscriber)
    failure = ConnectionError("upstream down")
    processor.on_error(failure)
    assert subscriber.error is failure
    assert processor.closed_exception is failure


def test_transform_subscribers_are_the_users_objects() -> None:
    processor: TransformProcessor[int, int] = TransformProcessor(abs, executor=direct_executor)
    subscriber = make_recorder()
    processor.subscribe(subscriber)
    assert processor.subscribers == [subscriber]
    assert processor.is_subscribed(subscriber)
    processor.subscribe(subscriber)
    assert isinstance(subscriber.error, DuplicateSubscriptionError)
    processor.close()


def test_transform_equal_subscriber_is_a_duplicate_and_wrappers_are_not_equal_to_it() -> None:
    class _Keyed(SyncRecorder):
        def __init__(self, key: str) -> None:
            super().__init__()
            self.key = key

        def __eq__(self, other: object) -> bool:
            return isinstance(other, _Keyed) and other.key == self.key

        __hash__ = None  # type: ignore[assignment]  # unhashable, as equal-by-value objects often are

    processor: TransformProcessor[int, int] = TransformProcessor(abs, executor=direct_executor)
    first, twin = _Keyed("a"), _Keyed("a")
    processor.subscribe(first)
    assert processor.is_subscribed(twin)  # equals, as the JDK's isSubscribed uses equals()
    processor.subscribe(twin)
    assert isinstance(first.error, DuplicateSubscriptionError)
    assert twin.subscription is None  # a duplicate gets no on_subscribe
    assert all(s is not first for s in processor._wrappers)
    assert all(type(s).__eq__ is object.__eq__ for s in processor._wrappers)
    assert not processor.is_subscribed(first)  # the duplicate ended it
    processor.subscribe(_Keyed("a"))  # after it left, an equal one may join again
    assert processor.number_of_subscribers == 1
    processor.close()


def test_transform_second_upstream_is_cancelled() -> None:
    processor: TransformProcessor[int, int] = TransformProcessor(abs, executor=direct_executor)
    SpyPublisher().subscribe(processor)
    second = SpyPublisher()
    second.subscribe(processor)
    assert second.cancelled.is_set()
    processor.close()


@pytest.mark.timeout(30)
def test_transform_full_buffer_blocks_the_upstream_until_the_subscriber_requests() -> None:
    pool = DaemonThreadPool(2)
    processor: TransformProcessor[int, int] = TransformProcessor(abs, executor=pool, max_buffer_capacity=2)
    upstream = SpyPublisher()
    upstream.subscribe(processor)
    subscriber = make_recorder()
    processor.subscribe(subscriber)
    upstream.wait_requested(1)
    fed = []

    def produce() -> None:
        for value in range(10):
            fed.append(value)
            upstream.subscriber.on_next(value)  # type: ignore[union-attr]
        upstream.subscriber.on_complete()  # type: ignore[union-attr]

    producer = threading.Thread(target=produce)
    producer.start()
    upstream.wait_requested(3)  # two items buffered, the third one asked for
    producer.join(0.2)  # room for a wrongly unblocked producer to run ahead; no timing decides the result
    assert producer.is_alive() and len(fed) <= 3
    assert upstream.total_requested == 3
    subscriber.request(100)
    producer.join(WAIT)
    wait_done(subscriber)
    assert subscriber.items == list(range(10)) and subscriber.completed
    pool.shutdown()


def test_transform_invalid_arguments_raise() -> None:
    with pytest.raises(TypeError, match=r"^fn must be callable, got 3$"):
        TransformProcessor(3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^executor must not be None; leave it out to use the default executor$"):
        TransformProcessor(abs, executor=None)  # type: ignore[arg-type]


def test_transform_refused_delivery_fails_downstream_and_cancels_upstream() -> None:
    from tests.support import RejectingExecutor

    executor = RejectingExecutor(1, RuntimeError("pool is shut down"))  # on_subscribe only
    processor: TransformProcessor[int, int] = TransformProcessor(abs, executor=executor)
    upstream = SpyPublisher()
    upstream.subscribe(processor)
    subscriber = make_recorder(initial=10)
    processor.subscribe(subscriber)
    executor.inner.run_all()
    feed(upstream, -1)  # the task that would deliver it is refused: that subscriber fails
    assert subscriber.kinds() == ["on_subscribe", "on_error"] and subscriber.error is executor.error
    assert upstream.cancelled.is_set()  # its last subscriber left
    assert processor.is_closed


def test_transform_a_subscriber_leaving_before_another_is_set_up_keeps_the_upstream() -> None:
    from tests.support import ManualExecutor

    executor = ManualExecutor()
    processor: TransformProcessor[int, int] = TransformProcessor(abs, executor=executor)
    upstream = SpyPublisher()
    upstream.subscribe(processor)
    first, second = make_recorder(initial=10), make_recorder(initial=10)
    processor.subscribe(first)
    processor.subscribe(second)
    executor.run_one()  # only the first on_subscribe has run
    first.cancel()
    assert not upstream.cancelled.is_set() and not processor.is_closed
    executor.run_all()
    feed(upstream, -1, -2)
    upstream.subscriber.on_complete()  # type: ignore[union-attr]
    executor.run_all()
    assert second.items == [1, 2] and second.completed


def test_transform_subscriber_keyboard_interrupt_from_an_inline_delivery_ends_the_stage_and_goes_on() -> None:
    processor: TransformProcessor[int, int] = TransformProcessor(abs, executor=direct_executor)
    upstream = SpyPublisher()
    upstream.subscribe(processor)

    def interrupt(item: int) -> None:
        raise KeyboardInterrupt

    other, failing = make_recorder(initial=10), make_recorder(initial=10)
    failing.on_next_hook = interrupt
    processor.subscribe(other)
    processor.subscribe(failing)
    with pytest.raises(KeyboardInterrupt):
        feed(upstream, -1)  # submit delivers inline: the interrupt comes out of it
    assert upstream.cancelled.is_set()
    assert isinstance(other.error, KeyboardInterrupt) and isinstance(failing.error, KeyboardInterrupt)


# --- An upstream subscription racing the processor's end (rule 2.5) ---------------------


def test_multicast_upstream_arriving_as_the_processor_terminates_is_cancelled() -> None:
    processor: MulticastProcessor[int] = MulticastProcessor(prefetch=4)
    recorder = Recorder()
    processor.subscribe(recorder)
    processor._upstream = GatedSlot(processor.on_complete)  # the processor ends in on_subscribe's window
    subscription = StubSubscription()
    processor.on_subscribe(subscription)
    assert recorder.completed
    assert subscription.cancels == 1  # not kept and asked for items by a terminated processor
    assert subscription.requests == []


def test_transform_upstream_arriving_as_the_processor_is_closed_is_cancelled() -> None:
    processor: TransformProcessor[int, int] = TransformProcessor(lambda n: n, executor=direct_executor)
    processor._upstream = GatedSlot(processor.close)  # closed by its owner in on_subscribe's window
    subscription = StubSubscription()
    processor.on_subscribe(subscription)
    assert subscription.cancels == 1  # not left neither requested nor cancelled
    assert subscription.requests == []


def test_transform_close_cancels_the_upstream_at_once() -> None:
    processor: TransformProcessor[int, int] = TransformProcessor(lambda n: n, executor=direct_executor)
    subscription = StubSubscription()
    processor.on_subscribe(subscription)
    processor.close()  # no subscriber: no item will ever be asked for, so none would find it closed
    assert subscription.cancels == 1
