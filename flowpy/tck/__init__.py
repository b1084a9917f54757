"""flowpy.tck: the Reactive Streams TCK 1.0.4, ported to Python."""

from flowpy.tck.environment import (
    BlackholeSubscriberWithSubscriptionSupport,
    Latch,
    ManualPublisher,
    ManualSubscriber,
    ManualSubscriberWithSubscriptionSupport,
    Promise,
    Receptacle,
    SkipTest,
    TestEnvironment,
    TestException,
)
from flowpy.tck.helper_publisher import AsyncIterablePublisher
from flowpy.tck.probes import BlackboxProbe, SubscriberPuppet, WhiteboxSubscriberProbe
from flowpy.tck.publisher_verification import PUBLISHER_UNABLE_TO_SIGNAL_ON_COMPLETE, PublisherVerification

__all__ = [
    "PUBLISHER_UNABLE_TO_SIGNAL_ON_COMPLETE",
    "AsyncIterablePublisher",
    "BlackboxProbe",
    "BlackholeSubscriberWithSubscriptionSupport",
    "Latch",
    "ManualPublisher",
    "ManualSubscriber",
    "ManualSubscriberWithSubscriptionSupport",
    "Promise",
    "PublisherVerification",
    "Receptacle",
    "SkipTest",
    "SubscriberPuppet",
    "TestEnvironment",
    "TestException",
    "WhiteboxSubscriberProbe",
]
