"""PullSubscription and DemandSubscription, the pull-on-demand subscriptions (used by flowpy.spark and sources)."""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flowpy._core.pull import EMPTY, END, DemandSubscription, Pulled, PullSubscription
from flowpy._demand import MAX_DEMAND
from flowpy.executors import Task, as_execute, default_executor, direct_executor
from flowpy.flow import Publisher, Subscriber
from flowpy.tck import PublisherVerification, TestEnvironment
from tests.spark.helpers import Arrivals
from tests.support import ManualExecutor, Recorder, RejectingExecutor


class _IterSubscription(PullSubscription[int]):
    """Pulls from an iterator of ints; counts what it took and whether it was released."""

    def __init__(self, subscriber: Subscriber[int], execute: Callable[[Task], object], items: Iterator[int]) -> None:
        super().__init__(subscriber, execute)
        self.items: Iterator[int] | None = items
        self.pulled = 0
        self.released = 0
        self.released_event = threading.Event()
        self._ahead: Pulled[int] | None = None

    def _next(self) -> Pulled[int]:
        if self._ahead is not None:
            item, self._ahead = self._ahead, None
            return item
        assert self.items is not None
        self.pulled += 1
        return next(self.items, END)

    def _at_end(self) -> bool:
        if self.pulled == 0:
            return False
        if self._ahead is None:
            self._ahead = self._next()
        return self._ahead is END

    def _release(self) -> None:
        self.released += 1
        self.items = None
        self.released_event.set()


class _RangePublisher(Publisher[int]):
    """Publishes ``range(n)``; with ``record``, keeps its subscriptions for the test to inspect."""

    def __init__(self, n: int, executor: Any = None, *, record: bool = True) -> None:
        self.n = n
        self.execute = as_execute(default_executor() if executor is None else executor)
        self.record = record
        self.subscriptions: list[_IterSubscription] = []

    def subscribe(self, subscriber: Subscriber[int]) -> None:
        if subscriber is None:
            raise TypeError("subscriber must not be None (rule 1.9)")
        subscription = _IterSubscription(subscriber, self.execute, iter(range(self.n)))
        if self.record:
            self.subscriptions.append(subscription)
        subscription.start()


def test_pull_delivers_on_subscribe_first_and_nothing_unrequested() -> None:
    executor = ManualExecutor()
    publisher = _RangePublisher(5, executor)
    recorder = Recorder(initial=0)
    publisher.subscribe(recorder)
    assert recorder.kinds() == []
    executor.run_all()
    assert recorder.kinds() == ["on_subscribe"] and publisher.subscriptions[0].pulled == 0
    recorder.request(2)
    executor.run_all()
    assert recorder.items == [0, 1] and publisher.subscriptions[0].pulled == 3  # one look-ahead
    recorder.request(3)
    executor.run_all()
    assert recorder.items == [0, 1, 2, 3, 4] and recorder.completed
    assert publisher.subscriptions[0].released == 1


def test_pull_cancel_releases_the_source_once_without_signals() -> None:
    executor = ManualExecutor()
    publisher = _RangePublisher(10, executor)
    recorder = Recorder(initial=3)
    publisher.subscribe(recorder)
    executor.run_all()
    recorder.cancel()
    recorder.cancel()
    recorder.request(5)
    executor.run_all()
    assert recorder.items == [0, 1, 2] and not recorder.done.is_set()
    assert publisher.subscriptions[0].released == 1


def test_pull_refused_executor_signals_its_error() -> None:
    refusal = RuntimeError("pool is shut down")
    recorder = Recorder(initial=1)
    _RangePublisher(3, RejectingExecutor(0, refusal)).subscribe(recorder)
    assert recorder.kinds() == ["on_subscribe", "on_error"] and recorder.error is refusal


def test_pull_source_failure_signals_on_error() -> None:
    class Broken(_IterSubscription):
        def _next(self) -> Pulled[int]:
            raise OSError("disk gone")

    recorder = Recorder(initial=1)
    Broken(recorder, direct_executor.execute, iter(())).start()
    assert isinstance(recorder.error, OSError) and recorder.kinds() == ["on_subscribe", "on_error"]


def test_pull_raising_on_next_is_logged_and_ends_the_stream(caplog: pytest.LogCaptureFixture) -> None:
    def hook(item: int) -> None:
        if item == 1:
            raise KeyError(item)

    executor = ManualExecutor()
    publisher = _RangePublisher(10, executor)
    recorder = Recorder(initial=5, on_next_hook=hook)
    publisher.subscribe(recorder)
    with caplog.at_level("ERROR", logger="flowpy"):
        executor.run_all()
    assert recorder.items == [0, 1] and not recorder.done.is_set()
    assert publisher.subscriptions[0].released == 1
    assert any("raised (rule 2.13)" in record.getMessage() for record in caplog.records)


def test_pull_empty_source_waits_for_signal() -> None:
    """A source that has nothing yet returns EMPTY and calls signal() when items come."""
    queue: list[int] = []
    done = threading.Event()

    class Queued(_IterSubscription):
        def _next(self) -> Pulled[int]:
            return queue.pop(0) if queue else (END if done.is_set() else EMPTY)

        def _at_end(self) -> bool:
            return done.is_set() and not queue

    executor = ManualExecutor()
    recorder = Recorder(initial=10)
    subscription = Queued(recorder, executor.execute, iter(()))
    subscription.start()
    executor.run_all()
    assert recorder.items == []
    queue.extend([7, 8])
    subscription.signal()
    executor.run_all()
    assert recorder.items == [7, 8] and not recorder.done.is_set()
    done.set()
    subscription.signal()
    executor.run_all()
    assert recorder.completed


@pytest.mark.timeout(60)
@pytest.mark.usefixtures("tiny_switch_interval")
@settings(max_examples=60, deadline=None)
@given(
    total=st.integers(0, 120),
    first=st.integers(1, 20),
    refill=st.integers(1, 20),
    cancel_at=st.none() | st.integers(0, 120),
)
def test_pull_requests_from_on_next_and_cancel_from_another_thread(
    total: int, first: int, refill: int, cancel_at: int | None
) -> None:
    """The drain runs on the pool while the subscriber requests from on_next and a test thread cancels."""
    publisher = _RangePublisher(total, record=True)
    arrivals = Arrivals()

    def on_next(item: int) -> None:
        arrivals(item)
        if len(recorder.items) == recorder.requested:  # demand used up: ask for more
            recorder.request(refill)

    recorder = Recorder(initial=first, on_next_hook=on_next)
    publisher.subscribe(recorder)
    if cancel_at is not None and cancel_at <= total:
        assert recorder.subscribed.wait(10)  # on_subscribe arrives on the pool, maybe after subscribe returned
        arrivals.wait_for(min(cancel_at, first), timeout=10)
        recorder.cancel()
    else:
        assert recorder.done.wait(10) and recorder.completed
    subscription = publisher.subscriptions[0]
    assert subscription.released_event.wait(10), "the source was not released"
    assert recorder.violations == []
    assert recorder.items == list(range(len(recorder.items)))
    assert subscription.released == 1


class TestPullSubscriptionTck(PublisherVerification[int]):
    """The whole publisher TCK, stochastic tests included, without Spark's latency."""

    def create_test_environment(self) -> TestEnvironment:
        return TestEnvironment(default_timeout_millis=2_000, default_no_signals_timeout_millis=50)

    def create_publisher(self, elements: int) -> Publisher[int]:
        return _RangePublisher(elements, record=False)  # rule 3.13: hold no reference

    def max_elements_from_publisher(self) -> int:
        return 2**31


def test_pull_item_that_arrives_after_a_cancel_is_not_delivered() -> None:
    """A cancel that lands while ``_next`` blocks (a Spark job under way) drops the item it returns (rule 3.12)."""

    class CancelledWhilePulling(_IterSubscription):
        def _next(self) -> Pulled[int]:
            self.cancel()  # as another thread would, while the job runs
            return super()._next()

    executor = ManualExecutor()
    recorder = Recorder(initial=3)
    subscription = CancelledWhilePulling(recorder, executor.execute, iter(range(5)))
    subscription.start()
    executor.run_all()
    assert recorder.kinds() == ["on_subscribe"] and recorder.items == []
    assert subscription.released == 1


# --- DemandSubscription: the request body every pull subscription shares ----------


class _Demand(DemandSubscription):
    """A DemandSubscription whose drain records what it read; cancel just marks it."""

    __slots__ = ("reads",)

    def __init__(self, execute: Callable[[Task], object]) -> None:
        super().__init__(execute, self._drain, self._refused)
        self.reads: list[tuple[bool, BaseException | None, int]] = []

    def cancel(self) -> None:
        with self._lock:
            self._cancelled = True

    def _drain(self, first: bool) -> bool:
        self.reads.append(self._pending())
        return False

    def _refused(self, error: BaseException) -> None:
        raise AssertionError(f"not refused in these tests: {error!r}")


@pytest.mark.parametrize("n", [0, -1, -(2**70)])
def test_demand_non_positive_request_is_recorded_once_and_the_demand_kept(n: int) -> None:
    subscription = _Demand(direct_executor.execute)
    subscription.request(3)
    subscription.request(n)
    subscription.request(-5)  # a second bad request does not replace the first error
    cancelled, error, demand = subscription.reads[-1]
    assert not cancelled and demand == 3
    assert isinstance(error, ValueError)
    assert str(error) == f"non-positive subscription request: n must be > 0 (rule 3.9), got {n!r}"


@pytest.mark.parametrize("n", [1.5, True, "3", None])
def test_demand_non_int_request_is_a_type_error(n: object) -> None:
    subscription = _Demand(direct_executor.execute)
    subscription.request(n)  # type: ignore[arg-type]
    _, error, demand = subscription.reads[-1]
    assert isinstance(error, TypeError) and demand == 0


def test_demand_saturates_at_max_demand_and_unbounded_is_never_used_up() -> None:
    subscription = _Demand(direct_executor.execute)
    subscription.request(MAX_DEMAND - 1)
    subscription.request(5)
    assert subscription.reads[-1][2] == MAX_DEMAND
    assert subscription._produced(1_000)  # unbounded (rule 3.17)
    assert subscription._pending()[2] == MAX_DEMAND


def test_demand_produced_counts_down_and_reports_what_is_left() -> None:
    subscription = _Demand(ManualExecutor().execute)
    subscription.request(5)
    assert subscription._produced(3)
    assert not subscription._produced(2)
    assert subscription._pending() == (False, None, 0)


def test_demand_request_after_cancel_does_nothing() -> None:
    executor = ManualExecutor()
    subscription = _Demand(executor.execute)
    subscription.cancel()
    subscription.request(4)
    subscription.request(0)
    assert executor.tasks == collections.deque()
    assert subscription._pending() == (True, None, 0)
    assert not subscription._produced(0)


def test_demand_reentrant_requests_from_the_drain_do_not_recurse() -> None:
    depth = [0, 0]  # current, deepest

    class _Reentrant(_Demand):
        __slots__ = ()

        def _drain(self, first: bool) -> bool:
            depth[0] += 1
            depth[1] = max(depth)
            self.reads.append(self._pending())
            if len(self.reads) < 10_000:
                self.request(1)  # as an on_next would (rule 3.3)
            depth[0] -= 1
            return False

    subscription = _Reentrant(direct_executor.execute)
    subscription.request(1)
    assert len(subscription.reads) == 10_000
    assert depth[1] == 1
    assert subscription.reads[-1][2] == 10_000


@pytest.mark.timeout(60)
@pytest.mark.usefixtures("tiny_switch_interval")
def test_demand_concurrent_requests_lose_no_demand() -> None:
    subscription = _Demand(direct_executor.execute)

    def requester() -> None:
        for _ in range(2_000):
            subscription.request(3)

    threads = [threading.Thread(target=requester) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert subscription._pending() == (False, None, 4 * 2_000 * 3)
