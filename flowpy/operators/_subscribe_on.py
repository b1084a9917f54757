"""``subscribe_on``: subscribe, and request, on an executor.

A synchronous source does its work inside ``subscribe`` and ``request``;
``subscribe_on`` moves those calls, in order, to an executor, so the source
produces on that executor's thread instead of the subscriber's.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import Generic, TypeVar

from flowpy._serial import DEFAULT, Default, SerialDrain, resolve_execute
from flowpy.executors import Executor, Task
from flowpy.flow import Publisher, Subscriber, Subscription
from flowpy.operators._base import reject_subscriber, require_publisher, require_subscriber

__all__ = ["SerialExecutor", "subscribe_on"]

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)


class SerialExecutor:
    """Runs tasks one at a time, in the order given, on an underlying executor.

    At most one task of this serial executor is queued on, or running on, the
    underlying executor; it runs every task queued meanwhile.
    """

    __slots__ = ("_serial", "_tasks")

    def __init__(self, execute: Callable[[Task], object], on_reject: Callable[[BaseException], None]) -> None:
        # on_reject runs on the refused thread; no task of ours runs after it.
        self._serial = SerialDrain(execute, self._drain, on_reject)
        self._tasks: deque[Task] = deque()

    def execute(self, task: Task) -> None:
        """Queue ``task`` to run after the tasks queued before it."""
        self._tasks.append(task)
        self._serial.signal()

    def _drain(self, first: bool) -> bool:
        tasks = self._tasks
        while tasks:
            tasks.popleft()()
        return False


class _SubscribeOn(Subscriber[T], Subscription, Generic[T]):
    """Forwards signals down and moves ``request`` to the serial executor."""

    __slots__ = (
        "_downstream",
        "_lock",
        "_pending",
        "_serial",
        "_signalling",
        "_source",
        "_terminated",
        "_upstream",
    )

    def __init__(self, downstream: Subscriber[T], source: Publisher[T], execute: Callable[[Task], object]) -> None:
        self._downstream = downstream
        self._source = source
        self._serial = SerialExecutor(execute, self._rejected)
        self._upstream: Subscription | None = None
        # --- Guarded by self._lock: serialises the executor's refusal with the
        # upstream's signals, so the downstream never gets two at once (rule 1.3).
        self._lock = threading.Lock()
        self._signalling = False  # a thread is inside a downstream method
        self._pending: BaseException | None = None  # a refusal seen while one was
        self._terminated = False  # a terminal signal was passed on

    def start(self) -> None:
        """Subscribe to the source on the executor."""
        self._serial.execute(self._subscribe)

    def _subscribe(self) -> None:
        self._source.subscribe(self)

    # --- Upstream side --------------------------------------------------

    def _enter(self) -> bool:
        with self._lock:
            if self._terminated:
                return False
            self._signalling = True
            return True

    def _leave(self) -> None:
        with self._lock:
            self._signalling = False
            error, self._pending = self._pending, None
            if error is None or self._terminated:
                return
            self._terminated = True
        self._downstream.on_error(error)

    def on_subscribe(self, subscription: Subscription) -> None:
        if subscription is None:
            raise TypeError("subscription must not be None (rule 2.13)")
        if self._upstream is not None:
            subscription.cancel()  # rule 2.5
            return
        self._upstream = subscription
        if self._enter():
            try:
                self._downstream.on_subscribe(self)
            finally:
                self._leave()

    def on_next(self, item: T) -> None:
        if item is None:
            raise TypeError("on_next item must not be None (rule 2.13)")
        if self._enter():
            try:
                self._downstream.on_next(item)
            finally:
                self._leave()

    def on_error(self, error: BaseException) -> None:
        if error is None:
            raise TypeError("on_error error must not be None (rule 2.13)")
        with self._lock:
            if self._terminated:
                return
            self._terminated = True
        self._downstream.on_error(error)

    def on_complete(self) -> None:
        with self._lock:
            if self._terminated:
                return
            self._terminated = True
        self._downstream.on_complete()

    def _rejected(self, error: BaseException) -> None:
        if self._upstream is not None:
            self._upstream.cancel()
        with self._lock:
            if self._terminated:
                return
            if self._signalling:
                self._pending = error  # the signalling thread passes it on when it leaves
                return
            self._terminated = True
        if self._upstream is None:
            reject_subscriber(self._downstream, error)
        else:
            self._downstream.on_error(error)

    # --- Downstream side ------------------------------------------------

    def request(self, n: int) -> None:
        """Pass ``request(n)`` to the source on the executor, after the calls before it.

        An invalid ``n`` is passed on as is; the source signals the error (rule 3.9).
        """
        upstream = self._upstream
        if upstream is not None:
            self._serial.execute(lambda: upstream.request(n))

    def cancel(self) -> None:
        """Cancel the source at once, on the calling thread (rule 3.5)."""
        if self._upstream is not None:
            self._upstream.cancel()


class _SubscribeOnPublisher(Publisher[T_co]):
    __slots__ = ("_execute", "_source")

    def __init__(self, source: Publisher[T_co], execute: Callable[[Task], object]) -> None:
        self._source = source
        self._execute = execute

    def subscribe(self, subscriber: Subscriber[T_co]) -> None:
        require_subscriber(subscriber)
        _SubscribeOn(subscriber, self._source, self._execute).start()


def subscribe_on(source: Publisher[T], executor: Executor | Default = DEFAULT) -> Publisher[T]:
    """Call ``source.subscribe`` and every ``request`` on ``executor``, one at a time, in order::

        source:  --1--2--3--|     (produced inside request(), now on the pool)
        subscribe_on(pool)
        result:  --1--2--3--|

    Demand: passed through unchanged. ``cancel`` goes to the source at once.
    If the executor refuses a task, the source is cancelled and the
    subscriber gets the executor's exception through ``on_error``.

    Raises:
        TypeError: if ``executor`` is ``None`` or not an executor.
    """
    require_publisher(source, "source")
    return _SubscribeOnPublisher(source, resolve_execute(executor))
