"""The cost of metrics collection: SubmissionPublisher throughput with and without monitoring, in one run.

    python benchmarks/metrics.py [--items N] [--repetitions R] [--interval SECONDS]

Every case runs with both core implementations, each on its own
SubmissionPublisher class (``flowpy.submission.TWINS``); the repetitions are
interleaved (each round runs every case once, in a rotating order), so a
change in machine load hits all of them alike. The cases: nothing collected; a control thread that
wakes every ``--interval`` seconds and does nothing (a thread waking up
changes how the GIL passes between producer and consumer, which alone moves
the rate); a thread calling ``publisher.snapshot()`` every ``--interval``
seconds; and an OpenTelemetry
SDK ``MeterProvider`` with ``flowpy.interop.otel.instrument`` whose in-memory
reader collects every ``--interval`` seconds (skipped without
``opentelemetry-sdk``). The default interval, 1 ms, is far more often than a
real exporter collects (OpenTelemetry's default is 60 s): it shows an upper
bound of the cost.
"""

from __future__ import annotations

import argparse
import collections
import os
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import machine
from benchmarks.throughput import CAPACITY, NoOp
from flowpy.submission import TWINS, SubmissionPublisher

Monitor = Callable[[SubmissionPublisher[int]], AbstractContextManager[object]]


@contextmanager
def _every(interval: float, action: Callable[[], object]) -> Iterator[None]:
    """Run ``action`` on a thread every ``interval`` seconds inside the block."""
    stop = threading.Event()

    def loop() -> None:
        while not stop.wait(interval):
            action()

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def _idle() -> None:
    """The control case's action: a thread that wakes as often as the pollers and does nothing."""


def polling(interval: float) -> Monitor:
    return lambda publisher: _every(interval, publisher.snapshot)


def otel(interval: float) -> Monitor | None:
    try:
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    except ImportError:
        return None
    from flowpy.interop.otel import instrument

    @contextmanager
    def monitor(publisher: SubmissionPublisher[int]) -> Iterator[None]:
        reader = InMemoryMetricReader()
        provider = MeterProvider(metric_readers=[reader])
        try:
            with instrument(publisher, "bench", meter_provider=provider), _every(interval, reader.get_metrics_data):
                yield
        finally:
            provider.shutdown()

    return monitor


def run(publisher_class: type[SubmissionPublisher[Any]], subscribers: int, items: int, monitor: Monitor) -> int:
    """One producer submits ``items`` to ``subscribers`` no-op subscribers under ``monitor``; returns deliveries.

    The publisher is a ``publisher_class``: one core's twin (``flowpy.submission.TWINS``).
    """
    publisher: SubmissionPublisher[int] = publisher_class(max_buffer_capacity=CAPACITY)
    sinks = [NoOp() for _ in range(subscribers)]
    for sink in sinks:
        publisher.subscribe(sink)
    with monitor(publisher):
        submit = publisher.submit
        for i in range(items):
            submit(i)
        publisher.close()
        for sink in sinks:
            sink.done.wait()
    return items * subscribers


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=2_000_000, help="deliveries per run")
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--interval", type=float, default=0.001, help="seconds between collections")
    args = parser.parse_args()
    n, reps, interval = args.items, args.repetitions, args.interval
    monitors: dict[str, Monitor] = {
        "no metrics": lambda publisher: nullcontext(),
        "idle thread (control)": lambda publisher: _every(interval, _idle),
        "snapshot()": polling(interval),
    }
    otel_monitor = otel(interval)
    if otel_monitor is not None:
        monitors["OpenTelemetry collect"] = otel_monitor
    implementations = [name for name in ("c", "python") if name in TWINS]
    rates: dict[str, list[float]] = collections.defaultdict(list)
    load = []
    labels = list(monitors)
    for round_ in range(reps):
        load.append(os.getloadavg()[0])
        shift = round_ % len(labels)
        order = labels[shift:] + labels[:shift]  # each case takes its turn first, where a run may fare worse
        for shape, subscribers in (("1 -> 1", 1), ("1 -> 4", 4)):
            for implementation in implementations:
                for label in order:
                    monitor = monitors[label]
                    start = time.perf_counter()
                    moved = run(TWINS[implementation], subscribers, n // subscribers, monitor)
                    rates[f"[{implementation}] {shape} {label}"].append(moved / (time.perf_counter() - start))
    print(
        f"\nitems/s, median of {reps} interleaved, collection every {interval * 1000:g} ms, "
        f"{n:,} deliveries per run ({machine()})"
    )
    header = f"{'case':<44} {'items/s':>14} {'x no metrics':>14} {'x control':>14}"
    print(header)
    print("-" * len(header))
    medians = {name: statistics.median(values) for name, values in rates.items()}
    for name, median in medians.items():
        group = name[: name.index(" ", name.index(">") + 3)]  # "[core] 1 -> k"
        control = medians.get(f"{group} idle thread (control)", median)
        print(f"{name:<44} {median:>14,.0f} {median / medians[f'{group} no metrics']:>14.3f} {median / control:>14.3f}")
    print(f"load average (1 min) at each round: {', '.join(f'{x:.2f}' for x in load)}")


if __name__ == "__main__":
    main()
