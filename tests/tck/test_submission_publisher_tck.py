"""SubmissionPublisher passes PublisherVerification, directly and as a Reactive Streams publisher.

As in the Java TCK's ``SubmissionPublisherTest``: a producer thread waits for
the first subscriber, submits the elements, then closes; the failed publisher
is one closed exceptionally. Every verification runs once per core (the
``core`` fixture, tests/core_impl.py): the publishers are built from
``core.SubmissionPublisher``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from flowpy import adapters, flow
from flowpy import reactivestreams as rs
from flowpy.submission import SubmissionPublisher
from flowpy.tck import PublisherVerification, ReactiveStreamsPublisherVerification, TestEnvironment
from tests.core_impl import CORES, Core

MAX_ELEMENTS = 100  # below the default buffer capacity: the producer never blocks


def _fed_on_subscribe(publisher_class: type[SubmissionPublisher[Any]]) -> Callable[[int], SubmissionPublisher[int]]:
    class FedOnSubscribe(publisher_class):  # type: ignore[valid-type, misc]
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

    return FedOnSubscribe


FED_ON_SUBSCRIBE = {name: _fed_on_subscribe(core.SubmissionPublisher) for name, core in CORES.items()}
"""The publisher under test, by core name: that core's SubmissionPublisher fed by a thread of its own."""


def failed_publisher(core: Core) -> SubmissionPublisher[int]:
    publisher: SubmissionPublisher[int] = core.SubmissionPublisher()
    publisher.close_exceptionally(OSError("closed exceptionally"))
    return publisher


class _OnCore:
    """Runs each test of the verification once per core; ``self.core`` is the one it runs on."""

    core: Core

    @pytest.fixture(autouse=True)
    def _on_core(self, core: Core) -> None:
        self.core = core

    def create_test_environment(self) -> TestEnvironment:
        return TestEnvironment(1000, 30, 10)

    def max_elements_from_publisher(self) -> int:
        return MAX_ELEMENTS


class TestSubmissionPublisher(_OnCore, PublisherVerification[int]):
    def create_publisher(self, elements: int) -> flow.Publisher[int]:
        return FED_ON_SUBSCRIBE[self.core.name](elements)

    def create_failed_publisher(self) -> flow.Publisher[int] | None:
        return failed_publisher(self.core)


class TestSubmissionPublisherAsReactiveStreams(_OnCore, ReactiveStreamsPublisherVerification[int]):
    def create_reactive_streams_publisher(self, elements: int) -> rs.Publisher[int]:
        return adapters.to_publisher(FED_ON_SUBSCRIBE[self.core.name](elements))

    def create_failed_reactive_streams_publisher(self) -> rs.Publisher[int] | None:
        return adapters.to_publisher(failed_publisher(self.core))
