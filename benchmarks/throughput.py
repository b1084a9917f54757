"""Throughput of SubmissionPublisher against its baselines, in one run.

    python benchmarks/throughput.py [--items N] [--repetitions R]

Prints a table of median items/s and ratios. The baselines: a direct
``on_next`` call loop; the single-thread limit of appending to a deque and
then draining it (in chunks of the buffer capacity); ``queue.Queue(256)``
between two threads; and, when ``javac`` and ``java`` are on the PATH, the
JDK's own SubmissionPublisher (benchmarks/jdk/SubmissionPublisherBench.java).
"""

from __future__ import annotations

import argparse
import collections
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import median_rate, print_table
from flowpy.flow import Subscriber, Subscription
from flowpy.submission import SubmissionPublisher

CAPACITY = 256
MAX = 2**63 - 1


class NoOp(Subscriber[object]):
    """Requests everything and does nothing with it."""

    def __init__(self) -> None:
        self.done = threading.Event()

    def on_subscribe(self, subscription: Subscription) -> None:
        subscription.request(MAX)

    def on_next(self, item: object) -> None:
        return None

    def on_error(self, error: BaseException) -> None:
        self.done.set()

    def on_complete(self) -> None:
        self.done.set()


def direct_calls(items: int) -> int:
    on_next = NoOp().on_next
    for i in range(items):
        on_next(i)
    return items


def append_then_drain(items: int) -> int:
    on_next = NoOp().on_next
    buffer: collections.deque[int] = collections.deque()
    append, popleft = buffer.append, buffer.popleft
    for start in range(0, items, CAPACITY):
        for i in range(start, min(start + CAPACITY, items)):
            append(i)
        while buffer:
            on_next(popleft())
    return items


def queue_between_threads(items: int) -> int:
    channel: queue.Queue[int | None] = queue.Queue(CAPACITY)
    on_next = NoOp().on_next

    def consume() -> None:
        get = channel.get
        while (item := get()) is not None:
            on_next(item)

    consumer = threading.Thread(target=consume)
    consumer.start()
    put = channel.put
    for i in range(items):
        put(i)
    put(None)
    consumer.join()
    return items


def flowpy_run(producers: int, subscribers: int, items: int) -> int:
    """``producers`` threads submit ``items`` each to ``subscribers`` no-op subscribers."""
    publisher: SubmissionPublisher[int] = SubmissionPublisher(max_buffer_capacity=CAPACITY)
    sinks = [NoOp() for _ in range(subscribers)]
    for sink in sinks:
        publisher.subscribe(sink)

    def produce() -> None:
        submit = publisher.submit
        for i in range(items):
            submit(i)

    if producers == 1:
        produce()
    else:
        threads = [threading.Thread(target=produce) for _ in range(producers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    publisher.close()
    for sink in sinks:
        sink.done.wait()
    return producers * items * subscribers


def jdk_rate(items: int, repetitions: int) -> float | None:
    """The JDK's median items/s, or None when no JDK is on the PATH."""
    if not (shutil.which("javac") and shutil.which("java")):
        return None
    source = Path(__file__).resolve().parent / "jdk" / "SubmissionPublisherBench.java"
    with tempfile.TemporaryDirectory() as build:
        subprocess.run(["javac", "-d", build, str(source)], check=True)
        out = subprocess.run(
            ["java", "-cp", build, "SubmissionPublisherBench", str(items), str(repetitions), str(CAPACITY)],
            check=True,
            capture_output=True,
            text=True,
        )
    return float(out.stdout.strip())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=10_000_000, help="items for the 1 -> 1 runs")
    parser.add_argument("--repetitions", type=int, default=5)
    args = parser.parse_args()
    n, reps = args.items, args.repetitions
    rows = [
        ("direct on_next call loop", median_rate(lambda: direct_calls(n), reps)),
        ("single thread: append to deque, then drain", median_rate(lambda: append_then_drain(n), reps)),
        ("queue.Queue(256) between two threads", median_rate(lambda: queue_between_threads(n // 10), reps)),
        ("flowpy 1 producer -> 1 subscriber", median_rate(lambda: flowpy_run(1, 1, n), reps)),
        ("flowpy 1 producer -> 4 subscribers", median_rate(lambda: flowpy_run(1, 4, n // 4), reps)),
        ("flowpy 4 producers -> 1 subscriber", median_rate(lambda: flowpy_run(4, 1, n // 4), reps)),
    ]
    jdk = jdk_rate(n, reps)
    if jdk is not None:
        rows.append(("JDK SubmissionPublisher 1 -> 1 (java)", jdk))
    baselines = {
        "limit": "single thread: append to deque, then drain",
        "queue": "queue.Queue(256) between two threads",
    }
    if jdk is not None:
        baselines["JDK"] = "JDK SubmissionPublisher 1 -> 1 (java)"
    print_table(f"items/s, median of {reps}, capacity {CAPACITY}, {n:,} items for 1 -> 1", rows, baselines)


if __name__ == "__main__":
    main()
