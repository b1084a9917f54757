"""Context propagation through the interop bridges (flowpy/_context.py).

A flowpy subscriber fed by a bridge runs every signal in a copy of the
context current when it subscribed, whichever thread (event loop, pool)
delivers it.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import Future
from typing import Any

import pytest
from reactivex.subject import Subject

from flowpy.executors import DaemonThreadPool
from flowpy.interop.asyncio import from_async_iterable, to_async_iterator
from flowpy.interop.futures import from_future
from flowpy.interop.reactivex import from_observable
from flowpy.interop.rsocket import from_rsocket_publisher
from flowpy.submission import SubmissionPublisher
from tests.context_helpers import MISSING, REQUEST_ID, ContextRecorder, in_context, in_fresh_thread
from tests.interop.test_rsocket import FakeRequester, settle

pytestmark = pytest.mark.timeout(60)

WAIT = 30.0
UNBOUNDED = 2**63 - 1


@pytest.fixture
def pool() -> Iterator[DaemonThreadPool]:
    executor = DaemonThreadPool(2, thread_name_prefix="context-bridges")
    try:
        yield executor
    finally:
        executor.shutdown()


# --- asyncio ----------------------------------------------------------------------------


async def _numbers(n: int) -> AsyncIterator[int]:
    for i in range(n):
        await asyncio.sleep(0)
        yield i


def test_from_async_iterable_on_its_own_loop_signals_in_the_subscribe_context() -> None:
    recorder = ContextRecorder(initial=UNBOUNDED)
    in_context("request-1", from_async_iterable(_numbers(5)).subscribe, recorder)
    assert recorder.done.wait(WAIT)
    assert recorder.items == list(range(5))
    assert recorder.values() == {"request-1"}


def test_from_async_iterable_subscribed_on_the_loop_signals_in_the_subscribe_context() -> None:
    async def run() -> ContextRecorder:
        REQUEST_ID.set("loop-task")
        recorder = ContextRecorder(initial=UNBOUNDED)
        publisher = from_async_iterable(_numbers(5), loop=asyncio.get_running_loop())
        in_context("request-1", publisher.subscribe, recorder)
        for _ in range(100):
            if recorder.done.is_set():
                break
            await asyncio.sleep(0)
        return recorder

    recorder = asyncio.run(run())
    assert recorder.items == list(range(5))
    assert recorder.values() == {"request-1"}


def test_to_async_iterator_consumer_keeps_its_own_context_not_the_producer_one(pool: DaemonThreadPool) -> None:
    publisher: SubmissionPublisher[int] = SubmissionPublisher(executor=pool)

    async def consume() -> list[tuple[int, str]]:
        REQUEST_ID.set("consumer")
        seen = []
        iterator = to_async_iterator(publisher, prefetch=4)

        def produce() -> None:
            REQUEST_ID.set("producer")
            for i in range(10):
                publisher.submit(i)
            publisher.close()

        thread = threading.Thread(target=produce)
        thread.start()
        async for item in iterator:
            seen.append((item, REQUEST_ID.get(MISSING)))
        thread.join(WAIT)
        return seen

    assert asyncio.run(consume()) == [(i, "consumer") for i in range(10)]


# --- reactivex --------------------------------------------------------------------------


def test_from_observable_signals_on_the_executor_in_the_subscribe_context(pool: DaemonThreadPool) -> None:
    subject: Subject[int] = Subject()
    recorder = ContextRecorder(initial=UNBOUNDED)
    in_context("request-1", from_observable(subject, strategy="buffer", capacity=64, executor=pool).subscribe, recorder)

    def emit() -> None:
        REQUEST_ID.set("producer")
        for i in range(20):
            subject.on_next(i)
        subject.on_completed()

    in_fresh_thread(emit)
    assert recorder.done.wait(WAIT)
    assert recorder.items == list(range(20))
    assert recorder.values() == {"request-1"}


def test_from_observable_change_in_on_next_persists_across_drain_tasks(pool: DaemonThreadPool) -> None:
    subject: Subject[int] = Subject()

    def tag(item: int) -> None:
        REQUEST_ID.set(f"after-{item}")

    recorder = ContextRecorder(initial=UNBOUNDED, on_next_hook=tag)
    in_context("request-1", from_observable(subject, strategy="buffer", capacity=64, executor=pool).subscribe, recorder)
    for i in range(3):
        subject.on_next(i)
        while len(recorder.items) <= i:  # one drain task per item
            recorder.subscribed.wait(0.001)
    subject.on_completed()
    assert recorder.done.wait(WAIT)
    assert [value for _, value in recorder.seen] == ["request-1", "request-1", "after-0", "after-1", "after-2"]


# --- rsocket ----------------------------------------------------------------------------


class _EmittingRequester(FakeRequester):
    """A requester that answers each request at once, inside the ``request`` call."""

    def __init__(self, total: int) -> None:
        super().__init__()
        self.total = total
        self.sent = 0

    def subscribe(self, subscriber: Any) -> None:
        super().subscribe(subscriber)
        self._emit(self.initial or 0)

    def request(self, n: int) -> None:
        super().request(n)
        self._emit(n)

    def _emit(self, n: int) -> None:
        for _ in range(n):
            if self.sent == self.total:
                return
            self.sent += 1
            self.subscriber.on_next(f"item-{self.sent}", is_complete=self.sent == self.total)


def test_from_rsocket_publisher_signals_in_the_subscribe_context_even_when_request_delivers_inline() -> None:
    # on_next requests one more, which the requester answers inside request():
    # a signal delivered from inside a signal stays in the context it is in.
    requester = _EmittingRequester(total=4)

    async def run() -> ContextRecorder:
        REQUEST_ID.set("loop-task")
        recorder = ContextRecorder(initial=1, on_next_hook=lambda item: recorder.request(1))
        in_context("request-1", from_rsocket_publisher(requester).subscribe, recorder)
        await settle()
        return recorder

    recorder = asyncio.run(run())
    assert recorder.items == ["item-1", "item-2", "item-3", "item-4"]
    assert recorder.completed
    assert recorder.values() == {"request-1"}
    # The requester answers inside request(), so each on_next nests in the signal before it
    # (the first in on_subscribe): the nesting is the fake's, the context stays the same.
    assert recorder.violations == ["overlapping call: on_next"] * 4


def test_from_rsocket_publisher_signals_from_rsocket_callbacks_in_the_subscribe_context() -> None:
    requester = FakeRequester()

    async def run() -> ContextRecorder:
        recorder = ContextRecorder(initial=2)
        in_context("request-1", from_rsocket_publisher(requester).subscribe, recorder)
        await settle()
        in_context("rsocket", requester.subscriber.on_next, "a")
        in_context("rsocket", requester.subscriber.on_error, ValueError("remote"))
        return recorder

    recorder = asyncio.run(run())
    assert recorder.kinds() == ["on_subscribe", "on_next", "on_error"]
    assert recorder.values() == {"request-1"}


# --- concurrent.futures -----------------------------------------------------------------


def test_from_future_settled_on_another_thread_signals_in_the_subscribe_context() -> None:
    future: Future[int] = Future()
    recorder = ContextRecorder(initial=1)
    in_context("request-1", from_future(future).subscribe, recorder)
    in_fresh_thread(lambda: (REQUEST_ID.set("settler"), future.set_result(7)))
    assert recorder.kinds() == ["on_subscribe", "on_next", "on_complete"]
    assert recorder.values() == {"request-1"}


def test_from_future_already_settled_delivers_inside_on_subscribe_without_entering_twice() -> None:
    # request(1) in on_subscribe delivers at once, inside on_subscribe, in the same context.
    future: Future[int] = Future()
    future.set_result(7)

    def tag(item: int) -> None:
        REQUEST_ID.set("changed")

    recorder = ContextRecorder(initial=1, on_next_hook=tag)
    in_context("request-1", from_future(future).subscribe, recorder)
    assert recorder.seen == [("on_subscribe", "request-1"), ("on_next", "request-1"), ("on_complete", "changed")]
