"""SubscriberBlackboxVerification: the 26 tests of an uninstrumented Flow subscriber (rules 2.x, 3.x).

Port of ``org.reactivestreams.tck.SubscriberBlackboxVerification`` (TCK
1.0.4). The subscriber under test is observed from outside through a
:class:`~flowpy.tck.probes.BlackboxSubscriberProxy`, so fewer rules can be
verified than with the whitebox verification.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

from flowpy import flow
from flowpy.tck._base import Verification, WithHelperPublisher
from flowpy.tck._stages import (
    LONG_MAX,
    NO_OP_SUBSCRIPTION,
    ElementStage,
    SecondSubscription,
    null_signal_check,
    terminal_signal_check,
)
from flowpy.tck.environment import TestEnvironment, TestException
from flowpy.tck.probes import BlackboxProbe, BlackboxSubscriberProxy
from flowpy.tck.signals import Latch

__all__ = ["BlackboxTestStage", "SubscriberBlackboxVerification"]

T = TypeVar("T")

_MAX_SIGNALS_TO_EMIT = 512  # protects against a subscriber that requests without bound


class BlackboxTestStage(ElementStage[T]):
    """The subscriber under test, behind a recording proxy, subscribed to a manual publisher."""

    def __init__(self, env: TestEnvironment, verification: SubscriberBlackboxVerification[T]) -> None:
        super().__init__(env, verification.create_helper_publisher(LONG_MAX))
        self.probe: BlackboxProbe[T] = BlackboxProbe(env)
        self.real_sub = verification.create_subscriber()
        self.proxy = BlackboxSubscriberProxy(self.probe, self.real_sub)
        self.subscribe(self.proxy)


class SubscriberBlackboxVerification(Verification, WithHelperPublisher, Generic[T]):
    """The subscriber rules that can be checked from outside, verified against :meth:`create_subscriber`.

    Hooks to implement: :meth:`create_subscriber`; usually ``create_element(i)``.
    Hooks to override when needed: :meth:`trigger_request`,
    ``create_helper_publisher(elements)``, ``publisher_executor_service()``,
    ``create_test_environment()``.
    """

    def create_subscriber(self) -> flow.Subscriber[T]:
        """Return a new subscriber to verify.

        Raises:
            NotImplementedError: unless overridden.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement create_subscriber()")

    def trigger_request(self, subscriber: flow.Subscriber[T]) -> None:
        """Make ``subscriber`` request, if it needs a nudge to do so; default nothing."""
        return None

    # --- Harness ---------------------------------------------------------

    def blackbox_subscriber_test(self, body: Callable[[BlackboxTestStage[T]], None]) -> None:
        """Run ``body`` on a stage whose subscriber is subscribed."""
        stage = BlackboxTestStage(self.env, self)
        try:
            body(stage)
        finally:
            stage.close()

    def _null_signal_test(self, signal: str) -> None:
        sub = self.create_subscriber()
        if signal != "on_subscribe":
            sub.on_subscribe(NO_OP_SUBSCRIPTION)
        null_signal_check(self.env, sub, signal)

    # --- Tests -------------------------------------------------------------

    def test_required_spec201_blackbox_must_signal_demand_via_subscription_request(self) -> None:
        def body(stage: BlackboxTestStage[T]) -> None:
            self.trigger_request(stage.real_sub)
            requested = stage.expect_request()
            # Java's loop condition sampled is_cancelled inverted and sent
            # nothing; this sends up to the demand until the subscriber cancels.
            for _ in range(min(requested, _MAX_SIGNALS_TO_EMIT)):
                if stage.is_cancelled:
                    break
                stage.probe.expect_next(stage.signal_next())
            stage.send_completion()  # completing early is legal (rule 1.2)
            stage.probe.expect_completion()
            self.env.verify_no_async_errors_no_delay()

        self.blackbox_subscriber_test(body)

    def test_untested_spec202_blackbox_should_asynchronously_dispatch(self) -> None:
        self.untested()

    def test_required_spec203_blackbox_must_not_call_methods_on_subscription_or_publisher_in_on_complete(
        self,
    ) -> None:
        terminal_signal_check(self.env, self.create_subscriber(), "on_complete")

    def test_required_spec203_blackbox_must_not_call_methods_on_subscription_or_publisher_in_on_error(self) -> None:
        terminal_signal_check(self.env, self.create_subscriber(), "on_error")

    def test_untested_spec204_blackbox_must_consider_the_subscription_as_cancelled_in_after_recieving_on_complete_or_on_error(  # noqa: E501
        self,
    ) -> None:
        self.untested()

    def test_required_spec205_blackbox_must_call_subscription_cancel_if_it_already_has_an_subscription_and_receives_another_on_subscribe_signal(  # noqa: E501
        self,
    ) -> None:
        env = self.env

        def body(stage: BlackboxTestStage[T]) -> None:
            cancelled = Latch(env)
            stage.proxy.on_subscribe(SecondSubscription(env, cancelled, flop_on_request=True))
            cancelled.expect_close(
                "Expected 2nd Subscription given to subscriber to be cancelled, but "
                "`Subscription.cancel()` was not called (rule 2.5)"
            )
            stage.send_completion()
            env.verify_no_async_errors()

        self.blackbox_subscriber_test(body)

    def test_untested_spec206_blackbox_must_call_subscription_cancel_if_it_is_no_longer_valid(self) -> None:
        self.untested()

    def test_untested_spec207_blackbox_must_ensure_all_calls_on_its_subscription_take_place_from_the_same_thread_or_take_care_of_synchronization(  # noqa: E501
        self,
    ) -> None:
        self.untested()

    def test_untested_spec208_blackbox_must_be_prepared_to_receive_on_next_signals_after_having_called_subscription_cancel(  # noqa: E501
        self,
    ) -> None:
        self.untested()

    def test_required_spec209_blackbox_must_be_prepared_to_receive_an_on_complete_signal_with_preceding_request_call(
        self,
    ) -> None:
        def body(stage: BlackboxTestStage[T]) -> None:
            self.trigger_request(stage.real_sub)
            stage.expect_request()
            stage.proxy.on_complete()
            stage.probe.expect_completion()
            self.env.verify_no_async_errors_no_delay()

        self.blackbox_subscriber_test(body)

    def test_required_spec209_blackbox_must_be_prepared_to_receive_an_on_complete_signal_without_preceding_request_call(
        self,
    ) -> None:
        def body(stage: BlackboxTestStage[T]) -> None:
            stage.proxy.on_complete()
            stage.probe.expect_completion()
            self.env.verify_no_async_errors_no_delay()

        self.blackbox_subscriber_test(body)

    def test_required_spec210_blackbox_must_be_prepared_to_receive_an_on_error_signal_with_preceding_request_call(
        self,
    ) -> None:
        def body(stage: BlackboxTestStage[T]) -> None:
            self.trigger_request(stage.real_sub)
            stage.expect_request()
            error = TestException()
            stage.proxy.on_error(error)
            stage.probe.expect_error(error)
            self.env.verify_no_async_errors_no_delay()

        self.blackbox_subscriber_test(body)

    def test_required_spec210_blackbox_must_be_prepared_to_receive_an_on_error_signal_without_preceding_request_call(
        self,
    ) -> None:
        def body(stage: BlackboxTestStage[T]) -> None:
            error = TestException()
            stage.proxy.on_error(error)
            stage.probe.expect_error(error)
            self.env.verify_no_async_errors_no_delay()

        self.blackbox_subscriber_test(body)

    def test_untested_spec211_blackbox_must_make_sure_that_all_calls_on_its_methods_happen_before_the_processing_of_the_respective_events(  # noqa: E501
        self,
    ) -> None:
        self.untested()

    def test_untested_spec212_blackbox_must_not_call_on_subscribe_more_than_once_based_on_object_equality(
        self,
    ) -> None:
        self.untested()

    def test_untested_spec213_blackbox_failing_on_signal_invocation(self) -> None:
        self.untested()

    def test_required_spec213_blackbox_on_subscribe_must_throw_null_pointer_exception_when_parameters_are_null(
        self,
    ) -> None:
        self._null_signal_test("on_subscribe")

    def test_required_spec213_blackbox_on_next_must_throw_null_pointer_exception_when_parameters_are_null(
        self,
    ) -> None:
        self._null_signal_test("on_next")

    def test_required_spec213_blackbox_on_error_must_throw_null_pointer_exception_when_parameters_are_null(
        self,
    ) -> None:
        self._null_signal_test("on_error")

    def test_untested_spec301_blackbox_must_not_be_called_outside_subscriber_context(self) -> None:
        self.untested()

    def test_untested_spec308_blackbox_request_must_register_given_number_elements_to_be_produced(self) -> None:
        self.untested()

    def test_untested_spec310_blackbox_request_may_synchronously_call_on_next_on_subscriber(self) -> None:
        self.untested()

    def test_untested_spec311_blackbox_request_may_synchronously_call_on_complete_or_on_error(self) -> None:
        self.untested()

    def test_untested_spec314_blackbox_cancel_may_cause_the_publisher_to_shutdown_if_no_other_subscription_exists(
        self,
    ) -> None:
        self.untested()

    def test_untested_spec315_blackbox_cancel_must_not_throw_exception_and_must_signal_on_error(self) -> None:
        self.untested()

    def test_untested_spec316_blackbox_request_must_not_throw_exception_and_must_on_error_the_subscriber(
        self,
    ) -> None:
        self.untested()
