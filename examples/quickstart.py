"""Producer threads submit into a SubmissionPublisher; a fast and a slow subscriber.

    python examples/quickstart.py

Two producers call submit() as fast as they can. The fast subscriber asks for
everything; the slow one asks for 8 items at a time and takes a millisecond
over each. Each subscriber has its own buffer of 16 items: when the slow one's
buffer is full, submit() blocks, so the producers run at the slow consumer's
pace and nothing piles up. The program prints what backpressure did.
"""

from __future__ import annotations

import argparse
import threading
import time

from flowpy import SubmissionPublisher, Subscriber, Subscription

ITEMS_PER_PRODUCER = 500


class Counter(Subscriber[int]):
    """Counts items; requests ``batch`` at a time and spends ``delay`` seconds on each."""

    def __init__(self, name: str, batch: int, delay: float) -> None:
        self.name, self.batch, self.delay = name, batch, delay
        self.received = 0
        self.requests = 0
        self.done = threading.Event()
        self.subscription: Subscription | None = None

    def on_subscribe(self, subscription: Subscription) -> None:
        self.subscription = subscription
        self._request()

    def _request(self) -> None:
        assert self.subscription is not None
        self.requests += 1
        self.subscription.request(self.batch)

    def on_next(self, item: int) -> None:
        self.received += 1
        if self.delay:
            time.sleep(self.delay)  # stands for real work on each item
        if self.received % self.batch == 0:
            self._request()

    def on_error(self, error: BaseException) -> None:
        print(f"{self.name}: failed with {error!r}")
        self.done.set()

    def on_complete(self) -> None:
        self.done.set()


def main() -> None:
    fast = Counter("fast", batch=2**63 - 1, delay=0.0)
    slow = Counter("slow", batch=8, delay=0.001)
    max_lag = 0
    blocked_time = [0.0, 0.0]

    with SubmissionPublisher[int](max_buffer_capacity=16) as publisher:
        publisher.subscribe(fast)
        publisher.subscribe(slow)

        def produce(index: int) -> None:
            nonlocal max_lag
            for i in range(ITEMS_PER_PRODUCER):
                started = time.perf_counter()
                lag = publisher.submit(index * ITEMS_PER_PRODUCER + i)
                blocked_time[index] += time.perf_counter() - started
                max_lag = max(max_lag, lag)

        started = time.perf_counter()
        producers = [threading.Thread(target=produce, args=(i,)) for i in range(2)]
        for producer in producers:
            producer.start()
        for producer in producers:
            producer.join()
    # Leaving the with-block closed the publisher: subscribers complete after their buffered items.
    fast.done.wait()
    slow.done.wait()
    elapsed = time.perf_counter() - started

    total = 2 * ITEMS_PER_PRODUCER
    print(f"2 producers submitted {total} items in {elapsed:.2f} s")
    print(f"fast subscriber: {fast.received} items in {fast.requests} request(s)")
    print(f"slow subscriber: {slow.received} items in {slow.requests} requests of {slow.batch}")
    print(f"largest lag reported by submit(): {max_lag} (buffer capacity {publisher.max_buffer_capacity})")
    print(f"producers spent {sum(blocked_time):.2f} s blocked in submit(): the slow subscriber set the pace")


if __name__ == "__main__":
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    main()
