"""observe_on: an asynchronous boundary with a bounded queue."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from hypothesis import given, settings

from flowpy import operators
from flowpy.errors import MissingBackpressureError
from flowpy.executors import DaemonThreadPool
from flowpy.operators._observe_on import observe_on_demand
from flowpy.sources import RangePublisher, just
from tests.operators.conftest import WAIT, Spy, drive, items_lists, patterns
from tests.sources_helpers import SpyPublisher
from tests.support import ManualExecutor, Recorder, RejectingExecutor


def test_observe_on_delivers_on_the_executor_thread() -> None:
    pool = DaemonThreadPool(1, thread_name_prefix="observer")
    try:
        names: list[str] = []
        recorder = Recorder()
        operators.observe_on(RangePublisher(0, 50), pool, prefetch=8).subscribe(recorder)
        recorder.on_next_hook = lambda item: names.append(threading.current_thread().name)
        recorder.request(100)
        assert recorder.done.wait(WAIT)
        assert recorder.items == list(range(50))
        assert set(names) == {"observer-0"}
    finally:
        pool.shutdown()


def test_observe_on_requests_prefetch_then_replenishes_at_three_quarters() -> None:
    spy = Spy(RangePublisher(0, 1000))
    executor = ManualExecutor()
    recorder = Recorder()
    operators.observe_on(spy, executor, prefetch=8).subscribe(recorder)
    assert spy.subscription.requests == [8]
    recorder.request(5)
    executor.run_all()
    assert recorder.items == [0, 1, 2, 3, 4]
    assert spy.subscription.requests == [8]  # 5 taken: below 6 (75 % of 8)
    recorder.request(1)
    executor.run_all()
    assert spy.subscription.requests == [8, 6]


def test_observe_on_never_holds_more_than_prefetch() -> None:
    source = SpyPublisher()
    executor = ManualExecutor()
    recorder = Recorder()
    operators.observe_on(source, executor, prefetch=4).subscribe(recorder)
    assert source.requests == [4]
    assert source.subscriber is not None
    for item in range(4):
        source.subscriber.on_next(item)
    executor.run_all()
    assert recorder.items == []  # no demand yet: all four wait in the queue
    source.subscriber.on_next(4)  # a fifth breaks rule 1.1
    executor.run_all()
    assert isinstance(recorder.error, MissingBackpressureError)
    assert str(recorder.error) == "observe_on's upstream sent more than the 4 items requested"
    assert source.cancelled.is_set()


def test_observe_on_error_arrives_after_queued_items() -> None:
    source = SpyPublisher()
    executor = ManualExecutor()
    recorder = Recorder()
    operators.observe_on(source, executor, prefetch=4).subscribe(recorder)
    assert source.subscriber is not None
    source.subscriber.on_next(1)
    source.subscriber.on_error(KeyError("boom"))
    recorder.request(1)
    executor.run_all()
    assert recorder.items == [1]
    assert isinstance(recorder.error, KeyError)


def test_observe_on_request_zero_signals_rule_3_9_error_and_cancels() -> None:
    spy = Spy(RangePublisher(0, 10))
    executor = ManualExecutor()
    recorder = Recorder()
    operators.observe_on(spy, executor).subscribe(recorder)
    recorder.subscription.request(0)  # type: ignore[union-attr]
    executor.run_all()
    assert isinstance(recorder.error, ValueError)
    assert "rule 3.9" in str(recorder.error)
    assert spy.subscription.cancelled.is_set()


def test_observe_on_executor_refusal_signals_its_exception() -> None:
    recorder = Recorder()
    operators.observe_on(just(1, 2), RejectingExecutor(0)).subscribe(recorder)
    recorder.request(1)
    assert isinstance(recorder.error, RuntimeError)
    assert str(recorder.error) == "executor refused the task"


def test_a_refusal_while_on_subscribe_runs_is_signalled_after_it_returns() -> None:
    # The request made inside on_subscribe hands the first drain task to
    # the executor, which refuses it: on_error must wait for on_subscribe
    # to return, not run inside it (rule 1.3).
    recorder = Recorder(initial=1)
    operators.observe_on(just(1, 2), RejectingExecutor(0)).subscribe(recorder)
    assert recorder.kinds() == ["on_subscribe", "on_error"]
    assert str(recorder.error) == "executor refused the task"
    assert recorder.violations == []


def test_observe_on_cancel_stops_delivery_and_cancels_upstream() -> None:
    spy = Spy(RangePublisher(0, 1000))
    executor = ManualExecutor()
    recorder = Recorder()
    operators.observe_on(spy, executor, prefetch=16).subscribe(recorder)
    recorder.request(3)
    executor.run_all()
    recorder.cancel()
    recorder.request(10)
    executor.run_all()
    assert recorder.items == [0, 1, 2]
    assert spy.subscription.cancelled.is_set()


def test_observe_on_explicit_none_executor_raises_type_error() -> None:
    with pytest.raises(TypeError, match=r"^executor must not be None; leave it out to use the default executor$"):
        operators.observe_on(just(1), None)  # type: ignore[arg-type]


def test_observe_on_zero_prefetch_raises_value_error() -> None:
    with pytest.raises(ValueError, match=r"^prefetch must be positive, got 0$"):
        operators.observe_on(just(1), prefetch=0)


@pytest.mark.timeout(60)
@pytest.mark.usefixtures("tiny_switch_interval")
def test_observe_on_many_interleavings_deliver_everything_in_order() -> None:
    for round_ in range(30):
        spy = Spy(RangePublisher(0, 300))
        recorder = Recorder()
        operators.observe_on(spy, prefetch=1 + round_ % 7).subscribe(recorder)
        for _ in range(30):
            recorder.request(10)
        assert recorder.done.wait(WAIT)
        assert recorder.items == list(range(300))
        assert recorder.violations == []


@settings(max_examples=30, deadline=None)
@given(items=items_lists, pattern=patterns)
def test_observe_on_matches_input_under_any_request_pattern(items: list[int], pattern: list[int]) -> None:
    recorder = drive(operators.observe_on(just(*items), prefetch=3), pattern)
    assert recorder.items == items


def test_observe_on_subscriber_raising_cancels_upstream_and_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    spy = Spy(RangePublisher(0, 100))
    executor = ManualExecutor()

    def explode(item: int) -> None:
        raise KeyError(item)

    recorder = Recorder(on_next_hook=explode)
    operators.observe_on(spy, executor, prefetch=4).subscribe(recorder)
    recorder.request(10)
    executor.run_all()
    assert recorder.items == [0]
    assert spy.subscription.cancelled.is_set()
    assert "raised inside _ObserveOn's drain (rule 2.13)" in caplog.text


def test_observe_on_keyboard_interrupt_in_on_next_cancels_upstream_and_propagates() -> None:
    spy = Spy(RangePublisher(0, 100))
    executor = ManualExecutor()

    def interrupt(item: int) -> None:
        raise KeyboardInterrupt

    recorder = Recorder(on_next_hook=interrupt)
    operators.observe_on(spy, executor, prefetch=4).subscribe(recorder)
    recorder.request(10)
    with pytest.raises(KeyboardInterrupt):  # re-raised on the thread that delivered
        executor.run_all()
    assert recorder.items == [0]
    assert spy.subscription.cancelled.is_set()
    recorder.request(5)  # the drain is idle, not stuck: this runs a pass that delivers nothing
    executor.run_all()
    assert recorder.items == [0]
    assert not executor.tasks


@pytest.mark.timeout(60)
def test_observe_on_keyboard_interrupt_on_a_pool_frees_the_blocked_producer(monkeypatch: pytest.MonkeyPatch) -> None:
    from flowpy.submission import SubmissionPublisher

    reached: list[BaseException | None] = []
    reported = threading.Event()

    def hook(args: threading.ExceptHookArgs) -> None:
        reached.append(args.exc_value)
        reported.set()

    monkeypatch.setattr(threading, "excepthook", hook)  # restored when the test ends
    pool = DaemonThreadPool(1, thread_name_prefix="observer")
    upstream_pool = DaemonThreadPool(1, thread_name_prefix="upstream")
    publisher: SubmissionPublisher[int] = SubmissionPublisher(upstream_pool, max_buffer_capacity=1)
    try:

        def interrupt(item: int) -> None:
            raise KeyboardInterrupt

        recorder = Recorder(initial=1_000, on_next_hook=interrupt)
        operators.observe_on(publisher, pool, prefetch=2).subscribe(recorder)

        def produce() -> None:
            for number in range(200):  # far more than the buffer and prefetch hold
                publisher.submit(number)

        producer = threading.Thread(target=produce)
        producer.start()
        producer.join(WAIT)
        assert not producer.is_alive(), "the producer is blocked in submit(): upstream was never cancelled"
        assert reported.wait(WAIT)
        assert len(reached) == 1 and isinstance(reached[0], KeyboardInterrupt)
        assert recorder.items == [0]
        assert not publisher.has_subscribers
    finally:
        publisher.close()
        pool.shutdown()
        upstream_pool.shutdown()


def test_observe_on_subscriber_raising_keyboard_interrupt_ends_the_stream_and_passes_it_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from flowpy import SubmissionPublisher, direct_executor

    upstream: SubmissionPublisher[int] = SubmissionPublisher(direct_executor, 2)
    executor = ManualExecutor()

    def interrupt(item: int) -> None:
        if item == 1:
            raise KeyboardInterrupt

    recorder = Recorder(on_next_hook=interrupt)
    operators.observe_on(upstream, executor, prefetch=2).subscribe(recorder)
    recorder.request(100)
    executor.run_all()
    upstream.submit(0)
    upstream.submit(1)
    with pytest.raises(KeyboardInterrupt):
        executor.run_all()
    assert recorder.items == [0, 1]
    assert not upstream.has_subscribers  # cancelled: a producer can never block on it
    for i in range(2, 10):
        assert upstream.submit(i) == 0
    upstream.submit(10)
    assert executor.run_all() == 0  # nothing more is scheduled, and no pass is stuck
    assert recorder.items == [0, 1] and not recorder.terminated
    assert "raised inside _ObserveOn's drain (rule 2.13)" in caplog.text


# --- observe_on_demand: the hop that requests only what the subscriber asked for ---------


def _on_demand(capacity: int) -> tuple[SpyPublisher, Recorder, ManualExecutor]:
    source = SpyPublisher()
    executor = ManualExecutor()
    recorder = Recorder()
    observe_on_demand(source, executor.execute, capacity).subscribe(recorder)
    return source, recorder, executor


def test_observe_on_demand_passes_each_request_upstream_at_once_up_to_capacity() -> None:
    source, recorder, executor = _on_demand(4)
    assert source.requests == []  # nothing before the subscriber asks
    recorder.request(3)
    assert source.requests == [3]  # on the requesting thread, before any task ran
    recorder.request(10)
    assert source.requests == [3, 1]  # 4 requested and undelivered at most
    _push(source, 1, 2, 3, 4)
    executor.run_all()
    assert recorder.items == [1, 2, 3, 4]
    assert source.requests == [3, 1, 4]  # the pass delivered 4: topped up to min(9, 4)


def test_observe_on_demand_asks_for_what_on_subscribe_requested_once_the_upstream_is_there() -> None:
    source = SpyPublisher()
    executor = ManualExecutor()
    recorder = Recorder(initial=2)
    observe_on_demand(source, executor.execute, 8).subscribe(recorder)
    assert source.requests == [2]
    _push(source, 7, 8)
    source_subscriber = source.subscriber
    assert source_subscriber is not None
    source_subscriber.on_complete()
    executor.run_all()
    assert recorder.items == [7, 8] and recorder.completed
    assert source.requests == [2]  # the demand was used up: nothing more to ask for


def test_observe_on_demand_stops_asking_once_cancelled() -> None:
    source, recorder, executor = _on_demand(4)
    recorder.request(2)
    recorder.cancel()
    recorder.request(5)
    executor.run_all()
    assert source.requests == [2]
    assert source.cancelled.is_set()


def test_observe_on_demand_invalid_request_fails_at_once_and_asks_for_nothing() -> None:
    source, recorder, executor = _on_demand(4)
    recorder.request(2)
    _push(source, 1)
    recorder.request(0)
    executor.run_all()
    assert recorder.kinds() == ["on_subscribe", "on_error"]  # rule 3.9: ahead of the queued item
    assert isinstance(recorder.error, ValueError)
    assert source.requests == [2]
    assert source.cancelled.is_set()


def _push(source: SpyPublisher, *items: int) -> None:
    assert source.subscriber is not None
    for item in items:
        source.subscriber.on_next(item)


@pytest.mark.timeout(60)
def test_observe_on_300_stages_on_the_default_pool_deliver_everything() -> None:
    # The subscribe and the on_subscribe of 300 stages go through the
    # trampoline: none of them runs out of stack, none hangs.
    chain: Any = RangePublisher(0, 50)
    for _ in range(300):
        chain = operators.observe_on(chain)
    recorder = drive(chain, [1, 3, 7])
    assert recorder.items == list(range(50))
    assert recorder.completed
