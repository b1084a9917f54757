"""The TCK fails broken implementations on the rule they break (the Java TCK's self-tests).

Each case runs one test of a verification against an implementation with one
defect and checks that the test fails, with a message naming the defect, or
skips where the Java TCK skips.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from flowpy import flow
from flowpy.tck import NOT_VERIFIED, TestEnvironment
from flowpy.tck._base import OPTIONAL_SKIP, Verification
from flowpy.tck.runner import Outcome, Status, run_test, verification_for
from tests.tck import broken
from tests.tck.reference import IdentityProcessor, MulticastProcessor, RangePublisher, WhiteboxSyncSubscriber


def _env() -> TestEnvironment:
    return TestEnvironment(200, 20, 10)


def publisher(cls: Callable[[int, int], flow.Publisher[int]], **options: Any) -> type[Verification]:
    return verification_for("publisher", lambda n: cls(0, n), env=_env, **options)


def whitebox(cls: type[Any]) -> type[Verification]:
    instrumented = type(f"Whitebox{cls.__name__}", (WhiteboxSyncSubscriber, cls), {})
    return verification_for("subscriber-whitebox", instrumented, env=_env)


def blackbox(cls: type[Any]) -> type[Verification]:
    return verification_for("subscriber-blackbox", cls, env=_env)


def processor(cls: type[Any], max_subscribers: int = 1) -> type[Verification]:
    return verification_for("processor", lambda buffer_size: cls(), env=_env, max_subscribers=max_subscribers)


def outcome_of(verification: type[Verification], test: str) -> Outcome:
    try:
        return run_test(verification, test)
    finally:
        teardown = getattr(verification, "teardown_class", None)
        if teardown is not None:
            teardown()  # shuts the helper publisher's pool down


def require_failure(verification: type[Verification], test: str, message_part: str) -> Outcome:
    outcome = outcome_of(verification, test)
    assert outcome.status is Status.FAILED, outcome
    assert message_part in outcome.message, outcome
    return outcome


def require_skip(verification: type[Verification], test: str, message_part: str) -> Outcome:
    outcome = outcome_of(verification, test)
    assert outcome.status is Status.SKIPPED, outcome
    assert message_part in outcome.message, outcome
    return outcome


def require_pass(verification: type[Verification], test: str) -> None:
    outcome = outcome_of(verification, test)
    assert outcome.status is Status.PASSED, outcome


# --- PublisherVerification ------------------------------------------------------------


@pytest.mark.parametrize(
    ("broken_publisher", "test", "message_part"),
    [
        (broken.OverDeliveringPublisher,
         "test_required_spec101_subscription_request_must_result_in_the_correct_number_of_produced_elements",
         "Publisher signalled more than requested (rule 1.1): expected no signal but got element 1"),
        (broken.NeverCompletingPublisher,
         "test_required_spec102_may_signal_less_than_requested_and_terminate_subscription",
         "Did not receive expected stream completion within 200 ms"),
        (broken.NeverCompletingPublisher,
         "test_required_create_publisher1_must_produce_a_stream_of_exactly1_element",
         "Did not receive expected stream completion within 200 ms"),
        (broken.SilentPublisher,
         "test_required_spec109_must_issue_on_subscribe_for_non_null_subscriber",
         "Should have received on_subscribe within 200 ms"),
        (broken.SilentPublisher,
         "test_required_spec101_subscription_request_must_result_in_the_correct_number_of_produced_elements",
         "Could not subscribe"),
        (broken.NoneAcceptingPublisher,
         "test_required_spec109_subscribe_throw_npe_on_null_subscriber",
         "Publisher did not raise a TypeError when given a None Subscriber in subscribe (rule 1.9)"),
        (broken.WrongNoneErrorPublisher,
         "test_required_spec109_subscribe_throw_npe_on_null_subscriber",
         "Publisher raised ValueError('no subscriber') instead of TypeError"),
        (broken.RecursivePublisher,
         "test_required_spec303_must_not_allow_unbounded_recursion",
         "Got 2 on_next calls within thread"),
        (broken.CancelIgnoringPublisher,
         "test_required_spec306_after_subscription_is_cancelled_request_must_be_nops",
         "Publisher signalled after the subscription was cancelled (rule 3.6)"),
        (broken.SilentRequestZeroPublisher,
         "test_required_spec309_request_zero_must_signal_illegal_argument_exception",
         "Expected on_error(ValueError) within 200 ms"),
        (broken.SilentRequestZeroPublisher,
         "test_required_spec309_request_negative_number_must_signal_illegal_argument_exception",
         "Expected on_error(ValueError) within 200 ms"),
        (broken.FloodOnCancelPublisher,
         "test_required_spec312_cancel_must_make_the_publisher_to_eventually_stop_signaling",
         "which is more than the signalled demand: 15 (rule 3.12)"),
        (broken.ReferenceKeepingPublisher,
         "test_required_spec313_cancel_must_make_the_publisher_eventually_drop_all_references_to_the_subscriber",
         "did not drop reference to test subscriber after subscription cancellation (rule 3.13)"),
    ],
    ids=lambda value: value.__name__ if isinstance(value, type) else str(value)[:40],
)
def test_publisher_verification_broken_publisher_fails(
    broken_publisher: Callable[[int, int], flow.Publisher[int]], test: str, message_part: str
) -> None:
    require_failure(publisher(broken_publisher), test, message_part)


@pytest.mark.timeout(30)
@pytest.mark.usefixtures("tiny_switch_interval")
def test_publisher_verification_concurrent_signals_fail_rule_1_3() -> None:
    verification = verification_for("publisher", broken.ConcurrentPublisher, env=_env)
    require_failure(verification, "test_stochastic_spec103_must_signal_on_methods_sequentially",
                    "Illegal concurrent access detected")


def test_publisher_verification_stochastic_switched_off_skips() -> None:
    verification = type("NoStochastic", (verification_for("publisher", broken.ConcurrentPublisher, env=_env),),
                        {"skip_stochastic_tests": lambda self: True})
    require_skip(verification, "test_stochastic_spec103_must_signal_on_methods_sequentially",
                 "Skipping @Stochastic test because `skip_stochastic_tests()` returned `True`!")


def test_publisher_verification_failed_publisher_raising_from_subscribe_fails() -> None:
    verification = publisher(RangePublisher, failed=broken.RaisingFailedPublisher)
    require_failure(verification, "test_optional_spec104_must_signal_on_error_when_fails",
                    "Publisher raised RuntimeError('cannot serve you') instead of signalling the error via "
                    "on_error (rule 1.4)")
    require_failure(
        verification,
        "test_required_spec109_may_reject_calls_to_subscribe_if_publisher_is_unable_or_unwilling_to_serve_them_"
        "rejection_must_trigger_on_error_after_on_subscribe",
        "RuntimeError: cannot serve you",
    )


def test_publisher_verification_failed_publisher_completing_fails() -> None:
    verification = publisher(RangePublisher, failed=broken.CompletingFailedPublisher)
    require_failure(verification, "test_optional_spec104_must_signal_on_error_when_fails",
                    "Unexpected Subscriber::on_complete()")


def test_publisher_verification_vague_rule_3_9_message_skips_optional_test_only() -> None:
    verification = publisher(broken.VagueErrorMessagePublisher)
    require_skip(
        verification,
        "test_optional_spec309_request_negative_number_may_signal_illegal_argument_exception_with_specific_message",
        f"{OPTIONAL_SKIP}: Got expected exception ValueError but missing message part",
    )
    require_pass(verification, "test_required_spec309_request_negative_number_must_signal_illegal_argument_exception")


def test_publisher_verification_untested_rule_skips() -> None:
    require_skip(publisher(RangePublisher), "test_untested_spec110_reject_a_subscription_request_if_the_same_"
                 "subscriber_subscribes_twice", NOT_VERIFIED)


def test_publisher_verification_too_few_elements_skips() -> None:
    verification = publisher(RangePublisher, max_elements=10)
    require_skip(verification, "test_required_spec317_must_not_signal_on_error_when_pending_above_long_max_value",
                 "Unable to run this test, as required elements nr: 2147483647 is higher than supported by "
                 "given producer: 10")


def test_publisher_verification_without_failed_publisher_skips() -> None:
    require_skip(publisher(RangePublisher), "test_optional_spec104_must_signal_on_error_when_fails",
                 "no error state Publisher provided")


def test_publisher_verification_invalid_recursion_bound_fails() -> None:
    verification = type("Unbounded", (publisher(RangePublisher),),
                        {"bounded_depth_of_on_next_and_request_recursion": lambda self: 0})
    require_failure(verification, "test_required_validate_bounded_depth_of_on_next_and_request_recursion",
                    "bounded_depth_of_on_next_and_request_recursion must be >= 1, got 0")


# --- Subscriber verifications ------------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "subscriber", "test", "message_part"),
    [
        (whitebox, broken.RequestInOnCompleteSubscriber,
         "test_required_spec203_must_not_call_methods_on_subscription_or_publisher_in_on_complete",
         "Subscription::request MUST NOT be called from Subscriber::on_complete (Rule 2.3)!"),
        (blackbox, broken.RequestInOnCompleteSubscriber,
         "test_required_spec203_blackbox_must_not_call_methods_on_subscription_or_publisher_in_on_complete",
         "Subscription::request MUST NOT be called from Subscriber::on_complete (Rule 2.3)!"),
        (blackbox, broken.CancelInOnErrorSubscriber,
         "test_required_spec203_blackbox_must_not_call_methods_on_subscription_or_publisher_in_on_error",
         "Subscription::cancel MUST NOT be called from Subscriber::on_error (Rule 2.3)!"),
        (whitebox, broken.KeepsSecondSubscriptionSubscriber,
         "test_required_spec205_must_call_subscription_cancel_if_it_already_has_an_subscription_and_receives_"
         "another_on_subscribe_signal",
         "Expected 2nd Subscription given to subscriber to be cancelled"),
        (blackbox, broken.KeepsSecondSubscriptionSubscriber,
         "test_required_spec205_blackbox_must_call_subscription_cancel_if_it_already_has_an_subscription_and_"
         "receives_another_on_subscribe_signal",
         "Subscriber illegally called `subscription.request(1)` on a second subscription (rule 2.5)"),
        (whitebox, broken.NoneAcceptingSubscriber,
         "test_required_spec213_on_next_must_throw_null_pointer_exception_when_parameters_are_null",
         "on_next(None) did not raise TypeError (rule 2.13)"),
        (blackbox, broken.NoneAcceptingSubscriber,
         "test_required_spec213_blackbox_on_next_must_throw_null_pointer_exception_when_parameters_are_null",
         "on_next(None) did not raise TypeError (rule 2.13)"),
        (blackbox, broken.NeverRequestingSubscriber,
         "test_required_spec201_blackbox_must_signal_demand_via_subscription_request",
         "Did not receive expected `request` call within 200 ms"),
    ],
    ids=lambda value: value.__name__ if isinstance(value, type) or callable(value) else str(value)[:40],
)
def test_subscriber_verification_broken_subscriber_fails(
    make: Callable[[type[Any]], type[Verification]], subscriber: type[Any], test: str, message_part: str
) -> None:
    require_failure(make(subscriber), test, message_part)


def test_whitebox_verification_untested_rule_skips() -> None:
    require_skip(whitebox(broken.NoneAcceptingSubscriber), "test_untested_spec202_should_asynchronously_dispatch",
                 NOT_VERIFIED)


def test_whitebox_verification_subscriber_without_probe_fails() -> None:
    verification = verification_for("subscriber-whitebox", lambda probe: broken.SyncSubscriber(), env=_env)
    require_failure(verification, "test_required_spec201_must_signal_demand_via_subscription_request",
                    "did not `register_on_subscribe` within 200 ms")


# --- IdentityProcessorVerification ---------------------------------------------------------


def test_processor_verification_error_swallowing_processor_fails() -> None:
    require_failure(processor(broken.ErrorSwallowingProcessor),
                    "test_must_immediately_pass_on_on_error_events_received_from_its_upstream_to_its_downstream",
                    "Subscriber did not receive the expected on_error(RuntimeError('Test exception')) within")


def test_processor_verification_reference_processor_passes_own_error_test() -> None:
    require_pass(processor(IdentityProcessor),
                 "test_must_immediately_pass_on_on_error_events_received_from_its_upstream_to_its_downstream")


def test_processor_verification_single_subscriber_skips_multi_subscriber_tests() -> None:
    require_skip(processor(IdentityProcessor),
                 "test_required_must_request_from_upstream_for_elements_that_have_been_requested_long_ago",
                 "requires 2 subscribers and max_supported_subscribers() is 1")


def test_processor_verification_delegated_publisher_test_fails_for_broken_processor() -> None:
    require_failure(processor(broken.ErrorSwallowingProcessor),
                    "test_required_spec309_request_zero_must_signal_illegal_argument_exception",
                    "Expected on_error(ValueError) within 200 ms")


def test_processor_verification_delegated_subscriber_test_fails_for_broken_processor() -> None:
    class NoneAcceptingProcessor(IdentityProcessor[int]):
        def on_next(self, item: int) -> None:
            if item is not None:
                super().on_next(item)

    require_failure(processor(NoneAcceptingProcessor),
                    "test_required_spec213_on_next_must_throw_null_pointer_exception_when_parameters_are_null",
                    "on_next(None) did not raise TypeError (rule 2.13)")



def test_processor_verification_error_to_one_subscriber_fails_rule_1_4() -> None:
    require_failure(
        processor(broken.ErrorToFirstOnlyProcessor, max_subscribers=2),
        "test_required_spec104_must_call_on_error_on_all_its_subscribers_if_it_encounters_a_non_recoverable_error",
        "Subscriber did not receive the expected on_error(RuntimeError('Test exception')) within 200 ms",
    )


def test_processor_verification_multicast_reference_passes_multi_subscriber_tests() -> None:
    verification = processor(MulticastProcessor, max_subscribers=2)
    require_pass(verification, "test_required_spec104_must_call_on_error_on_all_its_subscribers_if_it_encounters_"
                 "a_non_recoverable_error")
    require_pass(verification, "test_required_must_request_from_upstream_for_elements_that_have_been_requested_"
                 "long_ago")
