"""``python -m flowpy.tck``: the table, the exit status, and the programmatic runner."""

from __future__ import annotations

import io
import math
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from flowpy.tck.cli import main
from flowpy.tck.runner import Status, call_within, run_test, run_verification, verification_for
from tests.tck import broken
from tests.tck.reference import range_publisher

ROOT = Path(__file__).resolve().parents[2]


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, "-m", "flowpy.tck", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def rows(table: str) -> dict[str, list[str]]:
    result = {}
    for line in table.splitlines()[1:-1]:
        rule, name, outcome, *message = line[:5].strip(), *line[5:].split(None, 2)
        result[name] = [rule, outcome, *message]
    return result


@pytest.mark.timeout(60)
def test_cli_correct_publisher_exits_zero_with_table() -> None:
    done = run_cli("publisher", "tests.tck.reference:range_publisher", "--no-signals-timeout", "20")
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split() == ["rule", "test", "outcome", "message"]
    assert lines[-1] == "29 passed, 0 failed, 9 skipped"
    assert len(lines) == 1 + 38 + 1
    table = rows(done.stdout)
    assert table["required_spec303_must_not_allow_unbounded_recursion"] == ["3.3", "passed"]
    assert table["untested_spec304_request_should_not_perform_heavy_computations"] == [
        "3.4",
        "skipped",
        "not verified by this TCK",
    ]


@pytest.mark.timeout(60)
def test_cli_broken_publisher_exits_one_and_reports_rule() -> None:
    done = run_cli("publisher", "tests.tck.broken:over_delivering_publisher", "--no-signals-timeout", "20")
    assert done.returncode == 1, done.stdout + done.stderr
    table = rows(done.stdout)
    rule, outcome, message = table["required_spec101_subscription_request_must_result_in_the_correct_numb…"]
    assert (rule, outcome) == ("1.1", "failed")
    assert message.startswith("Publisher signalled more than requested (rule 1.1)")


def test_cli_bad_target_is_a_usage_error() -> None:
    done = run_cli("publisher", "no_colon_here")
    assert done.returncode == 2
    assert "target must be MODULE:FACTORY, got 'no_colon_here'" in done.stderr


def test_main_selects_tests_by_substring() -> None:
    out = io.StringIO()
    status = main(["publisher", "tests.tck.reference:range_publisher", "-k", "spec317", "--timeout", "200"], out)
    assert status == 0
    assert out.getvalue().splitlines()[-1] == "3 passed, 0 failed, 0 skipped"


def test_run_verification_returns_outcome_per_test() -> None:
    outcomes = run_verification(verification_for("publisher", range_publisher), lambda name: "spec309" in name)
    assert [(o.rule, o.status) for o in outcomes] == [("3.9", Status.PASSED)] * 3


@pytest.mark.parametrize(
    ("timeout", "error", "message"),
    [
        (math.nan, ValueError, r"^timeout must be a number of seconds, got nan$"),
        (-1, ValueError, r"^timeout must be >= 0 or None, got -1$"),
        ("1", TypeError, r"^timeout must be a number of seconds or None, got '1'$"),
    ],
)
def test_run_test_and_run_verification_refuse_a_bad_timeout_before_running(
    timeout: Any, error: type[Exception], message: str
) -> None:
    # a NaN started the test's thread, then Thread.join raised
    ran: list[str] = []

    class Counting(verification_for("publisher", range_publisher)):  # type: ignore[misc]
        def setup_method(self, method: Any) -> None:
            ran.append(method.__name__)
            super().setup_method(method)

    with pytest.raises(error, match=message):
        run_test(Counting, "test_required_spec309_request_zero_must_signal_illegal_argument_exception", timeout=timeout)
    with pytest.raises(error, match=message):
        run_verification(Counting, lambda name: "spec309" in name, timeout=timeout)
    assert ran == []


def test_verification_for_unknown_kind_raises() -> None:
    with pytest.raises(
        ValueError,
        match=r"^kind must be one of \['processor', 'publisher', "
        r"'subscriber-blackbox', 'subscriber-whitebox'\], got 'consumer'$",
    ):
        verification_for("consumer", range_publisher)


def test_main_failed_publisher_option_runs_rule_1_4_tests() -> None:
    out = io.StringIO()
    status = main(
        [
            "publisher",
            "tests.tck.reference:range_publisher",
            "--failed",
            "tests.tck.broken:throwing_failed_publisher",
            "-k",
            "spec104",
            "--timeout",
            "200",
        ],
        out,
    )
    assert status == 1
    assert (
        "Publisher raised RuntimeError('It is not valid to throw here!') instead of signalling the error"
        in out.getvalue()
    )


@pytest.mark.parametrize(
    ("kind", "target", "summary"),
    [
        ("subscriber-whitebox", "tests.tck.reference:WhiteboxSyncSubscriber", "14 passed, 0 failed, 13 skipped"),
        ("subscriber-blackbox", "tests.tck.reference:SyncSubscriber", "11 passed, 0 failed, 15 skipped"),
        ("processor", "tests.tck.reference:multicast_processor", "46 passed, 0 failed, 22 skipped"),
    ],
)
def test_main_runs_every_kind(kind: str, target: str, summary: str) -> None:
    out = io.StringIO()
    status = main([kind, target, "--timeout", "1000", "--no-signals-timeout", "20"], out)
    assert (status, out.getvalue().splitlines()[-1]) == (0, summary)


SPEC309 = "test_required_spec309_request_zero_must_signal_illegal_argument_exception"


def test_call_within_returns_the_result_from_its_own_thread() -> None:
    assert call_within(lambda: threading.current_thread().name, 5, thread_name="worker") == ("worker",)
    assert call_within(lambda: threading.current_thread().name, None, thread_name="worker") == ("MainThread",)


@pytest.mark.parametrize("raised", [SystemExit(0), KeyboardInterrupt(), ValueError("boom")])
def test_call_within_re_raises_what_the_body_raised_on_the_calling_thread(raised: BaseException) -> None:
    def body() -> None:
        raise raised

    with pytest.raises(type(raised)) as caught:
        call_within(body, 5, thread_name="worker")
    assert caught.value is raised


def test_call_within_abandons_a_body_still_running_at_the_timeout() -> None:
    release = threading.Event()
    try:
        assert call_within(release.wait, 0.05, thread_name="worker") is None
    finally:
        release.set()


@pytest.mark.parametrize("timeout", [5.0, None])
def test_a_test_raising_system_exit_is_a_failure_with_what_it_raised(timeout: float | None) -> None:
    outcome = run_test(verification_for("publisher", broken.exiting_publisher), SPEC309, timeout=timeout)
    assert (outcome.status, type(outcome.exception)) == (Status.FAILED, SystemExit)
    assert outcome.message.startswith("SystemExit: 0 (at ")


def interrupting_publisher(elements: int) -> Any:
    raise KeyboardInterrupt


@pytest.mark.parametrize("timeout", [5.0, None])
def test_a_test_raising_keyboard_interrupt_ends_the_run(timeout: float | None) -> None:
    with pytest.raises(KeyboardInterrupt):
        run_test(verification_for("publisher", interrupting_publisher), SPEC309, timeout=timeout)
