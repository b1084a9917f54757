"""Throughput of the operators against plain Python baselines, in one run.

    python benchmarks/operators.py [--items N] [--repetitions R] [--context | --inner]

Two comparisons, each a ratio measured side by side in the same process:

* fusion: ``Flowable.range(0, N).map(f).filter(g).take(N // 2)`` into a
  no-op subscriber, against the same pipeline written as generator
  expressions consumed by a ``for`` loop;
* hand-off: ``observe_on`` moving ``N`` items from the pool thread that
  produces them to another pool thread (the default ``prefetch=256``),
  against ``SubmissionPublisher`` 1 -> 1 (one producer thread submitting to
  one subscriber on the default pool). A synchronous source such as the
  range produces only inside ``request``: with ``subscribe_on`` each batch of
  192 items waits for a thread to wake up; with ``observe_on`` alone the
  drain's own requests make it emit on the drain's thread.

* inner publishers: ``concat_map`` and ``switch_map`` against ``flat_map``
  (the baseline), over ``N`` items in two shapes: ``N`` source items each
  mapped to a one-item publisher (``N`` inners), and ``N // 1000`` items each
  mapped to 1,000 (``Flowable.range``), into a no-op subscriber.

``--context`` measures instead what context propagation costs
(flowpy/_context.py): the observe_on hand-off and a ``merge`` of two
sources on two pools, each with propagation on and off, interleaved, by
wall clock and by the process's CPU time.

Rates are source items per second, medians of ``R`` repetitions; the cases
of a comparison take turns, so that a change in the machine's load touches
them alike. The fusion cases run on one thread, so they are also timed with
that thread's CPU time, which other processes on a busy machine do not
inflate.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from itertools import islice
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import print_table
from benchmarks.throughput import NoOp, flowpy_run, without_context
from flowpy.executors import DaemonThreadPool
from flowpy.flowable import Flowable


def f(x: int) -> int:
    return x + 1


def g(x: int) -> bool:
    return x % 2 == 0


def generator_pipeline(items: int) -> int:
    mapped = (f(x) for x in range(0, items))
    kept = (y for y in mapped if g(y))
    for _ in islice(kept, items // 2):
        pass
    return items


def fused_pipeline(items: int) -> int:
    Flowable.range(0, items).map(f).filter(g).take(items // 2).subscribe(NoOp())
    return items


def _across_pools(build: Callable[[DaemonThreadPool, DaemonThreadPool], Flowable[int]]) -> None:
    producer = DaemonThreadPool(1, thread_name_prefix="producer")
    consumer = DaemonThreadPool(1, thread_name_prefix="consumer")
    sink = NoOp()
    build(producer, consumer).subscribe(sink)
    sink.done.wait()
    producer.shutdown(wait=False)
    consumer.shutdown(wait=False)


def iterable_hand_off(items: int) -> int:
    """An IterablePublisher emits on one pool thread; observe_on hands each item to another."""
    _across_pools(
        lambda producer, consumer: Flowable.from_iterable(range(items), executor=producer).observe_on(consumer)
    )
    return items


def range_hand_off(items: int) -> int:
    """The range emits on one pool thread (subscribe_on); observe_on hands each item to another."""
    _across_pools(lambda producer, consumer: Flowable.range(0, items).subscribe_on(producer).observe_on(consumer))
    return items


def observe_on_only(items: int) -> int:
    """observe_on alone: the drain's own requests make the range emit on the drain's thread."""
    sink = NoOp()
    Flowable.range(0, items).observe_on().subscribe(sink)
    sink.done.wait()
    return items


def merge_two_pools(items: int) -> int:
    """Two IterablePublishers, each on its own pool thread, merged into one subscriber."""
    first = DaemonThreadPool(1, thread_name_prefix="first")
    second = DaemonThreadPool(1, thread_name_prefix="second")
    sink = NoOp()
    half = items // 2
    Flowable.from_iterable(range(half), executor=first).merge_with(
        Flowable.from_iterable(range(half), executor=second)
    ).subscribe(sink)
    sink.done.wait()
    first.shutdown(wait=False)
    second.shutdown(wait=False)
    return items


def _inner_run(flowable: Flowable[int], items: int) -> int:
    sink = NoOp()
    flowable.subscribe(sink)
    if not sink.done.is_set():
        raise RuntimeError("a synchronous pipeline did not complete")
    return items


def inner_cases(n: int) -> list[tuple[str, Callable[[], int]]]:
    """flat_map, concat_map and switch_map over n items: n one-item inners, then n // 1000 inners of 1,000."""
    groups = max(1, n // 1000)
    operators: list[tuple[str, Callable[[Flowable[int], Callable[[int], Flowable[int]]], Flowable[int]]]] = [
        ("flat_map", lambda source, fn: source.flat_map(fn)),
        ("concat_map", lambda source, fn: source.concat_map(fn)),
        ("switch_map", lambda source, fn: source.switch_map(fn)),
    ]
    cases: list[tuple[str, Callable[[], int]]] = []
    for name, apply in operators:
        cases.append(
            (
                f"{name}, {n:,} inners of 1 (just)",
                lambda apply=apply: _inner_run(apply(Flowable.range(0, n), Flowable.just), n),
            )
        )
    for name, apply in operators:
        cases.append(
            (
                f"{name}, {groups:,} inners of 1,000 (range)",
                lambda apply=apply: _inner_run(
                    apply(Flowable.range(0, groups), lambda x: Flowable.range(x, 1000)), groups * 1000
                ),
            )
        )
    return cases


def print_inner_tables(n: int, reps: int) -> None:
    """Both shapes of :func:`inner_cases`, all six cases interleaved; each table's ratios are to its flat_map."""
    rows = interleaved_rates(inner_cases(n), reps)
    for shape in (rows[:3], rows[3:]):
        print_table(
            f"inner publishers: items/s, median of {reps} interleaved, {n:,} items", shape, {"flat_map": shape[0][0]}
        )


def context_cases(n: int) -> list[tuple[str, Callable[[], int]]]:
    """The observe_on hand-off and merge, each with context propagation on and off."""
    cases: list[tuple[str, Callable[[], int]]] = []
    for name, run in (
        ("from_iterable(pool A).observe_on(pool B)", lambda: iterable_hand_off(n)),
        ("merge(from_iterable(pool A), from_iterable(pool B))", lambda: merge_two_pools(n)),
    ):
        cases.append((f"{name}, context on", run))
        cases.append((f"{name}, context off", without_context(run)))
    return cases


def interleaved_rates(
    cases: list[tuple[str, Callable[[], int]]], repetitions: int, clock: Callable[[], float] = time.perf_counter
) -> list[tuple[str, float]]:
    """Run each case once per round, ``repetitions`` rounds; return (name, median items/s) per case."""
    rates: dict[str, list[float]] = {name: [] for name, _ in cases}
    for _ in range(repetitions):
        for name, run in cases:
            start = clock()
            items = run()
            rates[name].append(items / (clock() - start))
    return [(name, statistics.median(rates[name])) for name, _ in cases]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=1_000_000)
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--context", action="store_true", help="measure context propagation on against off")
    parser.add_argument("--inner", action="store_true", help="measure only the inner-publisher operators")
    args = parser.parse_args()
    n, reps = args.items, args.repetitions
    if args.context:
        # Process CPU time as well: on a loaded machine the wall clock of a
        # thread hand-off mostly measures the scheduler.
        for clock, label in ((time.perf_counter, "wall clock"), (time.process_time, "process CPU time")):
            print_table(
                f"context propagation: items/s by {label}, median of {reps} interleaved, {n:,} items",
                interleaved_rates(context_cases(n), reps, clock),
                {"observe_on on": "from_iterable(pool A).observe_on(pool B), context on"},
            )
        return
    if args.inner:
        print_inner_tables(n, reps)
        return
    fusion_cases: list[tuple[str, Callable[[], int]]] = [
        ("generator expressions, for loop", lambda: generator_pipeline(n)),
        ("Flowable range.map.filter.take (fused)", lambda: fused_pipeline(n)),
    ]
    for clock, label in ((time.perf_counter, "wall clock"), (time.thread_time, "thread CPU time")):
        print_table(
            f"fusion: source items/s by {label}, median of {reps}, {n:,} items",
            interleaved_rates(fusion_cases, reps, clock),
            {"generators": "generator expressions, for loop"},
        )
    print_inner_tables(n, reps)
    hand_off_rows = interleaved_rates(
        [
            ("SubmissionPublisher 1 -> 1", lambda: flowpy_run(1, 1, n)),
            ("from_iterable(pool A).observe_on(pool B)", lambda: iterable_hand_off(n)),
            ("range.subscribe_on(pool A).observe_on(pool B)", lambda: range_hand_off(n)),
            ("range.observe_on(pool)", lambda: observe_on_only(n)),
        ],
        reps,
    )
    print_table(
        f"hand-off: items/s, median of {reps}, {n:,} items",
        hand_off_rows,
        {"SubmissionPublisher": "SubmissionPublisher 1 -> 1"},
    )


if __name__ == "__main__":
    main()
