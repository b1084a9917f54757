"""Context propagation: each subscriber's signals run in its own copy of the caller's ``contextvars`` context.

The rule, for every executor hop in flowpy (SubmissionPublisher, the
processors, the sources, the operators, the interop bridges): a subscriber's
``on_subscribe``, ``on_next``, ``on_error`` and ``on_complete`` run in a copy
of the :mod:`contextvars` context that was current when ``subscribe`` was
called, whatever thread runs them. This is what :mod:`asyncio` does for a
callback (``call_soon(..., context=...)``) and ``asyncio.to_thread`` for a
function (``copy_context().run``), kept for the whole life of a
subscription: one copy per subscription, so a variable that the subscriber
sets in ``on_next`` is still set in its next signal, and never leaks to the
producer's thread.

The primitive is :func:`capture`, called where a subscription (or a stage's
drain) is created, which is inside ``subscribe``; the owner then runs each
delivery task with ``context.run(task)``. A :class:`contextvars.Context` can
be entered by one thread at a time and never twice, so every owner enters its
copy only inside the region that its own serialisation makes exclusive (the
single consumer task, a :class:`~flowpy._core.serial.SerialDrain` pass), and leaves
it before the hand-off that lets another thread start the next task.

:data:`enabled` switches propagation off for subscriptions made while it is
``False``; :mod:`flowpy.context` is its public face.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import Context, copy_context
from functools import partial
from threading import get_ident
from typing import ParamSpec, TypeVar, cast

__all__ = ["ConfinedContext", "bind", "capture", "enabled"]

P = ParamSpec("P")
R = TypeVar("R")

enabled = True
"""Whether :func:`capture` captures (:func:`flowpy.context.set_context_propagation`)."""


def capture() -> Context | None:
    """A copy of the current context for a new subscription, or ``None`` if propagation is off."""
    return copy_context() if enabled else None


def bind(context: Context | None, fn: Callable[P, R]) -> Callable[P, R]:
    """``fn``, made to run in ``context`` on every call (``fn`` itself if ``context`` is ``None``).

    For a per-item call that cannot be batched; the caller must never let
    two calls overlap (one thread at a time, no nesting).
    """
    if context is None:
        return fn
    return cast("Callable[P, R]", partial(context.run, fn))


class ConfinedContext:
    """A subscriber's context for an owner whose signals are serial but may nest.

    :meth:`run` enters the context, or calls straight through when this
    thread is already inside it: a subscriber method that makes the owner
    signal again on the same thread (``request`` delivering at once) stays
    in the context it is in, and the context is never entered twice. The
    owner must still never signal from two threads at once (rule 1.3), as
    for any subscriber (an event loop's thread only, or a signal claimed
    once under a lock).
    """

    __slots__ = ("_inside", "context")

    def __init__(self) -> None:
        self.context = capture()
        self._inside = 0  # the ident of the thread inside run(), 0 if none

    def run(self, fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        """Call ``fn`` in the context (``fn`` as it is when propagation is off)."""
        context = self.context
        if context is None or self._inside == get_ident():
            return fn(*args, **kwargs)
        self._inside = get_ident()
        try:
            return context.run(fn, *args, **kwargs)
        finally:
            self._inside = 0
