"""Serial execution on an executor: one drain at a time, no lost wake-ups.

Publishers and subscribers that hand their work to an executor must still
signal serially (rules 1.3, 2.7, 2.11). :class:`SerialDrain` is the small
state machine they share: ``signal()`` says "there is work", and a drain
function runs on the executor, never twice at once, and once more whenever a
signal arrived while it was running.

It also holds the trampoline the inline drains share (:func:`trampoline`):
stages hand items to each other by calling each other, so without it an
item crossing a deep pipeline would recurse through every stage on one
stack.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from contextvars import Context
from typing import Literal

from flowpy._context import capture
from flowpy._signals import chain_fatal

__all__ = ["NESTING", "SerialDrain", "defer", "trampoline"]

_Capture = Literal["capture"]
"""The default of :class:`SerialDrain`'s ``context``: capture the current one."""


class SerialDrain:
    """Runs ``drain`` on an executor, one run at a time, never missing a signal.

    ``drain(first)`` is called with ``first=True`` at the start of each task
    and ``False`` for the further passes of the same task. It returns ``True``
    to yield the thread with work left: the task then re-submits itself
    instead of looping (fairness towards other tasks of the executor).

    With a synchronous executor (say ``direct_executor``) a re-submitted task
    would run inside the call that submits it; the running task notices and
    carries on itself, so the stack does not grow with each batch.

    If the executor refuses a task, ``on_reject(exc)`` runs on the thread
    that signalled, in place of the drain, and no drain ever runs again: the
    owner must end what it serves.

    Without an executor (:meth:`inline`) the drain runs on the thread whose
    ``signal()`` found it idle ("the thread that made progress possible"),
    with none of the bookkeeping a task needs: for per-item loops such as
    MulticastProcessor's and the operators' drains without an executor. A
    ``signal()`` from inside a pass (a ``request`` made by ``on_next``) only
    counts, and the running loop goes round once more, so recursion stays
    bounded (rule 3.3). ``drain`` returning ``True`` just asks for another
    pass. Inline loops go through the thread's trampoline
    (:func:`trampoline`): past :data:`NESTING` nested ones, the loop runs
    once the outermost has returned, so a pass that signals the next
    stage's drain does not recurse through every stage.

    Each drain pass and ``on_reject`` run in ``context``: by default a copy
    of the context current when the drain is made, which its owners do
    inside ``subscribe``, so the subscriber's signals see the context it
    subscribed in (flowpy/_context.py); ``None`` runs them in whatever
    context the thread has. A pass enters it and leaves it before the drain
    can be handed to another thread, and a nested run on the same thread
    returns at once, so the context is never entered twice.

    Drain functions and ``on_reject`` never overlap, and everything a
    signalling thread did before ``signal()`` happens-before the drain pass
    that sees it (rules 1.3, 2.11).

    If ``drain`` raises, the exception propagates out of the task (to the
    executor; to the signalling thread with a synchronous one, where it is
    never taken for a refusal; for an inline loop handed down to the
    trampoline, out of the outermost trampolined call), and the drain is idle again: the next
    ``signal()`` starts a new task, so a failed pass neither freezes the
    owner nor loops. Signals that came during the failed pass are not
    replayed: a raising drain must first leave its owner in a state that
    such a task handles (say, terminal; see
    :func:`flowpy._signals.reraise_fatal`).
    """

    __slots__ = ("_drain", "_execute", "_lock", "_on_reject", "_prepare", "_rerun", "_wip", "context")

    def __init__(
        self,
        execute: Callable[..., object] | None,
        drain: Callable[[bool], bool],
        on_reject: Callable[[BaseException], None],
        context: Context | _Capture | None = "capture",
    ) -> None:
        """Args:
        execute: runs a task (``execute(task)``); ``None`` runs passes inline.
        drain: one pass, ``drain(first) -> yield_thread``.
        on_reject: ``on_reject(exc)`` when ``execute`` raised ``exc``.
        """
        self._execute = execute
        self._drain = drain
        self._on_reject = on_reject
        self._prepare: Callable[[], None] | None = None  # inline only: see inline()
        # The context the passes run in; set once, before the first signal()
        # (an owner made before subscribe sets it in on_subscribe).
        self.context: Context | None = capture() if isinstance(context, str) else context
        self._lock = threading.Lock()
        # --- Guarded by self._lock ---------------------------------------
        # Signals not yet covered by a drain pass. Nonzero exactly while a
        # task is queued or running (or forever after a rejection); a task
        # whose drain raised leaves it at zero.
        self._wip = 0
        # --- Touched only by the thread running the task ----------------
        self._rerun = False  # a re-submitted task was run inline by the executor

    @classmethod
    def inline(
        cls,
        drain: Callable[[bool], bool],
        *,
        lock: threading.Lock | None = None,
        prepare: Callable[[], None] | None = None,
        context: Context | _Capture | None = None,
    ) -> SerialDrain:
        """A drain whose passes run on the signalling thread; nothing can refuse them.

        Args:
            drain: one pass, as for the constructor.
            lock: the lock guarding the count of signals; pass the owner's
                own lock to share it with ``prepare``.
            prepare: called with ``lock`` held just before each pass, in the
                critical section that claims the pass: the owner reads there
                the state the pass works on, which saves a lock round-trip
                per pass on per-item paths. It must not raise.
            context: the context each pass runs in, as for the constructor;
                by default none: passes run in the signalling thread's
                context. A signal from inside a pass only counts, so the
                context is never entered twice.
        """
        serial = cls(None, drain, _never_refused, context)
        if lock is not None:
            serial._lock = lock
        serial._prepare = prepare
        return serial

    def signal(self) -> None:
        """Record that there is work; start a task (or run the loop inline) if none is queued or running."""
        # acquire/release rather than `with`: this runs once per item on
        # inline drains. Nothing between them raises (prepare must not).
        lock = self._lock
        lock.acquire()
        self._wip += 1
        if self._wip != 1:
            lock.release()
            return
        if self._execute is not None:
            lock.release()
            self._submit()
            return
        # Inline: this thread raised _wip from 0 and owns the loop until it is
        # 0 again. The loop runs now, nested in whatever called signal(),
        # unless NESTING trampolined calls are under way on this thread: then
        # the outermost of them runs it once it has returned (the trampoline).
        state = _trampolines.state
        depth = state.depth
        if depth >= NESTING:
            lock.release()
            try:
                state.tasks.append(self._resignal)
            except BaseException:  # MemoryError: undo the claim
                self._idle()
                raise
            return
        prepare = self._prepare
        if prepare is not None:
            prepare()
        lock.release()
        state.depth = depth + 1
        drain = self._drain
        missed = 1
        first = True
        try:
            while True:
                context = self.context  # read per pass: an owner may set it after the first
                if context is None:
                    drain(first)
                else:
                    context.run(drain, first)
                first = False
                lock.acquire()
                self._wip -= missed
                missed = self._wip
                if missed == 0:
                    lock.release()
                    break
                if prepare is not None:
                    prepare()
                lock.release()
        except BaseException as error:
            # The drain raised (or a RecursionError came before it ran): the
            # drain is idle, never frozen at _wip > 0, and the bottom (depth
            # 0) still runs what was handed down to it.
            state.depth = depth
            self._idle()
            if not depth and state.tasks:
                _run_handed_down(state, error)
            raise
        state.depth = depth
        if not depth and state.tasks:
            _run_handed_down(state, None)

    def _resignal(self) -> None:
        """Handed down by :meth:`signal`: give up the claim and signal again, from the bottom of the stack.

        The signals counted meanwhile need no replay: the loop this starts
        (or one another thread started in between) runs a pass after them.
        """
        self._idle()
        self.signal()

    def _idle(self) -> None:
        """Leave an inline drain unclaimed (its loop raised, or was handed down): the next ``signal()`` starts one."""
        with self._lock:
            self._wip = 0

    def _submit(self) -> None:
        # Caller owns the drain (it raised _wip from 0, or it is the task).
        local = _local
        depth = getattr(local, "submits", 0)
        local.submits = depth + 1
        try:
            self._execute(self._run)  # type: ignore[misc]  # not None: inline drains never submit
        except BaseException as exc:
            if getattr(local, "raised", None) is exc:
                # A synchronous executor ran the task here and the drain
                # raised: not a refusal, the exception goes on up this thread.
                raise
            # The executor refused: the owner ends the stream. No pass runs
            # now or later, so the context is free.
            context = self.context
            if context is None:
                self._on_reject(exc)
            else:
                context.run(self._on_reject, exc)
        finally:
            local.submits = depth
            if not depth:
                local.raised = None

    def _run(self) -> None:
        running = _running_here()
        if self in running:
            # A synchronous executor ran the re-submitted task inside
            # _submit(): let the outer run go on instead of nesting deeper.
            self._rerun = True
            return
        running.add(self)
        try:
            self._loop()
        finally:
            running.discard(self)

    def _loop(self) -> None:
        missed = 1
        first = True
        while True:
            context = self.context
            try:
                more = self._drain(first) if context is None else context.run(self._drain, first)
            except BaseException as exc:
                self._raised(exc)
                raise
            if more:
                with self._lock:
                    self._wip = 1
                self._rerun = False
                self._submit()
                if not self._rerun:
                    return  # the task is on the executor now
                missed = 1  # it ran inline: this is the new task
                first = True
                continue
            first = False
            with self._lock:
                self._wip -= missed
                missed = self._wip
                if missed == 0:
                    return

    def _raised(self, exc: BaseException) -> None:
        """Leave the drain idle after it raised ``exc``; the caller re-raises it.

        Signals that came during the failed pass are not replayed: the owner
        has ended what it serves before letting ``exc`` out.
        """
        with self._lock:
            self._wip = 0
        if getattr(_local, "submits", 0):
            _local.raised = exc  # tells the _submit() below on this thread that the task raised


_local = threading.local()


def _never_refused(error: BaseException) -> None:
    raise AssertionError("an inline SerialDrain has no executor to refuse it") from error


def _running_here() -> set[SerialDrain]:
    """The drains whose task runs on this thread (more than one when tasks nest)."""
    running: set[SerialDrain] | None = getattr(_local, "running", None)
    if running is None:
        running = _local.running = set()
    return running


# --- The trampoline ------------------------------------------------------------------
#
# An inline drain's pass calls the next stage (on_next), whose inline drain
# runs its pass inside that call, and so on: each stage adds a few frames,
# and a pipeline of a few hundred stages would exceed the recursion limit.
# So every inline loop (and every operator's subscribe, see
# flowpy.operators._base) goes through the trampoline: a thread runs at most
# NESTING of them nested in one another; a further one is handed down to the
# outermost, the "bottom", which runs it once its own call has returned, at
# the bottom of the stack, as the first of its own nested calls. The stack
# then holds at most NESTING stages whatever the depth of the pipeline.
# Below NESTING nothing changes: a shallow pipeline runs exactly as if there
# were no trampoline.

NESTING = 32
"""Trampolined calls a thread runs nested in one another before it hands the next one down."""


class _Trampoline:
    """One thread's trampoline; touched only by its thread."""

    __slots__ = ("depth", "tasks")

    def __init__(self) -> None:
        self.depth = 0  # trampolined calls under way on this thread's stack
        self.tasks: deque[Callable[[], object]] = deque()  # handed down, run by the bottom in order


class _Trampolines(threading.local):
    """The current thread's :class:`_Trampoline`: one thread-local read per trampolined call, then slots."""

    def __init__(self) -> None:
        self.state = _Trampoline()


_trampolines = _Trampolines()


def trampoline(task: Callable[[], object]) -> None:
    """Run ``task`` now, or once the outermost trampolined call on this thread has returned.

    ``task`` runs now, nested in the caller, unless :data:`NESTING`
    trampolined calls are already under way on this thread: then it is
    queued, and the outermost of them runs it (and everything else queued,
    in order) after its own call, before it returns. What a queued task
    raises propagates from that outermost call, after the other queued
    tasks have run (the later exception chained to the earlier,
    :func:`~flowpy._signals.chain_fatal`).
    """
    state = _trampolines.state
    depth = state.depth
    if depth >= NESTING:
        state.tasks.append(task)
        return
    state.depth = depth + 1
    try:
        task()
    except BaseException as error:
        state.depth = depth
        if not depth and state.tasks:
            _run_handed_down(state, error)
        raise
    state.depth = depth
    if not depth and state.tasks:
        _run_handed_down(state, None)


def defer(task: Callable[[], object]) -> None:
    """Run ``task`` at the bottom of this thread's trampoline, or now if no trampolined call is under way.

    For what cannot be done where the stack is deep: ending a stream whose
    pass ran out of stack (a ``RecursionError``).
    """
    state = _trampolines.state
    if state.depth:
        state.tasks.append(task)
    else:
        trampoline(task)


def _run_handed_down(state: _Trampoline, error: BaseException | None) -> None:
    """At the bottom, once its own call returned or raised ``error``: run what was handed down, in order.

    Each task runs as the first of a new nest. Raises ``error``, or what a
    task raised, chained to it (:func:`~flowpy._signals.chain_fatal`).
    """
    tasks = state.tasks
    state.depth = 1
    try:
        while tasks:
            task = tasks.popleft()
            try:
                task()
            except BaseException as exc:
                error = chain_fatal(error, exc)
    finally:
        state.depth = 0
    if error is not None:
        raise error
