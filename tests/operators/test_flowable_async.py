"""``async for`` over a Flowable: prefetch, and cancellation when the loop is left."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from flowpy.flow import default_buffer_size
from flowpy.flowable import Flowable
from flowpy.submission import SubmissionPublisher
from tests.interop.helpers import ManualPublisher
from tests.operators.conftest import WAIT

pytestmark = pytest.mark.timeout(60)


async def cancelled(publisher: ManualPublisher) -> bool:
    """Wait, off the loop, for the subscription's cancel, which the generator's finaliser sends."""
    return await asyncio.to_thread(publisher.subscription.cancelled.wait, WAIT)


def test_async_for_over_flowable_collects_every_item() -> None:
    async def run() -> list[int]:
        return [x async for x in Flowable.range(5, 1000).map(lambda x: x * 2)]

    assert asyncio.run(run()) == [x * 2 for x in range(5, 1005)]


def test_async_for_over_flowable_of_producer_thread_collects_every_item() -> None:
    publisher = SubmissionPublisher[int](max_buffer_capacity=8)

    def produce() -> None:
        with publisher:
            for i in range(2000):
                publisher.submit(i)  # blocks while the loop is behind: prefetch 16, buffer 8

    async def run() -> list[int]:
        iterator = Flowable.from_publisher(publisher).filter(lambda x: x % 3 == 0).to_async_iterator(prefetch=16)
        producer = threading.Thread(target=produce)
        producer.start()
        got = [item async for item in iterator]
        await asyncio.to_thread(producer.join, WAIT)
        return got

    assert asyncio.run(run()) == [i for i in range(2000) if i % 3 == 0]


def test_async_for_requests_the_default_prefetch() -> None:
    publisher = ManualPublisher()

    async def run() -> None:
        iterator = Flowable.from_publisher(publisher).__aiter__()
        assert publisher.subscription.requests == [default_buffer_size()]
        publisher.subscriber.on_next("a")
        assert await iterator.__anext__() == "a"
        await iterator.aclose()  # type: ignore[attr-defined]
        assert publisher.subscription.cancelled.is_set()

    asyncio.run(run())


def test_to_async_iterator_prefetch_bounds_what_is_requested_ahead() -> None:
    publisher = ManualPublisher()

    async def run() -> list[int]:
        iterator = Flowable.from_publisher(publisher).to_async_iterator(prefetch=8)
        assert publisher.subscription.requests == [8]
        for i in range(8):
            publisher.subscriber.on_next(i)
        got = [await iterator.__anext__() for _ in range(5)]
        assert publisher.subscription.requests == [8]  # 5 taken: not yet three quarters
        got.append(await iterator.__anext__())
        assert publisher.subscription.requests == [8, 6]  # never more than 8 requested and not taken
        await iterator.aclose()
        return got

    assert asyncio.run(run()) == list(range(6))
    assert publisher.subscription.cancelled.is_set()


@pytest.mark.parametrize(
    ("prefetch", "kind", "message"),
    [
        (0, ValueError, r"^prefetch must be positive, got 0$"),
        (True, TypeError, r"^prefetch must be an int, got True$"),
    ],
)
def test_to_async_iterator_rejects_bad_prefetch(prefetch: Any, kind: type, message: str) -> None:
    with pytest.raises(kind, match=message):
        Flowable.from_publisher(ManualPublisher()).to_async_iterator(prefetch=prefetch)


def test_async_for_break_cancels_upstream() -> None:
    publisher = ManualPublisher()

    async def run() -> list[int]:
        got: list[int] = []
        flowable = Flowable.from_publisher(publisher)
        async for item in flowable:
            if not got:
                for i in range(1, 5):
                    publisher.subscriber.on_next(i)
            got.append(item)
            if item == 2:
                break
        assert await cancelled(publisher)
        return got

    async def main() -> list[int]:
        task = asyncio.ensure_future(run())
        while not publisher.subscriptions:
            await asyncio.sleep(0)
        publisher.subscriber.on_next(0)
        return await task

    assert asyncio.run(main()) == [0, 1, 2]


def test_async_for_exception_in_body_cancels_upstream() -> None:
    publisher = ManualPublisher()

    async def run() -> None:
        with pytest.raises(KeyError, match=r"^'boom'$"):
            async for _ in Flowable.from_publisher(publisher):
                raise KeyError("boom")
        assert await cancelled(publisher)

    async def main() -> None:
        task = asyncio.ensure_future(run())
        while not publisher.subscriptions:
            await asyncio.sleep(0)
        publisher.subscriber.on_next("x")
        await task

    asyncio.run(main())


def test_async_for_task_cancelled_cancels_upstream() -> None:
    publisher = ManualPublisher()

    async def run() -> None:
        async for _ in Flowable.from_publisher(publisher):
            pytest.fail("no item was sent")

    async def main() -> None:
        task = asyncio.ensure_future(run())
        while not publisher.subscriptions:
            await asyncio.sleep(0)
        await asyncio.sleep(0)  # the loop body is now parked, waiting for an item
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert publisher.subscription.cancelled.is_set()  # at once: the cancel unwinds the generator

    asyncio.run(main())


def test_async_for_reraises_upstream_error_after_items() -> None:
    async def run() -> list[int]:
        got: list[int] = []
        with pytest.raises(ZeroDivisionError):
            async for item in Flowable.range(0, 5).map(lambda x: 1 // (3 - x)):
                got.append(item)
        return got

    assert asyncio.run(run()) == [0, 0, 1]
