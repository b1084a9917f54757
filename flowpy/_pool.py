"""The executor kinds flowpy accepts, and its daemon thread pool: a leaf, on the stdlib and :mod:`flowpy._checks`.

:mod:`flowpy.executors` is the public home of everything here; this module
exists so that :mod:`flowpy.tck`, which must not import the implementation it
tests, can run its helper publisher on the same pool.
"""

from __future__ import annotations

import os
import queue
import threading
import weakref
from collections.abc import Callable
from concurrent.futures import Executor as FuturesExecutor
from concurrent.futures import Future
from typing import Any, Protocol, TypeVar, Union, runtime_checkable

from flowpy._checks import check_timeout
from flowpy._fork import at_fork_in_child

__all__ = [
    "DaemonThreadPool",
    "DirectExecutor",
    "Executor",
    "SupportsExecute",
    "Task",
    "as_execute",
    "direct_executor",
    "live_pools",
]

R = TypeVar("R")

Task = Callable[[], object]
"""A unit of work handed to an executor."""


@runtime_checkable
class SupportsExecute(Protocol):
    """An object with ``execute(fn)``, like ``java.util.concurrent.Executor``."""

    def execute(self, task: Task, /) -> object:
        """Run ``task`` at some time, on some thread."""


Executor = Union[FuturesExecutor, SupportsExecute, Callable[[Task], object]]  # noqa: UP007 - a runtime alias on 3.10
"""Anything flowpy accepts where it runs tasks."""


def as_execute(executor: Executor, *, name: str = "executor") -> Callable[[Task], object]:
    """Return the function that hands one task to ``executor``.

    An object with ``execute`` is preferred to a ``concurrent.futures``
    ``submit``, because ``execute`` does not allocate a ``Future``.

    Raises:
        TypeError: if ``executor`` is ``None`` or is none of the three kinds.
    """
    if executor is None:
        raise TypeError(f"{name} must not be None; leave it out to use the default executor")
    execute = getattr(executor, "execute", None)
    if callable(execute):
        return execute  # type: ignore[no-any-return]
    if isinstance(executor, FuturesExecutor):
        return executor.submit
    if callable(executor):
        return executor
    raise TypeError(
        f"{name} must be a concurrent.futures.Executor, an object with execute(fn) or a callable, got {executor!r}"
    )


class DirectExecutor:
    """Runs each task at once, on the thread that hands it over.

    Use it for tests and for cheap, non-blocking subscribers: every signal then
    runs inside the call that caused it (``submit``, ``request``, ``close``).
    """

    __slots__ = ()

    def execute(self, task: Task) -> None:
        """Run ``task`` now; what it raises propagates."""
        task()

    def __repr__(self) -> str:
        return "flowpy.direct_executor"


direct_executor = DirectExecutor()
"""The executor that runs tasks on the calling thread."""


class DaemonThreadPool(FuturesExecutor):
    """A thread pool whose idle threads wait for work and never block exit.

    ``execute(fn)`` queues ``fn`` without creating a ``Future``; ``submit``
    is the ``concurrent.futures`` interface. A task's exception is reported
    through :func:`threading.excepthook` when it came through ``execute``, and
    set on the future when it came through ``submit``.

    In a child made by ``os.fork()`` the pool is empty: the parent's threads
    and the tasks queued or running there are not in the child; a pool that
    was not shut down starts threads of its own when handed tasks.
    """

    def __init__(self, max_workers: int | None = None, thread_name_prefix: str = "flowpy") -> None:
        if max_workers is None:
            max_workers = min(32, (os.cpu_count() or 1) + 4)
        if max_workers <= 0:
            raise ValueError(f"max_workers must be positive, got {max_workers!r}")
        self._max_workers = max_workers
        self._prefix = thread_name_prefix
        self._shutdown = False
        self._start_empty()
        with _pools_lock:
            _pools.add(self)

    def _start_empty(self) -> None:
        """Set up a pool with no thread and no task (in ``__init__``, and again in a forked child)."""
        # Tasks in order; a None after them tells the workers to exit.
        self._tasks: queue.SimpleQueue[Task | None] = queue.SimpleQueue()
        # --- Guarded by self._lock -------------------------------------
        # execute() calls no Python code of threading (a Semaphore's or a
        # Condition's __enter__) unless it starts a thread: a KeyboardInterrupt
        # raised in there, on the thread that submits, would leave that lock
        # held, and every later execute() would block on it. Nor does any
        # section of it have a loop whose backward jump CPython 3.12+ leaves
        # outside the with's handler (tests/test_package.py, docs/internals.md).
        # Held while a task is queued, so that no task lands behind the
        # shutdown sentinel, where no worker would ever take it.
        self._lock = threading.Lock()
        # Notified when the last unfinished task finishes.
        self._all_done = threading.Condition(self._lock)
        self._threads: list[threading.Thread] = []
        self._unfinished = 0  # tasks queued or running
        # Added to by a worker each time it becomes idle; taken by execute()
        # to reuse an idle worker instead of starting a thread. It may count
        # a worker that has taken a task meanwhile: that task then waits for
        # a thread to be free, as in concurrent.futures.ThreadPoolExecutor.
        self._idle_workers = 0
        # self._shutdown (set in __init__, kept across a fork) is guarded by self._lock too.

    @property
    def max_workers(self) -> int:
        """The most threads this pool starts."""
        return self._max_workers

    def execute(self, task: Task) -> None:
        """Queue ``task`` to run on a pool thread.

        Raises:
            RuntimeError: if the pool was shut down.
        """
        with self._lock:
            if self._shutdown:
                raise RuntimeError("cannot schedule new tasks after shutdown")
            self._unfinished += 1
            self._tasks.put(task)
            if self._idle_workers:
                self._idle_workers -= 1
            else:
                self._add_thread_locked()

    def submit(self, fn: Callable[..., R], /, *args: Any, **kwargs: Any) -> Future[R]:
        """Schedule ``fn(*args, **kwargs)`` and return its future.

        Raises:
            RuntimeError: if the pool was shut down.
        """
        future: Future[R] = Future()

        def run() -> None:
            if not future.set_running_or_notify_cancel():
                return
            try:
                result = fn(*args, **kwargs)
            except BaseException as exc:
                future.set_exception(exc)
            else:
                future.set_result(result)

        self.execute(run)
        return future

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until every task handed over so far has finished; return whether that happened in time.

        Tasks that those tasks queue are waited for too. For monitoring and
        for an orderly exit, not as a substitute for a subscriber's own
        completion signal. ``timeout=None`` waits without limit; one beyond
        ``threading.TIMEOUT_MAX`` (``inf`` included) waits that long.

        Raises:
            TypeError: if ``timeout`` is not a number or ``None``.
            ValueError: if ``timeout`` is negative or NaN.
        """
        seconds = None if timeout is None else check_timeout(timeout)
        with self._lock:
            return self._all_done.wait_for(lambda: not self._unfinished, seconds)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Refuse new tasks; let the threads finish what is queued, then exit."""
        with self._lock:
            self._shutdown = True
            threads = list(self._threads)
            if cancel_futures:
                while True:
                    try:
                        cancelled = self._tasks.get_nowait()
                    except queue.Empty:
                        break
                    if cancelled is not None:
                        self._task_done_locked()
            self._tasks.put(None)
        if wait:
            for thread in threads:
                if thread is not threading.current_thread():
                    thread.join()

    def _add_thread_locked(self) -> None:
        # Caller holds self._lock and has just queued a task. The thread is
        # started here, under the lock, so that a shutdown() cannot come in
        # between and find the task queued with no thread to run it, nor a
        # listed thread that was not started yet.
        if len(self._threads) >= self._max_workers:
            return
        thread = threading.Thread(
            target=self._work,
            name=f"{self._prefix}-{len(self._threads)}",
            daemon=True,
        )
        thread.start()
        self._threads.append(thread)

    def _work(self) -> None:
        tasks = self._tasks
        while True:
            task = tasks.get()
            if task is None:
                tasks.put(None)  # wake the next thread for shutdown
                return
            try:
                task()
            except BaseException as exc:  # reported; the thread goes on
                threading.excepthook(
                    threading.ExceptHookArgs((type(exc), exc, exc.__traceback__, threading.current_thread()))
                )
            del task
            with self._lock:
                self._task_done_locked()
                self._idle_workers += 1

    def _task_done_locked(self) -> None:
        # Caller holds self._lock.
        self._unfinished -= 1
        if not self._unfinished:
            self._all_done.notify_all()

    def __repr__(self) -> str:
        return f"<DaemonThreadPool max_workers={self._max_workers} threads={len(self._threads)}>"


_pools_lock = threading.Lock()
_pools: weakref.WeakSet[DaemonThreadPool] = weakref.WeakSet()  # every pool not yet collected; guarded by _pools_lock


def live_pools() -> list[DaemonThreadPool]:
    """Every :class:`DaemonThreadPool` that has not been garbage-collected (the default one included)."""
    with _pools_lock:
        return list(_pools)


@at_fork_in_child
def _empty_pools_in_child() -> None:
    """After ``os.fork()``, in the child: no pool has a thread or a task; locks held at the fork are replaced."""
    global _pools, _pools_lock
    _pools_lock = threading.Lock()
    pools = list(_pools)
    _pools = weakref.WeakSet(pools)  # a fresh set: another thread may have been iterating the old one
    for pool in pools:
        pool._start_empty()
