"""The harness itself: the stress engine's checks fail on broken streams, and
exceptions in other threads fail the test they happen in."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest

from flowpy.flow import Publisher, Subscriber, Subscription
from tests.stress.engine import Scenario, StressFailure, run
from tests.support import ThreadExceptionLog, expect_thread_exceptions

ROOT = Path(__file__).resolve().parents[2]


def quiet_seed() -> int:
    """A publisher scenario without faults, cancels or raises: every probe must see everything."""
    for seed in range(10_000):
        scenario = Scenario.draw("publisher", seed)
        if scenario.fault == "none" and all(p.cancel_at is None and p.raise_at is None for p in scenario.probes):
            return seed
    raise AssertionError("no quiet publisher scenario in 10,000 seeds")


class Tamper(Publisher[Any]):
    """Passes ``source`` through, letting ``on_next``/``on_complete`` be replaced to break the stream."""

    def __init__(self, source: Publisher[Any], on_next: Any = None, on_complete: Any = None) -> None:
        self.source = source
        self.on_next = on_next
        self.on_complete = on_complete

    def subscribe(self, subscriber: Subscriber[Any]) -> None:
        tamper = self

        class Relay(Subscriber[Any]):
            def on_subscribe(self, subscription: Subscription) -> None:
                subscriber.on_subscribe(subscription)

            def on_next(self, item: Any) -> None:
                if tamper.on_next is not None:
                    tamper.on_next(subscriber, item)
                else:
                    subscriber.on_next(item)

            def on_error(self, error: BaseException) -> None:
                subscriber.on_error(error)

            def on_complete(self) -> None:
                if tamper.on_complete is not None:
                    tamper.on_complete(subscriber)
                else:
                    subscriber.on_complete()

        self.source.subscribe(Relay())


def test_the_quiet_scenario_passes_untampered() -> None:
    run("publisher", quiet_seed(), timeout=30.0)


def test_a_lost_item_is_reported() -> None:
    def skip_third(subscriber: Subscriber[Any], item: tuple[int, int]) -> None:
        producer, seq = item
        subscriber.on_next((producer, seq + 1) if seq == 3 else item)

    with pytest.raises(StressFailure, match=r"producer \d: got seq 4, expected 3 \(items 3\.\.3 lost\)"):
        run("publisher", quiet_seed(), timeout=30.0, wrap=lambda stream: Tamper(stream, on_next=skip_third))


def test_a_duplicated_item_is_reported() -> None:
    def repeat_second(subscriber: Subscriber[Any], item: tuple[int, int]) -> None:
        producer, seq = item
        subscriber.on_next((producer, 1) if seq == 2 else item)

    with pytest.raises(StressFailure, match=r"got seq 1, expected 2 \(duplicated or reordered\)"):
        run("publisher", quiet_seed(), timeout=30.0, wrap=lambda stream: Tamper(stream, on_next=repeat_second))


def test_a_missing_terminal_signal_is_a_hang_with_a_thread_dump() -> None:
    def swallow(subscriber: Subscriber[Any]) -> None:
        return None

    with pytest.raises(StressFailure, match=r"(?s)hang: s0.* got no terminal signal.*thread dump at the hang"):
        run("publisher", quiet_seed(), timeout=2.0, wrap=lambda stream: Tamper(stream, on_complete=swallow))


def test_an_exception_in_another_thread_is_reported() -> None:
    def fail_elsewhere(subscriber: Subscriber[Any]) -> None:
        thread = threading.Thread(target=lambda: 1 / 0, name="stray")
        thread.start()
        thread.join()
        subscriber.on_complete()

    with pytest.raises(StressFailure, match=r"(?s)unexpected exception in thread stray:.*ZeroDivisionError"):
        run("publisher", quiet_seed(), timeout=30.0, wrap=lambda stream: Tamper(stream, on_complete=fail_elsewhere))


def raise_in_thread(error: BaseException) -> None:
    def target() -> None:
        raise error

    thread = threading.Thread(target=target, name="raiser")
    thread.start()
    thread.join()


def test_expected_thread_exceptions_are_claimed() -> None:
    error = KeyboardInterrupt("expected")
    with expect_thread_exceptions(KeyboardInterrupt) as caught:
        raise_in_thread(error)
    assert caught == [error]


def test_an_expected_exception_that_never_comes_fails() -> None:
    message = r"^expected 1 KeyboardInterrupt in other threads within 0\.05 s, got \[\]$"
    quiet = threading.Thread(target=int, name="quiet")
    with pytest.raises(AssertionError, match=message), expect_thread_exceptions(KeyboardInterrupt, timeout=0.05):
        quiet.start()
        quiet.join()


def test_a_log_restores_the_previous_hook() -> None:
    before = threading.excepthook
    with ThreadExceptionLog() as log:
        raise_in_thread(ValueError("boom"))
        assert threading.excepthook is not before
    assert threading.excepthook is before
    [record] = log.take()
    assert record.thread == "raiser" and isinstance(record.error, ValueError)
    assert "ValueError: boom" in record.traceback


SUITE = """
import threading
import pytest
from tests.support import expect_thread_exceptions

def raise_in_thread(error):
    def target():
        raise error
    thread = threading.Thread(target=target, name="raiser")
    thread.start()
    thread.join()

def test_raises_in_a_thread():
    raise_in_thread(ValueError("during"))

@pytest.fixture
def fails_at_teardown():
    yield
    raise_in_thread(ValueError("at teardown"))

def test_raises_in_a_thread_at_teardown(fails_at_teardown):
    pass

def test_claims_its_exception():
    with expect_thread_exceptions(KeyboardInterrupt):
        raise_in_thread(KeyboardInterrupt())

def test_clean():
    pass
"""


@pytest.mark.timeout(60)
def test_exceptions_in_other_threads_fail_the_test_they_happen_in(tmp_path: Path) -> None:
    (tmp_path / "test_threads.py").write_text(textwrap.dedent(SUITE))
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "tests.conftest",
            "-p",
            "no:cacheprovider",
            "-rA",
            "-q",
            "test_threads.py",
        ],
        cwd=tmp_path,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "COLUMNS": "400"},
        capture_output=True,
        text=True,
        timeout=50,
    )
    out = result.stdout
    assert result.returncode == 1, out
    failed = "Failed: 1 unexpected exception(s) in other threads"
    assert f"FAILED test_threads.py::test_raises_in_a_thread - {failed} during the test" in out
    assert f"ERROR test_threads.py::test_raises_in_a_thread_at_teardown - {failed} during teardown" in out
    assert "PASSED test_threads.py::test_claims_its_exception" in out
    assert "PASSED test_threads.py::test_clean" in out
    assert "ValueError: during" in out and "ValueError: at teardown" in out
