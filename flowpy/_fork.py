"""What flowpy resets in a child made by ``os.fork()``: one registry of after-fork callbacks.

A forked child has one thread, a copy of the one that called ``fork()``.
Every lock another thread of the parent held at that moment stays held in
the child for ever, and the parent's threads, streams and pools are not
there. Each flowpy module that keeps process-wide state (a module lock, a
registry of live objects, a shared pool or thread) registers one callback
here with :func:`at_fork_in_child`; this module registers with
:func:`os.register_at_fork` once and runs those callbacks, in the order they
were registered, in the child only. A callback must not block and must not
take a lock that another thread could have held at the fork (it replaces
such locks instead), and must not raise: the callbacks after it would not run.

A leaf: it imports the standard library alone, so that :mod:`flowpy._pool`
and :mod:`flowpy.tck` may use it.
"""

from __future__ import annotations

import os
from collections.abc import Callable

__all__ = ["at_fork_in_child"]

# Appended to at import time of the modules that register (under the import
# lock), read in the child, where only the forking thread exists: no lock.
_callbacks: list[Callable[[], None]] = []


def at_fork_in_child(callback: Callable[[], None]) -> Callable[[], None]:
    """Run ``callback()`` in every child made by ``os.fork()`` from now on; return it (a decorator)."""
    _callbacks.append(callback)
    return callback


def _run_in_child() -> None:
    for callback in tuple(_callbacks):
        callback()


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_run_in_child)
