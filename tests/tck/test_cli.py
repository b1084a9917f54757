"""``flowpy tck``: rows as tests end, per-test timeout, --verbose, --junit-xml, one-line usage errors."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from flowpy.tck.cli import main
from tests.tck import broken
from tests.tck.reference import range_publisher

ROOT = Path(__file__).resolve().parents[2]
FAST = ["--timeout", "300", "--no-signals-timeout", "20"]


def run(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    return main(list(args), out, prog="flowpy tck"), out.getvalue()


def test_rows_are_written_as_each_test_ends() -> None:
    made: list[int] = []

    def counting_publisher(elements: int) -> Any:
        made.append(elements)
        return range_publisher(elements)

    class Stream(io.StringIO):
        def __init__(self) -> None:
            super().__init__()
            self.seen: list[int] = []

        def write(self, text: str) -> int:
            if text.strip():
                self.seen.append(len(made))
            return super().write(text)

    stream = Stream()
    module = sys.modules[__name__]
    module.counting_publisher = counting_publisher  # type: ignore[attr-defined]
    status = main(["publisher", f"{__name__}:counting_publisher", "-k", "spec309", *FAST], stream)
    assert status == 0
    assert stream.getvalue().splitlines()[-1] == "3 passed, 0 failed, 0 skipped"
    # One publisher made for the up-front check, then one per test; the
    # header is written before any test runs, each row after its own test.
    assert stream.seen == [1, 2, 3, 4, 4]


@pytest.mark.timeout(60)
def test_a_test_that_never_ends_fails_at_the_test_timeout_and_the_run_goes_on() -> None:
    try:
        status, output = run(
            "publisher", "tests.tck.broken:hanging_publisher", "-k", "create_publisher", "--test-timeout", "0.5", *FAST
        )
    finally:
        broken.hanging_release.set()
    lines = output.splitlines()
    assert status == 1
    assert [line.split()[0] for line in lines[1:-1]] == [
        "required_create_publisher1_must_produce_a_stream_of_exactly1_element",
        "required_create_publisher3_must_produce_a_stream_of_exactly3_elements",
    ]
    assert all(line.endswith("failed   the test did not end within 0.5 s; it was abandoned") for line in lines[1:-1])
    assert lines[-1] == "0 passed, 2 failed, 0 skipped"


def test_verbose_shows_whole_names_messages_and_the_traceback() -> None:
    status, output = run("publisher", "tests.tck.broken:over_delivering_publisher", "-k", "spec101", "-v", *FAST)
    assert status == 1
    assert (
        "required_spec101_subscription_request_must_result_in_the_correct_number_of_produced_elements failed"
        in " ".join(output.split())
    )
    assert "Traceback (most recent call last):" in output
    assert "…" not in output


def test_short_rows_cut_names_and_messages() -> None:
    _, output = run("publisher", "tests.tck.broken:over_delivering_publisher", "-k", "spec101", *FAST)
    assert "required_spec101_subscription_request_must_result_in_the_correct_numb…" in output
    assert "Traceback" not in output


def test_junit_xml_reports_every_outcome(tmp_path: Path) -> None:
    path = tmp_path / "tck.xml"
    status, _ = run("publisher", "tests.tck.broken:over_delivering_publisher", "--junit-xml", str(path), *FAST)
    assert status == 1
    suite = ET.parse(path).getroot()
    cases = suite.findall("testcase")
    failed = [case for case in cases if case.find("failure") is not None]
    skipped = [case for case in cases if case.find("skipped") is not None]
    assert suite.tag == "testsuite" and suite.get("name") == (
        "PublisherVerification[tests.tck.broken:over_delivering_publisher]"
    )
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == (
        str(len(cases)),
        str(len(failed)),
        str(len(skipped)),
    )
    assert len(cases) == 38 and failed and skipped
    by_name = {case.get("name"): case for case in cases}
    failure = by_name[
        "test_required_spec101_subscription_request_must_result_in_the_correct_number_of_produced_elements"
    ].find("failure")
    assert failure is not None
    assert failure.get("message", "").startswith("Publisher signalled more than requested (rule 1.1)")
    assert "Traceback" in (failure.text or "")


def not_a_factory() -> int:
    return 42


def raising_factory(elements: int) -> Any:
    raise ValueError("no publisher today")


VALUE = 7


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["publisher", "no_colon_here"], "target must be MODULE:FACTORY, got 'no_colon_here'"),
        (
            ["publisher", "no.such.module:f"],
            "cannot import 'no.such.module' for target 'no.such.module:f': ModuleNotFoundError: No module named 'no'",
        ),
        (
            ["publisher", "tests.tck.test_cli:missing"],
            "target 'tests.tck.test_cli:missing': 'tests.tck.test_cli' has no attribute 'missing'",
        ),
        (["publisher", "tests.tck.test_cli:VALUE"], "'tests.tck.test_cli:VALUE' is 7, not a factory of a Publisher"),
        (
            ["subscriber-blackbox", "tests.tck.test_cli:not_a_factory"],
            "tests.tck.test_cli:not_a_factory() returned 42, which is not a Flow or Reactive Streams Subscriber "
            "(kind 'subscriber-blackbox')",
        ),
        (
            ["publisher", "tests.tck.test_cli:raising_factory"],
            "tests.tck.test_cli:raising_factory(1) raised ValueError: no publisher today",
        ),
        (
            ["processor", "tests.tck.reference:range_publisher"],
            "tests.tck.reference:range_publisher(1) returned RangePublisher(0, 1), which is not a Flow or Reactive "
            "Streams Processor (kind 'processor')",
        ),
        (
            ["publisher", "tests.tck.reference:range_publisher", "--failed", "tests.tck.test_cli:VALUE"],
            "'tests.tck.test_cli:VALUE' is 7, not a factory of a Publisher",
        ),
        (
            ["publisher", "tests.tck.reference:range_publisher", "--test-timeout", "-1"],
            "--test-timeout must be >= 0, got -1.0",
        ),
        (
            ["publisher", "tests.tck.reference:range_publisher", "--test-timeout", "nan"],
            "--test-timeout must be a number of seconds, got nan",
        ),
    ],
)
def test_unusable_targets_are_one_line_usage_errors(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    status, output = run(*args)
    assert (status, output) == (2, "")
    assert capsys.readouterr().err == f"flowpy tck: error: {message}\n"


@pytest.mark.timeout(60)
def test_flowpy_command_runs_tck_and_reports_usage() -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT))

    def flowpy(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "flowpy", *args],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=50,
            check=False,
        )

    done = flowpy("tck", "publisher", "tests.tck.reference:range_publisher", "-k", "spec309", *FAST)
    assert (done.returncode, done.stdout.splitlines()[-1]) == (0, "3 passed, 0 failed, 0 skipped")
    assert flowpy("tck", "--help").stdout.startswith("usage: flowpy tck ")
    listing = flowpy("--help")
    assert listing.returncode == 0 and "tck" in listing.stdout and "job" in listing.stdout
    unknown = flowpy("frob")
    assert unknown.returncode == 2
    assert unknown.stderr.splitlines()[-1] == (
        "flowpy: error: argument COMMAND: invalid choice: 'frob' (choose from 'tck', 'job')"
    )
    failed = flowpy("tck", "publisher", "nowhere:f")
    assert (failed.returncode, failed.stderr) == (
        2,
        "flowpy tck: error: cannot import 'nowhere' for target 'nowhere:f': ModuleNotFoundError: "
        "No module named 'nowhere'\n",
    )


def test_flowpy_is_a_console_script() -> None:
    from importlib.metadata import entry_points

    (script,) = [ep for ep in entry_points(group="console_scripts") if ep.name == "flowpy"]
    assert script.value == "flowpy.cli:main"
