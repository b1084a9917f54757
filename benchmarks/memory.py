"""Memory: the buffer stays bounded and the core leaks nothing, in both core implementations.

    python benchmarks/memory.py [--items N] [--cycles C] [--operators-only | --grouping]

For each core implementation ("c" when it was built, and "python"), after a
warm-up run of each workload, measures how much resident memory, ``gc``
object count and allocated blocks grow over:

- ``N`` (default 10 million) ``offer`` calls at capacity 256 to a subscriber
  that never requests (every offer after the 256th drops); the budget is 5 MB;
- ``N`` fresh int items from one producer to one subscriber on a thread pool;
- ``C`` (default 200,000) subscribe / deliver / cancel cycles, each subscriber
  checked to be freed;
- ``N`` items through each buffering time operator (``delay``, ``debounce``,
  ``sample``, ``buffer_with_time``, the windows) into a slow subscriber
  (benchmarks/_time_workloads.py), once, with the peak resident memory
  during the run as well: it must stay flat, within the same budget.
- ``N`` items through each operator that holds items (``take_last``,
  ``concat_map``, ``switch_map``, ``combine_latest``, ``retry``,
  ``replay(256)``, ``group_by``) to a subscriber that requests one item at a
  time (benchmarks/_buffering.py).

A reference the core forgot to release would keep each item or subscriber
alive and show as growth proportional to ``N`` or ``C``. For scale it also
prints the growth of a plain list holding the same items, the unbounded
alternative. The workloads are in benchmarks/_leaks.py and
benchmarks/_buffering.py; the test suite runs them at a tenth of the size
or less.

``--grouping`` measures instead ``replay(256)`` (beside a fast subscriber)
and ``group_by`` with 100 keys merged by ``flat_map``, each into a subscriber
that requests one item at a time, with the resident size sampled every
50 ms (``peak_growth``): their memory must stay flat *during* the run, so
the table shows the largest growth seen beside the growth once the run is
over.
"""

from __future__ import annotations

import argparse
import sys
import threading
from collections.abc import Callable
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._buffering import WORKLOADS as BUFFERING
from benchmarks._buffering import grouped, replayed, through_trickle
from benchmarks._common import machine
from benchmarks._leaks import Footprint, footprint, never_requesting, resident_mb, stream, subscribe_cancel
from benchmarks._time_workloads import WORKLOADS, run
from flowpy.executors import DaemonThreadPool
from flowpy.submission import TWINS

BUDGET_MB = 5.0


def measure(workload: Callable[[int], int], size: int) -> tuple[int, Footprint]:
    """Warm up at a tenth of ``size``, then run at ``size``; return the result and the growth."""
    workload(max(1, size // 10))
    before = footprint()
    result = workload(size)
    return result, footprint().growth_since(before)


def peak_growth(workload: Callable[[], int]) -> tuple[int, Footprint, float]:
    """Run ``workload`` after a warm-up; return its result, the growth, and the peak resident growth in MB."""
    before = footprint()
    peak = [before.resident_mb]
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(0.05):
            peak[0] = max(peak[0], resident_mb())

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        result = workload()
    finally:
        stop.set()
        sampler.join()
    return result, footprint().growth_since(before), peak[0] - before.resident_mb


# --- Grouping, sharing, parallel ---


def grouping_main(items: int) -> None:
    """Print the largest memory growth during, and the growth after, the grouping workloads."""
    print(f"\nmemory of buffering operators with a one-at-a-time subscriber ({machine()})")
    print(f"{'workload':<46} {'items':>12} {'peak MB':>9} {'after MB':>9}")
    over_budget = []
    for name, build in (
        ("replay(256) beside a fast subscriber", replayed),
        ("group_by(x % 100).flat_map(group)", grouped),
    ):
        through_trickle(build(max(1, items // 10)))  # warm up
        count, growth, peak = peak_growth(lambda build=build: through_trickle(build(items)))
        print(f"{name:<46} {count:>12,} {peak:>9.2f} {growth.resident_mb:>9.2f}")
        if max(peak, growth.resident_mb) >= BUDGET_MB:
            over_budget.append(f"{name}: {max(peak, growth.resident_mb):.2f} MB")
    if over_budget:
        raise SystemExit(f"resident memory grew by {BUDGET_MB} MB or more: {'; '.join(over_budget)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=10_000_000)
    parser.add_argument("--cycles", type=int, default=200_000)
    parser.add_argument("--operators-only", action="store_true", help="only the operators that hold items")
    parser.add_argument("--grouping", action="store_true", help="measure replay and group_by with a slow subscriber")
    args = parser.parse_args()
    if args.grouping:
        grouping_main(args.items)
        return
    implementations = [name for name in ("c", "python") if name in TWINS]
    if args.operators_only:
        implementations = []
    pool = DaemonThreadPool(2)
    print(f"\nmemory ({machine()})")
    print(f"{'core':<8} {'workload':<46} {'result':>12} {'resident MB':>12} {'gc objects':>11} {'blocks':>9}")
    over_budget = []
    for implementation in implementations:
        publisher_class = TWINS[implementation]
        workloads: list[tuple[str, Callable[[int], int], int]] = [
            (
                f"{args.items:,} offers, never requested (dropped)",
                partial(never_requesting, publisher_class),
                args.items,
            ),
            (
                f"{args.items:,} items 1 -> 1 on a pool (delivered)",
                partial(stream, publisher_class, pool=pool),
                args.items,
            ),
            (
                f"{args.cycles:,} subscribe/cancel (subscribers freed)",
                partial(subscribe_cancel, publisher_class),
                args.cycles,
            ),
        ]
        for name, workload, size in workloads:
            result, growth = measure(workload, size)
            print(
                f"{implementation:<8} {name:<46} {result:>12,} {growth.resident_mb:>12.2f} "
                f"{growth.gc_objects:>11,} {growth.blocks:>9,}"
            )
            if growth.resident_mb >= BUDGET_MB:
                over_budget.append(f"{implementation}: {name}: {growth.resident_mb:.2f} MB")
    pool.shutdown()

    print(f"\ntime operators, {args.items:,} items into a slow subscriber (benchmarks/_time_workloads.py)")
    print(f"{'workload':<56} {'received':>10} {'resident MB':>12} {'peak MB':>8} {'gc objects':>11} {'blocks':>9}")
    for name in WORKLOADS:
        run(name, max(1, args.items // 100))  # warm up
        received, growth, peak = peak_growth(lambda name=name: run(name, args.items))
        print(
            f"{name:<56} {received:>10,} {growth.resident_mb:>12.2f} {peak:>8.2f} "
            f"{growth.gc_objects:>11,} {growth.blocks:>9,}"
        )
        if max(growth.resident_mb, peak) >= BUDGET_MB:
            over_budget.append(f"time: {name}: {growth.resident_mb:.2f} MB, peak {peak:.2f} MB")
    # --- Operators that hold items, under a subscriber that asks for one at a time ---
    print(f"\n{'operator':<46} {'items':>12} {'delivered':>12} {'resident MB':>12} {'gc objects':>11} {'blocks':>9}")
    for name, workload in BUFFERING:
        delivered, growth = measure(workload, args.items)
        print(
            f"{name:<46} {args.items:>12,} {delivered:>12,} {growth.resident_mb:>12.2f} "
            f"{growth.gc_objects:>11,} {growth.blocks:>9,}"
        )
        if growth.resident_mb >= BUDGET_MB:
            over_budget.append(f"{name}: {growth.resident_mb:.2f} MB")

    before_list = resident_mb()
    kept = list(range(1_000_000, 1_000_000 + min(args.items, 1_000_000)))
    list_growth = (resident_mb() - before_list) * args.items / len(kept)
    del kept
    print(f"for scale, a list of {args.items:,} fresh ints: {list_growth:,.1f} MB (estimated from 1,000,000)")
    if over_budget:
        raise SystemExit(f"resident memory grew by {BUDGET_MB} MB or more: {'; '.join(over_budget)}")


if __name__ == "__main__":
    main()
