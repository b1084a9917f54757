"""benchmarks/tck_soak.py counts every exception that escapes in another thread as a failure."""

from __future__ import annotations

import io
import re
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import redirect_stdout

import pytest

from benchmarks.tck_soak import ThreadFailures, soak
from flowpy.executors import as_execute
from flowpy.tck._base import Verification, WithHelperPublisher


def _raise_in_thread(name: str) -> None:
    def boom() -> None:
        raise ValueError("boom in a thread")

    thread = threading.Thread(target=boom, name=name)
    thread.start()
    thread.join(10)


class _RaisingThreads(Verification):
    def test_required_thread_raises(self) -> None:
        _raise_in_thread("soak-test-thread")

    def test_required_passes(self) -> None:
        return None

    def test_optional_not_soaked(self) -> None:
        _raise_in_thread("not-run")


class _RaisingHelperTask(Verification, WithHelperPublisher):
    def test_required_helper_task_raises(self) -> None:
        done = threading.Event()

        def task() -> None:
            try:
                raise KeyError("lost in the helper executor")
            finally:
                done.set()

        as_execute(self.helper_executor())(task)
        assert done.wait(10)


def _run_soak(*verifications: type[Verification]) -> tuple[int, str]:
    out = io.StringIO()
    with redirect_stdout(out):
        failures = soak(1, list(verifications))
    return failures, out.getvalue()


@pytest.mark.timeout(60)
def test_exception_in_another_thread_is_a_failure_naming_thread_and_test() -> None:
    failures, report = _run_soak(_RaisingThreads)
    assert failures == 1
    assert "2 test runs in" in report
    assert "1 failures (0 failed tests, 1 exceptions in other threads)" in report
    assert (
        "1 x thread: _RaisingThreads.test_required_thread_raises: uncaught in thread soak-test-thread: "
        "ValueError: boom in a thread at test_tck_soak.py:"
    ) in report


@pytest.mark.timeout(60)
def test_exception_in_a_helper_executor_task_is_counted_once() -> None:
    # Counted by the watched executor and not again by threading.excepthook,
    # to which the pool then reports it. The test may have ended by the time
    # the task's exception is recorded: then it counts "between tests".
    failures, report = _run_soak(_RaisingHelperTask)
    assert failures == 1, report
    assert re.search(
        r"\n  1 x thread: (_RaisingHelperTask\.test_required_helper_task_raises|\(between tests\)): "
        r"task on tck-soak-\d+: KeyError: 'lost in the helper executor' at test_tck_soak\.py:\d+\n",
        report,
    ), report


def test_watched_futures_executor_counts_the_exception_its_future_keeps() -> None:
    with ThreadFailures() as failures, ThreadPoolExecutor(1) as pool:
        failures.current = "a test"
        done = threading.Event()

        def task() -> None:
            try:
                raise RuntimeError("kept in a future")
            finally:
                done.set()

        as_execute(failures.watch(pool))(task)
        assert done.wait(10)
    assert list(failures.failures) == [
        next(key for key in failures.failures if key.startswith("a test: task on ThreadPoolExecutor-"))
    ]
    assert "RuntimeError: kept in a future at test_tck_soak.py:" in next(iter(failures.failures))
