"""Executors: where flowpy runs subscriber code.

An *executor* is any of

* a :class:`concurrent.futures.Executor` (its ``submit`` is used),
* an object with an ``execute(fn)`` method, as ``java.util.concurrent.Executor``,
* a plain callable that takes a zero-argument function and runs it, now or later.

:func:`as_execute` turns any of them into one ``execute(fn)`` callable.

:func:`default_executor` is the shared pool used when none is given, like the
JDK's ``ForkJoinPool.commonPool()``: created on first use, its threads are
daemon threads, so it never keeps the interpreter alive at exit.
:data:`direct_executor` runs each task on the calling thread.
"""

from __future__ import annotations

import enum
import threading
from collections import deque
from collections.abc import Callable

from flowpy._core.serial import SerialDrain
from flowpy._fork import at_fork_in_child
from flowpy._pool import (
    DaemonThreadPool,
    DirectExecutor,
    Executor,
    SupportsExecute,
    Task,
    as_execute,
    direct_executor,
)

__all__ = [
    "DEFAULT",
    "DaemonThreadPool",
    "Default",
    "DirectExecutor",
    "Executor",
    "SerialExecutor",
    "SupportsExecute",
    "Task",
    "as_execute",
    "default_executor",
    "direct_executor",
    "resolve_execute",
]

_default_lock = threading.Lock()
_default: DaemonThreadPool | None = None


@at_fork_in_child
def _forget_default_in_child() -> None:
    """After ``os.fork()``, in the child: the child's first use makes a shared pool of its own."""
    global _default, _default_lock
    _default = None
    _default_lock = threading.Lock()


def default_executor() -> DaemonThreadPool:
    """Return the shared pool, creating it on first use.

    It has ``min(32, cpu_count + 4)`` daemon threads at most, and is used by
    every flowpy object built without an explicit executor.
    """
    global _default
    pool = _default
    if pool is None:
        with _default_lock:
            pool = _default
            if pool is None:
                pool = _default = DaemonThreadPool(thread_name_prefix="flowpy-default")
    return pool


class Default(enum.Enum):
    """The type of :data:`DEFAULT`, the "no executor given" marker."""

    EXECUTOR = "default executor"


DEFAULT = Default.EXECUTOR
"""Default value of ``executor`` parameters: use :func:`flowpy.default_executor`.

``None`` is not accepted in its place (``TypeError``), as in the JDK.
"""


def resolve_execute(executor: Executor | Default, *, name: str = "executor") -> Callable[..., object]:
    """Return the ``execute(fn)`` callable of ``executor`` (the shared pool for :data:`DEFAULT`).

    Raises:
        TypeError: if ``executor`` is ``None`` or not an executor.
    """
    return as_execute(default_executor() if executor is DEFAULT else executor, name=name)


class SerialExecutor:
    """Runs tasks one at a time, in the order given, on an underlying executor.

    At most one task of this serial executor is queued on, or running on, the
    underlying executor; it runs every task queued meanwhile (a
    :class:`~flowpy._core.serial.SerialDrain`). If the underlying executor
    refuses, ``on_reject(exc)`` runs on the thread that called
    :meth:`execute`, and no task runs after it. ``subscribe_on`` moves a
    source's ``subscribe`` and ``request`` calls onto one.
    """

    __slots__ = ("_serial", "_tasks")

    def __init__(self, execute: Callable[[Task], object], on_reject: Callable[[BaseException], None]) -> None:
        # on_reject runs on the refused thread; no task of ours runs after it.
        self._serial = SerialDrain(execute, self._drain, on_reject)
        self._tasks: deque[Task] = deque()

    def execute(self, task: Task) -> None:
        """Queue ``task`` to run after the tasks queued before it."""
        self._tasks.append(task)
        self._serial.signal()

    def _drain(self, first: bool) -> bool:
        tasks = self._tasks
        while tasks:
            tasks.popleft()()
        return False
