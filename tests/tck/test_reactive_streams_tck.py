"""The Reactive Streams variants verify Reactive Streams objects through FlowAdapters' wrappers.

The objects below implement only :mod:`flowpy.reactivestreams`, so every
signal crosses an adapter: publisher tests go through the Flow-from-Reactive
publisher and subscriber wrappers, subscriber tests through the
Reactive-to-Flow subscriber and subscription wrappers.
"""

from __future__ import annotations

from typing import Any, TypeVar

from flowpy import reactivestreams as rs
from flowpy.tck import (
    ReactiveStreamsIdentityProcessorVerification,
    ReactiveStreamsPublisherVerification,
    ReactiveStreamsSubscriberBlackboxVerification,
    ReactiveStreamsSubscriberWhiteboxVerification,
    TestEnvironment,
    WhiteboxSubscriberProbe,
)
from tests.tck.reference import IdentityProcessor, RangeSubscription, SyncSubscriber, WhiteboxSyncSubscriber

T = TypeVar("T")


class ReactiveRangePublisher(rs.Publisher[int]):
    """A range publisher that speaks only the Reactive Streams API."""

    def __init__(self, count: int) -> None:
        self.count = count

    def subscribe(self, subscriber: rs.Subscriber[int]) -> None:
        if subscriber is None:
            raise TypeError("subscriber must not be None (rule 1.9)")
        subscriber.on_subscribe(ReactiveRangeSubscription(subscriber, 0, self.count))  # type: ignore[arg-type]


class ReactiveRangeSubscription(RangeSubscription, rs.Subscription):
    """The reference range subscription, as a Reactive Streams subscription."""


class ReactiveSubscriber(rs.Subscriber[T]):
    """Forwards to a Flow subscriber object without being one, so adapters must wrap it."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def on_subscribe(self, subscription: rs.Subscription) -> None:
        self.inner.on_subscribe(subscription)

    def on_next(self, item: T) -> None:
        self.inner.on_next(item)

    def on_error(self, error: BaseException) -> None:
        self.inner.on_error(error)

    def on_complete(self) -> None:
        self.inner.on_complete()


class ReactiveProcessor(ReactiveSubscriber[T], rs.Processor[T, T]):
    """A Reactive Streams processor forwarding to the reference Flow processor."""

    def __init__(self) -> None:
        super().__init__(IdentityProcessor())

    def subscribe(self, subscriber: rs.Subscriber[T]) -> None:
        self.inner.subscribe(None if subscriber is None else ReactiveToFlow(subscriber))


class ReactiveToFlow(ReactiveSubscriber[T]):
    """Hands the processor's downstream to it as the plain object the processor calls."""


class _Fast:
    def create_test_environment(self) -> TestEnvironment:
        return TestEnvironment(1000, 20, 10)


class TestReactiveRangePublisher(_Fast, ReactiveStreamsPublisherVerification[int]):
    def create_reactive_streams_publisher(self, elements: int) -> rs.Publisher[int]:
        return ReactiveRangePublisher(elements)


class TestReactiveSubscriberWhitebox(_Fast, ReactiveStreamsSubscriberWhiteboxVerification[int]):
    def create_reactive_streams_subscriber(self, probe: WhiteboxSubscriberProbe[int]) -> rs.Subscriber[int]:
        return ReactiveSubscriber(WhiteboxSyncSubscriber(probe))


class TestReactiveSubscriberBlackbox(_Fast, ReactiveStreamsSubscriberBlackboxVerification[int]):
    def create_reactive_streams_subscriber(self) -> rs.Subscriber[int]:
        return ReactiveSubscriber(SyncSubscriber())

    def trigger_reactive_streams_request(self, subscriber: rs.Subscriber[int]) -> None:
        # The hook receives the user's own object back, not an adapter.
        assert isinstance(subscriber, ReactiveSubscriber), subscriber


class TestReactiveProcessor(_Fast, ReactiveStreamsIdentityProcessorVerification[int]):
    def create_identity_reactive_streams_processor(self, buffer_size: int) -> rs.Processor[int, int]:
        return ReactiveProcessor()

    def max_supported_subscribers(self) -> int:
        return 1
