"""The verifications have the Java TCK's tests, under the Java names in snake_case."""

from __future__ import annotations

import re

import pytest

from flowpy.tck import (
    IdentityProcessorVerification,
    PublisherVerification,
    SubscriberBlackboxVerification,
    SubscriberWhiteboxVerification,
)
from flowpy.tck._base import rule_of, verification_tests

JAVA_PUBLISHER_TESTS = [
    "required_createPublisher1MustProduceAStreamOfExactly1Element",
    "required_createPublisher3MustProduceAStreamOfExactly3Elements",
    "required_validate_maxElementsFromPublisher",
    "required_validate_boundedDepthOfOnNextAndRequestRecursion",
    "required_spec101_subscriptionRequestMustResultInTheCorrectNumberOfProducedElements",
    "required_spec102_maySignalLessThanRequestedAndTerminateSubscription",
    "stochastic_spec103_mustSignalOnMethodsSequentially",
    "optional_spec104_mustSignalOnErrorWhenFails",
    "required_spec105_mustSignalOnCompleteWhenFiniteStreamTerminates",
    "optional_spec105_emptyStreamMustTerminateBySignallingOnComplete",
    "untested_spec106_mustConsiderSubscriptionCancelledAfterOnErrorOrOnCompleteHasBeenCalled",
    "required_spec107_mustNotEmitFurtherSignalsOnceOnCompleteHasBeenSignalled",
    "untested_spec107_mustNotEmitFurtherSignalsOnceOnErrorHasBeenSignalled",
    "untested_spec108_possiblyCanceledSubscriptionShouldNotReceiveOnErrorOrOnCompleteSignals",
    "untested_spec109_subscribeShouldNotThrowNonFatalThrowable",
    "required_spec109_subscribeThrowNPEOnNullSubscriber",
    "required_spec109_mustIssueOnSubscribeForNonNullSubscriber",
    "required_spec109_mayRejectCallsToSubscribeIfPublisherIsUnableOrUnwillingToServeThemRejectionMustTriggerOnErrorAfterOnSubscribe",
    "untested_spec110_rejectASubscriptionRequestIfTheSameSubscriberSubscribesTwice",
    "optional_spec111_maySupportMultiSubscribe",
    "optional_spec111_registeredSubscribersMustReceiveOnNextOrOnCompleteSignals",
    "optional_spec111_multicast_mustProduceTheSameElementsInTheSameSequenceToAllOfItsSubscribersWhenRequestingOneByOne",
    "optional_spec111_multicast_mustProduceTheSameElementsInTheSameSequenceToAllOfItsSubscribersWhenRequestingManyUpfront",
    "optional_spec111_multicast_mustProduceTheSameElementsInTheSameSequenceToAllOfItsSubscribersWhenRequestingManyUpfrontAndCompleteAsExpected",
    "required_spec302_mustAllowSynchronousRequestCallsFromOnNextAndOnSubscribe",
    "required_spec303_mustNotAllowUnboundedRecursion",
    "untested_spec304_requestShouldNotPerformHeavyComputations",
    "untested_spec305_cancelMustNotSynchronouslyPerformHeavyComputation",
    "required_spec306_afterSubscriptionIsCancelledRequestMustBeNops",
    "required_spec307_afterSubscriptionIsCancelledAdditionalCancelationsMustBeNops",
    "required_spec309_requestZeroMustSignalIllegalArgumentException",
    "required_spec309_requestNegativeNumberMustSignalIllegalArgumentException",
    "optional_spec309_requestNegativeNumberMaySignalIllegalArgumentExceptionWithSpecificMessage",
    "required_spec312_cancelMustMakeThePublisherToEventuallyStopSignaling",
    "required_spec313_cancelMustMakeThePublisherEventuallyDropAllReferencesToTheSubscriber",
    "required_spec317_mustSupportAPendingElementCountUpToLongMaxValue",
    "required_spec317_mustSupportACumulativePendingElementCountUpToLongMaxValue",
    "required_spec317_mustNotSignalOnErrorWhenPendingAboveLongMaxValue",
]


def snake(java_name: str) -> str:
    name = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", java_name)
    return "test_" + re.sub(r"(?<=[A-Z])([A-Z][a-z])", r"_\1", name).lower()


def test_publisher_verification_has_the_38_java_tests_in_order() -> None:
    assert verification_tests(PublisherVerification) == [snake(name) for name in JAVA_PUBLISHER_TESTS]


@pytest.mark.parametrize(
    ("verification", "count"),
    [
        (PublisherVerification, 38),
        (SubscriberWhiteboxVerification, 27),
        (SubscriberBlackboxVerification, 26),
        (IdentityProcessorVerification, 68),
    ],
)
def test_verification_has_the_java_number_of_tests(verification: type, count: int) -> None:
    assert len(verification_tests(verification)) == count


def test_identity_processor_verification_delegates_every_publisher_and_whitebox_test() -> None:
    own = set(verification_tests(IdentityProcessorVerification))
    delegated = set(verification_tests(PublisherVerification)) | set(verification_tests(SubscriberWhiteboxVerification))
    assert delegated <= own
    assert own - delegated == {
        "test_required_spec104_must_call_on_error_on_all_its_subscribers_if_it_encounters_a_non_recoverable_error",
        "test_must_immediately_pass_on_on_error_events_received_from_its_upstream_to_its_downstream",
        "test_required_must_request_from_upstream_for_elements_that_have_been_requested_long_ago",
    }


@pytest.mark.parametrize(
    "verification", [PublisherVerification, SubscriberWhiteboxVerification, SubscriberBlackboxVerification]
)
def test_every_test_name_has_a_kind_prefix(verification: type) -> None:
    kinds = {name.split("_")[1] for name in verification_tests(verification)}
    assert kinds <= {"required", "optional", "stochastic", "untested"}


def test_rule_of_reads_the_spec_number() -> None:
    assert rule_of("test_required_spec109_must_issue_on_subscribe_for_non_null_subscriber") == "1.9"
    assert rule_of("test_required_spec317_must_support_a_pending_element_count_up_to_long_max_value") == "3.17"
    assert rule_of("test_required_validate_max_elements_from_publisher") == ""
