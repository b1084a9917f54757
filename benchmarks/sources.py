"""Throughput of the sources, subscribers and processors against plain baselines, in one run.

    python benchmarks/sources.py [--items N] [--repetitions R]

Every case feeds the same ``on_next`` (a counter) and reports median items/s
over R runs, the runs of all cases interleaved, with ratios to its baseline
measured in the same run:

* RangePublisher and IterablePublisher into a LambdaSubscriber (prefetch 256),
  and RangePublisher one request(1) per item, against a plain ``for`` loop
  calling the same ``on_next``;
* MulticastProcessor fanning out to 4 subscribers, against itself to 1, and
  against SubmissionPublisher fanning out to 4 (items delivered per second,
  counted once per subscriber).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import median_rate, print_table
from flowpy.executors import direct_executor
from flowpy.flow import Subscriber, Subscription
from flowpy.processors import MulticastProcessor
from flowpy.sources import IterablePublisher, RangePublisher
from flowpy.submission import SubmissionPublisher
from flowpy.subscribers import LambdaSubscriber

MAX = 2**63 - 1


class Sink:
    """The ``on_next`` every case calls: counts the items."""

    def __init__(self) -> None:
        self.count = 0

    def on_next(self, item: object) -> None:
        self.count += 1


class OneByOne(Subscriber[int]):
    """Requests one item at a time, synchronously from ``on_next``."""

    def __init__(self, sink: Sink) -> None:
        self.sink = sink
        self.subscription: Subscription | None = None

    def on_subscribe(self, subscription: Subscription) -> None:
        self.subscription = subscription
        subscription.request(1)

    def on_next(self, item: int) -> None:
        self.sink.on_next(item)
        self.subscription.request(1)  # type: ignore[union-attr]

    def on_error(self, error: BaseException) -> None:
        raise error

    def on_complete(self) -> None:
        return None


def for_loop(items: int) -> int:
    sink = Sink()
    on_next = sink.on_next
    for i in range(items):
        on_next(i)
    return sink.count


def range_lambda(items: int) -> int:
    sink = Sink()
    RangePublisher(0, items).subscribe(LambdaSubscriber(sink.on_next))
    return sink.count


def range_one_by_one(items: int) -> int:
    sink = Sink()
    RangePublisher(0, items).subscribe(OneByOne(sink))
    return sink.count


def iterable_lambda(items: int, executor: object) -> int:
    sink = Sink()
    done = threading.Event()
    kwargs = {} if executor is None else {"executor": executor}
    IterablePublisher(range(items), **kwargs).subscribe(  # type: ignore[arg-type]
        LambdaSubscriber(sink.on_next, None, done.set)
    )
    done.wait()
    return sink.count


def multicast(items: int, subscribers: int) -> int:
    """Items delivered per second by a MulticastProcessor(256) fed by a RangePublisher."""
    sinks = [Sink() for _ in range(subscribers)]
    processor: MulticastProcessor[int] = MulticastProcessor(256)
    for sink in sinks:
        processor.subscribe(LambdaSubscriber(sink.on_next, prefetch=MAX))
    RangePublisher(0, items).subscribe(processor)
    return sum(sink.count for sink in sinks)


def submission(items: int, subscribers: int) -> int:
    """Items delivered per second by a SubmissionPublisher(256) on the default pool."""
    sinks = [Sink() for _ in range(subscribers)]
    done = [threading.Event() for _ in range(subscribers)]
    publisher: SubmissionPublisher[int] = SubmissionPublisher(max_buffer_capacity=256)
    for sink, event in zip(sinks, done, strict=True):
        publisher.subscribe(LambdaSubscriber(sink.on_next, None, event.set, prefetch=MAX))
    submit = publisher.submit
    for i in range(items):
        submit(i)
    publisher.close()
    for event in done:
        event.wait()
    return sum(sink.count for sink in sinks)


def interleaved(cases: dict[str, Callable[[], int]], repetitions: int) -> list[tuple[str, float]]:
    """Median items/s of each case, running the cases round-robin ``repetitions`` times.

    Interleaving spreads the load of a shared machine over all cases alike,
    so their ratios stay meaningful when the absolute rates drift.
    """
    rates: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(repetitions):
        for name, run in cases.items():
            rates[name].append(median_rate(run, 1))
    return [(name, statistics.median(values)) for name, values in rates.items()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=10_000_000, help="items for the single-subscriber runs")
    parser.add_argument("--repetitions", type=int, default=5)
    args = parser.parse_args()
    n, reps = args.items, args.repetitions
    fan = n // 10  # items for the fan-out runs
    rows = interleaved(
        {
            "plain for loop calling on_next": lambda: for_loop(n),
            "RangePublisher -> LambdaSubscriber(256)": lambda: range_lambda(n),
            "RangePublisher -> request(1) per item": lambda: range_one_by_one(n // 10),
            "IterablePublisher(direct) -> LambdaSubscriber": lambda: iterable_lambda(n, direct_executor),
            "IterablePublisher(pool) -> LambdaSubscriber": lambda: iterable_lambda(n, None),
        },
        reps,
    )
    print_table(f"items/s, median of {reps}, {n:,} items", rows, {"loop": "plain for loop calling on_next"})
    rows = interleaved(
        {
            "MulticastProcessor 1 -> 1": lambda: multicast(fan, 1),
            "MulticastProcessor 1 -> 4": lambda: multicast(fan, 4),
            "SubmissionPublisher 1 -> 4": lambda: submission(fan, 4),
        },
        reps,
    )
    print_table(
        f"deliveries/s (items x subscribers), median of {reps}, {fan:,} items",
        rows,
        {"mc 1->1": "MulticastProcessor 1 -> 1", "SP 1->4": "SubmissionPublisher 1 -> 4"},
    )


if __name__ == "__main__":
    main()
