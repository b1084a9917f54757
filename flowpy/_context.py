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
single consumer task, a :class:`~flowpy._serial.SerialDrain` pass), and leaves
it before the hand-off that lets another thread start the next task.

:data:`enabled` switches propagation off for subscriptions made while it is
``False``; it exists to measure the cost (benchmarks/throughput.py) and is
not part of the public API.
"""

from __future__ import annotations

from contextvars import Context, copy_context

__all__ = ["capture", "enabled"]

enabled = True
"""Whether :func:`capture` captures; for benchmarks that compare the cost."""


def capture() -> Context | None:
    """A copy of the current context for a new subscription, or ``None`` if propagation is off."""
    return copy_context() if enabled else None
