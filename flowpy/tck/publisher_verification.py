"""PublisherVerification: the 38 tests of a Flow publisher (rules 1.x and 3.x).

Port of ``org.reactivestreams.tck.PublisherVerification`` (TCK 1.0.4).
Subclass it in a pytest module, in a class named ``Test...``, and implement
:meth:`PublisherVerification.create_publisher` and
:meth:`PublisherVerification.create_failed_publisher`::

    class TestRangePublisher(PublisherVerification[int]):
        def create_publisher(self, elements: int) -> flow.Publisher[int]:
            return RangePublisher(0, elements)

        def create_failed_publisher(self) -> flow.Publisher[int] | None:
            return None

``required_`` tests fail on a violation; ``optional_`` ones skip when they
fail; ``stochastic_`` ones may pass despite a violation and are switched off by
:meth:`skip_stochastic_tests`; ``untested_`` ones always skip.
"""

from __future__ import annotations

import gc
import os
import queue
import random
import threading
import weakref
from collections.abc import Callable
from typing import Generic, TypeVar

from flowpy import flow
from flowpy.tck._base import Verification
from flowpy.tck.environment import TestEnvironment
from flowpy.tck.signals import Latch
from flowpy.tck.skips import (
    SKIPPING_NO_ERROR_PUBLISHER_AVAILABLE,
    SKIPPING_STOCHASTIC_TEST,
    SKIPPING_TOO_FEW_ELEMENTS,
    SKIPPING_UNABLE_TO_COMPLETE,
    SkipTest,
    skip,
)
from flowpy.tck.subscribers import (
    BlackholeSubscriberWithSubscriptionSupport,
    ManualSubscriber,
    ManualSubscriberWithSubscriptionSupport,
    TestSubscriber,
)

__all__ = ["PUBLISHER_UNABLE_TO_SIGNAL_ON_COMPLETE", "PublisherVerification"]

T = TypeVar("T")

LONG_MAX = 2**63 - 1

PUBLISHER_UNABLE_TO_SIGNAL_ON_COMPLETE = LONG_MAX
"""Return it from ``max_elements_from_publisher`` to skip every test that needs ``on_complete``."""

DEFAULT_PUBLISHER_REFERENCE_GC_TIMEOUT_MILLIS = 300

_STOCHASTIC_ITERATIONS = 100

PublisherTest = Callable[[flow.Publisher[T]], None]


def gc_timeout_from_environment() -> int:
    """Return ``PUBLISHER_REFERENCE_GC_TIMEOUT_MILLIS`` from the environment, default 300.

    Raises:
        ValueError: if it is set and not an integer.
    """
    raw = os.environ.get("PUBLISHER_REFERENCE_GC_TIMEOUT_MILLIS")
    if raw is None or raw == "":
        return DEFAULT_PUBLISHER_REFERENCE_GC_TIMEOUT_MILLIS
    try:
        return int(raw)
    except ValueError:
        raise ValueError(
            f"environment variable PUBLISHER_REFERENCE_GC_TIMEOUT_MILLIS must be an integer, got {raw!r}"
        ) from None


class _ConcurrentAccessBarrier:
    """Detects two threads inside a subscriber's signal methods at once (rule 1.3).

    Re-entry on the same thread is allowed: a synchronous ``on_subscribe ->
    request -> on_next`` chain is serial.
    """

    def __init__(self, env: TestEnvironment) -> None:
        self._env = env
        self._lock = threading.Lock()
        self._inside: int | None = None  # ident of the thread signalling; guarded by self._lock
        self._last_signal = ""

    def enter(self, signal: str) -> None:
        me = threading.get_ident()
        with self._lock:
            previous, self._inside = self._inside, me
            last, self._last_signal = self._last_signal, signal
        if previous is not None and previous != me:
            self._env.flop(
                f"Illegal concurrent access detected (entering critical section)! thread {me} "
                f"signalled {signal} before thread {previous} finished its {last} signal (rule 1.3)"
            )

    def leave(self, signal: str) -> None:
        me = threading.get_ident()
        with self._lock:
            previous, self._inside = self._inside, None
        if previous is not None and previous != me:
            self._env.flop(
                f"Illegal concurrent access detected (exiting critical section)! thread {me} "
                f"left {signal} while thread {previous} was signalling (rule 1.3)"
            )


class PublisherConfiguration(Generic[T]):
    """The hooks that configure the publisher tests (of publishers and of processors)."""

    def create_failed_publisher(self) -> flow.Publisher[T] | None:
        """Return a publisher that signals ``on_subscribe`` then ``on_error`` (rules 1.4, 1.9).

        Return ``None`` (the default) to skip the tests that need one.
        """
        return None

    def max_elements_from_publisher(self) -> int:
        """The most elements :meth:`create_publisher` can provide; default ``2**63 - 2``.

        Tests needing more skip. Return
        :data:`PUBLISHER_UNABLE_TO_SIGNAL_ON_COMPLETE` for a publisher that
        never completes.
        """
        return LONG_MAX - 1

    def bounded_depth_of_on_next_and_request_recursion(self) -> int:
        """How deep ``on_next -> request -> on_next`` may recurse (rule 3.3); default 1."""
        return 1

    def skip_stochastic_tests(self) -> bool:
        """Whether to skip the ``stochastic_`` tests; default ``False``."""
        return False

    def publisher_reference_gc_timeout_millis(self) -> int:
        """How long the rule 3.13 test waits for the subscriber to be collected.

        Default: the environment variable ``PUBLISHER_REFERENCE_GC_TIMEOUT_MILLIS``, else 300.
        """
        return gc_timeout_from_environment()


class PublisherVerification(Verification, PublisherConfiguration[T]):
    """The publisher rules, verified against :meth:`create_publisher`.

    Hooks to implement: :meth:`create_publisher`, :meth:`create_failed_publisher`.
    Hooks to override when needed: :meth:`max_elements_from_publisher`,
    :meth:`bounded_depth_of_on_next_and_request_recursion`,
    :meth:`skip_stochastic_tests`, :meth:`publisher_reference_gc_timeout_millis`,
    :meth:`create_test_environment`.
    """

    # --- Configuration hooks -------------------------------------------

    def create_publisher(self, elements: int) -> flow.Publisher[T]:
        """Return a publisher of exactly ``elements`` items; ``2**63 - 1`` means infinite.

        Raises:
            NotImplementedError: unless overridden.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement create_publisher(elements)")

    # --- Harness ---------------------------------------------------------

    def active_publisher_test(self, elements: int, completion_required: bool, body: PublisherTest[T]) -> None:
        """Run ``body`` on ``create_publisher(elements)``, then check for async errors.

        Skips when the publisher cannot provide ``elements`` items, or cannot
        complete and ``completion_required``.
        """
        maximum = self.max_elements_from_publisher()
        if elements > maximum:
            skip(f"{SKIPPING_TOO_FEW_ELEMENTS}{elements} is higher than supported by given producer: {maximum}")
        if completion_required and maximum == PUBLISHER_UNABLE_TO_SIGNAL_ON_COMPLETE:
            skip(SKIPPING_UNABLE_TO_COMPLETE)
        publisher = self.create_publisher(elements)
        assert publisher is not None, f"create_publisher({elements}) returned None"
        body(publisher)
        self.env.verify_no_async_errors_no_delay()

    def optional_active_publisher_test(self, elements: int, completion_required: bool, body: PublisherTest[T]) -> None:
        """As :meth:`active_publisher_test`, but a failure skips."""
        self.optional(lambda: self.active_publisher_test(elements, completion_required, body))

    def when_has_error_publisher_test(self, body: PublisherTest[T]) -> None:
        """Run ``body`` on :meth:`create_failed_publisher`; skip if it returns ``None``."""
        publisher = self.create_failed_publisher()
        if publisher is None:
            skip(SKIPPING_NO_ERROR_PUBLISHER_AVAILABLE)
        body(publisher)
        self.env.verify_no_async_errors_no_delay()

    def stochastic_test(self, iterations: int, body: Callable[[int], None]) -> None:
        """Run ``body(i)`` ``iterations`` times; skip if stochastic tests are off."""
        if self.skip_stochastic_tests():
            skip(SKIPPING_STOCHASTIC_TEST)
        for i in range(iterations):
            body(i)

    # --- Setup and validation ----------------------------------------

    def test_required_create_publisher1_must_produce_a_stream_of_exactly1_element(self) -> None:
        def body(pub: flow.Publisher[T]) -> None:
            sub = self.env.new_manual_subscriber(pub)
            has_element, _ = sub.request_next_element_or_end_of_stream(message=f"Publisher {pub!r} produced no element")
            assert has_element, f"Publisher {pub!r} produced no element"
            sub.request_end_of_stream()

        self.active_publisher_test(1, True, body)

    def test_required_create_publisher3_must_produce_a_stream_of_exactly3_elements(self) -> None:
        def body(pub: flow.Publisher[T]) -> None:
            sub = self.env.new_manual_subscriber(pub)
            for i in range(1, 4):
                has_element, _ = sub.request_next_element_or_end_of_stream(
                    message=f"Publisher {pub!r} produced no element {i}"
                )
                assert has_element, f"Publisher {pub!r} produced only {i - 1} elements"
            sub.request_end_of_stream()

        self.active_publisher_test(3, True, body)

    def test_required_validate_max_elements_from_publisher(self) -> None:
        maximum = self.max_elements_from_publisher()
        assert maximum >= 0, f"max_elements_from_publisher must be >= 0, got {maximum!r}"

    def test_required_validate_bounded_depth_of_on_next_and_request_recursion(self) -> None:
        depth = self.bounded_depth_of_on_next_and_request_recursion()
        assert depth >= 1, f"bounded_depth_of_on_next_and_request_recursion must be >= 1, got {depth!r}"

    # --- Rule 1.x ----------------------------------------------------------

    def test_required_spec101_subscription_request_must_result_in_the_correct_number_of_produced_elements(
        self,
    ) -> None:
        def body(pub: flow.Publisher[T]) -> None:
            sub = self.env.new_manual_subscriber(pub)
            try:
                sub.expect_none(message="Publisher signalled before any request (rule 1.1)")
                sub.request(1)
                sub.next_element(message=f"Publisher {pub!r} produced no element after request(1)")
                sub.expect_none(message="Publisher signalled more than requested (rule 1.1)")
                sub.request(1)
                sub.request(2)
                sub.next_elements(3, message=f"Publisher {pub!r} produced fewer than the 3 requested elements")
                sub.expect_none(message="Publisher signalled more than requested (rule 1.1)")
            finally:
                sub.cancel()

        self.active_publisher_test(5, False, body)

    def test_required_spec102_may_signal_less_than_requested_and_terminate_subscription(self) -> None:
        def body(pub: flow.Publisher[T]) -> None:
            sub = self.env.new_manual_subscriber(pub)
            sub.request(10)
            sub.next_elements(3)
            sub.expect_completion()

        self.active_publisher_test(3, True, body)

    def test_stochastic_spec103_must_signal_on_methods_sequentially(self) -> None:
        elements = 10
        env = self.env

        def body(pub: flow.Publisher[T]) -> None:
            completed = Latch(env)
            pub.subscribe(_Sequential(env, _ConcurrentAccessBarrier(env), completed, elements))
            completed.expect_close(f"Expected {elements} elements to be drained", elements * env.default_timeout_millis)

        self.stochastic_test(_STOCHASTIC_ITERATIONS, lambda _: self.active_publisher_test(elements, True, body))

    def _expect_on_subscribe_then_on_error(self, pub: flow.Publisher[T], *, wait_for_more: bool) -> None:
        """Subscribe to a failed publisher: exactly one ``on_subscribe``, then exactly one ``on_error``."""
        env = self.env
        on_error = Latch(env)
        on_subscribe = Latch(env)
        pub.subscribe(_Failing(env, pub, on_subscribe, on_error))
        on_subscribe.expect_close("Should have received on_subscribe")
        on_error.expect_close(f"Error-state Publisher {pub!r} did not call on_error on new Subscriber")
        if wait_for_more:
            env.verify_no_async_errors()
        else:
            env.verify_no_async_errors_no_delay()

    def test_optional_spec104_must_signal_on_error_when_fails(self) -> None:
        def body(pub: flow.Publisher[T]) -> None:
            self._expect_on_subscribe_then_on_error(pub, wait_for_more=True)

        try:
            self.when_has_error_publisher_test(body)
        except (AssertionError, SkipTest):
            raise
        except Exception as exc:
            raise AssertionError(
                f"Publisher raised {exc!r} instead of signalling the error via on_error (rule 1.4)"
            ) from exc

    def test_required_spec105_must_signal_on_complete_when_finite_stream_terminates(self) -> None:
        def body(pub: flow.Publisher[T]) -> None:
            sub = self.env.new_manual_subscriber(pub)
            sub.request_next_element()
            sub.request_next_element()
            sub.request_next_element()
            sub.request_end_of_stream()
            sub.expect_none()

        self.active_publisher_test(3, True, body)

    def test_optional_spec105_empty_stream_must_terminate_by_signalling_on_complete(self) -> None:
        def body(pub: flow.Publisher[T]) -> None:
            sub = self.env.new_manual_subscriber(pub)
            sub.request(1)
            sub.expect_completion()
            sub.expect_none()

        self.optional_active_publisher_test(0, True, body)

    def test_untested_spec106_must_consider_subscription_cancelled_after_on_error_or_on_complete_has_been_called(
        self,
    ) -> None:
        self.untested()

    def test_required_spec107_must_not_emit_further_signals_once_on_complete_has_been_signalled(self) -> None:
        def body(pub: flow.Publisher[T]) -> None:
            sub = self.env.new_manual_subscriber(pub)
            sub.request(10)
            sub.next_element()
            sub.expect_completion()
            sub.request(10)
            sub.expect_none(message="Publisher signalled after on_complete (rule 1.7)")

        self.active_publisher_test(1, True, body)

    def test_untested_spec107_must_not_emit_further_signals_once_on_error_has_been_signalled(self) -> None:
        self.untested()

    def test_untested_spec108_possibly_canceled_subscription_should_not_receive_on_error_or_on_complete_signals(
        self,
    ) -> None:
        self.untested()

    def test_untested_spec109_subscribe_should_not_throw_non_fatal_throwable(self) -> None:
        self.untested()

    def test_required_spec109_subscribe_throw_npe_on_null_subscriber(self) -> None:
        def body(pub: flow.Publisher[T]) -> None:
            try:
                pub.subscribe(None)  # type: ignore[arg-type]
            except TypeError:
                return
            except Exception as exc:
                self.env.flop(
                    f"Publisher raised {exc!r} instead of TypeError when given a None Subscriber "
                    "in subscribe (rule 1.9)"
                )
                return
            self.env.flop("Publisher did not raise a TypeError when given a None Subscriber in subscribe (rule 1.9)")

        self.active_publisher_test(0, False, body)

    def test_required_spec109_must_issue_on_subscribe_for_non_null_subscriber(self) -> None:
        env = self.env

        def body(pub: flow.Publisher[T]) -> None:
            on_subscribe = Latch(env)
            subscriptions: list[flow.Subscription] = []
            try:
                pub.subscribe(_Checking(on_subscribe, subscriptions))
                on_subscribe.expect_close("Should have received on_subscribe")
                env.verify_no_async_errors_no_delay()
            finally:
                for subscription in subscriptions[:1]:
                    subscription.cancel()

        self.active_publisher_test(0, False, body)

    def test_required_spec109_may_reject_calls_to_subscribe_if_publisher_is_unable_or_unwilling_to_serve_them_rejection_must_trigger_on_error_after_on_subscribe(  # noqa: E501
        self,
    ) -> None:
        self.when_has_error_publisher_test(
            lambda pub: self._expect_on_subscribe_then_on_error(pub, wait_for_more=False)
        )

    def test_untested_spec110_reject_a_subscription_request_if_the_same_subscriber_subscribes_twice(self) -> None:
        self.untested()

    def _two_subscribers(self, pub: flow.Publisher[T], *, each_requests_one: bool) -> None:
        sub1 = self.env.new_manual_subscriber(pub)
        sub2 = self.env.new_manual_subscriber(pub)
        try:
            if each_requests_one:
                # Unicast or multicast is the publisher's choice: each
                # subscriber gets an element or completion.
                sub1.request_next_element_or_end_of_stream()
                sub2.request_next_element_or_end_of_stream()
            self.env.verify_no_async_errors()
        finally:
            try:
                sub1.cancel()
            finally:
                sub2.cancel()

    def test_optional_spec111_may_support_multi_subscribe(self) -> None:
        self.optional_active_publisher_test(1, False, lambda pub: self._two_subscribers(pub, each_requests_one=False))

    def test_optional_spec111_registered_subscribers_must_receive_on_next_or_on_complete_signals(self) -> None:
        self.optional_active_publisher_test(1, False, lambda pub: self._two_subscribers(pub, each_requests_one=True))

    def test_optional_spec111_multicast_must_produce_the_same_elements_in_the_same_sequence_to_all_of_its_subscribers_when_requesting_one_by_one(  # noqa: E501
        self,
    ) -> None:
        def body(pub: flow.Publisher[T]) -> None:
            sub1 = self.env.new_manual_subscriber(pub)
            sub2 = self.env.new_manual_subscriber(pub)
            sub3 = self.env.new_manual_subscriber(pub)
            received1: list[T] = [sub1.request_next_element()]
            received2 = sub2.request_next_elements(2)
            received1.append(sub1.request_next_element())
            received3 = sub3.request_next_elements(3)
            received3.append(sub3.request_next_element())
            received3.append(sub3.request_next_element())
            sub3.request_end_of_stream()
            received2 += sub2.request_next_elements(3)
            sub2.request_end_of_stream()
            received1 += sub1.request_next_elements(2)
            received1.append(sub1.request_next_element())
            sub1.request_end_of_stream()
            _assert_same_sequences(received1, received2, received3)

        self.optional_active_publisher_test(5, True, body)

    def test_optional_spec111_multicast_must_produce_the_same_elements_in_the_same_sequence_to_all_of_its_subscribers_when_requesting_many_upfront(  # noqa: E501
        self,
    ) -> None:
        self.optional_active_publisher_test(3, False, lambda pub: self._many_upfront(pub, complete=False))

    def test_optional_spec111_multicast_must_produce_the_same_elements_in_the_same_sequence_to_all_of_its_subscribers_when_requesting_many_upfront_and_complete_as_expected(  # noqa: E501
        self,
    ) -> None:
        self.optional_active_publisher_test(3, True, lambda pub: self._many_upfront(pub, complete=True))

    def _many_upfront(self, pub: flow.Publisher[T], *, complete: bool) -> None:
        subs = [self.env.new_manual_subscriber(pub) for _ in range(3)]
        for sub in subs:
            sub.request(4)
        received = [sub.next_elements(3) for sub in subs]
        if complete:
            for sub in subs:
                sub.expect_completion()
        _assert_same_sequences(*received)

    # --- Rule 3.x ----------------------------------------------------------

    def test_required_spec302_must_allow_synchronous_request_calls_from_on_next_and_on_subscribe(self) -> None:
        def body(pub: flow.Publisher[T]) -> None:
            self.env.subscribe(pub, _Requesting[T](self.env))
            self.env.verify_no_async_errors()

        self.active_publisher_test(6, False, body)

    def test_required_spec303_must_not_allow_unbounded_recursion(self) -> None:
        bound = self.bounded_depth_of_on_next_and_request_recursion()
        limit = bound + 1
        env = self.env

        def body(pub: flow.Publisher[T]) -> None:
            run_completed = Latch(env)
            sub = _Recursing[T](env, run_completed, bound, limit)
            try:
                env.subscribe(pub, sub)
                sub.request(1)  # kicks off request -> on_next -> request -> ...
                run_completed.expect_close(
                    f"Unable to validate call stack depth safety, awaited at-most {limit} signals "
                    "(bounded_depth_of_on_next_and_request_recursion() + 1) or completion"
                )
                env.verify_no_async_errors_no_delay()
            finally:
                sub.cancel()

        self.active_publisher_test(limit, False, body)

    def test_untested_spec304_request_should_not_perform_heavy_computations(self) -> None:
        self.untested()

    def test_untested_spec305_cancel_must_not_synchronously_perform_heavy_computation(self) -> None:
        self.untested()

    def test_required_spec306_after_subscription_is_cancelled_request_must_be_nops(self) -> None:
        def body(pub: flow.Publisher[T]) -> None:
            sub = self.env.new_manual_subscriber(pub)
            sub.cancel()
            sub.request(1)
            sub.request(1)
            sub.request(1)
            sub.expect_none(message="Publisher signalled after the subscription was cancelled (rule 3.6)")
            self.env.verify_no_async_errors_no_delay()

        self.active_publisher_test(3, False, body)

    def test_required_spec307_after_subscription_is_cancelled_additional_cancelations_must_be_nops(self) -> None:
        def body(pub: flow.Publisher[T]) -> None:
            sub = self.env.new_manual_subscriber(pub)
            sub.cancel()
            sub.cancel()
            sub.cancel()
            sub.expect_none(message="Publisher signalled after the subscription was cancelled (rule 3.7)")
            self.env.verify_no_async_errors_no_delay()

        self.active_publisher_test(1, False, body)

    def test_required_spec309_request_zero_must_signal_illegal_argument_exception(self) -> None:
        def body(pub: flow.Publisher[T]) -> None:
            sub = self.env.new_manual_subscriber(pub)
            sub.request(0)
            sub.expect_error(ValueError)

        self.active_publisher_test(10, False, body)

    def test_required_spec309_request_negative_number_must_signal_illegal_argument_exception(self) -> None:
        def body(pub: flow.Publisher[T]) -> None:
            sub = self.env.new_manual_subscriber(pub)
            sub.request(-random.randrange(2**31 - 1) - 1)
            sub.expect_error(ValueError)

        self.active_publisher_test(10, False, body)

    def test_optional_spec309_request_negative_number_may_signal_illegal_argument_exception_with_specific_message(
        self,
    ) -> None:
        def body(pub: flow.Publisher[T]) -> None:
            sub = self.env.new_manual_subscriber(pub)
            sub.request(-random.randrange(2**31 - 1) - 1)
            sub.expect_error_with_message(
                ValueError, ["3.9", "non-positive subscription request", "negative subscription request"]
            )

        self.optional_active_publisher_test(10, False, body)

    def test_required_spec312_cancel_must_make_the_publisher_to_eventually_stop_signaling(self) -> None:
        def body(pub: flow.Publisher[T]) -> None:
            sub = self.env.new_manual_subscriber(pub)
            sub.request(10)
            sub.request(5)
            total_demand = 10 + 5
            sub.next_element()
            sub.cancel()
            signalled = 1
            while True:
                sub.expect_none()  # flops once per element still arriving
                if self.env.drop_async_error() is None:
                    break
                signalled += 1
                assert signalled <= total_demand, (
                    f"Publisher signalled [{signalled}] elements, which is more than the signalled demand: "
                    f"{total_demand} (rule 3.12)"
                )

        self.active_publisher_test(20, False, body)

    def test_required_spec313_cancel_must_make_the_publisher_eventually_drop_all_references_to_the_subscriber(
        self,
    ) -> None:
        def subscribe_and_cancel(pub: flow.Publisher[T], collected: queue.SimpleQueue[bool]) -> None:
            # A function of its own, so that no frame of the test keeps the subscriber.
            sub = self.env.new_manual_subscriber(pub)
            # The finalizer runs on whichever thread frees the subscriber, inside
            # whatever it is doing, this test's wait included: SimpleQueue.put takes
            # no lock that thread may hold (Event.set takes the one Event.wait holds).
            weakref.finalize(sub, collected.put, True)
            sub.request(1)
            sub.next_element()
            sub.cancel()

        def body(pub: flow.Publisher[T]) -> None:
            collected: queue.SimpleQueue[bool] = queue.SimpleQueue()
            subscribe_and_cancel(pub, collected)
            # cancel may take effect asynchronously: collect until the deadline.
            slices = max(1, self.publisher_reference_gc_timeout_millis() // 10) + 10
            for _ in range(slices):
                gc.collect()
                if _arrives(collected, 0.01):
                    break
            else:
                self.env.flop(
                    f"Publisher {pub!r} did not drop reference to test subscriber after subscription "
                    "cancellation (rule 3.13)"
                )
            self.env.verify_no_async_errors_no_delay()

        self.active_publisher_test(3, False, body)

    def test_required_spec317_must_support_a_pending_element_count_up_to_long_max_value(self) -> None:
        def body(pub: flow.Publisher[T]) -> None:
            sub = self.env.new_manual_subscriber(pub)
            sub.request(LONG_MAX)
            sub.next_elements(3)
            sub.expect_completion()

        self.active_publisher_test(3, True, body)

    def test_required_spec317_must_support_a_cumulative_pending_element_count_up_to_long_max_value(self) -> None:
        def body(pub: flow.Publisher[T]) -> None:
            sub = self.env.new_manual_subscriber(pub)
            sub.request(LONG_MAX // 2)
            sub.request(LONG_MAX // 2)
            sub.request(1)  # the total is now exactly 2**63 - 1
            sub.next_elements(3)
            sub.expect_completion()
            self.env.verify_no_async_errors_no_delay()

        self.active_publisher_test(3, True, body)

    def test_required_spec317_must_not_signal_on_error_when_pending_above_long_max_value(self) -> None:
        env = self.env

        def body(pub: flow.Publisher[T]) -> None:
            sub = _Overflowing[T](env)
            env.subscribe(pub, sub)
            sub.request(1)  # each on_next requests 2**63 - 2 more, up to 10 times
            try:
                env.verify_no_async_errors()  # no on_error may come from the overflow
            finally:
                sub.cancel()

        self.active_publisher_test(2**31 - 1, False, body)


def _arrives(signal: queue.SimpleQueue[bool], timeout: float) -> bool:
    """Whether ``signal`` gets an item within ``timeout`` seconds (taking it)."""
    try:
        signal.get(timeout=timeout)
    except queue.Empty:
        return False
    return True


def _assert_same_sequences(*received: list[T]) -> None:
    first = received[0]
    for number, other in enumerate(received[1:], start=2):
        assert other == first, (
            f"Expected elements to be signaled in the same sequence to 1st and {number}. subscribers: "
            f"{first!r} != {other!r}"
        )


# The subscribers of single tests. Classes of the module's, not made in the
# tests: CPython 3.13t never frees a class made once a thread has started, nor
# what its methods keep (docs/internals.md, "Classes made at run time").


class _Sequential(flow.Subscriber[T]):
    """Requests one at a time up to ``elements`` and checks that no two signals overlap (rule 1.3)."""

    def __init__(
        self, env: TestEnvironment, barrier: _ConcurrentAccessBarrier, completed: Latch, elements: int
    ) -> None:
        self._env = env
        self._barrier = barrier
        self._completed = completed
        self._elements = elements
        self.subscription: flow.Subscription | None = None
        self.received = 0

    def on_subscribe(self, subscription: flow.Subscription) -> None:
        self._barrier.enter("on_subscribe")
        self.subscription = subscription
        subscription.request(1)
        self._barrier.leave("on_subscribe")

    def on_next(self, item: T) -> None:
        self._barrier.enter("on_next")
        self.received += 1
        if self.received <= self._elements and self.subscription is not None:
            self.subscription.request(1)
        self._barrier.leave("on_next")

    def on_error(self, error: BaseException) -> None:
        self._barrier.enter("on_error")
        self._env.flop(f"Unexpected on_error({error!r})", error)
        self._barrier.leave("on_error")

    def on_complete(self) -> None:
        self._barrier.enter("on_complete")
        self._completed.close()
        self._barrier.leave("on_complete")


class _Failing(TestSubscriber[T]):
    """Expects one ``on_subscribe``, then one ``on_error``, from the failed publisher ``pub``."""

    def __init__(self, env: TestEnvironment, pub: flow.Publisher[T], on_subscribe: Latch, on_error: Latch) -> None:
        super().__init__(env)
        self._pub = pub
        self._on_subscribe = on_subscribe
        self._on_error = on_error

    def on_subscribe(self, subscription: flow.Subscription) -> None:
        self._on_subscribe.assert_open("Only one on_subscribe call expected")
        self._on_subscribe.close()

    def on_error(self, error: BaseException) -> None:
        self._on_subscribe.assert_closed("on_subscribe should be called prior to on_error always")
        self._on_error.assert_open(f"Error-state Publisher {self._pub!r} called on_error twice on new Subscriber")
        self._on_error.close()


class _Checking(flow.Subscriber[T]):
    """Checks that ``on_subscribe`` comes once and first (rule 1.9); keeps the subscription for the cancel."""

    def __init__(self, on_subscribe: Latch, subscriptions: list[flow.Subscription]) -> None:
        self._on_subscribe = on_subscribe
        self._subscriptions = subscriptions

    def on_subscribe(self, subscription: flow.Subscription) -> None:
        self._subscriptions.append(subscription)
        self._on_subscribe.assert_open("Only one on_subscribe call expected")
        self._on_subscribe.close()

    def on_next(self, item: T) -> None:
        self._on_subscribe.assert_closed("on_subscribe should be called prior to on_next always")

    def on_error(self, error: BaseException) -> None:
        self._on_subscribe.assert_closed("on_subscribe should be called prior to on_error always")

    def on_complete(self) -> None:
        self._on_subscribe.assert_closed("on_subscribe should be called prior to on_complete always")


class _Requesting(ManualSubscriber[T]):
    """Requests from inside ``on_subscribe`` and ``on_next`` (rule 3.2)."""

    def on_subscribe(self, subscription: flow.Subscription) -> None:
        self.subscription.complete(subscription)
        subscription.request(1)
        subscription.request(1)
        subscription.request(1)

    def on_next(self, item: T) -> None:
        self.subscription.value().request(1)


class _Recursing(ManualSubscriberWithSubscriptionSupport[T]):
    """Requests one more from each ``on_next`` and flops past ``bound`` nested calls (rule 3.3)."""

    def __init__(self, env: TestEnvironment, run_completed: Latch, bound: int, limit: int) -> None:
        super().__init__(env)
        self._run_completed = run_completed
        self._bound = bound
        self._limit = limit
        self._depth = threading.local()
        self.signals_received = 0

    def on_next(self, item: T) -> None:
        # Elements are not kept: only the stack depth matters.
        self.signals_received += 1
        depth = self._depth
        depth.value = getattr(depth, "value", 0) + 1
        if depth.value > self._bound:
            self.env.flop(
                f"Got {depth.value} on_next calls within thread {threading.current_thread().name}, "
                f"yet expected recursive bound was {self._bound} (rule 3.3)"
            )
            self._run_completed.close()
            return
        if self.signals_received >= self._limit:
            self._run_completed.close()
            return
        self.subscription.value().request(1)  # the publisher must break the recursion
        depth.value -= 1

    def on_complete(self) -> None:
        super().on_complete()
        self._run_completed.close()

    def on_error(self, error: BaseException) -> None:
        super().on_error(error)
        self._run_completed.close()


class _Overflowing(BlackholeSubscriberWithSubscriptionSupport[T]):
    """Requests ``2**63 - 2`` more from each ``on_next``, ten times, then cancels (rule 3.17)."""

    calls_left = 10  # two calls already overflow; ten is safely more

    def on_next(self, item: T) -> None:
        if self.calls_left > 0:
            self.calls_left -= 1
            self.subscription.value().request(LONG_MAX - 1)
        else:
            self.subscription.value().cancel()
