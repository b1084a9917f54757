"""AsyncIterablePublisher beyond what PublisherVerification drives: executor rejection, raising sources."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from flowpy.executors import direct_executor
from flowpy.tck import AsyncIterablePublisher
from tests.support import Recorder, RejectingExecutor


def test_rejected_first_task_signals_on_subscribe_then_on_error() -> None:
    publisher = AsyncIterablePublisher(range(3), RejectingExecutor(0, RuntimeError("full")))
    recorder = Recorder()
    publisher.subscribe(recorder)
    assert [name for name, _ in recorder.signals] == ["on_subscribe", "on_error"]
    assert str(recorder.error) == "publisher terminated: executor rejected the task: RuntimeError('full')"
    assert recorder.violations == []


def test_rejected_request_ends_the_stream_with_on_error() -> None:
    executor = RejectingExecutor(1, RuntimeError("full"))
    publisher = AsyncIterablePublisher(range(3), executor)
    recorder = Recorder()
    publisher.subscribe(recorder)
    executor.inner.run_all()
    recorder.request(1)  # the executor refuses this task; request returns normally
    assert [name for name, _ in recorder.signals] == ["on_subscribe", "on_error"]
    assert recorder.violations == []


def test_raising_iterator_signals_on_error_after_items() -> None:
    def items() -> Iterator[int]:
        yield 1
        raise KeyError("gone")

    recorder = Recorder(initial=10)
    AsyncIterablePublisher(items(), direct_executor).subscribe(recorder)
    assert [name for name, _ in recorder.signals] == ["on_subscribe", "on_next", "on_error"]
    assert repr(recorder.error) == "KeyError('gone')"


def test_batch_size_below_one_raises() -> None:
    with pytest.raises(ValueError, match=r"^batch_size must be >= 1, got 0$"):
        AsyncIterablePublisher(range(1), direct_executor, batch_size=0)


def test_none_subscriber_raises_type_error() -> None:
    subscriber: Any = None
    with pytest.raises(TypeError, match=r"^subscriber must not be None \(rule 1.9\)$"):
        AsyncIterablePublisher(range(1), direct_executor).subscribe(subscriber)
