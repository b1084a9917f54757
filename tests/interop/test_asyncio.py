"""asyncio interop: to_async_iterator, from_async_iterable, collect_async."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import threading
from collections.abc import AsyncIterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flowpy import direct_executor
from flowpy.interop.asyncio import collect_async, from_async_iterable, to_async_iterator
from flowpy.submission import SubmissionPublisher
from tests.interop.helpers import ManualPublisher, ManualSubscription, ThreadsafeCallCounter, WaitingRecorder
from tests.support import Recorder

pytestmark = pytest.mark.timeout(60)


# --- to_async_iterator -------------------------------------------------------------


def test_to_async_iterator_over_producer_threads_keeps_memory_bounded() -> None:
    producers, per_producer, prefetch, capacity = 3, 20_000, 64, 128
    publisher: SubmissionPublisher[tuple[int, int]] = SubmissionPublisher(max_buffer_capacity=capacity)

    def produce(p: int) -> None:
        for i in range(per_producer):
            publisher.submit((p, i))

    async def consume() -> tuple[dict[int, list[int]], int, int]:
        iterator = to_async_iterator(publisher, prefetch=prefetch)
        threads = [threading.Thread(target=produce, args=(p,)) for p in range(producers)]
        for thread in threads:
            thread.start()
        received: dict[int, list[int]] = {p: [] for p in range(producers)}
        most_buffered = most_lag = 0
        count = 0
        async for p, i in iterator:
            received[p].append(i)
            count += 1
            most_buffered = max(most_buffered, len(iterator._inbox._items))
            most_lag = max(most_lag, publisher.estimate_maximum_lag())
            if count % 500 == 0:
                await asyncio.sleep(0.001)  # a slow consumer
            if count == producers * per_producer:
                break
        for thread in threads:
            thread.join()
        return received, most_buffered, most_lag

    received, most_buffered, most_lag = asyncio.run(consume())
    publisher.close()
    assert all(items == list(range(per_producer)) for items in received.values())
    assert most_buffered <= prefetch
    assert most_lag <= capacity


def test_to_async_iterator_requests_prefetch_then_three_quarters_at_a_time() -> None:
    publisher = ManualPublisher()

    async def run() -> list[int]:
        iterator = to_async_iterator(publisher, prefetch=8)
        assert publisher.subscription.requests == [8]
        for i in range(8):
            publisher.subscriber.on_next(i)
        got = [await iterator.__anext__() for _ in range(6)]
        assert publisher.subscription.requests == [8, 6]
        got += [await iterator.__anext__() for _ in range(2)]
        await iterator.aclose()
        return got

    assert asyncio.run(run()) == list(range(8))
    assert publisher.subscription.cancelled.is_set()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    prefetch=st.integers(1, 40),
    bursts=st.lists(st.integers(0, 50), min_size=1, max_size=20),
    takes=st.lists(st.integers(0, 50), min_size=1, max_size=20),
)
def test_to_async_iterator_never_more_than_prefetch_outstanding(
    prefetch: int, bursts: list[int], takes: list[int]
) -> None:
    """However the publisher sends (within demand) and the consumer takes: requested - taken <= prefetch."""
    publisher = ManualPublisher()

    async def run() -> None:
        iterator = to_async_iterator(publisher, prefetch=prefetch)
        subscription = publisher.subscription
        sent = taken = 0
        for burst, take in zip(bursts, takes, strict=False):
            burst = min(burst, subscription.requested - sent)  # a publisher obeys rule 1.1
            for _ in range(burst):
                publisher.subscriber.on_next(sent)
                sent += 1
            for _ in range(min(take, sent - taken)):
                assert await iterator.__anext__() == taken
                taken += 1
            assert subscription.requested - taken <= prefetch
            assert len(iterator._inbox._items) == sent - taken <= prefetch
            assert all(n > 0 for n in subscription.requests)
        await iterator.aclose()

    asyncio.run(run())


def test_to_async_iterator_wakes_parked_consumer_once_per_batch() -> None:
    publisher = ManualPublisher()

    async def run() -> tuple[list[int], int]:
        counter = ThreadsafeCallCounter(asyncio.get_running_loop())
        iterator = to_async_iterator(publisher, prefetch=256)
        first = asyncio.ensure_future(iterator.__anext__())
        while iterator._inbox._waiter is None:  # let the consumer park
            await asyncio.sleep(0)
        for i in range(200):  # a burst while the consumer is parked
            publisher.subscriber.on_next(i)
        items = [await first] + [await iterator.__anext__() for _ in range(199)]
        await iterator.aclose()
        return items, counter.calls

    items, calls = asyncio.run(run())
    assert items == list(range(200))
    assert calls == 1


def test_to_async_iterator_reraises_on_error_after_preceding_items() -> None:
    publisher = ManualPublisher()
    error = ConnectionResetError("peer went away")

    async def run() -> list[int]:
        got: list[int] = []
        iterator = to_async_iterator(publisher)
        publisher.subscriber.on_next(1)
        publisher.subscriber.on_next(2)
        publisher.subscriber.on_error(error)
        with pytest.raises(ConnectionResetError) as raised:
            async for item in iterator:
                got.append(item)
        assert raised.value is error
        with pytest.raises(StopAsyncIteration):  # the error is raised once
            await iterator.__anext__()
        return got

    assert asyncio.run(run()) == [1, 2]
    assert not publisher.subscription.cancelled.is_set()  # a terminated subscription needs no cancel


def test_to_async_iterator_break_cancels_the_subscription() -> None:
    with SubmissionPublisher[int](direct_executor) as publisher:

        async def run() -> None:
            async for item in to_async_iterator(publisher, prefetch=4):
                if item == 2:
                    break

        def produce() -> None:
            for i in range(10):
                if not publisher.has_subscribers:
                    return
                publisher.offer(i)

        async def main() -> None:
            task = asyncio.ensure_future(run())
            await asyncio.sleep(0)
            await asyncio.to_thread(produce)
            await task

        asyncio.run(main())
        gc.collect()
        assert publisher.number_of_subscribers == 0


async def iterate(publisher: Any) -> None:
    async for _ in to_async_iterator(publisher):
        pytest.fail("no item was sent")


@pytest.mark.parametrize("consume", [iterate, collect_async])
def test_consuming_task_cancel_cancels_the_subscription(consume: Any) -> None:
    publisher = ManualPublisher()

    async def run() -> None:
        task = asyncio.ensure_future(consume(publisher))
        while not publisher.subscriptions:
            await asyncio.sleep(0)
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(run())
    assert publisher.subscription.cancelled.is_set()


def test_to_async_iterator_aclose_cancels_and_ends_iteration() -> None:
    publisher = ManualPublisher()

    async def run() -> None:
        async with contextlib.aclosing(to_async_iterator(publisher)) as iterator:
            publisher.subscriber.on_next("a")
            publisher.subscriber.on_next("b")
            assert await iterator.__anext__() == "a"
        assert publisher.subscription.cancelled.is_set()
        with pytest.raises(StopAsyncIteration):
            await iterator.__anext__()  # "b" was discarded with the subscription

    asyncio.run(run())


def test_to_async_iterator_cancel_before_on_subscribe_cancels_on_arrival() -> None:
    class LatePublisher(ManualPublisher):
        def subscribe(self, subscriber: Any) -> None:
            self.subscribers.append(subscriber)

    publisher = LatePublisher()

    async def run() -> None:
        iterator = to_async_iterator(publisher)
        await iterator.aclose()

    asyncio.run(run())
    subscription = ManualSubscription()
    publisher.subscriber.on_subscribe(subscription)
    assert subscription.cancelled.is_set()
    assert subscription.requests == []


@pytest.mark.parametrize(
    ("prefetch", "kind", "message"),
    [
        (0, ValueError, r"^prefetch must be positive, got 0$"),
        (-1, ValueError, r"^prefetch must be positive, got -1$"),
        (True, TypeError, r"^prefetch must be an int, got True$"),
        (2.5, TypeError, r"^prefetch must be an int, got 2\.5$"),
    ],
)
def test_to_async_iterator_rejects_bad_prefetch(prefetch: Any, kind: type, message: str) -> None:
    with pytest.raises(kind, match=message):
        to_async_iterator(ManualPublisher(), prefetch=prefetch)


def test_to_async_iterator_inbox_enforces_rule_2_13() -> None:
    publisher = ManualPublisher()

    async def run() -> None:
        iterator = to_async_iterator(publisher)
        with pytest.raises(TypeError, match=r"^item must not be None \(rule 2\.13\)$"):
            publisher.subscriber.on_next(None)
        with pytest.raises(TypeError, match=r"^error must not be None \(rule 2\.13\)$"):
            publisher.subscriber.on_error(None)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match=r"^subscription must not be None \(rule 2\.13\)$"):
            publisher.subscriber.on_subscribe(None)  # type: ignore[arg-type]
        second = ManualPublisher()
        second.subscribe(publisher.subscriber)
        assert second.subscription.cancelled.is_set()  # rule 2.5
        await iterator.aclose()

    asyncio.run(run())


# --- collect_async ------------------------------------------------------------------


def test_collect_async_returns_all_items() -> None:
    async def run() -> list[int]:
        publisher: SubmissionPublisher[int] = SubmissionPublisher()
        collecting = asyncio.ensure_future(collect_async(publisher))
        await asyncio.sleep(0)

        def produce() -> None:
            for i in range(5000):
                publisher.submit(i)
            publisher.close()

        await asyncio.to_thread(produce)
        return await collecting

    assert asyncio.run(run()) == list(range(5000))


# --- from_async_iterable -------------------------------------------------------------


class CountingSource:
    """An async iterable of 0..n-1 that counts how far it was pulled, and whether it was closed."""

    def __init__(self, n: int | None) -> None:
        self.n = n
        self.pulled = 0
        self.closed = threading.Event()

    def __aiter__(self) -> AsyncIterator[int]:
        return self.generate()

    async def generate(self) -> AsyncIterator[int]:
        try:
            i = 0
            while self.n is None or i < self.n:
                self.pulled += 1
                yield i
                i += 1
        finally:
            self.closed.set()


def test_from_async_iterable_pulls_only_what_was_requested() -> None:
    source = CountingSource(None)
    recorder = WaitingRecorder()
    from_async_iterable(source).subscribe(recorder)
    assert recorder.subscribed.wait(5)
    recorder.request(3)
    recorder.wait_for_items(3)
    recorder.request(2)
    recorder.wait_for_items(5)
    assert source.pulled == 5
    recorder.cancel()
    assert source.closed.wait(5)
    assert recorder.items == [0, 1, 2, 3, 4]
    assert recorder.violations == []
    assert not recorder.done.is_set()


@settings(max_examples=25, deadline=None)
@given(requests=st.lists(st.integers(1, 20), min_size=1, max_size=8), total=st.integers(0, 60))
def test_from_async_iterable_random_requests_deliver_in_order_within_demand(requests: list[int], total: int) -> None:
    source = CountingSource(total)
    recorder = WaitingRecorder()
    from_async_iterable(source).subscribe(recorder)
    assert recorder.subscribed.wait(5)
    asked = 0
    for n in requests:
        recorder.request(n)
        asked += n
        expected = min(asked, total)
        recorder.wait_for_items(expected)
        assert source.pulled == expected  # never pulled ahead of demand
    if asked > total:
        assert recorder.done.wait(5) and recorder.completed
    assert recorder.items == list(range(min(asked, total)))
    assert recorder.violations == []
    recorder.cancel()


def test_from_async_iterable_runs_on_the_given_loop() -> None:
    async def run() -> tuple[set[int], list[int]]:
        async def numbers() -> AsyncIterator[int]:
            for i in range(4):
                yield i

        recorder = Recorder(initial=10)
        from_async_iterable(numbers(), loop=asyncio.get_running_loop()).subscribe(recorder)
        while not recorder.done.is_set():
            await asyncio.sleep(0)
        return recorder.threads, recorder.items

    threads, items = asyncio.run(run())
    assert threads == {threading.get_ident()}
    assert items == [0, 1, 2, 3]


def test_from_async_iterable_default_loop_is_its_own_thread() -> None:
    recorder = Recorder(initial=2)  # the end is found by asking for one more
    from_async_iterable(CountingSource(1)).subscribe(recorder)
    assert recorder.done.wait(5)
    assert recorder.kinds() == ["on_subscribe", "on_next", "on_complete"]
    (thread,) = [t for t in threading.enumerate() if t.ident in recorder.threads]
    assert thread.name == "flowpy-asyncio" and thread.daemon


def test_from_async_iterable_request_zero_signals_rule_3_9_and_closes_source() -> None:
    source = CountingSource(None)
    recorder = WaitingRecorder()
    from_async_iterable(source).subscribe(recorder)
    assert recorder.subscribed.wait(5)
    recorder.request(2)
    recorder.wait_for_items(2)
    recorder.subscription.request(0)  # type: ignore[union-attr]
    assert recorder.done.wait(5)
    assert isinstance(recorder.error, ValueError)
    assert str(recorder.error) == "non-positive subscription request: n must be > 0 (rule 3.9), got 0"
    assert source.closed.wait(5)


def test_from_async_iterable_source_failure_signals_on_error() -> None:
    error = LookupError("no more")

    async def failing() -> AsyncIterator[int]:
        yield 1
        raise error

    recorder = Recorder(initial=5)
    from_async_iterable(failing()).subscribe(recorder)
    assert recorder.done.wait(5)
    assert recorder.kinds() == ["on_subscribe", "on_next", "on_error"]
    assert recorder.error is error


def test_from_async_iterable_none_item_signals_type_error() -> None:
    async def nones() -> AsyncIterator[Any]:
        yield None

    recorder = Recorder(initial=1)
    from_async_iterable(nones()).subscribe(recorder)
    assert recorder.done.wait(5)
    assert isinstance(recorder.error, TypeError)
    assert str(recorder.error) == "async iterable must not yield None (rule 2.13)"


def test_from_async_iterable_async_iterator_serves_one_subscriber() -> None:
    publisher = from_async_iterable(CountingSource(3).generate())
    first, second = Recorder(initial=5), Recorder(initial=5)
    publisher.subscribe(first)
    publisher.subscribe(second)
    assert first.done.wait(5) and second.done.wait(5)
    assert first.items == [0, 1, 2] and first.completed
    assert second.kinds() == ["on_subscribe", "on_error"]
    assert isinstance(second.error, RuntimeError)
    assert str(second.error).endswith("can be subscribed to once; pass an async iterable to serve several subscribers")


def test_from_async_iterable_iterable_serves_each_subscriber_from_the_start() -> None:
    publisher = from_async_iterable(CountingSource(3))
    recorders = [Recorder(initial=5) for _ in range(3)]
    for recorder in recorders:
        publisher.subscribe(recorder)
    for recorder in recorders:
        assert recorder.done.wait(5)
        assert recorder.items == [0, 1, 2] and recorder.completed


def test_from_async_iterable_closed_loop_signals_error_after_on_subscribe() -> None:
    loop = asyncio.new_event_loop()
    loop.close()
    recorder = Recorder()
    from_async_iterable(CountingSource(1), loop=loop).subscribe(recorder)
    assert recorder.kinds() == ["on_subscribe", "on_error"]
    assert isinstance(recorder.error, RuntimeError)


def test_from_async_iterable_request_inside_on_next_is_not_recursive() -> None:
    depth = 0
    deepest = 0

    class OneByOne(Recorder):
        def on_next(self, item: Any) -> None:
            nonlocal depth, deepest
            depth += 1
            deepest = max(deepest, depth)
            super().on_next(item)
            self.request(1)
            depth -= 1

    recorder = OneByOne(initial=1)
    from_async_iterable(CountingSource(50)).subscribe(recorder)
    assert recorder.done.wait(5)
    assert recorder.items == list(range(50)) and recorder.completed
    assert deepest == 1  # rule 3.3


@pytest.mark.parametrize(
    ("call", "kind", "message"),
    [
        (lambda: from_async_iterable([1, 2]), TypeError, r"^aiterable must be an async iterable, got \[1, 2\]$"),
        (
            lambda: from_async_iterable(CountingSource(1), loop=3),
            TypeError,  # type: ignore[arg-type]
            r"^loop must be an asyncio event loop, got 3$",
        ),
        (
            lambda: from_async_iterable(CountingSource(1)).subscribe(None),
            TypeError,  # type: ignore[arg-type]
            r"^subscriber must not be None \(rule 1\.9\)$",
        ),
    ],
)
def test_from_async_iterable_rejects_bad_arguments(call: Any, kind: type, message: str) -> None:
    with pytest.raises(kind, match=message):
        call()


@pytest.mark.parametrize("publisher", [None, 5])
def test_to_async_iterator_refuses_what_is_no_publisher_at_the_call(publisher: Any) -> None:
    with pytest.raises(TypeError, match=rf"^publisher must be a Publisher, got {publisher!r}$"):
        to_async_iterator(publisher)


async def _until(condition: Any, rounds: int = 10_000) -> None:
    """Let the running loop turn until ``condition()`` holds; fail after ``rounds`` turns."""
    for _ in range(rounds):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("condition not reached")


def test_from_async_iterable_cancel_inside_on_next_closes_the_source_and_nothing_follows() -> None:
    source = CountingSource(None)

    async def run() -> Recorder:
        recorder = Recorder(initial=10, on_next_hook=lambda item: recorder.cancel() if item == 1 else None)
        from_async_iterable(source, loop=asyncio.get_running_loop()).subscribe(recorder)
        await _until(source.closed.is_set)
        for _ in range(10):  # a signal after the cancel would come in these turns
            await asyncio.sleep(0)
        return recorder

    recorder = asyncio.run(run())
    assert recorder.kinds() == ["on_subscribe", "on_next", "on_next"]
    assert source.pulled == 2
    assert recorder.violations == []


def test_from_async_iterable_request_zero_inside_on_next_signals_rule_3_9_and_closes_the_source() -> None:
    source = CountingSource(None)

    async def run() -> Recorder:
        recorder = Recorder(initial=10, on_next_hook=lambda item: recorder.request(0))
        from_async_iterable(source, loop=asyncio.get_running_loop()).subscribe(recorder)
        await _until(recorder.done.is_set)
        await _until(source.closed.is_set)
        return recorder

    recorder = asyncio.run(run())
    assert recorder.kinds() == ["on_subscribe", "on_next", "on_error"]
    assert isinstance(recorder.error, ValueError)
    assert str(recorder.error) == "non-positive subscription request: n must be > 0 (rule 3.9), got 0"
    assert source.pulled == 1


@pytest.mark.parametrize("order", ["bad request, then cancel", "cancel, then bad request"])
def test_from_async_iterable_the_first_of_a_bad_request_and_a_cancel_decides(order: str) -> None:
    source = CountingSource(None)

    async def run() -> Recorder:
        recorder = Recorder(initial=1)
        from_async_iterable(source, loop=asyncio.get_running_loop()).subscribe(recorder)
        await _until(lambda: len(recorder.items) == 1)
        await asyncio.sleep(0)  # the pump parks: no demand left
        subscription = recorder.subscription
        assert subscription is not None
        if order == "bad request, then cancel":
            subscription.request(-1)
            subscription.cancel()
        else:
            subscription.cancel()
            subscription.request(-1)
        await _until(source.closed.is_set)
        for _ in range(10):
            await asyncio.sleep(0)
        return recorder

    recorder = asyncio.run(run())
    if order == "bad request, then cancel":
        assert recorder.kinds() == ["on_subscribe", "on_next", "on_error"]
        assert str(recorder.error) == "non-positive subscription request: n must be > 0 (rule 3.9), got -1"
    else:
        assert recorder.kinds() == ["on_subscribe", "on_next"]  # rule 3.6: nothing after the cancel
    assert source.pulled == 1


def test_from_async_iterable_request_and_cancel_on_a_closed_loop_return_quietly() -> None:
    loop = asyncio.new_event_loop()
    loop.close()
    recorder = Recorder(initial=1)  # requests inside on_subscribe, on the closed loop
    from_async_iterable(CountingSource(1), loop=loop).subscribe(recorder)
    recorder.request(1)  # rules 3.15, 3.16: the closed loop took the stream with it
    recorder.request(0)
    recorder.cancel()
    assert recorder.kinds() == ["on_subscribe", "on_error"]
    assert isinstance(recorder.error, RuntimeError)
    assert recorder.violations == []


def test_from_async_iterable_subscriber_raising_is_reported_to_the_loop_and_ends_the_stream() -> None:
    source = CountingSource(None)
    failure = RuntimeError("on_next failed")
    reported: list[dict[str, Any]] = []

    def fail(item: Any) -> None:
        raise failure

    async def run() -> Recorder:
        asyncio.get_running_loop().set_exception_handler(lambda loop, context: reported.append(context))
        recorder = Recorder(initial=10, on_next_hook=fail)
        from_async_iterable(source, loop=asyncio.get_running_loop()).subscribe(recorder)
        await _until(source.closed.is_set)
        for _ in range(10):
            await asyncio.sleep(0)
        return recorder

    recorder = asyncio.run(run())
    assert recorder.kinds() == ["on_subscribe", "on_next"]  # rule 2.13: cancelled, no signal follows
    assert source.pulled == 1
    (context,) = reported
    assert context["exception"] is failure
    assert context["message"] == f"{recorder!r} raised from a signal (rule 2.13)"
