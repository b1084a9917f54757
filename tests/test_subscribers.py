"""Tests of flowpy.subscribers: SyncSubscriber, AsyncSubscriber, LambdaSubscriber, iterate, collect."""

from __future__ import annotations

import gc
import itertools
import logging
import math
import re
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flowpy._consumer import FutureSubscriber, no_result
from flowpy._demand import MAX_DEMAND
from flowpy.executors import DaemonThreadPool
from flowpy.flow import Publisher, Subscriber
from flowpy.sources import IterablePublisher, RangePublisher, error, just
from flowpy.subscribers import AsyncSubscriber, LambdaSubscriber, SyncSubscriber, collect, consume, iterate
from tests.operators.conftest import StubSubscription
from tests.sources_helpers import WAIT, CancelSpy, SpyPublisher, rejecting
from tests.support import GatedSlot, ManualExecutor, wait_until_waiting

# --- SyncSubscriber ----------------------------------------------------------------


class Summing(SyncSubscriber[int]):
    def __init__(self, stop_at: int | None = None, fail_at: int | None = None) -> None:
        super().__init__()
        self.items: list[int] = []
        self.stop_at = stop_at
        self.fail_at = fail_at
        self.completed = 0
        self.errors: list[BaseException] = []

    def when_next(self, item: int) -> bool:
        if item == self.fail_at:
            raise ArithmeticError(f"cannot add {item}")
        self.items.append(item)
        return item != self.stop_at

    def when_complete(self) -> None:
        self.completed += 1

    def when_error(self, error: BaseException) -> None:
        self.errors.append(error)


def test_sync_subscriber_requests_one_at_a_time_and_gets_every_item() -> None:
    spy = SpyPublisher()
    subscriber = Summing()
    spy.subscribe(subscriber)
    assert spy.requests == [1]
    for value in range(3):
        spy.subscriber.on_next(value)  # type: ignore[union-attr]
    spy.subscriber.on_complete()  # type: ignore[union-attr]
    assert spy.requests == [1, 1, 1, 1]
    assert subscriber.items == [0, 1, 2] and subscriber.completed == 1


def test_sync_subscriber_over_range_sums() -> None:
    subscriber = Summing()
    RangePublisher(0, 10).subscribe(subscriber)
    assert sum(subscriber.items) == 45 and subscriber.completed == 1


def test_sync_subscriber_when_next_false_cancels() -> None:
    spy = SpyPublisher()
    subscriber = Summing(stop_at=1)
    spy.subscribe(subscriber)
    spy.subscriber.on_next(0)  # type: ignore[union-attr]
    spy.subscriber.on_next(1)  # type: ignore[union-attr]
    assert spy.cancelled.is_set()
    spy.subscriber.on_next(2)  # type: ignore[union-attr]  # after cancel (rule 2.8): ignored
    spy.subscriber.on_complete()  # type: ignore[union-attr]
    assert subscriber.items == [0, 1] and subscriber.completed == 0


def test_sync_subscriber_when_next_raising_cancels_and_reports_to_when_error() -> None:
    spy = SpyPublisher()
    subscriber = Summing(fail_at=2)
    spy.subscribe(subscriber)
    for value in range(4):
        spy.subscriber.on_next(value)  # type: ignore[union-attr]
    assert spy.cancelled.is_set()
    assert subscriber.items == [0, 1]
    assert [str(e) for e in subscriber.errors] == ["cannot add 2"]


def test_sync_subscriber_second_subscription_is_cancelled() -> None:
    first, second = SpyPublisher(), SpyPublisher()
    subscriber = Summing()
    first.subscribe(subscriber)
    second.subscribe(subscriber)
    assert second.cancelled.is_set() and second.requests == []
    assert not first.cancelled.is_set()


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda s: s.on_subscribe(None), r"^subscription must not be None \(rule 2\.13\)$"),
        (lambda s: s.on_next(None), r"^item must not be None \(rule 2\.13\)$"),
        (lambda s: s.on_error(None), r"^error must not be None \(rule 2\.13\)$"),
    ],
)
def test_sync_subscriber_none_argument_raises_type_error(call: Callable[[Any], None], message: str) -> None:
    with pytest.raises(TypeError, match=message):
        call(Summing())


def test_sync_subscriber_default_when_error_logs(caplog: pytest.LogCaptureFixture) -> None:
    class Quiet(SyncSubscriber[int]):
        def when_next(self, item: int) -> bool:
            return True

    with caplog.at_level(logging.ERROR, logger="flowpy"):
        error(OSError("gone")).subscribe(Quiet())
    assert "received on_error" in caplog.text and "gone" in caplog.text


def test_sync_subscriber_terminal_signal_handled_once() -> None:
    spy = SpyPublisher()
    subscriber = Summing()
    spy.subscribe(subscriber)
    spy.subscriber.on_complete()  # type: ignore[union-attr]
    spy.subscriber.on_error(OSError("late"))  # type: ignore[union-attr]
    spy.subscriber.on_complete()  # type: ignore[union-attr]
    assert subscriber.completed == 1 and subscriber.errors == []


# --- AsyncSubscriber ---------------------------------------------------------------


class Collecting(AsyncSubscriber[int]):
    def __init__(self, executor: Any, stop_at: int | None = None, fail_at: int | None = None, **kw: Any) -> None:
        super().__init__(executor, **kw)
        self.items: list[int] = []
        self.threads: set[str] = set()
        self.stop_at = stop_at
        self.fail_at = fail_at
        self.completed = 0
        self.errors: list[BaseException] = []
        self.done = threading.Event()

    def when_next(self, item: int) -> bool:
        self.threads.add(threading.current_thread().name)
        if item == self.fail_at:
            raise LookupError(f"no {item}")
        self.items.append(item)
        return item != self.stop_at

    def when_complete(self) -> None:
        self.completed += 1
        self.done.set()

    def when_error(self, error: BaseException) -> None:
        self.errors.append(error)
        self.done.set()


def test_async_subscriber_handles_signals_only_on_the_executor() -> None:
    executor = ManualExecutor()
    spy = SpyPublisher()
    subscriber = Collecting(executor)
    spy.subscribe(subscriber)
    assert spy.requests == [], "on_subscribe must be handled on the executor"
    executor.run_all()
    assert spy.requests == [1]
    spy.subscriber.on_next(7)  # type: ignore[union-attr]
    spy.subscriber.on_complete()  # type: ignore[union-attr]
    assert subscriber.items == []
    executor.run_all()
    assert subscriber.items == [7] and subscriber.completed == 1
    assert spy.requests == [1, 1]


def test_async_subscriber_accumulates_on_the_default_pool() -> None:
    subscriber = Collecting(executor=DaemonThreadPool(2))
    IterablePublisher(range(10)).subscribe(subscriber)
    assert subscriber.done.wait(WAIT)
    assert sum(subscriber.items) == 45 and subscriber.completed == 1


def test_async_subscriber_batch_size_bounds_signals_per_task() -> None:
    executor = ManualExecutor()
    spy = SpyPublisher()
    subscriber = Collecting(executor, batch_size=2)
    spy.subscribe(subscriber)
    executor.run_all()
    for value in range(5):
        spy.subscriber.on_next(value)  # type: ignore[union-attr]
    executor.run_one()
    assert subscriber.items == [0, 1]
    executor.run_all()
    assert subscriber.items == [0, 1, 2, 3, 4]


def test_async_subscriber_when_next_raising_cancels_and_reports() -> None:
    executor = ManualExecutor()
    spy = SpyPublisher()
    subscriber = Collecting(executor, fail_at=1)
    spy.subscribe(subscriber)
    for value in range(3):
        spy.subscriber.on_next(value)  # type: ignore[union-attr]
    executor.run_all()
    assert spy.cancelled.is_set()
    assert subscriber.items == [0]
    assert [str(e) for e in subscriber.errors] == ["no 1"]


def test_async_subscriber_when_next_false_cancels_and_drops_later_signals() -> None:
    executor = ManualExecutor()
    spy = SpyPublisher()
    subscriber = Collecting(executor, stop_at=0)
    spy.subscribe(subscriber)
    spy.subscriber.on_next(0)  # type: ignore[union-attr]
    spy.subscriber.on_next(1)  # type: ignore[union-attr]
    spy.subscriber.on_complete()  # type: ignore[union-attr]
    executor.run_all()
    assert spy.cancelled.is_set()
    assert subscriber.items == [0] and subscriber.completed == 0


def test_async_subscriber_second_subscription_is_cancelled() -> None:
    executor = ManualExecutor()
    first, second = SpyPublisher(), SpyPublisher()
    subscriber = Collecting(executor)
    first.subscribe(subscriber)
    second.subscribe(subscriber)
    executor.run_all()
    assert second.cancelled.is_set() and not first.cancelled.is_set()


def test_async_subscriber_rejected_task_cancels_and_reports_the_rejection() -> None:
    spy = SpyPublisher()
    subscriber = Collecting(rejecting())
    spy.subscribe(subscriber)
    assert spy.cancelled.is_set()
    assert [str(e) for e in subscriber.errors] == ["cannot schedule new tasks after shutdown"]


def test_async_subscriber_none_item_raises_on_the_caller() -> None:
    subscriber = Collecting(ManualExecutor())
    with pytest.raises(TypeError, match=r"^item must not be None \(rule 2\.13\)$"):
        subscriber.on_next(None)  # type: ignore[arg-type]


def test_async_subscriber_invalid_batch_size_raises() -> None:
    with pytest.raises(ValueError, match=r"^batch_size must be positive, got 0$"):
        Collecting(ManualExecutor(), batch_size=0)


# --- LambdaSubscriber ----------------------------------------------------------------


def test_lambda_subscriber_requests_prefetch_then_replenishes_three_quarters() -> None:
    spy = SpyPublisher()
    seen: list[int] = []
    spy.subscribe(LambdaSubscriber(seen.append, prefetch=8))
    assert spy.requests == [8]
    for value in range(12):
        spy.subscriber.on_next(value)  # type: ignore[union-attr]
    assert spy.requests == [8, 6, 6]
    assert seen == list(range(12))


def test_lambda_subscriber_unbounded_prefetch_requests_once() -> None:
    spy = SpyPublisher()
    spy.subscribe(LambdaSubscriber(lambda item: None, prefetch=MAX_DEMAND))
    for value in range(1000):
        spy.subscriber.on_next(value)  # type: ignore[union-attr]
    assert spy.requests == [MAX_DEMAND]


@settings(max_examples=100, deadline=None)
@given(prefetch=st.integers(min_value=1, max_value=40), total=st.integers(min_value=0, max_value=300))
def test_lambda_subscriber_outstanding_demand_stays_within_prefetch_and_never_stalls(prefetch: int, total: int) -> None:
    spy = SpyPublisher()
    seen: list[int] = []
    spy.subscribe(LambdaSubscriber(seen.append, prefetch=prefetch))
    for value in range(total):
        outstanding = spy.total_requested - len(seen)
        assert 0 < outstanding <= prefetch, f"outstanding {outstanding} before item {value}"
        spy.subscriber.on_next(value)  # type: ignore[union-attr]
    assert seen == list(range(total))


def test_lambda_subscriber_on_next_raising_cancels_and_calls_on_error() -> None:
    spy = SpyPublisher()
    errors: list[BaseException] = []

    def fail(item: int) -> None:
        raise ValueError(f"bad {item}")

    spy.subscribe(LambdaSubscriber(fail, errors.append))
    spy.subscriber.on_next(3)  # type: ignore[union-attr]
    spy.subscriber.on_next(4)  # type: ignore[union-attr]
    assert spy.cancelled.is_set()
    assert [str(e) for e in errors] == ["bad 3"]


def test_lambda_subscriber_without_on_error_logs(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR, logger="flowpy"):
        error(OSError("unheard")).subscribe(LambdaSubscriber(print))
    assert "has no on_error callback" in caplog.text and "unheard" in caplog.text


def test_lambda_subscriber_cancel_before_subscription_cancels_on_arrival() -> None:
    spy = SpyPublisher()
    subscriber: LambdaSubscriber[int] = LambdaSubscriber(print)
    subscriber.cancel()
    spy.subscribe(subscriber)
    assert spy.cancelled.is_set() and spy.requests == []
    assert subscriber.is_done


def test_lambda_subscriber_calls_on_complete_once() -> None:
    completions: list[str] = []
    subscriber: LambdaSubscriber[str] = LambdaSubscriber(print, None, lambda: completions.append("done"))
    just().subscribe(subscriber)
    subscriber.on_complete()
    assert completions == ["done"] and subscriber.is_done


@pytest.mark.parametrize(
    ("prefetch", "kind", "message"),
    [
        (0, ValueError, r"^prefetch must be positive, got 0$"),
        (2.0, TypeError, r"^prefetch must be an int, got 2\.0$"),
    ],
)
def test_lambda_subscriber_invalid_prefetch_raises(prefetch: Any, kind: type, message: str) -> None:
    with pytest.raises(kind, match=message):
        LambdaSubscriber(print, prefetch=prefetch)


def test_lambda_subscriber_on_next_not_callable_raises() -> None:
    with pytest.raises(TypeError, match=r"^on_next must be callable, got 3$"):
        LambdaSubscriber(3)  # type: ignore[arg-type]


# --- collect ---------------------------------------------------------------------


def test_collect_returns_all_items() -> None:
    assert collect(RangePublisher(0, 5)).result(timeout=WAIT) == [0, 1, 2, 3, 4]


def test_collect_async_source() -> None:
    assert collect(IterablePublisher("xyz")).result(timeout=WAIT) == ["x", "y", "z"]


def test_collect_failure_sets_the_exception() -> None:
    future = collect(error(KeyError("k")))
    with pytest.raises(KeyError):
        future.result(timeout=WAIT)


def test_collect_cancelling_the_future_cancels_the_subscription() -> None:
    spy = SpyPublisher()
    future = collect(spy)
    spy.subscriber.on_next(1)  # type: ignore[union-attr]
    assert future.cancel()
    assert spy.cancelled.is_set()
    spy.subscriber.on_complete()  # type: ignore[union-attr]  # must not raise InvalidStateError
    assert future.cancelled()


# --- iterate ---------------------------------------------------------------------


def test_iterate_yields_every_item_of_a_sync_source() -> None:
    assert list(iterate(RangePublisher(0, 1000), prefetch=16)) == list(range(1000))


def test_iterate_yields_every_item_of_an_async_source() -> None:
    assert list(iterate(IterablePublisher(range(500), batch_size=7), prefetch=10)) == list(range(500))


def test_iterate_requests_prefetch_then_replenishes_as_consumed() -> None:
    spy = SpyPublisher()
    iterator = iterate(spy, prefetch=4)
    assert spy.requests == [4]
    for value in range(4):
        spy.subscriber.on_next(value)  # type: ignore[union-attr]
    assert [next(iterator) for _ in range(2)] == [0, 1]
    assert spy.requests == [4]
    assert next(iterator) == 2
    assert spy.requests == [4, 3]
    iterator.close()


def test_iterate_break_cancels_the_subscription() -> None:
    spy = CancelSpy(RangePublisher(0, 100))
    taken = []
    for item in iterate(spy, prefetch=8):
        taken.append(item)
        if len(taken) == 2:
            break
    assert taken == [0, 1]
    assert spy.cancelled.is_set(), "leaving the loop must cancel (rule 2.6)"
    assert spy.requests == [8]


def test_iterate_close_and_with_block_cancel() -> None:
    spy = SpyPublisher()
    with iterate(spy) as iterator:
        assert iter(iterator) is iterator
    assert spy.cancelled.is_set()
    with pytest.raises(StopIteration):
        next(iterator)
    iterator.close()


def test_iterate_raises_the_stream_error_after_the_items() -> None:
    def failing() -> Iterator[int]:
        yield 1
        raise ConnectionResetError("peer left")

    iterator = iterate(IterablePublisher(failing()))
    assert next(iterator) == 1
    with pytest.raises(ConnectionResetError, match=r"^peer left$"):
        next(iterator)
    with pytest.raises(StopIteration):
        next(iterator)


def test_iterate_timeout_raises_and_cancels() -> None:
    spy = SpyPublisher()
    iterator = iterate(spy, timeout=0.05)
    with pytest.raises(TimeoutError, match=r"^no signal from the publisher within timeout=0\.05 seconds$"):
        next(iterator)
    assert spy.cancelled.is_set()


@pytest.mark.timeout(30)
def test_iterate_break_from_infinite_source_leaves_no_running_task() -> None:
    """Break after 10 items: the publisher sees cancel and its executor goes quiet."""
    produced = itertools.count()
    closed = threading.Event()
    activity = threading.Condition()
    running = 0
    pool = DaemonThreadPool(2)

    def execute(task: Callable[[], object]) -> None:
        def tracked() -> None:
            nonlocal running
            with activity:
                running += 1
            try:
                task()
            finally:
                with activity:
                    running -= 1
                    activity.notify_all()

        pool.execute(tracked)

    def numbers() -> Iterator[int]:
        try:
            while True:
                yield next(produced)
        finally:
            closed.set()

    taken = []

    class Numbers:
        """Re-iterable: only the subscription holds the generator it opens."""

        def __iter__(self) -> Iterator[int]:
            return numbers()

    spy = CancelSpy(IterablePublisher(Numbers(), executor=execute, batch_size=4))
    for item in iterate(spy, prefetch=8):
        taken.append(item)
        if len(taken) == 10:
            break
    assert spy.cancelled.is_set(), "the publisher must see cancel when the loop breaks"
    with activity:
        assert activity.wait_for(lambda: running == 0, WAIT)
    gc.collect()
    assert closed.wait(WAIT), "the cancelled subscription must drop its iterator"
    assert taken == list(range(10))
    assert next(produced) <= 10 + 8 + 1, "the publisher kept producing after cancel"
    pool.shutdown()


@pytest.mark.parametrize(
    ("kwargs", "kind", "message"),
    [
        ({"prefetch": 0}, ValueError, r"^prefetch must be positive, got 0$"),
        ({"timeout": -1}, ValueError, r"^timeout must be >= 0 or None, got -1$"),
        ({"timeout": math.nan}, ValueError, r"^timeout must be a number of seconds, got nan$"),
        ({"timeout": "1"}, TypeError, r"^timeout must be a number of seconds or None, got '1'$"),
        ({"timeout": True}, TypeError, r"^timeout must be a number of seconds or None, got True$"),
    ],
)
def test_iterate_invalid_arguments_raise(kwargs: dict[str, Any], kind: type, message: str) -> None:
    # timeout=nan made every wait return at once, unanswered: a busy loop for ever
    subscribed: list[Any] = []

    class Spy(Publisher[int]):
        def subscribe(self, subscriber: Subscriber[int]) -> None:
            subscribed.append(subscriber)

    with pytest.raises(kind, match=message):
        iterate(Spy(), **kwargs)
    assert subscribed == []  # refused before subscribing


@pytest.mark.parametrize("timeout", [math.inf, 1e300, 2**70], ids=["inf", "1e300", "2**70"])
def test_iterate_with_a_timeout_beyond_what_the_platform_can_wait_waits(timeout: float) -> None:
    spy = SpyPublisher()
    iterator = iterate(spy, timeout=timeout)
    taken: list[object] = []

    def consume_one() -> None:
        try:
            taken.append(next(iterator))
        except BaseException as exc:
            taken.append(exc)

    consumer = threading.Thread(target=consume_one)
    consumer.start()
    wait_until_waiting(consumer)  # for the item, with that timeout
    assert spy.subscriber is not None
    spy.subscriber.on_next(7)
    consumer.join(WAIT)
    assert not consumer.is_alive()
    assert taken == [7]
    iterator.close()


@pytest.mark.parametrize("publisher", [None, 5, "abc"])
def test_iterate_collect_and_consume_refuse_what_is_no_publisher_at_the_call(publisher: Any) -> None:
    # collect(5), iterate(5) and consume(5, f) raised AttributeError: 'int' object has no attribute 'subscribe'
    message = rf"^publisher must be a Publisher, got {re.escape(repr(publisher))}$"
    with pytest.raises(TypeError, match=message):
        iterate(publisher)
    with pytest.raises(TypeError, match=message):
        collect(publisher)
    with pytest.raises(TypeError, match=message):
        consume(publisher, print)


def test_async_subscriber_direct_executor_handles_many_signals_without_nesting() -> None:
    from flowpy.executors import direct_executor

    subscriber = Collecting(direct_executor, batch_size=1)
    RangePublisher(0, 50_000).subscribe(subscriber)
    assert subscriber.done.is_set()
    assert subscriber.items == list(range(50_000)) and subscriber.completed == 1


def test_async_subscriber_after_refused_task_drops_later_signals() -> None:
    spy = SpyPublisher()
    subscriber = Collecting(rejecting())
    spy.subscribe(subscriber)
    for value in range(100):
        spy.subscriber.on_next(value)  # type: ignore[union-attr]
    assert len(subscriber._signals) == 0, "signals after the end must not pile up"
    second = SpyPublisher()
    second.subscribe(subscriber)
    assert second.cancelled.is_set()


@settings(max_examples=40, deadline=None)
@given(
    prefetch=st.integers(min_value=1, max_value=20),
    size=st.integers(min_value=0, max_value=120),
    stop=st.integers(min_value=0, max_value=130),
)
def test_iterate_any_prefetch_and_break_point_yields_exact_prefix_then_cancels(
    prefetch: int, size: int, stop: int
) -> None:
    spy = CancelSpy(RangePublisher(0, size))
    taken = []
    with iterate(spy, prefetch=prefetch, timeout=WAIT) as iterator:
        for item in iterator:
            if len(taken) == stop:
                break
            taken.append(item)
    assert taken == list(range(min(size, stop)))
    assert all(n <= prefetch for n in spy.requests)
    if stop >= size:
        assert not spy.cancelled.is_set(), "a loop that ran to the end has nothing to cancel"
    else:  # left early: cancelled, unless the publisher had already completed into the buffer
        assert spy.cancelled.is_set() or sum(spy.requests) >= size


def test_lambda_subscriber_ignores_items_after_its_terminal_signal() -> None:
    spy = SpyPublisher()
    seen: list[int] = []
    spy.subscribe(LambdaSubscriber(seen.append, lambda error: None, prefetch=4))
    spy.subscriber.on_error(OSError("over"))  # type: ignore[union-attr]
    for value in range(8):
        spy.subscriber.on_next(value)  # type: ignore[union-attr]
    assert seen == [] and spy.requests == [4]


# --- A subscription racing the subscriber's end (rule 2.5) -------------------------------


def test_lambda_subscriber_subscription_arriving_as_it_completes_is_cancelled() -> None:
    subscriber: LambdaSubscriber[int] = LambdaSubscriber(lambda _: None)
    subscriber._upstream = GatedSlot(subscriber.on_complete)  # it ends in on_subscribe's window
    subscription = StubSubscription()
    subscriber.on_subscribe(subscription)
    assert subscriber.is_done
    assert subscription.cancels == 1  # not kept and asked for items by a finished subscriber
    assert subscription.requests == []


def test_consume_subscription_arriving_as_the_future_is_cancelled_is_cancelled_unasked() -> None:
    future: Future[None] = Future()
    subscriber: FutureSubscriber[int, None] = FutureSubscriber(lambda _: None, future, no_result)
    subscriber._upstream = GatedSlot(future.cancel)  # cancelled by its owner in on_subscribe's window
    subscription = StubSubscription()
    subscriber.on_subscribe(subscription)
    assert subscription.cancels == 1
    assert subscription.requests == []  # a cancelled consumer asks for nothing


def test_consume_subscription_arriving_as_the_future_fails_is_cancelled() -> None:
    future: Future[None] = Future()
    subscriber: FutureSubscriber[int, None] = FutureSubscriber(lambda _: None, future, no_result)
    subscriber._upstream = GatedSlot(lambda: subscriber.on_error(RuntimeError("ended")))
    subscription = StubSubscription()
    subscriber.on_subscribe(subscription)
    assert isinstance(future.exception(), RuntimeError)
    assert subscription.cancels == 1  # not kept and asked for items by a settled consumer
    assert subscription.requests == []
