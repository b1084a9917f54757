"""SparkProcessor: a Processor that runs a DataFrame function on Spark, micro-batch by micro-batch."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from flowpy._checks import require, require_positive_int, require_subscriber
from flowpy._signals import call_subscription
from flowpy.executors import DEFAULT, Default, Executor, Task, resolve_execute
from flowpy.flow import Processor, Subscriber
from flowpy.spark._arrow import ArrowBatches, SchemaLike, dicts_of
from flowpy.spark._batching import BatchingSubscriber, Item, Terminal
from flowpy.spark._pull import EMPTY, Pulled, PullSubscription

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["SparkProcessor", "Transform"]

Transform = Callable[["DataFrame"], "DataFrame"]
"""A function from one micro-batch's DataFrame to the DataFrame of its results."""


class SparkProcessor(BatchingSubscriber, Processor[Item, dict[str, Any]]):
    """Collects items into micro-batches, runs ``transform`` on each on Spark, publishes the results.

    An item is a row (a mapping) or a columnar batch (``pyarrow.RecordBatch``
    or ``Table``, ``pandas.DataFrame``), taken with no per-row Python work;
    ``batch_size`` and the demand upstream count items.

    Upstream, the processor requests ``batch_size`` rows per micro-batch and
    keeps at most ``max_batches_in_flight`` micro-batches in flight: a batch
    counts from the request that asks for its rows until its last result row
    has been delivered downstream. So the rows it holds are bounded by
    ``max_batches_in_flight * batch_size`` inputs and their results, whatever
    the downstream demand. A batch is sent to Spark when it is full, or when
    upstream completes with a partial one; micro-batches are transformed one
    at a time, in order, and their result rows are published in order, as
    dicts, only as downstream requests them.

    The processor serves one subscriber; a second one gets ``on_error``. It
    requests nothing upstream before it has a subscriber. An upstream error
    or a failing ``transform`` reaches the subscriber at once (results not
    yet delivered are dropped) and cancels upstream; a downstream cancel
    cancels upstream.

    Protocol:   rules 2.x upstream, 1.x and 3.x downstream (rule 4.1).
    Threading:  signals may arrive on any thread; transforms and downstream
                signals run on the executor.
    """

    def __init__(
        self,
        spark: SparkSession,
        transform: Transform,
        *,
        batch_size: int = 10_000,
        schema: SchemaLike | None = None,
        max_batches_in_flight: int = 2,
        executor: Executor | Default = DEFAULT,
    ) -> None:
        """Args:
            spark: the session that runs ``transform``.
            transform: the function applied to each micro-batch's DataFrame.
            batch_size: items (rows or columnar batches) per micro-batch.
            schema: the input's Spark schema; ``None`` infers it from the first batch.
            max_batches_in_flight: how many micro-batches may be requested, transformed
                or awaiting delivery at once.
            executor: where transforms and downstream signals run; left out, the default.

        Raises:
            TypeError: if ``spark`` is ``None``, ``transform`` is not callable, ``executor``
                is ``None`` or not an executor, or ``batch_size`` or
                ``max_batches_in_flight`` is not an int.
            ValueError: if ``batch_size`` or ``max_batches_in_flight`` is not positive.
        """
        require(spark, "spark")
        if not callable(transform):
            raise TypeError(f"transform must be a callable DataFrame -> DataFrame, got {transform!r}")
        super().__init__(batch_size, resolve_execute(executor))
        self._transform = transform
        self._max_in_flight = require_positive_int(max_batches_in_flight, "max_batches_in_flight")
        self._batches = ArrowBatches(spark, schema)  # used by the worker task only
        # Serialises calls on the upstream subscription (rule 2.7). Re-entrant:
        # a synchronous upstream may call on_next inside request(). Never
        # acquired while self._lock is held.
        self._request_lock = threading.RLock()
        # --- Guarded by self._lock (the base class's) ------------------------
        self._downstream: _ResultSubscription | None = None  # set by subscribe, cleared when it ends
        self._served = False  # a subscriber came: no other may (set once)
        self._results: deque[deque[dict[str, Any]]] = deque()  # transformed, not yet delivered
        self._in_flight = 0  # batches requested and not yet fully delivered
        self._error: BaseException | None = None  # the failure to signal downstream

    # -- Upstream side (Subscriber) ---------------------------------------------

    def _upstream_failed(self, error: BaseException) -> None:
        self._fail(error, cancel_upstream=False)  # at once: results not yet delivered are dropped

    def _subscribed(self) -> None:
        self._refill()

    def _process(self, batch: list[Item]) -> bool:
        try:
            results = dicts_of(self._transform(self._batches.dataframe(batch)).toArrow())
        except BaseException as exc:
            self._fail(exc, cancel_upstream=True)
            return False
        with self._lock:
            if self._stopped:  # cancelled or failed while Spark worked
                return False
            if results:
                self._results.append(deque(results))
            else:
                self._in_flight -= 1
            downstream = self._downstream
        if downstream is not None:
            downstream.signal()
        if not results:
            self._refill()
        return True

    def _idle(self, terminal: Terminal) -> None:
        with self._lock:
            downstream = self._downstream
        if downstream is not None:
            downstream.signal()  # upstream may have completed while the last batch ran

    # -- Downstream side (Publisher) ----------------------------------------------

    def subscribe(self, subscriber: Subscriber[dict[str, Any]]) -> None:
        """Attach the one subscriber this processor serves.

        Raises:
            TypeError: if ``subscriber`` is ``None`` (rule 1.9).
        """
        require_subscriber(subscriber)
        subscription = _ResultSubscription(subscriber, self._execute, self)
        with self._lock:
            if self._served:
                subscription.reject(RuntimeError(f"{self!r} serves one subscriber and already has one"))
            else:
                self._served = True
                self._downstream = subscription
        subscription.start()
        self._refill()

    # -- Internals ----------------------------------------------------------------

    def _refill(self) -> None:
        """Request rows for as many batches as may be in flight."""
        with self._lock:
            upstream = self._upstream
            if upstream is None or self._downstream is None or self._terminal is not False or self._stopped:
                return
            batches = self._max_in_flight - self._in_flight
            self._in_flight += batches
        if batches > 0:
            with self._request_lock:
                call_subscription(upstream, batches * self._batch_size)

    def _fail(self, error: BaseException, *, cancel_upstream: bool) -> None:
        with self._lock:
            if self._stopped:
                return
            self._error = error
            self._results.clear()
            downstream = self._downstream
        upstream = self._stop()
        if upstream is not None and cancel_upstream:
            with self._request_lock:
                call_subscription(upstream, None)
        if downstream is not None:
            downstream.signal()

    def _take(self) -> Pulled[dict[str, Any]]:
        """Return the next result row, or EMPTY. Downstream drain only."""
        with self._lock:
            if not self._results:
                return EMPTY
            batch = self._results[0]
            row = batch.popleft()
            finished = not batch
            if finished:
                self._results.popleft()
                self._in_flight -= 1
        if finished:
            self._refill()
        return row

    def _exhausted(self) -> bool:
        with self._lock:
            return (
                self._terminal is True
                and not self._stopped
                and not self._collecting
                and not self._ready
                and not self._working
                and not self._results
            )

    def _failed(self) -> BaseException | None:
        with self._lock:
            return self._error

    def _detach(self) -> None:
        """The downstream subscription ended: forget it (rule 3.13) and cancel upstream."""
        with self._lock:
            self._downstream = None
            self._results.clear()
            ended = self._terminal is not False or self._stopped
        upstream = self._stop()
        if upstream is not None and not ended:
            with self._request_lock:
                call_subscription(upstream, None)

    def __repr__(self) -> str:
        return f"<SparkProcessor batch_size={self._batch_size} max_batches_in_flight={self._max_in_flight}>"


class _ResultSubscription(PullSubscription[dict[str, Any]]):
    """The downstream subscription: pulls result rows from the processor."""

    def __init__(
        self, subscriber: Subscriber[dict[str, Any]], execute: Callable[[Task], object], owner: SparkProcessor
    ) -> None:
        super().__init__(subscriber, execute)
        self._owner: SparkProcessor | None = owner
        self._rejection: BaseException | None = None  # set before start(): fail at once

    def reject(self, error: BaseException) -> None:
        """Make this subscription signal ``error`` right after ``on_subscribe``; call before start()."""
        self._rejection = error
        self._owner = None

    def _next(self) -> Pulled[dict[str, Any]]:
        return EMPTY if self._owner is None else self._owner._take()

    def _at_end(self) -> bool:
        return self._owner is not None and self._owner._exhausted()

    def _failure(self) -> BaseException | None:
        if self._rejection is not None:
            return self._rejection
        return None if self._owner is None else self._owner._failed()

    def _release(self) -> None:
        owner, self._owner = self._owner, None
        if owner is not None:
            owner._detach()
