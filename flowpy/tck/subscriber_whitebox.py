"""SubscriberWhiteboxVerification: the 27 tests of an instrumented Flow subscriber (rules 2.x, 3.x).

Port of ``org.reactivestreams.tck.SubscriberWhiteboxVerification`` (TCK
1.0.4). The subscriber under test reports what it receives to a
:class:`~flowpy.tck.WhiteboxSubscriberProbe` and hands the TCK a
:class:`~flowpy.tck.SubscriberPuppet` from ``on_subscribe``; see
:meth:`SubscriberWhiteboxVerification.create_subscriber`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

from flowpy import flow
from flowpy.tck._base import Verification, WithHelperPublisher
from flowpy.tck._stages import (
    LONG_MAX,
    ElementStage,
    SecondSubscription,
    null_signal_check,
    terminal_signal_check,
)
from flowpy.tck.environment import TestEnvironment, TestException
from flowpy.tck.probes import SubscriberPuppet, WhiteboxSubscriberProbe
from flowpy.tck.signals import Latch

__all__ = ["SubscriberWhiteboxVerification", "WhiteboxTestStage"]

T = TypeVar("T")


class WhiteboxTestStage(ElementStage[T]):
    """The subscriber under test, subscribed to a manual publisher, and its probe."""

    def __init__(self, env: TestEnvironment, verification: SubscriberWhiteboxVerification[T]) -> None:
        super().__init__(env, verification.create_helper_publisher(LONG_MAX))
        self.probe: WhiteboxSubscriberProbe[T] = WhiteboxSubscriberProbe(env)
        self.subscribe(verification.create_subscriber(self.probe))
        self.probe.puppet.expect_completion(
            env.default_timeout_millis, f"Subscriber {self.sub!r} did not `register_on_subscribe`"
        )
        env.verify_no_async_errors_no_delay()

    @property
    def sub(self) -> flow.Subscriber[T]:
        """The subscriber under test."""
        return self.subscriber.value()

    @property
    def puppet(self) -> SubscriberPuppet:
        """The puppet the subscriber registered."""
        return self.probe.puppet.value()


class SubscriberWhiteboxVerification(Verification, WithHelperPublisher, Generic[T]):
    """The subscriber rules, verified against :meth:`create_subscriber`.

    Hooks to implement: :meth:`create_subscriber`; usually
    :meth:`~flowpy.tck._base.WithHelperPublisher.create_element`. Hooks to
    override when needed: ``create_helper_publisher(elements)``,
    ``publisher_executor_service()``, ``create_test_environment()``.
    """

    def create_subscriber(self, probe: WhiteboxSubscriberProbe[T]) -> flow.Subscriber[T]:
        """Return a new subscriber instrumented to report to ``probe``.

        Its ``on_subscribe`` must call ``probe.register_on_subscribe(puppet)``,
        and ``on_next``/``on_error``/``on_complete`` the matching
        ``probe.register_*`` method.

        Raises:
            NotImplementedError: unless overridden.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement create_subscriber(probe)")

    # --- Harness ---------------------------------------------------------

    def subscriber_test(self, body: Callable[[WhiteboxTestStage[T]], None]) -> None:
        """Run ``body`` on a stage whose subscriber is subscribed and registered."""
        stage = WhiteboxTestStage(self.env, self)
        try:
            body(stage)
        finally:
            stage.close()

    # --- Tests -------------------------------------------------------------

    def test_required_exercise_whitebox_happy_path(self) -> None:
        def body(stage: WhiteboxTestStage[T]) -> None:
            stage.puppet.trigger_request(1)
            stage.puppet.trigger_request(1)
            received_requests = stage.expect_request()
            stage.signal_next()
            stage.probe.expect_next(stage.last_t)
            stage.puppet.trigger_request(1)
            if received_requests == 1:
                stage.expect_request()
            stage.signal_next()
            stage.probe.expect_next(stage.last_t)
            stage.puppet.signal_cancel()
            stage.expect_cancelling()
            self.env.verify_no_async_errors()

        self.subscriber_test(body)

    def test_required_spec201_must_signal_demand_via_subscription_request(self) -> None:
        def body(stage: WhiteboxTestStage[T]) -> None:
            stage.puppet.trigger_request(1)
            stage.expect_request()
            stage.signal_next()
            stage.probe.expect_next(stage.last_t)
            self.env.verify_no_async_errors_no_delay()

        self.subscriber_test(body)

    def test_untested_spec202_should_asynchronously_dispatch(self) -> None:
        self.untested()

    def test_required_spec203_must_not_call_methods_on_subscription_or_publisher_in_on_complete(self) -> None:
        terminal_signal_check(self.env, self.create_subscriber(WhiteboxSubscriberProbe(self.env)), "on_complete")

    def test_required_spec203_must_not_call_methods_on_subscription_or_publisher_in_on_error(self) -> None:
        terminal_signal_check(self.env, self.create_subscriber(WhiteboxSubscriberProbe(self.env)), "on_error")

    def test_untested_spec204_must_consider_the_subscription_as_cancelled_in_after_recieving_on_complete_or_on_error(
        self,
    ) -> None:
        self.untested()

    def test_required_spec205_must_call_subscription_cancel_if_it_already_has_an_subscription_and_receives_another_on_subscribe_signal(  # noqa: E501
        self,
    ) -> None:
        env = self.env

        def body(stage: WhiteboxTestStage[T]) -> None:
            cancelled = Latch(env)
            stage.sub.on_subscribe(SecondSubscription(env, cancelled, flop_on_request=False))
            cancelled.expect_close(
                "Expected 2nd Subscription given to subscriber to be cancelled, but "
                "`Subscription.cancel()` was not called (rule 2.5)"
            )
            env.verify_no_async_errors()

        self.subscriber_test(body)

    def test_untested_spec206_must_call_subscription_cancel_if_it_is_no_longer_valid(self) -> None:
        self.untested()

    def test_untested_spec207_must_ensure_all_calls_on_its_subscription_take_place_from_the_same_thread_or_take_care_of_synchronization(  # noqa: E501
        self,
    ) -> None:
        self.untested()

    def test_required_spec208_must_be_prepared_to_receive_on_next_signals_after_having_called_subscription_cancel(
        self,
    ) -> None:
        def body(stage: WhiteboxTestStage[T]) -> None:
            stage.puppet.trigger_request(1)
            stage.expect_request()
            stage.puppet.signal_cancel()
            stage.expect_cancelling()
            stage.signal_next()  # an on_next after cancel (rule 2.8)
            stage.puppet.trigger_request(1)
            stage.puppet.trigger_request(1)
            self.env.verify_no_async_errors()

        self.subscriber_test(body)

    def test_required_spec209_must_be_prepared_to_receive_an_on_complete_signal_with_preceding_request_call(
        self,
    ) -> None:
        def body(stage: WhiteboxTestStage[T]) -> None:
            stage.puppet.trigger_request(1)
            stage.send_completion()
            stage.probe.expect_completion()
            self.env.verify_no_async_errors()

        self.subscriber_test(body)

    def test_required_spec209_must_be_prepared_to_receive_an_on_complete_signal_without_preceding_request_call(
        self,
    ) -> None:
        def body(stage: WhiteboxTestStage[T]) -> None:
            stage.send_completion()
            stage.probe.expect_completion()
            self.env.verify_no_async_errors()

        self.subscriber_test(body)

    def test_required_spec210_must_be_prepared_to_receive_an_on_error_signal_with_preceding_request_call(
        self,
    ) -> None:
        def body(stage: WhiteboxTestStage[T]) -> None:
            stage.puppet.trigger_request(1)
            stage.puppet.trigger_request(1)
            error = TestException()
            stage.send_error(error)
            stage.probe.expect_error(error)
            self.env.verify_no_async_errors()

        self.subscriber_test(body)

    def test_required_spec210_must_be_prepared_to_receive_an_on_error_signal_without_preceding_request_call(
        self,
    ) -> None:
        def body(stage: WhiteboxTestStage[T]) -> None:
            error = TestException()
            stage.send_error(error)
            stage.probe.expect_error(error)
            self.env.verify_no_async_errors()

        self.subscriber_test(body)

    def test_untested_spec211_must_make_sure_that_all_calls_on_its_methods_happen_before_the_processing_of_the_respective_events(  # noqa: E501
        self,
    ) -> None:
        self.untested()

    def test_untested_spec212_must_not_call_on_subscribe_more_than_once_based_on_object_equality_spec_violation(
        self,
    ) -> None:
        self.untested()

    def test_untested_spec213_failing_on_signal_invocation(self) -> None:
        self.untested()

    def test_required_spec213_on_subscribe_must_throw_null_pointer_exception_when_parameters_are_null(self) -> None:
        self.subscriber_test(lambda stage: null_signal_check(self.env, stage.sub, "on_subscribe"))

    def test_required_spec213_on_next_must_throw_null_pointer_exception_when_parameters_are_null(self) -> None:
        self.subscriber_test(lambda stage: null_signal_check(self.env, stage.sub, "on_next"))

    def test_required_spec213_on_error_must_throw_null_pointer_exception_when_parameters_are_null(self) -> None:
        self.subscriber_test(lambda stage: null_signal_check(self.env, stage.sub, "on_error"))

    def test_untested_spec301_must_not_be_called_outside_subscriber_context(self) -> None:
        self.untested()

    def test_required_spec308_request_must_register_given_number_elements_to_be_produced(self) -> None:
        def body(stage: WhiteboxTestStage[T]) -> None:
            stage.puppet.trigger_request(2)
            requested = stage.expect_request()
            stage.probe.expect_next(stage.signal_next())
            if requested < 2:  # a subscriber may request one at a time
                stage.expect_request()
            stage.probe.expect_next(stage.signal_next())
            stage.probe.expect_none()
            stage.puppet.trigger_request(3)
            self.env.verify_no_async_errors()

        self.subscriber_test(body)

    def test_untested_spec310_request_may_synchronously_call_on_next_on_subscriber(self) -> None:
        self.untested()

    def test_untested_spec311_request_may_synchronously_call_on_complete_or_on_error(self) -> None:
        self.untested()

    def test_untested_spec314_cancel_may_cause_the_publisher_to_shutdown_if_no_other_subscription_exists(
        self,
    ) -> None:
        self.untested()

    def test_untested_spec315_cancel_must_not_throw_exception_and_must_signal_on_error(self) -> None:
        self.untested()

    def test_untested_spec316_request_must_not_throw_exception_and_must_on_error_the_subscriber(self) -> None:
        self.untested()
