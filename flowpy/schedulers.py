"""Schedulers: the time of flowpy's sources and operators.

A :class:`Scheduler` tells the time (:meth:`~Scheduler.now`) and runs
functions later (:meth:`~Scheduler.schedule`,
:meth:`~Scheduler.schedule_periodic`). Every time-aware source and operator
of flowpy takes ``scheduler=None`` and then uses :func:`default_scheduler`;
pass :class:`flowpy.testing.TestScheduler` to drive them in virtual time.

:class:`TimerScheduler` is the real one: one timer thread for the whole
process keeps every pending timer of every :class:`TimerScheduler` in one
heap (``O(log n)`` to schedule, ``O(1)`` to cancel), and hands each due
function to the scheduler's executor, so a slow function never delays
another timer. It is ``ScheduledThreadPoolExecutor`` with its work moved to
an executor, as RxJava's ``Schedulers.from(executor)`` does.

Protocol:   ``schedule(fn, delay)`` runs ``fn`` once, no sooner than ``delay``
            seconds from now; ``schedule_periodic(fn, initial_delay, period)``
            runs it at ``initial_delay + k * period`` for k = 0, 1, 2, ... (fixed
            rate: each due time is computed from the first, so no drift
            accumulates; a run that starts late does not move the next one;
            runs never overlap, and when they fall behind they run back to back
            until they have caught up). A periodic function that raises is not
            run again. ``cancel()`` on the returned handle stops every run that
            has not started; it is idempotent and never raises.
Threading:  every method is thread-safe. Functions run on the executor; the
            timer thread runs none of them (except with ``direct_executor``,
            which runs them on the timer thread and so delays every other
            timer of the process: use it only for functions that return at once).
Lifetime:   the timer thread starts with the first timer, ends after being idle
            for a while, and is stopped at interpreter exit, after which no
            function scheduled by a :class:`TimerScheduler` starts.
            :meth:`TimerScheduler.shutdown` drops one scheduler's timers and
            waits for its running functions. In a child made by ``os.fork()``,
            the parent's timers do not fire (their threads are not there); the
            child's first timer starts a timer thread of its own.
"""

from __future__ import annotations

import atexit
import heapq
import threading
import weakref
from collections.abc import Callable
from time import monotonic
from typing import Protocol, runtime_checkable

from flowpy._checks import require_callable, require_seconds
from flowpy._fork import at_fork_in_child
from flowpy._signals import report
from flowpy.executors import DEFAULT, Default, Executor, Task, default_executor, resolve_execute

__all__ = [
    "Cancellable",
    "ScheduledTask",
    "Scheduler",
    "TimerScheduler",
    "default_scheduler",
    "resolve_scheduler",
]


@runtime_checkable
class Cancellable(Protocol):
    """What :meth:`Scheduler.schedule` returns: a handle that stops the runs not yet started."""

    def cancel(self) -> None:
        """Stop every run of the function that has not started; idempotent, never raises."""


@runtime_checkable
class Scheduler(Protocol):
    """Time for flowpy's time-aware sources and operators (see the module docstring for the contract).

    Implemented by :class:`TimerScheduler` (real time) and
    :class:`flowpy.testing.TestScheduler` (virtual time). Delays and periods
    are in seconds.
    """

    def now(self) -> float:
        """The scheduler's current time, in seconds; never goes back."""

    def schedule(self, fn: Task, delay: float = 0.0) -> Cancellable:
        """Run ``fn`` once, ``delay`` seconds from now or later."""

    def schedule_periodic(self, fn: Task, initial_delay: float, period: float) -> Cancellable:
        """Run ``fn`` at ``initial_delay + k * period`` seconds from now, k = 0, 1, 2, ...; runs never overlap."""


def resolve_scheduler(scheduler: Scheduler | None) -> Scheduler:
    """Return ``scheduler``, or :func:`default_scheduler` when it is ``None``.

    Raises:
        TypeError: if ``scheduler`` is not a :class:`Scheduler`.
    """
    if scheduler is None:
        return default_scheduler()
    if not isinstance(scheduler, Scheduler):
        raise TypeError(f"scheduler must be a Scheduler (now, schedule, schedule_periodic) or None, got {scheduler!r}")
    return scheduler


# Implementation overview
#
# One _TimerQueue per process: a heap of (due, seq, task) under one lock, and
# one daemon thread that sleeps on a condition until the head is due, pops
# every due task, and hands each to its scheduler's executor with the lock
# released. seq breaks ties, so tasks due together are handed over in the
# order they were scheduled. cancel() only marks a task and counts it; the
# heap is rebuilt without the cancelled tasks once they are more than half of
# it, so 100,000 scheduled-and-cancelled timers cost a flag each until then
# and nothing after. A periodic task goes back into the heap when its run
# returns, at first_due + k * period, so runs never overlap and the
# schedule never drifts. All state of the queue, of the tasks and of the
# schedulers (their running counts) is guarded by the one lock; nothing that
# is not flowpy's own code runs under it.

_IDLE_EXIT = 10.0
"""Seconds the timer thread waits with no timer pending before it ends (a later timer starts another)."""

_PURGE_MIN = 64  # cancelled tasks tolerated in the heap before a rebuild is considered


class ScheduledTask:
    """The handle of one function scheduled on a :class:`TimerScheduler`; :meth:`cancel` stops it."""

    __slots__ = ("__weakref__", "_cancelled", "_count", "_first", "_fn", "_in_heap", "_period", "_scheduler")

    def __init__(self, scheduler: TimerScheduler, fn: Task, first: float, period: float | None) -> None:
        # --- Guarded by the timer queue's lock --------------------------
        self._scheduler = scheduler
        self._fn: Task | None = fn  # None once it will never run again: released for the collector
        self._first = first  # the first due time (monotonic seconds)
        self._period = period  # None: run once
        self._count = 0  # runs handed over so far; the next is due at first + count * period
        self._in_heap = False  # in the heap, not cancelled
        self._cancelled = False  # cancel() was called, or the scheduler shut down; set once

    @property
    def cancelled(self) -> bool:
        """Whether :meth:`cancel` was called (or the scheduler was shut down): no run starts any more."""
        return self._cancelled

    def cancel(self) -> None:
        """Stop every run that has not started (a run under way finishes); idempotent, never raises."""
        _queue.cancel(self)

    def _due(self) -> float:
        # Caller holds the queue's lock.
        period = self._period
        return self._first if period is None else self._first + self._count * period

    def _run(self) -> None:
        """One run, on the executor; skipped if cancelled or shut down meanwhile. A periodic task goes back in."""
        scheduler = self._scheduler
        queue = _queue
        with queue.lock:
            fn = self._fn
            if fn is None or self._cancelled or scheduler._shutdown or queue.exiting:
                self._fn = None
                return
            scheduler._running += 1
        outer = getattr(_running_here, "scheduler", None)
        _running_here.scheduler = scheduler
        failed = True
        try:
            fn()
            failed = False
        finally:
            _running_here.scheduler = outer
            queue.ran(self, failed)

    def __repr__(self) -> str:
        state = "cancelled" if self._cancelled else "periodic" if self._period is not None else "once"
        return f"<ScheduledTask {state} {self._fn!r}>"


class _TimerQueue:
    """The process's timers: one heap, one lock, one thread."""

    def __init__(self) -> None:
        self.lock = threading.Lock()  # guards everything below, the tasks and the schedulers' counts
        # Notified when a task goes in at the head of the heap, when the
        # queue stops, and when a shut-down scheduler's last run returns.
        self.changed = threading.Condition(self.lock)
        self.heap: list[tuple[float, int, ScheduledTask]] = []
        self.seq = 0  # tie-breaker: scheduling order
        self.cancelled = 0  # cancelled tasks still in the heap
        self.thread: threading.Thread | None = None  # the timer thread, None when there is none
        self.exiting = False  # set at interpreter exit: nothing runs or is scheduled after it

    # --- Scheduling ---------------------------------------------------------

    def push(self, task: ScheduledTask) -> None:
        """Put ``task`` in the heap at its next due time, starting the thread if needed.

        Caller holds :attr:`lock`.
        """
        due = task._due()
        self.seq += 1
        heap = self.heap
        heapq.heappush(heap, (due, self.seq, task))
        task._in_heap = True
        if self.thread is None:
            thread = threading.Thread(target=self._loop, name="flowpy-timer", daemon=True)
            thread.start()
            self.thread = thread
        elif heap[0][2] is task:
            self.changed.notify()  # an earlier head: the thread sleeps until the old one

    def cancel(self, task: ScheduledTask) -> None:
        with self.lock:
            if task._cancelled:
                return
            task._cancelled = True
            task._fn = None
            if task._in_heap:
                task._in_heap = False
                self.cancelled += 1
                if self.heap[0][2] is task:
                    self.changed.notify()  # the thread sleeps until this one: let it look again
                if self.cancelled == len(self.heap):  # all cancelled: drop the lot at once
                    self.heap = []
                    self.cancelled = 0
                    self.changed.notify()  # the thread goes idle rather than wait for a gone head
                elif self.cancelled > _PURGE_MIN and 2 * self.cancelled > len(self.heap):
                    self._purge_locked()

    def _purge_locked(self) -> None:
        # Caller holds self.lock. Rebuilt, not filtered in place: the old list is freed.
        self.heap = [entry for entry in self.heap if entry[2]._in_heap]
        heapq.heapify(self.heap)
        self.cancelled = 0

    def drop(self, scheduler: TimerScheduler) -> None:
        """Cancel every pending task of ``scheduler``. Caller holds :attr:`lock`."""
        for _, _, task in self.heap:
            if task._scheduler is scheduler and task._in_heap:
                task._in_heap = False
                task._cancelled = True
                task._fn = None
                self.cancelled += 1
        self._purge_locked()

    def ran(self, task: ScheduledTask, failed: bool) -> None:
        """A run of ``task`` returned (or raised, ``failed``): count it, and put a periodic task back."""
        with self.lock:
            scheduler = task._scheduler
            scheduler._running -= 1
            if scheduler._shutdown:
                self.changed.notify_all()  # shutdown(wait=True) may be waiting for this count
            if task._period is None or failed or task._cancelled or scheduler._shutdown or self.exiting:
                task._fn = None
                return
            self.push(task)

    # --- The timer thread -------------------------------------------------------

    def _loop(self) -> None:
        me = threading.current_thread()
        while True:
            with self.lock:
                ready = self._wait_locked(me)
                if ready is None:
                    return
            for task in ready:
                self._hand_off(task)
            del ready

    def _wait_locked(self, me: threading.Thread) -> list[ScheduledTask] | None:
        """Wait until tasks are due and pop them; ``None`` when this thread is to end. Caller holds the lock.

        Nothing of the heap is held in a local while waiting: a purge meanwhile
        replaces the list, and the old one (and its tasks) must be freed then.
        """
        while True:
            if self.exiting or self.thread is not me:
                return None
            if not self.heap:
                if not self.changed.wait(_IDLE_EXIT) and not self.heap and self.thread is me:
                    self.thread = None  # idle: the next push starts a new thread
                    return None
                continue
            due, _, head = self.heap[0]
            if not head._in_heap:
                heapq.heappop(self.heap)
                self.cancelled -= 1
                continue
            delay = due - monotonic()
            if delay > 0:
                del head
                self.changed.wait(delay)
                continue
            break
        heap = self.heap
        now = monotonic()
        ready = []
        while heap and heap[0][0] <= now:
            _, _, task = heapq.heappop(heap)
            if not task._in_heap:
                self.cancelled -= 1
                continue
            task._in_heap = False
            task._count += 1
            ready.append(task)
        return ready

    def _hand_off(self, task: ScheduledTask) -> None:
        """Hand one due run to the task's executor; a refusal ends the task and is reported."""
        scheduler = task._scheduler
        try:
            scheduler._execute()(task._run)
        except BaseException as error:
            with self.lock:
                task._fn = None
            report(
                error,
                f"the executor of {scheduler!r} refused a due task, which will not run "
                f"(shut the scheduler down before its executor)",
            )

    # --- Exit and fork ------------------------------------------------------------------

    def stop_at_exit(self) -> None:
        """Interpreter exit: drop every timer and end the thread; nothing runs or is scheduled after this."""
        with self.lock:
            self.exiting = True
            thread, self.thread = self.thread, None
            for _, _, task in self.heap:
                task._in_heap = False
                task._fn = None
            self.heap = []
            self.cancelled = 0
            self.changed.notify_all()
        if thread is not None and thread is not threading.current_thread():
            thread.join(1.0)

    def reset_in_child(self) -> None:
        """After ``os.fork()``, in the child: the parent's timer thread and running functions are not here."""
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)
        for _, _, task in self.heap:
            task._in_heap = False
            task._fn = None
        self.heap = []
        self.cancelled = 0
        self.thread = None
        for scheduler in list(_schedulers):
            scheduler._running = 0


_queue = _TimerQueue()
_schedulers: weakref.WeakSet[TimerScheduler] = weakref.WeakSet()  # every TimerScheduler, for the fork reset


class TimerScheduler:
    """A :class:`Scheduler` in real time: the process's timer thread hands due functions to ``executor``.

    ``now()`` is :func:`time.monotonic`. With ``executor`` left out, due
    functions run on :func:`flowpy.default_executor` (looked up at each run,
    so a scheduler made before ``os.fork()`` keeps working in the child). If
    the executor refuses a due function, that function (periodic or not) is
    dropped and the refusal reported on the ``flowpy`` logger, as RxJava
    reports it to ``RxJavaPlugins.onError``: shut a scheduler down before its
    executor.

    Raises:
        TypeError: if ``executor`` is ``None`` or not an executor.
    """

    __slots__ = ("__weakref__", "_execute", "_running", "_shared", "_shutdown")

    now = staticmethod(monotonic)
    """The current time: :func:`time.monotonic`, in seconds."""

    def __init__(self, executor: Executor | Default = DEFAULT) -> None:
        if executor is DEFAULT:
            self._execute: Callable[[], Callable[[Task], object]] = lambda: default_executor().execute
        else:
            execute = resolve_execute(executor)
            self._execute = lambda: execute
        self._shared = False  # the default scheduler, which cannot be shut down
        # --- Guarded by the timer queue's lock -----------------------------
        self._shutdown = False
        self._running = 0  # runs of this scheduler's functions under way
        with _queue.lock:
            _schedulers.add(self)

    def schedule(self, fn: Task, delay: float = 0.0) -> ScheduledTask:
        """Run ``fn`` once on the executor, ``delay`` seconds from now (or as soon after as a thread is free).

        Raises:
            TypeError: if ``fn`` is not callable or ``delay`` is not a number.
            ValueError: if ``delay`` is negative or not finite.
            RuntimeError: if this scheduler was shut down.
        """
        require_callable(fn, "fn")
        seconds = require_seconds(delay, "delay")
        return self._add(fn, monotonic() + seconds, None)

    def schedule_periodic(self, fn: Task, initial_delay: float, period: float) -> ScheduledTask:
        """Run ``fn`` on the executor at ``initial_delay + k * period`` seconds from now, at a fixed rate.

        Each due time is computed from the first, so none drifts; a run that
        starts late does not delay the next; runs never overlap, and after a
        run that took longer than ``period`` the ones that fell due run back
        to back. If ``fn`` raises, it is not run again (the exception goes to
        the executor, which reports it).

        Raises:
            TypeError: if ``fn`` is not callable or a time is not a number.
            ValueError: if ``initial_delay`` is negative, ``period`` is not
                positive, or either is not finite.
            RuntimeError: if this scheduler was shut down.
        """
        require_callable(fn, "fn")
        first = require_seconds(initial_delay, "initial_delay")
        every = require_seconds(period, "period", positive=True)
        return self._add(fn, monotonic() + first, every)

    def _add(self, fn: Task, first: float, period: float | None) -> ScheduledTask:
        task = ScheduledTask(self, fn, first, period)
        with _queue.lock:
            if self._shutdown:
                raise RuntimeError(f"cannot schedule new tasks after shutdown of {self!r}")
            if _queue.exiting:  # interpreter exit: nothing runs any more, quietly
                task._cancelled = True
                task._fn = None
                return task
            _queue.push(task)
        return task

    @property
    def is_shutdown(self) -> bool:
        """Whether :meth:`shutdown` was called."""
        return self._shutdown

    def shutdown(self, wait: bool = True) -> None:
        """Drop every pending timer of this scheduler and refuse new ones; idempotent.

        With ``wait``, return only when no function of this scheduler is
        running any more (except the one calling, if called from one); after
        that none ever starts.

        Raises:
            RuntimeError: if this is :func:`default_scheduler`, which every
                time-aware operator shares; make a :class:`TimerScheduler` of
                your own to shut down.
        """
        if self._shared:
            raise RuntimeError(
                "the default scheduler cannot be shut down; make a TimerScheduler of your own to shut down"
            )
        with _queue.lock:
            self._shutdown = True
            _queue.drop(self)
            if wait:
                inside = getattr(_running_here, "scheduler", None) is self
                _queue.changed.wait_for(lambda: self._running <= (1 if inside else 0))

    def __repr__(self) -> str:
        state = " shut down" if self._shutdown else ""
        name = "default TimerScheduler" if self._shared else "TimerScheduler"
        return f"<{name}{state} at {id(self):#x}>"


_running_here = threading.local()  # .scheduler: the TimerScheduler whose function runs on this thread


_default_lock = threading.Lock()
_default: TimerScheduler | None = None


def default_scheduler() -> TimerScheduler:
    """The :class:`TimerScheduler` on the default executor that every time-aware operator uses by default.

    Created on first use; it cannot be shut down (it is stopped at interpreter exit).
    """
    global _default
    scheduler = _default
    if scheduler is None:
        with _default_lock:
            scheduler = _default
            if scheduler is None:
                scheduler = TimerScheduler()
                scheduler._shared = True
                _default = scheduler
    return scheduler


@at_fork_in_child
def _reset_in_child() -> None:
    # The default scheduler itself survives: it looks the default executor up at each run.
    global _default_lock
    _queue.reset_in_child()
    _default_lock = threading.Lock()


atexit.register(_queue.stop_at_exit)
