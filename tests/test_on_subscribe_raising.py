"""Rule 2.13 for a raising ``on_subscribe``, the same for every publisher flowpy makes.

The subscription is cancelled (the upstream too, where there is one), the
subscriber gets ``on_error`` with the raised exception once and nothing
more, and ``subscribe()`` returns normally. A raising ``on_error`` after
that is logged. A ``KeyboardInterrupt`` gets the same treatment and is then
re-raised from ``subscribe()``.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import Future
from typing import Any

import pytest

from flowpy import operators as ops
from flowpy.executors import direct_executor
from flowpy.flow import Publisher, Subscriber, Subscription
from flowpy.interop.asyncio import from_async_iterable
from flowpy.interop.futures import from_future
from flowpy.processors import MulticastProcessor, TransformProcessor
from flowpy.sources import IterablePublisher, RangePublisher, empty, error, just
from tests.support import Recorder

WAIT = 10.0  # seconds; only ever reached when a test is about to fail


class _RecordedSubscription(Subscription):
    def __init__(self) -> None:
        self.requests: list[int] = []
        self.cancelled = False

    def request(self, n: int) -> None:
        self.requests.append(n)

    def cancel(self) -> None:
        self.cancelled = True


class RecordingSource(Publisher[Any]):
    """An upstream that signals ``on_subscribe`` at once and records what its subscribers do."""

    def __init__(self) -> None:
        self.subscriptions: list[_RecordedSubscription] = []

    def subscribe(self, subscriber: Subscriber[Any]) -> None:
        subscription = _RecordedSubscription()
        self.subscriptions.append(subscription)
        subscriber.on_subscribe(subscription)

    def all_cancelled(self) -> bool:
        return all(subscription.cancelled for subscription in self.subscriptions)


class Refusing(Recorder):
    """Records ``on_subscribe``, then raises ``error`` from it."""

    def __init__(self, error: BaseException) -> None:
        super().__init__()
        self.raised = error

    def on_subscribe(self, subscription: Subscription) -> None:
        super().on_subscribe(subscription)
        raise self.raised


class _Cases:
    """Builds each publisher kind over ``RecordingSource``s (kept in ``sources``)."""

    def __init__(self) -> None:
        self.sources: list[RecordingSource] = []
        self.after: list[Callable[[], None]] = []  # run after subscribe (connect, ...)
        # A multicast stage: its upstream serves every subscriber, and only the
        # last one to leave after joining cancels it; one that raised never joined.
        self.multicast: MulticastProcessor[Any] | None = None

    def source(self) -> RecordingSource:
        source = RecordingSource()
        self.sources.append(source)
        return source


def _multicast(cases: _Cases) -> Publisher[Any]:
    processor: MulticastProcessor[Any] = MulticastProcessor()
    cases.source().subscribe(processor)
    cases.multicast = processor
    return processor


def _transform(cases: _Cases) -> Publisher[Any]:
    processor: TransformProcessor[Any, Any] = TransformProcessor(lambda x: x, executor=direct_executor)
    cases.source().subscribe(processor)
    return processor


def _publish(cases: _Cases) -> Publisher[Any]:
    connectable = ops.publish(cases.source())
    cases.after.append(connectable.connect)
    cases.multicast = connectable._processor
    return connectable


def _share(cases: _Cases) -> Publisher[Any]:
    connectable = ops.share(cases.source())
    cases.multicast = connectable._processor
    return connectable


def _async_iterable(cases: _Cases) -> Publisher[Any]:
    async def numbers() -> AsyncIterator[int]:
        for number in range(3):
            yield number

    return from_async_iterable(numbers())


def _observable(cases: _Cases) -> Publisher[Any]:
    reactivex = pytest.importorskip("reactivex")
    from flowpy.interop.reactivex import from_observable

    return from_observable(reactivex.of(1, 2, 3), executor=direct_executor)


def _future(cases: _Cases) -> Publisher[Any]:
    future: Future[int] = Future()
    future.set_result(1)
    return from_future(future)


def _iterable(cases: _Cases) -> Publisher[Any]:
    def numbers() -> Iterator[int]:
        yield from range(3)

    return IterablePublisher(numbers(), executor=direct_executor)


KINDS: dict[str, Callable[[_Cases], Publisher[Any]]] = {
    "map": lambda c: ops.map(c.source(), lambda x: x),
    "filter": lambda c: ops.filter(c.source(), lambda x: True),
    "scan": lambda c: ops.scan(c.source(), lambda a, x: x, 0),
    "take": lambda c: ops.take(c.source(), 2),
    "observe_on": lambda c: ops.observe_on(c.source(), direct_executor),
    "subscribe_on": lambda c: ops.subscribe_on(c.source(), direct_executor),
    "merge": lambda c: ops.merge(c.source(), c.source()),
    "concat": lambda c: ops.concat(c.source(), c.source()),
    "zip": lambda c: ops.zip(c.source(), c.source()),
    "flat_map": lambda c: ops.flat_map(c.source(), lambda x: just(x)),
    "buffer": lambda c: ops.buffer(c.source(), 2),
    "on_backpressure_buffer": lambda c: ops.on_backpressure_buffer(c.source()),
    "on_backpressure_drop": lambda c: ops.on_backpressure_drop(c.source()),
    "on_backpressure_latest": lambda c: ops.on_backpressure_latest(c.source()),
    "publish": _publish,
    "share": _share,
    "IterablePublisher": _iterable,
    "RangePublisher": lambda c: RangePublisher(0, 3),
    "just": lambda c: just(1, 2),
    "empty": lambda c: empty(),
    "error": lambda c: error(ValueError("source failed")),
    "MulticastProcessor": _multicast,
    "TransformProcessor": _transform,
    "from_async_iterable": _async_iterable,
    "from_future": _future,
    "from_observable": _observable,
}


def _subscribe_refusing(kind: str, raised: BaseException) -> tuple[_Cases, Refusing]:
    cases = _Cases()
    publisher = KINDS[kind](cases)
    subscriber = Refusing(raised)
    publisher.subscribe(subscriber)  # must not raise an Exception
    for step in cases.after:
        step()
    return cases, subscriber


@pytest.mark.parametrize("kind", list(KINDS))
def test_on_subscribe_raising_cancels_and_signals_on_error_once(kind: str) -> None:
    raised = RuntimeError("not now")
    cases, subscriber = _subscribe_refusing(kind, raised)
    assert subscriber.done.wait(WAIT), f"no on_error; got {subscriber.kinds()}"
    assert subscriber.subscription is not None
    subscriber.subscription.request(5)  # cancelled: a no-op (rule 3.6)
    assert subscriber.kinds() == ["on_subscribe", "on_error"]
    assert subscriber.error is raised
    assert subscriber.violations == []
    if cases.multicast is not None:
        assert cases.multicast.number_of_subscribers == 0  # released, never joined
        late = Recorder(initial=1)
        cases.multicast.subscribe(late)  # the shared upstream still serves the next subscriber
        assert late.kinds() == ["on_subscribe"]
        assert not any(source.subscriptions[0].cancelled for source in cases.sources)
        return
    assert all(source.all_cancelled() for source in cases.sources), [
        [s.cancelled for s in source.subscriptions] for source in cases.sources
    ]


@pytest.mark.parametrize("kind", ["map", "observe_on", "merge", "zip", "flat_map", "RangePublisher", "empty"])
def test_on_subscribe_raising_keyboard_interrupt_ends_the_stream_then_propagates(kind: str) -> None:
    raised = KeyboardInterrupt()
    cases = _Cases()
    publisher = KINDS[kind](cases)
    subscriber = Refusing(raised)
    with pytest.raises(KeyboardInterrupt):
        publisher.subscribe(subscriber)
    assert subscriber.kinds() == ["on_subscribe", "on_error"]
    assert subscriber.error is raised
    assert all(source.all_cancelled() for source in cases.sources)


def test_on_subscribe_raising_then_on_error_raising_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    class Worse(Refusing):
        def on_error(self, error: BaseException) -> None:
            super().on_error(error)
            raise ValueError("on_error failed too")

    source = RecordingSource()
    subscriber = Worse(RuntimeError("not now"))
    with caplog.at_level(logging.ERROR, logger="flowpy"):
        ops.map(source, lambda x: x).subscribe(subscriber)
    assert subscriber.kinds() == ["on_subscribe", "on_error"]
    assert source.all_cancelled()
    assert "on_error of" in caplog.text and "on_error failed too" in caplog.text


def test_subscribe_on_refused_subscribe_task_and_raising_on_subscribe_signals_on_error_once() -> None:
    from tests.support import RejectingExecutor

    raised = RuntimeError("not now")
    source = RecordingSource()
    subscriber = Refusing(raised)
    ops.subscribe_on(source, RejectingExecutor(0)).subscribe(subscriber)  # must not raise
    assert subscriber.kinds() == ["on_subscribe", "on_error"]
    assert subscriber.error is raised  # the raised exception, not the executor's
    assert source.subscriptions == []
