"""Helpers for the context propagation tests: a context variable and a subscriber that records it."""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextvars import ContextVar, copy_context
from typing import Any, TypeVar

from tests.support import Recorder

__all__ = ["MISSING", "REQUEST_ID", "ContextRecorder", "in_context", "in_fresh_thread"]

R = TypeVar("R")

REQUEST_ID: ContextVar[str] = ContextVar("REQUEST_ID")
"""The variable the tests set before subscribing, like an application's request id."""

MISSING = "<unset>"
"""What :class:`ContextRecorder` records when :data:`REQUEST_ID` has no value."""


def in_context(value: str | None, fn: Callable[..., R], *args: Any) -> R:
    """Call ``fn(*args)`` in a copy of the current context where REQUEST_ID is ``value`` (unset if ``None``)."""
    context = copy_context()

    def run() -> R:
        if value is not None:
            REQUEST_ID.set(value)
        return fn(*args)

    return context.run(run)


def in_fresh_thread(fn: Callable[[], R]) -> R:
    """Call ``fn`` on a new thread, whose context is empty, and return its result."""
    results: list[R] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            results.append(fn())
        except BaseException as exc:  # handed to the caller below
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(timeout=30)
    assert not thread.is_alive(), "the thread did not finish"
    if errors:
        raise errors[0]
    return results[0]


class ContextRecorder(Recorder):
    """A :class:`~tests.support.Recorder` that also records REQUEST_ID as each signal sees it.

    ``seen`` holds ``(signal, value)`` pairs, in order; ``on_next_hook`` runs
    after the value was recorded, so a hook that sets REQUEST_ID shows in the
    next signal.
    """

    def __init__(self, initial: int = 0, on_next_hook: Callable[[Any], None] | None = None) -> None:
        super().__init__(initial, on_next_hook)
        self.seen: list[tuple[str, str]] = []

    def _see(self, name: str) -> None:
        self.seen.append((name, REQUEST_ID.get(MISSING)))

    def on_subscribe(self, subscription: Any) -> None:
        self._see("on_subscribe")
        super().on_subscribe(subscription)

    def on_next(self, item: Any) -> None:
        self._see("on_next")
        super().on_next(item)

    def on_error(self, error: BaseException) -> None:
        self._see("on_error")
        super().on_error(error)

    def on_complete(self) -> None:
        self._see("on_complete")
        super().on_complete()

    def values(self) -> set[str]:
        """Every value of REQUEST_ID seen by any signal."""
        return {value for _, value in self.seen}
