"""PublisherVerification fails, skips or passes as the upstream TCK 1.0.4 self-tests require.

A port of ``PublisherVerificationTest``: each test builds a deliberately
broken (or a correct) publisher from :mod:`tests.tck.broken`, runs one
verification test on it, and checks that it fails with a message naming the
defect, skips, or passes. The messages are flowpy's, which name the Python
types (``TypeError`` for Java's ``NullPointerException``, ``on_error`` for
``onError``).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from flowpy.executors import DaemonThreadPool
from flowpy.tck import (
    NOT_VERIFIED,
    SKIPPING_NO_ERROR_PUBLISHER_AVAILABLE,
    SKIPPING_OPTIONAL_TEST_FAILED,
    TestException,
)
from tests.tck import broken
from tests.tck.conformance import (
    TIMEOUT_MILLIS,
    Outcome,
    publisher_verification,
    require_failure,
    require_pass,
    require_skip,
    run,
)

ON_ERROR_TEST = "Unexpected Subscriber::on_error(TestException('Test Exception: Boom!'))"


@pytest.fixture
def pool() -> Iterator[DaemonThreadPool]:
    """The signalling threads of the asynchronous broken publishers, stopped after the test."""
    executor = DaemonThreadPool(10, thread_name_prefix="conformance-signallers")
    try:
        yield executor
    finally:
        executor.shutdown(wait=True)


def test_required_spec101_subscription_request_must_result_in_the_correct_number_of_produced_elements_should_fail_by_expecting_on_error() -> (
    None
):
    require_failure(
        run(
            publisher_verification(broken.noop_publisher()),
            "test_required_spec101_subscription_request_must_result_in_the_correct_number_of_produced_elements",
        ),
        f"produced no element after request(1) within {TIMEOUT_MILLIS} ms",
    )


def test_required_spec102_may_signal_less_than_requested_and_terminate_subscription_should_fail_by_not_receiving_any_element() -> (
    None
):
    require_failure(
        run(
            publisher_verification(broken.noop_publisher()),
            "test_required_spec102_may_signal_less_than_requested_and_terminate_subscription",
        ),
        f"Did not receive expected elements within {TIMEOUT_MILLIS} ms: got 0 of 3 elements []",
    )


def test_required_spec102_may_signal_less_than_requested_and_terminate_subscription_should_fail_by_receiving_too_many_elements() -> (
    None
):
    require_failure(
        run(
            publisher_verification(broken.demand_ignoring_publisher()),
            "test_required_spec102_may_signal_less_than_requested_and_terminate_subscription",
        ),
        "Expected end-of-stream but got element 3",
    )


@pytest.mark.usefixtures("tiny_switch_interval")
def test_stochastic_spec103_must_signal_on_methods_sequentially_should_fail_by_concurrently_accessing_on_next(
    pool: DaemonThreadPool,
) -> None:
    require_failure(
        run(
            publisher_verification(broken.ConcurrentSignallingPublisher(pool)),
            "test_stochastic_spec103_must_signal_on_methods_sequentially",
        ),
        "Illegal concurrent access detected",
    )


def test_stochastic_spec103_must_signal_on_methods_sequentially_should_pass_for_synchronous_publisher() -> None:
    require_pass(
        run(
            publisher_verification(broken.synchronous_completing_publisher()),
            "test_stochastic_spec103_must_signal_on_methods_sequentially",
        )
    )


def test_optional_spec104_must_signal_on_error_when_fails_should_fail() -> None:
    require_failure(
        run(
            publisher_verification(broken.noop_publisher(), broken.throwing_failed_publisher()),
            "test_optional_spec104_must_signal_on_error_when_fails",
        ),
        "Publisher raised RuntimeError('It is not valid to throw here!') instead of signalling the error via "
        "on_error (rule 1.4)",
    )


def test_optional_spec104_must_signal_on_error_when_fails_should_be_skipped_when_no_error_publisher_given() -> None:
    require_skip(
        run(publisher_verification(broken.noop_publisher()), "test_optional_spec104_must_signal_on_error_when_fails"),
        SKIPPING_NO_ERROR_PUBLISHER_AVAILABLE,
    )


def test_required_spec105_must_signal_on_complete_when_finite_stream_terminates_should_fail() -> None:
    require_failure(
        run(
            publisher_verification(broken.never_completing_publisher()),
            "test_required_spec105_must_signal_on_complete_when_finite_stream_terminates",
        ),
        "Expected end-of-stream but got element 3",
    )


def test_optional_spec105_empty_stream_must_terminate_by_signalling_on_complete_should_not_allow_eager_on_complete() -> (
    None
):
    # The first recorded error is reported, not the timeout it caused.
    result = require_skip(
        run(
            publisher_verification(broken.eager_on_complete_publisher(), max_elements_from_publisher=lambda self: 0),
            "test_optional_spec105_empty_stream_must_terminate_by_signalling_on_complete",
        ),
        "Subscriber::on_complete() called before Subscriber::on_subscribe",
    )
    assert result.message == (
        f"{SKIPPING_OPTIONAL_TEST_FAILED}: Subscriber::on_complete() called before Subscriber::on_subscribe"
    )


def test_optional_spec105_empty_stream_must_terminate_by_signalling_on_complete_should_pass_when_on_complete_synchronously_inovked() -> (
    None
):
    require_pass(
        run(
            publisher_verification(broken.empty_publisher(), max_elements_from_publisher=lambda self: 0),
            "test_optional_spec105_empty_stream_must_terminate_by_signalling_on_complete",
        )
    )


def test_required_spec107_must_not_emit_further_signals_once_on_complete_has_been_signalled_should_fail_for_not_completing_publisher() -> (
    None
):
    require_failure(
        run(
            publisher_verification(broken.demand_ignoring_publisher()),
            "test_required_spec107_must_not_emit_further_signals_once_on_complete_has_been_signalled",
        ),
        "Expected end-of-stream but got element 1",
    )


def test_required_spec107_must_not_emit_further_signals_once_on_complete_has_been_signalled_should_fail_for_publisher_which_completes_but_keeps_serving_data() -> (
    None
):
    require_failure(
        run(
            publisher_verification(broken.completing_but_serving_publisher()),
            "test_required_spec107_must_not_emit_further_signals_once_on_complete_has_been_signalled",
        ),
        "Unexpected element 0 received after stream completed",
    )


def test_required_spec109_subscribe_throw_npe_on_null_subscriber_should_fail_if_doesnt_throw_npe() -> None:
    require_failure(
        run(
            publisher_verification(broken.doing_nothing_publisher()),
            "test_required_spec109_subscribe_throw_npe_on_null_subscriber",
        ),
        "Publisher did not raise a TypeError when given a None Subscriber in subscribe (rule 1.9)",
    )


def test_required_spec109_may_reject_calls_to_subscribe_if_publisher_is_unable_or_unwilling_to_serve_them_rejection_must_trigger_on_error_after_on_subscribe_actually_pass() -> (
    None
):
    require_pass(
        run(
            publisher_verification(broken.noop_publisher(), broken.busy_failed_publisher()),
            "test_required_spec109_may_reject_calls_to_subscribe_if_publisher_is_unable_or_unwilling_to_serve_them_"
            "rejection_must_trigger_on_error_after_on_subscribe",
        )
    )


def _signal_first_publisher(signal: str) -> broken.CallbackPublisher:
    calls = {
        "on_complete": lambda subscriber: subscriber.on_complete(),
        "on_next": lambda subscriber: subscriber.on_next(1337),
        "on_error": lambda subscriber: subscriber.on_error(TestException()),
    }
    return broken.CallbackPublisher(calls[signal])


def _require_on_subscribe_first(signal: str) -> None:
    require_failure(
        run(
            publisher_verification(_signal_first_publisher(signal)),
            "test_required_spec109_must_issue_on_subscribe_for_non_null_subscriber",
        ),
        f"on_subscribe should be called prior to {signal} always",
    )


def test_required_spec109_must_issue_on_subscribe_for_non_null_subscriber_must_fail_if_on_complete_happens_first() -> (
    None
):
    _require_on_subscribe_first("on_complete")


def test_required_spec109_must_issue_on_subscribe_for_non_null_subscriber_must_fail_if_on_next_happens_first() -> None:
    _require_on_subscribe_first("on_next")


def test_required_spec109_must_issue_on_subscribe_for_non_null_subscriber_must_fail_if_on_error_happens_first() -> None:
    _require_on_subscribe_first("on_error")


def test_required_spec109_may_reject_calls_to_subscribe_if_publisher_is_unable_or_unwilling_to_serve_them_rejection_must_trigger_on_error_after_on_subscribe_should_fail() -> (
    None
):
    require_failure(
        run(
            publisher_verification(broken.noop_publisher(), broken.silent_failed_publisher()),
            "test_required_spec109_may_reject_calls_to_subscribe_if_publisher_is_unable_or_unwilling_to_serve_them_"
            "rejection_must_trigger_on_error_after_on_subscribe",
        ),
        f"did not call on_error on new Subscriber within {TIMEOUT_MILLIS} ms",
    )


def test_required_spec109_may_reject_calls_to_subscribe_if_publisher_is_unable_or_unwilling_to_serve_them_rejection_must_trigger_on_error_after_on_subscribe_be_skipped_for_no_given_error_publisher() -> (
    None
):
    require_skip(
        run(
            publisher_verification(broken.noop_publisher()),
            "test_required_spec109_may_reject_calls_to_subscribe_if_publisher_is_unable_or_unwilling_to_serve_them_"
            "rejection_must_trigger_on_error_after_on_subscribe",
        ),
        SKIPPING_NO_ERROR_PUBLISHER_AVAILABLE,
    )


def test_untested_spec110_reject_a_subscription_request_if_the_same_subscriber_subscribes_twice_should_fail_by_skipping_since_optional() -> (
    None
):
    # Upstream counts the skip as the expected "failure"; here it is a skip.
    require_skip(
        run(
            publisher_verification(broken.noop_publisher()),
            "test_untested_spec110_reject_a_subscription_request_if_the_same_subscriber_subscribes_twice",
        ),
        NOT_VERIFIED,
    )


def test_optional_spec111_may_support_multi_subscribe_should_fail_by_actually_pass() -> None:
    require_pass(
        run(publisher_verification(broken.noop_publisher()), "test_optional_spec111_may_support_multi_subscribe")
    )


def test_optional_spec111_registered_subscribers_must_receive_on_next_or_on_complete_signals_be_skipped_when_multiple_subscribers_not_supported() -> (
    None
):
    require_skip(
        run(
            publisher_verification(broken.MultiSubscribersPublisher(1, blow_up=True)),
            "test_optional_spec111_registered_subscribers_must_receive_on_next_or_on_complete_signals",
        ),
        "Unexpected Subscriber::on_error(RuntimeError('Unexpected additional subscriber'))",
    )


def test_optional_spec111_registered_subscribers_must_receive_on_next_or_on_complete_signals_should_pass() -> None:
    require_pass(
        run(
            publisher_verification(broken.MultiSubscribersPublisher(1, blow_up=False)),
            "test_optional_spec111_registered_subscribers_must_receive_on_next_or_on_complete_signals",
        )
    )


def test_optional_spec111_multicast_must_produce_the_same_elements_in_the_same_sequence_to_all_of_its_subscribers_when_requesting_many_upfront_should_fail_by_expecting_on_error() -> (
    None
):
    # An optional test: its failure is a skip that carries the failure.
    require_skip(
        run(
            publisher_verification(broken.random_elements_publisher()),
            "test_optional_spec111_multicast_must_produce_the_same_elements_in_the_same_sequence_to_all_of_its_"
            "subscribers_when_requesting_many_upfront",
        ),
        f"{SKIPPING_OPTIONAL_TEST_FAILED}: Expected elements to be signaled in the same sequence to 1st and 2. "
        "subscribers",
    )


def test_required_spec302_must_allow_synchronous_request_calls_from_on_next_and_on_subscribe_should_fail_by_reporting_async_error() -> (
    None
):
    require_failure(
        run(
            publisher_verification(broken.on_erroring_publisher()),
            "test_required_spec302_must_allow_synchronous_request_calls_from_on_next_and_on_subscribe",
        ),
        f"Async error during test execution: {ON_ERROR_TEST}",
    )


def test_required_spec303_must_not_allow_unbounded_recursion_should_fail_by_informing_about_too_deep_stack() -> None:
    require_failure(
        run(
            publisher_verification(broken.recursing_publisher()),
            "test_required_spec303_must_not_allow_unbounded_recursion",
        ),
        "yet expected recursive bound was 1 (rule 3.3)",
    )


def test_required_spec306_after_subscription_is_cancelled_request_must_be_nops_should_fail_by_unexpected_element() -> (
    None
):
    require_failure(
        run(
            publisher_verification(broken.demand_ignoring_publisher()),
            "test_required_spec306_after_subscription_is_cancelled_request_must_be_nops",
        ),
        "Publisher signalled after the subscription was cancelled (rule 3.6): expected no signal but got element 0",
    )


def test_required_spec307_after_subscription_is_cancelled_additional_cancelations_must_be_nops_should_pass() -> None:
    require_pass(
        run(
            publisher_verification(broken.demand_ignoring_publisher()),
            "test_required_spec307_after_subscription_is_cancelled_additional_cancelations_must_be_nops",
        )
    )


def test_required_spec307_after_subscription_is_cancelled_additional_cancelations_must_be_nops_should_fail_by_unexpected_error_in_cancelling() -> (
    None
):
    require_failure(
        run(
            publisher_verification(broken.error_on_cancel_publisher()),
            "test_required_spec307_after_subscription_is_cancelled_additional_cancelations_must_be_nops",
        ),
        f"Async error during test execution: {ON_ERROR_TEST}",
    )


def test_required_spec309_request_zero_must_signal_illegal_argument_exception_should_fail_by_expecting_on_error() -> (
    None
):
    require_failure(
        run(
            publisher_verification(broken.noop_publisher()),
            "test_required_spec309_request_zero_must_signal_illegal_argument_exception",
        ),
        f"Expected on_error(ValueError) within {TIMEOUT_MILLIS} ms",
    )


def test_required_spec309_request_zero_must_signal_illegal_argument_exception_should_pass() -> None:
    require_pass(
        run(
            publisher_verification(broken.rejecting_non_positive_publisher()),
            "test_required_spec309_request_zero_must_signal_illegal_argument_exception",
        )
    )


def test_required_spec309_request_negative_number_must_signal_illegal_argument_exception_should_fail_by_expecting_on_error() -> (
    None
):
    require_failure(
        run(
            publisher_verification(broken.noop_publisher()),
            "test_required_spec309_request_negative_number_must_signal_illegal_argument_exception",
        ),
        f"Expected on_error(ValueError) within {TIMEOUT_MILLIS} ms",
    )


def test_required_spec312_cancel_must_make_the_publisher_to_eventually_stop_signaling_should_fail_by_having_emited_more_than_requested(
    pool: DaemonThreadPool,
) -> None:
    require_failure(
        run(
            publisher_verification(broken.AsyncDemandIgnoringPublisher(pool)),
            "test_required_spec312_cancel_must_make_the_publisher_to_eventually_stop_signaling",
        ),
        ", which is more than the signalled demand: 15 (rule 3.12)",
    )


def test_required_spec313_cancel_must_make_the_publisher_eventually_drop_all_references_to_the_subscriber_should_fail_by_keeping_the_reference_longer_than_needed() -> (
    None
):
    require_failure(
        run(
            publisher_verification(broken.ReferenceHoldingPublisher()),
            "test_required_spec313_cancel_must_make_the_publisher_eventually_drop_all_references_to_the_subscriber",
        ),
        "did not drop reference to test subscriber after subscription cancellation (rule 3.13)",
    )


@pytest.mark.parametrize("at", range(1, 41))
def test_required_spec313_cancel_must_make_the_publisher_eventually_drop_all_references_to_the_subscriber_passes_wherever_the_subscriber_is_freed(
    at: int,
) -> None:
    # A finalizer runs on the thread that frees its object, inside whatever that
    # thread is doing: freed on the TCK's thread inside its own wait (a lock
    # section of that wait), a finalizer that took the wait's lock hung there.
    # The first 40 calls after the cancel cover the first rounds of the wait.
    publisher = broken.LateLettingGoPublisher(at)
    results: list[Outcome] = []
    test = "test_required_spec313_cancel_must_make_the_publisher_eventually_drop_all_references_to_the_subscriber"
    verifying = threading.Thread(target=lambda: results.append(run(publisher_verification(publisher), test)))
    verifying.start()
    verifying.join(10)
    assert not verifying.is_alive(), f"the TCK hung when the subscriber was freed at call {at} after the cancel"
    assert publisher.let_go.is_set()
    require_pass(results[0])


def test_required_spec317_must_support_a_pending_element_count_up_to_long_max_value_should_fail_on_asynch_demand_ignoring_publisher(
    pool: DaemonThreadPool,
) -> None:
    require_failure(
        run(
            publisher_verification(broken.AsyncDemandIgnoringPublisher(pool)),
            "test_required_spec317_must_support_a_pending_element_count_up_to_long_max_value",
        ),
        "Expected end-of-stream but got element ",
    )


def test_required_spec317_must_support_a_pending_element_count_up_to_long_max_value_should_fail_on_synch_demand_ignoring_publisher() -> (
    None
):
    require_failure(
        run(
            publisher_verification(broken.demand_ignoring_publisher()),
            "test_required_spec317_must_support_a_pending_element_count_up_to_long_max_value",
        ),
        "Received more than bufferSize (32) onNext signals",
    )


def test_required_spec317_must_not_signal_on_error_when_pending_above_long_max_value_should_fail_on_synch_overflowing_publisher() -> (
    None
):
    require_failure(
        run(
            publisher_verification(broken.DemandCountingPublisher(fail_at_max=False)),
            "test_required_spec317_must_not_signal_on_error_when_pending_above_long_max_value",
        ),
        "Async error during test execution: Unexpected Subscriber::on_error(RuntimeError('Illegally signalling "
        "onError (violates rule 3.17)'))",
    )


def test_required_spec317_must_support_a_cumulative_pending_element_count_up_to_long_max_value_should_fail_when_error_signalled_once_max_value_reached() -> (
    None
):
    # The illegal on_error is reported, not the missing completion it caused.
    result = require_failure(
        run(
            publisher_verification(broken.DemandCountingPublisher(fail_at_max=True)),
            "test_required_spec317_must_support_a_cumulative_pending_element_count_up_to_long_max_value",
        ),
        "Async error during test execution: Unexpected Subscriber::on_error(RuntimeError('Illegally signalling "
        "onError too soon!",
    )
    assert "Did not receive expected stream completion" not in result.message


def test_required_spec317_must_not_signal_on_error_when_pending_above_long_max_value_for_synchronous_publisher() -> (
    None
):
    publisher = broken.UnboundedSynchronousPublisher()
    require_pass(
        run(
            publisher_verification(publisher),
            "test_required_spec317_must_not_signal_on_error_when_pending_above_long_max_value",
        )
    )
    assert publisher.sent == 11  # the test's subscriber requests ten times, then cancels
