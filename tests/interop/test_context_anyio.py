"""Context propagation through the anyio bridge, on both of anyio's backends (flowpy/_context.py)."""

from __future__ import annotations

import pytest

anyio = pytest.importorskip("anyio")
pytest.importorskip("trio")

from flowpy.interop.anyio import from_receive_stream  # noqa: E402
from tests.context_helpers import REQUEST_ID, ContextRecorder, in_context  # noqa: E402

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

UNBOUNDED = 2**63 - 1


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def _receive_all(subscribe_from_thread: bool) -> ContextRecorder:
    send, receive = anyio.create_memory_object_stream[int](10)
    for i in range(5):
        send.send_nowait(i)
    send.close()
    recorder = ContextRecorder(initial=UNBOUNDED)
    REQUEST_ID.set("loop-task")
    async with anyio.create_task_group() as tg:
        publisher = from_receive_stream(receive, tg)
        if subscribe_from_thread:
            await anyio.to_thread.run_sync(in_context, "request-1", publisher.subscribe, recorder)
        else:
            in_context("request-1", publisher.subscribe, recorder)
    return recorder


@pytest.mark.parametrize("subscribe_from_thread", [False, True], ids=["on-the-loop", "from-a-thread"])
async def test_from_receive_stream_signals_in_the_subscribe_context(subscribe_from_thread: bool) -> None:
    recorder = await _receive_all(subscribe_from_thread)
    assert recorder.items == [0, 1, 2, 3, 4]
    assert recorder.completed
    assert recorder.values() == {"request-1"}
