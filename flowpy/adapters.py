"""FlowAdapters: conversions between the Flow API and the Reactive Streams API.

Each conversion follows ``org.reactivestreams.FlowAdapters``:

1. ``None`` raises :class:`TypeError` naming the parameter.
2. An adapter made by the opposite conversion is unwrapped, so
   ``to_publisher(to_flow_publisher(p)) is p``.
3. An object that already implements the target interface is returned as is.
4. Anything else gets a stateless wrapper that forwards every call verbatim,
   ``None`` included, so the wrapped object enforces rules 1.9 and 2.13
   itself. Subscriptions are wrapped on the way through ``on_subscribe``.
"""

from __future__ import annotations

from typing import Any, TypeVar, cast

from flowpy import flow
from flowpy import reactivestreams as rs
from flowpy._checks import require

__all__ = [
    "FlowAdapters",
    "to_flow_processor",
    "to_flow_publisher",
    "to_flow_subscriber",
    "to_processor",
    "to_publisher",
    "to_subscriber",
]

T = TypeVar("T")
U = TypeVar("U")


# --- Subscriptions and subscribers -----------------------------------------
#
# One forwarding implementation serves both directions; the concrete classes
# only name the interface they implement and how a subscription is wrapped
# on its way through on_subscribe.


class _ForwardingSubscription:
    """Forwards ``request`` and ``cancel`` verbatim to ``wrapped``."""

    __slots__ = ("wrapped",)

    def __init__(self, subscription: Any) -> None:
        self.wrapped = subscription

    def request(self, n: int) -> None:
        self.wrapped.request(n)

    def cancel(self) -> None:
        self.wrapped.cancel()


class _ReactiveToFlowSubscription(_ForwardingSubscription, rs.Subscription):
    """A Reactive Streams subscription forwarding to a Flow subscription."""

    __slots__ = ()


class _FlowToReactiveSubscription(_ForwardingSubscription, flow.Subscription):
    """A Flow subscription forwarding to a Reactive Streams subscription."""

    __slots__ = ()


class _ForwardingSubscriber:
    """Forwards the four signals verbatim to ``wrapped``, wrapping the subscription."""

    __slots__ = ("wrapped",)

    _subscription_adapter: type[_ForwardingSubscription]

    def __init__(self, subscriber: Any) -> None:
        self.wrapped = subscriber

    def on_subscribe(self, subscription: Any) -> None:
        self.wrapped.on_subscribe(None if subscription is None else self._subscription_adapter(subscription))

    def on_next(self, item: Any) -> None:
        self.wrapped.on_next(item)

    def on_error(self, error: BaseException) -> None:
        self.wrapped.on_error(error)

    def on_complete(self) -> None:
        self.wrapped.on_complete()


class _ReactiveToFlowSubscriber(_ForwardingSubscriber, rs.Subscriber[T]):
    """A Reactive Streams subscriber forwarding to a Flow subscriber."""

    __slots__ = ()
    _subscription_adapter = _FlowToReactiveSubscription


class _FlowToReactiveSubscriber(_ForwardingSubscriber, flow.Subscriber[T]):
    """A Flow subscriber forwarding to a Reactive Streams subscriber."""

    __slots__ = ()
    _subscription_adapter = _ReactiveToFlowSubscription


# --- Publishers --------------------------------------------------------------


def _subscriber_to_flow(subscriber: Any) -> Any:
    return None if subscriber is None else to_flow_subscriber(subscriber)


def _subscriber_to_reactive(subscriber: Any) -> Any:
    return None if subscriber is None else to_subscriber(subscriber)


class _ReactivePublisherFromFlow(rs.Publisher[T]):
    """A Reactive Streams publisher forwarding to a Flow publisher."""

    __slots__ = ("wrapped",)

    def __init__(self, publisher: flow.Publisher[T]) -> None:
        self.wrapped = publisher

    def subscribe(self, subscriber: rs.Subscriber[T]) -> None:
        self.wrapped.subscribe(_subscriber_to_flow(subscriber))


class _FlowPublisherFromReactive(flow.Publisher[T]):
    """A Flow publisher forwarding to a Reactive Streams publisher."""

    __slots__ = ("wrapped",)

    def __init__(self, publisher: rs.Publisher[T]) -> None:
        self.wrapped = publisher

    def subscribe(self, subscriber: flow.Subscriber[T]) -> None:
        self.wrapped.subscribe(_subscriber_to_reactive(subscriber))


# --- Processors --------------------------------------------------------------


class _ReactiveToFlowProcessor(_ReactiveToFlowSubscriber[T], rs.Processor[T, U]):
    """A Reactive Streams processor forwarding to a Flow processor."""

    __slots__ = ()

    def subscribe(self, subscriber: rs.Subscriber[U]) -> None:
        self.wrapped.subscribe(_subscriber_to_flow(subscriber))


class _FlowToReactiveProcessor(_FlowToReactiveSubscriber[T], flow.Processor[T, U]):
    """A Flow processor forwarding to a Reactive Streams processor."""

    __slots__ = ()

    def subscribe(self, subscriber: flow.Subscriber[U]) -> None:
        self.wrapped.subscribe(_subscriber_to_reactive(subscriber))


# --- Conversions -------------------------------------------------------------


def to_publisher(flow_publisher: flow.Publisher[T]) -> rs.Publisher[T]:
    """Return a Reactive Streams publisher for ``flow_publisher``.

    Raises:
        TypeError: if ``flow_publisher`` is ``None``.
    """
    require(flow_publisher, "flow_publisher")
    if isinstance(flow_publisher, _FlowPublisherFromReactive):
        return cast("rs.Publisher[T]", flow_publisher.wrapped)
    if isinstance(flow_publisher, rs.Publisher):
        return flow_publisher
    return _ReactivePublisherFromFlow(flow_publisher)


def to_flow_publisher(reactive_streams_publisher: rs.Publisher[T]) -> flow.Publisher[T]:
    """Return a Flow publisher for ``reactive_streams_publisher``.

    Raises:
        TypeError: if ``reactive_streams_publisher`` is ``None``.
    """
    require(reactive_streams_publisher, "reactive_streams_publisher")
    if isinstance(reactive_streams_publisher, _ReactivePublisherFromFlow):
        return cast("flow.Publisher[T]", reactive_streams_publisher.wrapped)
    if isinstance(reactive_streams_publisher, flow.Publisher):
        return reactive_streams_publisher
    return _FlowPublisherFromReactive(reactive_streams_publisher)


def to_processor(flow_processor: flow.Processor[T, U]) -> rs.Processor[T, U]:
    """Return a Reactive Streams processor for ``flow_processor``.

    Raises:
        TypeError: if ``flow_processor`` is ``None``.
    """
    require(flow_processor, "flow_processor")
    if isinstance(flow_processor, _FlowToReactiveProcessor):
        return cast("rs.Processor[T, U]", flow_processor.wrapped)
    if isinstance(flow_processor, rs.Processor):
        return flow_processor
    return _ReactiveToFlowProcessor(flow_processor)


def to_flow_processor(reactive_streams_processor: rs.Processor[T, U]) -> flow.Processor[T, U]:
    """Return a Flow processor for ``reactive_streams_processor``.

    Raises:
        TypeError: if ``reactive_streams_processor`` is ``None``.
    """
    require(reactive_streams_processor, "reactive_streams_processor")
    if isinstance(reactive_streams_processor, _ReactiveToFlowProcessor):
        return cast("flow.Processor[T, U]", reactive_streams_processor.wrapped)
    if isinstance(reactive_streams_processor, flow.Processor):
        return reactive_streams_processor
    return _FlowToReactiveProcessor(reactive_streams_processor)


def to_flow_subscriber(reactive_streams_subscriber: rs.Subscriber[T]) -> flow.Subscriber[T]:
    """Return a Flow subscriber for ``reactive_streams_subscriber``.

    Raises:
        TypeError: if ``reactive_streams_subscriber`` is ``None``.
    """
    require(reactive_streams_subscriber, "reactive_streams_subscriber")
    if isinstance(reactive_streams_subscriber, _ReactiveToFlowSubscriber):
        return cast("flow.Subscriber[T]", reactive_streams_subscriber.wrapped)
    if isinstance(reactive_streams_subscriber, flow.Subscriber):
        return reactive_streams_subscriber
    return _FlowToReactiveSubscriber(reactive_streams_subscriber)


def to_subscriber(flow_subscriber: flow.Subscriber[T]) -> rs.Subscriber[T]:
    """Return a Reactive Streams subscriber for ``flow_subscriber``.

    Raises:
        TypeError: if ``flow_subscriber`` is ``None``.
    """
    require(flow_subscriber, "flow_subscriber")
    if isinstance(flow_subscriber, _FlowToReactiveSubscriber):
        return cast("rs.Subscriber[T]", flow_subscriber.wrapped)
    if isinstance(flow_subscriber, rs.Subscriber):
        return flow_subscriber
    return _ReactiveToFlowSubscriber(flow_subscriber)


class FlowAdapters:
    """The conversions as static methods, named as in ``org.reactivestreams.FlowAdapters``.

    Not instantiable.
    """

    to_publisher = staticmethod(to_publisher)
    to_flow_publisher = staticmethod(to_flow_publisher)
    to_processor = staticmethod(to_processor)
    to_flow_processor = staticmethod(to_flow_processor)
    to_subscriber = staticmethod(to_subscriber)
    to_flow_subscriber = staticmethod(to_flow_subscriber)

    def __new__(cls) -> FlowAdapters:
        raise TypeError("FlowAdapters has only static methods; it has no instances")
