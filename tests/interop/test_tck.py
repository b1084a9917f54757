"""The Reactive Streams TCK on every interop adapter that yields a flowpy publisher or subscriber."""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import Future
from typing import Any

import pytest

tck = pytest.importorskip("flowpy.tck", reason="the TCK (flowpy.tck) is not in this checkout")

import reactivex  # noqa: E402
from reactivestreams.subscriber import Subscriber as RSocketSubscriber  # noqa: E402
from rsocket.payload import Payload  # noqa: E402
from rsocket.streams.empty_stream import EmptyStream  # noqa: E402
from rsocket.streams.stream_from_generator import StreamFromGenerator  # noqa: E402

from flowpy import flow  # noqa: E402
from flowpy.interop.asyncio import from_async_iterable  # noqa: E402
from flowpy.interop.futures import from_future  # noqa: E402
from flowpy.interop.reactivex import from_observable  # noqa: E402
from flowpy.interop.rsocket import from_rsocket_publisher, from_rsocket_subscriber  # noqa: E402

PublisherVerification = tck.PublisherVerification
SubscriberBlackboxVerification = tck.SubscriberBlackboxVerification
SubscriberWhiteboxVerification = tck.SubscriberWhiteboxVerification
SubscriberPuppet = tck.SubscriberPuppet
TestEnvironment = tck.TestEnvironment

pytestmark = pytest.mark.timeout(120)


class _Environment:
    def create_test_environment(self) -> Any:
        return TestEnvironment(300, 30, 10)


class _LoopThread:
    """An event loop on its own thread for the class's tests, as rsocket would run one."""

    loop: asyncio.AbstractEventLoop

    @classmethod
    def setup_class(cls) -> None:
        parent = getattr(super(), "setup_class", None)
        if parent is not None:
            parent()
        cls.loop = asyncio.new_event_loop()
        cls._thread = threading.Thread(target=cls.loop.run_forever, daemon=True)
        cls._thread.start()

    @classmethod
    def teardown_class(cls) -> None:
        cls.loop.call_soon_threadsafe(cls.loop.stop)
        cls._thread.join(5)
        parent = getattr(super(), "teardown_class", None)
        if parent is not None:
            parent()


# --- futures ----------------------------------------------------------------------------


class TestFromFuture(_Environment, PublisherVerification):  # type: ignore[misc,valid-type]
    def create_publisher(self, elements: int) -> flow.Publisher[Any]:
        future: Future[Any] = Future()
        threading.Thread(target=future.set_result, args=(None if elements == 0 else "value",)).start()
        return from_future(future)

    def create_failed_publisher(self) -> flow.Publisher[Any] | None:
        future: Future[Any] = Future()
        future.set_exception(RuntimeError("failed future"))
        return from_future(future)

    def max_elements_from_publisher(self) -> int:
        return 1


# --- asyncio ----------------------------------------------------------------------------


class Numbers:
    """An async iterable of 0..n-1 (or of every int for n=None), fresh for each ``__aiter__``."""

    def __init__(self, n: int | None) -> None:
        self.n = n

    async def __aiter__(self) -> AsyncIterator[int]:
        numbers: Iterator[int] = itertools.count() if self.n is None else iter(range(self.n))
        for i in numbers:
            yield i


class Failing:
    def __aiter__(self) -> AsyncIterator[int]:
        raise RuntimeError("cannot iterate")


class TestFromAsyncIterable(_Environment, PublisherVerification):  # type: ignore[misc,valid-type]
    def create_publisher(self, elements: int) -> flow.Publisher[Any]:
        return from_async_iterable(Numbers(None if elements >= 2**63 - 1 else elements))

    def create_failed_publisher(self) -> flow.Publisher[Any] | None:
        return from_async_iterable(Failing())

    def max_elements_from_publisher(self) -> int:
        return 2**31 - 1


# --- reactivex --------------------------------------------------------------------------


class TestFromObservable(_Environment, PublisherVerification):  # type: ignore[misc,valid-type]
    """A cold Observable emits everything at subscription; the buffer strategy keeps it until requested."""

    def create_publisher(self, elements: int) -> flow.Publisher[Any]:
        return from_observable(reactivex.range(elements), strategy="buffer", capacity=max(1, elements))

    def create_failed_publisher(self) -> flow.Publisher[Any] | None:
        return from_observable(reactivex.throw(RuntimeError("observable failed")))

    def max_elements_from_publisher(self) -> int:
        return 1024


# --- rsocket ----------------------------------------------------------------------------


def payloads(elements: int) -> Iterator[tuple[Payload, bool]]:
    """What ``StreamFromGenerator`` wants: (payload, is_complete), completion fused into the last."""
    for i in range(elements):
        yield Payload(str(i).encode()), i == elements - 1


def endless() -> Iterator[tuple[Payload, bool]]:
    for i in itertools.count():
        yield Payload(str(i).encode()), False


class TestFromRSocketPublisher(_Environment, _LoopThread, PublisherVerification):  # type: ignore[misc,valid-type]
    def create_publisher(self, elements: int) -> flow.Publisher[Any]:
        if elements == 0:
            stream: Any = EmptyStream()
        elif elements >= 2**63 - 1:
            stream = StreamFromGenerator(endless)
        else:
            stream = StreamFromGenerator(lambda: payloads(elements))
        return from_rsocket_publisher(stream, loop=self.loop)

    def create_failed_publisher(self) -> flow.Publisher[Any] | None:
        """None: an rsocket stream starts, and so can fail, only once requested."""
        return None

    def max_elements_from_publisher(self) -> int:
        return 1024


class RequestingRSocketSubscriber(RSocketSubscriber):  # type: ignore[misc]
    """An rsocket subscriber that asks for everything."""

    def on_subscribe(self, subscription: Any) -> None:
        self.subscription = subscription
        subscription.request(2**31 - 1)

    def on_next(self, value: Any, is_complete: bool = False) -> None:
        return None

    def on_error(self, exception: BaseException) -> None:
        return None

    def on_complete(self) -> None:
        return None


class TestFromRSocketSubscriber(_Environment, _LoopThread, SubscriberBlackboxVerification):  # type: ignore[misc,valid-type]
    def create_subscriber(self) -> flow.Subscriber[Any]:
        return from_rsocket_subscriber(RequestingRSocketSubscriber(), loop=self.loop)

    def create_element(self, element: int) -> Any:
        return Payload(str(element).encode())


class Puppet(SubscriberPuppet):  # type: ignore[misc,valid-type]
    def __init__(self, subscription: Any) -> None:
        self.subscription = subscription

    def trigger_request(self, elements: int) -> None:
        self.subscription.request(elements)

    def signal_cancel(self) -> None:
        self.subscription.cancel()


class ProbedRSocketSubscriber(RSocketSubscriber):  # type: ignore[misc]
    """An rsocket subscriber that reports every signal to the TCK's whitebox probe."""

    def __init__(self, probe: Any) -> None:
        self.probe = probe

    def on_subscribe(self, subscription: Any) -> None:
        self.probe.register_on_subscribe(Puppet(subscription))

    def on_next(self, value: Any, is_complete: bool = False) -> None:
        self.probe.register_on_next(value)
        if is_complete:
            self.probe.register_on_complete()

    def on_error(self, exception: BaseException) -> None:
        self.probe.register_on_error(exception)

    def on_complete(self) -> None:
        self.probe.register_on_complete()


class TestFromRSocketSubscriberWhitebox(_Environment, _LoopThread, SubscriberWhiteboxVerification):  # type: ignore[misc,valid-type]
    def create_subscriber(self, probe: Any) -> flow.Subscriber[Any]:
        return from_rsocket_subscriber(ProbedRSocketSubscriber(probe), loop=self.loop)

    def create_element(self, element: int) -> Any:
        return Payload(str(element).encode())
