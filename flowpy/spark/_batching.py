"""The subscriber side shared by the sink and the processor: items in, batches out, one at a time."""

from __future__ import annotations

import threading
from abc import abstractmethod
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from flowpy._checks import none_error, require, require_positive_int
from flowpy._core.serial import SerialDrain
from flowpy._core.upstream import UpstreamSlot
from flowpy._signals import call_subscription
from flowpy.executors import Task
from flowpy.flow import Subscriber, Subscription

__all__ = ["BatchingSubscriber", "Item", "Row", "Terminal"]

Row = Mapping[str, Any]
"""A row as a subscriber receives it."""

Item = Any
"""What the sink and the processor receive: a :data:`Row`, or a columnar batch of many rows
(``pyarrow.RecordBatch``, ``pyarrow.Table`` or ``pandas.DataFrame``). Demand counts items."""

Terminal = BaseException | bool
"""``False`` while the stream runs; ``True`` after ``on_complete``; the error after ``on_error``."""

# Implementation overview
#
# Rows are appended to `_collecting`; a full batch moves to `_ready`, and so
# does the last partial batch when upstream ends. The worker is a SerialDrain
# (flowpy._core.serial): one pass at a time on the executor takes batches
# from `_ready` and hands each to `_process`; when `_ready` is empty it calls
# `_idle` with the terminal state it saw, if a batch, a terminal signal or a
# `_kick` came since the last `_idle` (`_idle_due`). The drain runs once more
# for every signal that came during a pass, so none is lost. An executor
# that refuses the worker ends the stream through `_refused`.


class BatchingSubscriber(Subscriber[Item]):
    """Collects items into batches of ``batch_size`` items and processes the batches one at a time.

    An item is a row or a columnar batch; a batch of items is handed over
    as one list, so a columnar item costs no per-row work here.

    Subclasses say what to do with a batch (:meth:`_process`, on the worker
    task) and when the worker runs out of batches (:meth:`_idle`), and they
    request from :attr:`_upstream` as their policy says.
    """

    def __init__(self, batch_size: int, execute: Callable[[Task], object]) -> None:
        """Raises:
        TypeError: if ``batch_size`` is not an int.
        ValueError: if ``batch_size`` is not positive.
        """
        self._batch_size = require_positive_int(batch_size, "batch_size")
        self._execute = execute
        self._worker = SerialDrain(execute, self._pass, self._refused_worker)
        self._lock = threading.Lock()
        self._slot = UpstreamSlot()  # the one upstream subscription (rule 2.5)
        # --- Guarded by self._lock ----------------------------------------
        # The rows of the batch being filled. Appended to by on_next without
        # the lock (upstream signals are serial); replaced only under the lock.
        self._collecting: list[Item] = []
        self._ready: deque[list[Item]] = deque()  # batches waiting for the worker, in order
        self._idle_due = False  # a batch, a terminal or a _kick came since the worker's last _idle
        self._working = False  # the worker holds a batch it took from _ready (results may follow)
        self._terminal: Terminal = False  # how upstream ended, if it did
        self._stopped = False  # cancelled or failed: drop rows, start nothing

    @property
    def batch_size(self) -> int:
        """Items (rows or columnar batches) per batch."""
        return self._batch_size

    # -- Subscriber ---------------------------------------------------------------

    def on_subscribe(self, subscription: Subscription) -> None:
        """Keep the subscription; a second one is cancelled (rule 2.5).

        Raises:
            TypeError: if ``subscription`` is ``None`` (rule 2.13).
        """
        if not self._slot.accept(subscription):
            return
        # Kept before _stopped is read under the lock under which _stop() sets it
        # and reads the kept subscription: one of the two sees the other.
        with self._lock:
            stopped = self._stopped
        if stopped:  # stopped while it arrived: _stop() may have found no upstream to return
            call_subscription(subscription, None)
            return
        self._subscribed()

    @property
    def _upstream(self) -> Subscription | None:
        """The upstream subscription, once it arrived."""
        return self._slot.current

    def on_next(self, item: Item) -> None:
        """Add ``item`` to the batch being filled; a full batch goes to the worker.

        Raises:
            TypeError: if ``item`` is ``None`` (rule 2.13).
        """
        if item is None:
            raise none_error("item", "2.13")
        collecting = self._collecting  # upstream signals are serial (rule 1.3): no lock per row
        collecting.append(item)
        if len(collecting) < self._batch_size:
            return
        with self._lock:
            if self._stopped:
                collecting.clear()  # rows after a cancel (rule 2.8) are dropped
                return
            self._ready.append(collecting)
            self._collecting = []
            self._idle_due = True
        self._worker.signal()

    def on_error(self, error: BaseException) -> None:
        """Hand ``error`` to :meth:`_upstream_failed`.

        Raises:
            TypeError: if ``error`` is ``None`` (rule 2.13).
        """
        require(error, "error", "2.13")
        self._upstream_failed(error)

    def on_complete(self) -> None:
        """Send the last partial batch to the worker, then end."""
        self._end(True)

    def _end(self, terminal: Terminal) -> None:
        """Record how upstream ended and let the worker finish the batches."""
        with self._lock:
            if self._terminal is not False or self._stopped:
                return
            self._terminal = terminal
            if self._collecting:
                self._ready.append(self._collecting)
                self._collecting = []
            self._idle_due = True
        self._worker.signal()

    # -- For subclasses -------------------------------------------------------------

    def _subscribed(self) -> None:
        """Hook: the upstream subscription arrived. Default: nothing."""

    def _upstream_failed(self, error: BaseException) -> None:
        """Hook: upstream signalled ``error``. Default: finish the batches, then ``_idle(error)``."""
        self._end(error)

    @abstractmethod
    def _process(self, batch: list[Item]) -> bool:
        """Handle one batch on the worker task; return ``False`` to stop the worker."""

    @abstractmethod
    def _idle(self, terminal: Terminal) -> None:
        """Hook, on the worker task: no batch is left, and upstream ended as ``terminal`` says."""

    @abstractmethod
    def _refused(self, error: BaseException) -> None:
        """Hook, on the signalling thread: the executor refused the worker with ``error``.

        No batch is processed after this: the subclass ends the stream as for
        any failure, with :meth:`_stop` (cancelling the upstream it returns),
        and reports ``error``.
        """

    def _kick(self) -> None:
        """Have the worker call :meth:`_idle` once more (after the batches it still has)."""
        with self._lock:
            if self._stopped:
                return
            self._idle_due = True
        self._worker.signal()

    def _stop(self) -> Subscription | None:
        """Drop every row and stop the worker; return the upstream subscription to cancel."""
        with self._lock:
            self._stopped = True
            self._collecting = []
            self._ready.clear()
            return self._upstream

    def _pass(self, first: bool) -> bool:
        """One worker pass: process the ready batches, then ``_idle`` if one is due."""
        while True:
            with self._lock:
                if self._stopped or not self._ready:
                    self._working = False
                    if self._stopped or not self._idle_due:
                        return False
                    self._idle_due = False
                    terminal = self._terminal
                    break
                batch = self._ready.popleft()
                self._working = True
            if not self._process(batch):
                with self._lock:
                    self._working = False
                return False
        self._idle(terminal)
        return False

    def _refused_worker(self, error: BaseException) -> None:
        # The executor refused the worker: no pass runs again (SerialDrain).
        self._refused(error)
