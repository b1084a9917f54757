"""SubmissionPublisher passes PublisherVerification, directly and as a Reactive Streams publisher.

As in the Java TCK's ``SubmissionPublisherTest``: a producer thread waits for
the first subscriber, submits the elements, then closes; the failed publisher
is one closed exceptionally.
"""

from __future__ import annotations

import threading
from typing import TypeVar

from flowpy import adapters, flow
from flowpy import reactivestreams as rs
from flowpy.submission import SubmissionPublisher
from flowpy.tck import PublisherVerification, ReactiveStreamsPublisherVerification, TestEnvironment

T = TypeVar("T")

MAX_ELEMENTS = 100  # below the default buffer capacity: the producer never blocks


class FedOnSubscribe(SubmissionPublisher[int]):
    """Submits ``0 .. elements-1`` from a thread of its own once a subscriber arrives, then closes."""

    def __init__(self, elements: int) -> None:
        super().__init__()
        self._first_subscriber = threading.Event()
        threading.Thread(target=self._produce, args=(elements,), daemon=True).start()

    def subscribe(self, subscriber: flow.Subscriber[int]) -> None:
        super().subscribe(subscriber)
        self._first_subscriber.set()

    def _produce(self, elements: int) -> None:
        self._first_subscriber.wait()
        for i in range(elements):
            self.submit(i)
        self.close()


def failed_publisher() -> SubmissionPublisher[int]:
    publisher: SubmissionPublisher[int] = SubmissionPublisher()
    publisher.close_exceptionally(OSError("closed exceptionally"))
    return publisher


class TestSubmissionPublisher(PublisherVerification[int]):
    def create_test_environment(self) -> TestEnvironment:
        return TestEnvironment(1000, 30, 10)

    def create_publisher(self, elements: int) -> flow.Publisher[int]:
        return FedOnSubscribe(elements)

    def create_failed_publisher(self) -> flow.Publisher[int] | None:
        return failed_publisher()

    def max_elements_from_publisher(self) -> int:
        return MAX_ELEMENTS


class TestSubmissionPublisherAsReactiveStreams(ReactiveStreamsPublisherVerification[int]):
    def create_test_environment(self) -> TestEnvironment:
        return TestEnvironment(1000, 30, 10)

    def create_reactive_streams_publisher(self, elements: int) -> rs.Publisher[int]:
        return adapters.to_publisher(FedOnSubscribe(elements))

    def create_failed_reactive_streams_publisher(self) -> rs.Publisher[int] | None:
        return adapters.to_publisher(failed_publisher())

    def max_elements_from_publisher(self) -> int:
        return MAX_ELEMENTS
