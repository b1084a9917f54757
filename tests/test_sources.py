"""Tests of flowpy.sources: RangePublisher, just, empty, error, IterablePublisher."""

from __future__ import annotations

import gc
import itertools
import logging
import threading
import weakref
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flowpy._demand import MAX_DEMAND
from flowpy.flowable import Flowable
from flowpy.sources import IterablePublisher, RangePublisher, empty, error, just
from flowpy.subscribers import collect, iterate
from tests.sources_helpers import (
    WAIT,
    SyncRecorder,
    make_recorder,
    rejecting,
    stack_depth,
    wait_done,
)
from tests.support import ManualExecutor, Recorder

RULE_39 = r"^non-positive subscription request: n must be > 0 \(rule 3\.9\), got {}$"

# --- RangePublisher --------------------------------------------------------------


def test_range_request_all_emits_every_value_then_completes() -> None:
    recorder = make_recorder(initial=10)
    RangePublisher(5, 3).subscribe(recorder)
    assert recorder.items == [5, 6, 7]
    assert recorder.completed and recorder.error is None
    assert recorder.violations == []


def test_range_without_request_emits_nothing() -> None:
    recorder = make_recorder()
    RangePublisher(0, 3).subscribe(recorder)
    assert recorder.kinds().count("on_subscribe") == 1
    assert recorder.items == [] and not recorder.done.is_set()


def test_range_partial_requests_emit_exactly_what_was_asked() -> None:
    recorder = make_recorder()
    RangePublisher(0, 10).subscribe(recorder)
    recorder.request(2)
    assert recorder.items == [0, 1]
    recorder.request(3)
    assert recorder.items == [0, 1, 2, 3, 4]
    assert not recorder.done.is_set()
    recorder.request(5)
    assert recorder.items == list(range(10)) and recorder.completed


def test_range_count_zero_completes_without_demand() -> None:
    recorder = make_recorder()
    RangePublisher(7, 0).subscribe(recorder)
    assert recorder.completed and recorder.items == []


@pytest.mark.parametrize("n", [0, -1])
def test_range_request_non_positive_signals_value_error_citing_rule_3_9(n: int) -> None:
    recorder = make_recorder()
    RangePublisher(0, 10).subscribe(recorder)
    recorder.request(n)
    assert isinstance(recorder.error, ValueError)
    assert recorder.items == []
    with pytest.raises(ValueError, match=RULE_39.format(n)):
        raise recorder.error


@pytest.mark.parametrize("n", [True, 1.0, "1", None])
def test_range_request_non_int_signals_type_error(n: object) -> None:
    subscriber = make_recorder()
    RangePublisher(0, 10).subscribe(subscriber)
    subscriber.subscription.request(n)  # type: ignore[arg-type, union-attr]
    assert isinstance(subscriber.error, TypeError)
    with pytest.raises(TypeError, match=r"^subscription request must be an int \(rule 3\.9\), got .*$"):
        raise subscriber.error


def test_range_invalid_request_from_on_next_signals_error_and_no_extra_item() -> None:
    recorder = make_recorder(initial=1, per_item=0)
    publisher = RangePublisher(0, 10)
    publisher.subscribe(recorder)
    recorder.request(0)
    assert recorder.items == [0]
    assert isinstance(recorder.error, ValueError)
    assert recorder.violations == []


def test_range_demand_saturates_at_max_and_delivers_everything() -> None:
    recorder = make_recorder()
    RangePublisher(0, 1000).subscribe(recorder)
    recorder.request(MAX_DEMAND)
    recorder.request(MAX_DEMAND)
    assert recorder.items == list(range(1000)) and recorder.completed


def test_range_cancel_in_on_next_stops_at_once() -> None:
    recorder = make_recorder(initial=100, cancel_after=3)
    RangePublisher(0, 100).subscribe(recorder)
    assert recorder.items == [0, 1, 2]
    assert not recorder.done.is_set()
    recorder.request(10)  # no-op after cancel (rule 3.6)
    assert recorder.items == [0, 1, 2]


def test_range_cancel_drops_the_subscriber() -> None:
    recorder = make_recorder(initial=1)
    RangePublisher(0, 10).subscribe(recorder)
    subscription = recorder.subscription
    reference = weakref.ref(recorder)
    recorder.cancel()
    del recorder
    gc.collect()
    assert reference() is None, "the subscription still holds the subscriber (rule 3.13)"
    assert subscription is not None


def test_range_subscribe_none_raises_type_error() -> None:
    with pytest.raises(TypeError, match=r"^subscriber must not be None \(rule 1\.9\)$"):
        RangePublisher(0, 1).subscribe(None)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("start", "count", "kind", "message"),
    [
        (0, -1, ValueError, r"^count must be non-negative, got -1$"),
        (0, 1.5, TypeError, r"^count must be an int, got 1\.5$"),
        ("0", 1, TypeError, r"^start must be an int, got '0'$"),
        (0, True, TypeError, r"^count must be an int, got True$"),
    ],
)
def test_range_invalid_arguments_raise(start: object, count: object, kind: type, message: str) -> None:
    with pytest.raises(kind, match=message):
        RangePublisher(start, count)  # type: ignore[arg-type]


def test_range_on_next_raising_cancels_and_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    seen: list[int] = []

    class Failing(SyncRecorder):
        def on_next(self, item: int) -> None:
            seen.append(item)
            raise RuntimeError("boom")

    recorder = Failing(initial=5)
    with caplog.at_level(logging.ERROR, logger="flowpy"):
        RangePublisher(0, 5).subscribe(recorder)
    assert seen == [0]
    assert not recorder.done.is_set()
    assert "on_next of" in caplog.text and "rule 2.13" in caplog.text


def test_range_is_cold_each_subscriber_gets_the_whole_range() -> None:
    publisher = RangePublisher(0, 4)
    first, second = make_recorder(initial=10), make_recorder(initial=10)
    publisher.subscribe(first)
    publisher.subscribe(second)
    assert first.items == second.items == [0, 1, 2, 3]


@settings(max_examples=150, deadline=None)
@given(
    count=st.integers(min_value=0, max_value=60),
    initial=st.integers(min_value=0, max_value=8),
    per_item=st.integers(min_value=0, max_value=3),
    later=st.lists(st.integers(min_value=1, max_value=20), max_size=8),
)
def test_range_any_request_pattern_emits_in_order_never_beyond_demand(
    count: int, initial: int, per_item: int, later: list[int]
) -> None:
    recorder = make_recorder(initial=initial, per_item=per_item)
    RangePublisher(100, count).subscribe(recorder)
    for n in later:
        if recorder.done.is_set():
            break
        recorder.request(n)
    assert recorder.violations == []
    expected = list(range(100, 100 + min(count, recorder.requested)))
    assert recorder.items == expected
    assert recorder.completed == (count <= recorder.requested or count == 0)


@pytest.mark.timeout(120)
def test_range_ten_million_one_by_one_keeps_recursion_depth_one() -> None:
    """request(1) from on_next, 10 million times: no RecursionError, no stack growth (rule 3.3)."""
    from flowpy.flow import Subscriber, Subscription

    class OneByOne(Subscriber[int]):
        def __init__(self) -> None:
            self.count = 0
            self.nesting = 0
            self.max_nesting = 0
            self.depths: list[int] = []
            self.completed = False
            self.subscription: Subscription | None = None

        def on_subscribe(self, subscription: Subscription) -> None:
            self.subscription = subscription
            subscription.request(1)

        def on_next(self, item: int) -> None:
            self.nesting += 1
            if self.nesting > self.max_nesting:
                self.max_nesting = self.nesting
            if item % 1_000_000 == 0:
                self.depths.append(stack_depth())
            self.count += 1
            self.subscription.request(1)  # type: ignore[union-attr]
            self.nesting -= 1

        def on_error(self, error: BaseException) -> None:
            raise AssertionError(error)

        def on_complete(self) -> None:
            self.completed = True

    subscriber = OneByOne()
    RangePublisher(0, 10_000_000).subscribe(subscriber)
    assert subscriber.completed and subscriber.count == 10_000_000
    assert subscriber.max_nesting == 1
    assert len(subscriber.depths) == 10 and len(set(subscriber.depths)) == 1, subscriber.depths


def _request_from_threads(recorder: Recorder, threads: int, times: int, n: int) -> None:
    """Request ``n``, ``times`` times from each of ``threads`` threads started together."""
    start = threading.Barrier(threads)
    subscription = recorder.subscription
    assert subscription is not None

    def ask() -> None:
        start.wait()
        for _ in range(times):
            subscription.request(n)

    recorder.requested += threads * times * n
    workers = [threading.Thread(target=ask) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()


@pytest.mark.timeout(60)
@pytest.mark.usefixtures("tiny_switch_interval")
def test_range_concurrent_requests_emit_serially_and_exactly() -> None:
    for _ in range(20):
        recorder = make_recorder()
        RangePublisher(0, 2000).subscribe(recorder)
        _request_from_threads(recorder, threads=4, times=50, n=10)
        assert recorder.items == list(range(2000))
        assert recorder.completed and recorder.violations == []


# --- just, empty, error --------------------------------------------------------


def test_just_emits_items_in_order_then_completes() -> None:
    recorder = make_recorder(initial=1, per_item=1)
    just("a", "b", "c").subscribe(recorder)
    assert recorder.items == ["a", "b", "c"] and recorder.completed


def test_just_none_item_raises_type_error() -> None:
    with pytest.raises(TypeError, match=r"^items must not be None \(rule 2\.13\), got None at position 1$"):
        just(1, None)


def test_just_without_items_completes_without_demand() -> None:
    recorder = make_recorder()
    just().subscribe(recorder)
    assert recorder.completed


def test_empty_completes_right_after_on_subscribe() -> None:
    recorder = make_recorder()
    empty().subscribe(recorder)
    assert recorder.kinds().count("on_subscribe") == 1 and recorder.completed and recorder.items == []


def test_error_fails_every_subscriber_with_the_same_exception() -> None:
    failure = OSError("disk gone")
    publisher = error(failure)
    first, second = make_recorder(), make_recorder()
    publisher.subscribe(first)
    publisher.subscribe(second)
    assert first.error is failure and second.error is failure


def test_error_non_exception_raises_type_error() -> None:
    with pytest.raises(TypeError, match=r"^exception must be an exception instance, got 'x'$"):
        error("x")  # type: ignore[arg-type]


def test_empty_cancel_in_on_subscribe_suppresses_the_terminal_signal() -> None:
    class Canceller(SyncRecorder):
        def on_subscribe(self, subscription):  # type: ignore[no-untyped-def]
            super().on_subscribe(subscription)
            subscription.cancel()

    recorder = Canceller()
    empty().subscribe(recorder)
    assert not recorder.done.is_set()


def test_error_invalid_request_in_on_subscribe_signals_the_request_error() -> None:
    recorder = make_recorder(initial=-5)
    error(OSError("x")).subscribe(recorder)
    assert isinstance(recorder.error, ValueError)


# --- IterablePublisher -------------------------------------------------------------


def test_iterable_delivers_items_on_the_executor() -> None:
    executor = ManualExecutor()
    recorder = make_recorder(initial=10)
    IterablePublisher([1, 2, 3], executor=executor).subscribe(recorder)
    assert recorder.kinds().count("on_subscribe") == 0, "on_subscribe must run on the executor"
    executor.run_all()
    assert recorder.items == [1, 2, 3] and recorder.completed
    assert recorder.violations == []


def test_iterable_empty_completes_without_demand() -> None:
    executor = ManualExecutor()
    recorder = make_recorder()
    IterablePublisher([], executor=executor).subscribe(recorder)
    executor.run_all()
    assert recorder.kinds().count("on_subscribe") == 1 and recorder.completed


def test_iterable_completes_after_last_item_without_further_demand() -> None:
    executor = ManualExecutor()
    recorder = make_recorder(initial=3)
    IterablePublisher("abc", executor=executor).subscribe(recorder)
    executor.run_all()
    assert recorder.items == ["a", "b", "c"] and recorder.completed


def test_iterable_batch_size_bounds_items_per_task() -> None:
    executor = ManualExecutor()
    recorder = make_recorder(initial=10)
    IterablePublisher(range(10), executor=executor, batch_size=3).subscribe(recorder)
    executor.run_one()
    assert recorder.items == [0, 1, 2]
    assert len(executor.tasks) == 1, "the task must yield and re-submit itself"
    executor.run_one()
    assert recorder.items == [0, 1, 2, 3, 4, 5]
    executor.run_all()
    assert recorder.items == list(range(10)) and recorder.completed


def test_iterable_request_one_from_on_next_still_yields_after_batch() -> None:
    executor = ManualExecutor()
    recorder = make_recorder(initial=1, per_item=1)
    IterablePublisher(range(10), executor=executor, batch_size=4).subscribe(recorder)
    executor.run_one()
    assert recorder.items == [0, 1, 2, 3]
    assert executor.run_all() == 2
    assert recorder.items == list(range(10)) and recorder.completed


def test_iterable_iter_failure_signals_on_subscribe_then_on_error() -> None:
    class Broken:
        def __iter__(self) -> Iterator[int]:
            raise OSError("cannot open")

    executor = ManualExecutor()
    recorder = make_recorder()
    IterablePublisher(Broken(), executor=executor).subscribe(recorder)
    executor.run_all()
    assert recorder.kinds().count("on_subscribe") == 1
    assert isinstance(recorder.error, OSError) and str(recorder.error) == "cannot open"


def test_iterable_next_failure_signals_items_then_on_error() -> None:
    def failing() -> Iterator[int]:
        yield 1
        yield 2
        raise KeyError("lost")

    executor = ManualExecutor()
    recorder = make_recorder(initial=10)
    IterablePublisher(failing(), executor=executor).subscribe(recorder)
    executor.run_all()
    assert recorder.items == [1, 2] and isinstance(recorder.error, KeyError)


def test_iterable_none_item_ends_the_stream_with_type_error_and_stops_iterating() -> None:
    # None went to on_next; the subscriber raised, the source only logged it and never ended the stream
    pulled: list[str] = []
    closed = threading.Event()

    def with_none() -> Iterator[int | None]:
        try:
            yield 1
            yield None
            pulled.append("after None")
            yield 2
        finally:
            closed.set()

    executor = ManualExecutor()
    recorder = make_recorder(initial=10)
    IterablePublisher(with_none(), executor=executor).subscribe(recorder)
    executor.run_all()
    assert recorder.kinds() == ["on_subscribe", "on_next", "on_error"]
    assert recorder.items == [1]
    assert type(recorder.error) is TypeError and str(recorder.error) == "item must not be None (rule 2.13)"
    assert recorder.violations == []
    assert pulled == []
    gc.collect()
    assert closed.is_set(), "the source must drop the iterator"


def test_iterable_none_item_fails_collect_iterate_and_to_list() -> None:
    message = r"^item must not be None \(rule 2\.13\)$"
    with pytest.raises(TypeError, match=message):
        collect(IterablePublisher([1, None, 2])).result(timeout=WAIT)
    with pytest.raises(TypeError, match=message):
        Flowable.from_iterable([None]).to_list().result(timeout=WAIT)
    iterator = iterate(IterablePublisher([1, None, 2]), timeout=WAIT)
    assert next(iterator) == 1
    with pytest.raises(TypeError, match=message):
        next(iterator)


def test_iterable_each_subscriber_gets_a_fresh_iterator() -> None:
    executor = ManualExecutor()
    publisher = IterablePublisher(range(3), executor=executor)
    first, second = make_recorder(initial=5), make_recorder(initial=5)
    publisher.subscribe(first)
    publisher.subscribe(second)
    executor.run_all()
    assert first.items == second.items == [0, 1, 2]


def test_iterable_request_zero_signals_value_error() -> None:
    executor = ManualExecutor()
    recorder = make_recorder()
    IterablePublisher(range(3), executor=executor).subscribe(recorder)
    executor.run_all()
    recorder.request(0)
    executor.run_all()
    with pytest.raises(ValueError, match=RULE_39.format(0)):
        raise recorder.error  # type: ignore[misc]


def test_iterable_rejecting_executor_signals_on_subscribe_then_the_rejection() -> None:
    recorder = make_recorder()
    IterablePublisher([1], executor=rejecting()).subscribe(recorder)
    assert recorder.kinds().count("on_subscribe") == 1
    assert isinstance(recorder.error, RuntimeError)
    assert str(recorder.error) == "cannot schedule new tasks after shutdown"


def test_iterable_cancel_stops_and_closes_the_generator() -> None:
    closed = threading.Event()

    def numbers() -> Iterator[int]:
        try:
            yield from itertools.count()
        finally:
            closed.set()

    executor = ManualExecutor()
    recorder = make_recorder(initial=5, cancel_after=2)
    IterablePublisher(numbers(), executor=executor).subscribe(recorder)
    executor.run_all()
    assert recorder.items == [0, 1]
    gc.collect()
    assert closed.is_set(), "cancel must drop the iterator"
    assert not recorder.done.is_set()


@pytest.mark.parametrize(
    ("kwargs", "kind", "message"),
    [
        (
            {"executor": None},
            TypeError,
            r"^executor must not be None; leave it out to use the default executor$",
        ),
        ({"batch_size": 0}, ValueError, r"^batch_size must be positive, got 0$"),
        ({"batch_size": "1"}, TypeError, r"^batch_size must be an int, got '1'$"),
    ],
)
def test_iterable_invalid_arguments_raise(kwargs: dict[str, object], kind: type, message: str) -> None:
    with pytest.raises(kind, match=message):
        IterablePublisher([1], **kwargs)  # type: ignore[arg-type]


def test_iterable_not_iterable_raises_type_error() -> None:
    with pytest.raises(TypeError, match=r"^iterable must be iterable, got 5$"):
        IterablePublisher(5)  # type: ignore[arg-type]


@settings(max_examples=100, deadline=None)
@given(
    size=st.integers(min_value=0, max_value=40),
    batch=st.integers(min_value=1, max_value=7),
    steps=st.lists(st.tuples(st.integers(min_value=0, max_value=12), st.booleans()), max_size=12),
)
def test_iterable_any_request_and_scheduling_pattern_is_exact(
    size: int, batch: int, steps: list[tuple[int, bool]]
) -> None:
    executor = ManualExecutor()
    recorder = make_recorder()
    IterablePublisher(range(size), executor=executor, batch_size=batch).subscribe(recorder)
    executor.run_all()
    for n, run in steps:
        if n and not recorder.done.is_set():
            recorder.request(n)
        if run and executor.tasks:
            executor.run_one()
    executor.run_all()
    assert recorder.violations == []
    assert recorder.items == list(range(min(size, recorder.requested)))
    assert recorder.completed == (size <= recorder.requested)


@pytest.mark.timeout(60)
@pytest.mark.usefixtures("tiny_switch_interval")
def test_iterable_default_pool_with_concurrent_requests_is_exact() -> None:
    for _ in range(10):
        recorder = make_recorder()
        IterablePublisher(range(500), batch_size=16).subscribe(recorder)
        assert recorder.subscribed.wait(WAIT)
        _request_from_threads(recorder, threads=4, times=25, n=5)
        wait_done(recorder)
        assert recorder.items == list(range(500)) and recorder.completed
        assert recorder.violations == []


def test_iterable_direct_executor_many_batches_do_not_grow_the_stack() -> None:
    from flowpy.executors import direct_executor
    from flowpy.subscribers import collect

    depths: set[int] = set()

    def numbers() -> Iterator[int]:
        for number in range(100_000):
            if number % 10_000 == 5_000:  # not the first item, fetched on opening
                depths.add(stack_depth())
            yield number

    result = collect(IterablePublisher(numbers(), executor=direct_executor, batch_size=2)).result(timeout=WAIT)
    assert result == list(range(100_000))
    assert len(depths) == 1, f"stack depth changed across batches: {sorted(depths)}"


@pytest.mark.parametrize("make", [lambda: RangePublisher(0, 10), lambda: IterablePublisher(range(10))])
def test_a_subscriber_whose_on_next_runs_out_of_stack_gets_on_error(make: Any) -> None:
    # A RecursionError out of on_next is the pipeline's, not a broken
    # subscriber's (rule 2.13): the stream ends with on_error, not only a log.
    def exhausted(item: int) -> None:
        if item == 3:
            raise RecursionError("maximum recursion depth exceeded")

    recorder = Recorder(on_next_hook=exhausted)
    make().subscribe(recorder)
    assert recorder.subscribed.wait(10)
    recorder.request(10)
    assert recorder.done.wait(10)
    assert isinstance(recorder.error, RecursionError)
    assert recorder.items == [0, 1, 2, 3]
    assert recorder.violations == []
