"""SubscriberBlackboxVerification fails or passes as the upstream TCK 1.0.4 self-tests require.

A port of ``SubscriberBlackboxVerificationTest``: each test runs one
verification test on a subscriber from :mod:`tests.tck.broken` (broken in
one place, or correct) and checks that it fails with a message naming the
defect, or passes. As upstream, the verification hands the same subscriber
to every test it runs.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from flowpy.executors import DaemonThreadPool
from tests.tck import broken
from tests.tck.conformance import TIMEOUT_MILLIS, blackbox_verification, require_failure, require_pass, run

SPEC203_ON_COMPLETE = "test_required_spec203_blackbox_must_not_call_methods_on_subscription_or_publisher_in_on_complete"
SPEC203_ON_ERROR = "test_required_spec203_blackbox_must_not_call_methods_on_subscription_or_publisher_in_on_error"
SPEC205 = (
    "test_required_spec205_blackbox_must_call_subscription_cancel_if_it_already_has_an_subscription_and_"
    "receives_another_on_subscribe_signal"
)
SPEC209_WITH = (
    "test_required_spec209_blackbox_must_be_prepared_to_receive_an_on_complete_signal_with_preceding_request_call"
)
SPEC210_WITH = (
    "test_required_spec210_blackbox_must_be_prepared_to_receive_an_on_error_signal_with_preceding_request_call"
)
NO_REQUEST = f"Did not receive expected `request` call within {TIMEOUT_MILLIS} ms"


@pytest.fixture(scope="module")
def pool() -> Iterator[DaemonThreadPool]:
    """The helper publisher's executor, shared by every test of the module (as upstream's ``ex``)."""
    executor = DaemonThreadPool(4, thread_name_prefix="blackbox-conformance")
    try:
        yield executor
    finally:
        executor.shutdown(wait=True)


def test_required_spec201_blackbox_must_signal_demand_via_subscription_request_should_fail_by_not_getting_request_call(
    pool: DaemonThreadPool,
) -> None:
    require_failure(
        run(
            blackbox_verification(broken.NoopSubscriber(), pool),
            "test_required_spec201_blackbox_must_signal_demand_via_subscription_request",
        ),
        NO_REQUEST,
    )


def test_required_spec201_blackbox_must_signal_demand_via_subscription_request_should_pass(
    pool: DaemonThreadPool,
) -> None:
    require_pass(
        run(
            blackbox_verification(broken.RequestingSubscriber(more=True), pool),
            "test_required_spec201_blackbox_must_signal_demand_via_subscription_request",
        )
    )


def _terminal_call(pool: DaemonThreadPool, call: str, signal: str) -> None:
    require_failure(
        run(
            blackbox_verification(broken.TerminalCallSubscriber(call, signal), pool),
            SPEC203_ON_COMPLETE if signal == "on_complete" else SPEC203_ON_ERROR,
        ),
        f"Subscription::{call} MUST NOT be called from Subscriber::{signal} (Rule 2.3)!",
    )


def test_required_spec203_blackbox_must_not_call_methods_on_subscription_or_publisher_in_on_complete_should_fail_due_to_calling_request(
    pool: DaemonThreadPool,
) -> None:
    _terminal_call(pool, "request", "on_complete")


def test_required_spec203_blackbox_must_not_call_methods_on_subscription_or_publisher_in_on_complete_should_fail_due_to_calling_cancel(
    pool: DaemonThreadPool,
) -> None:
    _terminal_call(pool, "cancel", "on_complete")


def test_required_spec203_blackbox_must_not_call_methods_on_subscription_or_publisher_in_on_error_should_fail_due_to_calling_request(
    pool: DaemonThreadPool,
) -> None:
    _terminal_call(pool, "request", "on_error")


def test_required_spec203_blackbox_must_not_call_methods_on_subscription_or_publisher_in_on_error_should_fail_due_to_calling_cancel(
    pool: DaemonThreadPool,
) -> None:
    _terminal_call(pool, "cancel", "on_error")


def _unrelated_call(pool: DaemonThreadPool, call: str, signal: str) -> None:
    require_pass(
        run(
            blackbox_verification(broken.UnrelatedTerminalCallSubscriber(call, signal), pool),
            SPEC203_ON_COMPLETE if signal == "on_complete" else SPEC203_ON_ERROR,
        )
    )


def test_required_spec203_blackbox_must_not_call_methods_on_subscription_or_publisher_in_on_complete_should_pass_unrelated_cancel_from_on_complete(
    pool: DaemonThreadPool,
) -> None:
    _unrelated_call(pool, "cancel", "on_complete")


def test_required_spec203_blackbox_must_not_call_methods_on_subscription_or_publisher_in_on_complete_should_pass_unrelated_request_from_on_complete(
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


def test_required_spec205_blackbox_must_call_subscription_cancel_if_it_already_has_an_subscription_and_receives_another_on_subscribe_signal_should_fail(
    pool: DaemonThreadPool,
) -> None:
    # The illegal request on the second subscription is recorded first, then the missing cancel.
    require_failure(
        run(blackbox_verification(broken.RequestingEverySubscriptionSubscriber(), pool), SPEC205),
        "Subscriber illegally called `subscription.request(1)` on a second subscription (rule 2.5)",
    )


def test_required_spec205_blackbox_must_call_subscription_cancel_if_it_already_has_an_subscription_and_receives_another_on_subscribe_signal_should_get_completion(
    pool: DaemonThreadPool,
) -> None:
    subscriber = broken.CancellingEverySubscriptionSubscriber()
    require_pass(run(blackbox_verification(subscriber, pool), SPEC205))
    assert subscriber.completed.is_set()  # the TCK's on_complete reached it


def test_required_spec209_blackbox_must_be_prepared_to_receive_an_on_complete_signal_with_preceding_request_call_should_fail(
    pool: DaemonThreadPool,
) -> None:
    require_failure(run(blackbox_verification(broken.NoopSubscriber(), pool), SPEC209_WITH), NO_REQUEST)


def test_required_spec209_blackbox_must_be_prepared_to_receive_an_on_complete_signal_without_preceding_request_call_should_pass_with_noop_subscriber(
    pool: DaemonThreadPool,
) -> None:
    require_pass(
        run(
            blackbox_verification(broken.NoopSubscriber(), pool),
            "test_required_spec209_blackbox_must_be_prepared_to_receive_an_on_complete_signal_without_preceding_request_"
            "call",
        )
    )


# Upstream's three spec210 self-tests below run the spec209 verification test
# (a copy-paste slip); these run the spec210 one their names refer to.


def test_required_spec210_blackbox_must_be_prepared_to_receive_an_on_error_signal_with_preceding_request_call_should_pass_with_requesting_subscriber(
    pool: DaemonThreadPool,
) -> None:
    require_pass(run(blackbox_verification(broken.RequestingSubscriber(), pool), SPEC210_WITH))


def test_required_spec210_blackbox_must_be_prepared_to_receive_an_on_error_signal_with_preceding_request_call_should_fail_with_noop_subscriber(
    pool: DaemonThreadPool,
) -> None:
    require_failure(run(blackbox_verification(broken.NoopSubscriber(), pool), SPEC210_WITH), NO_REQUEST)


def test_required_spec210_blackbox_must_be_prepared_to_receive_an_on_error_signal_with_preceding_request_call_should_fail_with_throwing_inside_on_error(
    pool: DaemonThreadPool,
) -> None:
    # The error delivered to on_error is the cause of what on_error raised.
    require_failure(
        run(blackbox_verification(broken.ThrowingOnErrorSubscriber(), pool), SPEC210_WITH), "Test Exception: Boom!"
    )


def _ignored_none(pool: DaemonThreadPool, signal: str) -> None:
    require_failure(
        run(
            blackbox_verification(broken.NoopSubscriber(), pool),
            f"test_required_spec213_blackbox_{signal}_must_throw_null_pointer_exception_when_parameters_are_null",
        ),
        f"{signal}(None) did not raise TypeError (rule 2.13)",
    )


def test_required_spec213_blackbox_must_throw_null_pointer_exception_when_parameters_are_null_must_fail_on_ignored_null_on_subscribe(
    pool: DaemonThreadPool,
) -> None:
    _ignored_none(pool, "on_subscribe")


def test_required_spec213_blackbox_must_throw_null_pointer_exception_when_parameters_are_null_must_fail_on_ignored_null_on_next(
    pool: DaemonThreadPool,
) -> None:
    _ignored_none(pool, "on_next")


def test_required_spec213_blackbox_must_throw_null_pointer_exception_when_parameters_are_null_must_fail_on_ignored_null_on_error(
    pool: DaemonThreadPool,
) -> None:
    _ignored_none(pool, "on_error")
