"""Throughput of SubmissionPublisher, in both core implementations, against its baselines, in one run.

    python benchmarks/throughput.py [--items N] [--repetitions R] [--json PATH] [--context]

Prints a table of median items/s and ratios. Every flowpy case runs with the
compiled core ("c", when it was built) and the pure-Python one ("python"),
each on its own SubmissionPublisher class (``flowpy.submission.TWINS``);
the repetitions are interleaved (each round runs every case once, in both
implementations), so a change in machine load hits all of them alike. The
baselines: a direct ``on_next`` call loop; the single-thread limit of
appending to a deque and then draining it (in chunks of the buffer
capacity); ``queue.Queue(256)`` between two threads; and, when ``javac`` and
``java`` are on the PATH, the JDK's own SubmissionPublisher
(benchmarks/jdk/SubmissionPublisherBench.java). ``--json`` also writes the
figures for benchmarks/chart.py.

``--context`` measures instead what context propagation costs
(flowpy/_context.py): 1 -> 1 ``submit`` on the default pool and on
``direct_executor`` (one delivery pass per item, the worst case), each with
propagation on and off, in both cores, interleaved in the same rounds.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import queue
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, ParamSpec

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import machine, print_table
from flowpy import _context
from flowpy.executors import DEFAULT, Default, Executor, direct_executor
from flowpy.flow import Subscriber, Subscription
from flowpy.submission import TWINS, SubmissionPublisher

CAPACITY = 256
MAX = 2**63 - 1
P = ParamSpec("P")


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


def python_floor(items: int) -> int:
    """The least a pure-Python publisher with flowpy's guarantees does per item, for one subscriber.

    A re-entrant producer lock taken per item (producers stay serialised,
    and a subscriber may publish from ``on_next``), a bounded deque, a
    producer that blocks while it is full, and a consumer thread that calls
    ``on_next`` and is woken only when it went idle, with no lost wake-up
    (the "store, then load" pairs of flowpy/_buffered.py). No demand, no
    executor, no errors, no closing: everything else flowpy does costs more.
    """
    on_next = NoOp().on_next
    lock = threading.RLock()
    space = threading.Condition(lock)
    wake = threading.Semaphore(0)
    buffer: collections.deque[int] = collections.deque()
    running = False  # the consumer is draining, or was woken to
    waiting = False  # the producer waits for space (set under the lock)
    done = False

    def consume() -> None:
        nonlocal running, waiting
        popleft = buffer.popleft
        while True:
            wake.acquire()
            while True:
                while buffer:
                    on_next(popleft())
                    if waiting:  # store (popleft), then load (waiting)
                        with space:
                            waiting = False
                            space.notify()
                running = False
                if not buffer:  # store (running), then load (buffer)
                    break
                running = True
            if done:
                return

    consumer = threading.Thread(target=consume)
    consumer.start()
    append, acquire, release = buffer.append, lock.acquire, lock.release
    for i in range(items):
        acquire()
        try:
            if len(buffer) >= CAPACITY:
                waiting = True  # store (waiting), then load (the length)
                while len(buffer) >= CAPACITY:
                    space.wait()
                waiting = False
            append(i)
            if not running:  # store (append), then load (running)
                running = True
                wake.release()
        finally:
            release()
    done = True
    wake.release()
    consumer.join()
    return items


def flowpy_run(
    producers: int,
    subscribers: int,
    items: int,
    many: bool = False,
    executor: Executor | Default = DEFAULT,
    publisher_class: type[SubmissionPublisher[Any]] = SubmissionPublisher,
) -> int:
    """``producers`` threads submit ``items`` each to ``subscribers`` no-op subscribers; returns deliveries.

    ``many`` uses one ``submit_many`` call per producer instead of ``submit`` per item. The publisher is a
    ``publisher_class``: one core's twin (``flowpy.submission.TWINS``), by default the one this process chose.
    """
    publisher: SubmissionPublisher[int] = publisher_class(executor, max_buffer_capacity=CAPACITY)
    sinks = [NoOp() for _ in range(subscribers)]
    for sink in sinks:
        publisher.subscribe(sink)

    def produce() -> None:
        if many:
            publisher.submit_many(range(items))
            return
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


Case = Callable[[type[SubmissionPublisher[Any]]], int]
"""A flowpy case: runs on the SubmissionPublisher class it is given, returns the deliveries."""


def flowpy_cases(n: int) -> dict[str, Case]:
    """The flowpy cases; each moves about ``n`` deliveries."""
    return {
        "1 -> 1 submit": lambda cls: flowpy_run(1, 1, n, publisher_class=cls),
        "1 -> 1 submit_many": lambda cls: flowpy_run(1, 1, n, many=True, publisher_class=cls),
        "1 -> 4 submit (deliveries)": lambda cls: flowpy_run(1, 4, n // 4, publisher_class=cls),
        "4 -> 4 submit (deliveries)": lambda cls: flowpy_run(4, 4, n // 16, publisher_class=cls),
        "4 -> 1 submit": lambda cls: flowpy_run(4, 1, n // 4, publisher_class=cls),
    }


def without_context(run: Callable[P, int]) -> Callable[P, int]:
    """``run`` with context propagation switched off for the subscriptions it makes."""

    def wrapped(*args: P.args, **kwargs: P.kwargs) -> int:
        _context.enabled = False
        try:
            return run(*args, **kwargs)
        finally:
            _context.enabled = True

    return wrapped


def context_cases(n: int) -> dict[str, Case]:
    """1 -> 1 submit on the pool and on direct_executor, with and without context propagation."""
    cases: dict[str, Case] = {}
    for label, executor in (("pool", DEFAULT), ("direct_executor", direct_executor)):

        def run(cls: type[SubmissionPublisher[Any]], executor: Executor | Default = executor) -> int:
            return flowpy_run(1, 1, n, executor=executor, publisher_class=cls)

        cases[f"1 -> 1 submit, {label}, context on"] = run
        cases[f"1 -> 1 submit, {label}, context off"] = without_context(run)
    return cases


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


def rate(run: Callable[[], int]) -> float:
    start = time.perf_counter()
    items = run()
    return items / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=10_000_000, help="items (deliveries) per flowpy run")
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--json", type=Path, help="also write the medians here, for benchmarks/chart.py")
    parser.add_argument("--context", action="store_true", help="measure context propagation on against off")
    parser.add_argument(
        "--only", action="append", default=[], metavar="TEXT", help="run only the flowpy cases whose name has TEXT"
    )
    parser.add_argument(
        "--floor", action="store_true", help="add the pure-Python floor (python_floor) to the baselines"
    )
    parser.add_argument("--no-jdk", action="store_true", help="leave out the JDK baseline")
    args = parser.parse_args()
    n, reps = args.items, args.repetitions
    implementations = [name for name in ("c", "python") if name in TWINS]
    baselines: dict[str, Callable[[], int]] = {
        "direct on_next call loop": lambda: direct_calls(n),
        "single thread: append to deque, then drain": lambda: append_then_drain(n),
        "queue.Queue(256) between two threads": lambda: queue_between_threads(n // 10),
    }
    if args.floor:
        baselines["pure-Python floor (python_floor)"] = lambda: python_floor(n)
    cases = context_cases(n) if args.context else flowpy_cases(n)
    if args.only:
        cases = {name: run for name, run in cases.items() if any(text in name for text in args.only)}
    rates: dict[str, list[float]] = collections.defaultdict(list)
    load = []
    for _ in range(reps):  # interleaved: every case once per round
        load.append(os.getloadavg()[0])
        for name, run in baselines.items():
            rates[name].append(rate(run))
        for case, run in cases.items():
            for implementation in implementations:
                rates[f"flowpy [{implementation}] {case}"].append(rate(partial(run, TWINS[implementation])))
    rows = [(name, statistics.median(values)) for name, values in rates.items()]
    jdk = None if args.context or args.no_jdk else jdk_rate(n, reps)
    if jdk is not None:
        rows.append(("JDK SubmissionPublisher 1 -> 1 (java)", jdk))
    columns = {
        "limit": "single thread: append to deque, then drain",
        "queue": "queue.Queue(256) between two threads",
    }
    if jdk is not None:
        columns["JDK"] = "JDK SubmissionPublisher 1 -> 1 (java)"
    print_table(f"items/s, median of {reps} interleaved, capacity {CAPACITY}, {n:,} items per run", rows, columns)
    print(f"load average (1 min) at each round: {', '.join(f'{x:.2f}' for x in load)}")
    if args.json is not None:
        args.json.write_text(
            json.dumps(
                {"machine": machine(), "items": n, "repetitions": reps, "load": load, "rates": dict(rows)}, indent=2
            )
            + "\n"
        )


if __name__ == "__main__":
    main()
