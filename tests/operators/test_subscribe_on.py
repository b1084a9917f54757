"""subscribe_on: subscribe and request on an executor, in order."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings

from flowpy import operators
from flowpy.executors import DaemonThreadPool, default_executor
from flowpy.flow import Publisher, Subscriber, Subscription
from flowpy.sources import RangePublisher, just
from tests.operators.conftest import WAIT, Spy, StubSubscription, drive, items_lists, patterns
from tests.sources_helpers import SpyPublisher
from tests.support import ManualExecutor, Recorder, RejectingExecutor


def test_subscribe_on_source_produces_on_the_executor() -> None:
    pool = DaemonThreadPool(1, thread_name_prefix="producer")
    try:
        names: set[str] = set()
        recorder = Recorder(on_next_hook=lambda item: names.add(threading.current_thread().name))
        operators.subscribe_on(RangePublisher(0, 20), pool).subscribe(recorder)
        assert recorder.subscribed.wait(WAIT)
        recorder.request(20)
        assert recorder.done.wait(WAIT)
        assert recorder.items == list(range(20))
        assert names == {"producer-0"}
    finally:
        pool.shutdown()


def test_subscribe_on_requests_run_in_order_after_subscribe() -> None:
    spy = Spy(RangePublisher(0, 10))
    executor = ManualExecutor()
    recorder = Recorder()
    operators.subscribe_on(spy, executor).subscribe(recorder)
    assert spy.subscriptions == []
    executor.run_all()
    recorder.request(2)
    recorder.request(3)
    assert spy.subscription.requests == []
    executor.run_all()
    assert spy.subscription.requests == [2, 3]
    assert recorder.items == [0, 1, 2, 3, 4]


def test_subscribe_on_refused_subscribe_signals_error_after_on_subscribe() -> None:
    recorder = Recorder()
    operators.subscribe_on(just(1), RejectingExecutor(0)).subscribe(recorder)
    assert recorder.kinds() == ["on_subscribe", "on_error"]
    assert str(recorder.error) == "executor refused the task"


def test_subscribe_on_refused_request_cancels_source_and_signals_error() -> None:
    spy = Spy(RangePublisher(0, 10))
    executor = RejectingExecutor(1)
    recorder = Recorder()
    operators.subscribe_on(spy, executor).subscribe(recorder)
    executor.inner.run_all()
    recorder.request(1)
    assert spy.subscription.cancelled.is_set()
    assert isinstance(recorder.error, RuntimeError)
    assert recorder.violations == []


@settings(max_examples=30, deadline=None)
@given(items=items_lists, pattern=patterns)
def test_subscribe_on_matches_input_under_any_request_pattern(items: list[int], pattern: list[int]) -> None:
    recorder = drive(operators.subscribe_on(just(*items)), pattern)
    assert recorder.items == items


class _RefusesAfter:
    """Runs the first ``accept`` tasks on the shared pool, then refuses like a shut-down pool."""

    def __init__(self, accept: int) -> None:
        self.accept = accept
        self.lock = threading.Lock()

    def execute(self, task: Callable[[], object]) -> None:
        with self.lock:
            self.accept -= 1
            refused = self.accept < 0
        if refused:
            raise RuntimeError("cannot schedule new tasks after shutdown")
        default_executor().execute(task)


@pytest.mark.timeout(60)
@pytest.mark.usefixtures("tiny_switch_interval")
def test_subscribe_on_refusal_racing_with_items_signals_serially_and_once() -> None:
    for round_ in range(40):
        source = operators.observe_on(RangePublisher(0, 10_000), prefetch=4)
        arrived = threading.Semaphore(0)
        recorder = Recorder(on_next_hook=lambda item, arrived=arrived: arrived.release())
        operators.subscribe_on(source, _RefusesAfter(1 + round_ % 5)).subscribe(recorder)
        assert recorder.subscribed.wait(WAIT)
        for _ in range(3000):  # a request that finds the serial loop idle costs one task
            recorder.request(1)
            if recorder.done.is_set():
                break
            arrived.acquire(timeout=0.5)  # the item, unless the refusal ended the stream
        assert recorder.done.wait(WAIT)
        assert recorder.violations == []
        assert isinstance(recorder.error, RuntimeError)
        assert recorder.kinds().count("on_error") == 1


def test_subscribe_on_cancels_a_second_subscription_and_keeps_the_first() -> None:
    source = SpyPublisher()
    executor = ManualExecutor()
    recorder = Recorder()
    operators.subscribe_on(source, executor).subscribe(recorder)
    executor.run_all()
    stage = source.subscriber
    assert stage is not None
    second = StubSubscription()
    stage.on_subscribe(second)  # rule 2.5
    assert second.cancels == 1
    assert not source.cancelled.is_set()
    assert recorder.kinds() == ["on_subscribe"]
    recorder.request(3)
    executor.run_all()
    assert source.requests == [3]
    assert second.requests == []


def test_subscribe_on_none_subscription_raises() -> None:
    source = SpyPublisher()
    executor = ManualExecutor()
    operators.subscribe_on(source, executor).subscribe(Recorder())
    executor.run_all()
    assert source.subscriber is not None
    with pytest.raises(TypeError, match=r"^subscription must not be None \(rule 2\.13\)$"):
        source.subscriber.on_subscribe(None)  # type: ignore[arg-type]


def test_subscribe_on_request_after_cancel_does_not_reach_the_source() -> None:
    source = SpyPublisher()
    executor = ManualExecutor()
    recorder = Recorder()
    operators.subscribe_on(source, executor).subscribe(recorder)
    executor.run_all()
    assert recorder.subscription is not None
    recorder.subscription.cancel()
    assert source.cancelled.is_set()
    recorder.subscription.request(5)  # rule 3.6
    executor.run_all()
    assert source.requests == []


class _SubscribesWith(Publisher[Any]):
    """Hands its subscriber a given subscription."""

    def __init__(self, subscription: Subscription) -> None:
        self.subscription = subscription

    def subscribe(self, subscriber: Subscriber[Any]) -> None:
        subscriber.on_subscribe(self.subscription)


class _RaisingCancel(StubSubscription):
    def cancel(self) -> None:
        super().cancel()
        raise RuntimeError("cancel failed")


def test_subscribe_on_raising_source_cancel_is_reported_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    upstream = _RaisingCancel()
    executor = ManualExecutor()
    recorder = Recorder()
    operators.subscribe_on(_SubscribesWith(upstream), executor).subscribe(recorder)
    executor.run_all()
    with caplog.at_level(logging.ERROR, logger="flowpy"):
        recorder.cancel()  # rule 3.15: returns normally
    assert upstream.cancels == 1
    assert any("cancel failed" in repr(record.exc_info) for record in caplog.records)
