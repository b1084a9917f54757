"""SubscriberWhiteboxVerification fails or passes as the upstream TCK 1.0.4 self-tests require.

A port of ``SubscriberWhiteboxVerificationTest``: each test runs one
verification test on a subscriber from :mod:`tests.tck.broken` (broken in
one place, or correct) and checks that it fails with a message naming the
defect, or passes. The helper publisher runs on one pool of the test's own,
which the TCK does not shut down.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from flowpy.executors import DaemonThreadPool
from tests.tck import broken
from tests.tck.conformance import (
    TIMEOUT_MILLIS,
    Scheduler,
    require_failure,
    require_pass,
    run,
    whitebox_verification,
)


@pytest.fixture(scope="module")
def pool() -> Iterator[DaemonThreadPool]:
    """The helper publisher's executor, shared by every test of the module (as upstream's ``ex``)."""
    executor = DaemonThreadPool(4, thread_name_prefix="whitebox-conformance")
    try:
        yield executor
    finally:
        executor.shutdown(wait=True)


@pytest.fixture
def later() -> Iterator[Scheduler]:
    """Calls made half the default timeout later, as upstream's scheduled executor does."""
    scheduler = Scheduler(TIMEOUT_MILLIS // 2)
    try:
        yield scheduler
    finally:
        scheduler.close()


SPEC203_ON_COMPLETE = "test_required_spec203_must_not_call_methods_on_subscription_or_publisher_in_on_complete"
SPEC203_ON_ERROR = "test_required_spec203_must_not_call_methods_on_subscription_or_publisher_in_on_error"
SPEC308 = "test_required_spec308_request_must_register_given_number_elements_to_be_produced"


def test_required_spec201_must_signal_demand_via_subscription_request_should_fail_by_not_getting_request_call(
    pool: DaemonThreadPool,
) -> None:
    require_failure(
        run(
            whitebox_verification(broken.DeafPuppetSubscriber, pool),
            "test_required_spec201_must_signal_demand_via_subscription_request",
        ),
        f"Did not receive expected `request` call within {TIMEOUT_MILLIS} ms",
    )


def test_required_spec201_must_signal_demand_via_subscription_request_should_pass(pool: DaemonThreadPool) -> None:
    require_pass(
        run(
            whitebox_verification(broken.ProbedSubscriber, pool),
            "test_required_spec201_must_signal_demand_via_subscription_request",
        )
    )


def _terminal_call(pool: DaemonThreadPool, call: str, signal: str) -> None:
    require_failure(
        run(
            whitebox_verification(lambda probe: broken.TerminalCallProbedSubscriber(probe, call, signal), pool),
            SPEC203_ON_COMPLETE if signal == "on_complete" else SPEC203_ON_ERROR,
        ),
        f"Subscription::{call} MUST NOT be called from Subscriber::{signal} (Rule 2.3)!",
    )


def test_required_spec203_must_not_call_methods_on_subscription_or_publisher_in_on_complete_should_fail_due_to_calling_request(
    pool: DaemonThreadPool,
) -> None:
    _terminal_call(pool, "request", "on_complete")


def test_required_spec203_must_not_call_methods_on_subscription_or_publisher_in_on_complete_should_fail_due_to_calling_cancel(
    pool: DaemonThreadPool,
) -> None:
    _terminal_call(pool, "cancel", "on_complete")


def test_required_spec203_must_not_call_methods_on_subscription_or_publisher_in_on_error_should_fail_due_to_calling_request(
    pool: DaemonThreadPool,
) -> None:
    _terminal_call(pool, "request", "on_error")


def test_required_spec203_must_not_call_methods_on_subscription_or_publisher_in_on_error_should_fail_due_to_calling_cancel(
    pool: DaemonThreadPool,
) -> None:
    _terminal_call(pool, "cancel", "on_error")


def _unrelated_call(pool: DaemonThreadPool, call: str, signal: str) -> None:
    require_pass(
        run(
            whitebox_verification(
                lambda probe: broken.UnrelatedTerminalCallProbedSubscriber(probe, call, signal), pool
            ),
            SPEC203_ON_COMPLETE if signal == "on_complete" else SPEC203_ON_ERROR,
        )
    )


def test_required_spec203_must_not_call_methods_on_subscription_or_publisher_in_on_complete_should_pass_unrelated_cancel_from_on_complete(
    pool: DaemonThreadPool,
) -> None:
    _unrelated_call(pool, "cancel", "on_complete")


def test_required_spec203_must_not_call_methods_on_subscription_or_publisher_in_on_complete_should_pass_unrelated_request_from_on_complete(
    pool: DaemonThreadPool,
) -> None:
    _unrelated_call(pool, "request", "on_complete")


def test_required_spec203_must_not_call_methods_on_subscription_or_publisher_in_on_complete_should_pass_unrelated_cancel_from_on_error(
    pool: DaemonThreadPool,
) -> None:
    _unrelated_call(pool, "cancel", "on_error")


def test_required_spec203_must_not_call_methods_on_subscription_or_publisher_in_on_complete_should_pass_unrelated_request_from_on_error(
    pool: DaemonThreadPool,
) -> None:
    _unrelated_call(pool, "request", "on_error")


def test_required_spec205_must_call_subscription_cancel_if_it_already_has_an_subscription_and_receives_another_on_subscribe_signal_should_fail(
    pool: DaemonThreadPool,
) -> None:
    require_failure(
        run(
            whitebox_verification(broken.RequestingEverySubscriptionProbedSubscriber, pool),
            "test_required_spec205_must_call_subscription_cancel_if_it_already_has_an_subscription_and_receives_"
            "another_on_subscribe_signal",
        ),
        "Expected 2nd Subscription given to subscriber to be cancelled",
    )


def test_required_spec208_must_be_prepared_to_receive_on_next_signals_after_having_called_subscription_cancel_should_fail(
    pool: DaemonThreadPool,
) -> None:
    require_failure(
        run(
            whitebox_verification(broken.ThrowingAfterCancelProbedSubscriber, pool),
            "test_required_spec208_must_be_prepared_to_receive_on_next_signals_after_having_called_subscription_cancel",
        ),
        "But I thought it's cancelled!",
    )


def test_required_spec208_must_be_prepared_to_receive_on_next_signals_after_having_called_subscription_cancel_should_wait_for_demand_before_signalling(
    pool: DaemonThreadPool,
    later: Scheduler,
) -> None:
    require_pass(
        run(
            whitebox_verification(lambda probe: broken.DelayedDemandProbedSubscriber(probe, later.schedule), pool),
            "test_required_spec208_must_be_prepared_to_receive_on_next_signals_after_having_called_subscription_cancel",
        )
    )


def test_required_spec209_must_be_prepared_to_receive_an_on_complete_signal_with_preceding_request_call_should_fail(
    pool: DaemonThreadPool,
) -> None:
    require_failure(
        run(
            whitebox_verification(broken.ForgetfulOnCompleteProbedSubscriber, pool),
            "test_required_spec209_must_be_prepared_to_receive_an_on_complete_signal_with_preceding_request_call",
        ),
        f"did not call `register_on_complete()` within {TIMEOUT_MILLIS} ms",
    )


def test_required_spec209_must_be_prepared_to_receive_an_on_complete_signal_without_preceding_request_call_should_pass_with_noop_subscriber(
    pool: DaemonThreadPool,
) -> None:
    # Despite its name, upstream requires a failure: the subscriber never registers with the probe.
    require_failure(
        run(
            whitebox_verification(broken.UnregisteredProbedSubscriber, pool),
            "test_required_spec209_must_be_prepared_to_receive_an_on_complete_signal_without_preceding_request_call",
        ),
        f"did not `register_on_subscribe` within {TIMEOUT_MILLIS} ms",
    )


def test_required_spec210_must_be_prepared_to_receive_an_on_error_signal_with_preceding_request_call_should_fail(
    pool: DaemonThreadPool,
) -> None:
    # The error delivered to on_error is the cause of what on_error raised.
    require_failure(
        run(
            whitebox_verification(broken.ThrowingOnErrorProbedSubscriber, pool),
            "test_required_spec210_must_be_prepared_to_receive_an_on_error_signal_with_preceding_request_call",
        ),
        "Test Exception: Boom!",
    )


def test_required_spec210_must_be_prepared_to_receive_an_on_error_signal_without_preceding_request_call_should_fail(
    pool: DaemonThreadPool,
) -> None:
    require_failure(
        run(
            whitebox_verification(broken.ThrowingOnErrorProbedSubscriber, pool),
            "test_required_spec210_must_be_prepared_to_receive_an_on_error_signal_without_preceding_request_call",
        ),
        "Test Exception: Boom!",
    )


def test_required_spec308_request_must_register_given_number_elements_to_be_produced_should_pass(
    pool: DaemonThreadPool,
) -> None:
    require_pass(run(whitebox_verification(broken.ProbedSubscriber, pool), SPEC308))


def test_required_spec308_request_must_register_given_number_elements_to_be_produced_should_wait_for_demand_before_signalling(
    pool: DaemonThreadPool,
    later: Scheduler,
) -> None:
    require_pass(
        run(
            whitebox_verification(lambda probe: broken.DelayedDemandProbedSubscriber(probe, later.schedule), pool),
            SPEC308,
        )
    )


def test_required_spec308_request_must_register_given_number_elements_to_be_produced_should_wait_for_demand_twice_for_one_at_a_time_subscribers(
    pool: DaemonThreadPool,
    later: Scheduler,
) -> None:
    require_pass(
        run(
            whitebox_verification(
                lambda probe: broken.DelayedDemandProbedSubscriber(probe, later.schedule, one_at_a_time=True), pool
            ),
            SPEC308,
        )
    )
