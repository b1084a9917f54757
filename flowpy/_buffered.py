"""The per-subscriber buffered subscription behind :class:`flowpy.SubmissionPublisher`."""

from __future__ import annotations

import contextlib
import functools
import sys
import sysconfig
import threading
from collections import deque
from collections.abc import Callable
from contextlib import AbstractContextManager
from contextvars import Context
from threading import get_ident
from typing import Final, Generic, TypeVar, cast

from flowpy._demand import MAX_DEMAND, check_request
from flowpy._signals import report
from flowpy.executors import Task
from flowpy.flow import Subscriber, Subscription

__all__ = [
    "ALERT",
    "ALERTED",
    "CLOSED",
    "COMPLETE",
    "CTL_BITS",
    "FREE_THREADED",
    "NOT_RUNNING",
    "OPENED",
    "PENDING",
    "QUEUED",
    "RUNNING",
    "STOP",
    "WAITING",
    "BufferedSubscription",
    "Handler",
]

T = TypeVar("T")

Handler = Callable[[Subscriber[T], BaseException], object]
"""Called as ``handler(subscriber, exception)`` when ``on_next`` raises."""

# Implementation overview
# -----------------------
# One BufferedSubscription links the publisher to one subscriber. Producers
# (serialised by the publisher's lock, so there is one at a time) append to a
# deque; one consumer task at a time pops from it and calls the subscriber.
# Only the consumer pops, so a length the consumer has read can only grow.
#
# The subscription's state is one int, _ctl, of the bits below (as the JDK's
# BufferedSubscription keeps its state in one ctl word); "set X" and "clear
# X" mean that bit of _ctl. Every write of _ctl is under self._lock: an
# update such as ``self._ctl |= STOP`` reads, then stores, and with no lock
# around it a concurrent update between the two would be lost, with the GIL
# as without it. A racy read is one load of _ctl, so it gives all the bits
# as one store left them. An interrupt may be raised as a section ends (the
# lock's __exit__ is a call), so a bit that records that a subscriber method
# was called (OPENED, and COMPLETE's clear) is written after that call, in a
# ``finally``, never in a section before it.
#
# With the GIL, the hot paths take no lock per item. They rely on plain
# attribute loads and stores (and deque operations) being sequentially
# consistent, which the GIL gives: one thread runs at a time, and a switch
# orders everything before it. Each racy read is paired with a write on the
# other side in "store, then load" order, so that at least one side sees the
# other (Dekker):
#
#   producer:  append(item); load RUNNING           consumer exit:  store without RUNNING; load len(buffer)
#   producer:  store WAITING|ALERT; load len(buffer) consumer:      popleft(); load ALERT
#
# (the consumer's exit and the producer's WAITING|ALERT store are in
# self._lock sections, which order them against every other write of _ctl,
# but not against the other side's lock-free append and popleft). A consumer
# that sees ALERT looks at STOP and WAITING, and clears ALERT, in one
# self._lock section: a STOP, set with ALERT in one section, is never lost.
#
# A consumer task leaves only through the exit handshake, so no wake-up is lost
# (the JDK's JDK-8187947). A task is PENDING from the executor call until a
# thread claims it; a producer blocked on a full buffer claims a pending task
# and runs it itself, so a blocked producer never starves the consumer it
# waits for, whatever the executor (the JDK's helpAsyncBlocker).
#
# On a free-threaded build (FREE_THREADED) nothing makes those pairs
# sequentially consistent: Python promises no order between accesses to
# different objects made without a common lock. There, each pair has its
# lock-side under self._lock, which orders it by mutual exclusion:
#
#   - offer and extend append and load RUNNING and demand in one
#     self._lock section (the variants under "Producer side"), which the
#     exit handshake's section either precedes or follows;
#   - wait_for_space stores WAITING|ALERT and looks for space in one
#     section; the consumer ends every batch with a section that loads
#     WAITING (and whose end it goes on from, seeing STOP), so a wake-up
#     or a stop is at most one batch late; the per-item look at ALERT stays,
#     as a hint that makes them prompt;
#   - every other racy read comes after a section of this thread that any
#     write it needs came before; each says which, next to it.
#
# A racy read of a lone attribute is safe on both builds: CPython never
# tears one (on a free-threaded build, PEP 703's per-object locking and
# atomic reference loads), so it gives a value that was stored.

# --- The bits of BufferedSubscription._ctl (all written under its self._lock) ---
# The compiled twin (flowpy/_cbuffered.c) uses the same names and values.
RUNNING: Final = 0x001
"""A consumer task is pending or running; set forever once closed."""
PENDING: Final = 0x002
"""A task was handed to the executor and no thread has claimed it."""
QUEUED: Final = 0x004
"""A task handed to the executor has not started yet; until it does, a start hands over no new task."""
COMPLETE: Final = 0x008
"""``on_complete`` is due once the buffer is empty."""
STOP: Final = 0x010
"""``on_error`` or a silent cancel is due; buffered items are dropped."""
CLOSED: Final = 0x020
"""Terminal; set before the terminal signal is delivered."""
OPENED: Final = 0x040
"""``on_subscribe`` was delivered (set by the consumer task once the call returned or raised)."""
ALERT: Final = 0x080
"""Look at STOP and WAITING before delivering the next item; set with either, cleared by the consumer."""
WAITING: Final = 0x100
"""A producer waits for space (set and cleared under the publisher's lock too)."""

CTL_BITS: Final[dict[str, int]] = {
    "RUNNING": RUNNING,
    "PENDING": PENDING,
    "QUEUED": QUEUED,
    "COMPLETE": COMPLETE,
    "STOP": STOP,
    "CLOSED": CLOSED,
    "OPENED": OPENED,
    "ALERT": ALERT,
    "WAITING": WAITING,
}
"""Each bit of ``BufferedSubscription._ctl`` by name, as the compiled core names it."""

# The per-item looks at _ctl, as tables indexed by every value of it: a
# tuple index is specialised on CPython 3.11, ``&`` is not (it costs twice
# as much, a few per cent of an item's delivery).
NOT_RUNNING: Final[tuple[bool, ...]] = tuple(not ctl & RUNNING for ctl in range(WAITING << 1))
"""``NOT_RUNNING[ctl] == (not ctl & RUNNING)``: the producer's look after each append."""
ALERTED: Final[tuple[bool, ...]] = tuple(bool(ctl & ALERT) for ctl in range(WAITING << 1))
"""``ALERTED[ctl] == bool(ctl & ALERT)``: the consumer's look at each item."""


FREE_THREADED: Final = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))
"""Whether this interpreter is a free-threaded build, where the GIL may be off (see above)."""

GIL_ON: Final[bool] = getattr(sys, "_is_gil_enabled", lambda: True)()
"""Whether the GIL was on when flowpy was imported (always, on a regular build); the cores' tuning follows it."""

CLAIM_DELAY: Final = 0.0 if GIL_ON else 0.001
"""Seconds a producer blocked on a full buffer leaves a pending task to the executor before it runs it itself.

0 while the GIL is on (as this module is imported): running the task at once
costs no thread switch, and no other thread could run Python meanwhile.
Without the GIL another core can run it: a producer that ran it would
deliver instead of producing, and its other subscribers would run dry.
"""


def _lock_of(condition: threading.Condition) -> AbstractContextManager[object]:
    """The lock ``condition`` was made with (its ``with`` statement runs no Python code)."""
    lock: AbstractContextManager[object] = condition._lock  # type: ignore[attr-defined]
    return lock


class BufferedSubscription(Subscription, Generic[T]):
    """A bounded buffer of items for one subscriber, drained by one task at a time.

    Threading: ``request`` and ``cancel`` may be called from any thread;
    ``offer`` only by the producer holding the publisher's lock. Subscriber
    methods run only in the consumer task, never under ``self._lock``.
    """

    __slots__ = (
        "__weakref__",
        "_buffer",
        "_capacity",
        "_consumer",
        "_context",
        "_ctl",
        "_delivered",
        "_demand",
        "_dropped",
        "_execute",
        "_handler",
        "_lock",
        "_pending_error",
        "_space",
        "_space_lock",
        "_wake_level",
        "subscriber",
    )

    def __init__(
        self,
        subscriber: Subscriber[T],
        execute: Callable[[Task], object],
        capacity: int,
        handler: Handler[T] | None,
        space: threading.Condition,
        context: Context | None = None,
    ) -> None:
        self.subscriber: Subscriber[T] | None = subscriber
        """The subscriber; ``None`` once the subscription closed (rule 3.13)."""
        self._handler = handler
        # The subscriber's copy of the context current at subscribe() (see
        # flowpy._context), or None: every signal and the handler run in it.
        # Entered only by the thread holding the consumer task, and left
        # before that task clears RUNNING, so no two threads ever enter it.
        if context is not None and type(context) is not Context:
            raise TypeError(f"BufferedSubscription context must be a contextvars.Context or None, got {context!r}")
        self._context = context
        # Notified, under the publisher's lock, when a producer waits for space
        # here and the consumer freed a slot, or this subscription closed, or a
        # task became pending that the producer could run.
        self._space = space
        self._space_lock = _lock_of(space)

        # --- Appended to by the producer, popped by the consumer; no lock ---
        self._buffer: deque[T] = deque()
        # Slots the producer may fill; set to 0 when closed, so the producer's
        # capacity check also notices closure.
        self._capacity = capacity

        # --- Written under self._lock only; _ctl and _demand are also read racily ---
        self._lock = threading.Lock()
        self._demand = 0  # outstanding request(n) total; MAX_DEMAND = unbounded
        # The state: a set of the bits RUNNING ... WAITING (module level, each
        # with its meaning). Every write is under self._lock, including those
        # of the bits that one side alone sets or clears: OPENED (the
        # consumer), ALERT (set by signals and a waiting producer, cleared by
        # the consumer), WAITING (set and cleared under the publisher's lock,
        # then self._lock). Racy reads load it once (see the overview).
        # QUEUED keeps one task at most in the executor: a producer that ran
        # the work inline (claiming it while blocked) leaves one stale task
        # behind, not one per batch. Without the GIL, ALERT is a hint: the
        # section ending each batch (_end_batch) loads WAITING, and STOP
        # after it (see the overview).
        self._ctl = 0
        self._pending_error: BaseException | None = None  # the error for STOP's on_error, if any
        # While WAITING: a pop that leaves at most this many items wakes the
        # waiting producer; one that leaves more keeps ALERT set, and the end
        # of the batch wakes it whatever is left. Set with WAITING.
        self._wake_level = 0
        self._execute: Callable[[Task], object] | None = execute  # None once closed

        # --- Written by the thread holding the consumer task; read racily by others ---
        # Ident of the thread holding the task (inside consume()), 0 if none;
        # set under self._lock where it claims the task, cleared where it
        # lets go of it, so a handler can tell whether its thread holds it.
        self._consumer = 0
        # on_next calls that returned; added once per batch (under self._lock
        # with the demand it used up, when that demand is bounded)
        self._delivered = 0

        # --- Producer only (under the publisher's lock), on the drop path ---
        self._dropped = 0  # offers dropped for this subscriber because its buffer was full

    # --- Subscription ---------------------------------------------------

    def request(self, n: int) -> None:
        """Add ``n`` to the demand and start delivery (rules 3.8, 3.9, 3.17).

        Never raises (rule 3.16): invalid ``n`` and a refused task end the
        subscription with ``on_error``.
        """
        if type(n) is int and n > 0:
            try:
                with self._lock:
                    ctl = self._ctl
                    if ctl & CLOSED:
                        return
                    demand = self._demand + n
                    self._demand = MAX_DEMAND if demand >= MAX_DEMAND else demand
                    if ctl & RUNNING:
                        return
                    self._ctl = ctl | RUNNING | PENDING
                self._start_signal()
            except BaseException:
                self._start_signal()  # interrupted between marking the task and handing it over
                raise
        else:
            error = check_request(n)
            if error is not None:
                self.signal_error(error)
            else:  # an int subclass other than bool
                self.request(int(n))

    def cancel(self) -> None:
        """Stop delivery and drop buffered items; idempotent (rules 3.5, 3.7, 3.12).

        An error already due (say, from ``request(0)``) is still delivered.
        """
        self.signal_error(None)

    # --- Signals from the publisher ---------------------------------------

    def signal_subscribe(self) -> None:
        """Start the task that delivers ``on_subscribe``.

        Raises:
            Exception: what the executor raised; the subscription is then closed
                without any signal, as in the JDK.
            BaseException: an interrupt; the subscription then ends without
                any signal if its task had not started, else with
                ``on_error`` of that exception after ``on_subscribe``.
        """
        try:
            with self._lock:
                self._ctl |= RUNNING | PENDING | QUEUED
            execute = self._execute
            assert execute is not None, "signal_subscribe is the first signal"
            execute(self._run)
        except BaseException as exc:
            if self.claim_pending():  # no task started: nothing was signalled
                self._close_silently()
            else:
                self.signal_error(exc)
            raise

    def signal_complete(self) -> None:
        """Deliver ``on_complete`` after the buffered items, as far as demand allows."""
        try:
            with self._lock:
                ctl = self._ctl
                if ctl & (CLOSED | COMPLETE):
                    return
                if ctl & RUNNING:
                    self._ctl = ctl | COMPLETE
                    return
                self._ctl = ctl | COMPLETE | RUNNING | PENDING
            self._start_signal()
        except BaseException:
            self._start_signal()  # interrupted between marking the task and handing it over
            raise

    def signal_error(self, error: BaseException | None, /) -> None:
        """Drop buffered items and deliver ``on_error(error)``, or close silently if ``None``."""
        try:
            with self._lock:
                ctl = self._ctl
                if ctl & CLOSED:
                    return
                if error is not None:
                    self._pending_error = error
                if ctl & RUNNING:
                    self._ctl = ctl | STOP | ALERT
                    return
                self._ctl = ctl | STOP | ALERT | RUNNING | PENDING
            self._start_signal()
        except BaseException:
            self._start_signal()  # interrupted between marking the task and handing it over
            raise

    # --- Producer side (caller holds the publisher's lock) ------------------
    # offer and extend append, then load RUNNING (see the overview): with
    # the GIL as they go (through NOT_RUNNING), on a free-threaded build in
    # one self._lock section.

    if not FREE_THREADED:

        def offer(self, item: T, /) -> int:
            """Buffer ``item``; return the items now buffered, 0 if full, -1 if closed."""
            buffer = self._buffer
            n = len(buffer)
            if n >= self._capacity:
                return -1 if self._ctl & CLOSED else 0
            buffer.append(item)
            if NOT_RUNNING[self._ctl] and self._demand:
                self._start_on_offer()
            return n + 1

        def extend(self, items: list[T], /) -> int:
            """Buffer all ``items`` (none is ``None``), for which the caller saw room in :meth:`free_slots`.

            Returns the items now buffered; 0 if they do not all fit and -1 if
            closed, and then nothing was buffered.
            """
            buffer = self._buffer
            n = len(buffer) + len(items)
            if n > self._capacity:
                return -1 if self._ctl & CLOSED else 0
            buffer.extend(items)
            if NOT_RUNNING[self._ctl] and self._demand:
                self._start_on_offer()
            return n

    else:

        def offer(self, item: T, /) -> int:
            """Buffer ``item``; return the items now buffered, 0 if full, -1 if closed."""
            return self._append(item, None)

        def extend(self, items: list[T], /) -> int:
            """Buffer all ``items`` (none is ``None``), for which the caller saw room in :meth:`free_slots`.

            Returns the items now buffered; 0 if they do not all fit and -1 if
            closed, and then nothing was buffered.
            """
            return self._append(None, items)

        def _append(self, item: T | None, items: list[T] | None) -> int:
            """``offer(item)``, or ``extend(items)`` if ``items`` is not ``None``, appending in one section."""
            buffer = self._buffer
            with self._lock:
                n = len(buffer) + (1 if items is None else len(items))
                if n > self._capacity:
                    return -1 if self._ctl & CLOSED else 0
                if items is None:
                    buffer.append(cast(T, item))
                else:
                    buffer.extend(items)
                start = not self._ctl & RUNNING and self._demand
            if start:
                self._start_on_offer()
            return n

    def free_slots(self) -> int:
        """How many items :meth:`offer` would take now; 0 if full or closed."""
        free = self._capacity - len(self._buffer)
        return free if free > 0 else 0

    def has_space(self) -> bool:
        """Whether ``offer`` would not return 0: there is room, or it is closed."""
        return len(self._buffer) < self._capacity or bool(self._ctl & CLOSED)

    def claim_pending(self) -> bool:
        """Take over a task that the executor has not started; then run :meth:`consume`.

        This thread then holds the task (:meth:`delivering_here` is true).
        """
        me = get_ident()
        with self._lock:
            ctl = self._ctl
            if not ctl & PENDING:
                return False
            self._ctl = ctl & ~PENDING
            self._consumer = me
            return True

    def wait_for_space(self, timeout: float | None, /) -> bool:
        """Block until there is space, or closure, or ``timeout`` seconds pass.

        Returns whether the wait ended before the timeout. The caller holds
        the publisher's lock, which ``self._space`` is bound to, and re-checks
        everything after a return. A task that the executor has not started
        is run here, at once with ``CLAIM_DELAY`` 0, else if the executor has
        not started it within ``CLAIM_DELAY`` seconds (the JDK's
        helpAsyncBlocker). Without a timeout the producer is woken once the
        buffer is down to half its capacity or the consumer's batch ends;
        with one, by the first freed slot.
        """
        if not CLAIM_DELAY and self._ctl & PENDING and self._claim_and_deliver(False, None):  # racy: see below
            return True
        level = self._capacity // 2 if timeout is None else self._capacity - 1
        with self._lock:  # store, then load (see the overview): the consumer pops with no lock
            ctl = self._ctl
            if not ctl & WAITING or level > self._wake_level:  # with two waiters, the earlier wake-up wins
                self._wake_level = level
            self._ctl = ctl | WAITING | ALERT
            ready = self.has_space() or (ctl & PENDING and not CLAIM_DELAY)
            if ready:
                self._ctl = ctl & ~WAITING
        if ready:
            return True
        if not ctl & PENDING:
            return self._space.wait(timeout)
        woken = self._space.wait(CLAIM_DELAY if timeout is None or timeout > CLAIM_DELAY else timeout)
        if self._ctl & PENDING and self._claim_and_deliver(False, None):  # racy: it claims under self._lock
            return True
        return woken

    def stop_waiting(self) -> None:
        """Forget that a producer waits for space; the publisher's lock is held."""
        with self._lock:
            self._ctl &= ~WAITING

    def lag(self) -> int:
        """Items buffered and not yet taken (a racy estimate, for monitoring)."""
        return len(self._buffer)

    def estimate_demand(self) -> int:
        """Outstanding demand less buffered items (a racy estimate, for monitoring)."""
        return self._demand - len(self._buffer)

    def count_drop(self) -> None:
        """Count one item dropped for this subscriber; the caller holds the publisher's lock."""
        self._dropped += 1

    @property
    def delivered(self) -> int:
        """``on_next`` calls that returned normally, counted once per drained batch."""
        return self._delivered

    @property
    def dropped(self) -> int:
        """Items dropped for this subscriber because its buffer was full (counted by :meth:`count_drop`)."""
        return self._dropped

    def readings(self) -> tuple[int, int, int, int]:
        """``(buffered, demand, delivered, dropped)``, read together under ``self._lock``, for monitoring."""
        with self._lock:
            return len(self._buffer), self._demand, self._delivered, self._dropped

    def has_task(self) -> bool:
        """Whether a consumer task is queued or running (a racy reading, for monitoring)."""
        return self._ctl & (RUNNING | CLOSED) == RUNNING

    @property
    def is_closed(self) -> bool:
        """Whether a terminal signal was delivered or the subscription was cancelled."""
        return bool(self._ctl & CLOSED)

    # --- Starting the consumer task ---------------------------------------

    def _start_on_offer(self) -> None:
        try:
            with self._lock:
                ctl = self._ctl
                if ctl & (RUNNING | CLOSED) or not self._demand:
                    return
                self._ctl = ctl | RUNNING | PENDING
            self._start_signal()
        except BaseException:
            self._start_signal()  # interrupted between marking the task and handing it over
            raise

    def resume(self) -> None:
        """Start the consumer task if items and demand wait for it and none is under way.

        For a producer whose :meth:`offer` or :meth:`extend` an interrupt cut
        short between buffering and starting the task: it calls this from its
        ``except BaseException``, so the items go out now, not at the next
        signal.
        """
        # Racy, after this thread's offer (whose section, without the GIL,
        # loaded RUNNING and demand): _start_on_offer looks again under self._lock.
        if self._buffer and not self._ctl & RUNNING and self._demand:
            self._start_on_offer()

    def _start_signal(self) -> None:
        """Hand the executor a task for the pending work; never raises an ``Exception`` (rules 3.15, 3.16).

        Does nothing if no work is pending (a thread claimed it) or the
        subscription closed, and hands over no second task while one has not
        started yet (it will claim the work). So running it again finishes a
        hand-off that an interrupt cut short: each caller does so from its
        ``except BaseException``. What the executor raises goes to
        :meth:`_start_failed`.
        """
        try:
            self._hand_over()
        except BaseException as exc:
            self._start_failed(exc)
            if not isinstance(exc, Exception):
                raise

    def _hand_over(self) -> None:
        """The body of :meth:`_start_signal`; raises what the executor (or an interrupt) raises."""
        with self._lock:
            execute = self._execute
            ctl = self._ctl
            if execute is None or not ctl & PENDING:
                return
            self._ctl = ctl | QUEUED
        if not ctl & QUEUED:
            execute(self._run)
        # Racy, after the section above: a producer whose wait_for_space
        # came before it is seen; one after it saw PENDING and did not wait.
        if self._ctl & WAITING:
            self._signal_waiter()

    def _start_failed(self, error: BaseException) -> None:
        """Handle ``error``, raised while a task was handed over.

        An ``Exception`` is the executor's refusal: the subscription closes
        and the subscriber gets ``on_error(error)`` on this thread (after
        ``on_subscribe`` if that is due). Anything else (``KeyboardInterrupt``)
        may have come before or after the executor queued the task, so the
        task is handed over once more (a task with nothing left to claim
        ends at once); only if that fails too is it a refusal.
        """
        with self._lock:
            self._ctl &= ~QUEUED
        if not isinstance(error, Exception):
            try:
                self._hand_over()
            except BaseException as again:
                with self._lock:
                    self._ctl &= ~QUEUED
                error = again
            else:
                return
        self._claim_and_deliver(False, error)

    def _claim_and_deliver(self, queued_task: bool, refused: BaseException | None) -> bool:
        """Claim the pending work, if no thread did, and deliver it on this thread; return whether there was any.

        Called by the executor's task (``queued_task``: then no task is
        queued any more), by a producer blocked for space, and after a
        refused hand-off, to deliver ``on_error(refused)``.
        """
        try:
            me = get_ident()
            with self._lock:
                ctl = self._ctl
                if queued_task:
                    ctl &= ~QUEUED
                if not ctl & PENDING:
                    self._ctl = ctl
                    return False
                ctl &= ~PENDING
                if refused is not None and not ctl & STOP:
                    self._pending_error = refused
                    ctl |= STOP
                self._ctl = ctl
                self._consumer = me
            self.consume()
        except BaseException as exc:
            if queued_task and not self.delivering_here():
                # Interrupted before it claimed the work: a new task takes it.
                with self._lock:
                    self._ctl &= ~QUEUED
                self._start_signal()
            else:
                self._abandon(exc)
            raise
        return True

    _run = functools.partialmethod(_claim_and_deliver, True, None)
    """The consumer task, as handed to the executor: ``_claim_and_deliver`` as a task that was queued.

    A partial, not a method calling it: no frame of its own stands between the
    executor's call and the ``try`` that hands the work on if an interrupt
    comes before it was claimed.
    """

    # --- Consumer task ------------------------------------------------------

    def consume(self) -> None:
        """Deliver signals until there is nothing to do; called by the one thread holding the task.

        The signals run in the subscriber's context; the exit handshake runs
        after leaving it, so the next task may enter it as soon as
        RUNNING is clear. Whatever escapes while this thread holds the
        task (a ``BaseException`` from a subscriber method, or an interrupt
        of this code) ends the subscription with ``on_error`` of it, then
        propagates.
        """
        try:
            context = self._context
            if context is None:
                while self._deliver() and not self._exit_handshake():
                    pass
            else:
                deliver = self._deliver
                while context.run(deliver) and not self._exit_handshake():
                    pass
        except BaseException as exc:
            self._abandon(exc)
            raise

    def _exit_handshake(self) -> bool:
        """Clear RUNNING unless there is work, then look again; return whether the task may end."""
        buffer = self._buffer
        with self._lock:
            ctl = self._ctl
            if ctl & STOP or (buffer and self._demand) or (ctl & COMPLETE and not buffer):
                return False  # changed since the delivery pass looked: deliver again
            # Store, then load: with the GIL a producer appends with no lock
            # (see the overview); every other write of _ctl waits for this section.
            self._ctl = ctl & ~RUNNING
            if buffer and self._demand:
                self._ctl = ctl
                return False
            self._consumer = 0
            return True

    def _abandon(self, error: BaseException) -> None:
        """End the task this thread holds, if it holds it, after ``error`` escaped from it.

        An open subscription ends with ``on_error(error)`` (after
        ``on_subscribe``, if that was not delivered yet); a closing that
        ``error`` interrupted is finished (its terminal signal, the release).
        """
        if self._consumer != get_ident():
            return
        if self._ctl & CLOSED:
            self._signal_terminal()
            return
        with self._lock:
            self._pending_error = error
            self._ctl |= STOP
        context = self._context  # on_subscribe first, if due (rule 1.9); then on_error(error)
        if context is None:
            self._deliver()
        else:
            context.run(self._deliver)

    def delivering_here(self) -> bool:
        """Whether this thread holds the consumer task: it is inside :meth:`consume`, and so maybe inside one of the
        subscriber's methods.

        A producer on that thread must not wait for space here: only this
        thread could free it.
        """
        return self._consumer == get_ident()

    def _deliver(self) -> bool:
        """Deliver what is due; return ``True`` if the task may go idle, ``False`` once closed."""
        subscriber = self.subscriber
        if subscriber is None:
            return False
        if not self._ctl & OPENED:
            try:
                try:
                    subscriber.on_subscribe(self)
                finally:
                    # Delivered, whether it returned or raised. Set after the
                    # call, not before: an interrupt as a section ends would
                    # leave OPENED set and on_subscribe undelivered.
                    with self._lock:
                        self._ctl |= OPENED
            except BaseException as exc:
                self._close_on_error(exc, report_failure=True)  # rule 2.13, as every flowpy publisher
                if not isinstance(exc, Exception):
                    raise
                return False
        buffer = self._buffer
        popleft = buffer.popleft
        on_next = None  # looked up at the first item: a subscriber without one fails as a raising on_next does
        lock = self._lock
        alerted = ALERTED  # a local: looked at once per item
        # Racy looks at STOP, _demand, the buffer and COMPLETE: one that is
        # stale leads to the exit handshake, which looks again under self._lock.
        while True:
            if self._ctl & STOP:
                self._close_on_error(None)
                return False
            demand = self._demand
            if demand and buffer:
                n = len(buffer)
                if n > demand:
                    n = demand
                i = 0  # after the loop: the on_next calls that returned
                try:
                    if on_next is None:
                        on_next = subscriber.on_next
                    for i in range(n):  # noqa: B007 - read after the loop
                        item = popleft()
                        if alerted[self._ctl] and self._on_alert():
                            break
                        on_next(item)
                    else:
                        i = n
                except BaseException as exc:
                    self._delivered += i
                    self._on_next_failed(subscriber, exc)
                    if not isinstance(exc, Exception):
                        raise
                    return False
                if FREE_THREADED:
                    self._end_batch(0 if demand == MAX_DEMAND else n, i)
                    continue
                if demand != MAX_DEMAND:
                    with lock:
                        self._demand -= n
                        self._delivered += i
                else:
                    self._delivered += i
                if self._ctl & WAITING:  # the batch's end wakes a producer still waiting (see _on_alert)
                    self._signal_waiter()
                continue
            if self._ctl & COMPLETE and not buffer:
                with lock:
                    if self._ctl & STOP:
                        continue
                    self._close_locked()
                self._signal_terminal()
                return False
            return True  # the exit handshake follows, outside the context

    def _end_batch(self, used: int, delivered: int) -> None:
        """End a batch on a free-threaded build: take ``used`` off the demand and count ``delivered``, then wake a
        producer waiting for space.

        One section, which the consumer ends every batch with: a producer's
        wait_for_space section either comes before it, and its waiting is
        seen here, or after it, and sees the items this batch popped. So no
        wake-up is lost, whatever the per-item look at ALERT saw; and a
        stop set before this section is seen by the next look at STOP.
        """
        with self._lock:
            self._demand -= used
            self._delivered += delivered
            waiting = self._ctl & WAITING
        if waiting:
            self._signal_waiter()

    def _on_alert(self) -> bool:
        """Handle a stop or a waiting producer; return whether to stop delivering.

        One section looks at STOP and WAITING and clears ALERT, so an ALERT
        set with either (in one section too) is never cleared unseen.
        """
        with self._lock:
            ctl = self._ctl
            if ctl & STOP:
                return True  # ALERT stays set: the next look stops too
            if ctl & WAITING and len(self._buffer) > self._wake_level:
                return False  # ALERT stays set: a later pop, or the batch's end, wakes the producer
            self._ctl = ctl & ~ALERT
        if ctl & WAITING:
            self._signal_waiter()
        return False

    def _signal_waiter(self) -> None:
        # Notify first: if an interrupt comes before, WAITING stays set and
        # the next signal (at the latest _release) notifies again. WAITING is
        # cleared under the publisher's lock, as it is set, so a producer
        # cannot wait anew between this notify and the clear; self._lock
        # comes second (the lock order). The publisher's lock is entered
        # directly: threading.Condition's own __exit__ is Python code, where
        # an interrupt would leave it held.
        with self._space_lock:
            self._space.notify_all()
            with self._lock:
                self._ctl &= ~WAITING

    def _on_next_failed(self, subscriber: Subscriber[T], exc: BaseException) -> None:
        handler = self._handler
        if handler is not None:
            try:
                handler(subscriber, exc)
            except Exception:  # the handler's own failure is ignored, as in the JDK
                pass
            except BaseException:
                # KeyboardInterrupt or the like from the handler: the stream still
                # ends with on_error(exc); then the handler's exception goes on.
                with contextlib.suppress(BaseException):
                    self._close_on_error(exc)
                raise
        self._close_on_error(exc)

    # --- Closing ------------------------------------------------------------
    # Closing leaves the terminal signal due in _pending_error (on_error) or
    # COMPLETE (on_complete), neither for a cancel; _signal_terminal then
    # delivers it, so a closing that an interrupt cut short can be finished.

    def _close_locked(self) -> None:
        """Mark closed; the caller holds self._lock."""
        # CLOSED before the capacity: a producer that sees 0 room sees CLOSED.
        self._ctl |= CLOSED | RUNNING | STOP | ALERT
        self._capacity = 0
        self._execute = None

    def _close_on_error(self, error: BaseException | None, *, report_failure: bool = False) -> None:
        """Close, then deliver ``on_error(error)``, or of the pending error if ``None``, or nothing (a cancel).

        ``report_failure``: as :meth:`_signal_terminal`.
        """
        with self._lock:
            if self._ctl & CLOSED:
                return
            if error is not None:
                self._pending_error = error
            self._ctl &= ~COMPLETE
            self._close_locked()
        self._signal_terminal(report_failure)

    def _close_silently(self) -> None:
        with self._lock:
            self._pending_error = None
            self._ctl &= ~COMPLETE
            self._close_locked()
        self._release()

    def _signal_terminal(self, report_failure: bool = False) -> None:
        """Deliver the terminal signal left due by closing, once, then :meth:`_release`; by the task's holder.

        A failing terminal signal is dropped (rule 2.13), as in the JDK, unless
        it is not an ``Exception``. With ``report_failure``, set for the
        ``on_error`` after a raising ``on_subscribe``, a failing ``on_error``
        is reported first (:func:`flowpy._signals.report`), as every flowpy
        publisher reports it.
        """
        subscriber = self.subscriber
        # After the closing section, which this thread (the task's holder)
        # ran: no other thread writes _pending_error or COMPLETE any more.
        error = self._pending_error
        complete = self._ctl & COMPLETE
        try:
            try:
                if subscriber is not None:
                    if error is not None:
                        subscriber.on_error(error)
                    elif complete:
                        subscriber.on_complete()
            finally:
                # Delivered, whether it returned or raised: no longer due.
                # Cleared after the call, not before: an interrupt as the
                # section ends would leave it undelivered and not due.
                self._pending_error = None
                if complete:
                    with self._lock:
                        self._ctl &= ~COMPLETE
        except Exception as failure:  # rule 2.13
            if report_failure:
                report(failure, f"on_error of {subscriber!r} raised (rule 2.13)")
        finally:
            self._release()

    def _release(self) -> None:
        """Drop the subscriber and the buffer (rule 3.13), free a waiting producer, and let go of the task."""
        self.subscriber = None
        # Racy, after the closing section: a producer whose wait_for_space
        # came before it is seen; one after it found the subscription closed.
        if self._ctl & WAITING:
            self._signal_waiter()
        self._buffer.clear()
        self._consumer = 0

    def __repr__(self) -> str:
        state = "closed" if self._ctl & CLOSED else f"demand={self._demand} buffered={len(self._buffer)}"
        return f"<BufferedSubscription {state} subscriber={self.subscriber!r}>"
