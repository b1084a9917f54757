"""Test doubles shared by the test modules: a recording subscriber and a manual executor."""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable
from typing import Any

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
