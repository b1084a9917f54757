"""SubmissionPublisher, point by point against the JDK's behaviour.

Every test runs once per core: it asks for the ``core`` fixture
(tests/conftest.py, tests/core_impl.py) and builds its publisher from it.
"""

from __future__ import annotations

import gc
import logging
import math
import re
import sys
import threading
import warnings
from concurrent.futures import CancelledError, ThreadPoolExecutor
from typing import Any

import pytest

from flowpy import ClosedPublisherError, DuplicateSubscriptionError, ReentrantSubmitError, direct_executor
from flowpy.executors import DaemonThreadPool, default_executor
from flowpy.submission import BUFFER_CAPACITY_LIMIT, SubmissionPublisher
from tests.core_impl import Core
from tests.support import ManualExecutor, Recorder, RejectingExecutor, wait_until_waiting

MAX = 2**63 - 1


def manual(core: Core, capacity: int = 256, handler: Any = None) -> tuple[SubmissionPublisher[Any], ManualExecutor]:
    executor = ManualExecutor()
    return core.SubmissionPublisher(executor, capacity, handler), executor


# --- Construction ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("requested", "rounded"),
    [
        (1, 1),
        (2, 2),
        (3, 4),
        (5, 8),
        (8, 8),
        (100, 128),
        (256, 256),
        (1000, 1024),
        (2**30 + 1, 2**30),
        (2**31 - 1, 2**30),
    ],
)
def test_capacity_rounds_up_to_power_of_two(core: Core, requested: int, rounded: int) -> None:
    assert core.SubmissionPublisher(direct_executor, requested).max_buffer_capacity == rounded


def test_defaults_are_shared_pool_and_256(core: Core) -> None:
    publisher: SubmissionPublisher[int] = core.SubmissionPublisher()
    assert publisher.executor is default_executor()
    assert publisher.max_buffer_capacity == 256 == BUFFER_CAPACITY_LIMIT >> 22
    assert not publisher.is_closed and publisher.closed_exception is None


def test_executor_none_is_type_error_checked_before_capacity(core: Core) -> None:
    with pytest.raises(TypeError, match=r"^executor must not be None; leave it out to use the default executor$"):
        core.SubmissionPublisher(None, 0)  # type: ignore[arg-type]


@pytest.mark.parametrize("capacity", [0, -1])
def test_non_positive_capacity_is_value_error(core: Core, capacity: int) -> None:
    with pytest.raises(ValueError, match=rf"^max_buffer_capacity must be positive, got {capacity}$"):
        core.SubmissionPublisher(direct_executor, capacity)


@pytest.mark.parametrize("capacity", [1.5, "8", True])
def test_non_int_capacity_is_type_error(core: Core, capacity: Any) -> None:
    with pytest.raises(TypeError, match=r"^max_buffer_capacity must be an int, got "):
        core.SubmissionPublisher(direct_executor, capacity)


def test_non_executor_is_type_error(core: Core) -> None:
    with pytest.raises(TypeError, match=r"^executor must be a concurrent.futures.Executor, an object with"):
        core.SubmissionPublisher(42)  # type: ignore[arg-type]


def test_handler_must_be_callable(core: Core) -> None:
    with pytest.raises(TypeError, match=r"^handler must be callable or None, got 'x'$"):
        core.SubmissionPublisher(direct_executor, 4, "x")  # type: ignore[arg-type]


def test_accepts_futures_executor_and_plain_callable(core: Core) -> None:
    with ThreadPoolExecutor(1) as pool:
        publisher: SubmissionPublisher[int] = core.SubmissionPublisher(pool)
        future = publisher.consume(lambda item: None)
        publisher.submit(1)
        publisher.close()
        assert future.result(timeout=10) is None
    ran: list[object] = []
    publisher = core.SubmissionPublisher(lambda task: ran.append(task) or task())
    recorder = Recorder(initial=1)
    publisher.subscribe(recorder)
    publisher.submit(7)
    assert recorder.items == [7] and ran


# --- subscribe -----------------------------------------------------------------------


def test_subscribe_none_is_type_error(core: Core) -> None:
    publisher, _ = manual(core)
    with pytest.raises(TypeError, match=r"^subscriber must not be None \(rule 1.9\)$"):
        publisher.subscribe(None)  # type: ignore[arg-type]
    assert not publisher.has_subscribers


@pytest.mark.parametrize(("subscriber", "shown"), [(42, "42"), (object(), "<object object at 0x[0-9a-f]+>")])
def test_subscribe_of_what_is_no_subscriber_is_type_error(core: Core, subscriber: Any, shown: str) -> None:
    publisher, executor = manual(core)
    with pytest.raises(
        TypeError, match=rf"^subscriber must be a Subscriber \(with a callable on_subscribe\), got {shown}$"
    ):
        publisher.subscribe(subscriber)
    assert not publisher.has_subscribers and not executor.tasks


def test_on_subscribe_runs_on_the_executor_not_in_subscribe(core: Core) -> None:
    publisher, executor = manual(core)
    recorder = Recorder()
    publisher.subscribe(recorder)
    assert recorder.signals == [] and publisher.is_subscribed(recorder)
    executor.run_all()
    assert recorder.kinds() == ["on_subscribe"]


def test_items_submitted_before_on_subscribe_are_buffered(core: Core) -> None:
    publisher, executor = manual(core)
    recorder = Recorder(initial=5)
    publisher.subscribe(recorder)
    assert publisher.submit(1) == 1 and publisher.submit(2) == 2
    executor.run_all()
    assert recorder.items == [1, 2]


def test_duplicate_subscribe_errors_existing_subscription_without_second_on_subscribe(core: Core) -> None:
    publisher, executor = manual(core)
    recorder = Recorder()
    publisher.subscribe(recorder)
    executor.run_all()
    publisher.subscribe(recorder)
    executor.run_all()
    assert recorder.kinds() == ["on_subscribe", "on_error"]
    assert isinstance(recorder.error, DuplicateSubscriptionError)
    assert str(recorder.error).endswith("is already subscribed to this publisher (rule 2.12)")
    assert not publisher.is_subscribed(recorder)
    assert publisher.number_of_subscribers == 0


def test_subscribe_after_close_gets_on_subscribe_then_on_complete(core: Core) -> None:
    publisher, executor = manual(core)
    publisher.close()
    recorder = Recorder()
    publisher.subscribe(recorder)
    executor.run_all()
    assert recorder.kinds() == ["on_subscribe", "on_complete"]
    assert not publisher.has_subscribers


def test_subscribe_after_close_exceptionally_gets_the_error(core: Core) -> None:
    publisher, executor = manual(core)
    boom = OSError("boom")
    publisher.close_exceptionally(boom)
    recorder = Recorder()
    publisher.subscribe(recorder)
    executor.run_all()
    assert recorder.kinds() == ["on_subscribe", "on_error"] and recorder.error is boom


def test_on_subscribe_raising_closes_with_on_error_of_that_exception_once(core: Core) -> None:
    handled: list[Any] = []
    publisher, executor = manual(core, handler=lambda s, e: handled.append(e))
    boom = RuntimeError("on_subscribe failed")

    class Failing(Recorder):
        def on_subscribe(self, subscription: Any) -> None:
            super().on_subscribe(subscription)
            raise boom

    recorder = Failing()
    publisher.subscribe(recorder)
    executor.run_all()
    assert recorder.kinds() == ["on_subscribe", "on_error"] and recorder.error is boom
    assert handled == []
    assert publisher.number_of_subscribers == 0


def test_on_error_raising_after_a_raising_on_subscribe_is_logged(core: Core, caplog: pytest.LogCaptureFixture) -> None:
    # as every flowpy publisher does (docs/java-mapping.md); it was dropped silently
    publisher, executor = manual(core)
    failure = ValueError("on_error failed too")

    class Worse(Recorder):
        def on_subscribe(self, subscription: Any) -> None:
            super().on_subscribe(subscription)
            raise RuntimeError("not now")

        def on_error(self, error: BaseException) -> None:
            super().on_error(error)
            raise failure

    recorder = Worse()
    publisher.subscribe(recorder)
    with caplog.at_level(logging.ERROR, logger="flowpy"):
        executor.run_all()
    assert recorder.kinds() == ["on_subscribe", "on_error"]
    assert publisher.number_of_subscribers == 0
    [record] = caplog.records
    assert record.getMessage().startswith(f"on_error of {recorder!r} raised (rule 2.13): ")
    assert record.exc_info is not None and record.exc_info[1] is failure


def test_resubscribe_after_cancel_gets_a_new_subscription(core: Core) -> None:
    publisher, executor = manual(core)
    recorder = Recorder()
    publisher.subscribe(recorder)
    executor.run_all()
    first = recorder.subscription
    recorder.cancel()
    assert publisher.is_subscribed(recorder)  # until the cancel is processed
    executor.run_all()
    assert not publisher.is_subscribed(recorder)
    recorder.subscription = None
    publisher.subscribe(recorder)
    executor.run_all()
    assert recorder.subscription is not None and recorder.subscription is not first


def test_executor_refusing_subscribe_propagates_and_subscriber_is_not_added(core: Core) -> None:
    publisher = core.SubmissionPublisher(RejectingExecutor(0, RuntimeError("full")))
    recorder = Recorder()
    with pytest.raises(RuntimeError, match=r"^full$"):
        publisher.subscribe(recorder)
    assert recorder.signals == [] and not publisher.has_subscribers


# --- submit ------------------------------------------------------------------------------


def test_submit_none_is_type_error_even_when_closed(core: Core) -> None:
    publisher, _ = manual(core)
    publisher.close()
    with pytest.raises(TypeError, match=r"^item must not be None \(rule 2.13\)$"):
        publisher.submit(None)


def test_submit_without_subscribers_returns_zero(core: Core) -> None:
    publisher, _ = manual(core)
    assert publisher.submit(1) == 0


def test_submit_after_close_raises_closed_error(core: Core) -> None:
    publisher, _ = manual(core)
    publisher.close()
    with pytest.raises(ClosedPublisherError, match=r"^cannot submit\(\): publisher was closed by close\(\)$"):
        publisher.submit(1)


def test_submit_after_close_exceptionally_says_so(core: Core) -> None:
    publisher, _ = manual(core)
    publisher.close_exceptionally(ValueError("x"))
    with pytest.raises(
        ClosedPublisherError,
        match=r"^cannot submit\(\): publisher was closed by close_exceptionally\(\); check closed_exception$",
    ):
        publisher.submit(1)


def test_submit_returns_maximum_lag_over_subscribers(core: Core) -> None:
    publisher, executor = manual(core)
    fast, slow = Recorder(initial=MAX), Recorder()
    publisher.subscribe(fast)
    publisher.subscribe(slow)
    executor.run_all()
    assert [publisher.submit(i) for i in range(3)] == [1, 2, 3]
    executor.run_all()
    assert fast.items == [0, 1, 2] and slow.items == []
    assert publisher.estimate_maximum_lag() == 3
    assert publisher.estimate_minimum_demand() == -3


def test_with_zero_demand_offering_never_starts_a_task(core: Core) -> None:
    publisher, executor = manual(core)
    publisher.subscribe(Recorder())
    executor.run_all()
    for i in range(10):
        publisher.submit(i)
    assert not executor.tasks


def test_producers_start_one_task_not_one_per_item(core: Core) -> None:
    publisher, executor = manual(core)
    publisher.subscribe(Recorder(initial=MAX))
    executor.run_all()
    for i in range(100):
        publisher.submit(i)
    assert len(executor.tasks) == 1


def test_a_task_still_queued_takes_the_next_batch_instead_of_a_new_task(core: Core) -> None:
    # A producer blocked for space runs the queued task's work inline, so the
    # task itself stays queued, stale. When the consumer must start again,
    # that task (not yet begun) will claim the work: no second task is
    # handed over, and no pool thread is woken for nothing per batch.
    publisher, executor = manual(core, capacity=4)
    recorder = Recorder(initial=MAX)
    publisher.subscribe(recorder)
    executor.run_all()
    (subscription,) = publisher._subscriptions
    publisher.submit(0)
    assert len(executor.tasks) == 1
    assert subscription.claim_pending()
    subscription.consume()  # the blocked producer's inline run
    assert recorder.items == [0]
    publisher.submit(1)  # the consumer starts again: the stale task will do it
    publisher.submit(2)
    assert len(executor.tasks) == 1
    executor.run_all()
    assert recorder.items == [0, 1, 2]
    publisher.submit(3)  # the stale task has run: a new one is handed over
    assert len(executor.tasks) == 1
    executor.run_all()
    assert recorder.items == [0, 1, 2, 3]
    publisher.close()
    executor.run_all()
    assert recorder.completed


@pytest.mark.timeout(30)
def test_submit_blocks_while_a_buffer_is_full_until_consumed(core: Core) -> None:
    publisher, executor = manual(core, capacity=2)
    recorder = Recorder()
    publisher.subscribe(recorder)
    executor.run_all()
    publisher.submit(1)
    publisher.submit(2)
    returned = threading.Event()

    def produce() -> None:
        publisher.submit(3)
        returned.set()

    producer = threading.Thread(target=produce)
    producer.start()
    assert not returned.wait(0.05)  # still blocked: the buffer is full
    recorder.request(1)  # starts a task; the blocked producer runs it itself
    assert returned.wait(10)
    producer.join()
    executor.run_all()
    assert recorder.items == [1]
    recorder.request(5)
    executor.run_all()
    assert recorder.items == [1, 2, 3]


@pytest.mark.timeout(60)
def test_capacity_one_with_blocking_submits_delivers_every_item(core: Core) -> None:
    with core.SubmissionPublisher[int](DaemonThreadPool(2), 1) as publisher:
        received: list[int] = []
        future = publisher.consume(received.append)
        for i in range(20_000):
            publisher.submit(i)
    future.result(timeout=30)
    assert received == list(range(20_000))


@pytest.mark.timeout(30)
def test_blocked_producer_on_the_only_pool_thread_does_not_deadlock(core: Core) -> None:
    pool = DaemonThreadPool(1)
    publisher: SubmissionPublisher[int] = core.SubmissionPublisher(pool, 2)
    recorder = Recorder(initial=MAX)
    publisher.subscribe(recorder)

    def produce() -> str:
        for i in range(1_000):
            publisher.submit(i)
        publisher.close()
        return "done"

    result = pool.submit(produce)
    assert result.result(timeout=20) == "done"
    assert recorder.done.wait(10)
    assert recorder.items == list(range(1_000)) and recorder.completed


def test_executor_refusing_in_submit_signals_on_error_to_that_subscriber_and_submit_goes_on(core: Core) -> None:
    executor = RejectingExecutor(accept=2)
    publisher = core.SubmissionPublisher(executor)
    first, second = Recorder(initial=MAX), Recorder(initial=MAX)
    publisher.subscribe(first)
    publisher.subscribe(second)
    executor.inner.run_all()
    executor.accept = 1  # the first subscriber's task is accepted, the second's refused
    assert publisher.submit(1) == 1
    assert second.kinds() == ["on_subscribe", "on_error"]
    assert second.error is executor.error
    executor.inner.run_all()
    assert first.items == [1]
    assert publisher.number_of_subscribers == 1
    executor.accept = 10
    publisher.submit(2)
    publisher.close()
    executor.inner.run_all()
    assert first.items == [1, 2] and first.completed
    assert second.kinds() == ["on_subscribe", "on_error"] and second.violations == []


def test_shut_down_pool_mid_stream_fails_the_consume_future_and_keeps_others(core: Core) -> None:
    pool = DaemonThreadPool(1)
    publisher: SubmissionPublisher[int] = core.SubmissionPublisher(pool, 4)
    done = publisher.consume(lambda item: None)
    direct = Recorder(initial=MAX)
    publisher.subscribe(direct)  # on the same pool
    assert pool.wait_idle(10)
    publisher.submit(1)
    assert pool.wait_idle(10)
    pool.shutdown()
    publisher.submit(2)  # both subscriptions' tasks are refused: on_error on this thread
    with pytest.raises(RuntimeError, match=r"^cannot schedule new tasks after shutdown$"):
        done.result(timeout=10)
    assert direct.items == [1] and isinstance(direct.error, RuntimeError)
    assert publisher.number_of_subscribers == 0


def test_stale_task_closing_the_subscription_before_the_producer_starts_one_is_not_an_error(core: Core) -> None:
    # The race: a producer blocked for space ran the queued consumer task
    # inline, so the original task is still queued. The producer's next
    # offer marks a new task pending; before it hands that task to the
    # executor, a cancel arrives (and starts nothing, a task being due) and
    # the stale task claims the pending flag, sees the cancel and closes the
    # subscription. The producer must not fail. The window lies between two
    # Python statements; a trace function stops the producer in it.
    publisher, executor = manual(core, capacity=1)
    recorder = Recorder(initial=MAX)
    publisher.subscribe(recorder)
    executor.run_all()
    (subscription,) = publisher._subscriptions
    if core.name != "python":
        pytest.skip("the window exists only between Python statements")
    publisher.submit(0)
    (stale,) = executor.tasks
    executor.tasks.clear()
    assert subscription.claim_pending()
    subscription.consume()  # the blocked producer's inline run: delivers 0, goes idle
    assert recorder.items == [0]

    def in_the_window(frame: Any, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code.co_name in {"_start_signal", "_start_or_raise"}:
            sys.settrace(None)
            recorder.cancel()
            stale()

    sys.settrace(in_the_window)
    try:
        assert publisher.submit(1) == 1
    finally:
        sys.settrace(None)
    executor.run_all()
    assert recorder.kinds() == ["on_subscribe", "on_next"]  # a cancel is silent
    assert subscription.is_closed
    assert publisher.submit(2) == 0


def test_reentrant_submit_into_a_full_buffer_on_direct_executor_raises_instead_of_hanging(core: Core) -> None:
    publisher: SubmissionPublisher[int] = core.SubmissionPublisher(direct_executor, 1)
    failures: list[BaseException] = []

    def resubmit(item: int) -> None:
        if item == 0:
            try:
                publisher.submit(1)
                publisher.submit(2)  # the buffer holds 1 and only this thread drains it
            except BaseException as exc:
                failures.append(exc)
                raise

    recorder = Recorder(initial=MAX, on_next_hook=resubmit)
    publisher.subscribe(recorder)
    publisher.submit(0)
    (failure,) = failures
    assert type(failure) is ReentrantSubmitError
    assert re.fullmatch(
        r"cannot submit\(\): the buffer of <.*> is full and this thread is inside one of its methods, so it "
        r"could never drain; submit from another thread, use offer\(\), or deliver on a pool executor",
        str(failure),
    )
    assert recorder.items == [0] and recorder.error is failure  # on_next raised it: rule 2.13 path


def test_reentrant_offer_with_timeout_into_a_full_buffer_drops_without_waiting(core: Core) -> None:
    publisher: SubmissionPublisher[int] = core.SubmissionPublisher(direct_executor, 1)
    results: list[int] = []

    def reoffer(item: int) -> None:
        if item == 0:
            results.append(publisher.offer(1, timeout=60))
            results.append(publisher.offer(2, timeout=60))

    recorder = Recorder(initial=MAX, on_next_hook=reoffer)
    publisher.subscribe(recorder)
    publisher.submit(0)
    assert results == [1, -1]
    assert recorder.items == [0, 1]


@pytest.mark.timeout(30)
def test_reentrant_submit_from_a_task_run_by_a_blocked_producer_raises(core: Core) -> None:
    # A producer blocked for space on a one-thread pool runs the queued
    # consumer task itself; that subscriber submits to the same publisher
    # from on_next, which would wait for the blocked producer's turn.
    pool = DaemonThreadPool(1)
    publisher: SubmissionPublisher[int] = core.SubmissionPublisher(pool, 1)
    failures: list[BaseException] = []

    def resubmit(item: int) -> None:
        if item == 100:
            try:
                publisher.submit(-1)
            except ReentrantSubmitError as exc:
                failures.append(exc)

    recorder = Recorder(initial=MAX, on_next_hook=resubmit)
    publisher.subscribe(recorder)

    def produce() -> None:
        for i in range(200):
            publisher.submit(i)
        publisher.close()

    pool.submit(produce).result(timeout=20)
    assert recorder.done.wait(10)
    assert recorder.items == list(range(200))
    assert [str(f) for f in failures] == [
        "cannot submit(): this thread's own submit() is waiting for buffer space, and a subscriber it "
        "delivers to meanwhile must not publish to the same publisher"
    ]


def two_full_buffers(
    core: Core, first_hook: Any = None
) -> tuple[SubmissionPublisher[Any], ManualExecutor, Recorder, Recorder]:
    """Capacity 1, two subscribers each holding item 0; the first has requested, and its task is queued."""
    publisher, executor = manual(core, capacity=1)
    first, second = Recorder(initial=MAX, on_next_hook=first_hook), Recorder()
    publisher.subscribe(first)
    publisher.subscribe(second)
    executor.run_all()
    publisher.submit(0)
    return publisher, executor, first, second


@pytest.mark.timeout(30)
def test_a_blocked_producer_drains_the_buffer_it_can_then_waits_for_the_next(core: Core) -> None:
    # Both buffers are full: the producer runs the first subscriber's queued
    # task itself (without the GIL, after CLAIM_DELAY), then waits for the
    # second, which has requested nothing.
    delivered_on: list[int] = []
    delivered = threading.Event()

    def record(item: int) -> None:
        delivered_on.append(threading.get_ident())
        delivered.set()

    publisher, executor, first, second = two_full_buffers(core, record)
    producer = threading.Thread(target=publisher.submit, args=(1,), daemon=True)
    producer.start()
    assert delivered.wait(10)
    # Waiting for space in the second buffer. (_blocked is set already while
    # the producer drains the first, which without the GIL runs on meanwhile.)
    wait_until_waiting(producer)
    assert publisher._blocked == producer.ident
    assert first.items == [0] and delivered_on == [producer.ident]  # delivered by the blocked producer's thread
    second.request(2)  # its task is queued; the producer wakes, runs it, and goes on
    producer.join(10)
    assert not producer.is_alive() and publisher._blocked == 0
    executor.run_all()
    publisher.close()
    executor.run_all()
    assert first.items == second.items == [0, 1] and first.completed and second.completed


def test_a_full_buffer_that_a_drain_frees_meanwhile_takes_the_item_without_waiting(core: Core) -> None:
    # The blocked producer runs the first subscriber's task; its on_next runs
    # the executor's queue, and so the second's task, which frees the second buffer.
    def run_queued(item: int) -> None:
        if item == 0:
            executor.run_all()

    publisher, executor, first, second = two_full_buffers(core, run_queued)
    second.request(MAX)
    assert publisher.submit(1) == 1
    assert first.items == second.items == [0]
    executor.run_all()
    assert first.items == second.items == [0, 1]
    publisher.close()


def test_a_full_buffer_that_closes_meanwhile_is_pruned_and_the_item_goes_to_the_rest(core: Core) -> None:
    def cancel_second(item: int) -> None:
        if item == 0:
            second.cancel()
            executor.run_all()  # the second's task sees the cancel

    publisher, executor, first, second = two_full_buffers(core, cancel_second)
    assert publisher.submit(1) == 1
    assert publisher.number_of_subscribers == 1
    executor.run_all()
    assert first.items == [0, 1] and second.items == []
    publisher.close()


# --- offer ---------------------------------------------------------------------------------


def test_offer_returns_minus_the_number_of_subscribers_that_dropped(core: Core) -> None:
    publisher, executor = manual(core, capacity=1)
    recorders = [Recorder() for _ in range(3)]
    for recorder in recorders:
        publisher.subscribe(recorder)
    executor.run_all()
    assert publisher.offer(1) == 1
    assert publisher.offer(2) == -3
    recorders[0].request(1)
    executor.run_all()
    assert publisher.offer(3) == -2
    assert [r.items for r in recorders] == [[1], [], []]


def test_offer_calls_on_drop_with_subscriber_and_item_and_retries_once_when_true(core: Core) -> None:
    publisher, executor = manual(core, capacity=1)
    recorder = Recorder()
    publisher.subscribe(recorder)
    executor.run_all()
    publisher.offer("a")
    calls: list[tuple[Any, Any]] = []

    def on_drop(subscriber: Any, item: Any) -> bool:
        calls.append((subscriber, item))
        recorder.request(1)
        executor.run_all()  # frees the slot, so the one retry succeeds
        return True

    assert publisher.offer("b", on_drop) == 1
    assert calls == [(recorder, "b")]
    recorder.request(1)
    executor.run_all()
    assert recorder.items == ["a", "b"]


def test_offer_on_drop_false_drops_and_true_retries_only_once(core: Core) -> None:
    publisher, executor = manual(core, capacity=1)
    publisher.subscribe(Recorder())
    executor.run_all()
    publisher.offer(1)
    calls = []
    assert publisher.offer(2, lambda s, i: calls.append(i) or False) == -1
    assert publisher.offer(3, lambda s, i: calls.append(i) or True) == -1
    assert calls == [2, 3]


def test_offer_on_drop_exception_propagates(core: Core) -> None:
    publisher, executor = manual(core, capacity=1)
    publisher.subscribe(Recorder())
    executor.run_all()
    publisher.offer(1)

    def on_drop(subscriber: Any, item: Any) -> bool:
        raise KeyError("drop")

    with pytest.raises(KeyError):
        publisher.offer(2, on_drop)


def test_offer_after_close_and_none_item(core: Core) -> None:
    publisher, _ = manual(core)
    with pytest.raises(TypeError, match=r"^item must not be None \(rule 2\.13\)$"):
        publisher.offer(None)
    publisher.close()
    with pytest.raises(ClosedPublisherError, match=r"^cannot offer\(\): publisher was closed by close\(\)$"):
        publisher.offer(1)
    with pytest.raises(ClosedPublisherError, match=r"^cannot offer\(\): publisher was closed by close\(\)$"):
        publisher.offer(1, timeout=1)


def test_offer_checks_on_drop_and_timeout_at_the_call_even_when_nothing_drops(core: Core) -> None:
    publisher, executor = manual(core)
    publisher.subscribe(Recorder())
    executor.run_all()
    with pytest.raises(TypeError, match=r"^on_drop must be callable or None, got 5$"):
        publisher.offer(1, on_drop=5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^timeout must be a number of seconds or None, got '1'$"):
        publisher.offer(1, timeout="1")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^timeout must be a number of seconds or None, got True$"):
        publisher.offer(1, timeout=True)
    assert publisher.estimate_maximum_lag() == 0
    assert publisher.offer(1, timeout=-3) == 1


@pytest.mark.timeout(30)
def test_offer_with_timeout_waits_and_succeeds_when_space_frees(core: Core) -> None:
    publisher: SubmissionPublisher[int] = core.SubmissionPublisher(DaemonThreadPool(2), 1)
    started = threading.Event()
    release = threading.Event()

    def hook(item: int) -> None:
        started.set()
        release.wait(10)

    recorder = Recorder(initial=MAX, on_next_hook=hook)
    publisher.subscribe(recorder)
    publisher.submit(1)
    assert started.wait(10)  # item 1 taken; on_next is busy
    publisher.submit(2)  # fills the single slot
    threading.Timer(0.05, release.set).start()
    assert publisher.offer(3, timeout=10) >= 1
    publisher.close()
    assert recorder.done.wait(10)
    assert recorder.items == [1, 2, 3]


@pytest.mark.timeout(30)
@pytest.mark.parametrize("timeout", [math.inf, 1e300, 2**70], ids=["inf", "1e300", "2**70"])
def test_offer_with_a_timeout_beyond_what_the_platform_can_wait_waits_until_space_frees(
    core: Core, timeout: float
) -> None:
    publisher, executor = manual(core, capacity=1)
    recorder = Recorder()
    publisher.subscribe(recorder)
    executor.run_all()
    publisher.submit(1)
    results: list[object] = []

    def produce() -> None:
        try:
            results.append(publisher.offer(2, timeout=timeout))
        except BaseException as exc:
            results.append(exc)

    producer = threading.Thread(target=produce)
    producer.start()
    wait_until_waiting(producer)  # for space
    recorder.request(5)  # a task is due: the waiting producer runs it, which frees the slot
    producer.join(10)
    assert not producer.is_alive()
    assert results == [1] and recorder.items == [1]
    executor.run_all()
    assert recorder.items == [1, 2]


def test_offer_with_a_nan_timeout_is_refused_at_the_call(core: Core) -> None:
    publisher, executor = manual(core, capacity=1)
    publisher.subscribe(Recorder())
    executor.run_all()
    with pytest.raises(ValueError, match=r"^timeout must be a number of seconds, got nan$"):
        publisher.offer(1, timeout=math.nan)
    assert publisher.estimate_maximum_lag() == 0


def test_offer_with_timeout_gives_up_after_the_timeout(core: Core) -> None:
    publisher, executor = manual(core, capacity=1)
    publisher.subscribe(Recorder())
    executor.run_all()
    publisher.offer(1)
    drops: list[int] = []
    assert publisher.offer(2, lambda s, i: drops.append(i) or False, timeout=0.01) == -1
    assert drops == [2]
    assert publisher.offer(3, timeout=-5) == -1  # negative means no wait


# --- close / close_exceptionally -------------------------------------------------------


def test_close_delivers_buffered_items_only_as_far_as_demand_then_completes(core: Core) -> None:
    publisher, executor = manual(core)
    recorder = Recorder(initial=2)
    publisher.subscribe(recorder)
    for i in range(4):
        publisher.submit(i)
    publisher.close()
    executor.run_all()
    assert recorder.items == [0, 1] and not recorder.completed  # items left, no demand
    recorder.request(1)
    executor.run_all()
    assert recorder.items == [0, 1, 2] and not recorder.completed
    recorder.request(1)
    executor.run_all()
    assert recorder.kinds()[-1] == "on_complete"


def test_close_completes_without_demand_when_buffer_empty(core: Core) -> None:
    publisher, executor = manual(core)
    recorder = Recorder()
    publisher.subscribe(recorder)
    publisher.close()
    executor.run_all()
    assert recorder.kinds() == ["on_subscribe", "on_complete"]
    assert publisher.number_of_subscribers == 0 and publisher.is_closed


def test_close_twice_and_after_close_exceptionally_does_nothing(core: Core) -> None:
    publisher, executor = manual(core)
    recorder = Recorder()
    publisher.subscribe(recorder)
    publisher.close_exceptionally(OSError("first"))
    publisher.close()
    publisher.close_exceptionally(OSError("second"))
    executor.run_all()
    assert recorder.kinds() == ["on_subscribe", "on_error"] and str(recorder.error) == "first"
    other, _ = manual(core)
    other.close()
    other.close_exceptionally(OSError("late"))
    assert other.closed_exception is None


def test_close_exceptionally_drops_buffered_items(core: Core) -> None:
    publisher, executor = manual(core)
    recorder = Recorder(initial=MAX)
    publisher.subscribe(recorder)
    for i in range(5):
        publisher.submit(i)
    publisher.close_exceptionally(OSError("stop"))
    executor.run_all()
    assert recorder.kinds() == ["on_subscribe", "on_error"]


def test_close_exceptionally_requires_an_exception(core: Core) -> None:
    publisher, _ = manual(core)
    with pytest.raises(TypeError, match=r"^error must be an exception, got None$"):
        publisher.close_exceptionally(None)  # type: ignore[arg-type]
    assert not publisher.is_closed


def test_context_manager_closes_on_exit(core: Core) -> None:
    executor = ManualExecutor()
    recorder = Recorder()
    with core.SubmissionPublisher(executor) as publisher:
        publisher.subscribe(recorder)
    executor.run_all()
    assert publisher.is_closed and recorder.completed


@pytest.mark.timeout(30)
def test_close_returns_at_once_while_a_producer_is_blocked_and_submit_raises(core: Core) -> None:
    publisher, executor = manual(core, capacity=1)
    recorder = Recorder()
    publisher.subscribe(recorder)
    executor.run_all()
    publisher.submit(1)
    errors: list[BaseException] = []
    entered = threading.Event()

    def produce() -> None:
        entered.set()
        try:
            publisher.submit(2)
        except ClosedPublisherError as exc:
            errors.append(exc)

    producer = threading.Thread(target=produce)
    producer.start()
    assert entered.wait(10)
    while not publisher._blocked:  # the producer is waiting for space
        threading.Event().wait(0.001)
    publisher.close()
    producer.join(10)
    assert not producer.is_alive()
    assert len(errors) == 1 and "publisher was closed by close()" in str(errors[0])
    recorder.request(5)
    executor.run_all()
    assert recorder.items == [1] and recorder.completed


@pytest.mark.timeout(30)
@pytest.mark.parametrize("many", [False, True], ids=["submit", "submit_many"])
def test_a_producer_waiting_for_its_turn_goes_on_when_the_blocked_producer_finishes(core: Core, many: bool) -> None:
    publisher, executor = manual(core, capacity=1)
    recorder = Recorder()
    publisher.subscribe(recorder)
    executor.run_all()
    publisher.submit(1)  # the buffer is full, and nothing is requested
    done: list[str] = []

    def produce(item: int, name: str) -> None:
        if many and name == "waiting":
            publisher.submit_many([item])
        else:
            publisher.submit(item)
        done.append(name)

    blocked = threading.Thread(target=produce, args=(2, "blocked"))
    blocked.start()
    while not publisher._blocked:  # waiting for space, holding the turn
        threading.Event().wait(0.001)
    waiting = threading.Thread(target=produce, args=(3, "waiting"))
    waiting.start()
    while not publisher._turn_waiters:  # waiting for its turn
        threading.Event().wait(0.001)
    recorder.request(5)  # the blocked producer drains inline, then hands the turn over
    blocked.join(10)
    waiting.join(10)
    assert not blocked.is_alive() and not waiting.is_alive()
    # Both returned. Which appended first is not ordered once the lock is
    # released (without the GIL, the two threads run on at once): the order
    # of publication is, and recorder.items checks it.
    assert sorted(done) == ["blocked", "waiting"]
    assert publisher._turn_waiters == 0 and publisher._blocked == 0
    executor.run_all()
    assert recorder.items == [1, 2, 3]
    publisher.close()
    executor.run_all()
    assert recorder.completed


# --- errors from subscribers -------------------------------------------------------------


def test_on_next_raising_calls_handler_then_on_error_with_same_exception_others_unaffected(core: Core) -> None:
    handled: list[tuple[Any, BaseException]] = []
    publisher, executor = manual(core, handler=lambda s, e: handled.append((s, e)))
    boom = ValueError("bad item")

    def fail(item: Any) -> None:
        if item == 1:
            raise boom

    failing, healthy = Recorder(initial=MAX, on_next_hook=fail), Recorder(initial=MAX)
    publisher.subscribe(failing)
    publisher.subscribe(healthy)
    for i in range(3):
        publisher.submit(i)
    publisher.close()
    executor.run_all()
    assert handled == [(failing, boom)]
    assert failing.kinds() == ["on_subscribe", "on_next", "on_next", "on_error"] and failing.error is boom
    assert healthy.items == [0, 1, 2] and healthy.completed


class _WithoutOnNext:
    """A duck-typed subscriber that lacks ``on_next``."""

    def __init__(self) -> None:
        self.signals: list[Any] = []
        self.done = threading.Event()

    def on_subscribe(self, subscription: Any) -> None:
        self.signals.append("on_subscribe")
        subscription.request(MAX)

    def on_error(self, error: BaseException) -> None:
        self.signals.append(error)
        self.done.set()

    def on_complete(self) -> None:
        self.signals.append("on_complete")
        self.done.set()


@pytest.mark.timeout(30)
def test_a_subscriber_without_on_next_ends_like_a_raising_on_next_and_the_others_go_on(core: Core) -> None:
    handled: list[tuple[Any, BaseException]] = []
    publisher: SubmissionPublisher[int] = core.SubmissionPublisher(
        DaemonThreadPool(2), 4, handler=lambda s, e: handled.append((s, e))
    )
    lacking, healthy = _WithoutOnNext(), Recorder(initial=MAX)
    publisher.subscribe(lacking)
    publisher.subscribe(healthy)
    for i in range(20):  # more than its buffer holds: a stuck subscription would block submit
        publisher.submit(i)
    assert lacking.done.wait(10)
    publisher.close()
    assert healthy.done.wait(10)
    assert healthy.items == list(range(20)) and healthy.completed
    ((subscriber, error),) = handled
    assert subscriber is lacking and isinstance(error, AttributeError) and "on_next" in str(error)
    assert lacking.signals == ["on_subscribe", error]
    assert not publisher.is_subscribed(lacking)


def test_a_subscriber_without_on_next_that_gets_no_item_completes(core: Core) -> None:
    publisher, executor = manual(core)
    lacking = _WithoutOnNext()
    publisher.subscribe(lacking)
    publisher.close()
    executor.run_all()
    assert lacking.signals == ["on_subscribe", "on_complete"]


def test_handler_exception_is_ignored(core: Core) -> None:
    def handler(subscriber: Any, error: BaseException) -> None:
        raise RuntimeError("handler failed")

    publisher, executor = manual(core, handler=handler)
    recorder = Recorder(initial=1, on_next_hook=lambda item: 1 / 0)
    publisher.subscribe(recorder)
    publisher.submit(1)
    executor.run_all()
    assert isinstance(recorder.error, ZeroDivisionError)


def test_on_error_and_on_complete_exceptions_are_ignored(core: Core) -> None:
    publisher, executor = manual(core)

    class Raising(Recorder):
        def on_complete(self) -> None:
            super().on_complete()
            raise RuntimeError("ignored")

    recorder = Raising()
    publisher.subscribe(recorder)
    publisher.close()
    executor.run_all()
    assert recorder.completed


# --- request / cancel ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("n", "error_type", "message"),
    [
        *[
            (n, ValueError, f"non-positive subscription request: n must be > 0 (rule 3.9), got {n}")
            for n in (0, -1, -(2**63))
        ],
        *[(n, TypeError, f"subscription request must be an int (rule 3.9), got {n!r}") for n in ("3", 1.0, None, True)],
    ],
)
def test_invalid_request_signals_error_citing_rule_3_9(core: Core, n: Any, error_type: type, message: str) -> None:
    publisher, executor = manual(core)
    recorder = Recorder()
    publisher.subscribe(recorder)
    executor.run_all()
    recorder.subscription.request(n)  # type: ignore[union-attr]
    executor.run_all()
    assert type(recorder.error) is error_type
    assert str(recorder.error) == message
    assert recorder.kinds() == ["on_subscribe", "on_error"]


def test_demand_saturates_at_long_max(core: Core) -> None:
    publisher, executor = manual(core)
    recorder = Recorder()
    publisher.subscribe(recorder)
    executor.run_all()
    recorder.request(MAX)
    recorder.request(MAX)
    recorder.request(1)
    assert publisher.estimate_minimum_demand() == MAX
    for i in range(3):
        publisher.submit(i)
    executor.run_all()
    assert recorder.items == [0, 1, 2] and recorder.error is None
    assert publisher.estimate_minimum_demand() == MAX


def test_request_updates_demand_synchronously(core: Core) -> None:
    publisher, executor = manual(core)
    assert publisher.estimate_minimum_demand() == 0
    recorder = Recorder()
    publisher.subscribe(recorder)
    executor.run_all()
    recorder.request(1)
    assert publisher.estimate_minimum_demand() == 1


def test_cancel_stops_delivery_drops_items_and_later_requests_are_no_ops(core: Core) -> None:
    publisher, executor = manual(core)
    recorder = Recorder(initial=1)
    publisher.subscribe(recorder)
    for i in range(5):
        publisher.submit(i)
    executor.run_all()
    recorder.cancel()
    recorder.cancel()
    recorder.request(10)
    executor.run_all()
    assert recorder.items == [0] and recorder.kinds() == ["on_subscribe", "on_next"]
    assert publisher.number_of_subscribers == 0
    assert publisher.submit(99) == 0


def test_cancel_after_invalid_request_still_delivers_the_error(core: Core) -> None:
    publisher, executor = manual(core)
    recorder = Recorder()
    publisher.subscribe(recorder)
    executor.run_all()
    recorder.subscription.request(-1)  # type: ignore[union-attr]
    recorder.cancel()
    executor.run_all()
    assert isinstance(recorder.error, ValueError)


def test_request_and_cancel_never_raise_when_executor_refuses(core: Core) -> None:
    executor = RejectingExecutor(accept=1)
    publisher = core.SubmissionPublisher(executor)
    recorder = Recorder()
    publisher.subscribe(recorder)
    executor.inner.run_all()
    executor.accept = 0
    recorder.request(1)
    assert recorder.kinds() == ["on_subscribe", "on_error"]
    assert str(recorder.error) == "executor refused the task"
    recorder.cancel()
    assert publisher.number_of_subscribers == 0

    quiet = RejectingExecutor(accept=1)
    publisher = core.SubmissionPublisher(quiet)
    silent = Recorder()
    publisher.subscribe(silent)
    quiet.inner.run_all()
    quiet.accept = 0
    silent.cancel()  # refused too: closes without a signal
    assert silent.kinds() == ["on_subscribe"] and publisher.number_of_subscribers == 0


def test_cancel_drops_reference_to_subscriber(core: Core) -> None:
    publisher, executor = manual(core)
    recorder = Recorder()
    publisher.subscribe(recorder)
    executor.run_all()
    recorder.cancel()
    executor.run_all()
    import weakref

    ref = weakref.ref(recorder)
    subscription = recorder.subscription
    del recorder
    gc.collect()
    assert ref() is None and subscription is not None


# --- consume ------------------------------------------------------------------------------


def test_consume_completes_future_when_stream_completes(core: Core) -> None:
    publisher, executor = manual(core)
    seen: list[int] = []
    future = publisher.consume(seen.append)
    for i in range(3):
        publisher.submit(i)
    publisher.close()
    executor.run_all()
    assert future.result(timeout=0) is None and seen == [0, 1, 2]


def test_consume_fails_future_with_stream_error(core: Core) -> None:
    publisher, executor = manual(core)
    future = publisher.consume(lambda item: None)
    publisher.close_exceptionally(OSError("disk"))
    executor.run_all()
    with pytest.raises(OSError, match=r"^disk$"):
        future.result(timeout=0)


def test_consume_fn_raising_fails_future_and_cancels(core: Core) -> None:
    publisher, executor = manual(core)
    future = publisher.consume(lambda item: 1 / item)
    publisher.submit(1)
    publisher.submit(0)
    executor.run_all()
    assert isinstance(future.exception(timeout=0), ZeroDivisionError)
    assert publisher.number_of_subscribers == 0


def test_consume_future_cancel_cancels_the_subscription(core: Core) -> None:
    publisher, executor = manual(core)
    seen: list[int] = []
    future = publisher.consume(seen.append)
    executor.run_all()
    publisher.submit(1)
    executor.run_all()
    assert future.cancel()
    executor.run_all()
    assert publisher.number_of_subscribers == 0
    publisher.submit(2)
    executor.run_all()
    assert seen == [1]
    with pytest.raises(CancelledError):
        future.result(timeout=0)


@pytest.mark.parametrize("fn", [None, 5])
def test_consume_of_what_is_not_callable_is_type_error_at_the_call(core: Core, fn: Any) -> None:
    # consume(5) returned a future that failed only at the first item
    publisher, executor = manual(core)
    with pytest.raises(TypeError, match=rf"^fn must be callable, got {fn!r}$"):
        publisher.consume(fn)
    executor.run_all()
    assert publisher.number_of_subscribers == 0


# --- queries ---------------------------------------------------------------------------------


def test_subscriber_queries(core: Core) -> None:
    publisher, executor = manual(core)
    a, b = Recorder(), Recorder()
    assert not publisher.has_subscribers and publisher.subscribers == []
    publisher.subscribe(a)
    publisher.subscribe(b)
    assert publisher.has_subscribers and publisher.number_of_subscribers == 2
    assert publisher.subscribers == [a, b]
    subscribers = publisher.subscribers
    subscribers.clear()  # a new list each time
    assert publisher.number_of_subscribers == 2
    assert publisher.is_subscribed(a) and not publisher.is_subscribed(Recorder())
    with pytest.raises(TypeError, match=r"^subscriber must not be None$"):
        publisher.is_subscribed(None)  # type: ignore[arg-type]
    publisher.close()
    assert not publisher.is_subscribed(a) and publisher.number_of_subscribers == 0
    executor.run_all()


def test_unclosed_publisher_with_subscribers_warns(core: Core) -> None:
    publisher, _ = manual(core)
    publisher.subscribe(Recorder())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        del publisher
        gc.collect()
    assert any(issubclass(w.category, ResourceWarning) and "unclosed" in str(w.message) for w in caught)


def test_direct_executor_runs_signals_inside_the_calls_and_allows_reentrant_submit(core: Core) -> None:
    publisher: SubmissionPublisher[int] = core.SubmissionPublisher(direct_executor, 4)

    def resubmit(item: int) -> None:
        if item < 5:
            publisher.submit(item + 10)

    recorder = Recorder(initial=MAX, on_next_hook=resubmit)
    publisher.subscribe(recorder)
    assert recorder.kinds() == ["on_subscribe"]
    publisher.submit(1)
    assert recorder.items == [1, 11]
    publisher.close()
    assert recorder.completed and recorder.threads == {threading.get_ident()}


def test_delivers_exactly_the_demand_when_more_is_buffered(core: Core) -> None:
    publisher, executor = manual(core)
    recorder = Recorder()
    publisher.subscribe(recorder)
    executor.run_all()
    for i in range(3):
        publisher.submit(i)
    recorder.request(2)
    executor.run_all()
    assert recorder.items == [0, 1] and recorder.violations == []
    assert publisher.estimate_minimum_demand() == -1
