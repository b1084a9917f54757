"""ReactiveX interop: to_observable and from_observable with each overflow strategy."""

from __future__ import annotations

import threading
from typing import Any

import pytest
import reactivex
from hypothesis import given, settings
from hypothesis import strategies as st
from reactivex.subject import Subject

from flowpy import direct_executor
from flowpy.errors import MissingBackpressureError
from flowpy.interop import reactivex as rx_interop
from flowpy.interop.reactivex import from_observable, to_observable
from flowpy.operators._queue import QueueDrain
from flowpy.submission import SubmissionPublisher
from tests.interop.helpers import ManualPublisher, WaitingRecorder
from tests.support import ManualExecutor, Recorder

pytestmark = pytest.mark.timeout(60)


def held(recorder: Recorder) -> tuple[list[Any], list[Any]]:
    """What one from_observable subscription holds: (queued for the executor, kept by the strategy)."""
    hop = recorder.subscription  # the executor hop (observe_on_demand)
    queued = list(hop.upstream.queue)  # type: ignore[union-attr]
    stage = hop.upstream.subscription  # type: ignore[union-attr]  # the strategy's stage
    kept = list(stage.upstream.queue) if isinstance(stage, QueueDrain) else []  # "buffer" and "latest" keep items
    return queued, kept


class ObserverLog:
    """An Rx observer that records what it is told."""

    def __init__(self, fail_on: Any = None) -> None:
        self.items: list[Any] = []
        self.errors: list[BaseException] = []
        self.completed = threading.Event()
        self.ended = threading.Event()
        self.fail_on = fail_on

    def on_next(self, item: Any) -> None:
        if item == self.fail_on:
            raise ValueError(f"cannot take {item!r}")
        self.items.append(item)

    def on_error(self, error: BaseException) -> None:
        self.errors.append(error)
        self.ended.set()

    def on_completed(self) -> None:
        self.completed.set()
        self.ended.set()


# --- to_observable -----------------------------------------------------------------


def test_to_observable_delivers_all_items_then_completes() -> None:
    log = ObserverLog()
    with SubmissionPublisher[int]() as publisher:
        to_observable(publisher, request_batch=16).subscribe(log.on_next, log.on_error, log.on_completed)
        for i in range(10_000):
            publisher.submit(i)
    assert log.ended.wait(10)
    assert log.items == list(range(10_000))
    assert log.completed.is_set() and log.errors == []


def test_to_observable_requests_in_batches_of_three_quarters() -> None:
    publisher = ManualPublisher()
    log = ObserverLog()
    to_observable(publisher, request_batch=8).subscribe(log.on_next, log.on_error, log.on_completed)
    assert publisher.subscription.requests == [8]
    for i in range(8):
        publisher.subscriber.on_next(i)
    assert publisher.subscription.requests == [8, 6]
    for i in range(8, 14):
        publisher.subscriber.on_next(i)
    assert publisher.subscription.requests == [8, 6, 6]
    assert log.items == list(range(14))


def test_to_observable_dispose_cancels_the_subscription() -> None:
    publisher = ManualPublisher()
    disposable = to_observable(publisher).subscribe(print)
    disposable.dispose()
    assert publisher.subscription.cancelled.is_set()


def test_to_observable_forwards_error() -> None:
    publisher = ManualPublisher()
    log = ObserverLog()
    to_observable(publisher).subscribe(log.on_next, log.on_error, log.on_completed)
    error = RuntimeError("upstream failed")
    publisher.subscriber.on_next(1)
    publisher.subscriber.on_error(error)
    assert log.items == [1] and log.errors == [error]


def test_to_observable_observer_failure_cancels_and_becomes_on_error() -> None:
    publisher = ManualPublisher()
    log = ObserverLog(fail_on=2)
    to_observable(publisher).subscribe(log.on_next, log.on_error, log.on_completed)
    for i in range(4):
        publisher.subscriber.on_next(i)
    assert publisher.subscription.cancelled.is_set()
    assert log.items == [0, 1]
    assert [str(e) for e in log.errors] == ["cannot take 2"]


@pytest.mark.parametrize(
    ("batch", "kind", "message"),
    [
        (0, ValueError, r"^request_batch must be positive, got 0$"),
        (False, TypeError, r"^request_batch must be an int, got False$"),
    ],
)
def test_to_observable_rejects_bad_batch(batch: Any, kind: type, message: str) -> None:
    with pytest.raises(kind, match=message):
        to_observable(ManualPublisher(), request_batch=batch)


# --- from_observable: the million-item hot Subject ------------------------------------


def test_from_observable_drop_hot_subject_million_items_slow_subscriber() -> None:
    total, capacity = 1_000_000, 64
    subject: Subject[int] = Subject()
    dropped = 0

    def count_drop(_item: int) -> None:
        nonlocal dropped
        dropped += 1

    publisher = from_observable(subject, strategy="drop", capacity=capacity, on_drop=count_drop)
    pause = threading.Event()

    class Slow(Recorder):
        def on_next(self, item: Any) -> None:
            super().on_next(item)
            pause.wait(0.0002)  # slow work per item
            self.request(1)

    subscriber = Slow(initial=capacity)
    publisher.subscribe(subscriber)
    most_queued = 0
    for i in range(total):
        subject.on_next(i)
        if i % 4096 == 0:
            most_queued = max(most_queued, len(held(subscriber)[0]))
    subject.on_completed()
    assert subscriber.done.wait(30)
    assert subscriber.completed and subscriber.violations == []
    assert most_queued <= capacity
    assert dropped > total // 2  # the subscriber could not keep up
    assert len(subscriber.items) + dropped == total  # every item delivered or reported
    assert subscriber.items == sorted(subscriber.items)


def test_from_observable_buffer_small_capacity_overflows_with_error_not_growth() -> None:
    subject: Subject[int] = Subject()
    publisher = from_observable(subject, strategy="buffer", capacity=16)
    subscriber = Recorder()  # never requests
    publisher.subscribe(subscriber)
    for i in range(1_000_000):
        subject.on_next(i)
        if not subject.observers:
            break
    assert subscriber.done.wait(5)
    assert subscriber.kinds() == ["on_subscribe", "on_error"]
    assert isinstance(subscriber.error, MissingBackpressureError)
    assert str(subscriber.error) == "on_backpressure_buffer overflowed its capacity of 16 items"
    assert i == 16  # the 17th item overflowed and disposed of the Observable subscription at once
    assert subject.observers == []
    assert held(subscriber) == ([], [])


# --- from_observable: each strategy, deterministically ------------------------------


def manual_subject(
    strategy: Any, capacity: int = 4, on_drop: Any = None
) -> tuple[Subject[int], Recorder, ManualExecutor]:
    subject: Subject[int] = Subject()
    executor = ManualExecutor()
    publisher = from_observable(subject, strategy=strategy, capacity=capacity, on_drop=on_drop, executor=executor)
    recorder = Recorder()
    publisher.subscribe(recorder)
    return subject, recorder, executor


def test_from_observable_buffer_queues_ahead_of_demand() -> None:
    subject, recorder, executor = manual_subject("buffer")
    for i in range(4):
        subject.on_next(i)
    executor.run_all()
    assert recorder.items == []
    recorder.request(3)
    executor.run_all()
    assert recorder.items == [0, 1, 2]
    subject.on_completed()
    recorder.request(1)
    executor.run_all()
    assert recorder.items == [0, 1, 2, 3] and recorder.completed


def test_from_observable_drop_discards_newest_beyond_demand() -> None:
    drops: list[int] = []
    subject, recorder, executor = manual_subject("drop", on_drop=drops.append)
    recorder.request(2)
    for i in range(5):
        subject.on_next(i)
    executor.run_all()
    assert recorder.items == [0, 1]
    assert drops == [2, 3, 4]


def test_from_observable_latest_keeps_only_the_newest_while_parked() -> None:
    drops: list[int] = []
    subject, recorder, executor = manual_subject("latest", on_drop=drops.append)
    for i in range(5):
        subject.on_next(i)
    subject.on_completed()
    executor.run_all()
    assert recorder.items == [] and not recorder.completed  # completion waits for the latest item
    recorder.request(1)
    executor.run_all()
    assert recorder.items == [4] and recorder.completed
    assert drops == [0, 1, 2, 3]


def test_from_observable_error_strategy_fails_on_unrequested_item() -> None:
    subject, recorder, executor = manual_subject("error")
    recorder.request(1)
    subject.on_next(10)
    subject.on_next(11)
    executor.run_all()
    # The requested item is delivered, then the error; the Observable was disposed at once.
    assert recorder.kinds() == ["on_subscribe", "on_next", "on_error"]
    assert recorder.items == [10]
    assert isinstance(recorder.error, MissingBackpressureError)
    assert str(recorder.error) == "on_backpressure_error: the source emitted more than the 1 items requested"
    assert subject.observers == []


def test_from_observable_buffer_overflow_drops_the_unrequested_items_and_keeps_the_requested_one() -> None:
    subject, recorder, executor = manual_subject("buffer", capacity=2)
    recorder.request(1)
    for i in range(4):  # 0 is requested; 1 and 2 wait unrequested; 3 overflows the buffer of 2
        subject.on_next(i)
    assert subject.observers == []  # disposed at once, on the Observable's thread
    executor.run_all()
    assert recorder.kinds() == ["on_subscribe", "on_next", "on_error"]
    assert recorder.items == [0]
    assert str(recorder.error) == "on_backpressure_buffer overflowed its capacity of 2 items"


@pytest.mark.parametrize("strategy", ["drop", "latest"])
def test_from_observable_raising_on_drop_ends_the_stream_with_its_error(strategy: Any) -> None:
    error = RuntimeError("no room for drops")

    def refuse(_item: int) -> None:
        raise error

    subject, recorder, executor = manual_subject(strategy, on_drop=refuse)
    for i in range(3):  # nothing requested: the first drop (or replacement) raises
        subject.on_next(i)
    executor.run_all()
    assert recorder.kinds() == ["on_subscribe", "on_error"]
    assert recorder.error is error
    assert subject.observers == []


def test_from_observable_upstream_error_follows_queued_items() -> None:
    subject, recorder, executor = manual_subject("buffer")
    subject.on_next(1)
    error = RuntimeError("source broke")
    subject.on_error(error)
    recorder.request(5)
    executor.run_all()
    assert recorder.signals == [("on_subscribe", None), ("on_next", 1), ("on_error", error)]


def test_from_observable_cold_observable_with_buffer_keeps_everything() -> None:
    recorder = WaitingRecorder()
    from_observable(reactivex.of(1, 2, 3), strategy="buffer", executor=direct_executor).subscribe(recorder)
    recorder.request(10)
    assert recorder.items == [1, 2, 3] and recorder.completed


def test_from_observable_request_zero_signals_rule_3_9_and_disposes() -> None:
    subject, recorder, executor = manual_subject("buffer")
    subject.on_next(1)
    recorder.subscription.request(0)  # type: ignore[union-attr]
    executor.run_all()
    assert recorder.kinds() == ["on_subscribe", "on_error"]
    assert str(recorder.error) == "non-positive subscription request: n must be > 0 (rule 3.9), got 0"
    assert subject.observers == []


def test_from_observable_request_zero_inside_on_subscribe_never_subscribes_upstream() -> None:
    subject: Subject[int] = Subject()

    class Bad(Recorder):
        def on_subscribe(self, subscription: Any) -> None:
            super().on_subscribe(subscription)
            subscription.request(-1)

    recorder = Bad()
    from_observable(subject, executor=direct_executor).subscribe(recorder)
    assert recorder.kinds() == ["on_subscribe", "on_error"]
    assert recorder.violations == []
    assert subject.observers == []


def test_from_observable_none_item_signals_type_error() -> None:
    subject, recorder, executor = manual_subject("buffer")
    subject.on_next(None)  # type: ignore[arg-type]
    executor.run_all()
    assert isinstance(recorder.error, TypeError)
    assert str(recorder.error) == "observable must not emit None (rule 2.13)"


def test_from_observable_cancel_disposes_and_stops_delivery() -> None:
    subject, recorder, executor = manual_subject("buffer")
    recorder.request(10)
    subject.on_next(1)
    recorder.cancel()
    subject.on_next(2)
    executor.run_all()
    assert recorder.items == []
    assert subject.observers == []


def test_from_observable_executor_refusal_becomes_on_error() -> None:
    subject: Subject[int] = Subject()
    refusal = RuntimeError("no threads left")

    def refuse(_task: Any) -> None:
        raise refusal

    recorder = Recorder(initial=1)
    from_observable(subject, executor=refuse).subscribe(recorder)
    subject.on_next(1)  # request() and on_next never raise; the subscriber is told
    assert recorder.kinds() == ["on_subscribe", "on_error"]
    assert recorder.error is refusal
    assert subject.observers == []


@pytest.mark.parametrize(
    ("kwargs", "kind", "message"),
    [
        (
            {"strategy": "block"},
            ValueError,
            r"^strategy must be one of 'buffer', 'drop', 'latest', 'error', got 'block'$",
        ),
        ({"capacity": 0}, ValueError, r"^capacity must be positive, got 0$"),
        ({"capacity": 1.5}, TypeError, r"^capacity must be an int, got 1\.5$"),
        ({"strategy": "drop", "on_drop": 3}, TypeError, r"^on_drop must be callable or None, got 3$"),
        (
            {"strategy": "buffer", "on_drop": print},
            ValueError,
            r"^on_drop must be None with strategy='buffer', which never drops items; "
            r"use strategy='drop' or 'latest'$",
        ),
        ({"executor": None}, TypeError, r"^executor must not be None; leave it out to use the default executor$"),
    ],
)
def test_from_observable_rejects_bad_arguments(kwargs: dict[str, Any], kind: type, message: str) -> None:
    with pytest.raises(kind, match=message):
        from_observable(Subject(), **kwargs)


def test_from_observable_rejects_non_observable() -> None:
    with pytest.raises(TypeError, match=r"^observable must be a reactivex.Observable, got \[1\]$"):
        from_observable([1])  # type: ignore[arg-type]


# --- from_observable: random interleavings ----------------------------------------

steps = st.lists(
    st.one_of(
        st.tuples(st.just("emit"), st.integers(1, 6)),
        st.tuples(st.just("request"), st.integers(1, 6)),
        st.tuples(st.just("run"), st.just(0)),
    ),
    max_size=40,
)


@settings(max_examples=150, deadline=None)
@given(strategy=st.sampled_from(["buffer", "drop", "latest", "error"]), capacity=st.integers(1, 6), steps=steps)
def test_from_observable_random_schedule_accounts_for_every_item(
    strategy: Any, capacity: int, steps: list[tuple[str, int]]
) -> None:
    drops: list[int] = []
    subject, recorder, executor = manual_subject(
        strategy, capacity, on_drop=drops.append if strategy in ("drop", "latest") else None
    )
    emitted = 0
    for action, n in steps:
        if action == "emit":
            for _ in range(n):
                subject.on_next(emitted)
                emitted += 1
        elif action == "request":
            recorder.request(n)
        else:
            executor.run_all()
        queued, kept = held(recorder)
        assert len(queued) <= capacity
        assert len(kept) <= (1 if strategy == "latest" else capacity)
    executor.run_all()
    assert recorder.violations == []  # never more than requested, signals serial
    items = recorder.items
    assert items == sorted(set(items))  # in order, no duplicates
    if recorder.error is not None:
        assert isinstance(recorder.error, MissingBackpressureError)
        assert strategy in ("buffer", "error")
    else:
        queued, kept = held(recorder)
        assert sorted(items + drops + queued + kept) == list(range(emitted))  # each item exactly once


def test_from_observable_threads_emitting_and_requesting_lose_nothing(tiny_switch_interval: None) -> None:
    for _ in range(20):
        subject: Subject[int] = Subject()
        recorder = WaitingRecorder()
        from_observable(subject, strategy="buffer", capacity=1000).subscribe(recorder)

        def emit(subject: Subject[int] = subject) -> None:
            for i in range(500):
                subject.on_next(i)
            subject.on_completed()

        thread = threading.Thread(target=emit)
        thread.start()
        for _ in range(100):
            recorder.request(5)
        thread.join()
        assert recorder.done.wait(10)
        assert recorder.items == list(range(500)) and recorder.completed
        assert recorder.violations == []


# --- the push source under the strategies ------------------------------------------


def test_observable_source_pushes_as_the_observable_does_to_a_subscriber_that_asked_for_all() -> None:
    subject: Subject[int] = Subject()
    recorder = Recorder(initial=2**63 - 1)
    rx_interop._ObservableSource(subject).subscribe(recorder)
    for i in range(3):
        subject.on_next(i)
    subject.on_completed()
    assert recorder.items == [0, 1, 2] and recorder.completed
    assert subject.observers == []


def test_observable_source_signals_an_invalid_request_from_on_subscribe_and_never_subscribes() -> None:
    subject: Subject[int] = Subject()

    class Bad(Recorder):
        def on_subscribe(self, subscription: Any) -> None:
            super().on_subscribe(subscription)
            subscription.request(0)
            subscription.request(-1)  # only the first error is kept

    recorder = Bad()
    rx_interop._ObservableSource(subject).subscribe(recorder)
    assert recorder.kinds() == ["on_subscribe", "on_error"]
    assert str(recorder.error) == "non-positive subscription request: n must be > 0 (rule 3.9), got 0"
    assert subject.observers == []


def test_observable_source_cancel_disposes_and_forwards_nothing_more() -> None:
    subject: Subject[int] = Subject()
    recorder = Recorder(initial=2**63 - 1)
    rx_interop._ObservableSource(subject).subscribe(recorder)
    subject.on_next(1)
    recorder.cancel()
    subject.on_next(2)
    assert recorder.items == [1]
    assert subject.observers == []


@pytest.mark.parametrize("publisher", [None, 5])
def test_to_observable_refuses_what_is_no_publisher_at_the_call(publisher: Any) -> None:
    with pytest.raises(TypeError, match=rf"^publisher must be a Publisher, got {publisher!r}$"):
        to_observable(publisher)
