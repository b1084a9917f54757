"""Running verifications without pytest: one test, a whole class, or a factory from the command line.

:func:`run_test` and :func:`run_verification` return :class:`Outcome`
records; ``python -m flowpy.tck`` (:func:`main`) prints them as a table.
They use the standard library alone.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import traceback
import unittest
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, TextIO

from flowpy import adapters, flow
from flowpy import reactivestreams as rs
from flowpy.tck._base import Verification, rule_of, verification_tests
from flowpy.tck.environment import TestEnvironment
from flowpy.tck.identity_processor import IdentityProcessorVerification
from flowpy.tck.publisher_verification import PublisherVerification
from flowpy.tck.subscriber_blackbox import SubscriberBlackboxVerification
from flowpy.tck.subscriber_whitebox import SubscriberWhiteboxVerification

__all__ = ["KINDS", "Outcome", "Status", "main", "run_callable", "run_test", "run_verification", "verification_for"]


class Status(Enum):
    """How a test ended."""

    PASSED = "passed"
    FAILED = "failed"
    SKIPPED = "skipped"


@dataclass(frozen=True)
class Outcome:
    """The result of one test.

    Attributes:
        rule: the spec rule, ``"1.9"``, or ``""`` for setup tests.
        test: the test's method name.
        status: the outcome: passed, failed or skipped.
        message: the failure or skip reason (``""`` when passed).
        exception: what the test raised: the :class:`~flowpy.tck.SkipTest`
            of a skip, the ``AssertionError`` (or other exception) of a
            failure; ``None`` when passed. Not compared.
    """

    rule: str
    test: str
    status: Status
    message: str
    exception: BaseException | None = field(default=None, compare=False)

    @property
    def passed(self) -> bool:
        """Whether the test passed."""
        return self.status is Status.PASSED


def run_test(verification: type[Verification], name: str) -> Outcome:
    """Run one test of ``verification`` on a fresh instance, as pytest would.

    Returns:
        The :class:`Outcome`, as :func:`run_callable` classifies it.
    """
    instance = verification()

    def body() -> None:
        instance.setup_method(getattr(instance, name))
        getattr(instance, name)()

    return run_callable(name, body)


def run_callable(name: str, body: Callable[[], object]) -> Outcome:
    """Run ``body`` as the test ``name`` and classify how it ended.

    Returns:
        The :class:`Outcome`: skipped on :class:`~flowpy.tck.SkipTest` (any
        :class:`unittest.SkipTest`), failed on any other :class:`Exception`,
        else passed.
    """
    try:
        body()
    except unittest.SkipTest as exc:  # the TCK's SkipTest, or one raised by the code under test
        return Outcome(rule_of(name), name, Status.SKIPPED, str(exc), exc)
    except Exception as exc:  # a failing test, whatever it raised
        message = str(exc) if isinstance(exc, AssertionError) and str(exc) else _describe(exc)
        return Outcome(rule_of(name), name, Status.FAILED, message, exc)
    return Outcome(rule_of(name), name, Status.PASSED, "")


def _describe(exc: BaseException) -> str:
    last = traceback.extract_tb(exc.__traceback__)[-1:] if exc.__traceback__ else []
    where = f" (at {last[0].filename}:{last[0].lineno})" if last else ""
    return f"{type(exc).__name__}: {exc}{where}"


def run_verification(
    verification: type[Verification], select: Callable[[str], bool] = lambda name: True
) -> list[Outcome]:
    """Run every selected test of ``verification`` and return the outcomes, in order."""
    setup = getattr(verification, "setup_class", None)
    if callable(setup):
        setup()
    try:
        return [run_test(verification, name) for name in verification_tests(verification) if select(name)]
    finally:
        teardown = getattr(verification, "teardown_class", None)
        if callable(teardown):
            teardown()


# --- Building a verification from a factory -------------------------------------------

KINDS: dict[str, type[Verification]] = {
    "publisher": PublisherVerification,
    "subscriber-whitebox": SubscriberWhiteboxVerification,
    "subscriber-blackbox": SubscriberBlackboxVerification,
    "processor": IdentityProcessorVerification,
}
"""The verification each command-line kind runs."""


def _as_flow(obj: Any) -> Any:
    # Reactive Streams objects are verified through FlowAdapters.
    if isinstance(obj, rs.Processor) and not isinstance(obj, flow.Processor):
        return adapters.to_flow_processor(obj)
    if isinstance(obj, rs.Publisher) and not isinstance(obj, flow.Publisher):
        return adapters.to_flow_publisher(obj)
    if isinstance(obj, rs.Subscriber) and not isinstance(obj, flow.Subscriber):
        return adapters.to_flow_subscriber(obj)
    return obj


def verification_for(
    kind: str,
    factory: Callable[..., Any],
    *,
    env: Callable[[], TestEnvironment] = TestEnvironment,
    failed: Callable[[], Any] | None = None,
    max_elements: int | None = None,
    max_subscribers: int | None = None,
) -> type[Verification]:
    """Return a verification class of ``kind`` whose factory hook calls ``factory``.

    ``factory`` takes the number of elements (publisher), the probe
    (subscriber-whitebox), nothing (subscriber-blackbox) or the buffer size
    (processor); it may return a Flow or a Reactive Streams object. A
    ``factory`` that is already a subclass of the verification is returned as is.

    Raises:
        ValueError: if ``kind`` is not one of :data:`KINDS`.
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {sorted(KINDS)}, got {kind!r}")
    base = KINDS[kind]
    if isinstance(factory, type) and issubclass(factory, base):
        return factory
    make: Callable[..., Any] = factory
    hooks: dict[str, Any] = {"create_test_environment": lambda self: env()}
    if kind == "publisher":
        hooks["create_publisher"] = lambda self, elements: _as_flow(make(elements))
    elif kind == "subscriber-whitebox":
        hooks["create_subscriber"] = lambda self, probe: _as_flow(make(probe))
    elif kind == "subscriber-blackbox":
        hooks["create_subscriber"] = lambda self: _as_flow(make())
    else:
        hooks["create_identity_processor"] = lambda self, buffer_size: _as_flow(make(buffer_size))
    if failed is not None:
        hooks["create_failed_publisher"] = lambda self: _as_flow(failed())
    if max_elements is not None:
        hooks["max_elements_from_publisher"] = lambda self: max_elements
    if max_subscribers is not None:
        hooks["max_supported_subscribers"] = lambda self: max_subscribers
    name = getattr(factory, "__name__", "factory")
    return type(f"Verify_{name}", (base,), hooks)


# --- Command line ------------------------------------------------------------------------


def _load(target: str) -> Any:
    module_name, sep, attribute = target.partition(":")
    if not sep or not module_name or not attribute:
        raise argparse.ArgumentTypeError(f"target must be MODULE:FACTORY, got {target!r}")
    obj: Any = importlib.import_module(module_name)
    for part in attribute.split("."):
        obj = getattr(obj, part)
    return obj


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m flowpy.tck",
        description="Run a Reactive Streams TCK verification against an importable factory.",
    )
    parser.add_argument("kind", choices=sorted(KINDS), help="which verification to run")
    parser.add_argument("target", type=_load, help="MODULE:FACTORY, or MODULE:CLASS for a verification subclass")
    parser.add_argument("--failed", type=_load, metavar="MODULE:FACTORY",
                        help="a zero-argument factory of a publisher that fails (rules 1.4, 1.9)")
    parser.add_argument("--max-elements", type=int, metavar="N",
                        help="the most elements the publisher can produce")
    parser.add_argument("--max-subscribers", type=int, metavar="N",
                        help="the most subscribers a processor serves at once")
    parser.add_argument("--timeout", type=int, metavar="MS", help="default timeout in milliseconds")
    parser.add_argument("--no-signals-timeout", type=int, metavar="MS",
                        help="how long to watch for signals that must not come, in milliseconds")
    parser.add_argument("--poll-timeout", type=int, metavar="MS", help="poll interval in milliseconds")
    parser.add_argument("-k", dest="select", metavar="TEXT", help="run only tests whose name contains TEXT")
    return parser


def format_table(outcomes: Sequence[Outcome], width: int = 100) -> str:
    """Return the outcomes as a text table: rule, test, outcome, message; then a summary line."""
    names = [outcome.test.removeprefix("test_") for outcome in outcomes]
    name_width = min(max((len(name) for name in names), default=4), 70)
    lines = [f"{'rule':<5} {'test':<{name_width}} {'outcome':<8} message"]
    for outcome, name in zip(outcomes, names, strict=True):
        shown = name if len(name) <= name_width else name[: name_width - 1] + "…"
        message = " ".join(outcome.message.split())
        if len(message) > width:
            message = message[: width - 1] + "…"
        lines.append(f"{outcome.rule:<5} {shown:<{name_width}} {outcome.status.value:<8} {message}".rstrip())
    counts = {status: sum(1 for outcome in outcomes if outcome.status is status) for status in Status}
    lines.append(", ".join(f"{counts[status]} {status.value}" for status in Status))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """Run the command line; return 1 if any test failed, else 0."""
    args = _parser().parse_args(argv)
    stream = sys.stdout if out is None else out

    def env() -> TestEnvironment:
        return TestEnvironment(args.timeout, args.no_signals_timeout, args.poll_timeout)

    verification = verification_for(
        args.kind, args.target, env=env, failed=args.failed,
        max_elements=args.max_elements, max_subscribers=args.max_subscribers,
    )
    select = (lambda name: args.select in name) if args.select else (lambda name: True)
    outcomes = run_verification(verification, select)
    print(format_table(outcomes), file=stream)
    return 1 if any(outcome.status is Status.FAILED for outcome in outcomes) else 0

