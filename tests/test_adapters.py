"""FlowAdapters: the Java FlowAdaptersTest cases, None arguments, and forwarding."""

from __future__ import annotations

from typing import Any

import pytest

import flowpy
from flowpy import FlowAdapters, SubmissionPublisher, direct_executor, flow
from flowpy import adapters as ad
from flowpy import reactivestreams as rs


class EitherConsumer(flow.Subscriber[Any], rs.Subscriber[Any]):
    """Implements both APIs; requests everything and records what it gets."""

    def __init__(self) -> None:
        self.values: list[Any] = []
        self.errors: list[BaseException] = []
        self.completions = 0
        self.subscription: Any = None

    def on_subscribe(self, subscription: Any) -> None:
        self.subscription = subscription
        subscription.request(2**63 - 1)

    def on_next(self, item: Any) -> None:
        self.values.append(item)

    def on_error(self, error: BaseException) -> None:
        self.errors.append(error)

    def on_complete(self) -> None:
        self.completions += 1


class SignalRecorder:
    """Records the four signals; mixed into a subscriber of one API or the other."""

    def __init__(self) -> None:
        self.signals: list[tuple[str, Any]] = []

    def on_subscribe(self, subscription: Any) -> None:
        self.signals.append(("on_subscribe", subscription))

    def on_next(self, item: Any) -> None:
        self.signals.append(("on_next", item))

    def on_error(self, error: BaseException) -> None:
        self.signals.append(("on_error", error))

    def on_complete(self) -> None:
        self.signals.append(("on_complete", None))


class FlowOnlySubscriber(SignalRecorder, flow.Subscriber[Any]):
    """Implements the Flow API only."""


class RsOnlySubscriber(SignalRecorder, rs.Subscriber[Any]):
    """Implements the Reactive Streams API only."""


class RsMulticastPublisher(rs.Publisher[Any]):
    """A Reactive Streams publisher driven by hand, over a synchronous SubmissionPublisher."""

    def __init__(self) -> None:
        self.inner: SubmissionPublisher[Any] = SubmissionPublisher(direct_executor)

    def subscribe(self, subscriber: rs.Subscriber[Any]) -> None:
        self.inner.subscribe(ad.to_flow_subscriber(subscriber))


class RsIdentityProcessor(rs.Processor[Any, Any]):
    def __init__(self) -> None:
        self.downstream: rs.Subscriber[Any] | None = None

    def subscribe(self, subscriber: rs.Subscriber[Any]) -> None:
        self.downstream = subscriber

    def on_subscribe(self, subscription: rs.Subscription) -> None:
        assert self.downstream is not None
        self.downstream.on_subscribe(subscription)

    def on_next(self, item: Any) -> None:
        assert self.downstream is not None
        self.downstream.on_next(item)

    def on_error(self, error: BaseException) -> None:
        assert self.downstream is not None
        self.downstream.on_error(error)

    def on_complete(self) -> None:
        assert self.downstream is not None
        self.downstream.on_complete()


class FlowIdentityProcessor(flow.Processor[Any, Any]):
    def subscribe(self, subscriber: flow.Subscriber[Any]) -> None:
        raise AssertionError("not used")

    def on_subscribe(self, subscription: flow.Subscription) -> None:
        raise AssertionError("not used")

    def on_next(self, item: Any) -> None:
        raise AssertionError("not used")

    def on_error(self, error: BaseException) -> None:
        raise AssertionError("not used")

    def on_complete(self) -> None:
        raise AssertionError("not used")


def test_reactive_to_flow_normal() -> None:
    publisher = RsMulticastPublisher()
    consumer = EitherConsumer()
    FlowAdapters.to_flow_publisher(publisher).subscribe(consumer)
    for i in range(1, 6):
        publisher.inner.submit(i)
    publisher.inner.close()
    assert consumer.values == [1, 2, 3, 4, 5] and consumer.completions == 1 and not consumer.errors


def test_reactive_to_flow_error() -> None:
    publisher = RsMulticastPublisher()
    consumer = EitherConsumer()
    FlowAdapters.to_flow_publisher(publisher).subscribe(consumer)
    for i in range(1, 6):
        publisher.inner.submit(i)
    publisher.inner.close_exceptionally(OSError())
    assert consumer.values == [1, 2, 3, 4, 5] and isinstance(consumer.errors[0], OSError)


def test_flow_to_reactive_normal_and_error() -> None:
    for close_with_error in (False, True):
        publisher: SubmissionPublisher[int] = SubmissionPublisher(direct_executor)
        consumer = RsOnlySubscriber()

        class Requesting(RsOnlySubscriber):
            def on_subscribe(self, subscription: rs.Subscription) -> None:
                super().on_subscribe(subscription)
                subscription.request(10)

        consumer = Requesting()
        ad.to_publisher(publisher).subscribe(consumer)
        for i in range(1, 6):
            publisher.submit(i)
        if close_with_error:
            publisher.close_exceptionally(OSError("io"))
        else:
            publisher.close()
        kinds = [k for k, _ in consumer.signals]
        assert kinds == ["on_subscribe"] + ["on_next"] * 5 + ["on_error" if close_with_error else "on_complete"]
        assert isinstance(consumer.signals[0][1], rs.Subscription)


def test_reactive_streams_to_flow_subscriber_forwards_request() -> None:
    consumer = EitherConsumer()
    as_flow = ad.to_flow_subscriber(consumer)
    assert as_flow is consumer  # already implements the Flow API
    requested: list[int] = []

    class Recording(flow.Subscription):
        def request(self, n: int) -> None:
            requested.append(n)

        def cancel(self) -> None:
            raise AssertionError("cancel was not expected")

    as_flow.on_subscribe(Recording())
    for i in (1, 2, 3):
        as_flow.on_next(i)
    as_flow.on_complete()
    assert requested == [2**63 - 1] and consumer.values == [1, 2, 3] and consumer.completions == 1


def test_wrappers_forward_every_signal_verbatim_and_wrap_subscriptions() -> None:
    rs_sub = RsOnlySubscriber()
    wrapped = ad.to_flow_subscriber(rs_sub)
    assert isinstance(wrapped, flow.Subscriber) and not isinstance(wrapped, rs.Subscriber)
    requests: list[Any] = []

    class Upstream(flow.Subscription):
        def request(self, n: int) -> None:
            requests.append(n)

        def cancel(self) -> None:
            requests.append("cancel")

    wrapped.on_subscribe(Upstream())
    error = KeyError("k")
    wrapped.on_next(None)
    wrapped.on_error(error)
    wrapped.on_complete()
    subscription = rs_sub.signals[0][1]
    assert isinstance(subscription, rs.Subscription)
    subscription.request(-3)
    subscription.cancel()
    assert requests == [-3, "cancel"]
    assert rs_sub.signals[1:] == [("on_next", None), ("on_error", error), ("on_complete", None)]
    wrapped.on_subscribe(None)  # type: ignore[arg-type]
    assert rs_sub.signals[-1] == ("on_subscribe", None)


@pytest.mark.parametrize(
    ("make", "to_other", "back"),
    [
        (RsOnlySubscriber, ad.to_flow_subscriber, ad.to_subscriber),
        (FlowOnlySubscriber, ad.to_subscriber, ad.to_flow_subscriber),
        (RsMulticastPublisher, ad.to_flow_publisher, ad.to_publisher),
        (lambda: SubmissionPublisher(direct_executor), ad.to_publisher, ad.to_flow_publisher),
        (RsIdentityProcessor, ad.to_flow_processor, ad.to_processor),
        (FlowIdentityProcessor, ad.to_processor, ad.to_flow_processor),
    ],
)
def test_round_trip_conversion_returns_the_same_object(make: Any, to_other: Any, back: Any) -> None:
    original = make()
    converted = to_other(original)
    assert converted is not original
    assert back(converted) is original


@pytest.mark.parametrize(
    ("convert", "name"),
    [
        (ad.to_publisher, "flow_publisher"),
        (ad.to_flow_publisher, "reactive_streams_publisher"),
        (ad.to_processor, "flow_processor"),
        (ad.to_flow_processor, "reactive_streams_processor"),
        (ad.to_subscriber, "flow_subscriber"),
        (ad.to_flow_subscriber, "reactive_streams_subscriber"),
    ],
)
def test_none_argument_is_type_error_naming_the_parameter(convert: Any, name: str) -> None:
    with pytest.raises(TypeError, match=rf"^{name} must not be None$"):
        convert(None)


def test_subscribe_none_reaches_the_wrapped_publisher() -> None:
    publisher = ad.to_publisher(SubmissionPublisher(direct_executor))
    with pytest.raises(TypeError, match=r"rule 1.9"):
        publisher.subscribe(None)  # type: ignore[arg-type]


def test_processor_adapter_forwards_both_sides() -> None:
    processor = RsIdentityProcessor()
    as_flow = ad.to_flow_processor(processor)
    downstream = FlowOnlySubscriber()
    as_flow.subscribe(downstream)
    as_flow.on_next(5)
    as_flow.on_complete()
    assert downstream.signals == [("on_next", 5), ("on_complete", None)]


def test_flow_adapters_has_no_instances_and_static_methods_are_the_functions() -> None:
    with pytest.raises(TypeError, match=r"^FlowAdapters has only static methods; it has no instances$"):
        FlowAdapters()
    assert FlowAdapters.to_publisher is ad.to_publisher is flowpy.to_publisher


def test_flow_and_reactive_streams_types_are_distinct() -> None:
    assert not issubclass(flow.Publisher, rs.Publisher) and not issubclass(rs.Publisher, flow.Publisher)
    assert flowpy.default_buffer_size() == 256
    assert issubclass(flow.Processor, flow.Subscriber) and issubclass(flow.Processor, flow.Publisher)
