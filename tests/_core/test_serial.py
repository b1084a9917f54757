"""SerialDrain: one drain at a time, no lost signal, re-submission, rejection, a raising drain."""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextvars import ContextVar, copy_context

import pytest

from flowpy._core.serial import NESTING, SerialDrain, trampoline
from flowpy.executors import DaemonThreadPool, direct_executor
from tests.support import ManualExecutor, RejectingExecutor


class Counting:
    """A drain that records its passes; it can be told to raise or to yield once."""

    def __init__(self) -> None:
        self.passes: list[bool] = []
        self.raise_next: BaseException | None = None
        self.yield_next = False
        self.rejected: list[BaseException] = []

    def drain(self, first: bool) -> bool:
        self.passes.append(first)
        error, self.raise_next = self.raise_next, None
        if error is not None:
            raise error
        yielded, self.yield_next = self.yield_next, False
        return yielded

    def reject(self, error: BaseException) -> None:
        self.rejected.append(error)


def test_signals_while_queued_share_one_task_and_one_further_pass() -> None:
    executor = ManualExecutor()
    counting = Counting()
    serial = SerialDrain(executor.execute, counting.drain, counting.reject)
    for _ in range(3):
        serial.signal()
    assert len(executor.tasks) == 1
    executor.run_all()
    assert counting.passes == [True, False] and executor.executed == 1


def test_a_signal_during_a_pass_runs_one_more_pass_in_the_same_task() -> None:
    executor = ManualExecutor()
    counting = Counting()

    def drain(first: bool) -> bool:
        if len(counting.passes) == 0:
            serial.signal()  # arrives while this pass runs
        return counting.drain(first)

    serial = SerialDrain(executor.execute, drain, counting.reject)
    serial.signal()
    executor.run_all()
    assert counting.passes == [True, False] and executor.executed == 1


def test_a_yielding_drain_resubmits_and_a_direct_executor_does_not_nest() -> None:
    counting = Counting()
    depths: list[int] = []

    def drain(first: bool) -> bool:
        import inspect

        depths.append(len(inspect.stack(0)))
        return len(counting.passes) < 5 and (counting.passes.append(first) or True)

    serial = SerialDrain(direct_executor.execute, drain, counting.reject)
    serial.signal()
    assert counting.passes == [True] * 5
    assert len(set(depths)) == 1


def test_a_refused_task_calls_on_reject_and_no_drain_runs_again() -> None:
    executor = RejectingExecutor(0)
    counting = Counting()
    serial = SerialDrain(executor.execute, counting.drain, counting.reject)
    serial.signal()
    serial.signal()
    assert counting.passes == [] and [str(e) for e in counting.rejected] == ["executor refused the task"]


@pytest.mark.parametrize("error", [KeyError("k"), KeyboardInterrupt()])
def test_a_raising_drain_propagates_and_leaves_the_drain_idle_for_the_next_signal(error: BaseException) -> None:
    executor = ManualExecutor()
    counting = Counting()
    serial = SerialDrain(executor.execute, counting.drain, counting.reject)
    counting.raise_next = error
    serial.signal()
    with pytest.raises(type(error)):
        executor.run_one()
    serial.signal()
    assert len(executor.tasks) == 1  # a new task: the failed one did not leave it busy
    executor.run_all()
    assert counting.passes == [True, True]


@pytest.mark.timeout(60)
@pytest.mark.usefixtures("tiny_switch_interval")
@pytest.mark.parametrize("inline", [False, True], ids=["executor", "inline"])
def test_signals_from_many_threads_never_overlap_and_none_is_lost(inline: bool) -> None:
    pool = DaemonThreadPool(4)
    inside = threading.Lock()
    overlaps: list[int] = []
    seen = [0]
    sent = [0]
    count_lock = threading.Lock()

    def drain(first: bool) -> bool:
        if not inside.acquire(blocking=False):
            overlaps.append(1)
            return False
        try:
            with count_lock:
                seen[0] = sent[0]
        finally:
            inside.release()
        return False

    serial = SerialDrain.inline(drain) if inline else SerialDrain(pool.execute, drain, lambda error: None)

    def signaller() -> None:
        for _ in range(2_000):
            with count_lock:
                sent[0] += 1
            serial.signal()

    threads = [threading.Thread(target=signaller) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert pool.wait_idle(30)
    assert overlaps == []
    assert seen[0] == sent[0] == 8_000  # the last signal's work was seen by a pass after it
    pool.shutdown()


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


def test_serial_raising_drain_does_not_replay_a_signal_of_the_failed_pass_but_serves_a_later_one() -> None:
    executor = ManualExecutor()
    drain = Drain()
    serial = drain.attach(executor.execute)

    def step(number: int) -> bool:
        if number == 1:
            serial.signal()  # counted during the failed pass: the owner has ended, no replay
            raise KeyboardInterrupt
        return False

    drain.step = step
    serial.signal()
    with pytest.raises(KeyboardInterrupt):
        executor.run_one()
    assert not executor.tasks  # idle, and no loop
    serial.signal()
    executor.run_all()
    assert drain.passes == [True, True]


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


# --- Inline drains: passes on the signalling thread ---------------------------------


def test_inline_drain_runs_on_the_signalling_thread_and_a_reentrant_signal_adds_one_pass() -> None:
    threads: list[threading.Thread] = []
    depth = [0]
    max_depth = [0]

    def drain(first: bool) -> bool:
        threads.append(threading.current_thread())
        depth[0] += 1
        max_depth[0] = max(max_depth[0], depth[0])
        if len(threads) < 1_000:
            serial.signal()  # a request from inside on_next: counted, not nested (rule 3.3)
        depth[0] -= 1
        return False

    serial = SerialDrain.inline(drain)
    serial.signal()
    assert len(threads) == 1_000
    assert set(threads) == {threading.current_thread()}
    assert max_depth[0] == 1


def test_inline_drain_prepare_runs_under_the_owner_lock_before_each_pass() -> None:
    lock = threading.Lock()
    log: list[str] = []

    def prepare() -> None:
        log.append(f"prepare locked={lock.locked()}")

    def drain(first: bool) -> bool:
        log.append(f"pass first={first} locked={lock.locked()}")
        if len(log) == 2:
            serial.signal()
        return False

    serial = SerialDrain.inline(drain, lock=lock, prepare=prepare)
    serial.signal()
    assert log == [
        "prepare locked=True",
        "pass first=True locked=False",
        "prepare locked=True",
        "pass first=False locked=False",
    ]
    assert not lock.locked()


@pytest.mark.parametrize("error", [ValueError("pass failed"), KeyboardInterrupt()])
def test_inline_raising_drain_propagates_to_the_signaller_and_leaves_the_drain_idle(error: BaseException) -> None:
    passes: list[bool] = []

    def drain(first: bool) -> bool:
        passes.append(first)
        if len(passes) == 1:
            serial.signal()  # not replayed: the pass that raised ended the owner's work
            raise error
        return False

    serial = SerialDrain.inline(drain)
    with pytest.raises(type(error)):
        serial.signal()
    serial.signal()
    assert passes == [True, True]


def test_inline_drain_with_a_context_runs_each_pass_in_it_and_reads_it_per_pass() -> None:
    variable: ContextVar[str] = ContextVar("variable", default="unset")
    seen: list[str] = []

    def drain(first: bool) -> bool:
        seen.append(variable.get())
        if len(seen) == 1:
            variable.set("set in the first pass")  # stays in the drain's context for the next passes
            serial.signal()
        return False

    variable.set("subscriber")
    serial = SerialDrain.inline(drain, context="capture")
    variable.set("signaller")
    serial.signal()
    assert seen == ["subscriber", "set in the first pass"]
    assert variable.get() == "signaller"  # the signalling thread's own context is untouched
    serial.context = copy_context()  # an owner may replace it before a later pass
    serial.signal()
    assert seen[-1] == "signaller"
    assert SerialDrain.inline(drain).context is None  # by default: the signalling thread's context


def test_inline_yielding_drain_just_runs_another_pass() -> None:
    passes: list[bool] = []

    def drain(first: bool) -> bool:
        passes.append(first)
        if len(passes) == 1:
            serial.signal()
            return True  # no executor to yield to
        return False

    serial = SerialDrain.inline(drain)
    serial.signal()
    assert passes == [True, False]


# --- The trampoline shared by the inline drains --------------------------------


class _Chain:
    """``count`` inline drains, each of whose passes signals the next: a pipeline's stages in miniature."""

    def __init__(self, count: int, fail_at: int | None = None) -> None:
        self.depth = 0
        self.deepest = 0
        self.passes: list[int] = []
        self.fail_at = fail_at
        self.drains = [SerialDrain.inline(lambda first, i=i: self._pass(i)) for i in range(count)]

    def _pass(self, index: int) -> bool:
        self.depth += 1
        self.deepest = max(self.deepest, self.depth)
        try:
            self.passes.append(index)
            if index == self.fail_at:
                raise ValueError(index)
            if index + 1 < len(self.drains):
                self.drains[index + 1].signal()
        finally:
            self.depth -= 1
        return False


def test_inline_drains_below_the_nesting_limit_run_nested_as_before() -> None:
    chain = _Chain(NESTING)
    chain.drains[0].signal()
    assert chain.passes == list(range(NESTING))
    assert chain.deepest == NESTING


def test_inline_drains_past_the_nesting_limit_are_handed_down_and_run_before_the_outermost_returns() -> None:
    chain = _Chain(10 * NESTING)
    chain.drains[0].signal()
    assert chain.passes == list(range(10 * NESTING))  # each ran, once, in order
    assert chain.deepest == NESTING  # never more nested than that, however long the chain


def test_a_handed_down_pass_that_raises_propagates_from_the_outermost_call_and_leaves_its_drain_idle() -> None:
    failing = 3 * NESTING // 2
    chain = _Chain(2 * NESTING, fail_at=failing)
    with pytest.raises(ValueError, match=str(failing)):
        chain.drains[0].signal()
    assert chain.passes == list(range(failing + 1))
    chain.passes.clear()
    chain.fail_at = None
    chain.drains[failing].signal()  # idle again: the signal runs a pass, not only counts
    assert chain.passes == list(range(failing, 2 * NESTING))


def test_trampoline_runs_what_is_handed_down_after_the_raising_call_and_raises_the_first_error_chained() -> None:
    ran: list[str] = []

    def nest(level: int) -> None:
        if level < NESTING + 2:
            trampoline(lambda: nest(level + 1))
            return
        ran.append("deep")
        raise KeyError("deep")

    def outer() -> None:
        nest(1)
        ran.append("outer")
        raise ValueError("outer")

    with pytest.raises(KeyError) as raised:
        trampoline(outer)
    assert ran == ["outer", "deep"]  # handed down: run after the outermost call returned
    assert isinstance(raised.value.__context__, ValueError)
