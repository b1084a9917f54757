"""``flowpy tck``: rows as tests end, per-test timeout, --verbose, --junit-xml, one-line usage errors."""

from __future__ import annotations

import argparse
import io
import os
import signal
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from flowpy.tck.cli import INTERRUPTED, main
from flowpy.tck.runner import printable
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


def flowpy(*args: str, pythonpath: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``python -m flowpy ARGS`` from the project root, bounded by 50 seconds."""
    path = os.pathsep.join(str(p) for p in (ROOT, pythonpath) if p is not None)
    return subprocess.run(
        [sys.executable, "-m", "flowpy", *args],
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=path),
        capture_output=True,
        text=True,
        timeout=50,
        check=False,
    )


@pytest.mark.timeout(60)
def _argparse_choices(*choices: str) -> str:
    """How this Python's argparse lists ``choices`` in an error: quoted before 3.13.x and 3.12.x, bare since."""
    parser = argparse.ArgumentParser(prog="probe", exit_on_error=False)
    parser.add_argument("c", choices=choices)
    with pytest.raises(argparse.ArgumentError) as raised:
        parser.parse_args(["frob"])
    return str(raised.value).split("(choose from ", 1)[1].removesuffix(")")


def test_flowpy_command_runs_tck_and_reports_usage() -> None:
    done = flowpy("tck", "publisher", "tests.tck.reference:range_publisher", "-k", "spec309", *FAST)
    assert (done.returncode, done.stdout.splitlines()[-1]) == (0, "3 passed, 0 failed, 0 skipped")
    assert flowpy("tck", "--help").stdout.startswith("usage: flowpy tck ")
    listing = flowpy("--help")
    assert listing.returncode == 0 and "tck" in listing.stdout and "job" in listing.stdout
    unknown = flowpy("frob")
    assert unknown.returncode == 2
    assert unknown.stderr.splitlines()[-1] == (
        f"flowpy: error: argument COMMAND: invalid choice: 'frob' (choose from {_argparse_choices('tck', 'job')})"
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


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["tests.tck.broken:hanging_factory"], "tests.tck.broken:hanging_factory(1)"),
        (
            ["tests.tck.reference:range_publisher", "--failed", "tests.tck.broken:hanging_factory"],
            "tests.tck.broken:hanging_factory()",
        ),
    ],
)
def test_a_factory_that_never_returns_fails_the_check_at_the_test_timeout(args: list[str], message: str) -> None:
    done = flowpy("tck", "publisher", *args, "--test-timeout", "1")
    assert (done.returncode, done.stdout, done.stderr) == (
        2,
        "",
        f"flowpy tck: error: {message} did not return within 1 s (--test-timeout); it was abandoned\n",
    )


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["tests.tck.broken:exiting_factory"], "tests.tck.broken:exiting_factory(1) raised SystemExit: 0"),
        (
            ["tests.tck.reference:range_publisher", "--failed", "tests.tck.broken:exiting_factory"],
            "tests.tck.broken:exiting_factory() raised SystemExit: 0",
        ),
        (
            ["exiting_module:f"],
            "cannot import 'exiting_module' for target 'exiting_module:f': SystemExit: 0",
        ),
    ],
)
def test_a_target_that_exits_at_the_check_is_a_usage_error(args: list[str], message: str, tmp_path: Path) -> None:
    (tmp_path / "exiting_module.py").write_text("raise SystemExit(0)\n")
    done = flowpy("tck", "publisher", *args, pythonpath=tmp_path)
    assert (done.returncode, done.stdout, done.stderr) == (2, "", f"flowpy tck: error: {message}\n")


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("target", "test_timeout", "message"),
    [
        ("exiting_publisher", "5", "SystemExit: 0"),
        ("exiting_publisher", "0", "SystemExit: 0"),
        ("exiting_with_message_publisher", "5", "SystemExit: stopped"),
    ],
)
def test_a_test_that_raises_system_exit_fails_and_the_run_goes_on(
    target: str, test_timeout: str, message: str, tmp_path: Path
) -> None:
    path = tmp_path / "tck.xml"
    done = flowpy(
        "tck", "publisher", f"tests.tck.broken:{target}", "-k", "spec309", "--test-timeout", test_timeout,
        "--junit-xml", str(path), *FAST,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 1 + 3 + 1 and lines[-1] == "0 passed, 3 failed, 0 skipped"
    where = f" (at {ROOT / 'tests' / 'tck' / 'broken.py'}:"
    for row in lines[1:-1]:
        assert row.split(None, 3)[2:3] == ["failed"]
        assert row.split(None, 3)[3].startswith(f"{message}{where}")
    failures = [case.find("failure") for case in ET.parse(path).getroot().findall("testcase")]
    assert [failure.get("message", "").startswith(message) for failure in failures if failure is not None] == [True] * 3


@pytest.mark.timeout(60)
@pytest.mark.parametrize("test_timeout", ["5", "0"])
def test_a_test_that_raises_keyboard_interrupt_stops_the_run_with_a_summary(test_timeout: str, tmp_path: Path) -> None:
    path = tmp_path / "tck.xml"
    done = flowpy(
        "tck", "publisher", "tests.tck.broken:interrupting_factory", "-k", "spec309", "--test-timeout", test_timeout,
        "--junit-xml", str(path), *FAST,
    )  # fmt: skip
    lines = done.stdout.splitlines()
    assert (done.returncode, done.stderr) == (INTERRUPTED, "flowpy tck: interrupted\n")
    assert len(lines) == 1 + 1 + 1 and lines[1].split()[-1] == "passed"
    assert lines[-1] == "1 passed, 0 failed, 0 skipped, interrupted"
    (case,) = ET.parse(path).getroot().findall("testcase")
    assert case.get("name") == "test_required_spec309_request_zero_must_signal_illegal_argument_exception"


@pytest.mark.timeout(60)
@pytest.mark.skipif(sys.platform == "win32", reason="sends SIGINT")
def test_ctrl_c_during_a_test_ends_the_run_with_a_summary_and_exit_130() -> None:
    command = [sys.executable, "-m", "flowpy", "tck", "publisher", "tests.tck.broken:hanging_publisher"]
    with subprocess.Popen(
        [*command, "-k", "create_publisher1", "--test-timeout", "50", *FAST],
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # Python turns SIGINT into KeyboardInterrupt only if it is not ignored at start.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    ) as process:
        assert process.stdout is not None
        header = process.stdout.readline()  # written before the first test starts
        process.send_signal(signal.SIGINT)
        rest, errors = process.communicate(timeout=50)
    assert header.split() == ["rule", "test", "outcome", "message"]
    assert (process.returncode, rest, errors) == (
        INTERRUPTED,
        "0 passed, 0 failed, 0 skipped, interrupted\n",
        "flowpy tck: interrupted\n",
    )


ESCAPED = r"NUL \x00 ESC \x1b[31m BEL \x07 surrogate \ud800 noncharacter \ufffe end"
"""``broken.UNPRINTABLE`` as rows and JUnit XML show it."""


@pytest.mark.timeout(60)
def test_rows_show_unprintable_characters_escaped() -> None:
    done = flowpy("tck", "publisher", "tests.tck.broken:unprintable_publisher", "-k", "create_publisher1", "-v", *FAST)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"failed   ValueError: {ESCAPED} (at " in done.stdout
    assert f"ValueError: {ESCAPED}\n" in done.stdout  # the traceback's last line


def test_junit_xml_shows_unprintable_characters_escaped(tmp_path: Path) -> None:
    path = tmp_path / "tck.xml"
    target = "tests.tck.broken:unprintable_publisher"
    status, _ = run("publisher", target, "-k", "create_publisher1", "--junit-xml", str(path), *FAST)
    assert status == 1
    (case,) = ET.parse(path).getroot().findall("testcase")
    failure = case.find("failure")
    assert failure is not None
    assert failure.get("message", "").startswith(f"ValueError: {ESCAPED} (at ")
    assert (failure.text or "").endswith(f"ValueError: {ESCAPED}\n")


def test_printable_leaves_only_characters_xml_allows() -> None:
    # XML 1.0: Char ::= #x9 | #xA | #xD | [#x20-#xD7FF] | [#xE000-#xFFFD] | [#x10000-#x10FFFF]
    refused = [*range(0x00, 0x09), 0x0B, 0x0C, *range(0x0E, 0x20), *range(0xD800, 0xE000), 0xFFFE, 0xFFFF]
    text = "a\tb\nc " + "".join(map(chr, refused)) + " é…\U0001f600"
    shown = printable(text)
    assert shown.startswith("a\tb\nc \\x00\\x01") and shown.endswith("\\ufffe\\uffff é…\U0001f600")
    element = ET.Element("e", message=shown)
    element.text = shown
    parsed = ET.fromstring(ET.tostring(element, encoding="unicode").encode("utf-8"))
    assert (parsed.text, parsed.get("message")) == (shown, shown)


@pytest.mark.parametrize(
    ("where", "reason"), [("missing/tck.xml", "No such file or directory"), (".", "Is a directory")]
)
def test_an_unwritable_junit_xml_path_is_refused_before_any_test(
    where: str, reason: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / where
    status, output = run("publisher", "tests.tck.reference:range_publisher", "--junit-xml", str(path), *FAST)
    assert (status, output) == (2, "")
    assert capsys.readouterr().err == f"flowpy tck: error: cannot write --junit-xml {str(path)!r}: {reason}\n"


def test_no_junit_xml_file_is_made_for_a_usage_error(tmp_path: Path) -> None:
    path = tmp_path / "tck.xml"
    status, _ = run("publisher", "tests.tck.test_cli:raising_factory", "--junit-xml", str(path))
    assert status == 2 and not path.exists()
