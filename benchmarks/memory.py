"""Memory: the buffer stays bounded and the core leaks nothing, in both core implementations.

    python benchmarks/memory.py [--items N] [--cycles C] [--grouping]

For each core implementation ("c" when it was built, and "python"), after a
warm-up run of each workload, measures how much resident memory, ``gc``
object count and allocated blocks grow over:

- ``N`` (default 10 million) ``offer`` calls at capacity 256 to a subscriber
  that never requests (every offer after the 256th drops); the budget is 5 MB;
- ``N`` fresh int items from one producer to one subscriber on a thread pool;
- ``C`` (default 200,000) subscribe / deliver / cancel cycles, each subscriber
  checked to be freed.

A reference the core forgot to release would keep each item or subscriber
alive and show as growth proportional to ``N`` or ``C``.

``--grouping`` measures instead the buffering operators of that family with
a slow subscriber (one that requests one item at a time), over ``N`` fresh
int items produced on a pool thread: ``replay(256)`` with a fast and a slow
subscriber, and ``group_by`` with 100 keys merged by ``flat_map``. Their
memory must stay flat *during* the run, so the slow subscriber samples the
resident size every million items and the table shows the largest growth
seen, beside the growth once the run is over. For scale it also
prints the growth of a plain list holding the same items, the unbounded
alternative. The workloads are in benchmarks/_leaks.py; the test suite runs
them at a tenth of the size or less.
"""

from __future__ import annotations

import argparse
import sys
import threading
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import machine
from benchmarks._leaks import Footprint, footprint, never_requesting, resident_mb, stream, subscribe_cancel
from flowpy import _impl
from flowpy.executors import DaemonThreadPool
from flowpy.flow import Subscriber, Subscription
from flowpy.flowable import Flowable

BUDGET_MB = 5.0


def measure(workload: Callable[[int], int], size: int) -> tuple[int, Footprint]:
    """Warm up at a tenth of ``size``, then run at ``size``; return the result and the growth."""
    workload(max(1, size // 10))
    before = footprint()
    result = workload(size)
    return result, footprint().growth_since(before)


# --- Grouping, sharing, parallel ---


class OneAtATime(Subscriber[int]):
    """Requests one item at a time; samples the resident size every million items."""

    def __init__(self) -> None:
        self.count = 0
        self.start_mb = resident_mb()
        self.peak_mb = self.start_mb
        self.done = threading.Event()

    def on_subscribe(self, subscription: Subscription) -> None:
        self.subscription = subscription
        subscription.request(1)

    def on_next(self, item: int) -> None:
        self.count += 1
        if self.count % 1_000_000 == 0:
            self.peak_mb = max(self.peak_mb, resident_mb())
        self.subscription.request(1)

    def on_error(self, error: BaseException) -> None:
        self.done.set()
        raise error

    def on_complete(self) -> None:
        self.done.set()


class Unbounded(Subscriber[int]):
    """Requests everything and drops it."""

    def on_subscribe(self, subscription: Subscription) -> None:
        subscription.request(2**63 - 1)

    def on_next(self, item: int) -> None:
        return None

    def on_error(self, error: BaseException) -> None:
        raise error

    def on_complete(self) -> None:
        return None


def _fresh(items: int, pool: DaemonThreadPool) -> Flowable[int]:
    return Flowable.from_iterable(range(1_000_000, 1_000_000 + items), executor=pool)  # not the cached small ints


def replay_slow(items: int, pool: DaemonThreadPool) -> tuple[int, float]:
    """``replay(256)`` with a fast and a slow subscriber; returns what the slow one got and its peak growth."""
    replayed = _fresh(items, pool).replay(256)
    slow = OneAtATime()
    replayed.subscribe(Unbounded())
    replayed.subscribe(slow)
    replayed.connect()
    if not slow.done.wait(3600):
        raise RuntimeError("replay did not complete")
    return slow.count, slow.peak_mb - slow.start_mb


def group_by_slow(items: int, pool: DaemonThreadPool) -> tuple[int, float]:
    """``group_by`` with 100 keys, merged by ``flat_map`` into a slow subscriber."""
    slow = OneAtATime()
    _fresh(items, pool).group_by(lambda x: x % 100).flat_map(lambda g: g, max_concurrency=100).subscribe(slow)
    if not slow.done.wait(3600):
        raise RuntimeError("group_by did not complete")
    return slow.count, slow.peak_mb - slow.start_mb


def grouping_main(items: int) -> None:
    """Print the peak and final memory growth of the grouping workloads."""
    pool = DaemonThreadPool(2)
    print(f"\nmemory of buffering operators with a slow subscriber ({machine()})")
    print(f"{'workload':<58} {'items':>12} {'peak MB':>9} {'after MB':>9}")
    over_budget = []
    for name, workload in (
        ("replay(256), a fast and a one-at-a-time subscriber", replay_slow),
        ("group_by(x % 100).flat_map(group), one at a time", group_by_slow),
    ):
        workload(max(1, items // 10), pool)  # warm up
        before = footprint()
        count, peak = workload(items, pool)
        after = footprint().growth_since(before).resident_mb
        print(f"{name:<58} {count:>12,} {peak:>9.2f} {after:>9.2f}")
        if max(peak, after) >= BUDGET_MB:
            over_budget.append(f"{name}: {max(peak, after):.2f} MB")
    pool.shutdown()
    if over_budget:
        raise SystemExit(f"resident memory grew by {BUDGET_MB} MB or more: {'; '.join(over_budget)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=10_000_000)
    parser.add_argument("--cycles", type=int, default=200_000)
    parser.add_argument("--grouping", action="store_true", help="measure replay and group_by with a slow subscriber")
    args = parser.parse_args()
    if args.grouping:
        grouping_main(args.items)
        return
    implementations = ["c", "python"] if _impl.CBufferedSubscription is not None else ["python"]
    pool = DaemonThreadPool(2)
    print(f"\nmemory ({machine()})")
    print(f"{'core':<8} {'workload':<46} {'result':>12} {'resident MB':>12} {'gc objects':>11} {'blocks':>9}")
    over_budget = []
    for implementation in implementations:
        with _impl.using(implementation):  # type: ignore[arg-type]
            workloads: list[tuple[str, Callable[[int], int], int]] = [
                (f"{args.items:,} offers, never requested (dropped)", never_requesting, args.items),
                (f"{args.items:,} items 1 -> 1 on a pool (delivered)", lambda n: stream(n, pool), args.items),
                (f"{args.cycles:,} subscribe/cancel (subscribers freed)", subscribe_cancel, args.cycles),
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

    before_list = resident_mb()
    kept = list(range(1_000_000, 1_000_000 + min(args.items, 1_000_000)))
    list_growth = (resident_mb() - before_list) * args.items / len(kept)
    del kept
    print(f"for scale, a list of {args.items:,} fresh ints: {list_growth:,.1f} MB (estimated from 1,000,000)")
    if over_budget:
        raise SystemExit(f"resident memory grew by {BUDGET_MB} MB or more: {'; '.join(over_budget)}")


if __name__ == "__main__":
    main()
