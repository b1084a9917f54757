"""rsocket-py interop: the four adapters alone, then a real server and client over TCP."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from reactivestreams.publisher import Publisher as RSocketPublisher
from reactivestreams.subscriber import Subscriber as RSocketSubscriber
from reactivestreams.subscription import Subscription as RSocketSubscription
from rsocket.helpers import single_transport_provider
from rsocket.payload import Payload
from rsocket.request_handler import BaseRequestHandler
from rsocket.rsocket_client import RSocketClient
from rsocket.rsocket_server import RSocketServer
from rsocket.transports.tcp import TransportTCP

from flowpy import flow
from flowpy.adapters import to_flow_publisher, to_publisher
from flowpy.errors import MissingBackpressureError
from flowpy.interop.rsocket import (
    MAX_REQUEST_N,
    from_rsocket_publisher,
    from_rsocket_subscriber,
    to_rsocket_publisher,
    to_rsocket_subscriber,
)
from flowpy.submission import SubmissionPublisher
from tests.interop.helpers import ManualPublisher, ThreadsafeCallCounter
from tests.support import Recorder

pytestmark = pytest.mark.timeout(90)

MAX = 2**63 - 1


# --- rsocket-side doubles ------------------------------------------------------------


class RSocketRecorder(RSocketSubscriber):  # type: ignore[misc]
    """An rsocket subscriber that records its signals and the threads they came on."""

    def __init__(self, initial: int = 0) -> None:
        self.initial = initial
        self.subscription: Any = None
        self.signals: list[tuple[str, Any]] = []
        self.threads: set[int] = set()
        self.done = threading.Event()

    def on_subscribe(self, subscription: Any) -> None:
        self.threads.add(threading.get_ident())
        self.subscription = subscription
        self.signals.append(("on_subscribe", None))
        if self.initial:
            subscription.request(self.initial)

    def on_next(self, value: Any, is_complete: bool = False) -> None:
        self.threads.add(threading.get_ident())
        self.signals.append(("on_next", value))

    def on_error(self, exception: BaseException) -> None:
        self.threads.add(threading.get_ident())
        self.signals.append(("on_error", exception))
        self.done.set()

    def on_complete(self) -> None:
        self.threads.add(threading.get_ident())
        self.signals.append(("on_complete", None))
        self.done.set()

    @property
    def items(self) -> list[Any]:
        return [value for kind, value in self.signals if kind == "on_next"]


class FakeRequester(RSocketPublisher, RSocketSubscription):  # type: ignore[misc]
    """Stands in for ``rsocket.request_stream(...)``: one subscriber, requests recorded."""

    def __init__(self, backpressure_api: bool = True) -> None:
        self.subscriber: Any = None
        self.initial: int | None = None
        self.requests: list[int] = []
        self.request_threads: set[int] = set()
        self.cancelled = False
        if not backpressure_api:
            self.initial_request_n = None

    def initial_request_n(self, n: int) -> FakeRequester:
        self.initial = n
        return self

    def subscribe(self, subscriber: Any) -> None:
        self.subscriber = subscriber
        subscriber.on_subscribe(self)

    def request(self, n: int) -> None:
        self.request_threads.add(threading.get_ident())
        self.requests.append(n)

    def cancel(self) -> None:
        self.cancelled = True


async def settle() -> None:
    """Let callbacks already scheduled on the loop run."""
    for _ in range(5):
        await asyncio.sleep(0)


# --- to_rsocket_publisher / from_rsocket_subscriber ------------------------------------


def test_to_rsocket_publisher_subscription_is_ready_when_subscribe_returns() -> None:
    async def run() -> RSocketRecorder:
        rsocket_subscriber = RSocketRecorder()
        with SubmissionPublisher[str]() as publisher:
            to_rsocket_publisher(publisher).subscribe(rsocket_subscriber)
            assert rsocket_subscriber.subscription is not None  # rsocket reads it at once
            rsocket_subscriber.subscription.request(3)  # before flowpy's on_subscribe arrived
            for item in "abcde":
                publisher.submit(item)
            while len(rsocket_subscriber.items) < 3:
                await asyncio.sleep(0.001)
            await settle()
            assert rsocket_subscriber.items == ["a", "b", "c"]  # no more than requested
            rsocket_subscriber.subscription.request(10)
        while not rsocket_subscriber.done.is_set():
            await asyncio.sleep(0.001)
        return rsocket_subscriber

    rsocket_subscriber = asyncio.run(run())
    assert rsocket_subscriber.items == ["a", "b", "c", "d", "e"]
    assert rsocket_subscriber.signals[-1] == ("on_complete", None)
    assert rsocket_subscriber.threads == {threading.get_ident()}  # the loop's thread only


def test_from_rsocket_subscriber_hands_items_to_the_loop_in_one_batch() -> None:
    publisher = ManualPublisher()

    async def run() -> tuple[RSocketRecorder, int]:
        loop = asyncio.get_running_loop()
        rsocket_subscriber = RSocketRecorder(initial=MAX_REQUEST_N)
        publisher.subscribe(from_rsocket_subscriber(rsocket_subscriber))
        await settle()
        counter = ThreadsafeCallCounter(loop)

        def burst() -> None:
            for i in range(1000):
                publisher.subscriber.on_next(i)
            publisher.subscriber.on_complete()

        thread = threading.Thread(target=burst)
        loop.call_soon(thread.start)
        loop.call_soon(thread.join)  # the loop is busy until the whole burst has arrived
        await settle()
        return rsocket_subscriber, counter.calls

    rsocket_subscriber, calls = asyncio.run(run())
    assert rsocket_subscriber.items == list(range(1000))
    assert rsocket_subscriber.signals[-1] == ("on_complete", None)
    assert calls == 1
    assert publisher.subscription.requests == [MAX_REQUEST_N]


def test_from_rsocket_subscriber_bad_request_cancels_and_signals_rule_3_9() -> None:
    publisher = ManualPublisher()

    async def run() -> RSocketRecorder:
        rsocket_subscriber = RSocketRecorder()
        publisher.subscribe(from_rsocket_subscriber(rsocket_subscriber))
        await settle()
        rsocket_subscriber.subscription.request(0)
        await settle()
        publisher.subscriber.on_next("late")  # in flight when the cancel happened (rule 2.8)
        await settle()
        return rsocket_subscriber

    rsocket_subscriber = asyncio.run(run())
    assert publisher.subscription.cancelled.is_set()
    assert [kind for kind, _ in rsocket_subscriber.signals] == ["on_subscribe", "on_error"]
    error = rsocket_subscriber.signals[1][1]
    assert isinstance(error, ValueError)
    assert str(error) == "non-positive subscription request: n must be > 0 (rule 3.9), got 0"


def test_from_rsocket_subscriber_rejects_none_item_and_loopless_call() -> None:
    async def run() -> None:
        subscriber = from_rsocket_subscriber(RSocketRecorder())
        with pytest.raises(TypeError, match=r"^item must not be None \(rule 2\.13\)$"):
            subscriber.on_next(None)

    asyncio.run(run())
    with pytest.raises(RuntimeError, match=r"^loop must be given when no event loop is running in this thread"):
        from_rsocket_subscriber(RSocketRecorder())


def test_to_rsocket_publisher_accepts_a_reactive_streams_publisher() -> None:
    async def run() -> list[Any]:
        rsocket_subscriber = RSocketRecorder(initial=5)
        with SubmissionPublisher[int]() as publisher:
            to_rsocket_publisher(to_publisher(publisher)).subscribe(rsocket_subscriber)
            publisher.submit(1)
        while not rsocket_subscriber.done.is_set():
            await asyncio.sleep(0.001)
        return rsocket_subscriber.signals

    assert asyncio.run(run()) == [("on_subscribe", None), ("on_next", 1), ("on_complete", None)]


# --- from_rsocket_publisher / to_rsocket_subscriber ------------------------------------


def test_from_rsocket_publisher_first_request_becomes_initial_request_n() -> None:
    requester = FakeRequester()

    async def run() -> Recorder:
        recorder = Recorder()
        from_rsocket_publisher(requester).subscribe(recorder)
        await settle()
        assert recorder.kinds() == ["on_subscribe"] and requester.subscriber is None  # not yet requested
        recorder.request(5)
        await settle()
        assert requester.initial == 5 and requester.requests == []
        recorder.request(7)
        await settle()
        assert requester.requests == [7]
        return recorder

    asyncio.run(run())


def test_from_rsocket_publisher_clamps_demand_to_max_request_n() -> None:
    requester = FakeRequester()

    async def run() -> None:
        recorder = Recorder()
        from_rsocket_publisher(requester).subscribe(recorder)
        await settle()
        recorder.request(MAX)
        recorder.request(MAX)
        recorder.request(10)
        await settle()

    asyncio.run(run())
    assert requester.initial == MAX_REQUEST_N
    assert requester.requests == []  # already unbounded on the wire


def test_from_rsocket_publisher_without_backpressure_api_requests_after_subscribe() -> None:
    requester = FakeRequester(backpressure_api=False)

    async def run() -> None:
        recorder = Recorder()
        from_rsocket_publisher(requester).subscribe(recorder)
        await settle()
        recorder.request(3)
        recorder.request(MAX)
        await settle()

    asyncio.run(run())
    assert requester.requests == [3, MAX_REQUEST_N - 3]


def test_from_rsocket_publisher_is_complete_becomes_on_next_then_on_complete() -> None:
    requester = FakeRequester()

    async def run() -> Recorder:
        recorder = Recorder(initial=2)
        from_rsocket_publisher(requester).subscribe(recorder)
        await settle()
        requester.subscriber.on_next("a")
        requester.subscriber.on_next("b", is_complete=True)
        return recorder

    recorder = asyncio.run(run())
    assert recorder.signals == [("on_subscribe", None), ("on_next", "a"), ("on_next", "b"), ("on_complete", None)]
    assert recorder.violations == []


def test_from_rsocket_publisher_more_than_requested_is_missing_backpressure() -> None:
    requester = FakeRequester()

    async def run() -> Recorder:
        recorder = Recorder(initial=1)
        from_rsocket_publisher(requester).subscribe(recorder)
        await settle()
        requester.subscriber.on_next("a")
        requester.subscriber.on_next("b")
        return recorder

    recorder = asyncio.run(run())
    assert recorder.kinds() == ["on_subscribe", "on_next", "on_error"]
    assert isinstance(recorder.error, MissingBackpressureError)
    assert requester.cancelled


def test_from_rsocket_publisher_request_from_another_thread_runs_on_the_loop() -> None:
    requester = FakeRequester()

    async def run() -> int:
        recorder = Recorder()
        from_rsocket_publisher(requester).subscribe(recorder)
        await settle()
        await asyncio.to_thread(recorder.request, 1)
        await settle()
        await asyncio.to_thread(recorder.request, 2)
        await settle()
        return threading.get_ident()

    loop_thread = asyncio.run(run())
    assert requester.initial == 1 and requester.requests == [2]
    assert requester.request_threads == {loop_thread}


@pytest.mark.parametrize(("n", "kind"), [(0, ValueError), (-1, ValueError), (True, TypeError)])
def test_from_rsocket_publisher_bad_request_cancels_and_signals_error(n: Any, kind: type) -> None:
    requester = FakeRequester()

    async def run() -> Recorder:
        recorder = Recorder(initial=1)
        from_rsocket_publisher(requester).subscribe(recorder)
        await settle()
        recorder.subscription.request(n)  # type: ignore[union-attr]
        await settle()
        return recorder

    recorder = asyncio.run(run())
    assert recorder.kinds() == ["on_subscribe", "on_error"]
    assert isinstance(recorder.error, kind) and "rule 3.9" in str(recorder.error)
    assert requester.cancelled


def test_from_rsocket_publisher_refused_stream_becomes_on_error() -> None:
    refusal = ConnectionError("no connection")

    class Refusing(FakeRequester):
        def subscribe(self, subscriber: Any) -> None:
            raise refusal

    async def run() -> Recorder:
        recorder = Recorder(initial=1)
        from_rsocket_publisher(Refusing()).subscribe(recorder)
        await settle()
        return recorder

    recorder = asyncio.run(run())
    assert recorder.kinds() == ["on_subscribe", "on_error"]
    assert recorder.error is refusal


def test_from_rsocket_publisher_serves_one_subscriber() -> None:
    requester = FakeRequester()

    async def run() -> Recorder:
        publisher = from_rsocket_publisher(requester)
        publisher.subscribe(Recorder())
        second = Recorder()
        publisher.subscribe(second)
        await settle()
        return second

    second = asyncio.run(run())
    assert second.kinds() == ["on_subscribe", "on_error"]
    assert str(second.error).endswith("serves one subscriber; request a new stream")


def test_from_rsocket_publisher_is_both_flow_and_reactive_streams() -> None:
    async def run() -> None:
        publisher = from_rsocket_publisher(FakeRequester())
        assert to_publisher(publisher) is publisher
        assert to_flow_publisher(publisher) is publisher

    asyncio.run(run())


@settings(max_examples=100, deadline=None)
@given(
    steps=st.lists(
        st.one_of(
            st.tuples(st.just("request"), st.one_of(st.integers(1, 50), st.integers(2**30, MAX))),
            st.tuples(st.just("deliver"), st.integers(1, 50)),
        ),
        max_size=30,
    )
)
def test_from_rsocket_publisher_wire_demand_never_exceeds_max_request_n(steps: list[tuple[str, int]]) -> None:
    requester = FakeRequester()

    async def run() -> None:
        recorder = Recorder()
        from_rsocket_publisher(requester).subscribe(recorder)
        await settle()
        requested = delivered = 0
        unbounded = False  # the wire demand reached MAX_REQUEST_N: the remote sends without limit
        for action, n in steps:
            if action == "request":
                recorder.request(n)
                requested = min(requested + n, MAX)
            else:
                on_wire = (requester.initial or 0) + sum(requester.requests)
                for _ in range(min(n, on_wire - delivered)):  # the remote obeys its demand
                    requester.subscriber.on_next(delivered)
                    delivered += 1
            await settle()
            on_wire = (requester.initial or 0) + sum(requester.requests)
            assert all(0 < r <= MAX_REQUEST_N for r in requester.requests)
            assert on_wire - delivered <= MAX_REQUEST_N
            unbounded = unbounded or on_wire - delivered == MAX_REQUEST_N
            assert on_wire == requested or unbounded  # exact until unbounded
        assert recorder.violations == [] and recorder.error is None
        assert recorder.items == list(range(delivered))

    asyncio.run(run())


def test_to_rsocket_subscriber_forwards_demand_and_translates_is_complete() -> None:
    requester = FakeRequester()

    async def run() -> Recorder:
        recorder = Recorder(initial=MAX)
        rsocket_subscriber = to_rsocket_subscriber(recorder)
        requester.subscribe(rsocket_subscriber)  # what RequestChannelResponder does
        await settle()
        assert requester.requests == [MAX_REQUEST_N]
        rsocket_subscriber.on_next("x", is_complete=True)
        with pytest.raises(TypeError, match=r"^value must not be None \(rule 2\.13\)$"):
            rsocket_subscriber.on_next(None)
        with pytest.raises(TypeError, match=r"^exception must not be None \(rule 2\.13\)$"):
            rsocket_subscriber.on_error(None)
        return recorder

    recorder = asyncio.run(run())
    assert recorder.signals == [("on_subscribe", None), ("on_next", "x"), ("on_complete", None)]


def test_to_rsocket_subscriber_cancel_reaches_rsocket() -> None:
    requester = FakeRequester()

    async def run() -> None:
        recorder = Recorder(initial=1)
        requester.subscribe(to_rsocket_subscriber(recorder))
        await settle()
        await asyncio.to_thread(recorder.cancel)
        await settle()

    asyncio.run(run())
    assert requester.cancelled


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: to_rsocket_publisher(None), r"^publisher must be a Publisher, got None$"),  # type: ignore[arg-type]
        (lambda: to_rsocket_publisher(5), r"^publisher must be a Publisher, got 5$"),  # type: ignore[arg-type]
        (lambda: from_rsocket_subscriber(None), r" must not be None$"),
        (lambda: from_rsocket_publisher(None), r"^publisher must be a Publisher, got None$"),
        (lambda: from_rsocket_publisher(5), r"^publisher must be a Publisher, got 5$"),
        (lambda: to_rsocket_subscriber(None), r" must not be None$"),  # type: ignore[arg-type]
    ],
)
def test_adapters_reject_none_and_what_is_no_publisher(make: Callable[[], Any], message: str) -> None:
    with pytest.raises(TypeError, match=message):
        make()


# --- a real rsocket server and client over TCP --------------------------------------------


class Announcing(flow.Publisher[Any]):
    """Delegates to a publisher and says when it got its subscriber."""

    def __init__(self, publisher: flow.Publisher[Any]) -> None:
        self.publisher = publisher
        self.subscribed = threading.Event()

    def subscribe(self, subscriber: flow.Subscriber[Any]) -> None:
        self.publisher.subscribe(subscriber)
        self.subscribed.set()


class Producer(threading.Thread):
    """Submits ``count`` payloads once ``publisher`` has its subscriber, counting as it goes."""

    def __init__(self, announcing: Announcing, count: int, tag: str) -> None:
        super().__init__(daemon=True)
        self.announcing = announcing
        self.publisher: SubmissionPublisher[Payload] = announcing.publisher  # type: ignore[assignment]
        self.count = count
        self.tag = tag
        self.produced = 0
        self.changed = threading.Condition()

    def run(self) -> None:
        assert self.announcing.subscribed.wait(30)
        for i in range(self.count):
            self.publisher.submit(Payload(f"{self.tag}{i}".encode()))
            with self.changed:
                self.produced = i + 1
                self.changed.notify_all()
        self.publisher.close()

    def wait_produced(self, count: int, timeout: float = 20) -> bool:
        with self.changed:
            return self.changed.wait_for(lambda: self.produced == count, timeout)


class Windowed(Recorder):
    """Requests ``window`` at a time as each window fills; stops asking once ``pause_at`` arrived.

    Runs on the event loop (rsocket calls it there); ``paused`` and ``finished``
    are asyncio events of that loop.
    """

    def __init__(self, window: int, pause_at: int | None) -> None:
        super().__init__(initial=window)
        self.window = window
        self.pause_at = pause_at
        self.paused = asyncio.Event()
        self.finished = asyncio.Event()

    def on_next(self, item: Any) -> None:
        super().on_next(item)
        received = len(self.items)
        if received == self.pause_at:
            self.paused.set()
        elif received % self.window == 0:
            self.request(self.window)

    def on_error(self, error: BaseException) -> None:
        super().on_error(error)
        self.finished.set()

    def on_complete(self) -> None:
        super().on_complete()
        self.finished.set()


async def observe_blocked(producer: Producer, delivered: int) -> None:
    """The producer fills the publisher's buffer, then stays blocked in submit(): demand crossed the wire."""
    capacity = producer.publisher.max_buffer_capacity
    assert await asyncio.to_thread(producer.wait_produced, delivered + capacity), (
        f"producer stopped at {producer.produced}, expected {delivered + capacity}"
    )

    def still_blocked() -> bool:
        producer.join(0.3)  # the loop keeps running meanwhile: nothing may flow
        return producer.is_alive()

    assert await asyncio.to_thread(still_blocked)
    assert producer.produced == delivered + capacity


def numbered(tag: str, items: list[Any]) -> list[int]:
    return [int(bytes(payload.data).decode().removeprefix(tag)) for payload in items]


def serve_and_run(handler_class: type[Any], body: Callable[[RSocketClient], Awaitable[None]]) -> None:
    """Run ``body(client)`` against a real RSocket server listening on 127.0.0.1 (a free port)."""

    async def main() -> None:
        servers: list[RSocketServer] = []

        async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            servers.append(RSocketServer(TransportTCP(reader, writer), handler_factory=handler_class))

        server = await asyncio.start_server(on_connect, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            async with RSocketClient(single_transport_provider(TransportTCP(reader, writer))) as client:
                await asyncio.wait_for(body(client), 60)
        finally:
            for rsocket_server in servers:
                await rsocket_server.close()
            server.close()
            await server.wait_closed()

    asyncio.run(main())


def test_request_stream_100k_payloads_with_backpressure_over_tcp() -> None:
    total, window, pause_at = 100_000, 1000, 10_000
    server_publisher = Announcing(SubmissionPublisher[Payload](max_buffer_capacity=256))
    producer = Producer(server_publisher, total, "")

    class Handler(BaseRequestHandler):  # type: ignore[misc]
        async def request_stream(self, payload: Payload) -> Any:
            assert payload.data == b"numbers"
            producer.start()
            return to_rsocket_publisher(server_publisher)

    async def body(client: RSocketClient) -> None:
        consumer = Windowed(window, pause_at)
        from_rsocket_publisher(client.request_stream(Payload(b"numbers"))).subscribe(consumer)
        await consumer.paused.wait()
        await observe_blocked(producer, pause_at)
        consumer.request(window)  # resume
        await consumer.finished.wait()
        assert consumer.completed and consumer.error is None
        assert consumer.violations == []
        assert numbered("", consumer.items) == list(range(total))

    serve_and_run(Handler, body)
    producer.join(10)
    assert producer.produced == total


def test_request_channel_both_directions_with_backpressure_over_tcp() -> None:
    total, window, pause_at = 20_000, 500, 5_000
    server_publisher = Announcing(SubmissionPublisher[Payload](max_buffer_capacity=64))
    server_producer = Producer(server_publisher, total, "s")
    client_publisher = Announcing(SubmissionPublisher[Payload](max_buffer_capacity=64))
    client_producer = Producer(client_publisher, total, "c")
    server_consumers: asyncio.Queue[Windowed] = asyncio.Queue()

    class Handler(BaseRequestHandler):  # type: ignore[misc]
        async def request_channel(self, payload: Payload) -> Any:
            assert payload.data == b"chat"
            consumer = Windowed(window, pause_at)
            server_consumers.put_nowait(consumer)
            server_producer.start()
            return to_rsocket_publisher(server_publisher), to_rsocket_subscriber(consumer)

    async def body(client: RSocketClient) -> None:
        client_producer.start()
        responses = client.request_channel(Payload(b"chat"), to_rsocket_publisher(client_publisher))
        consumer = Windowed(window, None)
        from_rsocket_publisher(responses).subscribe(consumer)
        server_consumer = await server_consumers.get()
        await server_consumer.paused.wait()
        await observe_blocked(client_producer, pause_at)  # the server's pause reached the client's producer
        server_consumer.request(window)
        await asyncio.gather(consumer.finished.wait(), server_consumer.finished.wait())
        for received, tag in ((consumer, "s"), (server_consumer, "c")):
            assert received.completed and received.violations == []
            assert numbered(tag, received.items) == list(range(total))

    serve_and_run(Handler, body)


def test_from_rsocket_publisher_on_subscribe_raising_is_cancelled_and_answered_with_on_error() -> None:
    requester = FakeRequester()
    raised = RuntimeError("not now")

    class Refusing(Recorder):
        def on_subscribe(self, subscription: Any) -> None:
            super().on_subscribe(subscription)
            raise raised

    async def run() -> Recorder:
        recorder = Refusing()
        from_rsocket_publisher(requester).subscribe(recorder)  # does not raise (rule 2.13)
        await settle()
        assert recorder.subscription is not None
        recorder.subscription.request(5)  # cancelled: a no-op (rule 3.6)
        await settle()
        return recorder

    recorder = asyncio.run(run())
    assert recorder.kinds() == ["on_subscribe", "on_error"]
    assert recorder.error is raised
    assert requester.subscriber is None  # no stream was ever requested
