"""Correct reference implementations pass every required test of their verification."""

from __future__ import annotations

from typing import Any

from flowpy import flow
from flowpy.tck import (
    IdentityProcessorVerification,
    PublisherVerification,
    SubscriberBlackboxVerification,
    SubscriberWhiteboxVerification,
    TestEnvironment,
    WhiteboxSubscriberProbe,
    WithHelperPublisher,
)
from flowpy.tck.helper_publisher import AsyncIterablePublisher
from tests.tck.reference import (
    AsyncSubscriber,
    IdentityProcessor,
    MulticastProcessor,
    RangePublisher,
    SyncSubscriber,
    WhiteboxAsyncSubscriber,
    WhiteboxSyncSubscriber,
)


class _Fast:
    # A long timeout costs nothing while tests pass and keeps them reliable on
    # a loaded machine; the short no-signals timeout is what makes them fast.
    def create_test_environment(self) -> TestEnvironment:
        return TestEnvironment(1000, 20, 10)


class TestRangePublisher(_Fast, PublisherVerification[int]):
    def create_publisher(self, elements: int) -> flow.Publisher[int]:
        return RangePublisher(0, elements)


class _FailingIterable:
    def __iter__(self) -> Any:
        raise RuntimeError("Error state signal!")


class TestAsyncIterablePublisher(_Fast, WithHelperPublisher, PublisherVerification[int]):
    def create_publisher(self, elements: int) -> flow.Publisher[int]:
        return self.create_helper_publisher(elements)

    def create_failed_publisher(self) -> flow.Publisher[int] | None:
        return AsyncIterablePublisher(_FailingIterable(), self.helper_executor())


class TestSyncSubscriberWhitebox(_Fast, SubscriberWhiteboxVerification[int]):
    def create_subscriber(self, probe: WhiteboxSubscriberProbe[int]) -> flow.Subscriber[int]:
        return WhiteboxSyncSubscriber(probe)


class TestAsyncSubscriberWhitebox(_Fast, SubscriberWhiteboxVerification[int]):
    def create_subscriber(self, probe: WhiteboxSubscriberProbe[int]) -> flow.Subscriber[int]:
        return WhiteboxAsyncSubscriber(self.helper_executor(), probe)


class TestSyncSubscriberBlackbox(_Fast, SubscriberBlackboxVerification[int]):
    def create_subscriber(self) -> flow.Subscriber[int]:
        return SyncSubscriber()


class TestAsyncSubscriberBlackbox(_Fast, SubscriberBlackboxVerification[int]):
    def create_subscriber(self) -> flow.Subscriber[int]:
        return AsyncSubscriber(self.helper_executor())


class TestIdentityProcessor(_Fast, IdentityProcessorVerification[int]):
    def create_identity_processor(self, buffer_size: int) -> flow.Processor[int, int]:
        return IdentityProcessor()

    def max_supported_subscribers(self) -> int:
        return 1


class TestMulticastProcessor(_Fast, IdentityProcessorVerification[int]):
    def create_identity_processor(self, buffer_size: int) -> flow.Processor[int, int]:
        return MulticastProcessor()
