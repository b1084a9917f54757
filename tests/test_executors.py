"""Executors: normalisation, the direct executor and the shared daemon pool."""

from __future__ import annotations

import ast
import contextlib
import inspect
import math
import subprocess
import sys
import threading
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from flowpy.executors import DaemonThreadPool, SerialExecutor, as_execute, default_executor, direct_executor
from tests.interrupts import InjectedInterrupt, InterruptAt, sweep
from tests.support import ManualExecutor, RejectingExecutor, wait_until_waiting

ROOT = Path(__file__).resolve().parent.parent


def test_as_execute_prefers_execute_then_submit_then_callable() -> None:
    ran: list[str] = []

    class WithExecute:
        def execute(self, task: object) -> None:
            ran.append("execute")

    as_execute(WithExecute())(lambda: None)
    with ThreadPoolExecutor(1) as pool:
        future = as_execute(pool)(lambda: "submitted")
        assert future.result(timeout=5) == "submitted"  # type: ignore[union-attr]
    as_execute(lambda task: ran.append("callable"))(lambda: None)
    assert ran == ["execute", "callable"]


def test_as_execute_rejects_none_and_non_executors() -> None:
    with pytest.raises(TypeError, match=r"^executor must not be None; leave it out to use the default executor$"):
        as_execute(None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^executor must be a concurrent.futures.Executor, an object with "):
        as_execute(3)  # type: ignore[arg-type]


def test_direct_executor_runs_on_the_calling_thread() -> None:
    threads: list[int] = []
    direct_executor.execute(lambda: threads.append(threading.get_ident()))
    assert threads == [threading.get_ident()]
    assert repr(direct_executor) == "flowpy.direct_executor"


def test_default_executor_is_shared_and_uses_daemon_threads() -> None:
    pool = default_executor()
    assert pool is default_executor()
    daemon = pool.submit(lambda: threading.current_thread().daemon).result(timeout=5)
    assert daemon is True


@pytest.mark.timeout(60)
def test_default_pool_does_not_keep_the_interpreter_alive() -> None:
    code = (
        "import threading\n"
        "from flowpy.executors import default_executor\n"
        "default_executor().execute(lambda: threading.Event().wait())\n"
        "print('exiting')\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0 and result.stdout.strip() == "exiting"


def test_pool_runs_tasks_concurrently_up_to_max_workers() -> None:
    pool = DaemonThreadPool(2, "test")
    barrier = threading.Barrier(3, timeout=10)  # broken, and raising, unless both tasks run at once

    def meet() -> int:
        barrier.wait()
        return threading.get_ident()

    futures = [pool.submit(meet) for _ in range(2)]
    barrier.wait()
    assert len({f.result(timeout=5) for f in futures}) == 2
    assert pool.max_workers == 2


def test_pool_reports_task_exceptions_and_keeps_going() -> None:
    pool = DaemonThreadPool(1)
    reported: list[BaseException | None] = []
    previous = threading.excepthook
    threading.excepthook = lambda args: reported.append(args.exc_value)
    try:
        pool.execute(lambda: 1 / 0)
        assert pool.submit(lambda: "alive").result(timeout=5) == "alive"
    finally:
        threading.excepthook = previous
    assert isinstance(reported[0], ZeroDivisionError)
    failed = pool.submit(lambda: [][0])
    assert isinstance(failed.exception(timeout=5), IndexError)


def test_pool_refuses_work_after_shutdown() -> None:
    pool = DaemonThreadPool(1)
    assert pool.submit(lambda: 1).result(timeout=5) == 1
    pool.shutdown()
    with pytest.raises(RuntimeError, match=r"^cannot schedule new tasks after shutdown$"):
        pool.execute(lambda: None)
    with pytest.raises(ValueError, match=r"^max_workers must be positive, got 0$"):
        DaemonThreadPool(0)


def test_shutdown_between_the_check_and_the_queueing_of_execute_still_runs_the_task() -> None:
    # execute() checks for shutdown, then queues. A shutdown() in between
    # must not leave the task queued with no thread to run it. The queue
    # below runs shutdown() on another thread at that moment; it must wait
    # until the task is queued (it is given a second before the task is
    # queued anyway, which is how such a race would look).
    pool = DaemonThreadPool(1)
    ran = threading.Event()

    class ShutdownWhileQueueing(deque[Any]):
        hooked = False

        def append(self, task: Any) -> None:
            if not self.hooked:
                self.hooked = True
                closer = threading.Thread(target=pool.shutdown, kwargs={"wait": False})
                closer.start()
                closer.join(1.0)
            super().append(task)

    pool._tasks = ShutdownWhileQueueing()
    pool.execute(ran.set)
    assert ran.wait(10)
    pool.shutdown(wait=True)
    with pytest.raises(RuntimeError, match=r"^cannot schedule new tasks after shutdown$"):
        pool.execute(ran.set)


def test_wait_idle_waits_for_queued_and_running_tasks() -> None:
    pool = DaemonThreadPool(1)
    release = threading.Event()
    ran: list[str] = []
    pool.execute(release.wait)
    pool.execute(lambda: ran.append("second"))
    assert not pool.wait_idle(0)
    release.set()
    assert pool.wait_idle(10)
    assert ran == ["second"]
    pool.shutdown()


@pytest.mark.parametrize("timeout", [math.inf, 1e300, 2**70], ids=["inf", "1e300", "2**70"])
def test_wait_idle_with_a_timeout_beyond_what_the_platform_can_wait_waits(timeout: float) -> None:
    # raised OverflowError once the pool was busy
    pool = DaemonThreadPool(1)
    release = threading.Event()
    pool.execute(release.wait)
    idle: list[object] = []
    waiter = threading.Thread(target=lambda: idle.append(pool.wait_idle(timeout)))
    waiter.start()
    wait_until_waiting(waiter)
    release.set()
    waiter.join(10)
    assert idle == [True]
    pool.shutdown()


@pytest.mark.parametrize(
    ("timeout", "error", "message"),
    [
        (math.nan, ValueError, r"^timeout must be a number of seconds, got nan$"),
        (-1, ValueError, r"^timeout must be >= 0 or None, got -1$"),
        ("1", TypeError, r"^timeout must be a number of seconds or None, got '1'$"),
    ],
)
def test_wait_idle_refuses_a_bad_timeout(timeout: Any, error: type[Exception], message: str) -> None:
    # a NaN made every wait return at once: a busy loop while the pool was busy
    pool = DaemonThreadPool(1)
    with pytest.raises(error, match=message):
        pool.wait_idle(timeout)
    pool.shutdown()


def test_shutdown_cancelling_queued_tasks_leaves_the_pool_idle() -> None:
    pool = DaemonThreadPool(1)
    release = threading.Event()
    pool.execute(release.wait)
    never = pool.submit(lambda: None)
    pool.shutdown(wait=False, cancel_futures=True)
    release.set()
    assert pool.wait_idle(10)
    assert not never.done()  # dropped unrun, as concurrent.futures drops it from its queue
    pool.shutdown(wait=True)


# --- SerialExecutor ---------------------------------------------------------------


def test_serial_executor_runs_tasks_in_order_in_one_underlying_task() -> None:
    underlying = ManualExecutor()
    serial = SerialExecutor(underlying.execute, lambda error: None)
    ran: list[int] = []
    for n in range(3):
        serial.execute(lambda n=n: ran.append(n))  # type: ignore[misc]
    assert len(underlying.tasks) == 1
    underlying.run_all()
    assert ran == [0, 1, 2] and underlying.executed == 1


def test_serial_executor_refused_calls_on_reject_and_runs_nothing_after() -> None:
    refusal = RuntimeError("shut down")
    rejected: list[BaseException] = []
    serial = SerialExecutor(RejectingExecutor(0, refusal).execute, rejected.append)
    ran: list[int] = []
    serial.execute(lambda: ran.append(1))
    serial.execute(lambda: ran.append(2))
    assert rejected == [refusal] and ran == []


@pytest.mark.timeout(60)
@pytest.mark.usefixtures("tiny_switch_interval")
def test_serial_executor_tasks_from_many_threads_never_overlap() -> None:
    pool = DaemonThreadPool(4)
    try:
        serial = SerialExecutor(pool.execute, lambda error: None)
        inside = threading.Lock()
        overlaps: list[int] = []
        count = [0]

        def task() -> None:
            if not inside.acquire(blocking=False):
                overlaps.append(1)
                return
            count[0] += 1
            inside.release()

        def submitter() -> None:
            for _ in range(1_000):
                serial.execute(task)

        threads = [threading.Thread(target=submitter) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        assert pool.wait_idle(30)
        assert overlaps == [] and count[0] == 4_000
    finally:
        pool.shutdown()


def _interrupt_every_point_of_execute() -> None:
    """Ctrl-C anywhere in ``execute`` handing a task to an idle worker, threading's code included.

    A lock of threading's Python code (a Semaphore's Condition) taken there
    and left held by the interrupt would block every later ``execute``; the
    pool's own lock too, if a loop's back jump inside its ``with`` (outside
    the statement's handler on CPython 3.12 and later) were interrupted; and
    a worker taken off the idle list and not woken would never run again.
    """
    files = {inspect.getfile(DaemonThreadPool), threading.__file__}

    def run(hook: InterruptAt) -> bool:
        pool = DaemonThreadPool(1)
        pool.execute(lambda: None)
        assert pool.wait_idle(5)  # the one worker is idle: execute starts no thread
        with contextlib.suppress(InjectedInterrupt), hook:
            pool.execute(lambda: None)
        ran = threading.Event()
        threading.Thread(target=lambda: pool.execute(ran.set), daemon=True).start()
        if not ran.wait(5):
            return False  # that thread holds the pool's lock for ever: shutdown() would block too
        pool.shutdown(wait=False)
        return True

    outcomes = [(hook.at, hook.fired.where if hook.fired else None, ran) for hook, ran in sweep(files, run)]
    assert len(outcomes) > 2
    assert [outcome for outcome in outcomes if not outcome[2]] == []

    def hand_back(hook: InterruptAt) -> bool:
        # Two idle threads, each of which ran a method of its own object:
        # the task goes back to the one that ran its object's method before.
        pool = DaemonThreadPool(2)
        _, second = two_idle_threads(pool)
        with contextlib.suppress(InjectedInterrupt), hook:
            pool.execute(second.run)
        both = threading.Barrier(3, timeout=5)  # both threads still take tasks, and the lock is free
        threading.Thread(target=lambda: [pool.execute(both.wait) for _ in range(2)], daemon=True).start()
        try:
            both.wait()
        except threading.BrokenBarrierError:
            return False
        pool.shutdown(wait=False)
        return True

    outcomes = [(hook.at, hook.fired.where if hook.fired else None, ran) for hook, ran in sweep(files, hand_back)]
    assert len(outcomes) > 2
    assert [outcome for outcome in outcomes if not outcome[2]] == []


@pytest.mark.timeout(120)
def test_a_keyboard_interrupt_inside_execute_leaves_the_pool_usable() -> None:
    # In a fresh interpreter: the sweep traces threading's own code on this
    # thread, which the threads and timers that earlier tests leave behind
    # must not share.
    code = "from tests.test_executors import _interrupt_every_point_of_execute as f; f()"
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=100, check=False
    )
    assert result.returncode == 0, result.stderr[-3000:]


class Where:
    """A task owner: records the thread each of its methods ran on."""

    def __init__(self, started: threading.Barrier, after: threading.Event | None, done: threading.Event) -> None:
        self.started, self.after, self.done = started, after, done
        self.threads: list[int] = []

    def hold(self) -> None:
        """Meet the other owner's ``hold`` on the barrier; finish after ``after`` is set (if given)."""
        self.started.wait()
        if self.after is not None:
            assert self.after.wait(10)
        self.run()
        self.done.set()

    def run(self) -> None:
        self.threads.append(threading.get_ident())


def two_idle_threads(pool: DaemonThreadPool) -> tuple[Where, Where]:
    """Two owners whose ``hold`` ran at once on ``pool``'s two threads, the first finishing first; both idle now."""
    started = threading.Barrier(3, timeout=10)
    first = Where(started, None, threading.Event())
    second = Where(started, first.done, threading.Event())
    pool.execute(first.hold)
    pool.execute(second.hold)
    started.wait()
    assert pool.wait_idle(10)
    assert first.threads[0] != second.threads[0]
    return first, second


def test_a_method_goes_back_to_the_idle_thread_that_last_ran_a_method_of_its_object() -> None:
    # A subscription's consumer task is a method of the subscription: it
    # goes back to the thread whose cache holds that subscription's state,
    # not to the thread idle the shortest time.
    pool = DaemonThreadPool(2)
    try:
        first, second = two_idle_threads(pool)  # idle: first's thread, then second's
        for _ in range(3):
            pool.execute(first.run)  # not to second's thread, idle the shortest time
            assert pool.wait_idle(10)
            pool.execute(second.run)  # now second's thread was idle longer
            assert pool.wait_idle(10)
        assert set(first.threads) == {first.threads[0]}
        assert set(second.threads) == {second.threads[0]}
        assert len(pool._threads) == 2
    finally:
        pool.shutdown()


def test_a_plain_task_goes_to_the_thread_idle_the_shortest_time() -> None:
    pool = DaemonThreadPool(2)
    try:
        first, second = two_idle_threads(pool)
        plain: list[int] = []
        pool.execute(lambda: plain.append(threading.get_ident()))
        assert pool.wait_idle(10)
        assert plain == [second.threads[0]]  # the thread that finished last
        pool.execute(first.run)
        assert pool.wait_idle(10)
        pool.execute(lambda: plain.append(threading.get_ident()))
        assert pool.wait_idle(10)
        assert plain[1] == first.threads[0]
        assert len(pool._threads) == 2
    finally:
        pool.shutdown()


def test_shutdown_wakes_the_idle_threads_and_they_exit() -> None:
    pool = DaemonThreadPool(3)
    two_idle_threads(pool)
    pool.shutdown(wait=True)
    assert len(pool._threads) == 2 and all(not thread.is_alive() for thread in pool._threads)
    assert pool._idle == []


def test_no_section_of_the_pools_lock_has_a_loop() -> None:
    # CPython 3.12 and later (3.11 too, by its exception table) leave a
    # loop's backward jump out of the handler of the `with` around it; an
    # asynchronous interrupt raised at that jump (where the evaluation loop
    # checks for one) skips __exit__ and leaves the lock held, and every
    # later execute() blocks: benchmarks/stress.py --kind interrupt found it
    # with the GIL off. No trace function models that point faithfully, so
    # the rule is checked on the source.
    tree = ast.parse(Path(inspect.getfile(DaemonThreadPool)).read_text())
    loops = (ast.For, ast.While, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
    sections = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.With) and any(ast.unparse(item.context_expr) == "self._lock" for item in node.items)
    ]
    assert len(sections) >= 4
    looping = [node.lineno for node in sections for inner in ast.walk(node) if isinstance(inner, loops)]
    assert looping == []
