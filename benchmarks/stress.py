"""Randomised stress runs over SubmissionPublisher, the processors and the buffering operators.

    python benchmarks/stress.py [--seconds 600] [--seeds 0:100000] [--kind observe_on ...]
    python benchmarks/stress.py --kind merge --seed 86 --repeat 50   # rerun one scenario

Each scenario is decided by its kind and seed (see tests/stress/engine.py,
which the bounded test group tests/stress uses too): producer threads, probe
subscribers that request, cancel and raise from other threads, executors that
refuse tasks or shut down mid-stream, all at a 1 µs switch interval; the
``fork`` kind forks the process mid-stream and checks the child, the
``interrupt`` kind raises KeyboardInterrupt into producers inside submit. Runs every
kind for each seed in turn until ``--seconds`` pass or the seeds run out, prints
each failure in full (with the command that reruns it) and a summary; exits 1
if any scenario failed.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import machine
from tests.stress.engine import KINDS, StressFailure, run_many


def _seeds(text: str) -> range:
    start, _, stop = text.partition(":")
    return range(int(start), int(stop)) if stop else range(int(start), int(start) + 1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--seconds", type=float, default=None, help="stop after this long (default: run every seed)")
    parser.add_argument("--seeds", type=_seeds, default=range(0, 1000), help="START:STOP, or one seed (default 0:1000)")
    parser.add_argument("--seed", type=int, default=None, help="run this one seed (same as --seeds N)")
    parser.add_argument("--kind", action="append", choices=KINDS, help="a topology to run (repeatable; default all)")
    parser.add_argument("--timeout", type=float, default=20.0, help="seconds before a scenario counts as hung")
    parser.add_argument("--repeat", type=int, default=1, help="run each scenario this many times (races are rare)")
    args = parser.parse_args(argv)
    seeds = _seeds(str(args.seed)) if args.seed is not None else args.seeds
    kinds = args.kind or list(KINDS)
    print(f"stress: kinds {', '.join(kinds)}; seeds {seeds.start}:{seeds.stop}; {machine()}", flush=True)
    start = time.monotonic()

    def report(kind: str, seed: int, failure: StressFailure | None) -> None:
        if failure is not None:
            print(f"\nFAILED {kind} seed {seed}\n{failure}\n", flush=True)

    runs, failures = run_many(
        kinds, iter(seeds), seconds=args.seconds, timeout=args.timeout, repeat=args.repeat, on_result=report
    )
    elapsed = time.monotonic() - start
    print(f"stress: {runs} scenarios in {elapsed:.0f} s, {len(failures)} failed")
    for failure in failures:
        print("  " + str(failure).splitlines()[0])
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
