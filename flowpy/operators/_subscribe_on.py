"""``subscribe_on``: subscribe, and request, on an executor.

A synchronous source does its work inside ``subscribe`` and ``request``;
``subscribe_on`` moves those calls, in order, to an executor, so the source
produces on that executor's thread instead of the subscriber's.

Threading:  signals pass through on the thread the source uses; ``request``
            calls are queued to the executor and run there one at a time,
            in order; ``cancel`` goes to the source at once.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import partial
from typing import Generic, TypeVar

from flowpy._checks import none_error, require, require_publisher
from flowpy._core.upstream import UpstreamSlot
from flowpy._signals import signal_subscribe
from flowpy.executors import DEFAULT, Default, Executor, SerialExecutor, Task, resolve_execute
from flowpy.flow import Publisher, Subscriber, Subscription
from flowpy.operators._base import HandOff, StagePublisher, reject_subscriber, signal_deep

__all__ = ["SerialExecutor", "subscribe_on"]

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)


class _SubscribeOn(HandOff, Subscriber[T], Subscription, Generic[T]):
    """Forwards signals down and moves ``request`` to the serial executor.

    The hand-off to the downstream and the terminal signals go through the
    trampoline (:class:`~flowpy.operators._base.HandOff`).
    """

    __slots__ = (
        "_downstream",
        "_lock",
        "_refused",
        "_serial",
        "_signalling",
        "_source",
        "_terminated",
        "_upstream",
    )

    def __init__(self, downstream: Subscriber[T], source: Publisher[T], execute: Callable[[Task], object]) -> None:
        super().__init__()
        self._downstream = downstream
        self._source = source
        self._serial = SerialExecutor(execute, self._rejected)
        self._upstream = UpstreamSlot()  # the one source subscription (rules 2.5, 3.6)
        # The executor's refusal must not reach the downstream while the
        # upstream is signalling it (rule 1.3). Each side first writes its own
        # flag, then reads the other's (CPython orders these plain reads and
        # writes): the refusing thread passes the error on only if no signal
        # is under way, and a signalling thread that finds the refusal passes
        # it on when its signal returns. At least one of them sees the other.
        self._signalling = 0  # depth of downstream calls under way; written by the upstream's thread only
        self._refused: BaseException | None = None  # the executor's exception; set once
        # Guarded by self._lock: exactly one terminal signal goes downstream.
        self._lock = threading.Lock()
        self._terminated = False

    def start(self) -> None:
        """Subscribe to the source on the executor."""
        self._serial.execute(self._subscribe)

    def _subscribe(self) -> None:
        self._source.subscribe(self)

    # --- Upstream side --------------------------------------------------

    def _claim_terminal(self) -> bool:
        with self._lock:
            if self._terminated:
                return False
            self._terminated = True
            return True

    def _pass_refusal(self) -> None:
        error = self._refused
        if error is None or not self._claim_terminal():
            return
        if not self._upstream.connected:  # the subscribe task itself was refused
            reject_subscriber(self._downstream, error)
        else:
            self._downstream.on_error(error)

    def on_subscribe(self, subscription: Subscription) -> None:
        """Hand this stage to the downstream as its subscription, through the trampoline.

        A later subscription is cancelled and the first kept (rule 2.5).

        Raises:
            TypeError: if ``subscription`` is ``None`` (rule 2.13).
        """
        if self._upstream.accept(subscription):
            self._hand_off()

    def _subscribe_downstream(self) -> None:
        self._signalling += 1
        try:
            if self._refused is None:
                signal_subscribe(self._downstream, self)  # rule 2.13: cancels and signals on_error
        finally:
            self._signalling -= 1
        if self._refused is not None:
            self._pass_refusal()

    def on_next(self, item: T) -> None:
        """Pass ``item`` on, unless the executor refused a task.

        Raises:
            TypeError: if ``item`` is ``None`` (rule 2.13).
        """
        if item is None:
            raise none_error("item", "2.13")
        self._signalling += 1
        try:
            if self._refused is None and not self._terminated:
                self._downstream.on_next(item)
        finally:
            self._signalling -= 1
        if self._refused is not None:
            self._pass_refusal()

    def on_error(self, error: BaseException) -> None:
        """Pass the source's failure on, once.

        Raises:
            TypeError: if ``error`` is ``None`` (rule 2.13).
        """
        require(error, "error", "2.13")
        self._terminal(partial(self._pass_error, error))

    def on_complete(self) -> None:
        """Pass the source's completion on, once."""
        self._terminal(self._pass_complete)

    def _pass_error(self, error: BaseException) -> None:
        if self._claim_terminal():
            signal_deep(partial(self._downstream.on_error, error))

    def _pass_complete(self) -> None:
        if self._claim_terminal():
            signal_deep(self._downstream.on_complete)

    def _rejected(self, error: BaseException) -> None:
        self._upstream.cancel()
        self._refused = error
        if not self._signalling:
            self._pass_refusal()
        # else: the signalling thread passes it on when its call returns

    # --- Downstream side ------------------------------------------------

    def request(self, n: int) -> None:
        """Pass ``request(n)`` to the source on the executor, after the calls before it.

        An invalid ``n`` is passed on as is; the source signals the error (rule 3.9).
        """
        upstream = self._upstream.current
        if upstream is not None:
            self._serial.execute(lambda: upstream.request(n))

    def cancel(self) -> None:
        """Cancel the source at once, on the calling thread (rule 3.5); nothing more goes downstream."""
        with self._lock:
            self._terminated = True
        self._upstream.cancel()


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
    execute = resolve_execute(executor)
    return StagePublisher("subscribe_on", lambda subscriber: _SubscribeOn(subscriber, source, execute).start())
