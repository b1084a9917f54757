"""Running verifications without pytest: one test, a whole class, or a factory.

:func:`run_test` and :func:`run_verification` return :class:`Outcome`
records, optionally bounding each test's time; :func:`format_table` and its
parts print them (the command line, :mod:`flowpy.tck.cli`, uses the same
rows). They use the standard library alone.
"""

from __future__ import annotations

import threading
import traceback
import unittest
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum
from time import monotonic
from typing import Any, TypeVar

from flowpy import adapters, flow
from flowpy import reactivestreams as rs
from flowpy._checks import check_timeout
from flowpy.tck._base import Verification, rule_of, verification_tests
from flowpy.tck.environment import TestEnvironment
from flowpy.tck.identity_processor import IdentityProcessorVerification
from flowpy.tck.publisher_verification import PublisherVerification
from flowpy.tck.subscriber_blackbox import SubscriberBlackboxVerification
from flowpy.tck.subscriber_whitebox import SubscriberWhiteboxVerification

__all__ = [
    "KINDS",
    "Outcome",
    "Status",
    "call_within",
    "format_header",
    "format_row",
    "format_summary",
    "format_table",
    "name_width",
    "printable",
    "run_callable",
    "run_test",
    "run_verification",
    "verification_for",
]


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
            failure, a :class:`TimeoutError` for a test that ran out of
            time; ``None`` when passed. Not compared.
        seconds: how long the test ran (set by :func:`run_test`). Not compared.
    """

    rule: str
    test: str
    status: Status
    message: str
    exception: BaseException | None = field(default=None, compare=False)
    seconds: float = field(default=0.0, compare=False)

    @property
    def passed(self) -> bool:
        """Whether the test passed."""
        return self.status is Status.PASSED


T = TypeVar("T")


def call_within(body: Callable[[], T], timeout: float | None, *, thread_name: str) -> tuple[T] | None:
    """Call ``body``, bounded by ``timeout`` seconds.

    With ``timeout=None`` the body runs on this thread. Otherwise it runs on
    a daemon thread named ``thread_name``, and what it raises, any
    :class:`BaseException` (``SystemExit`` and ``KeyboardInterrupt``
    included), is re-raised here, so the body behaves as if called directly.

    Returns:
        ``(result,)``, or ``None`` if the body was still running after
        ``timeout`` seconds: it is then left to finish on its own daemon
        thread, as nothing can stop it from outside.
    """
    if timeout is None:
        return (body(),)
    # Written only by the worker thread, and read only once join() has returned.
    result: list[T] = []
    raised: list[BaseException] = []

    def run() -> None:
        try:
            result.append(body())
        except BaseException as exc:  # handed to the calling thread, which re-raises it
            raised.append(exc)

    worker = threading.Thread(target=run, name=thread_name, daemon=True)
    worker.start()
    worker.join(timeout)
    if raised:
        raise raised[0]
    return (result[0],) if result else None


def run_test(verification: type[Verification], name: str, *, timeout: float | None = None) -> Outcome:
    """Run one test of ``verification`` on a fresh instance, as pytest would.

    Args:
        timeout: seconds the test may run; ``None`` for no limit. A test
            still running then is reported failed with a ``TimeoutError``
            and left to finish on its own daemon thread (see
            :func:`call_within`); what it still does may disturb later tests.

    Returns:
        The :class:`Outcome`, as :func:`run_callable` classifies it.

    Raises:
        TypeError: if ``timeout`` is not a number or ``None``.
        ValueError: if ``timeout`` is negative or NaN (one beyond
            ``threading.TIMEOUT_MAX``, ``inf`` included, is no limit in practice).
        KeyboardInterrupt: raised by the test (on whichever thread ran it),
            or a Ctrl-C while it ran: it ends the run, it is not an outcome.
    """
    seconds = None if timeout is None else check_timeout(timeout)
    instance = verification()

    def body() -> None:
        instance.setup_method(getattr(instance, name))
        getattr(instance, name)()

    started = monotonic()
    done = call_within(lambda: run_callable(name, body), seconds, thread_name=f"tck-{name}")
    if done is None:
        message = f"the test did not end within {timeout:g} s; it was abandoned"
        outcome = Outcome(rule_of(name), name, Status.FAILED, message, TimeoutError(message))
    else:
        (outcome,) = done
    return replace(outcome, seconds=monotonic() - started)


def run_callable(name: str, body: Callable[[], object]) -> Outcome:
    """Run ``body`` as the test ``name`` and classify how it ended.

    Returns:
        The :class:`Outcome`: skipped on :class:`~flowpy.tck.SkipTest` (any
        :class:`unittest.SkipTest`), failed on anything else it raises,
        ``SystemExit`` and other :class:`BaseException` s included (code
        under test that exits fails its test, as in pytest), else passed.

    Raises:
        KeyboardInterrupt: re-raised, so that Ctrl-C stops a run.
    """
    try:
        body()
    except unittest.SkipTest as exc:  # the TCK's SkipTest, or one raised by the code under test
        return Outcome(rule_of(name), name, Status.SKIPPED, str(exc), exc)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # a failing test, whatever it raised
        message = str(exc) if isinstance(exc, AssertionError) and str(exc) else _describe(exc)
        return Outcome(rule_of(name), name, Status.FAILED, message, exc)
    return Outcome(rule_of(name), name, Status.PASSED, "")


def _describe(exc: BaseException) -> str:
    last = traceback.extract_tb(exc.__traceback__)[-1:] if exc.__traceback__ else []
    where = f" (at {last[0].filename}:{last[0].lineno})" if last else ""
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return f"{text}{where}"


def run_verification(
    verification: type[Verification],
    select: Callable[[str], bool] = lambda name: True,
    *,
    timeout: float | None = None,
    on_outcome: Callable[[Outcome], object] | None = None,
) -> list[Outcome]:
    """Run every selected test of ``verification`` and return the outcomes, in order.

    Args:
        select: which tests to run, by method name.
        timeout: each test's limit, as for :func:`run_test`.
        on_outcome: called with each outcome as soon as its test ends.

    Raises:
        TypeError, ValueError: for a ``timeout`` that :func:`run_test` refuses, before any test runs.
    """
    if timeout is not None:
        check_timeout(timeout)
    setup = getattr(verification, "setup_class", None)
    if callable(setup):
        setup()
    try:
        outcomes = []
        for name in verification_tests(verification):
            if select(name):
                outcome = run_test(verification, name, timeout=timeout)
                outcomes.append(outcome)
                if on_outcome is not None:
                    on_outcome(outcome)
        return outcomes
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


# --- Reporting ---------------------------------------------------------------------------


_NAME_WIDTH = 70  # characters of a test name shown in a short row
_MESSAGE_WIDTH = 100  # characters of a message shown in a short row


def name_width(names: Sequence[str], *, full: bool = False) -> int:
    """The width of the test column for these test method names (capped unless ``full``)."""
    width = max((len(name.removeprefix("test_")) for name in names), default=4)
    return width if full else min(width, _NAME_WIDTH)


def format_header(width: int) -> str:
    """The table's header for a test column of ``width``."""
    return f"{'rule':<5} {'test':<{width}} {'outcome':<8} message"


def printable(text: str) -> str:
    """``text`` with each unprintable character but tab, newline and carriage return as its Python escape.

    A NUL, an ANSI escape or a BEL becomes ``\\x00``, ``\\x1b`` or ``\\x07``, a
    lone surrogate ``\\ud800``: what remains is valid in XML 1.0, encodable in
    UTF-8, and does nothing to a terminal (see :meth:`str.isprintable`).
    """
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() or c in "\t\n\r" else c.encode("unicode_escape").decode("ascii") for c in text)


def format_row(outcome: Outcome, width: int, *, full: bool = False) -> str:
    """One table row: rule, test, outcome, message; cut to fit unless ``full``.

    With ``full``, a failure's traceback follows on indented lines. Unprintable
    characters are shown escaped (:func:`printable`).
    """
    name = printable(outcome.test.removeprefix("test_"))
    message = printable(" ".join(outcome.message.split()))
    if not full:
        if len(name) > width:
            name = name[: width - 1] + "…"
        if len(message) > _MESSAGE_WIDTH:
            message = message[: _MESSAGE_WIDTH - 1] + "…"
    row = f"{outcome.rule:<5} {name:<{width}} {outcome.status.value:<8} {message}".rstrip()
    if full and outcome.status is Status.FAILED and outcome.exception is not None:
        trace = printable("".join(traceback.format_exception(outcome.exception))).rstrip()
        row += "".join(f"\n      {line}" for line in trace.splitlines())
    return row


def format_summary(outcomes: Sequence[Outcome]) -> str:
    """``"N passed, N failed, N skipped"``."""
    return ", ".join(f"{sum(1 for o in outcomes if o.status is status)} {status.value}" for status in Status)


def format_table(outcomes: Sequence[Outcome]) -> str:
    """Return the outcomes as a text table: header, one row per test, then the summary line."""
    width = name_width([outcome.test for outcome in outcomes])
    rows = [format_header(width), *(format_row(outcome, width) for outcome in outcomes), format_summary(outcomes)]
    return "\n".join(rows)
