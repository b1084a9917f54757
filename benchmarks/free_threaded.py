"""SubmissionPublisher with the GIL off against the GIL on, on one free-threaded interpreter.

    python benchmarks/free_threaded.py [--python PATH] [--baseline-python PATH]
                                       [--items N] [--repetitions R] [--work-us US]
                                       [--capacity C]

Every case runs in a process of its own, so that the GIL can be switched per run
(``PYTHON_GIL=0`` or ``1``) and the core per run (``FLOWPY_NO_EXTENSIONS=1`` for the
pure-Python one, so the compiled module is not even loaded), each run publishing
through its core's SubmissionPublisher class (``flowpy.submission.TWINS``); the
rounds are interleaved: each round runs every case once.

The cases (each subscriber's buffer ``--capacity``, 256 by default; the
default executor):

- ``1 -> 2 work``: one producer thread, two subscribers each spending about
  ``--work-us`` microseconds (default 2) of pure-Python arithmetic per item;
- ``2 -> 2 work``: two producer threads, the same two subscribers;
- ``1 -> 1 noop``: one producer, one subscriber that does nothing, on the
  free-threaded interpreter against ``--baseline-python`` (a regular build).

Each run reports its rate (deliveries per second) and the process's CPU time over
its wall time: the cores it got. A GIL-off run of a work case that got fewer than
1.6 cores was starved by the machine, not limited by flowpy: it is reported, marked,
and left out of the medians. ``--python`` defaults to the interpreter that
``.ci/free-threaded-python`` builds.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CAPACITY = 256  # the default; the targets are set for it
MAX = 2**63 - 1
MIN_CORES = 1.6
WORK_CASES = ("1 -> 2 work", "2 -> 2 work")
NOOP_CASE = "1 -> 1 noop"


def _calibrate(work_us: float) -> int:
    """Loop count of :func:`_busy` that takes about ``work_us`` microseconds on this thread."""
    rounds = 20_000
    count = 50
    start = time.perf_counter()
    for _ in range(rounds):
        _busy(count)
    per_call = (time.perf_counter() - start) / rounds
    return max(1, round(count * work_us * 1e-6 / per_call))


def _busy(count: int) -> int:
    total = 0
    for i in range(count):
        total += i * i
    return total


def _child(case: str, core: str, items: int, work_us: float, capacity: int) -> dict[str, float]:
    """Run one case on ``core`` in this process and return its figures."""
    sys.path.insert(0, str(ROOT))
    from flowpy import _impl
    from flowpy.flow import Subscriber, Subscription
    from flowpy.submission import TWINS, SubmissionPublisher

    if core not in TWINS:
        raise SystemExit(f"core {core!r} is not available in this process: {sorted(TWINS)}")

    producers, subscribers = {"1 -> 2 work": (1, 2), "2 -> 2 work": (2, 2), NOOP_CASE: (1, 1)}[case]
    loops = _calibrate(work_us) if case != NOOP_CASE else 0

    class Worker(Subscriber[int]):
        def __init__(self, expected: int) -> None:
            self.expected = expected
            self.seen = 0
            self.done = threading.Event()

        def on_subscribe(self, subscription: Subscription) -> None:
            subscription.request(MAX)

        def on_next(self, item: int) -> None:
            if loops:
                _busy(loops)
            self.seen += 1

        def on_error(self, error: BaseException) -> None:
            self.done.set()

        def on_complete(self) -> None:
            self.done.set()

    per_producer = items // producers
    publisher: SubmissionPublisher[int] = TWINS[core](max_buffer_capacity=capacity)
    workers = [Worker(per_producer * producers) for _ in range(subscribers)]
    for worker in workers:
        publisher.subscribe(worker)

    def produce() -> None:
        submit = publisher.submit
        for i in range(per_producer):
            submit(i)

    threads = [threading.Thread(target=produce) for _ in range(producers)]
    cpu = time.process_time()
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    publisher.close()
    for worker in workers:
        worker.done.wait()
    wall = time.perf_counter() - start
    cpu = time.process_time() - cpu
    delivered = sum(worker.seen for worker in workers)
    if delivered != per_producer * producers * subscribers:
        raise SystemExit(f"{case}: delivered {delivered}, expected {per_producer * producers * subscribers}")
    gil = getattr(sys, "_is_gil_enabled", lambda: True)()
    return {
        "rate": delivered / wall,
        "cores": cpu / wall,
        "gil": float(gil),
        "compiled": float(_impl.implementation == "c"),
    }


def _run(
    python: str, case: str, items: int, work_us: float, capacity: int, *, gil: str | None, core: str
) -> dict[str, float]:
    env = dict(os.environ)
    env.pop("PYTHON_GIL", None)
    if gil is not None:
        env["PYTHON_GIL"] = gil
    if core == "python":
        env["FLOWPY_NO_EXTENSIONS"] = "1"
    else:
        env.pop("FLOWPY_NO_EXTENSIONS", None)
    out = subprocess.run(
        [
            python,
            __file__,
            "--child",
            case,
            "--child-core",
            core,
            "--items",
            str(items),
            "--work-us",
            str(work_us),
            "--capacity",
            str(capacity),
        ],
        env=env,
        check=True,
        capture_output=True,
        text=True,
        timeout=600,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])  # type: ignore[no-any-return]


def _free_threaded_python() -> str:
    return subprocess.run(
        [str(ROOT / ".ci" / "free-threaded-python")], check=True, capture_output=True, text=True
    ).stdout.strip()


def _version(python: str) -> str:
    return subprocess.run([python, "-VV"], check=True, capture_output=True, text=True).stdout.split("\n")[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--python", help="a free-threaded interpreter (default: .ci/free-threaded-python's)")
    parser.add_argument("--baseline-python", help="a regular build for the noop case (default: this one)")
    parser.add_argument("--items", type=int, default=200_000)
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--work-us", type=float, default=2.0)
    parser.add_argument("--capacity", type=int, default=CAPACITY, help="each subscriber's buffer (default 256)")
    parser.add_argument("--cores", default="c,python", help="the cores to run, comma-separated")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--child-core", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(_child(args.child, args.child_core, args.items, args.work_us, args.capacity)))
        return

    python = args.python or _free_threaded_python()
    baseline = args.baseline_python or sys.executable
    cores = args.cores.split(",")
    print(f"free-threaded: {_version(python)}")
    print(f"baseline:      {_version(baseline)}")
    print(f"load: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f} (1, 5, 15 min)")

    runs: dict[tuple[str, str, str], list[dict[str, float]]] = {}
    plan = [(case, core, gil) for case in WORK_CASES for core in cores for gil in ("0", "1")]
    plan += [(NOOP_CASE, core, which) for core in cores for which in ("ft-0", "baseline")]
    for round_ in range(args.repetitions):
        for case, core, gil in plan:
            if gil == "baseline":
                figures = _run(baseline, case, args.items, args.work_us, args.capacity, gil=None, core=core)
            else:
                setting = gil.removeprefix("ft-")
                figures = _run(python, case, args.items, args.work_us, args.capacity, gil=setting, core=core)
            runs.setdefault((case, core, gil), []).append(figures)
            starved = gil == "0" and case in WORK_CASES and figures["cores"] < MIN_CORES
            print(
                f"round {round_ + 1}: {case:<12} {core:<6} {'GIL ' + gil:<12} "
                f"{figures['rate']:>12,.0f} deliveries/s  {figures['cores']:.2f} cores"
                f"{'  (starved: not counted)' if starved else ''}",
                flush=True,
            )

    def median(case: str, core: str, gil: str) -> float:
        figures = runs[(case, core, gil)]
        counted = [f["rate"] for f in figures if not (gil == "0" and case in WORK_CASES and f["cores"] < MIN_CORES)]
        return statistics.median(counted) if counted else float("nan")

    print(f"\nmedians of {args.repetitions}, {args.items:,} items, capacity {args.capacity}, work {args.work_us} us")
    print(f"{'case':<14} {'core':<7} {'GIL off':>14} {'GIL on':>14} {'off / on':>9} {'counted':>8}")
    for case in WORK_CASES:
        for core in cores:
            off, on = median(case, core, "0"), median(case, core, "1")
            counted = sum(1 for f in runs[(case, core, "0")] if f["cores"] >= MIN_CORES)
            print(f"{case:<14} {core:<7} {off:>14,.0f} {on:>14,.0f} {off / on:>9.2f} {counted:>5}/{args.repetitions}")
    print(f"\n{'case':<14} {'core':<7} {'3.13t GIL off':>14} {'baseline':>14} {'ft / base':>9}")
    for core in cores:
        ft, base = median(NOOP_CASE, core, "ft-0"), median(NOOP_CASE, core, "baseline")
        print(f"{NOOP_CASE:<14} {core:<7} {ft:>14,.0f} {base:>14,.0f} {ft / base:>9.2f}")
    print(f"load: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f} (1, 5, 15 min)")


if __name__ == "__main__":
    main()
