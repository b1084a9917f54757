"""Test doubles shared by the test modules: a recording subscriber and a manual executor."""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from typing import Any

from flowpy._core.upstream import UpstreamSlot
from flowpy.flow import Subscriber, Subscription


class ManualExecutor:
    """An executor that runs nothing until told to: deterministic interleavings."""

    def __init__(self) -> None:
        self.tasks: collections.deque[Callable[[], object]] = collections.deque()
        self.executed = 0

    def execute(self, task: Callable[[], object]) -> None:
        self.tasks.append(task)

    def run_one(self) -> bool:
        if not self.tasks:
            return False
        self.tasks.popleft()()
        self.executed += 1
        return True

    def run_all(self, limit: int = 100_000) -> int:
        ran = 0
        while self.run_one():
            ran += 1
            assert ran < limit, "tasks keep scheduling tasks"
        return ran


class RejectingExecutor:
    """Accepts the first ``accept`` tasks, then raises ``error`` for every other."""

    def __init__(self, accept: int, error: BaseException | None = None, inner: Any = None) -> None:
        self.accept = accept
        self.error = error or RuntimeError("executor refused the task")
        self.inner = inner or ManualExecutor()

    def execute(self, task: Callable[[], object]) -> None:
        if self.accept <= 0:
            raise self.error
        self.accept -= 1
        self.inner.execute(task)


class GatedSlot(UpstreamSlot):
    """An :class:`UpstreamSlot` that runs ``before`` once, as its first ``accept`` is entered.

    Installed in place of an owner's slot, it puts an action (a cancel, a
    terminal signal, a close) exactly between whatever the owner did before
    calling ``accept`` and the slot's decision: the narrowest window a
    racing thread could hit, made deterministic.
    """

    def __init__(self, before: Callable[[], object]) -> None:
        super().__init__()
        self._before: Callable[[], object] | None = before

    def accept(self, subscription: Subscription) -> bool:
        before, self._before = self._before, None
        if before is not None:
            before()
        return super().accept(subscription)


class Recorder(Subscriber[Any]):
    """Records every signal; checks the signal grammar, demand and serial calls as it goes.

    ``initial`` is requested in ``on_subscribe`` (0 for none); ``on_next_hook``
    runs inside ``on_next``. Violations are collected in ``violations``.
    """

    def __init__(self, initial: int = 0, on_next_hook: Callable[[Any], None] | None = None) -> None:
        self.initial = initial
        self.on_next_hook = on_next_hook
        self.subscription: Subscription | None = None
        self.signals: list[tuple[str, Any]] = []
        self.items: list[Any] = []
        self.error: BaseException | None = None
        self.completed = False
        self.requested = 0
        self.violations: list[str] = []
        self.threads: set[int] = set()
        self.done = threading.Event()
        self.subscribed = threading.Event()
        self._inside = threading.Lock()

    @property
    def terminated(self) -> bool:
        return self.done.is_set()

    def _enter(self, name: str) -> None:
        if not self._inside.acquire(blocking=False):
            self.violations.append(f"overlapping call: {name}")
            return
        self.threads.add(threading.get_ident())
        if self.done.is_set():
            self.violations.append(f"{name} after a terminal signal")
        if name != "on_subscribe" and self.subscription is None:
            self.violations.append(f"{name} before on_subscribe")

    def _leave(self) -> None:
        if self._inside.locked():
            self._inside.release()

    def request(self, n: int) -> None:
        assert self.subscription is not None
        self.requested = min(self.requested + n, 2**63 - 1)
        self.subscription.request(n)

    def cancel(self) -> None:
        assert self.subscription is not None
        self.subscription.cancel()

    def on_subscribe(self, subscription: Subscription) -> None:
        self._enter("on_subscribe")
        try:
            if self.subscription is not None:
                self.violations.append("second on_subscribe")
            self.subscription = subscription
            self.signals.append(("on_subscribe", None))
            self.subscribed.set()
            if self.initial:
                self.request(self.initial)
        finally:
            self._leave()

    def on_next(self, item: Any) -> None:
        self._enter("on_next")
        try:
            self.items.append(item)
            self.signals.append(("on_next", item))
            if len(self.items) > self.requested:
                self.violations.append(f"on_next #{len(self.items)} with only {self.requested} requested")
            if self.on_next_hook is not None:
                self.on_next_hook(item)
        finally:
            self._leave()

    def on_error(self, error: BaseException) -> None:
        self._enter("on_error")
        self.signals.append(("on_error", error))
        self.error = error
        self._leave()
        self.done.set()

    def on_complete(self) -> None:
        self._enter("on_complete")
        self.signals.append(("on_complete", None))
        self.completed = True
        self._leave()
        self.done.set()

    def kinds(self) -> list[str]:
        return [kind for kind, _ in self.signals]


# --- Exceptions that escape threads ------------------------------------------


@dataclasses.dataclass(frozen=True)
class ThreadException:
    """One exception that reached :func:`threading.excepthook`."""

    thread: str
    error: BaseException
    traceback: str

    def describe(self) -> str:
        return f"exception in thread {self.thread}:\n{self.traceback}"


class _Expectation:
    """Exceptions of ``types`` that an ``expect`` block claims instead of failing the test."""

    def __init__(self, types: tuple[type[BaseException], ...]) -> None:
        self.types = types
        self.caught: list[BaseException] = []


class ThreadExceptionLog:
    """Collects every exception that reaches :func:`threading.excepthook` while installed.

    Used as a context manager (or with :meth:`install`/:meth:`uninstall`), it
    replaces the hook and restores the previous one on exit. Exceptions
    claimed by an active :meth:`expect` block are handed to it; every other
    one is kept until :meth:`take` returns it.
    """

    def __init__(self) -> None:
        # Notified whenever an exception arrives.
        self._arrived = threading.Condition(threading.Lock())
        # --- Guarded by self._arrived ----------------------------------
        self._records: list[ThreadException] = []
        self._expectations: list[_Expectation] = []
        self._previous: Callable[[threading.ExceptHookArgs], object] | None = None

    def install(self) -> None:
        """Replace :func:`threading.excepthook` with this log's hook."""
        assert self._previous is None, "the log is installed already"
        self._previous = threading.excepthook
        threading.excepthook = self._hook

    def uninstall(self) -> None:
        """Put back the hook that :meth:`install` replaced."""
        assert self._previous is not None, "the log is not installed"
        threading.excepthook = self._previous
        self._previous = None

    @property
    def installed(self) -> bool:
        return self._previous is not None

    def __enter__(self) -> ThreadExceptionLog:
        self.install()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.uninstall()

    def _hook(self, args: threading.ExceptHookArgs) -> None:
        error = args.exc_value if args.exc_value is not None else args.exc_type()
        record = ThreadException(
            thread="<unknown>" if args.thread is None else args.thread.name,
            error=error,
            traceback="".join(traceback.format_exception(args.exc_type, error, args.exc_traceback)),
        )
        with self._arrived:
            for expectation in self._expectations:
                if isinstance(error, expectation.types):
                    expectation.caught.append(error)
                    break
            else:
                self._records.append(record)
            self._arrived.notify_all()

    def take(self) -> list[ThreadException]:
        """Return and forget the exceptions no ``expect`` block claimed."""
        with self._arrived:
            records, self._records = self._records, []
        return records

    @contextlib.contextmanager
    def expect(
        self, *types: type[BaseException], count: int = 1, timeout: float = 10.0
    ) -> Iterator[list[BaseException]]:
        """Claim exceptions of ``types`` raised in any thread inside the block.

        On exit, waits up to ``timeout`` seconds for at least ``count`` of them
        (a pool thread may report after the block's last line) and fails if
        fewer arrived. Yields the list they are collected into.
        """
        assert types, "expect needs at least one exception type"
        assert self.installed, "the thread exception log is not installed"
        expectation = _Expectation(types)
        with self._arrived:
            self._expectations.append(expectation)
        try:
            yield expectation.caught
            with self._arrived:
                self._arrived.wait_for(lambda: len(expectation.caught) >= count, timeout)
        finally:
            with self._arrived:
                self._expectations.remove(expectation)
        names = ", ".join(t.__name__ for t in types)
        assert len(expectation.caught) >= count, (
            f"expected {count} {names} in other threads within {timeout} s, got {expectation.caught!r}"
        )


thread_exceptions = ThreadExceptionLog()
"""The log every test runs under (installed by tests/conftest.py for the whole session)."""


def expect_thread_exceptions(
    *types: type[BaseException], count: int = 1, timeout: float = 10.0
) -> contextlib.AbstractContextManager[list[BaseException]]:
    """Expect ``count`` exceptions of ``types`` in other threads within the block.

    See :meth:`ThreadExceptionLog.expect`; the session's log is the one used.
    """
    return thread_exceptions.expect(*types, count=count, timeout=timeout)


def wait_until_waiting(thread: threading.Thread, timeout: float = 10.0) -> None:
    """Return once ``thread`` waits in ``threading.Condition.wait`` (a producer blocked for space, say).

    Looks at the thread's stack, not at flowpy's private state.
    """
    wait_code = threading.Condition.wait.__code__
    deadline = time.monotonic() + timeout
    pause = threading.Event()
    while True:
        frame = sys._current_frames().get(thread.ident or 0)
        while frame is not None:
            if frame.f_code is wait_code:
                return
            frame = frame.f_back
        assert thread.is_alive(), f"{thread.name} ended without waiting"
        assert time.monotonic() < deadline, f"{thread.name} did not wait within {timeout} s"
        pause.wait(0.001)
