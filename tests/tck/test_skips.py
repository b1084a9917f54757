"""A TCK skip: one exception type with or without pytest, public reasons, and the runner's outcome."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import unittest
from pathlib import Path

import pytest

import flowpy.tck
from flowpy.tck import (
    NOT_VERIFIED,
    SKIPPING_NO_ERROR_PUBLISHER_AVAILABLE,
    SKIPPING_OPTIONAL_TEST_FAILED,
    SKIPPING_STOCHASTIC_TEST,
    SKIPPING_TOO_FEW_ELEMENTS,
    SKIPPING_TOO_FEW_SUBSCRIBERS,
    SKIPPING_UNABLE_TO_COMPLETE,
    PublisherVerification,
    SkipTest,
    TestEnvironment,
)
from flowpy.tck.runner import Status, run_test, verification_for
from tests.tck.reference import IdentityProcessor, RangePublisher, range_publisher

ROOT = Path(__file__).resolve().parents[2]


class _Range(PublisherVerification[int]):
    def create_test_environment(self) -> TestEnvironment:
        return TestEnvironment(200, 10)

    def create_publisher(self, elements: int) -> RangePublisher:
        return RangePublisher(0, elements)


def test_skip_is_the_tcks_own_type_under_pytest() -> None:
    with pytest.raises(SkipTest) as skipped:
        _Range().test_untested_spec110_reject_a_subscription_request_if_the_same_subscriber_subscribes_twice()
    assert type(skipped.value) is SkipTest
    assert isinstance(skipped.value, unittest.SkipTest)
    assert skipped.value.reason == str(skipped.value) == NOT_VERIFIED


def _run(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, *args, code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60, check=False
    )


@pytest.mark.timeout(60)
def test_skip_is_the_same_type_without_pytest() -> None:
    done = _run(
        textwrap.dedent("""
        import sys
        from flowpy.tck import NOT_VERIFIED, PublisherVerification, SkipTest
        try:
            PublisherVerification().test_untested_spec110_reject_a_subscription_request_if_the_same_subscriber_subscribes_twice()
        except SkipTest as exc:
            print(type(exc).__module__, type(exc).__qualname__, exc.reason == NOT_VERIFIED)
        print("pytest" in sys.modules)
    """),
        "-c",
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["flowpy.tck.skips SkipTest True", "False"]


@pytest.mark.timeout(60)
def test_pytest_reports_a_tck_skip_as_skipped_with_its_reason(tmp_path: Path) -> None:
    module = tmp_path / "test_skipping.py"
    module.write_text(
        textwrap.dedent("""
        from tests.tck.test_skips import _Range

        class TestRange(_Range):
            pass
    """)
    )
    done = _run(
        str(module),
        "-m",
        "pytest",
        "-q",
        "-rs",
        "-p",
        "no:randomly",
        "-p",
        "no:cacheprovider",
        "-k",
        "spec110 or spec104",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 skipped" in done.stdout
    assert NOT_VERIFIED in done.stdout
    assert SKIPPING_NO_ERROR_PUBLISHER_AVAILABLE in done.stdout


def test_skip_reasons_are_exported() -> None:
    for name in (
        "NOT_VERIFIED",
        "SKIPPING_NO_ERROR_PUBLISHER_AVAILABLE",
        "SKIPPING_OPTIONAL_TEST_FAILED",
        "SKIPPING_STOCHASTIC_TEST",
        "SKIPPING_TOO_FEW_ELEMENTS",
        "SKIPPING_TOO_FEW_SUBSCRIBERS",
        "SKIPPING_UNABLE_TO_COMPLETE",
        "SkipTest",
    ):
        assert name in flowpy.tck.__all__


def _skip_reason(verification: type, test: str) -> str:
    outcome = run_test(verification, test)
    assert outcome.status is Status.SKIPPED, outcome
    assert isinstance(outcome.exception, SkipTest)
    assert outcome.message == outcome.exception.reason
    return outcome.message


def test_each_skip_reason_is_the_constant() -> None:
    publisher = verification_for("publisher", range_publisher, env=lambda: TestEnvironment(200, 10))
    assert _skip_reason(publisher, "test_optional_spec104_must_signal_on_error_when_fails") == (
        SKIPPING_NO_ERROR_PUBLISHER_AVAILABLE
    )
    stochastic = type("Stochastic", (publisher,), {"skip_stochastic_tests": lambda self: True})
    assert _skip_reason(stochastic, "test_stochastic_spec103_must_signal_on_methods_sequentially") == (
        SKIPPING_STOCHASTIC_TEST
    )
    few = verification_for("publisher", range_publisher, max_elements=2)
    assert _skip_reason(few, "test_required_spec102_may_signal_less_than_requested_and_terminate_subscription") == (
        f"{SKIPPING_TOO_FEW_ELEMENTS}3 is higher than supported by given producer: 2"
    )
    endless = verification_for("publisher", range_publisher, max_elements=2**63 - 1)
    assert _skip_reason(endless, "test_required_spec102_may_signal_less_than_requested_and_terminate_subscription") == (
        SKIPPING_UNABLE_TO_COMPLETE
    )
    processor = verification_for("processor", lambda size: IdentityProcessor(), max_subscribers=1)
    assert _skip_reason(
        processor, "test_required_must_request_from_upstream_for_elements_that_have_been_requested_long_ago"
    ) == (f"{SKIPPING_TOO_FEW_SUBSCRIBERS}2 subscribers and max_supported_subscribers() is 1")
    processor.teardown_class()  # type: ignore[attr-defined]


def test_failed_optional_test_skips_with_the_constant_and_the_failure() -> None:
    class Unicast(_Range):
        def create_publisher(self, elements: int) -> RangePublisher:
            publisher = RangePublisher(0, elements)
            subscribed: list[object] = []

            class Once(RangePublisher):
                def subscribe(self, subscriber: object) -> None:
                    if subscribed:
                        raise RuntimeError("one subscriber only")
                    subscribed.append(subscriber)
                    publisher.subscribe(subscriber)  # type: ignore[arg-type]

            return Once(0, elements)

    reason = _skip_reason(Unicast, "test_optional_spec111_may_support_multi_subscribe")
    assert reason == f"{SKIPPING_OPTIONAL_TEST_FAILED}: one subscriber only"


def test_run_test_returns_the_exception_of_a_failure() -> None:
    broken = verification_for("publisher", lambda n: RangePublisher(0, 0), env=lambda: TestEnvironment(20, 10))
    outcome = run_test(broken, "test_required_spec102_may_signal_less_than_requested_and_terminate_subscription")
    assert outcome.status is Status.FAILED
    assert isinstance(outcome.exception, AssertionError)
    assert outcome.message == str(outcome.exception)
    assert not outcome.passed
    passed = run_test(broken, "test_required_validate_max_elements_from_publisher")
    assert (passed.status, passed.message, passed.exception, passed.passed) == (Status.PASSED, "", None, True)
