"""How long a TCK verification takes, and whether the required tests are stable under stress.

    python benchmarks/tck_soak.py [--repetitions 5] [--soak 50]

Timing: runs the whole PublisherVerification (38 tests) against three
publishers, with the Java TCK's default timeouts (100 ms) and with short ones
(50 ms / 20 ms), and prints the median seconds of ``--repetitions`` runs and
the ratio to the synchronous range publisher (the baseline, same run).

Soak: runs every required test of the reference verifications and of
SubmissionPublisher ``--soak`` times in a row with ``sys.setswitchinterval(1e-6)``,
which makes the interpreter switch threads as often as it can, and prints the
number of failures (the bar is zero) and every failure message.

It uses the test suite's verifications (tests/tck) as the cases.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import machine
from flowpy.tck import TestEnvironment
from flowpy.tck._base import Verification
from flowpy.tck.runner import Status, run_verification
from tests.tck.test_reactive_streams_tck import TestReactiveRangePublisher
from tests.tck.test_reference_tck import (
    TestAsyncIterablePublisher,
    TestAsyncSubscriberBlackbox,
    TestAsyncSubscriberWhitebox,
    TestIdentityProcessor,
    TestMulticastProcessor,
    TestRangePublisher,
    TestSyncSubscriberBlackbox,
    TestSyncSubscriberWhitebox,
)
from tests.tck.test_submission_publisher_tck import TestSubmissionPublisher

PUBLISHERS: dict[str, type[Verification]] = {
    "RangePublisher (sync, trampolined)": TestRangePublisher,
    "AsyncIterablePublisher (4-thread pool)": TestAsyncIterablePublisher,
    "SubmissionPublisher (default executor)": TestSubmissionPublisher,
}

SOAKED: list[type[Verification]] = [
    TestRangePublisher,
    TestAsyncIterablePublisher,
    TestSubmissionPublisher,
    TestReactiveRangePublisher,
    TestSyncSubscriberWhitebox,
    TestAsyncSubscriberWhitebox,
    TestSyncSubscriberBlackbox,
    TestAsyncSubscriberBlackbox,
    TestIdentityProcessor,
    TestMulticastProcessor,
]


def with_environment(verification: type[Verification], timeout: int, no_signals: int) -> type[Verification]:
    """Return ``verification`` with its environment's timeouts replaced."""
    return type(verification.__name__, (verification,),
                {"create_test_environment": lambda self: TestEnvironment(timeout, no_signals)})


def timing(repetitions: int) -> int:
    """Print the median duration of full verifications; return the number of failed tests."""
    failures: list[str] = []
    print(f"\nFull PublisherVerification, median of {repetitions} runs ({machine()})")
    header = f"{'publisher':<42} {'timeouts':>12} {'seconds':>9} {'x range':>9}"
    print(header)
    print("-" * len(header))
    for timeout, no_signals in ((100, 100), (50, 20)):
        baseline = None
        for name, verification in PUBLISHERS.items():
            configured = with_environment(verification, timeout, no_signals)
            durations = []
            for _ in range(repetitions):
                start = time.perf_counter()
                outcomes = run_verification(configured)
                durations.append(time.perf_counter() - start)
                failures += [f"{name}: {o.test}: {o.message}" for o in outcomes if o.status is Status.FAILED]
            median = statistics.median(durations)
            baseline = baseline or median
            print(f"{name:<42} {f'{timeout}/{no_signals} ms':>12} {median:>9.2f} {median / baseline:>9.2f}")
    print(f"{len(failures)} failed tests in the timed runs")
    for failure in failures:
        print(f"  {failure}")
    return len(failures)


def soak(rounds: int) -> int:
    """Run the required tests ``rounds`` times under a tiny switch interval; return the failures."""
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    failures: Counter[str] = Counter()
    runs = 0
    start = time.perf_counter()
    try:
        for _ in range(rounds):
            for verification in SOAKED:
                for outcome in run_verification(verification, lambda name: "_required_" in name):
                    runs += 1
                    if outcome.status is Status.FAILED:
                        failures[f"{verification.__name__}.{outcome.test}: {outcome.message}"] += 1
    finally:
        sys.setswitchinterval(interval)
    elapsed = time.perf_counter() - start
    print(f"\nSoak: {rounds} rounds of the required tests of {len(SOAKED)} verifications, "
          f"sys.setswitchinterval(1e-6) ({machine()})")
    print(f"{runs} test runs in {elapsed:.0f} s, {sum(failures.values())} failures")
    for message, count in failures.most_common():
        print(f"  {count} x {message}")
    return sum(failures.values())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repetitions", type=int, default=5, help="timing runs per case (median)")
    parser.add_argument("--soak", type=int, default=50, help="soak rounds (0 to skip)")
    args = parser.parse_args()
    failed = timing(args.repetitions) if args.repetitions > 0 else 0
    failed += soak(args.soak) if args.soak > 0 else 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
