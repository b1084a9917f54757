"""Testing pipelines: virtual time and a recording subscriber.

:class:`TestScheduler` is a :class:`~flowpy.schedulers.Scheduler` whose
clock moves only when the test says so (RxJava's ``TestScheduler``,
Reactor's ``VirtualTimeScheduler``): pass it as ``scheduler=`` to the
time-aware sources and operators, and ten minutes of debouncing run in
microseconds, in the same order every time, on the test's thread.

:class:`TestSubscriber` (RxJava's ``TestSubscriber``) records what a
publisher signals, checks the rules a subscriber can see, and asserts on it
with chained methods whose failures say what was seen;
:meth:`flowpy.flowable.Flowable.test` subscribes one. See docs/testing.md.

Both are classes for tests, named as in RxJava; ``__test__ = False`` keeps
pytest from collecting them when a test module imports them.
"""

from __future__ import annotations

import heapq
import reprlib
import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar, Union

from flowpy._checks import check_timeout, require_callable, require_non_negative_int, require_seconds
from flowpy._demand import MAX_DEMAND, add_demand, check_request
from flowpy.executors import Task
from flowpy.flow import Subscriber, Subscription

__all__ = ["ErrorMatcher", "TestScheduler", "TestSubscriber"]

T = TypeVar("T")
S = TypeVar("S", bound="TestSubscriber[Any]")

_NANOS = 1_000_000_000


def _to_nanos(seconds: float) -> int:
    return round(seconds * _NANOS)


class _VirtualTask:
    """The handle of one action of a :class:`TestScheduler`."""

    __slots__ = ("_cancelled", "_count", "_first", "_fn", "_in_heap", "_period", "_scheduler")

    def __init__(self, scheduler: TestScheduler, fn: Task, first: int, period: int | None) -> None:
        # --- Guarded by the scheduler's lock ------------------------------
        self._scheduler = scheduler
        self._fn: Task | None = fn
        self._first = first  # nanoseconds
        self._period = period  # nanoseconds; None: once
        self._count = 0  # runs so far
        self._in_heap = False  # waiting in the heap for its next run
        self._cancelled = False

    @property
    def cancelled(self) -> bool:
        """Whether :meth:`cancel` was called."""
        return self._cancelled

    def cancel(self) -> None:
        """Stop every run that has not started; idempotent."""
        self._scheduler._cancel(self)

    def __repr__(self) -> str:
        return f"<TestScheduler task {'cancelled' if self._cancelled else self._fn!r}>"


def _pending_only(heap: list[tuple[int, int, _VirtualTask]]) -> list[tuple[int, int, _VirtualTask]]:
    """A heap of the entries of ``heap`` still pending, without the cancelled ones."""
    pending = [entry for entry in heap if entry[2]._in_heap]
    heapq.heapify(pending)
    return pending


class TestScheduler:
    """A :class:`~flowpy.schedulers.Scheduler` in virtual time, advanced by the test.

    The clock starts at ``start`` seconds and moves only in
    :meth:`advance_time_by` and :meth:`advance_time_to`, which run every
    action that falls due on the way, in time order, on the calling thread:
    actions due at the same time run in the order they were scheduled, and
    ``now()`` inside an action is its due time. Time is kept in whole
    nanoseconds, so ``advance_time_by(0.1)`` ten times is exactly 1 second.
    The next run of a periodic action counts as scheduled when its previous
    run returns.
    An action scheduled with delay 0 runs at the next advance or
    :meth:`trigger_actions`, never inside :meth:`schedule`.

    If an action raises, the exception propagates out of the advance, with
    the clock at that action's due time and the actions after it still
    pending (a periodic action that raised is not run again). Advancing
    from inside an action is an error; other threads may schedule and cancel
    at any time, and advances from two threads take turns.
    """

    __test__ = False

    def __init__(self, start: float = 0.0) -> None:
        """Raises:
        TypeError: if ``start`` is not a number.
        ValueError: if ``start`` is negative or not finite.
        """
        self._now = _to_nanos(require_seconds(start, "start"))
        self._lock = threading.Lock()  # guards the clock, the heap and the tasks
        self._advancing = threading.RLock()  # held by the thread that runs actions; advances take turns
        self._runner: int | None = None  # the thread running an action, to refuse a nested advance
        # --- Guarded by self._lock ------------------------------------------
        self._heap: list[tuple[int, int, _VirtualTask]] = []
        self._seq = 0
        self._pending = 0  # tasks in the heap that are not cancelled
        self._cancelled = 0  # cancelled tasks still in the heap

    def now(self) -> float:
        """The virtual time, in seconds."""
        return self._now / _NANOS

    @property
    def pending(self) -> int:
        """How many actions are scheduled and neither run (for a one-shot) nor cancelled."""
        return self._pending

    def schedule(self, fn: Task, delay: float = 0.0) -> _VirtualTask:
        """Run ``fn`` once, when the clock reaches ``now() + delay``.

        Raises:
            TypeError: if ``fn`` is not callable or ``delay`` is not a number.
            ValueError: if ``delay`` is negative or not finite.
        """
        require_callable(fn, "fn")
        delay_ns = _to_nanos(require_seconds(delay, "delay"))
        with self._lock:
            task = _VirtualTask(self, fn, self._now + delay_ns, None)
            self._push_locked(task)
        return task

    def schedule_periodic(self, fn: Task, initial_delay: float, period: float) -> _VirtualTask:
        """Run ``fn`` at ``now() + initial_delay + k * period``, k = 0, 1, 2, ... (fixed rate).

        Raises:
            TypeError: if ``fn`` is not callable or a time is not a number.
            ValueError: if ``initial_delay`` is negative, ``period`` is not
                positive, or either is not finite.
        """
        require_callable(fn, "fn")
        first = _to_nanos(require_seconds(initial_delay, "initial_delay"))
        every = _to_nanos(require_seconds(period, "period", positive=True))
        if every == 0:
            raise ValueError(f"period must be at least 1 nanosecond on a TestScheduler, got {period!r}")
        with self._lock:
            task = _VirtualTask(self, fn, self._now + first, every)
            self._push_locked(task)
        return task

    def advance_time_by(self, seconds: float) -> None:
        """Move the clock ``seconds`` forward, running every action due on the way.

        Raises:
            TypeError: if ``seconds`` is not a number.
            ValueError: if ``seconds`` is negative or not finite.
            RuntimeError: if called from inside one of this scheduler's actions.
            BaseException: whatever an action raised.
        """
        delta = _to_nanos(require_seconds(seconds, "seconds"))
        with self._advancing:
            self._check_not_inside("advance_time_by")
            self._run_until(self._now + delta)

    def advance_time_to(self, t: float) -> None:
        """Move the clock to ``t`` seconds, running every action due on the way.

        Raises:
            TypeError: if ``t`` is not a number.
            ValueError: if ``t`` is before :meth:`now` or not finite.
            RuntimeError: if called from inside one of this scheduler's actions.
            BaseException: whatever an action raised.
        """
        target = _to_nanos(require_seconds(t, "t"))
        with self._advancing:
            self._check_not_inside("advance_time_to")
            if target < self._now:
                raise ValueError(f"t must not be before now() ({self.now()!r}), got {t!r}")
            self._run_until(target)

    def trigger_actions(self) -> None:
        """Run the actions due now (and those they schedule for now), without moving the clock.

        Raises:
            RuntimeError: if called from inside one of this scheduler's actions.
            BaseException: whatever an action raised.
        """
        with self._advancing:
            self._check_not_inside("trigger_actions")
            self._run_until(self._now)

    # --- Internals ---------------------------------------------------------------

    def _check_not_inside(self, name: str) -> None:
        if self._runner == threading.get_ident():
            raise RuntimeError(f"{name}() called from inside an action of this TestScheduler; advance from the test")

    def _push_locked(self, task: _VirtualTask) -> None:
        # Caller holds self._lock.
        period = task._period
        due = task._first if period is None else task._first + task._count * period
        self._seq += 1
        heapq.heappush(self._heap, (due, self._seq, task))
        task._in_heap = True
        self._pending += 1

    def _cancel(self, task: _VirtualTask) -> None:
        with self._lock:
            if task._cancelled:
                return
            task._cancelled = True
            task._fn = None
            if task._in_heap:
                task._in_heap = False
                self._pending -= 1
                self._cancelled += 1
                if 2 * self._cancelled > len(self._heap):  # drop them, so cancelled actions cost no memory
                    self._heap = _pending_only(self._heap)
                    self._cancelled = 0

    def _pop_due_locked(self, target: int) -> _VirtualTask | None:
        # Caller holds self._lock. Removes and returns the next action due by
        # target, its clock there; None, the clock at target, when there is none.
        # A method of its own: a loop in a lock's with block could lose the lock
        # to a Ctrl-C on CPython 3.12+ (docs/internals.md, "Loops and locks").
        heap = self._heap
        while heap and not heap[0][2]._in_heap:
            heapq.heappop(heap)
            self._cancelled -= 1
        if not heap or heap[0][0] > target:
            self._now = target
            return None
        due, _, task = heapq.heappop(heap)
        task._in_heap = False
        self._now = due
        self._pending -= 1
        return task

    def _run_until(self, target: int) -> None:
        # Caller holds self._advancing.
        while True:
            with self._lock:
                task = self._pop_due_locked(target)
                if task is None:
                    return
                fn = task._fn
                assert fn is not None  # not cancelled
                task._count += 1
            self._runner = threading.get_ident()
            try:
                fn()
            except BaseException:
                with self._lock:
                    task._fn = None  # a periodic action that raised is not run again
                raise
            finally:
                self._runner = None
            with self._lock:
                if task._period is None or task._cancelled:
                    task._fn = None
                else:
                    self._push_locked(task)

    def __repr__(self) -> str:
        return f"<TestScheduler now={self.now()!r} pending={self._pending}>"


ErrorMatcher = Union[  # noqa: UP007 - a runtime alias on 3.10
    type[BaseException], tuple[type[BaseException], ...], BaseException, Callable[[BaseException], object]
]
"""What :meth:`TestSubscriber.assert_error` accepts: a type (or tuple of types), the error itself, or a predicate."""


class TestSubscriber(Subscriber[T], Generic[T]):
    """A subscriber that records every signal and asserts on them; for tests.

    It requests ``initial_request`` in ``on_subscribe`` (``0``: nothing until
    :meth:`request`; the default ``2**63 - 1`` is unbounded). ``request`` and
    ``cancel`` made before ``on_subscribe`` take effect in it, as in RxJava.

    What it records: :attr:`values`, :attr:`errors`, :attr:`completions`,
    and :attr:`violations`, the rules it saw broken (a signal before
    ``on_subscribe`` or after a terminal one, a second ``on_subscribe``,
    more items than requested, overlapping calls, a ``None`` item or error):
    every assertion fails while a violation is recorded. Assertions return
    the subscriber, so they chain; their messages show what was seen.

    Signals may come from any thread; :meth:`await_done` and
    :meth:`await_count` wait for them (with a virtual-time
    :class:`TestScheduler`, advance the clock instead: nothing happens
    meanwhile).

    Raises:
        TypeError: if ``initial_request`` is not an int.
        ValueError: if ``initial_request`` is negative.
    """

    __test__ = False

    def __init__(self, initial_request: int = MAX_DEMAND) -> None:
        self._initial = require_non_negative_int(initial_request, "initial_request")
        # Notified at every signal, for the waits.
        self._changed = threading.Condition(threading.Lock())
        # --- Guarded by self._changed -------------------------------------------
        self.values: list[T] = []
        """The items received, in order."""
        self.errors: list[BaseException] = []
        """The errors received (more than one is a violation)."""
        self.completions = 0
        """How many times ``on_complete`` was called (more than once is a violation)."""
        self.violations: list[str] = []
        """The rules seen broken, one message each."""
        self._subscription: Subscription | None = None
        self._missed = 0  # valid requests made before on_subscribe
        self._missed_invalid: list[int] = []  # invalid ones, passed on so the publisher signals rule 3.9
        self._requested = 0  # valid demand in all, saturated: more items than this is a rule 1.1 violation
        self._cancelled = False
        self._active: str | None = None  # the signal method under way, to see overlapping calls (rule 1.3)

    # --- Subscriber ----------------------------------------------------------------

    def on_subscribe(self, subscription: Subscription) -> None:
        """Keep ``subscription`` and request ``initial_request`` plus what was requested before; record a second one."""
        with self._changed:
            if subscription is None:
                self._violate("on_subscribe(None) (rule 2.13)")
                return
            if self._subscription is not None:
                self._violate("a second on_subscribe (rule 2.5); it was cancelled")
                second = True
            else:
                second = False
                self._subscription = subscription
                cancelled = self._cancelled
                missed, self._missed = self._missed, 0
                invalid, self._missed_invalid = self._missed_invalid, []
                demand = add_demand(self._initial, missed)
                self._requested = add_demand(self._requested, demand)
            self._changed.notify_all()
        if second:
            subscription.cancel()
            return
        if cancelled:
            subscription.cancel()
            return
        if demand:
            subscription.request(demand)
        for n in invalid:
            subscription.request(n)

    def on_next(self, item: T) -> None:
        """Record ``item``; record a violation if it is ``None``, unasked for, early, late or overlapping."""
        with self._changed:
            entered = self._enter("on_next")
            try:
                if item is None:
                    self._violate("on_next(None) (rule 2.13)")
                    return
                self.values.append(item)
                if len(self.values) > self._requested:
                    self._violate(f"on_next #{len(self.values)} with only {self._requested} requested (rule 1.1)")
                self._changed.notify_all()
            finally:
                if entered:
                    self._active = None

    def on_error(self, error: BaseException) -> None:
        """Record ``error``; record a violation if it is ``None``, early, or after a terminal signal."""
        with self._changed:
            entered = self._enter("on_error")
            try:
                if error is None:
                    self._violate("on_error(None) (rule 2.13)")
                    return
                self.errors.append(error)
                self._changed.notify_all()
            finally:
                if entered:
                    self._active = None

    def on_complete(self) -> None:
        """Record the completion; record a violation if it is early or after a terminal signal."""
        with self._changed:
            entered = self._enter("on_complete")
            try:
                self.completions += 1
                self._changed.notify_all()
            finally:
                if entered:
                    self._active = None

    def _enter(self, name: str) -> bool:
        # Caller holds self._changed. Returns whether this call marked itself active.
        if self._subscription is None:
            self._violate(f"{name} before on_subscribe (rule 1.9)")
        if self.errors or self.completions:
            self._violate(f"{name} after a terminal signal (rule 1.7)")
        if self._active is not None:
            self._violate(f"{name} while {self._active} was under way (rule 1.3)")
            return False
        self._active = name
        return True

    def _violate(self, message: str) -> None:
        # Caller holds self._changed.
        self.violations.append(message)
        self._changed.notify_all()

    # --- Subscription side ------------------------------------------------------------

    def request(self, n: int) -> TestSubscriber[T]:
        """Request ``n`` more items (before ``on_subscribe``: requested in it); returns this subscriber.

        An invalid ``n`` is passed on as is, so the publisher signals the rule 3.9 error.
        """
        with self._changed:
            subscription = self._subscription
            valid = check_request(n) is None
            if valid:
                self._requested = add_demand(self._requested, n)
            if subscription is None:
                if valid:
                    self._missed = add_demand(self._missed, n)
                else:
                    self._missed_invalid.append(n)
                return self
        subscription.request(n)
        return self

    def cancel(self) -> TestSubscriber[T]:
        """Cancel the subscription (before ``on_subscribe``: cancel it there); returns this subscriber."""
        with self._changed:
            self._cancelled = True
            subscription = self._subscription
        if subscription is not None:
            subscription.cancel()
        return self

    @property
    def is_cancelled(self) -> bool:
        """Whether :meth:`cancel` was called."""
        return self._cancelled

    @property
    def is_terminated(self) -> bool:
        """Whether ``on_error`` or ``on_complete`` was received."""
        return bool(self.errors or self.completions)

    # --- Waiting -----------------------------------------------------------------

    def await_done(self: S, timeout: float) -> S:
        """Wait up to ``timeout`` seconds for ``on_error`` or ``on_complete``; returns this subscriber.

        A ``timeout`` beyond ``threading.TIMEOUT_MAX`` (``inf`` included) waits that long.

        Raises:
            AssertionError: if none came in time; the subscription is then cancelled.
            TypeError: if ``timeout`` is not a number.
            ValueError: if ``timeout`` is negative or NaN.
        """
        seconds = check_timeout(timeout, none_allowed=False)
        with self._changed:
            done = self._changed.wait_for(lambda: self.errors or self.completions, seconds)
        if not done:
            self.cancel()
            self._fail(f"no terminal signal within {seconds:g} s; the subscription was cancelled")
        return self

    def await_count(self: S, n: int, timeout: float) -> S:
        """Wait up to ``timeout`` seconds until at least ``n`` items arrived; returns this subscriber.

        A ``timeout`` beyond ``threading.TIMEOUT_MAX`` (``inf`` included) waits that long.

        Raises:
            AssertionError: if they did not arrive in time, or the stream ended with fewer.
            TypeError: if ``n`` is not an int or ``timeout`` is not a number.
            ValueError: if ``n`` is negative, or ``timeout`` is negative or NaN.
        """
        count = require_non_negative_int(n, "n")
        seconds = check_timeout(timeout, none_allowed=False)
        with self._changed:
            arrived = self._changed.wait_for(
                lambda: len(self.values) >= count or self.errors or self.completions, seconds
            )
            enough = len(self.values) >= count
        if not enough:
            why = "the stream ended first" if arrived else f"none came within {seconds:g} s"
            self._fail(f"expected at least {count} values; {why}")
        return self

    # --- Assertions -------------------------------------------------------------

    def assert_subscribed(self: S) -> S:
        """Assert that ``on_subscribe`` was called."""
        self._check()
        if self._subscription is None:
            self._fail("on_subscribe was not called")
        return self

    def assert_values(self: S, *items: object) -> S:
        """Assert that exactly ``items`` were received, in order (compared with ``==``)."""
        self._check()
        expected = list(items)
        values = list(self.values)
        if values != expected:
            self._fail(f"expected values {_short(expected)}{_first_difference(values, expected)}")
        return self

    def assert_value_count(self: S, n: int) -> S:
        """Assert that exactly ``n`` items were received."""
        self._check()
        if len(self.values) != n:
            self._fail(f"expected {n} values, got {len(self.values)}")
        return self

    def assert_no_values(self: S) -> S:
        """Assert that no item was received."""
        return self.assert_value_count(0)

    def assert_complete(self: S) -> S:
        """Assert that ``on_complete`` was received, once."""
        self._check()
        if self.completions != 1:
            self._fail("expected completion" if not self.completions else "completed more than once")
        return self

    def assert_not_complete(self: S) -> S:
        """Assert that ``on_complete`` was not received."""
        self._check()
        if self.completions:
            self._fail("expected no completion")
        return self

    def assert_no_errors(self: S) -> S:
        """Assert that ``on_error`` was not received."""
        self._check()
        if self.errors:
            self._fail("expected no error")
        return self

    def assert_error(self: S, expected: ErrorMatcher) -> S:
        """Assert that exactly one error was received and that it matches ``expected``.

        ``expected`` is an exception type or a tuple of them (``isinstance``),
        the exception itself (``is``), or a predicate called with the error.
        """
        self._check()
        if len(self.errors) != 1:
            self._fail("expected an error" if not self.errors else "expected one error, got several")
        error = self.errors[0]
        if isinstance(expected, type) or (isinstance(expected, tuple) and expected):
            matched = isinstance(error, expected)
            wanted = f"an error of type {_type_names(expected)}"
        elif isinstance(expected, BaseException):
            matched = error is expected
            wanted = f"the error {expected!r}"
        elif callable(expected):
            matched = bool(expected(error))
            wanted = f"an error for which {expected!r} is true"
        else:
            raise TypeError(f"expected must be an exception type, an exception or a predicate, got {expected!r}")
        if not matched:
            self._fail(f"expected {wanted}")
        return self

    def assert_result(self: S, *items: object) -> S:
        """Assert that exactly ``items`` were received, then ``on_complete``, and no error."""
        return self.assert_subscribed().assert_values(*items).assert_no_errors().assert_complete()

    def assert_failure(self: S, expected: ErrorMatcher, *items: object) -> S:
        """Assert that exactly ``items`` were received, then one error matching ``expected``, and no completion."""
        return self.assert_subscribed().assert_values(*items).assert_error(expected).assert_not_complete()

    # --- Failure messages -------------------------------------------------------

    def _check(self) -> None:
        if self.violations:
            self._fail(f"the publisher broke the protocol: {'; '.join(self.violations)}")

    def _fail(self, message: str) -> None:
        raise AssertionError(f"{message} ({self._seen()})")

    def _seen(self) -> str:
        with self._changed:
            values = list(self.values)
            errors = list(self.errors)
            completions = self.completions
            subscribed = self._subscription is not None
        parts = [f"values: {_short(values)}", f"errors: {_short(errors)}", f"completions: {completions}"]
        if not subscribed:
            parts.append("not subscribed")
        if self._cancelled:
            parts.append("cancelled")
        return ", ".join(parts)

    def __repr__(self) -> str:
        return f"<TestSubscriber {self._seen()}>"


_repr = reprlib.Repr()
_repr.maxlist = 20
_repr.maxother = 80


def _short(items: list[Any]) -> str:
    return _repr.repr(items)


def _first_difference(values: list[Any], expected: list[Any]) -> str:
    for index, (got, wanted) in enumerate(zip(values, expected, strict=False)):
        if got != wanted:
            return f"; first difference at index {index}: {got!r} != {wanted!r}"
    if len(values) < len(expected):
        return f"; {len(expected) - len(values)} missing from index {len(values)}"
    return f"; {len(values) - len(expected)} more from index {len(expected)}"


def _type_names(expected: type[BaseException] | tuple[type[BaseException], ...]) -> str:
    if isinstance(expected, tuple):
        return " or ".join(t.__name__ for t in expected)
    return expected.__name__
