"""TimerScheduler: one process-wide timer thread over a heap, handing due functions to an executor.

Most tests hand due functions to a recording executor and wait for the
hand-off with an event; the few that look at real time use generous bounds
and assert order, never speed.
"""

from __future__ import annotations

import gc
import json
import logging
import subprocess
import sys
import textwrap
import threading
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from flowpy import schedulers
from flowpy.executors import DaemonThreadPool, direct_executor
from flowpy.schedulers import (
    Cancellable,
    ScheduledTask,
    Scheduler,
    TimerScheduler,
    default_scheduler,
    resolve_scheduler,
)
from flowpy.testing import TestScheduler
from tests.support import expect_thread_exceptions

WAIT = 10.0
ROOT = Path(__file__).resolve().parent.parent


class Recording:
    """An executor that runs each task on the timer thread and records the order of hand-offs."""

    def __init__(self, expected: int = 1) -> None:
        self.tasks: list[Callable[[], object]] = []
        self.remaining = expected
        self.done = threading.Event()
        self._lock = threading.Lock()

    def execute(self, task: Callable[[], object]) -> None:
        task()
        with self._lock:
            self.tasks.append(task)
            self.remaining -= 1
            if self.remaining <= 0:
                self.done.set()


class Holding:
    """An executor that keeps tasks until told to run them; signals each hand-off."""

    def __init__(self) -> None:
        self.tasks: list[Callable[[], object]] = []
        self.handed = threading.Semaphore(0)

    def execute(self, task: Callable[[], object]) -> None:
        self.tasks.append(task)
        self.handed.release()

    def take(self) -> Callable[[], object]:
        assert self.handed.acquire(timeout=WAIT), "no task was handed over"
        return self.tasks.pop(0)


@pytest.fixture
def pool() -> Iterator[DaemonThreadPool]:
    executor = DaemonThreadPool(4, thread_name_prefix="schedulers-test")
    try:
        yield executor
    finally:
        executor.shutdown()


def timer_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "flowpy-timer" and t.is_alive()]


# --- The protocol ---------------------------------------------------------------------


def test_timer_and_test_schedulers_satisfy_the_protocol() -> None:
    assert isinstance(TimerScheduler(), Scheduler)
    assert isinstance(TestScheduler(), Scheduler)
    task = default_scheduler().schedule(lambda: None, 60.0)
    assert isinstance(task, Cancellable)
    task.cancel()


def test_resolve_scheduler_none_is_the_default() -> None:
    assert resolve_scheduler(None) is default_scheduler()
    scheduler = TestScheduler()
    assert resolve_scheduler(scheduler) is scheduler


def test_resolve_scheduler_not_a_scheduler_raises_type_error() -> None:
    with pytest.raises(
        TypeError, match=r"^scheduler must be a Scheduler \(now, schedule, schedule_periodic\) or None, got 5$"
    ):
        resolve_scheduler(5)  # type: ignore[arg-type]


def test_now_is_monotonic_seconds() -> None:
    scheduler = TimerScheduler()
    first = scheduler.now()
    assert isinstance(first, float)
    assert scheduler.now() >= first


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda s: s.schedule(lambda: None, -1), r"^delay must be a finite number of seconds >= 0, got -1$"),
        (lambda s: s.schedule(lambda: None, float("nan")), r"^delay must be a finite number of seconds >= 0, got nan$"),
        (lambda s: s.schedule_periodic(lambda: None, 0, 0), r"^period must be a finite number of seconds > 0, got 0$"),
        (
            lambda s: s.schedule_periodic(lambda: None, float("inf"), 1),
            r"^initial_delay must be a finite number of seconds >= 0, got inf$",
        ),
    ],
)
def test_schedule_bad_time_raises_value_error(call: Callable[[TimerScheduler], object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call(TimerScheduler())


def test_schedule_not_callable_or_not_a_number_raises_type_error() -> None:
    scheduler = TimerScheduler()
    with pytest.raises(TypeError, match=r"^fn must be callable, got 1$"):
        scheduler.schedule(1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^delay must be a number of seconds, got True$"):
        scheduler.schedule(lambda: None, True)


def test_none_executor_raises_type_error() -> None:
    with pytest.raises(TypeError, match=r"^executor must not be None; leave it out to use the default executor$"):
        TimerScheduler(None)  # type: ignore[arg-type]


# --- Running ---------------------------------------------------------------------------------


def test_schedule_runs_the_function_on_the_executor_after_the_delay(pool: DaemonThreadPool) -> None:
    scheduler = TimerScheduler(pool)
    ran = threading.Event()
    threads: list[str] = []

    def fn() -> None:
        threads.append(threading.current_thread().name)
        ran.set()

    start = scheduler.now()
    scheduler.schedule(fn, 0.02)
    assert ran.wait(WAIT)
    assert scheduler.now() - start >= 0.02
    assert threads[0].startswith("schedulers-test")


def test_functions_run_in_due_order_whatever_the_scheduling_order() -> None:
    executor = Recording(expected=3)
    scheduler = TimerScheduler(executor)
    order: list[str] = []
    scheduler.schedule(lambda: order.append("late"), 0.3)
    scheduler.schedule(lambda: order.append("early"), 0.1)
    scheduler.schedule(lambda: order.append("middle"), 0.2)
    assert executor.done.wait(WAIT)
    assert order == ["early", "middle", "late"]


def test_an_earlier_timer_wakes_the_timer_thread() -> None:
    scheduler = TimerScheduler(direct_executor)
    ran = threading.Event()
    far = scheduler.schedule(lambda: None, 3600.0)  # the thread now sleeps until this one
    scheduler.schedule(ran.set, 0.0)
    assert ran.wait(WAIT)
    far.cancel()


def test_functions_due_together_are_handed_over_in_scheduling_order() -> None:
    executor = Holding()
    scheduler = TimerScheduler(executor)
    order: list[int] = []
    gate = threading.Event()
    blocker = TimerScheduler(direct_executor).schedule(gate.wait, 0.0)  # the timer thread waits here
    for i in range(50):
        scheduler.schedule(lambda i=i: order.append(i), 0.0)
    gate.set()
    for _ in range(50):
        executor.take()()
    assert order == list(range(50))
    blocker.cancel()


def test_cancel_before_due_means_the_function_never_runs() -> None:
    executor = Holding()
    scheduler = TimerScheduler(executor)
    ran: list[str] = []
    task = scheduler.schedule(lambda: ran.append("cancelled"), 0.05)
    task.cancel()
    task.cancel()  # idempotent
    assert task.cancelled
    scheduler.schedule(lambda: ran.append("kept"), 0.1)
    executor.take()()
    assert ran == ["kept"]
    assert executor.tasks == []


def test_cancel_after_the_hand_off_skips_the_run() -> None:
    executor = Holding()
    scheduler = TimerScheduler(executor)
    ran: list[int] = []
    task = scheduler.schedule(lambda: ran.append(1), 0.0)
    handed = executor.take()
    task.cancel()
    handed()
    assert ran == []


def test_cancel_releases_the_function_at_once() -> None:
    scheduler = TimerScheduler(direct_executor)

    class Action:
        def __call__(self) -> None:
            raise AssertionError("cancelled action ran")

    action = Action()
    collected = weakref.ref(action)
    task = scheduler.schedule(action, 3600.0)
    del action
    task.cancel()
    gc.collect()
    assert collected() is None


# --- Periodic ---------------------------------------------------------------------------------


def test_periodic_due_times_are_computed_from_the_first_so_they_never_drift() -> None:
    executor = Holding()
    scheduler = TimerScheduler(executor)
    task = scheduler.schedule_periodic(lambda: None, 0.0, 0.001)
    first = task._first
    for _ in range(20):
        executor.take()()
    with schedulers._queue.lock:
        # The 21st run is due at first + 20 periods, however late the 20 before it ran.
        assert task._first + task._count * 0.001 == first + 20 * 0.001
    task.cancel()


def test_periodic_run_that_falls_behind_catches_up_and_never_overlaps(pool: DaemonThreadPool) -> None:
    scheduler = TimerScheduler(pool)
    release = threading.Event()  # never set: the first run waits out its time
    caught_up = threading.Event()
    lock = threading.Lock()
    state = {"inside": 0, "most": 0, "runs": 0}

    def fn() -> None:
        with lock:
            state["inside"] += 1
            state["most"] = max(state["most"], state["inside"])
            state["runs"] += 1
            runs = state["runs"]
        if runs == 1:
            release.wait(0.05)  # five periods go by: the runs that fell due then come back to back
        with lock:
            state["inside"] -= 1
        if runs == 5:
            caught_up.set()

    task = scheduler.schedule_periodic(fn, 0.0, 0.01)
    assert caught_up.wait(WAIT)
    task.cancel()
    assert state["most"] == 1


def test_periodic_function_that_raises_is_not_run_again() -> None:
    executor = Holding()
    scheduler = TimerScheduler(executor)
    calls: list[int] = []

    def fn() -> None:
        calls.append(1)
        raise ValueError("boom")

    task = scheduler.schedule_periodic(fn, 0.0, 0.001)
    with pytest.raises(ValueError, match=r"^boom$"):
        executor.take()()
    assert not executor.handed.acquire(timeout=0.1)
    assert calls == [1]
    with schedulers._queue.lock:
        assert not task._in_heap


def test_cancel_from_inside_a_periodic_run_stops_it() -> None:
    executor = Holding()
    scheduler = TimerScheduler(executor)
    runs: list[int] = []
    task: list[ScheduledTask] = []

    def fn() -> None:
        runs.append(1)
        task[0].cancel()

    task.append(scheduler.schedule_periodic(fn, 0.0, 0.001))
    executor.take()()
    assert not executor.handed.acquire(timeout=0.1)
    assert runs == [1]


# --- Many timers, one thread -------------------------------------------------------------------


def test_many_schedulers_share_one_timer_thread() -> None:
    tasks = [TimerScheduler(direct_executor).schedule(lambda: None, 3600.0) for _ in range(20)]
    tasks += [default_scheduler().schedule(lambda: None, 3600.0) for _ in range(20)]
    assert len(timer_threads()) == 1
    for task in tasks:
        task.cancel()


def test_a_hundred_thousand_cancelled_timers_leave_the_heap() -> None:
    scheduler = TimerScheduler(direct_executor)
    tasks = [scheduler.schedule(lambda: None, 3600.0 + i) for i in range(100_000)]
    with schedulers._queue.lock:
        assert len(schedulers._queue.heap) >= 100_000
    for task in tasks[:-10]:
        task.cancel()
    with schedulers._queue.lock:
        assert len(schedulers._queue.heap) <= schedulers._PURGE_MIN * 2  # rebuilt as cancelled timers piled up
    for task in tasks[-10:]:
        task.cancel()
    with schedulers._queue.lock:
        assert schedulers._queue.heap == []  # the last one cancelled: nothing left
    assert len(timer_threads()) == 1


def test_cancelled_timers_are_freed_while_the_timer_thread_sleeps(monkeypatch: pytest.MonkeyPatch) -> None:
    queue = schedulers._TimerQueue()
    monkeypatch.setattr(schedulers, "_queue", queue)
    scheduler = TimerScheduler(direct_executor)
    tasks = [scheduler.schedule(lambda: None, 3600.0 + i) for i in range(1000)]
    awake = threading.Event()
    scheduler.schedule(awake.set, 0.0)
    assert awake.wait(WAIT)
    with queue.lock:  # the thread is waiting for the first of the 1,000, with the lock released
        assert queue.thread is not None
    refs = [weakref.ref(task) for task in tasks]
    for task in tasks:
        task.cancel()
    del tasks, task
    gc.collect()
    assert [ref for ref in refs if ref() is not None] == []
    queue.stop_at_exit()


def test_the_timer_thread_ends_when_idle_and_a_new_timer_starts_another(monkeypatch: pytest.MonkeyPatch) -> None:
    queue = schedulers._TimerQueue()  # a queue of this test's own, empty of other tests' timers
    monkeypatch.setattr(schedulers, "_queue", queue)
    monkeypatch.setattr(schedulers, "_IDLE_EXIT", 0.01)
    scheduler = TimerScheduler(direct_executor)
    ran = threading.Event()
    scheduler.schedule(ran.set, 0.0)
    assert ran.wait(WAIT)
    first = queue.thread
    assert first is not None
    first.join(WAIT)
    assert not first.is_alive()
    assert queue.thread is None
    again = threading.Event()
    scheduler.schedule(again.set, 0.0)
    assert again.wait(WAIT)
    assert queue.thread is not None and queue.thread is not first
    queue.stop_at_exit()
    assert queue.thread is None


# --- Refusal and shutdown ---------------------------------------------------------------


class _Reported(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []
        self.arrived = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)
        self.arrived.set()


def test_refused_hand_off_is_reported_and_the_function_dropped() -> None:
    class Refusing:
        def execute(self, task: Callable[[], object]) -> None:
            raise RuntimeError("no more tasks")

    scheduler = TimerScheduler(Refusing())
    reported = _Reported()
    logger = logging.getLogger("flowpy")
    logger.addHandler(reported)
    try:
        task = scheduler.schedule_periodic(lambda: None, 0.0, 0.001)
        assert reported.arrived.wait(WAIT)
    finally:
        logger.removeHandler(reported)
    (record,) = reported.records
    assert record.getMessage() == (
        f"the executor of {scheduler!r} refused a due task, which will not run "
        "(shut the scheduler down before its executor): RuntimeError('no more tasks')"
    )
    with schedulers._queue.lock:
        assert not task._in_heap
        assert task._fn is None


def test_shutdown_drops_pending_timers_and_refuses_new_ones() -> None:
    executor = Holding()
    scheduler = TimerScheduler(executor)
    ran: list[int] = []
    task = scheduler.schedule(lambda: ran.append(1), 0.05)
    scheduler.shutdown()
    scheduler.shutdown()  # idempotent
    assert scheduler.is_shutdown
    assert task.cancelled
    with pytest.raises(RuntimeError, match=r"^cannot schedule new tasks after shutdown of <TimerScheduler shut down"):
        scheduler.schedule(lambda: None)
    assert not executor.handed.acquire(timeout=0.1)


def test_shutdown_skips_a_run_already_handed_over() -> None:
    executor = Holding()
    scheduler = TimerScheduler(executor)
    ran: list[int] = []
    scheduler.schedule(lambda: ran.append(1), 0.0)
    handed = executor.take()
    scheduler.shutdown()
    handed()
    assert ran == []


def test_shutdown_waits_for_a_running_function(pool: DaemonThreadPool) -> None:
    scheduler = TimerScheduler(pool)
    started, release = threading.Event(), threading.Event()

    def fn() -> None:
        started.set()
        release.wait(WAIT)

    scheduler.schedule(fn)
    assert started.wait(WAIT)
    returned = threading.Event()
    waiter = threading.Thread(target=lambda: (scheduler.shutdown(), returned.set()))
    waiter.start()
    assert not returned.wait(0.05)
    release.set()
    waiter.join(WAIT)
    assert returned.is_set()


def test_shutdown_from_inside_a_function_does_not_wait_for_itself(pool: DaemonThreadPool) -> None:
    scheduler = TimerScheduler(pool)
    done = threading.Event()

    def fn() -> None:
        scheduler.shutdown()
        done.set()

    scheduler.schedule(fn)
    assert done.wait(WAIT)


def test_default_scheduler_cannot_be_shut_down() -> None:
    with pytest.raises(
        RuntimeError,
        match=r"^the default scheduler cannot be shut down; make a TimerScheduler of your own to shut down$",
    ):
        default_scheduler().shutdown()


def test_function_raising_on_a_daemon_pool_reaches_the_excepthook(pool: DaemonThreadPool) -> None:
    def fn() -> None:
        raise ValueError("in a timer")

    with expect_thread_exceptions(ValueError) as caught:
        TimerScheduler(pool).schedule(fn)
    assert [str(error) for error in caught] == ["in a timer"]


# --- Interpreter exit and fork ----------------------------------------------------------------


def run_script(source: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(source)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )


@pytest.mark.timeout(90)
def test_interpreter_exit_stops_the_timer_thread_and_skips_handed_over_runs() -> None:
    result = run_script(
        """
        import atexit, threading
        held = []

        def after_flowpy_stopped():
            # Registered before flowpy is imported, so it runs after flowpy's exit handler.
            from flowpy import schedulers
            alive = [t for t in threading.enumerate() if t.name == "flowpy-timer" and t.is_alive()]
            for task in held:
                task()
            print("timer threads", len(alive), "ran after exit", ran)

        atexit.register(after_flowpy_stopped)
        from flowpy.schedulers import TimerScheduler, default_scheduler

        ran = []
        handed = threading.Event()

        class Holding:
            def execute(self, task):
                held.append(task)
                handed.set()

        TimerScheduler(Holding()).schedule(lambda: ran.append("held"), 0.0)
        assert handed.wait(10)
        ticked = threading.Event()
        default_scheduler().schedule_periodic(ticked.set, 0.0, 0.001)
        assert ticked.wait(10)
        print("exiting")
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert result.stdout.splitlines() == ["exiting", "timer threads 0 ran after exit []"]


@pytest.mark.timeout(90)
@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="needs os.fork")
def test_forked_child_drops_the_parents_timers_and_starts_its_own_thread() -> None:
    result = run_script(
        """
        import json, os, threading
        from flowpy import schedulers
        from flowpy.schedulers import default_scheduler

        parent = default_scheduler().schedule(lambda: print("parent timer in child", os.getpid()), 0.5)
        pid = os.fork()
        if pid == 0:
            report = {"heap": len(schedulers._queue.heap), "thread": schedulers._queue.thread is not None}
            ran = threading.Event()
            default_scheduler().schedule(ran.set, 0.0)
            report["ran"] = ran.wait(10)
            report["threads"] = len([t for t in threading.enumerate() if t.name == "flowpy-timer"])
            parent.cancel()  # a parent's handle is harmless in the child
            print(json.dumps(report), flush=True)
            os._exit(0)
        _, status = os.waitpid(pid, 0)
        parent.cancel()
        print("status", status)
        """
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[-1] == "status 0"
    assert json.loads(lines[0]) == {"heap": 0, "thread": False, "ran": True, "threads": 1}
    assert not any("parent timer" in line for line in lines)
