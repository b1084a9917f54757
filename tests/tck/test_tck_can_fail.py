"""The TCK fails broken implementations on the rule they break: cases beyond the upstream self-tests.

The upstream TCK's own self-tests are ported in the ``*_conformance``
modules; these cases add defects they do not cover, and run the tests
through :func:`~flowpy.tck.runner.run_test` on verification classes made by
:func:`~flowpy.tck.runner.verification_for`, as ``python -m flowpy.tck``
does. The broken implementations are in :mod:`tests.tck.broken`; the checks
in :mod:`tests.tck.conformance`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from flowpy import flow
from flowpy.tck import NOT_VERIFIED, SKIPPING_OPTIONAL_TEST_FAILED, SKIPPING_STOCHASTIC_TEST, TestEnvironment
from flowpy.tck._base import Verification
from flowpy.tck.runner import Outcome, run_test, verification_for
from tests.tck import broken
from tests.tck.conformance import require_failure, require_pass, require_skip
from tests.tck.reference import (
    IdentityProcessor,
    MulticastProcessor,
    RangePublisher,
    SyncSubscriber,
    WhiteboxSyncSubscriber,
)


def _env() -> TestEnvironment:
    return TestEnvironment(200, 20, 10)


def publisher(make: Callable[[int], flow.Publisher[int]], **options: Any) -> type[Verification]:
    return verification_for("publisher", make, env=_env, **options)


def ranges(cls: Callable[[int, int], flow.Publisher[int]]) -> Callable[[int], flow.Publisher[int]]:
    return lambda elements: cls(0, elements)


def whitebox(cls: type[Any]) -> type[Verification]:
    instrumented = type(f"Whitebox{cls.__name__}", (WhiteboxSyncSubscriber, cls), {})
    return verification_for("subscriber-whitebox", instrumented, env=_env)


def processor(cls: type[Any], max_subscribers: int = 1) -> type[Verification]:
    return verification_for("processor", lambda buffer_size: cls(), env=_env, max_subscribers=max_subscribers)


def outcome_of(verification: type[Verification], test: str) -> Outcome:
    try:
        return run_test(verification, test)
    finally:
        teardown = getattr(verification, "teardown_class", None)
        if teardown is not None:
            teardown()  # shuts the helper publisher's pool down


# --- PublisherVerification ------------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "test", "message_part"),
    [
        (
            ranges(broken.OverDeliveringPublisher),
            "test_required_spec101_subscription_request_must_result_in_the_correct_number_of_produced_elements",
            "Publisher signalled more than requested (rule 1.1): expected no signal but got element 1",
        ),
        (
            lambda elements: broken.never_completing_publisher(),
            "test_required_create_publisher1_must_produce_a_stream_of_exactly1_element",
            "Expected end-of-stream but got element 1: Did not receive expected stream completion",
        ),
        (
            lambda elements: broken.doing_nothing_publisher(),
            "test_required_spec109_must_issue_on_subscribe_for_non_null_subscriber",
            "Should have received on_subscribe within 200 ms",
        ),
        (
            lambda elements: broken.doing_nothing_publisher(),
            "test_required_spec101_subscription_request_must_result_in_the_correct_number_of_produced_elements",
            "Could not subscribe",
        ),
        (
            ranges(broken.WrongNoneErrorPublisher),
            "test_required_spec109_subscribe_throw_npe_on_null_subscriber",
            "Publisher raised ValueError('no subscriber') instead of TypeError",
        ),
        (
            ranges(broken.FloodOnCancelPublisher),
            "test_required_spec312_cancel_must_make_the_publisher_to_eventually_stop_signaling",
            "which is more than the signalled demand: 15 (rule 3.12)",
        ),
    ],
    ids=[
        "over_delivering",
        "never_completing",
        "no_on_subscribe",
        "cannot_subscribe",
        "wrong_none_error",
        "flood_on_cancel",
    ],
)
def test_publisher_verification_broken_publisher_fails(
    make: Callable[[int], flow.Publisher[int]], test: str, message_part: str
) -> None:
    require_failure(outcome_of(publisher(make), test), message_part)


def test_publisher_verification_stochastic_switched_off_skips() -> None:
    verification = type(
        "NoStochastic", (publisher(ranges(RangePublisher)),), {"skip_stochastic_tests": lambda self: True}
    )
    require_skip(
        outcome_of(verification, "test_stochastic_spec103_must_signal_on_methods_sequentially"),
        SKIPPING_STOCHASTIC_TEST,
    )


def test_publisher_verification_failed_publisher_raising_from_subscribe_fails_rule_1_9() -> None:
    verification = publisher(ranges(RangePublisher), failed=broken.throwing_failed_publisher)
    require_failure(
        outcome_of(
            verification,
            "test_required_spec109_may_reject_calls_to_subscribe_if_publisher_is_unable_or_unwilling_to_serve_"
            "them_rejection_must_trigger_on_error_after_on_subscribe",
        ),
        "RuntimeError: It is not valid to throw here!",
    )


def test_publisher_verification_failed_publisher_completing_fails() -> None:
    verification = publisher(ranges(RangePublisher), failed=broken.CompletingFailedPublisher)
    require_failure(
        outcome_of(verification, "test_optional_spec104_must_signal_on_error_when_fails"),
        "Unexpected Subscriber::on_complete()",
    )


def test_publisher_verification_vague_rule_3_9_message_skips_optional_test_only() -> None:
    verification = publisher(ranges(broken.VagueErrorMessagePublisher))
    require_skip(
        outcome_of(
            verification,
            "test_optional_spec309_request_negative_number_may_signal_illegal_argument_exception_with_specific_message",
        ),
        f"{SKIPPING_OPTIONAL_TEST_FAILED}: Got expected exception ValueError but missing message part",
    )
    require_pass(
        outcome_of(verification, "test_required_spec309_request_negative_number_must_signal_illegal_argument_exception")
    )


def test_publisher_verification_too_few_elements_skips() -> None:
    verification = publisher(ranges(RangePublisher), max_elements=10)
    require_skip(
        outcome_of(verification, "test_required_spec317_must_not_signal_on_error_when_pending_above_long_max_value"),
        "Unable to run this test, as required elements nr: 2147483647 is higher than supported by given producer: 10",
    )


def test_publisher_verification_invalid_recursion_bound_fails() -> None:
    verification = type(
        "Unbounded",
        (publisher(ranges(RangePublisher)),),
        {"bounded_depth_of_on_next_and_request_recursion": lambda self: 0},
    )
    require_failure(
        outcome_of(verification, "test_required_validate_bounded_depth_of_on_next_and_request_recursion"),
        "bounded_depth_of_on_next_and_request_recursion must be >= 1, got 0",
    )


# --- Subscriber verifications ------------------------------------------------------------


def test_whitebox_verification_none_accepting_subscriber_fails_rule_2_13() -> None:
    require_failure(
        outcome_of(
            whitebox(broken.NoneAcceptingSubscriber),
            "test_required_spec213_on_next_must_throw_null_pointer_exception_when_parameters_are_null",
        ),
        "on_next(None) did not raise TypeError (rule 2.13)",
    )


def test_whitebox_verification_untested_rule_skips() -> None:
    require_skip(
        outcome_of(whitebox(broken.NoneAcceptingSubscriber), "test_untested_spec202_should_asynchronously_dispatch"),
        NOT_VERIFIED,
    )


def test_whitebox_verification_subscriber_without_probe_fails() -> None:
    verification = verification_for("subscriber-whitebox", lambda probe: SyncSubscriber(), env=_env)
    require_failure(
        outcome_of(verification, "test_required_spec201_must_signal_demand_via_subscription_request"),
        "did not `register_on_subscribe` within 200 ms",
    )


# --- IdentityProcessorVerification ---------------------------------------------------------


def test_processor_verification_error_swallowing_processor_fails() -> None:
    require_failure(
        outcome_of(
            processor(broken.ErrorSwallowingProcessor),
            "test_must_immediately_pass_on_on_error_events_received_from_its_upstream_to_its_downstream",
        ),
        "Subscriber did not receive the expected on_error(RuntimeError('Test exception')) within",
    )


def test_processor_verification_reference_processor_passes_own_error_test() -> None:
    require_pass(
        outcome_of(
            processor(IdentityProcessor),
            "test_must_immediately_pass_on_on_error_events_received_from_its_upstream_to_its_downstream",
        )
    )


def test_processor_verification_single_subscriber_skips_multi_subscriber_tests() -> None:
    require_skip(
        outcome_of(
            processor(IdentityProcessor),
            "test_required_must_request_from_upstream_for_elements_that_have_been_requested_long_ago",
        ),
        "requires 2 subscribers and max_supported_subscribers() is 1",
    )


def test_processor_verification_delegated_publisher_test_fails_for_broken_processor() -> None:
    require_failure(
        outcome_of(
            processor(broken.ErrorSwallowingProcessor),
            "test_required_spec309_request_zero_must_signal_illegal_argument_exception",
        ),
        "Expected on_error(ValueError) within 200 ms",
    )


def test_processor_verification_delegated_subscriber_test_fails_for_broken_processor() -> None:
    class NoneAcceptingProcessor(IdentityProcessor[int]):
        def on_next(self, item: int) -> None:
            if item is not None:
                super().on_next(item)

    require_failure(
        outcome_of(
            processor(NoneAcceptingProcessor),
            "test_required_spec213_on_next_must_throw_null_pointer_exception_when_parameters_are_null",
        ),
        "on_next(None) did not raise TypeError (rule 2.13)",
    )


def test_processor_verification_error_to_one_subscriber_fails_rule_1_4() -> None:
    require_failure(
        outcome_of(
            processor(broken.ErrorToFirstOnlyProcessor, max_subscribers=2),
            "test_required_spec104_must_call_on_error_on_all_its_subscribers_if_it_encounters_a_non_recoverable_error",
        ),
        "Subscriber did not receive the expected on_error(RuntimeError('Test exception')) within 200 ms",
    )


def test_processor_verification_multicast_reference_passes_multi_subscriber_tests() -> None:
    verification = processor(MulticastProcessor, max_subscribers=2)
    require_pass(
        outcome_of(
            verification,
            "test_required_spec104_must_call_on_error_on_all_its_subscribers_if_it_encounters_a_non_recoverable_error",
        )
    )
    require_pass(
        outcome_of(
            verification, "test_required_must_request_from_upstream_for_elements_that_have_been_requested_long_ago"
        )
    )
