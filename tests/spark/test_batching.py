"""BatchingSubscriber, the subscriber side of the sink and the processor, over plain lists (no Spark)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from flowpy.executors import DaemonThreadPool, Task
from flowpy.flow import Subscription
from flowpy.spark._batching import BatchingSubscriber, Item, Terminal
from tests.support import GatedSlot, ManualExecutor, RejectingExecutor


class _Upstream(Subscription):
    def __init__(self) -> None:
        self.requests: list[int] = []
        self.cancelled = 0

    def request(self, n: int) -> None:
        self.requests.append(n)

    def cancel(self) -> None:
        self.cancelled += 1


class _Collector(BatchingSubscriber):
    """Records the batches, the idle calls and a refusal; processes until told to stop."""

    def __init__(self, batch_size: int, execute: Callable[[Task], object]) -> None:
        super().__init__(batch_size, execute)
        self.batches: list[list[Item]] = []
        self.idles: list[Terminal] = []
        self.refusals: list[BaseException] = []
        self.inside = threading.Lock()  # held by a pass: two at once is an overlap
        self.overlaps = 0
        self.keep_going = True

    def _process(self, batch: list[Item]) -> bool:
        if not self.inside.acquire(blocking=False):
            self.overlaps += 1
            return False
        try:
            self.batches.append(batch)
        finally:
            self.inside.release()
        return self.keep_going

    def _idle(self, terminal: Terminal) -> None:
        self.idles.append(terminal)

    def _refused(self, error: BaseException) -> None:
        upstream = self._stop()
        if upstream is not None:
            upstream.cancel()
        self.refusals.append(error)


def _subscribed(batch_size: int, execute: Callable[[Task], Any]) -> tuple[_Collector, _Upstream]:
    collector = _Collector(batch_size, execute)
    upstream = _Upstream()
    collector.on_subscribe(upstream)
    return collector, upstream


def test_batching_full_batches_then_the_partial_one_and_one_idle_per_wake_up() -> None:
    executor = ManualExecutor()
    collector, _ = _subscribed(2, executor.execute)
    for item in range(5):
        collector.on_next(item)
    assert len(executor.tasks) == 1  # one worker for both full batches
    collector.on_complete()
    executor.run_all()
    assert collector.batches == [[0, 1], [2, 3], [4]]
    assert collector.idles == [True]


def test_batching_kick_while_idle_calls_idle_with_the_running_state() -> None:
    executor = ManualExecutor()
    collector, _ = _subscribed(3, executor.execute)
    collector._kick()
    executor.run_all()
    collector._kick()
    collector._kick()
    executor.run_all()
    assert collector.idles == [False, False]
    assert collector.batches == []


def test_batching_a_batch_arriving_during_a_pass_is_processed_without_a_second_idle() -> None:
    executor = ManualExecutor()
    collector, _ = _subscribed(1, executor.execute)
    original = collector._process

    def process(batch: list[Item]) -> bool:
        if batch == [0]:
            collector.on_next(1)  # arrives while the worker runs
        return original(batch)

    collector._process = process  # type: ignore[method-assign]
    collector.on_next(0)
    executor.run_all()
    assert collector.batches == [[0], [1]]
    assert collector.idles == [False]


def test_batching_executor_refusing_the_worker_ends_the_stream_and_on_next_returns() -> None:
    refusal = RuntimeError("pool is shut down")
    executor = RejectingExecutor(0, refusal)
    collector, upstream = _subscribed(2, executor.execute)
    collector.on_next("a")
    collector.on_next("b")  # the full batch would start the worker: refused
    assert collector.refusals == [refusal]
    assert upstream.cancelled == 1
    collector.on_next("c")
    collector.on_next("d")
    collector.on_complete()
    assert collector.batches == [] and collector.idles == []
    assert collector.refusals == [refusal]  # no second report: nothing runs after a refusal


def test_batching_second_subscription_is_cancelled() -> None:
    collector, first = _subscribed(2, ManualExecutor().execute)
    second = _Upstream()
    collector.on_subscribe(second)
    assert (first.cancelled, second.cancelled) == (0, 1)
    with pytest.raises(TypeError, match=r"^subscription must not be None \(rule 2\.13\)$"):
        collector.on_subscribe(None)  # type: ignore[arg-type]


def test_batching_a_failed_batch_stops_the_worker_and_later_rows_are_dropped() -> None:
    executor = ManualExecutor()
    collector, upstream = _subscribed(1, executor.execute)
    original = collector._process

    def process(batch: list[Item]) -> bool:
        original(batch)
        subscription = collector._stop()  # the write failed: what a sink does
        assert subscription is upstream
        return False

    collector._process = process  # type: ignore[method-assign]
    collector.on_next(0)
    collector.on_next(1)
    executor.run_all()
    collector.on_next(2)
    collector.on_complete()
    executor.run_all()
    assert collector.batches == [[0]]
    assert collector.idles == []


@pytest.mark.timeout(60)
@pytest.mark.usefixtures("tiny_switch_interval")
def test_batching_items_and_kicks_from_two_threads_never_overlap_and_lose_nothing() -> None:
    pool = DaemonThreadPool(2)
    try:
        collector, _ = _subscribed(7, pool.execute)
        kicker_done = threading.Event()

        def kicker() -> None:
            for _ in range(2_000):
                collector._kick()
            kicker_done.set()

        thread = threading.Thread(target=kicker)
        thread.start()
        for item in range(10_000):
            collector.on_next(item)
        collector.on_complete()
        thread.join(30)
        assert kicker_done.is_set()
        assert pool.wait_idle(30)
        assert collector.overlaps == 0
        assert [item for batch in collector.batches for item in batch] == list(range(10_000))
        assert collector.idles[-1] is True
    finally:
        pool.shutdown()


def test_batching_subscription_arriving_after_a_stop_is_cancelled() -> None:
    collector = _Collector(2, ManualExecutor().execute)
    assert collector._stop() is None
    upstream = _Upstream()
    collector.on_subscribe(upstream)
    assert upstream.cancelled == 1 and upstream.requests == []


def test_batching_subscription_arriving_as_it_stops_is_cancelled() -> None:
    collector = _Collector(2, ManualExecutor().execute)

    def stop() -> None:  # what a sink does when its result is cancelled
        upstream = collector._stop()
        assert upstream is None  # nothing kept yet
        collector.refusals.append(RuntimeError("stopped"))

    collector._slot = GatedSlot(stop)  # stopped in on_subscribe's window
    upstream = _Upstream()
    collector.on_subscribe(upstream)
    assert collector.refusals  # the stop ran
    assert upstream.cancelled == 1 and upstream.requests == []
