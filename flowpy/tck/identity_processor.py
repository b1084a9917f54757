"""IdentityProcessorVerification: the 68 tests of a Flow processor that passes items through.

Port of ``org.reactivestreams.tck.IdentityProcessorVerification`` (TCK
1.0.4): the 38 publisher tests run against a processor fed by the helper
publisher, the 27 whitebox subscriber tests run against a processor whose
downstream reports to the probe, and three tests of its own check rules
1.4 and 4.2 with several subscribers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from flowpy import flow
from flowpy.tck._base import Verification, WithHelperPublisher, verification_tests
from flowpy.tck._stages import LONG_MAX, ElementStage
from flowpy.tck.environment import TestEnvironment
from flowpy.tck.probes import SubscriptionPuppet, WhiteboxSubscriberProbe
from flowpy.tck.publisher_verification import PublisherConfiguration, PublisherVerification
from flowpy.tck.signals import TEST_BUFFER_SIZE, Receptacle
from flowpy.tck.skips import SKIPPING_TOO_FEW_SUBSCRIBERS, skip
from flowpy.tck.subscriber_whitebox import SubscriberWhiteboxVerification
from flowpy.tck.subscribers import ManualSubscriber, ManualSubscriberWithSubscriptionSupport

__all__ = ["IdentityProcessorVerification"]

T = TypeVar("T")

_COORDINATION_HINT = (
    "If the Processor coordinates requests/emissions when having multiple Subscribers at once, please "
    "override does_coordinated_emission() to return True in this IdentityProcessorVerification to allow "
    "this test to pass."
)

# Publisher tests that need several subscribers, and how many.
_MULTI_SUBSCRIBER_TESTS = {
    name: (3 if "_multicast_" in name else 2)
    for name in verification_tests(PublisherVerification)
    if "_spec111_" in name
}


class IdentityProcessorVerification(Verification, WithHelperPublisher, PublisherConfiguration[T]):
    """The publisher, subscriber and processor rules, verified against :meth:`create_identity_processor`.

    Hooks to implement: :meth:`create_identity_processor`; usually
    :meth:`create_failed_publisher` and ``create_element(i)``. Hooks to
    override when needed: :meth:`max_supported_subscribers`,
    :meth:`does_coordinated_emission`, :meth:`processor_buffer_size`,
    :meth:`max_elements_from_publisher`,
    :meth:`bounded_depth_of_on_next_and_request_recursion`,
    :meth:`skip_stochastic_tests`, ``publisher_executor_service()``,
    ``create_test_environment()``.
    """

    # --- Configuration hooks -------------------------------------------

    def create_identity_processor(self, buffer_size: int) -> flow.Processor[T, T]:
        """Return a new processor that emits what it receives, buffering up to ``buffer_size``.

        Raises:
            NotImplementedError: unless overridden.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement create_identity_processor(buffer_size)")

    def max_supported_subscribers(self) -> int:
        """How many subscribers the processor serves at once; default unbounded. Return 1 for no fan-out."""
        return LONG_MAX

    def does_coordinated_emission(self) -> bool:
        """Whether the processor requests and emits only once every subscriber has requested."""
        return False

    def processor_buffer_size(self) -> int:
        """The ``buffer_size`` passed to :meth:`create_identity_processor`; default 16."""
        return TEST_BUFFER_SIZE

    # --- Delegates -------------------------------------------------------

    def publisher_verification(self) -> PublisherVerification[T]:
        """The publisher verification run against processors fed by the helper publisher."""
        return _ProcessorPublisherVerification(self)

    def subscriber_verification(self) -> SubscriberWhiteboxVerification[T]:
        """The whitebox verification run against processors whose downstream reports to the probe."""
        return _ProcessorSubscriberVerification(self)

    def multiple_subscribers_test(self, subscribers: int, body: Callable[[], None]) -> None:
        """Run ``body``, or skip if the processor supports fewer than ``subscribers``."""
        supported = self.max_supported_subscribers()
        if supported < subscribers:
            skip(
                f"{SKIPPING_TOO_FEW_SUBSCRIBERS}{subscribers} subscribers and "
                f"max_supported_subscribers() is {supported}"
            )
        body()

    # --- Tests of its own ---------------------------------------------------

    def test_required_spec104_must_call_on_error_on_all_its_subscribers_if_it_encounters_a_non_recoverable_error(
        self,
    ) -> None:
        def body() -> None:
            setup = _ProcessorSetup(self)
            try:
                sub1 = setup.new_error_collecting_subscriber()
                sub2 = setup.new_error_collecting_subscriber()
                error = RuntimeError("Test exception")
                if self.does_coordinated_emission():
                    sub1.request(1)
                    sub2.request(1)
                    setup.expect_request()
                    x = setup.signal_next()
                    setup.expect_next_element(sub1, x)
                    setup.expect_next_element(sub2, x)
                    sub1.request(1)
                    sub2.request(1)
                else:
                    sub1.request(1)
                    setup.expect_request(message=f"Did not receive expected `request` call. {_COORDINATION_HINT}")
                    x = setup.signal_next()
                    setup.expect_next_element(sub1, x, _COORDINATION_HINT)
                    sub1.request(1)  # sub2 has requested nothing yet
                setup.send_error(error)
                sub1.expect_error_instance(error)
                sub2.expect_error_instance(error)
                self.env.verify_no_async_errors_no_delay()
            finally:
                setup.close()

        self.multiple_subscribers_test(2, body)

    def test_must_immediately_pass_on_on_error_events_received_from_its_upstream_to_its_downstream(self) -> None:
        setup = _ProcessorSetup(self)
        try:
            sub = setup.new_error_collecting_subscriber()
            error = RuntimeError("Test exception")
            setup.send_error(error)
            sub.expect_error_instance(error)  # without any request (rule 4.2)
            self.env.verify_no_async_errors_no_delay()
        finally:
            setup.close()

    def test_required_must_request_from_upstream_for_elements_that_have_been_requested_long_ago(self) -> None:
        def body() -> None:
            setup = _ProcessorSetup(self)
            try:
                sub1 = self.env.new_manual_subscriber(setup.processor)
                sub1.request(20)
                total_requests = setup.expect_request()
                x = setup.signal_next()
                setup.expect_next_element(sub1, x)
                if total_requests == 1:
                    total_requests += setup.expect_request()
                y = setup.signal_next()
                setup.expect_next_element(sub1, y)
                if total_requests == 2:
                    total_requests += setup.expect_request()
                sub2 = self.env.new_manual_subscriber(setup.processor)
                # sub1 has 18 pending, sub2 none
                if self.does_coordinated_emission():
                    sub2.expect_none()
                    sub2.request(1)
                    z = setup.signal_next()
                    setup.expect_next_element(sub1, z)
                    setup.expect_next_element(sub2, z)
                else:
                    z = setup.signal_next()
                    setup.expect_next_element(sub1, z, _COORDINATION_HINT)
                    sub2.expect_none()
                    sub2.request(1)
                    setup.expect_next_element(sub2, z)
                if total_requests == 3:
                    setup.expect_request()
                setup.send_completion()
                sub1.expect_completion()
                sub2.expect_completion()
                self.env.verify_no_async_errors_no_delay()
            finally:
                setup.close()

        self.multiple_subscribers_test(2, body)


class _ErrorCollectingSubscriber(ManualSubscriberWithSubscriptionSupport[T]):
    """A manual subscriber that keeps the errors it receives instead of flopping them."""

    def __init__(self, env: TestEnvironment) -> None:
        super().__init__(env)
        self.errors: Receptacle[BaseException] = Receptacle(env)

    def on_error(self, error: BaseException) -> None:
        self.errors.add(error)

    def expect_error_instance(self, expected: BaseException) -> None:
        """Expect ``on_error`` with ``expected`` (identity or equality)."""
        error = self.errors.next(
            self.env.default_timeout_millis, f"Subscriber did not receive the expected on_error({expected!r})"
        )
        if error is not expected and error != expected:
            self.env.flop_and_fail(f"Subscriber received on_error({error!r}), expected on_error({expected!r})")


class _ProcessorSetup(ElementStage[T]):
    """A processor subscribed to a manual upstream whose elements come from the helper publisher."""

    def __init__(self, verification: IdentityProcessorVerification[T]) -> None:
        super().__init__(verification.env, verification.create_helper_publisher(LONG_MAX))
        self.processor = verification.create_identity_processor(verification.processor_buffer_size())
        self._seen: list[Any] = []
        self.subscribe(self.processor)

    def next_t(self) -> T:
        element = super().next_t()
        if element in self._seen:
            self.env.flop(f"Helper publisher illegally produced the same element {element!r} twice")
        self._seen.append(element)
        return element

    def new_error_collecting_subscriber(self) -> _ErrorCollectingSubscriber[T]:
        sub: _ErrorCollectingSubscriber[T] = _ErrorCollectingSubscriber(self.env)
        self.env.subscribe(self.processor, sub)
        return sub

    def expect_next_element(self, sub: ManualSubscriber[T], expected: T, hint: str = "") -> None:
        element = sub.next_element(message=f"timeout while awaiting {expected!r}. {hint}".rstrip(". "))
        if element != expected:
            self.env.flop(f"Received `on_next({element!r})` on downstream but expected `on_next({expected!r})`")


class _ProcessorPublisherVerification(PublisherVerification[T]):
    """Publisher tests against ``create_identity_processor`` fed by ``create_helper_publisher(n)``."""

    def __init__(self, outer: IdentityProcessorVerification[T]) -> None:
        self._outer = outer
        self._env = outer.env

    def create_publisher(self, elements: int) -> flow.Publisher[T]:
        processor = self._outer.create_identity_processor(self._outer.processor_buffer_size())
        self._outer.create_helper_publisher(elements).subscribe(processor)
        return processor

    def create_failed_publisher(self) -> flow.Publisher[T] | None:
        return self._outer.create_failed_publisher()

    def max_elements_from_publisher(self) -> int:
        return self._outer.max_elements_from_publisher()

    def bounded_depth_of_on_next_and_request_recursion(self) -> int:
        return self._outer.bounded_depth_of_on_next_and_request_recursion()

    def skip_stochastic_tests(self) -> bool:
        return self._outer.skip_stochastic_tests()

    def publisher_reference_gc_timeout_millis(self) -> int:
        return self._outer.publisher_reference_gc_timeout_millis()


class _ProbeSubscriber(ManualSubscriberWithSubscriptionSupport[T]):
    """The processor's downstream in the whitebox tests: reports every signal to the probe."""

    def __init__(self, env: TestEnvironment, probe: WhiteboxSubscriberProbe[T]) -> None:
        super().__init__(env)
        self._probe = probe

    def on_subscribe(self, subscription: flow.Subscription) -> None:
        if self.subscription.is_completed:
            subscription.cancel()  # rule 2.5
            return
        self.subscription.complete(subscription)
        self._probe.register_on_subscribe(SubscriptionPuppet(subscription))

    def on_next(self, item: T) -> None:
        self._probe.register_on_next(item)

    def on_error(self, error: BaseException) -> None:
        self._probe.register_on_error(error)

    def on_complete(self) -> None:
        self._probe.register_on_complete()


class _ProcessorSubscriberVerification(SubscriberWhiteboxVerification[T]):
    """Whitebox tests against a processor whose downstream reports to the probe."""

    def __init__(self, outer: IdentityProcessorVerification[T]) -> None:
        self._outer = outer
        self._env = outer.env

    def create_subscriber(self, probe: WhiteboxSubscriberProbe[T]) -> flow.Subscriber[T]:
        processor = self._outer.create_identity_processor(self._outer.processor_buffer_size())
        processor.subscribe(_ProbeSubscriber(self.env, probe))
        return processor

    def create_helper_publisher(self, elements: int) -> flow.Publisher[Any]:
        return self._outer.create_helper_publisher(elements)

    def create_element(self, element: int) -> Any:
        return self._outer.create_element(element)


def _delegate(name: str, delegate: Callable[[Any], Any], subscribers: int | None) -> Callable[[Any], None]:
    def test(self: IdentityProcessorVerification[Any]) -> None:
        run = getattr(delegate(self), name)
        if subscribers is None:
            run()
        else:
            self.multiple_subscribers_test(subscribers, run)

    test.__name__ = test.__qualname__ = name
    test.__doc__ = f"Delegated to the {delegate.__name__.replace('_', ' ')}."
    return test


for _verification, _factory in (
    (PublisherVerification, IdentityProcessorVerification.publisher_verification),
    (SubscriberWhiteboxVerification, IdentityProcessorVerification.subscriber_verification),
):
    for _name in verification_tests(_verification):
        setattr(
            IdentityProcessorVerification,
            _name,
            _delegate(_name, _factory, _MULTI_SUBSCRIBER_TESTS.get(_name)),
        )
del _verification, _factory, _name
