"""Where the TCK's helper publisher runs: the executor kinds it accepts, and its default pool.

The TCK keeps its own small pool rather than borrowing one from the library
it tests (see the dependency rule in :mod:`flowpy.tck`). An executor is any of

* a :class:`concurrent.futures.Executor` (its ``submit`` is used),
* an object with an ``execute(fn)`` method, as ``java.util.concurrent.Executor``,
* a plain callable that takes a zero-argument function and runs it, now or later,

the same three kinds flowpy accepts, so a user's flowpy pool works here too.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Executor as FuturesExecutor
from concurrent.futures import Future
from typing import Any, Protocol, TypeVar, Union, runtime_checkable

from flowpy._checks import require, require_positive_int

__all__ = ["DaemonPool", "Executor", "SupportsExecute", "Task", "as_execute"]

R = TypeVar("R")

Task = Callable[[], object]
"""A unit of work handed to an executor."""


@runtime_checkable
class SupportsExecute(Protocol):
    """An object with ``execute(fn)``, like ``java.util.concurrent.Executor``."""

    def execute(self, task: Task, /) -> object:
        """Run ``task`` at some time, on some thread."""


Executor = Union[FuturesExecutor, SupportsExecute, Callable[[Task], object]]  # noqa: UP007 - a runtime alias on 3.10
"""Anything the helper publisher accepts where it runs its signals."""


def as_execute(executor: Executor) -> Callable[[Task], object]:
    """Return the function that hands one task to ``executor`` (``execute`` is preferred to ``submit``).

    Raises:
        TypeError: if ``executor`` is ``None`` or is none of the three kinds.
    """
    require(executor, "executor")
    execute = getattr(executor, "execute", None)
    if callable(execute):
        return execute  # type: ignore[no-any-return]
    if isinstance(executor, FuturesExecutor):
        return executor.submit
    if callable(executor):
        return executor
    raise TypeError(
        f"executor must be a concurrent.futures.Executor, an object with execute(fn) or a callable, got {executor!r}"
    )


class DaemonPool(FuturesExecutor):
    """A fixed number of daemon threads taking tasks from one queue; never blocks interpreter exit.

    A thread is started per task until ``threads`` run; they then stay until
    :meth:`shutdown`. A task handed over by :meth:`execute` that raises is
    reported through :func:`threading.excepthook` (nobody holds a future to
    read it); one handed over by :meth:`submit` sets its future's exception.
    """

    def __init__(self, threads: int, thread_name_prefix: str = "flowpy-tck") -> None:
        self._max_threads = require_positive_int(threads, "threads")
        self._prefix = thread_name_prefix
        # Tasks in order; a None after them tells the threads to exit.
        self._tasks: queue.SimpleQueue[Task | None] = queue.SimpleQueue()
        # --- Guarded by self._lock -------------------------------------
        # Held while a task is queued, so that no task lands behind the
        # shutdown sentinel, where no thread would ever take it.
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._shutdown = False

    def execute(self, task: Task) -> None:
        """Queue ``task`` to run on a pool thread.

        Raises:
            RuntimeError: if the pool was shut down.
        """
        with self._lock:
            if self._shutdown:
                raise RuntimeError("cannot schedule new tasks after shutdown")
            self._tasks.put(task)
            if len(self._threads) < self._max_threads:
                thread = threading.Thread(
                    target=self._work, name=f"{self._prefix}-{len(self._threads)}", daemon=True
                )
                thread.start()
                self._threads.append(thread)

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

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Refuse new tasks; the threads finish what is queued (unless ``cancel_futures``), then exit."""
        with self._lock:
            self._shutdown = True
            threads = list(self._threads)
            if cancel_futures:
                while True:
                    try:
                        self._tasks.get_nowait()
                    except queue.Empty:
                        break
            self._tasks.put(None)
        if wait:
            for thread in threads:
                if thread is not threading.current_thread():
                    thread.join()

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

    def __repr__(self) -> str:
        return f"<DaemonPool threads={len(self._threads)}/{self._max_threads}>"
