"""``flowpy tck`` (and ``python -m flowpy.tck``): run one verification against an importable factory.

It prints one line per test as the test ends, then a summary line, and exits
1 if a required test failed, 0 otherwise, 2 for a usage error (a target
that cannot be imported, or that is not a factory of the kind asked for,
raises, exits or does not return within ``--test-timeout``: checked once,
before any test runs; a ``--junit-xml`` file that cannot be written), 130
when interrupted (Ctrl-C), after the summary and the XML of the tests that
ended. ``--test-timeout`` bounds each test, so an implementation that never
stops (say, ignores ``cancel``) costs seconds, not minutes; ``--junit-xml``
writes the outcomes for CI systems.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import sys
import traceback
import xml.etree.ElementTree as ET
from collections.abc import Callable, Sequence
from typing import IO, Any, TextIO

from flowpy import flow
from flowpy import reactivestreams as rs
from flowpy._checks import check_timeout
from flowpy.tck._base import Verification, verification_tests
from flowpy.tck.environment import TestEnvironment
from flowpy.tck.probes import WhiteboxSubscriberProbe
from flowpy.tck.runner import (
    KINDS,
    Outcome,
    Status,
    call_within,
    format_header,
    format_row,
    format_summary,
    name_width,
    printable,
    run_verification,
    verification_for,
)

__all__ = ["DEFAULT_TEST_TIMEOUT", "INTERRUPTED", "main"]

DEFAULT_TEST_TIMEOUT = 60.0
"""Seconds a test (or the up-front factory check) may run before the command line gives up on it."""

INTERRUPTED = 130
"""The exit status after a ``KeyboardInterrupt`` (Ctrl-C), as a shell reports a SIGINT."""


class UsageError(Exception):
    """A command-line argument that cannot be used; its message is the one line shown."""


def _parser(prog: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Run a Reactive Streams TCK verification against an importable factory.",
    )
    parser.add_argument("kind", choices=sorted(KINDS), help="which verification to run")
    parser.add_argument("target", help="MODULE:FACTORY, or MODULE:CLASS for a verification subclass")
    parser.add_argument(
        "--failed", metavar="MODULE:FACTORY", help="a zero-argument factory of a publisher that fails (rules 1.4, 1.9)"
    )
    parser.add_argument("--max-elements", type=int, metavar="N", help="the most elements the publisher can produce")
    parser.add_argument(
        "--max-subscribers", type=int, metavar="N", help="the most subscribers a processor serves at once"
    )
    parser.add_argument("--timeout", type=int, metavar="MS", help="default timeout in milliseconds")
    parser.add_argument(
        "--no-signals-timeout",
        type=int,
        metavar="MS",
        help="how long to watch for signals that must not come, in milliseconds",
    )
    parser.add_argument("--poll-timeout", type=int, metavar="MS", help="poll interval in milliseconds")
    parser.add_argument(
        "--test-timeout",
        type=float,
        default=DEFAULT_TEST_TIMEOUT,
        metavar="SECONDS",
        help=f"fail a test that runs longer and go on (default {DEFAULT_TEST_TIMEOUT:g}; 0: no limit)",
    )
    parser.add_argument("-k", dest="select", metavar="TEXT", help="run only tests whose name contains TEXT")
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="show whole test names and messages, and the traceback of each failure",
    )
    parser.add_argument("--junit-xml", metavar="PATH", help="also write the outcomes as JUnit XML to PATH")
    return parser


def _load(target: str, what: str) -> Any:
    """Import ``MODULE:ATTRIBUTE``.

    Raises:
        UsageError: if ``target`` is not of that form or cannot be imported.
    """
    module_name, sep, attribute = target.partition(":")
    if not sep or not module_name or not attribute:
        raise UsageError(f"{what} must be MODULE:FACTORY, got {target!r}")
    try:
        obj: Any = importlib.import_module(module_name)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # anything the module raises while importing, SystemExit included
        raise UsageError(f"cannot import {module_name!r} for {what} {target!r}: {type(exc).__name__}: {exc}") from None
    for part in attribute.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise UsageError(f"{what} {target!r}: {module_name!r} has no attribute {attribute!r}") from None
    return obj


_EXPECTED: dict[str, tuple[str, tuple[type, ...], Callable[[], tuple[Any, ...]]]] = {
    "publisher": ("Publisher", (flow.Publisher, rs.Publisher), lambda: (1,)),
    "subscriber-whitebox": (
        "Subscriber",
        (flow.Subscriber, rs.Subscriber),
        lambda: (WhiteboxSubscriberProbe(TestEnvironment()),),
    ),
    "subscriber-blackbox": ("Subscriber", (flow.Subscriber, rs.Subscriber), lambda: ()),
    "processor": ("Processor", (flow.Processor, rs.Processor), lambda: (1,)),
}


def _check_factory(kind: str, factory: Any, target: str, timeout: float | None) -> None:
    """Call ``factory`` once, as the verification will, and check what it returns.

    Raises:
        UsageError: if it is not callable, raises, or returns the wrong kind of object.
    """
    if isinstance(factory, type) and issubclass(factory, Verification):
        if not issubclass(factory, KINDS[kind]):
            raise UsageError(f"{target!r} is a {factory.__name__}, not a {KINDS[kind].__name__}")
        return
    noun, types, arguments = _EXPECTED[kind]
    _check_made(factory, arguments(), target, noun, types, f" (kind {kind!r})", timeout)


def _check_made(
    factory: Any,
    args: tuple[Any, ...],
    target: str,
    noun: str,
    types: tuple[type, ...],
    kind: str,
    timeout: float | None,
) -> None:
    """Call ``factory(*args)`` within ``timeout`` seconds, as a test would, and check what it returns.

    Raises:
        UsageError: if it is not callable, raises anything (``SystemExit``
            included), does not return in time, or returns no ``noun``.
        KeyboardInterrupt: raised by the factory, or a Ctrl-C while it ran.
    """
    if not callable(factory):
        raise UsageError(f"{target!r} is {factory!r}, not a factory of a {noun}")
    shown = f"{target}({', '.join(str(a) if isinstance(a, int) else type(a).__name__ for a in args)})"
    try:
        done = call_within(lambda: factory(*args), timeout, thread_name="tck-factory-check")
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # the factory's own failure or exit, shown as one line
        raise UsageError(f"{shown} raised {type(exc).__name__}: {exc}") from None
    if done is None:
        raise UsageError(f"{shown} did not return within {timeout:g} s (--test-timeout); it was abandoned")
    (made,) = done
    if not isinstance(made, types):
        raise UsageError(f"{shown} returned {made!r}, which is not a Flow or Reactive Streams {noun}{kind}")


def _open_junit(path: str) -> IO[bytes]:
    """Open (create or truncate) ``path`` for the JUnit XML, before any test runs.

    Raises:
        UsageError: if it cannot be opened for writing.
    """
    try:
        return open(path, "wb")  # main() closes it once the XML is written
    except OSError as exc:
        raise UsageError(f"cannot write --junit-xml {path!r}: {exc.strerror or exc}") from None


def _junit(file: IO[bytes], suite: str, outcomes: Sequence[Outcome]) -> None:
    """Write ``outcomes`` as JUnit XML; every text and attribute goes through :func:`printable`."""
    counts = {status: sum(1 for outcome in outcomes if outcome.status is status) for status in Status}
    root = ET.Element(
        "testsuite",
        name=printable(suite),
        tests=str(len(outcomes)),
        failures=str(counts[Status.FAILED]),
        skipped=str(counts[Status.SKIPPED]),
        errors="0",
        time=f"{sum(outcome.seconds for outcome in outcomes):.3f}",
    )
    for outcome in outcomes:
        case = ET.SubElement(
            root, "testcase", classname=printable(suite), name=printable(outcome.test), time=f"{outcome.seconds:.3f}"
        )
        if outcome.status is Status.FAILED:
            failure = ET.SubElement(case, "failure", message=printable(outcome.message))
            if outcome.exception is not None:
                failure.text = printable("".join(traceback.format_exception(outcome.exception)))
        elif outcome.status is Status.SKIPPED:
            ET.SubElement(case, "skipped", message=printable(outcome.message))
    ET.ElementTree(root).write(file, encoding="utf-8", xml_declaration=True)


def main(argv: Sequence[str] | None = None, out: TextIO | None = None, *, prog: str = "python -m flowpy.tck") -> int:
    """Run the command line; return 1 if any test failed, 2 for a usage error, 130 if interrupted, else 0."""
    args = _parser(prog).parse_args(argv)
    stream = sys.stdout if out is None else out
    try:
        with contextlib.ExitStack() as resources:
            return _run(args, stream, prog, resources)
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return INTERRUPTED


def _run(args: argparse.Namespace, stream: TextIO, prog: str, resources: contextlib.ExitStack) -> int:
    """Check the arguments, then run the tests; ``KeyboardInterrupt`` ends the run after its summary and XML."""
    try:
        try:
            timeout = check_timeout(args.test_timeout, "--test-timeout", none_allowed=False) or None
        except ValueError as exc:  # negative or NaN
            raise UsageError(str(exc)) from None
        factory = _load(args.target, "target")
        failed = _load(args.failed, "--failed") if args.failed else None
        _check_factory(args.kind, factory, args.target, timeout)
        if failed is not None:
            _check_made(failed, (), args.failed, "Publisher", _EXPECTED["publisher"][1], " (--failed)", timeout)
        junit = resources.enter_context(_open_junit(args.junit_xml)) if args.junit_xml else None
    except UsageError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2

    def env() -> TestEnvironment:
        return TestEnvironment(args.timeout, args.no_signals_timeout, args.poll_timeout)

    verification = verification_for(
        args.kind,
        factory,
        env=env,
        failed=failed,
        max_elements=args.max_elements,
        max_subscribers=args.max_subscribers,
    )

    def selected(name: str) -> bool:
        return not args.select or args.select in name

    width = name_width([name for name in verification_tests(verification) if selected(name)], full=args.verbose)
    outcomes: list[Outcome] = []

    def report(outcome: Outcome) -> None:
        outcomes.append(outcome)
        print(format_row(outcome, width, full=args.verbose), file=stream, flush=True)

    interrupted: KeyboardInterrupt | None = None
    try:
        print(format_header(width), file=stream, flush=True)
        run_verification(verification, selected, timeout=timeout, on_outcome=report)
    except KeyboardInterrupt as exc:  # Ctrl-C: report the tests that ended, then stop
        interrupted = exc
    print(format_summary(outcomes) + (", interrupted" if interrupted is not None else ""), file=stream, flush=True)
    if junit is not None:
        _junit(junit, f"{KINDS[args.kind].__name__}[{args.target}]", outcomes)
    if interrupted is not None:
        raise interrupted
    return 1 if any(outcome.status is Status.FAILED for outcome in outcomes) else 0
