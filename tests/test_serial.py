"""SerialDrain: one drain at a time on an executor, no lost signal, and a drain that raises."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from flowpy._serial import SerialDrain
from flowpy.executors import direct_executor
from tests.sources_helpers import stack_depth
from tests.support import ManualExecutor, RejectingExecutor


class Drain:
    """A drain function that records its passes and runs ``step(pass_number)`` in each."""

    def __init__(self, step: Callable[[int], bool] | None = None) -> None:
        self.passes: list[bool] = []  # the ``first`` argument of each pass
        self.step = step
        self.rejected: list[BaseException] = []
        self.serial: SerialDrain | None = None

    def __call__(self, first: bool) -> bool:
        self.passes.append(first)
        return self.step(len(self.passes)) if self.step is not None else False

    def reject(self, exc: BaseException) -> None:
        self.rejected.append(exc)

    def attach(self, execute: Callable[..., object]) -> SerialDrain:
        self.serial = SerialDrain(execute, self, self.reject)
        return self.serial


def test_serial_signals_while_queued_start_one_task() -> None:
    executor = ManualExecutor()
    drain = Drain()
    serial = drain.attach(executor.execute)
    serial.signal()
    serial.signal()
    serial.signal()
    assert len(executor.tasks) == 1
    executor.run_all()
    assert drain.passes == [True, False]  # one pass, then one for the signals that came before it ran
    assert executor.executed == 1


def test_serial_signal_during_a_pass_runs_one_more_pass_in_the_same_task() -> None:
    executor = ManualExecutor()
    drain = Drain()
    serial = drain.attach(executor.execute)
    drain.step = lambda number: serial.signal() if number == 1 else False  # type: ignore[func-returns-value]
    serial.signal()
    executor.run_all()
    assert drain.passes == [True, False]
    assert executor.executed == 1


def test_serial_drain_returning_true_yields_the_thread_with_a_new_task() -> None:
    executor = ManualExecutor()
    drain = Drain(lambda number: number < 3)
    serial = drain.attach(executor.execute)
    serial.signal()
    assert executor.run_one()
    assert drain.passes == [True]
    assert len(executor.tasks) == 1  # re-submitted, not looped
    executor.run_all()
    assert drain.passes == [True, True, True]
    serial.signal()
    executor.run_all()
    assert drain.passes == [True, True, True, True]  # idle again: a later signal starts a task


def test_serial_direct_executor_many_yields_do_not_grow_the_stack() -> None:
    depths: set[int] = set()

    def step(number: int) -> bool:
        depths.add(stack_depth())
        return number < 1_000

    drain = Drain(step)
    drain.attach(direct_executor.execute).signal()
    assert len(drain.passes) == 1_000
    assert len(depths) == 1


def test_serial_rejected_task_calls_on_reject_and_no_drain_runs_again() -> None:
    refusal = RuntimeError("refused")
    executor = RejectingExecutor(accept=0, error=refusal)
    drain = Drain()
    serial = drain.attach(executor.execute)
    serial.signal()
    serial.signal()
    assert drain.rejected == [refusal]
    assert drain.passes == []


@pytest.mark.parametrize("error_type", [KeyboardInterrupt, SystemExit, ValueError])
def test_serial_raising_drain_propagates_then_a_later_signal_runs_again(error_type: type[BaseException]) -> None:
    executor = ManualExecutor()
    drain = Drain()
    serial = drain.attach(executor.execute)

    def step(number: int) -> bool:
        if number == 1:
            raise error_type("drain failed")
        return False

    drain.step = step
    serial.signal()
    with pytest.raises(error_type):
        executor.run_one()
    assert drain.passes == [True]  # no loop after the raise
    assert not executor.tasks  # idle: no task queued for the spent signal
    serial.signal()
    assert len(executor.tasks) == 1  # not busy forever: the later signal starts a task
    executor.run_all()
    assert drain.passes == [True, True]
    assert drain.rejected == []  # a raising drain is not a refusal


def test_serial_raising_drain_serves_a_signal_that_came_during_the_failed_pass() -> None:
    executor = ManualExecutor()
    drain = Drain()
    serial = drain.attach(executor.execute)

    def step(number: int) -> bool:
        if number == 1:
            serial.signal()  # counted, not yet covered
            raise KeyboardInterrupt
        return False

    drain.step = step
    serial.signal()
    with pytest.raises(KeyboardInterrupt):
        executor.run_one()
    assert len(executor.tasks) == 1  # the signal of the failed pass is not lost
    executor.run_all()
    assert drain.passes == [True, True]
    assert not executor.tasks


def test_serial_raising_drain_on_direct_executor_propagates_from_signal_and_is_no_refusal() -> None:
    def step(number: int) -> bool:
        if number == 1:
            raise KeyboardInterrupt
        return False

    drain = Drain(step)
    serial = drain.attach(direct_executor.execute)
    with pytest.raises(KeyboardInterrupt):
        serial.signal()
    assert drain.rejected == []
    serial.signal()  # a later signal runs a pass inline
    assert drain.passes == [True, True]


def test_serial_raising_drain_on_direct_executor_reruns_once_for_a_signal_during_the_pass() -> None:
    drain = Drain()
    serial = drain.attach(direct_executor.execute)

    def step(number: int) -> bool:
        if number == 1:
            serial.signal()
            raise KeyboardInterrupt
        return False

    drain.step = step
    with pytest.raises(KeyboardInterrupt):
        serial.signal()
    assert drain.passes == [True, True]  # the pending signal served once, inline; no loop
    assert drain.rejected == []
    serial.signal()
    assert drain.passes == [True, True, True]


def test_serial_raising_drain_on_direct_executor_inside_a_yielded_task_propagates() -> None:
    drain = Drain()
    serial = drain.attach(direct_executor.execute)

    def step(number: int) -> bool:
        if number == 3:
            raise KeyboardInterrupt
        return True  # yield: the re-submitted task runs inline

    drain.step = step
    with pytest.raises(KeyboardInterrupt):
        serial.signal()
    assert drain.passes == [True, True, True]
    assert drain.rejected == []
    drain.step = None
    serial.signal()
    assert drain.passes == [True, True, True, True]
