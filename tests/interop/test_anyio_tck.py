"""The Reactive Streams TCK on from_receive_stream, on both of anyio's backends."""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator
from concurrent.futures import CancelledError
from typing import Any, ClassVar

import pytest

tck = pytest.importorskip("flowpy.tck", reason="the TCK (flowpy.tck) is not in this checkout")
anyio = pytest.importorskip("anyio")
pytest.importorskip("trio")

from anyio.from_thread import start_blocking_portal  # noqa: E402

from flowpy import flow  # noqa: E402
from flowpy.interop.anyio import from_receive_stream  # noqa: E402

pytestmark = pytest.mark.timeout(120)


class _ReceiveStreamVerification(tck.PublisherVerification):  # type: ignore[misc,name-defined]
    """Each publisher receives from a stream fed by a task that sends ``elements`` ints, then closes it."""

    backend: ClassVar[str]

    @classmethod
    def setup_class(cls) -> None:
        parent = getattr(super(), "setup_class", None)
        if parent is not None:
            parent()
        cls._portal_cm = start_blocking_portal(cls.backend)
        cls.portal = cls._portal_cm.__enter__()
        cls._group_cm = cls.portal.wrap_async_context_manager(cls.portal.call(anyio.create_task_group))
        cls.task_group = cls._group_cm.__enter__()

    @classmethod
    def teardown_class(cls) -> None:
        cls.portal.call(cls.task_group.cancel_scope.cancel)  # the senders nobody drained
        with contextlib.suppress(CancelledError):  # the group's own task was cancelled with it
            cls._group_cm.__exit__(None, None, None)
        cls._portal_cm.__exit__(None, None, None)
        parent = getattr(super(), "teardown_class", None)
        if parent is not None:
            parent()

    def create_test_environment(self) -> Any:
        return tck.TestEnvironment(300, 30, 10)

    def create_publisher(self, elements: int) -> flow.Publisher[Any]:
        return self.portal.call(self._make, None if elements >= 2**63 - 1 else elements)  # type: ignore[no-any-return]

    def _make(self, elements: int | None) -> flow.Publisher[Any]:
        """On the loop: a stream, a task sending into it, and the publisher over it."""
        send, receive = anyio.create_memory_object_stream[int](0)

        async def produce() -> None:
            numbers: Iterator[int] = itertools.count() if elements is None else iter(range(elements))
            with send:
                for i in numbers:
                    try:
                        await send.send(i)
                    except anyio.BrokenResourceError:  # the subscriber cancelled
                        return

        self.task_group.start_soon(produce)
        return from_receive_stream(receive, self.task_group)

    def create_failed_publisher(self) -> flow.Publisher[Any] | None:
        """None: a receive stream fails only when received from, so only once requested."""
        return None

    def max_elements_from_publisher(self) -> int:
        return 1024


class TestFromReceiveStreamAsyncio(_ReceiveStreamVerification):
    backend = "asyncio"


class TestFromReceiveStreamTrio(_ReceiveStreamVerification):
    backend = "trio"
