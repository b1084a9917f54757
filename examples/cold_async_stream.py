"""A cold asynchronous stream: IterablePublisher -> AsyncSubscriber, each on the executor.

    python examples/cold_async_stream.py

The publisher walks a generator on a thread pool; the subscriber handles its
signals on a thread pool too, one at a time, and requests one item after
handling the previous one. The generator only runs when there is demand, so
the producer can never run ahead of the consumer by more than the one item it
looks ahead. The program prints who ran where, and how far ahead the producer
ever got.
"""

from __future__ import annotations

import argparse
import threading
import time
from collections.abc import Iterator

from flowpy import default_executor
from flowpy.sources import IterablePublisher
from flowpy.subscribers import AsyncSubscriber

ITEMS = 20


class Ledger:
    """What happened, as seen from both ends."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.produced = 0
        self.consumed = 0
        self.max_ahead = 0
        self.producer_threads: set[str] = set()
        self.consumer_threads: set[str] = set()

    def readings(self) -> Iterator[int]:
        for reading in range(ITEMS):
            with self.lock:
                self.produced += 1
                self.max_ahead = max(self.max_ahead, self.produced - self.consumed)
                self.producer_threads.add(threading.current_thread().name)
            yield reading * 10


class SlowSummer(AsyncSubscriber[int]):
    """Adds the readings up, taking a millisecond over each."""

    def __init__(self, ledger: Ledger) -> None:
        super().__init__(default_executor())
        self.ledger = ledger
        self.total = 0
        self.done = threading.Event()

    def when_next(self, item: int) -> bool:
        time.sleep(0.001)  # stands for real work
        self.total += item
        with self.ledger.lock:
            self.ledger.consumed += 1
            self.ledger.consumer_threads.add(threading.current_thread().name)
        return True

    def when_complete(self) -> None:
        self.done.set()

    def when_error(self, error: BaseException) -> None:
        print(f"failed: {error!r}")
        self.done.set()


def main() -> None:
    ledger = Ledger()
    publisher = IterablePublisher(ledger.readings(), batch_size=4)
    subscriber = SlowSummer(ledger)
    started = time.perf_counter()
    publisher.subscribe(subscriber)  # returns at once: everything else runs on the pool
    with ledger.lock:
        print(f"subscribe() returned on {threading.current_thread().name}; items produced so far: {ledger.produced}")
    if not subscriber.done.wait(30):
        raise SystemExit("the stream did not finish within 30 s")
    elapsed = time.perf_counter() - started
    print(
        f"consumed {ledger.consumed} of {ledger.produced} produced items in {elapsed:.2f} s; sum = {subscriber.total}"
    )
    print(f"producer ran on {sorted(ledger.producer_threads)}")
    print(f"consumer ran on {sorted(ledger.consumer_threads)}")
    print(
        f"the producer was never more than {ledger.max_ahead} item(s) ahead of the consumer: "
        "it runs only on demand, one request at a time, plus one item of look-ahead"
    )


if __name__ == "__main__":
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    main()
