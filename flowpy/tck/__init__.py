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

Dependency rule: ``flowpy.tck`` imports the standard library, its own
modules and flowpy's API layer, and nothing else of flowpy. The API layer is
:mod:`flowpy.flow`, :mod:`flowpy.reactivestreams`, :mod:`flowpy.adapters`,
:mod:`flowpy.errors`, and four leaf modules: ``flowpy._demand`` (what a
valid ``request(n)`` is and how demand adds up, rules 3.9 and 3.17),
``flowpy._checks`` (argument checks and their messages, rules 1.9 and
2.13), ``flowpy._pool`` (the executor kinds and the daemon thread pool the
helper publisher runs on) and ``flowpy._fork`` (the one after-fork reset
that the pool and the kit register with). The API layer imports only the
standard library and itself. The implementation (executors, submission, processors, sources,
subscribers, operators, interop, spark) is never imported, so the kit can
test any library, flowpy included, without sharing its machinery.
``tests/tck/test_dependency_rule.py`` enforces it.

Modules, one concept each: ``environment`` (:class:`TestEnvironment`),
``signals`` (:class:`Latch`, :class:`Promise`, :class:`Receptacle`),
``subscribers`` (the test subscribers), ``manual_publisher``
(:class:`ManualPublisher`), ``probes``, ``helper_publisher``
(:class:`AsyncIterablePublisher`), ``skips``, one module per
verification, ``reactive_streams`` (their Reactive Streams variants),
``runner`` and ``cli``.
"""

from flowpy.tck._base import WithHelperPublisher
from flowpy.tck.environment import DEFAULT_TIMEOUT_MILLIS, TestEnvironment, TestException
from flowpy.tck.helper_publisher import AsyncIterablePublisher
from flowpy.tck.identity_processor import IdentityProcessorVerification
from flowpy.tck.manual_publisher import ManualPublisher
from flowpy.tck.probes import (
    BlackboxProbe,
    BlackboxSubscriberProxy,
    SubscriberPuppet,
    SubscriptionPuppet,
    WhiteboxSubscriberProbe,
)
from flowpy.tck.publisher_verification import PUBLISHER_UNABLE_TO_SIGNAL_ON_COMPLETE, PublisherVerification
from flowpy.tck.reactive_streams import (
    ReactiveStreamsIdentityProcessorVerification,
    ReactiveStreamsPublisherVerification,
    ReactiveStreamsSubscriberBlackboxVerification,
    ReactiveStreamsSubscriberWhiteboxVerification,
)
from flowpy.tck.signals import TEST_BUFFER_SIZE, Latch, Promise, Receptacle, SubscriberBufferOverflowError
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
from flowpy.tck.subscribers import (
    BlackholeSubscriberWithSubscriptionSupport,
    ManualSubscriber,
    ManualSubscriberWithSubscriptionSupport,
    TestSubscriber,
)

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
    "SubscriptionPuppet",
    "TestEnvironment",
    "TestException",
    "TestSubscriber",
    "WhiteboxSubscriberProbe",
    "WithHelperPublisher",
]
