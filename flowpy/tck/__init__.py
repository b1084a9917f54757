"""flowpy.tck: the Reactive Streams TCK 1.0.4 for Python.

Subclass a verification in a pytest module, in a class named ``Test...``,
and implement its factory hooks; pytest then runs every rule test::

    from flowpy.tck import PublisherVerification

    class TestMyPublisher(PublisherVerification[int]):
        def create_publisher(self, elements: int) -> flow.Publisher[int]:
            return MyPublisher(range(elements))

Or run one from the command line: ``python -m flowpy.tck publisher MODULE:FACTORY``.

The verifications target the Flow API (:mod:`flowpy.flow`); the
``ReactiveStreams*`` variants verify the Reactive Streams API
(:mod:`flowpy.reactivestreams`) through :mod:`flowpy.adapters`.
"""

from flowpy.tck._base import WithHelperPublisher
from flowpy.tck.environment import (
    DEFAULT_TIMEOUT_MILLIS,
    TEST_BUFFER_SIZE,
    BlackholeSubscriberWithSubscriptionSupport,
    Latch,
    ManualPublisher,
    ManualSubscriber,
    ManualSubscriberWithSubscriptionSupport,
    Promise,
    Receptacle,
    SubscriberBufferOverflowError,
    TestEnvironment,
    TestException,
    TestSubscriber,
)
from flowpy.tck.helper_publisher import AsyncIterablePublisher
from flowpy.tck.identity_processor import IdentityProcessorVerification
from flowpy.tck.probes import BlackboxProbe, BlackboxSubscriberProxy, SubscriberPuppet, WhiteboxSubscriberProbe
from flowpy.tck.publisher_verification import PUBLISHER_UNABLE_TO_SIGNAL_ON_COMPLETE, PublisherVerification
from flowpy.tck.reactive_streams import (
    ReactiveStreamsIdentityProcessorVerification,
    ReactiveStreamsPublisherVerification,
    ReactiveStreamsSubscriberBlackboxVerification,
    ReactiveStreamsSubscriberWhiteboxVerification,
)
from flowpy.tck.skips import (
    NOT_VERIFIED,
    SKIPPING_NO_ERROR_PUBLISHER_AVAILABLE,
    SKIPPING_OPTIONAL_TEST_FAILED,
    SKIPPING_STOCHASTIC_TEST,
    SKIPPING_TOO_FEW_ELEMENTS,
    SKIPPING_TOO_FEW_SUBSCRIBERS,
    SKIPPING_UNABLE_TO_COMPLETE,
    SkipTest,
)
from flowpy.tck.subscriber_blackbox import SubscriberBlackboxVerification
from flowpy.tck.subscriber_whitebox import SubscriberWhiteboxVerification

__all__ = [
    "DEFAULT_TIMEOUT_MILLIS",
    "NOT_VERIFIED",
    "PUBLISHER_UNABLE_TO_SIGNAL_ON_COMPLETE",
    "SKIPPING_NO_ERROR_PUBLISHER_AVAILABLE",
    "SKIPPING_OPTIONAL_TEST_FAILED",
    "SKIPPING_STOCHASTIC_TEST",
    "SKIPPING_TOO_FEW_ELEMENTS",
    "SKIPPING_TOO_FEW_SUBSCRIBERS",
    "SKIPPING_UNABLE_TO_COMPLETE",
    "TEST_BUFFER_SIZE",
    "AsyncIterablePublisher",
    "BlackboxProbe",
    "BlackboxSubscriberProxy",
    "BlackholeSubscriberWithSubscriptionSupport",
    "IdentityProcessorVerification",
    "Latch",
    "ManualPublisher",
    "ManualSubscriber",
    "ManualSubscriberWithSubscriptionSupport",
    "Promise",
    "PublisherVerification",
    "ReactiveStreamsIdentityProcessorVerification",
    "ReactiveStreamsPublisherVerification",
    "ReactiveStreamsSubscriberBlackboxVerification",
    "ReactiveStreamsSubscriberWhiteboxVerification",
    "Receptacle",
    "SkipTest",
    "SubscriberBlackboxVerification",
    "SubscriberBufferOverflowError",
    "SubscriberPuppet",
    "SubscriberWhiteboxVerification",
    "TestEnvironment",
    "TestException",
    "TestSubscriber",
    "WhiteboxSubscriberProbe",
    "WithHelperPublisher",
]
