"""Context propagation through the operators, the sources and AsyncSubscriber (flowpy/_context.py).

Each test subscribes in a context where REQUEST_ID is "request-1" and
produces from a thread where it is "producer" (or unset): every signal must
see "request-1", whichever pool thread delivers it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from flowpy import operators
from flowpy.executors import DaemonThreadPool
from flowpy.flow import Publisher
from flowpy.operators import (
    buffer_with_time,
    concat,
    debounce,
    delay,
    flat_map,
    merge,
    observe_on,
    on_backpressure_buffer,
    share,
    subscribe_on,
    timeout,
    zip,
)
from flowpy.sources import IterablePublisher, RangePublisher
from flowpy.submission import SubmissionPublisher
from flowpy.subscribers import AsyncSubscriber
from tests.context_helpers import MISSING, REQUEST_ID, ContextRecorder, in_context, in_fresh_thread
from tests.support import RejectingExecutor

WAIT = 30.0
UNBOUNDED = 2**63 - 1


@pytest.fixture
def pool() -> Iterator[DaemonThreadPool]:
    executor = DaemonThreadPool(4, thread_name_prefix="context-hops")
    try:
        yield executor
    finally:
        executor.shutdown()


def _produce(*publishers: SubmissionPublisher[int], count: int = 20) -> None:
    """Submit ``count`` items to each publisher and close it, from a thread with another value."""

    def run() -> None:
        REQUEST_ID.set("producer")
        for publisher in publishers:
            for i in range(count):
                publisher.submit(i)
            publisher.close()

    in_fresh_thread(run)


Pipeline = Callable[[DaemonThreadPool, list[SubmissionPublisher[int]]], Publisher[Any]]


def _sources(pool: DaemonThreadPool, n: int) -> list[SubmissionPublisher[int]]:
    return [SubmissionPublisher(executor=pool) for _ in range(n)]


PIPELINES: dict[str, tuple[int, Pipeline]] = {
    "observe_on": (1, lambda pool, s: observe_on(s[0], pool, prefetch=4)),
    "subscribe_on": (1, lambda pool, s: subscribe_on(s[0], pool)),
    "merge": (2, lambda pool, s: merge(s[0], s[1], prefetch=4)),
    "concat": (2, lambda pool, s: concat(s[0], s[1], prefetch=4)),
    "zip": (2, lambda pool, s: zip(s[0], s[1], prefetch=4)),
    "flat_map": (1, lambda pool, s: flat_map(s[0], lambda i: IterablePublisher([i, i], executor=pool))),
    "on_backpressure_buffer": (1, lambda pool, s: on_backpressure_buffer(s[0], 100)),
    # The time operators hop to the default scheduler's pool.
    "delay": (1, lambda pool, s: delay(s[0], 0.001)),
    "debounce": (1, lambda pool, s: debounce(s[0], 0.001)),
    "buffer_with_time": (1, lambda pool, s: buffer_with_time(s[0], 0.001)),
    "timeout": (1, lambda pool, s: timeout(s[0], 30.0)),
    # --- Rx vocabulary ---
    "switch_map": (1, lambda pool, s: operators.switch_map(s[0], lambda i: IterablePublisher([i], executor=pool))),
    "concat_map": (1, lambda pool, s: operators.concat_map(s[0], lambda i: IterablePublisher([i, i], executor=pool))),
    "combine_latest": (2, lambda pool, s: operators.combine_latest(s[0], s[1], prefetch=4)),
    "with_latest_from": (2, lambda pool, s: operators.with_latest_from(s[1], s[0])),
    "take_until": (2, lambda pool, s: operators.take_until(s[0], s[1])),
    "amb": (2, lambda pool, s: operators.amb(s[0], s[1])),
    "retry": (1, lambda pool, s: operators.retry(s[0])),
    "repeat": (1, lambda pool, s: operators.repeat(s[0], 1)),
}


@pytest.mark.parametrize("name", sorted(PIPELINES))
def test_every_signal_sees_the_subscribe_context(pool: DaemonThreadPool, name: str) -> None:
    count, build = PIPELINES[name]
    sources = _sources(pool, count)
    recorder = ContextRecorder(initial=UNBOUNDED)
    in_context("request-1", lambda: build(pool, sources).subscribe(recorder))
    if name == "subscribe_on":  # the source is subscribed on the pool: wait for it
        deadline = threading.Event()
        while not sources[0].has_subscribers:
            deadline.wait(0.001)
    _produce(*sources)
    assert recorder.done.wait(WAIT)
    assert recorder.completed, recorder.error
    assert recorder.items
    assert recorder.values() == {"request-1"}
    assert recorder.violations == []


@pytest.mark.parametrize("name", ["merge", "observe_on", "flat_map", "switch_map", "combine_latest"])
def test_a_change_in_on_next_persists_across_upstream_threads(pool: DaemonThreadPool, name: str) -> None:
    # The drain delivers from whichever upstream thread signalled: the
    # subscriber's change must still be there at its next signal.
    count, build = PIPELINES[name]
    sources = _sources(pool, count)

    def tag(item: int) -> None:
        REQUEST_ID.set(f"after-{len(recorder.items)}")

    recorder = ContextRecorder(initial=UNBOUNDED, on_next_hook=tag)
    in_context("request-1", lambda: build(pool, sources).subscribe(recorder))
    _produce(*sources)
    assert recorder.done.wait(WAIT)
    assert recorder.completed
    # on_subscribe and the first on_next see the original; each later signal the last change.
    expected = ["request-1", "request-1"] + [f"after-{n}" for n in range(1, len(recorder.items) + 1)]
    assert [value for _, value in recorder.seen] == expected


def test_subscribe_on_subscribes_the_source_in_the_subscriber_context(pool: DaemonThreadPool) -> None:
    seen: list[str] = []

    class Source(Publisher[int]):
        def subscribe(self, subscriber: Any) -> None:
            seen.append(REQUEST_ID.get(MISSING))
            RangePublisher(0, 3).subscribe(subscriber)

    recorder = ContextRecorder(initial=UNBOUNDED)
    in_context("request-1", lambda: subscribe_on(Source(), pool).subscribe(recorder))
    assert recorder.done.wait(WAIT)
    assert recorder.items == [0, 1, 2]
    assert seen == ["request-1"]
    assert recorder.values() == {"request-1"}


def test_observe_on_refused_task_signals_on_error_in_the_subscriber_context() -> None:
    source = RangePublisher(0, 3)
    recorder = ContextRecorder(initial=UNBOUNDED)
    in_context("request-1", lambda: observe_on(source, RejectingExecutor(0)).subscribe(recorder))
    assert recorder.done.is_set()
    assert isinstance(recorder.error, RuntimeError)
    assert recorder.values() == {"request-1"}


def test_share_signals_each_subscriber_in_its_own_context(pool: DaemonThreadPool) -> None:
    source: SubmissionPublisher[int] = SubmissionPublisher(executor=pool)
    shared = share(source, prefetch=4)
    first, second = ContextRecorder(initial=UNBOUNDED), ContextRecorder(initial=UNBOUNDED)
    in_context("first", shared.subscribe, first)
    in_context("second", shared.subscribe, second)
    _produce(source)
    assert first.done.wait(WAIT) and second.done.wait(WAIT)
    assert first.items == second.items == list(range(20))
    assert first.values() == {"first"}
    assert second.values() == {"second"}


# --- Sources ----------------------------------------------------------------------------


def test_iterable_publisher_signals_in_the_subscribe_context(pool: DaemonThreadPool) -> None:
    publisher = IterablePublisher(range(10), executor=pool, batch_size=3)
    recorder = ContextRecorder(initial=UNBOUNDED)
    in_context("request-1", publisher.subscribe, recorder)
    assert recorder.done.wait(WAIT)
    assert recorder.items == list(range(10))
    assert recorder.values() == {"request-1"}


def test_iterable_publisher_refused_task_signals_in_the_subscribe_context() -> None:
    publisher = IterablePublisher(range(10), executor=RejectingExecutor(0))
    recorder = ContextRecorder(initial=UNBOUNDED)
    in_context("request-1", publisher.subscribe, recorder)
    assert recorder.kinds() == ["on_subscribe", "on_error"]
    assert recorder.values() == {"request-1"}


def test_iterable_publisher_from_a_thread_without_the_value_sees_none(pool: DaemonThreadPool) -> None:
    publisher = IterablePublisher(range(3), executor=pool)
    recorder = ContextRecorder(initial=UNBOUNDED)
    REQUEST_ID.set("test-thread")  # the test's own context; the subscribing thread has none
    in_fresh_thread(lambda: publisher.subscribe(recorder))
    assert recorder.done.wait(WAIT)
    assert recorder.values() == {MISSING}


# --- AsyncSubscriber ------------------------------------------------------------------------


class _Handler(AsyncSubscriber[int]):
    def __init__(self, executor: Any) -> None:
        super().__init__(executor)
        self.seen: list[tuple[str, str]] = []
        self.done = threading.Event()

    def when_next(self, item: int) -> bool:
        self.seen.append(("next", REQUEST_ID.get(MISSING)))
        return True

    def when_complete(self) -> None:
        self.seen.append(("complete", REQUEST_ID.get(MISSING)))
        self.done.set()

    def when_error(self, error: BaseException) -> None:
        self.seen.append(("error", REQUEST_ID.get(MISSING)))
        self.done.set()


def test_async_subscriber_handles_signals_in_the_subscribe_context(pool: DaemonThreadPool) -> None:
    publisher: SubmissionPublisher[int] = SubmissionPublisher(executor=pool)
    handler = in_context("constructed", _Handler, pool)
    in_context("request-1", publisher.subscribe, handler)
    _produce(publisher, count=5)
    assert handler.done.wait(WAIT)
    assert handler.seen == [("next", "request-1")] * 5 + [("complete", "request-1")]
