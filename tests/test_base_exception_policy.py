"""A KeyboardInterrupt raised by user code ends the stream as an Exception would, then propagates.

Each case runs synchronously (``direct_executor``, synchronous sources), so
the interrupt comes out of the call that delivered: the test sees it with
``pytest.raises`` and then checks that the stream ended, upstream included.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Future
from typing import Any

import pytest

from flowpy import operators as ops
from flowpy._signals import chain_fatal
from flowpy.executors import direct_executor
from flowpy.processors import MulticastProcessor, TransformProcessor
from flowpy.sources import IterablePublisher, RangePublisher
from flowpy.subscribers import LambdaSubscriber, SyncSubscriber, consume
from tests.operators.conftest import Spy
from tests.support import Recorder


def _interrupt(*_: Any) -> Any:
    raise KeyboardInterrupt


@pytest.mark.parametrize(
    "build",
    [
        lambda spy: ops.map(spy, _interrupt),
        lambda spy: ops.filter(spy, _interrupt),
        lambda spy: ops.zip(spy, RangePublisher(0, 5), fn=_interrupt),
        lambda spy: ops.flat_map(spy, _interrupt),
        lambda spy: ops.on_backpressure_drop(spy, _interrupt),
    ],
    ids=["map", "filter", "zip", "flat_map", "on_backpressure_drop"],
)
def test_operator_function_raising_keyboard_interrupt_signals_on_error_cancels_and_propagates(build: Any) -> None:
    spy = Spy(RangePublisher(0, 5))
    recorder = Recorder()
    with pytest.raises(KeyboardInterrupt):
        build(spy).subscribe(recorder)  # on_backpressure_drop drops, and raises, at once
        recorder.request(5)
    assert recorder.kinds()[-1] == "on_error"
    assert isinstance(recorder.error, KeyboardInterrupt)
    assert spy.subscription.cancelled.is_set()
    assert recorder.violations == []


@pytest.mark.parametrize(
    "build",
    [
        lambda spy: ops.observe_on(spy, direct_executor),
        lambda spy: ops.merge(spy),
        lambda spy: ops.zip(spy, RangePublisher(0, 5)),
        lambda spy: ops.on_backpressure_buffer(spy),
    ],
    ids=["observe_on", "merge", "zip", "on_backpressure_buffer"],
)
def test_drain_operator_on_next_raising_keyboard_interrupt_cancels_upstream_and_propagates(build: Any) -> None:
    spy = Spy(RangePublisher(0, 5))
    recorder = Recorder(on_next_hook=_interrupt)
    build(spy).subscribe(recorder)
    with pytest.raises(KeyboardInterrupt):
        recorder.request(5)
    assert recorder.kinds() == ["on_subscribe", "on_next"]
    assert spy.subscription.cancelled.is_set()
    recorder.request(1)  # the drain is idle and the stream over: nothing more, nothing raised
    assert recorder.kinds() == ["on_subscribe", "on_next"]


def test_range_on_next_raising_keyboard_interrupt_cancels_and_propagates() -> None:
    recorder = Recorder(on_next_hook=_interrupt)
    RangePublisher(0, 5).subscribe(recorder)
    with pytest.raises(KeyboardInterrupt):
        recorder.request(5)
    recorder.request(5)  # cancelled (rule 3.6)
    assert recorder.items == [0]


def test_iterable_iterator_raising_keyboard_interrupt_signals_on_error_and_propagates() -> None:
    def numbers() -> Iterator[int]:
        yield 1
        raise KeyboardInterrupt

    recorder = Recorder()
    IterablePublisher(numbers(), executor=direct_executor).subscribe(recorder)
    with pytest.raises(KeyboardInterrupt):
        recorder.request(5)
    assert recorder.kinds() == ["on_subscribe", "on_next", "on_error"]
    assert isinstance(recorder.error, KeyboardInterrupt)
    recorder.request(5)  # the drain is idle, not stuck, and the stream over
    assert recorder.kinds() == ["on_subscribe", "on_next", "on_error"]


def test_iterable_on_next_raising_keyboard_interrupt_cancels_and_propagates() -> None:
    recorder = Recorder(on_next_hook=_interrupt)
    IterablePublisher(iter(range(5)), executor=direct_executor).subscribe(recorder)
    with pytest.raises(KeyboardInterrupt):
        recorder.request(5)
    recorder.request(5)  # cancelled (rule 3.6): the drain is idle, not stuck
    assert recorder.items == [0]


def test_multicast_on_next_raising_keyboard_interrupt_ends_every_subscriber_then_propagates() -> None:
    spy = Spy(RangePublisher(0, 5))
    processor: MulticastProcessor[int] = MulticastProcessor(prefetch=4)
    failing = Recorder(initial=10, on_next_hook=_interrupt)
    other = Recorder(initial=10)
    processor.subscribe(failing)
    processor.subscribe(other)
    with pytest.raises(KeyboardInterrupt):
        spy.subscribe(processor)
    assert failing.kinds() == ["on_subscribe", "on_next"]
    # The pass delivered the item to the others, then ended them: the
    # upstream drops a processor whose on_next raised (rule 2.13).
    assert other.kinds() == ["on_subscribe", "on_next", "on_error"]
    assert isinstance(other.error, KeyboardInterrupt)
    assert spy.subscription.cancelled.is_set()
    late = Recorder()
    processor.subscribe(late)
    assert late.kinds() == ["on_subscribe", "on_error"]
    assert other.violations == [] and late.violations == []


def test_transform_processor_fn_raising_keyboard_interrupt_fails_subscribers_and_propagates() -> None:
    spy = Spy(RangePublisher(0, 5))
    processor: TransformProcessor[int, int] = TransformProcessor(_interrupt, executor=direct_executor)
    recorder = Recorder(initial=5)
    processor.subscribe(recorder)
    with pytest.raises(KeyboardInterrupt):
        spy.subscribe(processor)
    assert recorder.kinds() == ["on_subscribe", "on_error"]
    assert isinstance(recorder.error, KeyboardInterrupt)
    assert spy.subscription.cancelled.is_set()


def test_lambda_subscriber_on_next_raising_keyboard_interrupt_cancels_calls_on_error_and_propagates() -> None:
    errors: list[BaseException] = []
    spy = Spy(RangePublisher(0, 5))
    with pytest.raises(KeyboardInterrupt):
        spy.subscribe(LambdaSubscriber(_interrupt, errors.append))
    assert len(errors) == 1 and isinstance(errors[0], KeyboardInterrupt)
    assert spy.subscription.cancelled.is_set()


def test_sync_subscriber_when_next_raising_keyboard_interrupt_cancels_and_propagates() -> None:
    errors: list[BaseException] = []

    class Interrupted(SyncSubscriber[int]):
        def when_next(self, item: int) -> bool:
            raise KeyboardInterrupt

        def when_error(self, error: BaseException) -> None:
            errors.append(error)

    spy = Spy(RangePublisher(0, 5))
    with pytest.raises(KeyboardInterrupt):
        spy.subscribe(Interrupted())
    assert len(errors) == 1 and isinstance(errors[0], KeyboardInterrupt)
    assert spy.subscription.cancelled.is_set()


def test_consume_fn_raising_keyboard_interrupt_fails_the_future_cancels_and_propagates() -> None:
    spy = Spy(RangePublisher(0, 5))
    future: Future[None] | None = None
    with pytest.raises(KeyboardInterrupt):
        future = consume(spy, _interrupt)
    assert future is None  # consume() itself was interrupted, on this thread
    assert spy.subscription.cancelled.is_set()


def test_multicast_two_subscribers_raising_keyboard_interrupt_in_one_pass_lose_neither() -> None:
    first_interrupt, second_interrupt = KeyboardInterrupt("first"), KeyboardInterrupt("second")

    def raising(error: KeyboardInterrupt) -> Any:
        def on_next(item: int) -> None:
            raise error

        return on_next

    processor: MulticastProcessor[int] = MulticastProcessor(prefetch=4)
    first = Recorder(initial=10, on_next_hook=raising(first_interrupt))
    second = Recorder(initial=10, on_next_hook=raising(second_interrupt))
    other = Recorder(initial=10)
    for recorder in (first, other, second):
        processor.subscribe(recorder)
    with pytest.raises(KeyboardInterrupt) as raised:
        RangePublisher(0, 5).subscribe(processor)
    # The later one propagates, chained to the earlier, as from a finally: block.
    assert raised.value is second_interrupt and second_interrupt.__context__ is first_interrupt
    assert isinstance(other.error, KeyboardInterrupt) and other.items == [0]


@pytest.mark.parametrize(
    ("earlier", "later", "expected", "context"),
    [(None, "b", "b", None), ("a", "a", "a", None), ("a", "b", "b", "a")],
    ids=["none earlier", "the same", "two"],
)
def test_chain_fatal_re_raises_the_later_chained_to_the_earlier(
    earlier: str | None, later: str, expected: str, context: str | None
) -> None:
    errors = {"a": KeyboardInterrupt("a"), "b": KeyboardInterrupt("b")}
    result = chain_fatal(errors[earlier] if earlier else None, errors[later])
    assert result is errors[expected]
    assert result.__context__ is (errors[context] if context else None)


def test_chain_fatal_keeps_an_existing_chain_and_makes_no_cycle() -> None:
    root, earlier = KeyboardInterrupt("root"), KeyboardInterrupt("earlier")
    later = KeyboardInterrupt("later")
    later.__context__ = root  # raised while the user's code handled root
    assert chain_fatal(earlier, later) is later
    assert later.__context__ is root and root.__context__ is earlier  # earlier at the end of the chain
    assert chain_fatal(earlier, later) is later and earlier.__context__ is None  # already chained: unchanged
    assert chain_fatal(later, earlier) is later  # earlier already in later's chain: no cycle
    assert earlier.__context__ is None
