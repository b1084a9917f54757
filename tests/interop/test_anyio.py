"""anyio interop on both of anyio's backends: to_receive_stream, to_send_stream, from_receive_stream."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

anyio = pytest.importorskip("anyio")
pytest.importorskip("trio")

from anyio import wait_all_tasks_blocked  # noqa: E402

from flowpy._demand import replenish_limit  # noqa: E402
from flowpy.flowable import Flowable  # noqa: E402
from flowpy.interop.anyio import from_receive_stream, to_receive_stream, to_send_stream  # noqa: E402
from flowpy.submission import SubmissionPublisher  # noqa: E402
from tests.interop.helpers import ManualPublisher, WaitingRecorder  # noqa: E402
from tests.support import Recorder  # noqa: E402

if sys.version_info < (3, 11):
    from exceptiongroup import ExceptionGroup

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

WAIT = 10.0  # seconds; only ever reached when a test is about to fail


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def send_from_thread(publisher: ManualPublisher, *signals: tuple[str, Any]) -> None:
    """Send ``signals`` to the subscriber from another thread, as a publisher's executor would."""

    def run() -> None:
        for name, value in signals:
            if name == "on_next":
                publisher.subscriber.on_next(value)
            elif name == "on_error":
                publisher.subscriber.on_error(value)
            else:
                publisher.subscriber.on_complete()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(WAIT)


# --- to_receive_stream ----------------------------------------------------------------


async def test_to_receive_stream_delivers_every_item_then_ends() -> None:
    async with anyio.create_task_group() as tg:
        receive = to_receive_stream(Flowable.range(3, 500).map(str), tg, prefetch=16)
        got = [item async for item in receive]
    assert got == [str(i) for i in range(3, 503)]


@pytest.mark.usefixtures("tiny_switch_interval")
async def test_to_receive_stream_over_producer_thread_keeps_the_producer_within_demand() -> None:
    prefetch, capacity, total, first = 4, 4, 200, 10
    publisher = SubmissionPublisher[int](max_buffer_capacity=capacity)
    submitted = 0
    changed = threading.Condition()

    def produce() -> None:
        nonlocal submitted
        with publisher:
            for i in range(total):
                publisher.submit(i)  # blocks while the receiver is behind
                with changed:
                    submitted += 1
                    changed.notify_all()

    def wait_for_submitted(count: int) -> bool:
        with changed:
            return changed.wait_for(lambda: submitted >= count, WAIT)

    got: list[int] = []
    producer = threading.Thread(target=produce)
    async with anyio.create_task_group() as tg:
        receive = to_receive_stream(publisher, tg, prefetch=prefetch)
        producer.start()
        for _ in range(first):
            got.append(await receive.receive())
        # The receiver stops: the producer fills what was requested and the buffer, then blocks.
        assert await anyio.to_thread.run_sync(wait_for_submitted, first + capacity)
        await wait_all_tasks_blocked()
        assert submitted <= first + prefetch + capacity
        assert producer.is_alive()  # blocked in submit()
        async for item in receive:
            got.append(item)
            assert submitted <= len(got) + prefetch + capacity
    await anyio.to_thread.run_sync(producer.join, WAIT)
    assert got == list(range(total))


async def test_to_receive_stream_never_requests_more_than_prefetch_ahead_of_the_receiver() -> None:
    publisher = ManualPublisher()
    prefetch, sent, got = 8, 0, []
    async with anyio.create_task_group() as tg:
        receive = to_receive_stream(publisher, tg, prefetch=prefetch)
        subscription = publisher.subscription
        assert subscription.requests == [prefetch]
        for _ in range(10):
            await wait_all_tasks_blocked()  # the sending task has requested what the receiver's takes allow
            outstanding = subscription.requested - sent  # a publisher sends all it may (rule 1.1)
            send_from_thread(publisher, *[("on_next", sent + i) for i in range(outstanding)])
            sent += outstanding
            await wait_all_tasks_blocked()
            # Never more than prefetch ahead; replenished in batches of replenish_limit(prefetch).
            assert prefetch - replenish_limit(prefetch) < subscription.requested - len(got) <= prefetch
            got += [await receive.receive() for _ in range(3)]
        receive.close()
        tg.cancel_scope.cancel()  # the sending task waits for an item that will never come
    assert got == list(range(30))
    assert publisher.subscription.cancelled.is_set()


async def test_to_receive_stream_on_error_reaches_the_receiver_after_the_items() -> None:
    publisher = ManualPublisher()
    error = ConnectionResetError("peer went away")
    got: list[int] = []
    with pytest.raises(ExceptionGroup) as raised:
        async with anyio.create_task_group() as tg:
            receive = to_receive_stream(publisher, tg)
            send_from_thread(publisher, ("on_next", 1), ("on_next", 2), ("on_error", error))
            async for item in receive:
                got.append(item)
            pytest.fail("the receiver is cancelled, not ended")
    assert raised.value.exceptions == (error,)
    assert got == [1, 2]
    assert not publisher.subscription.cancelled.is_set()  # a terminated subscription needs no cancel


async def test_to_receive_stream_close_while_the_stream_is_full_cancels_at_once() -> None:
    publisher = ManualPublisher()
    async with anyio.create_task_group() as tg:
        receive = to_receive_stream(publisher, tg, prefetch=3)
        send_from_thread(publisher, ("on_next", 1), ("on_next", 2))
        await wait_all_tasks_blocked()  # the sending task waits in send()
        assert receive.statistics().tasks_waiting_send == 1
        receive.close()
        await wait_all_tasks_blocked()
        assert publisher.subscription.cancelled.is_set()


async def test_to_receive_stream_close_while_idle_cancels_at_the_next_item() -> None:
    publisher = ManualPublisher()
    async with anyio.create_task_group() as tg:
        receive = to_receive_stream(publisher, tg)
        await wait_all_tasks_blocked()
        receive.close()
        await wait_all_tasks_blocked()
        assert not publisher.subscription.cancelled.is_set()
        send_from_thread(publisher, ("on_next", 1))
        assert await anyio.to_thread.run_sync(publisher.subscription.cancelled.wait, WAIT)


async def test_to_receive_stream_task_group_cancelled_cancels_the_subscription() -> None:
    publisher = ManualPublisher()
    async with anyio.create_task_group() as tg:
        to_receive_stream(publisher, tg)
        await wait_all_tasks_blocked()
        tg.cancel_scope.cancel()
    assert publisher.subscription.cancelled.is_set()


async def test_to_receive_stream_none_item_is_refused() -> None:
    publisher = ManualPublisher()
    async with anyio.create_task_group() as tg:
        receive = to_receive_stream(publisher, tg)
        with pytest.raises(TypeError, match=r"^item must not be None \(rule 2\.13\)$"):
            publisher.subscriber.on_next(None)
        receive.close()
        tg.cancel_scope.cancel()


@pytest.mark.parametrize(
    ("prefetch", "kind", "message"),
    [
        (0, ValueError, r"^prefetch must be positive, got 0$"),
        (1.5, TypeError, r"^prefetch must be an int, got 1\.5$"),
    ],
)
async def test_to_receive_stream_rejects_bad_prefetch(prefetch: Any, kind: type, message: str) -> None:
    async with anyio.create_task_group() as tg:
        with pytest.raises(kind, match=message):
            to_receive_stream(ManualPublisher(), tg, prefetch=prefetch)


def test_to_receive_stream_outside_an_event_loop_says_so() -> None:
    with pytest.raises(anyio.NoEventLoopError, match=r"^Not currently running on any asynchronous event loop"):
        to_receive_stream(ManualPublisher(), object(), prefetch=4)  # type: ignore[arg-type]


# --- to_send_stream -------------------------------------------------------------------


async def test_to_send_stream_full_stream_stops_the_requests() -> None:
    publisher = ManualPublisher()
    send, receive = anyio.create_memory_object_stream[int](2)
    async with anyio.create_task_group() as tg:
        publisher.subscribe(to_send_stream(send, tg, prefetch=2))
        assert publisher.subscription.requests == [2]
        send_from_thread(publisher, ("on_next", 0), ("on_next", 1))
        await wait_all_tasks_blocked()
        assert receive.statistics().current_buffer_used == 2
        assert publisher.subscription.requests == [2, 2]  # both sent: two more
        send_from_thread(publisher, ("on_next", 2), ("on_next", 3))
        await wait_all_tasks_blocked()
        assert receive.statistics().tasks_waiting_send == 1  # the stream is full
        assert publisher.subscription.requests == [2, 2]  # so nothing more is requested
        got = [await receive.receive() for _ in range(2)]
        await wait_all_tasks_blocked()
        assert publisher.subscription.requests == [2, 2, 2]
        send_from_thread(publisher, ("on_complete", None))
        got += [item async for item in receive]
    assert got == [0, 1, 2, 3]
    assert not publisher.subscription.cancelled.is_set()


# --- from_receive_stream --------------------------------------------------------------


async def test_from_receive_stream_receives_only_what_was_requested() -> None:
    send, receive = anyio.create_memory_object_stream[int](10)
    for i in range(5):
        send.send_nowait(i)
    recorder = Recorder()
    async with anyio.create_task_group() as tg:
        from_receive_stream(receive, tg).subscribe(recorder)
        await wait_all_tasks_blocked()
        assert recorder.signals == [("on_subscribe", None)]
        recorder.request(2)
        await wait_all_tasks_blocked()
        assert recorder.items == [0, 1]
        assert receive.statistics().current_buffer_used == 3  # the rest stays in the stream
        recorder.request(10)
        send.close()
    assert recorder.items == [0, 1, 2, 3, 4]
    assert recorder.completed
    assert recorder.violations == []


async def test_from_receive_stream_full_stream_blocks_its_senders() -> None:
    send, receive = anyio.create_memory_object_stream[int](2)
    recorder = Recorder(initial=1)
    async with anyio.create_task_group() as tg:
        from_receive_stream(receive, tg).subscribe(recorder)

        async def produce() -> None:
            async with send:
                for i in range(5):
                    await send.send(i)

        tg.start_soon(produce)
        await wait_all_tasks_blocked()
        assert recorder.items == [0]
        assert receive.statistics().current_buffer_used == 2
        assert receive.statistics().tasks_waiting_send == 1
        recorder.request(100)
    assert recorder.items == [0, 1, 2, 3, 4]
    assert recorder.completed


async def test_from_receive_stream_subscriber_on_another_thread() -> None:
    send, receive = anyio.create_memory_object_stream[int](0)
    recorder = WaitingRecorder(initial=3)
    async with anyio.create_task_group() as tg:
        publisher = from_receive_stream(receive, tg)
        await anyio.to_thread.run_sync(publisher.subscribe, recorder)
        async with send:
            for i in range(3):
                await send.send(i)
            # Posted to the loop; one more than is sent, to receive the end of the stream.
            await anyio.to_thread.run_sync(recorder.request, 3)
            for i in range(3, 5):
                await send.send(i)
    assert recorder.items == [0, 1, 2, 3, 4]
    assert recorder.completed
    assert recorder.violations == []


async def test_from_receive_stream_cancel_closes_the_stream() -> None:
    send, receive = anyio.create_memory_object_stream[int](1)
    recorder = Recorder(initial=1)
    async with anyio.create_task_group() as tg:
        from_receive_stream(receive, tg).subscribe(recorder)
        await send.send(0)
        await wait_all_tasks_blocked()
        await anyio.to_thread.run_sync(recorder.cancel)
        await wait_all_tasks_blocked()
        with pytest.raises(anyio.BrokenResourceError):
            await send.send(1)
    assert recorder.items == [0]
    assert not recorder.terminated


async def test_from_receive_stream_cancel_while_receiving_closes_the_stream() -> None:
    send, receive = anyio.create_memory_object_stream[int](1)
    recorder = Recorder(initial=5)
    async with anyio.create_task_group() as tg:
        from_receive_stream(receive, tg).subscribe(recorder)
        await wait_all_tasks_blocked()  # waiting in receive()
        recorder.cancel()
        await wait_all_tasks_blocked()
        with pytest.raises(anyio.BrokenResourceError):
            send.send_nowait(1)
    assert recorder.signals == [("on_subscribe", None)]


async def test_from_receive_stream_closed_stream_signals_on_error() -> None:
    send, receive = anyio.create_memory_object_stream[int](1)
    receive.close()  # closed by other code before anything was received
    recorder = Recorder()
    async with anyio.create_task_group() as tg:
        from_receive_stream(receive, tg).subscribe(recorder)
        await wait_all_tasks_blocked()
        recorder.request(1)
    assert isinstance(recorder.error, anyio.ClosedResourceError)
    send.close()


async def test_from_receive_stream_request_zero_signals_rule_3_9_and_closes_the_stream() -> None:
    send, receive = anyio.create_memory_object_stream[int](1)
    recorder = Recorder()
    async with anyio.create_task_group() as tg:
        from_receive_stream(receive, tg).subscribe(recorder)
        await wait_all_tasks_blocked()
        recorder.request(0)
    assert isinstance(recorder.error, ValueError)
    assert "rule 3.9" in str(recorder.error)
    with pytest.raises(anyio.BrokenResourceError):
        send.send_nowait(1)


async def test_from_receive_stream_task_group_cancelled_signals_on_error() -> None:
    send, receive = anyio.create_memory_object_stream[int](1)
    recorder = Recorder(initial=1)
    async with anyio.create_task_group() as tg:
        from_receive_stream(receive, tg).subscribe(recorder)
        await wait_all_tasks_blocked()
        tg.cancel_scope.cancel()
    assert isinstance(recorder.error, RuntimeError)
    assert str(recorder.error) == "from_receive_stream: its task group was cancelled"
    send.close()


async def test_from_receive_stream_serves_one_subscriber() -> None:
    send, receive = anyio.create_memory_object_stream[int](1)
    first, second = Recorder(), Recorder()
    async with anyio.create_task_group() as tg:
        publisher = from_receive_stream(receive, tg)
        publisher.subscribe(first)
        publisher.subscribe(second)
        assert isinstance(second.error, RuntimeError)
        assert str(second.error) == "from_receive_stream serves one subscriber; clone() the stream for more"
        await wait_all_tasks_blocked()  # the first one's task has started
        first.cancel()
    send.close()


async def test_from_receive_stream_none_item_signals_type_error() -> None:
    send, receive = anyio.create_memory_object_stream[Any](1)
    send.send_nowait(None)
    recorder = Recorder(initial=1)
    async with anyio.create_task_group() as tg:
        from_receive_stream(receive, tg).subscribe(recorder)
    assert isinstance(recorder.error, TypeError)
    assert str(recorder.error) == "receive stream must not yield None (rule 2.13)"
    send.close()


# --- both ways ------------------------------------------------------------------------


async def test_round_trip_through_flowpy_operators() -> None:
    send, receive = anyio.create_memory_object_stream[int](4)
    async with anyio.create_task_group() as tg:
        squares = Flowable.from_publisher(from_receive_stream(receive, tg)).map(lambda x: x * x)
        out = to_receive_stream(squares, tg, prefetch=4)

        async def produce() -> None:
            async with send:
                for i in range(100):
                    await send.send(i)

        tg.start_soon(produce)
        got = [item async for item in out]
    assert got == [i * i for i in range(100)]


# --- the documented example -----------------------------------------------------------


@pytest.mark.timeout(90)
def test_docs_interop_anyio_example_prints_what_it_shows() -> None:
    root = Path(__file__).resolve().parents[2]
    text = (root / "docs" / "interop.md").read_text()
    section = text.split("## anyio and trio", 1)[1]
    match = re.search(r"```python\n(.*?)```\n\nprints\n\n```\n(.*?)```", section, flags=re.DOTALL)
    assert match is not None
    code, shown = match.groups()
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=80, check=True
    )
    assert result.stdout == shown
