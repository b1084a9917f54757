"""How long a TCK verification takes, and whether the required tests are stable under stress.

    python benchmarks/tck_soak.py [--repetitions 5] [--soak 50]

Timing: runs the whole PublisherVerification (38 tests) against three
publishers, with the Java TCK's default timeouts (100 ms) and with short ones
(50 ms / 20 ms), and prints the median seconds of ``--repetitions`` runs and
the ratio to the synchronous range publisher (the baseline, same run).

Soak: runs every required test of the reference verifications and of
SubmissionPublisher ``--soak`` times in a row with ``sys.setswitchinterval(1e-6)``,
which makes the interpreter switch threads as often as it can, and prints the
number of failures (the bar is zero) and every failure message. A failure is
a failed test or an exception escaping in any thread (``threading.excepthook``,
or a task of the helper publisher's executor that raised), reported with the
thread, the exception and the test that was running.

It uses the test suite's verifications (tests/tck) as the cases.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import machine
from flowpy.executors import DaemonThreadPool, Executor, as_execute
from flowpy.tck import TestEnvironment
from flowpy.tck._base import Verification, WithHelperPublisher, verification_tests
from flowpy.tck.runner import Status, run_test, run_verification
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
    return type(
        verification.__name__,
        (verification,),
        {"create_test_environment": lambda self: TestEnvironment(timeout, no_signals)},
    )


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


class ThreadFailures:
    """Counts exceptions that escape in any thread while a soak runs, and says which.

    Two sources: :func:`threading.excepthook` (a thread's uncaught exception,
    and a task of flowpy's pools that raised) and the tasks of the executors
    passed through :meth:`watch` (an exception a ``concurrent.futures``
    executor would keep in a future nobody reads). Each failure is attributed
    to the test running when it was recorded (a late one may belong to the
    test before).
    """

    def __init__(self) -> None:
        self.current = "(between tests)"
        self.failures: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._seen: set[int] = set()  # ids of exceptions already counted by watch(), so excepthook skips them
        self._previous_hook = threading.excepthook

    def __enter__(self) -> ThreadFailures:
        threading.excepthook = self._excepthook
        return self

    def __exit__(self, *exc: object) -> None:
        threading.excepthook = self._previous_hook

    def record(self, where: str, error: BaseException) -> None:
        """Count ``error`` against the current test, once per exception object."""
        frames = traceback.extract_tb(error.__traceback__)
        at = f" at {Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else ""
        with self._lock:
            if id(error) in self._seen:
                return
            self._seen.add(id(error))
            self.failures[f"{self.current}: {where}: {type(error).__name__}: {error}{at}"] += 1

    def _excepthook(self, args: threading.ExceptHookArgs) -> None:
        if args.exc_value is None:
            return
        thread = args.thread.name if args.thread is not None else "unknown thread"
        self.record(f"uncaught in thread {thread}", args.exc_value)

    def watch(self, executor: Executor) -> Executor:
        """Return ``executor`` with every task's exception counted (then raised on as before)."""
        execute = as_execute(executor)
        failures = self

        class Watched:
            def execute(self, task: Callable[[], object]) -> None:
                def run() -> None:
                    try:
                        task()
                    except BaseException as exc:
                        failures.record(f"task on {threading.current_thread().name}", exc)
                        raise

                execute(run)

        return Watched()


def watched(verification: type[Verification], failures: ThreadFailures, pool: Executor) -> type[Verification]:
    """Return ``verification`` with its helper publisher on ``pool`` seen through ``failures``.

    The pool is the soak's own (the TCK does not shut it down); other
    verifications are returned as they are.
    """
    if not issubclass(verification, WithHelperPublisher):
        return verification
    executor = failures.watch(pool)
    return type(verification.__name__, (verification,), {"publisher_executor_service": lambda self: executor})


def soak(rounds: int, soaked: list[type[Verification]] | None = None) -> int:
    """Run the required tests of ``soaked`` (default :data:`SOAKED`) ``rounds`` times under a
    tiny switch interval; print and return the failures.

    A failure is a failed test, or an exception escaping in any thread.
    """
    soaked = SOAKED if soaked is None else soaked
    interval = sys.getswitchinterval()
    tests: Counter[str] = Counter()
    runs = 0
    pool = DaemonThreadPool(4, thread_name_prefix="tck-soak")
    start = time.perf_counter()
    with ThreadFailures() as threads:
        verifications = [watched(verification, threads, pool) for verification in soaked]
        sys.setswitchinterval(1e-6)
        try:
            for _ in range(rounds):
                for verification in verifications:
                    setup = getattr(verification, "setup_class", None)
                    if callable(setup):
                        setup()
                    try:
                        for name in verification_tests(verification):
                            if "_required_" not in name:
                                continue
                            threads.current = f"{verification.__name__}.{name}"
                            outcome = run_test(verification, name)
                            runs += 1
                            if outcome.status is Status.FAILED:
                                tests[f"{threads.current}: {outcome.message}"] += 1
                    finally:
                        threads.current = "(between tests)"
                        teardown = getattr(verification, "teardown_class", None)
                        if callable(teardown):
                            teardown()
        finally:
            sys.setswitchinterval(interval)
            pool.shutdown(wait=True)
    elapsed = time.perf_counter() - start
    failed_tests, thread_failures = sum(tests.values()), sum(threads.failures.values())
    print(
        f"\nSoak: {rounds} rounds of the required tests of {len(soaked)} verifications, "
        f"sys.setswitchinterval(1e-6) ({machine()})"
    )
    print(
        f"{runs} test runs in {elapsed:.0f} s, {failed_tests + thread_failures} failures "
        f"({failed_tests} failed tests, {thread_failures} exceptions in other threads)"
    )
    for message, count in tests.most_common():
        print(f"  {count} x failed: {message}")
    for message, count in threads.failures.most_common():
        print(f"  {count} x thread: {message}")
    return failed_tests + thread_failures


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
