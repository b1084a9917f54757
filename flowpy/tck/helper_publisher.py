"""AsyncIterablePublisher: the asynchronous publisher the subscriber verifications feed from.

Port of the Reactive Streams examples' ``AsyncIterablePublisher``: a cold,
unicast publisher over an iterable, whose every signal runs on an executor.
Each subscriber gets its own iterator (rule 1.11).

Protocol:   rules 1.1-1.9 and 3.1-3.17. ``request`` and ``cancel`` only
            enqueue a signal, so they never call the subscriber (recursion
            depth 0, rules 3.3-3.5). ``request(n <= 0)`` ends the stream with
            ``on_error(ValueError)`` citing rule 3.9.
Threading:  a subscription runs at most one task on the executor at a time
            (rule 1.3); it re-schedules itself after ``batch_size`` items so
            that one subscriber does not hog a thread.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Generic, TypeVar

from flowpy import flow
from flowpy._checks import require, require_positive_int, require_subscriber
from flowpy._demand import add_demand, check_request
from flowpy.tck.executor import Executor, as_execute

__all__ = ["AsyncIterablePublisher", "helper_publisher"]

T = TypeVar("T")

_log = logging.getLogger(__name__)

DEFAULT_BATCH_SIZE = 1024

# Signals, queued per subscription. A request is the int itself.
_SUBSCRIBE = "subscribe"
_SEND = "send"
_CANCEL = "cancel"


class AsyncIterablePublisher(flow.Publisher[T]):
    """A publisher of the items of ``iterable``, signalled on ``executor``.

    Args:
        iterable: the items; ``iter(iterable)`` is called once per subscriber,
            on the executor. If it raises, the subscriber gets ``on_subscribe``
            and then ``on_error`` with that exception.
        executor: where the signals run: a ``concurrent.futures.Executor``, an
            object with ``execute(fn)`` or a callable (:mod:`flowpy.tck.executor`).
        batch_size: the most items sent in one executor task.

    Raises:
        TypeError: if ``iterable`` or ``executor`` is ``None``, or ``batch_size`` is not an ``int``.
        ValueError: if ``batch_size < 1``.
    """

    def __init__(self, iterable: Iterable[T], executor: Executor, batch_size: int = DEFAULT_BATCH_SIZE) -> None:
        require(iterable, "iterable")
        self._batch_size = require_positive_int(batch_size, "batch_size")
        self._iterable = iterable
        self._execute = as_execute(executor)

    def subscribe(self, subscriber: flow.Subscriber[T]) -> None:
        """Start a subscription; ``on_subscribe`` follows on the executor.

        Raises:
            TypeError: if ``subscriber`` is ``None`` (rule 1.9).
        """
        require_subscriber(subscriber)
        _IterableSubscription(self, subscriber).signal(_SUBSCRIBE)

    def __repr__(self) -> str:
        return f"AsyncIterablePublisher({self._iterable!r})"


class _NoOpSubscription(flow.Subscription):
    def request(self, n: int) -> None:
        return None

    def cancel(self) -> None:
        return None


class _IterableSubscription(flow.Subscription, Generic[T]):
    # Implementation overview: callers (any thread) append a signal to
    # self._inbound and, if no task is queued or running, queue self._run,
    # both in one step under self._lock. self._scheduled is the "task queued
    # or running" flag; the task processes one signal and, on exit, under the
    # same lock either keeps the flag and queues its successor (signals are
    # pending) or clears it (none are). Invariant at every release of the
    # lock: the flag is clear only if the queue is empty. So at most one task
    # exists, every queued task has a signal to pop, and no wake-up is lost.
    # Everything below "task state" is touched only by the one running task.

    def __init__(self, publisher: AsyncIterablePublisher[T], subscriber: flow.Subscriber[T]) -> None:
        self._publisher = publisher
        self._subscriber: flow.Subscriber[T] | None = subscriber
        # --- Guarded by self._lock ---------------------------------------
        self._lock = threading.Lock()
        self._inbound: deque[object] = deque()  # appended under the lock; popped/cleared by the task
        self._scheduled = False  # a task is queued or running; clear only while self._inbound is empty
        # --- Task state ---------------------------------------------------
        self._cancelled = False  # set once; then every signal is dropped
        self._subscribed = False  # on_subscribe was called
        self._demand = 0  # outstanding requests, saturating at 2**63 - 1
        self._iterator: Iterator[T] | None = None
        self._next: T | None = None  # the item looked ahead, sent next

    def request(self, n: int) -> None:
        self.signal(n)

    def cancel(self) -> None:
        self.signal(_CANCEL)

    def signal(self, signal: object) -> None:
        """Queue ``signal``; start a task unless one is queued or running (that one will serve it).

        The append and the check are one step under the lock: a task that
        lets go of the flag has seen an empty queue, so the task started here
        always finds this signal.
        """
        with self._lock:
            self._inbound.append(signal)
            if self._scheduled:
                return
            self._scheduled = True
        self._start()

    def _start(self) -> None:
        # Caller set self._scheduled: it owns the right to queue the one task.
        try:
            self._publisher._execute(self._run)
        except BaseException as exc:  # rejected: the stream cannot go on (no task runs now)
            if not self._cancelled:
                self._cancelled = True
                subscriber = self._subscriber
                if not self._subscribed and subscriber is not None:
                    self._call(lambda: subscriber.on_subscribe(_NoOpSubscription()))  # rule 1.9: first
                self._terminate(RuntimeError(f"publisher terminated: executor rejected the task: {exc!r}"))
            with self._lock:
                self._inbound.clear()
                self._scheduled = False

    def _run(self) -> None:
        try:
            signal = self._inbound.popleft()  # never empty: a task is queued only for a pending signal
            if not self._cancelled:
                if signal is _SUBSCRIBE:
                    self._do_subscribe()
                elif signal is _SEND:
                    self._do_send()
                elif signal is _CANCEL:
                    self._do_cancel()
                else:
                    self._do_request(signal)
        finally:
            # Hand over or let go in one step under the lock: a signal appended
            # before this check is served by the next task queued here; one
            # appended after it finds self._scheduled clear and queues its own.
            # (Checking outside the lock let two tasks be queued for one signal.)
            with self._lock:
                again = bool(self._inbound)
                if not again:
                    self._scheduled = False
            if again:
                self._start()

    def _do_subscribe(self) -> None:
        subscriber = self._subscriber
        assert subscriber is not None
        self._subscribed = True
        try:
            self._iterator = iter(self._publisher._iterable)
        except BaseException as exc:
            self._cancelled = True
            self._call(lambda: subscriber.on_subscribe(_NoOpSubscription()))
            self._terminate(exc)
            return
        if self._call(lambda: subscriber.on_subscribe(self)):
            self._advance()  # an empty iterable completes at once

    def _do_request(self, n: object) -> None:
        error = check_request(n)
        if error is not None:
            self._terminate(error)
            return
        assert isinstance(n, int)
        self._demand = add_demand(self._demand, n)
        self._do_send()

    def _advance(self) -> bool:
        """Fetch the next item into ``self._next``; complete or fail the stream when there is none.

        Looking one item ahead lets the last item be followed by ``on_complete``
        without further demand, as the Java example does with ``hasNext``.
        """
        assert self._iterator is not None
        try:
            self._next = next(self._iterator)
        except StopIteration:
            subscriber = self._subscriber
            self._do_cancel()
            if subscriber is not None:
                self._call(subscriber.on_complete)
            return False
        except BaseException as exc:
            self._terminate(exc)
            return False
        return True

    def _do_send(self) -> None:
        subscriber = self._subscriber
        assert subscriber is not None
        on_next = subscriber.on_next
        left_in_batch = self._publisher._batch_size
        while True:
            item, self._next = self._next, None
            if not self._call(lambda item=item: on_next(item)):  # type: ignore[misc]
                return
            self._demand -= 1
            left_in_batch -= 1
            if not self._advance():
                return
            if self._cancelled or self._demand <= 0 or left_in_batch <= 0:
                break
        if not self._cancelled and self._demand > 0:
            self.signal(_SEND)

    def _do_cancel(self) -> None:
        # Drops the references to the subscriber and the source (rule 3.13).
        self._cancelled = True
        self._subscriber = None
        self._iterator = None
        self._next = None
        self._inbound.clear()

    def _call(self, fn: Callable[[], None]) -> bool:
        """Run one subscriber method; a raise cancels (rule 2.13). Returns whether it returned."""
        try:
            fn()
        except BaseException:
            _log.exception("a subscriber violated rule 2.13 by raising from a signal method; cancelled")
            self._do_cancel()
            return False
        return True

    def _terminate(self, error: BaseException) -> None:
        subscriber = self._subscriber
        self._do_cancel()
        if subscriber is not None:
            try:
                subscriber.on_error(error)
            except BaseException:
                _log.exception("%r violated rule 2.13 by raising from on_error", subscriber)


def helper_publisher(
    elements: int, executor: Executor, create_element: Callable[[int], T]
) -> AsyncIterablePublisher[T]:
    """Return the TCK's helper publisher of ``elements`` items (infinite above ``2**31 - 1``).

    Item ``i`` is ``create_element(i)``.
    """
    return AsyncIterablePublisher(_Elements(elements, create_element), executor)


class _Elements(Iterable[T]):
    """``create_element(i)`` for ``i`` in ``range(elements)``, or forever above ``2**31 - 1``."""

    def __init__(self, elements: int, create_element: Callable[[int], T]) -> None:
        self._elements = elements
        self._create_element = create_element

    def __iter__(self) -> Iterator[T]:
        ids: Iterable[int] = itertools.count() if self._elements > 2**31 - 1 else range(self._elements)
        return map(self._create_element, ids)

    def __repr__(self) -> str:
        return f"elements(0..{self._elements})"
