"""The time operators and the default scheduler: precision, timer cost, and throughput, in one run.

    python benchmarks/time_operators.py [--seconds S] [--timers T] [--items N] [--repetitions R]
                                        [--only drift|timers|burst]

Three measurements, each repeated ``R`` times (default 5) and reported as
medians; the burst cases take turns within each round:

* drift: ``Flowable.interval(0.001)`` on the default scheduler for ``S``
  seconds (default 10), into a subscriber that notes ``time.monotonic()``
  at each tick. Reports the mean period over the run (target: within 1 %
  of 1 ms), when the last tick came against when it was due (the
  10,000th: within 2 ms of 10 s after the subscription), and the worst
  lateness of any tick;
* timers: ``T`` (default 100,000) timers scheduled on the default scheduler
  and then cancelled. Reports the footprint while they are pending and its
  growth once they are cancelled (target: back to the baseline), and the
  number of timer threads (target: one);
* burst: ``N`` (default 1,000,000) items of ``Flowable.range`` through
  ``debounce(1.0)``, ``sample(1.0)`` and ``throttle_first(1.0)`` on the
  default scheduler, against the fused ``map`` stage, into a no-op
  subscriber (target: at least 0.5x the ``map`` rate), by wall clock and
  by the thread's CPU time.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import machine, print_table
from benchmarks._leaks import footprint
from benchmarks.operators import interleaved_rates
from benchmarks.throughput import NoOp
from flowpy.flow import Subscriber, Subscription
from flowpy.flowable import Flowable
from flowpy.schedulers import default_scheduler

PERIOD = 0.001


class _Ticks(Subscriber[int]):
    """Notes when each tick arrives; done after ``count`` ticks."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.times: list[float] = []
        self.done = threading.Event()
        self.error: BaseException | None = None
        self.subscription: Subscription | None = None

    def on_subscribe(self, subscription: Subscription) -> None:
        self.subscription = subscription
        subscription.request(2**63 - 1)

    def on_next(self, item: int) -> None:
        self.times.append(time.monotonic())
        if len(self.times) == self.count:
            assert self.subscription is not None
            self.subscription.cancel()
            self.done.set()

    def on_error(self, error: BaseException) -> None:
        self.error = error
        self.done.set()

    def on_complete(self) -> None:
        self.done.set()


def drift(seconds: float) -> dict[str, float]:
    """One run of ``interval(PERIOD)`` for ``seconds``: mean period, last tick's offset, worst lateness."""
    count = round(seconds / PERIOD)
    ticks = _Ticks(count)
    start = time.monotonic()
    Flowable.interval(PERIOD).subscribe(ticks)
    if not ticks.done.wait(seconds * 3 + 10) or ticks.error is not None:
        raise RuntimeError(f"interval did not deliver {count} ticks: {ticks.error!r}")
    times = ticks.times
    due = [start + (k + 1) * PERIOD for k in range(count)]
    return {
        "mean period ms": (times[-1] - times[0]) / (count - 1) * 1e3,
        "last tick - due ms": (times[-1] - due[-1]) * 1e3,
        "worst lateness ms": max(t - d for t, d in zip(times, due, strict=True)) * 1e3,
    }


def timers(count: int) -> dict[str, float]:
    """Schedule ``count`` timers, then cancel them; the footprint at each step, and the timer threads."""
    scheduler = default_scheduler()
    before = footprint()
    tasks = [scheduler.schedule(lambda: None, 3600.0 + i * 1e-3) for i in range(count)]
    pending = footprint().growth_since(before)
    threads = len([t for t in threading.enumerate() if t.name == "flowpy-timer"])
    for task in tasks:
        task.cancel()
    del tasks
    after = footprint().growth_since(before)
    return {
        "pending MB": pending.resident_mb,
        "pending blocks": pending.blocks,
        "after cancel MB": after.resident_mb,
        "after cancel blocks": after.blocks,
        "after cancel gc objects": after.gc_objects,
        "timer threads": threads,
    }


def _f(x: int) -> int:
    return x + 1


def _burst(build: Callable[[Flowable[int]], Flowable[Any]], items: int) -> Callable[[], int]:
    def run() -> int:
        sink = NoOp()
        build(Flowable.range(0, items)).subscribe(sink)
        if not sink.done.wait(600):
            raise RuntimeError("the burst did not complete")
        return items

    return run


def burst_cases(items: int) -> list[tuple[str, Callable[[], int]]]:
    return [
        ("range.map(f) (fused)", _burst(lambda f: f.map(_f), items)),
        ("range.debounce(1.0)", _burst(lambda f: f.debounce(1.0), items)),
        ("range.sample(1.0)", _burst(lambda f: f.sample(1.0), items)),
        ("range.throttle_first(1.0) (fused)", _burst(lambda f: f.throttle_first(1.0), items)),
    ]


def _medians(runs: list[dict[str, float]]) -> dict[str, float]:
    return {key: statistics.median(run[key] for run in runs) for key in runs[0]}


def _print_medians(title: str, runs: list[dict[str, float]]) -> None:
    print(f"\n{title} ({machine()})")
    medians = _medians(runs)
    for key, value in medians.items():
        spread = ", ".join(f"{run[key]:.3f}" for run in runs)
        print(f"  {key:<26} {value:>14,.3f}   (runs: {spread})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--timers", type=int, default=100_000)
    parser.add_argument("--items", type=int, default=1_000_000)
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--only", choices=["drift", "timers", "burst"])
    args = parser.parse_args()
    reps = args.repetitions
    if args.only in (None, "drift"):
        _print_medians(
            f"drift: interval({PERIOD}) for {args.seconds:g} s on the default scheduler, median of {reps}",
            [drift(args.seconds) for _ in range(reps)],
        )
    if args.only in (None, "timers"):
        timers(max(1, args.timers // 10))  # warm up: the heap's list, the first thread
        _print_medians(
            f"timers: {args.timers:,} scheduled, then cancelled, median of {reps}",
            [timers(args.timers) for _ in range(reps)],
        )
    if args.only in (None, "burst"):
        # The burst runs on the calling thread (the range emits inside subscribe), so its
        # thread CPU time, which other processes on a busy machine do not inflate, is shown too.
        for clock, label in ((time.perf_counter, "wall clock"), (time.thread_time, "thread CPU time")):
            print_table(
                f"burst: source items/s by {label}, median of {reps} interleaved, {args.items:,} items",
                interleaved_rates(burst_cases(args.items), reps, clock),
                {"map": "range.map(f) (fused)"},
            )


if __name__ == "__main__":
    main()
