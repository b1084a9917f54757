"""Executors: normalisation, the direct executor and the shared daemon pool."""

from __future__ import annotations

import contextlib
import inspect
import math
import subprocess
import sys
import threading
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
    # would put its sentinel first and the task behind it, where no worker
    # takes it. The queue below runs shutdown() on another thread at that
    # moment; it must wait until the task is queued (it is given a second
    # before the task is queued anyway, which is how the race looked).
    pool = DaemonThreadPool(1)
    ran = threading.Event()
    real = pool._tasks

    class ShutdownWhileQueueing:
        hooked = False

        def put(self, task: Any) -> None:
            if task is not None and not self.hooked:
                self.hooked = True
                closer = threading.Thread(target=pool.shutdown, kwargs={"wait": False})
                closer.start()
                closer.join(1.0)
            real.put(task)

        def get(self) -> Any:
            return real.get()

        def get_nowait(self) -> Any:
            return real.get_nowait()

    pool._tasks = ShutdownWhileQueueing()  # type: ignore[assignment]
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
    and left held by the interrupt would block every later ``execute``.
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


def test_shutdown_cancelling_futures_drops_the_queued_tasks_and_lets_the_running_one_finish() -> None:
    pool = DaemonThreadPool(1)
    release = threading.Event()
    ran: list[str] = []
    started = threading.Event()

    def hold() -> bool:
        started.set()
        return release.wait(10)

    running = pool.submit(hold)
    assert started.wait(10)  # the one thread runs it: the next two stay queued
    dropped = [pool.submit(lambda: ran.append("dropped")) for _ in range(2)]
    pool.shutdown(wait=False, cancel_futures=True)
    release.set()
    assert running.result(timeout=10) is True
    for thread in pool._threads:
        thread.join(10)
        assert not thread.is_alive()
    assert ran == [] and not any(future.done() for future in dropped)
    assert pool.wait_idle(0)
