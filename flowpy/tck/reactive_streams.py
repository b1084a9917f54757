"""Verifications for the Reactive Streams API, through FlowAdapters.

The verifications target the Flow API; these variants take
:mod:`flowpy.reactivestreams` objects from the user's factories and convert
them with :mod:`flowpy.adapters`, as the Java TCK's ``tck-flow`` module does in
the other direction. They run exactly the same tests.
"""

from __future__ import annotations

from typing import TypeVar

from flowpy import adapters, flow
from flowpy import reactivestreams as rs
from flowpy.tck.identity_processor import IdentityProcessorVerification
from flowpy.tck.probes import WhiteboxSubscriberProbe
from flowpy.tck.publisher_verification import PublisherVerification
from flowpy.tck.subscriber_blackbox import SubscriberBlackboxVerification
from flowpy.tck.subscriber_whitebox import SubscriberWhiteboxVerification

__all__ = [
    "ReactiveStreamsIdentityProcessorVerification",
    "ReactiveStreamsPublisherVerification",
    "ReactiveStreamsSubscriberBlackboxVerification",
    "ReactiveStreamsSubscriberWhiteboxVerification",
]

T = TypeVar("T")


def _flow_publisher(publisher: rs.Publisher[T] | None) -> flow.Publisher[T] | None:
    return None if publisher is None else adapters.to_flow_publisher(publisher)


class ReactiveStreamsPublisherVerification(PublisherVerification[T]):
    """:class:`PublisherVerification` of a Reactive Streams publisher.

    Implement :meth:`create_reactive_streams_publisher` and, optionally,
    :meth:`create_failed_reactive_streams_publisher`.
    """

    def create_reactive_streams_publisher(self, elements: int) -> rs.Publisher[T]:
        """Return a Reactive Streams publisher of exactly ``elements`` items.

        Raises:
            NotImplementedError: unless overridden.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement create_reactive_streams_publisher")

    def create_failed_reactive_streams_publisher(self) -> rs.Publisher[T] | None:
        """Return a Reactive Streams publisher that fails; ``None`` (the default) skips."""
        return None

    def create_publisher(self, elements: int) -> flow.Publisher[T]:
        return adapters.to_flow_publisher(self.create_reactive_streams_publisher(elements))

    def create_failed_publisher(self) -> flow.Publisher[T] | None:
        return _flow_publisher(self.create_failed_reactive_streams_publisher())


class ReactiveStreamsSubscriberWhiteboxVerification(SubscriberWhiteboxVerification[T]):
    """:class:`SubscriberWhiteboxVerification` of a Reactive Streams subscriber."""

    def create_reactive_streams_subscriber(self, probe: WhiteboxSubscriberProbe[T]) -> rs.Subscriber[T]:
        """Return a Reactive Streams subscriber instrumented to report to ``probe``.

        Raises:
            NotImplementedError: unless overridden.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement create_reactive_streams_subscriber")

    def create_subscriber(self, probe: WhiteboxSubscriberProbe[T]) -> flow.Subscriber[T]:
        return adapters.to_flow_subscriber(self.create_reactive_streams_subscriber(probe))


class ReactiveStreamsSubscriberBlackboxVerification(SubscriberBlackboxVerification[T]):
    """:class:`SubscriberBlackboxVerification` of a Reactive Streams subscriber."""

    def create_reactive_streams_subscriber(self) -> rs.Subscriber[T]:
        """Return a new Reactive Streams subscriber to verify.

        Raises:
            NotImplementedError: unless overridden.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement create_reactive_streams_subscriber")

    def trigger_reactive_streams_request(self, subscriber: rs.Subscriber[T]) -> None:
        """Make ``subscriber`` request, if it needs a nudge; default nothing."""
        return None

    def create_subscriber(self) -> flow.Subscriber[T]:
        return adapters.to_flow_subscriber(self.create_reactive_streams_subscriber())

    def trigger_request(self, subscriber: flow.Subscriber[T]) -> None:
        # to_subscriber unwraps the adapter back to the user's object.
        self.trigger_reactive_streams_request(adapters.to_subscriber(subscriber))


class ReactiveStreamsIdentityProcessorVerification(IdentityProcessorVerification[T]):
    """:class:`IdentityProcessorVerification` of a Reactive Streams processor."""

    def create_identity_reactive_streams_processor(self, buffer_size: int) -> rs.Processor[T, T]:
        """Return a new Reactive Streams identity processor.

        Raises:
            NotImplementedError: unless overridden.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement create_identity_reactive_streams_processor")

    def create_failed_reactive_streams_publisher(self) -> rs.Publisher[T] | None:
        """Return a Reactive Streams publisher that fails; ``None`` (the default) skips."""
        return None

    def create_identity_processor(self, buffer_size: int) -> flow.Processor[T, T]:
        return adapters.to_flow_processor(self.create_identity_reactive_streams_processor(buffer_size))

    def create_failed_publisher(self) -> flow.Publisher[T] | None:
        return _flow_publisher(self.create_failed_reactive_streams_publisher())
