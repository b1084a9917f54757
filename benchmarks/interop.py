"""Throughput of the interop adapters against what each library does alone, in one run.

    python benchmarks/interop.py [--items N] [--rx-items M] [--repetitions R]

Two tables of median items/s and ratios; within a table the cases run in
turn, round after round, so that they share the machine's load alike:

* asyncio: ``async for`` over a SubmissionPublisher fed by a producer thread
  (to_async_iterator, prefetch 256), against the plain asyncio hand-off an
  application would write instead: an ``asyncio.Queue(256)`` between a
  producer task and a consumer task on the same loop. Target: at least 0.7x.
  Further rows: the same with prefetch 1024 (more items in flight between
  the threads); both adapters on one loop (an async generator through
  from_async_iterable back to ``async for``); a synchronous publisher
  straight into to_async_iterator (the iterator's own cost); and the
  SubmissionPublisher alone with a no-op subscriber and no event loop (the
  ceiling of the threaded rows, though with unbounded demand).
* reactivex: handing items to another thread with ``observe_on`` on a
  one-thread ``ThreadPoolScheduler``, against a SubmissionPublisher (capacity
  256, default executor) fed by the calling thread, on the same items
  (``--rx-items``, fewer by default because ``observe_on`` is slow).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import reactivex
from reactivex import operators
from reactivex.scheduler import ThreadPoolScheduler

from benchmarks._common import print_table
from flowpy.flow import Publisher, Subscriber, Subscription
from flowpy.interop.asyncio import from_async_iterable, to_async_iterator
from flowpy.submission import SubmissionPublisher

CAPACITY = 256
MAX = 2**63 - 1


# --- asyncio -------------------------------------------------------------------------


def asyncio_queue(items: int) -> int:
    """Producer task -> asyncio.Queue(256) -> consumer task, on one loop."""

    async def run() -> int:
        queue: asyncio.Queue[int | None] = asyncio.Queue(CAPACITY)

        async def produce() -> None:
            for i in range(items):
                await queue.put(i)
            await queue.put(None)

        producer = asyncio.ensure_future(produce())
        count = 0
        while (await queue.get()) is not None:
            count += 1
        await producer
        return count

    return asyncio.run(run())


def flowpy_async_for(items: int, prefetch: int = CAPACITY) -> int:
    """Producer thread -> SubmissionPublisher(256) -> to_async_iterator(prefetch) -> async for."""

    async def run() -> int:
        publisher: SubmissionPublisher[int] = SubmissionPublisher(max_buffer_capacity=CAPACITY)
        iterator = to_async_iterator(publisher, prefetch=prefetch)

        def produce() -> None:
            for i in range(items):
                publisher.submit(i)
            publisher.close()

        producer = threading.Thread(target=produce)
        producer.start()
        count = 0
        async for _ in iterator:
            count += 1
        producer.join()
        return count

    return asyncio.run(run())


class Burst(Publisher[int]):
    """Delivers requested items at once, on the requesting thread: no thread, no buffer of its own."""

    def __init__(self, items: int) -> None:
        self.items = items

    def subscribe(self, subscriber: Subscriber[int]) -> None:
        subscriber.on_subscribe(BurstSubscription(subscriber, self.items))


class BurstSubscription(Subscription):
    def __init__(self, subscriber: Subscriber[int], items: int) -> None:
        self.subscriber = subscriber
        self.next = 0
        self.end = items

    def request(self, n: int) -> None:
        start, stop = self.next, min(self.end, self.next + n)
        self.next = stop
        on_next = self.subscriber.on_next
        for i in range(start, stop):
            on_next(i)
        if stop == self.end:
            self.next = self.end + 1  # complete once
            self.subscriber.on_complete()

    def cancel(self) -> None:
        self.next = self.end + 1


def flowpy_adapter_alone(items: int) -> int:
    """A synchronous publisher -> to_async_iterator(prefetch=256) -> async for: the adapter's own cost."""

    async def run() -> int:
        count = 0
        async for _ in to_async_iterator(Burst(items), prefetch=CAPACITY):
            count += 1
        return count

    return asyncio.run(run())


def flowpy_same_loop(items: int) -> int:
    """Async generator -> from_async_iterable (on this loop) -> to_async_iterator(prefetch=256) -> async for."""

    async def run() -> int:
        async def produce() -> AsyncIterator[int]:
            for i in range(items):
                yield i

        publisher = from_async_iterable(produce(), loop=asyncio.get_running_loop())
        count = 0
        async for _ in to_async_iterator(publisher, prefetch=CAPACITY):
            count += 1
        return count

    return asyncio.run(run())


# --- reactivex -------------------------------------------------------------------------


def rx_observe_on(items: int) -> int:
    """reactivex.from_iterable -> observe_on(ThreadPoolScheduler(1)) -> observer."""
    scheduler = ThreadPoolScheduler(1)
    done = threading.Event()
    count = 0

    def on_next(_item: int) -> None:
        nonlocal count
        count += 1

    reactivex.from_iterable(range(items)).pipe(operators.observe_on(scheduler)).subscribe(
        on_next, lambda error: done.set(), done.set
    )
    done.wait()
    scheduler.executor.shutdown()
    return count


class Counter(Subscriber[int]):
    """Requests everything and counts."""

    def __init__(self) -> None:
        self.count = 0
        self.done = threading.Event()

    def on_subscribe(self, subscription: Subscription) -> None:
        subscription.request(MAX)

    def on_next(self, item: int) -> None:
        self.count += 1

    def on_error(self, error: BaseException) -> None:
        self.done.set()

    def on_complete(self) -> None:
        self.done.set()


def flowpy_submission(items: int) -> int:
    """Calling thread -> SubmissionPublisher(256) on the default executor -> subscriber."""
    publisher: SubmissionPublisher[int] = SubmissionPublisher(max_buffer_capacity=CAPACITY)
    counter = Counter()
    publisher.subscribe(counter)
    for i in range(items):
        publisher.submit(i)
    publisher.close()
    counter.done.wait()
    return counter.count


def interleaved_rates(cases: list[tuple[str, Callable[[], int]]], repetitions: int) -> list[tuple[str, float]]:
    """Run every case once per round, ``repetitions`` rounds, and return each case's median items/s.

    Interleaving the cases keeps them side by side in time, so a machine
    whose load drifts during the run affects every case alike.
    """
    rates: dict[str, list[float]] = {name: [] for name, _ in cases}
    for _ in range(repetitions):
        for name, run in cases:
            start = time.perf_counter()
            items = run()
            rates[name].append(items / (time.perf_counter() - start))
    return [(name, statistics.median(rates[name])) for name, _ in cases]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=1_000_000, help="items per asyncio run")
    parser.add_argument("--rx-items", type=int, default=100_000, help="items per reactivex run")
    parser.add_argument("--repetitions", type=int, default=5, help="runs per case; the median is reported")
    args = parser.parse_args()
    items, rx_items, repetitions = args.items, args.rx_items, args.repetitions

    queue, alone = "asyncio.Queue(256), producer task", "SubmissionPublisher alone, no-op subscriber"
    print_table(
        f"asyncio: {items:,} items, median of {repetitions}, cases interleaved",
        interleaved_rates(
            [
                (queue, lambda: asyncio_queue(items)),
                ("flowpy -> async for, producer thread", lambda: flowpy_async_for(items)),
                ("  the same with prefetch=1024", lambda: flowpy_async_for(items, 1024)),
                ("flowpy from_async_iterable -> async for", lambda: flowpy_same_loop(items)),
                ("flowpy sync publisher -> async for", lambda: flowpy_adapter_alone(items)),
                (alone, lambda: flowpy_submission(items)),
            ],
            repetitions,
        ),
        {"Queue": queue, "alone": alone},
    )
    observe_on = "rx observe_on(ThreadPoolScheduler(1))"
    print_table(
        f"reactivex: {rx_items:,} items, median of {repetitions}, cases interleaved",
        interleaved_rates(
            [
                (observe_on, lambda: rx_observe_on(rx_items)),
                ("flowpy SubmissionPublisher(256)", lambda: flowpy_submission(rx_items)),
            ],
            repetitions,
        ),
        {"observe_on": observe_on},
    )


if __name__ == "__main__":
    main()
