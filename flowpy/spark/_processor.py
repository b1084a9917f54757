"""SparkProcessor: a Processor that runs a DataFrame function on Spark, micro-batch by micro-batch."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from flowpy.executors import Executor, Task, as_execute, default_executor
from flowpy.flow import Processor, Subscriber, Subscription
from flowpy.spark._arrow import ArrowBatches, SchemaLike, dicts_of
from flowpy.spark._pull import EMPTY, Pulled, PullSubscription

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["SparkProcessor", "Transform"]

Transform = Callable[["DataFrame"], "DataFrame"]
"""A function from one micro-batch's DataFrame to the DataFrame of its results."""


class SparkProcessor(Processor[Mapping[str, Any], dict[str, Any]]):
    """Collects rows into micro-batches, runs ``transform`` on each on Spark, publishes the results.

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
        executor: Executor | None = None,
    ) -> None:
        """Args:
            spark: the session that runs ``transform``.
            transform: the function applied to each micro-batch's DataFrame.
            batch_size: rows per micro-batch.
            schema: the input rows' Spark schema; ``None`` infers it from the first batch.
            max_batches_in_flight: how many micro-batches may be requested, transformed
                or awaiting delivery at once.
            executor: where transforms and downstream signals run; ``None`` means the default.

        Raises:
            TypeError: if ``spark`` is ``None`` or ``transform`` is not callable.
            ValueError: if ``batch_size`` or ``max_batches_in_flight`` is not a positive int.
        """
        if spark is None:
            raise TypeError("spark must not be None")
        if not callable(transform):
            raise TypeError(f"transform must be a callable DataFrame -> DataFrame, got {transform!r}")
        for name, value in (("batch_size", batch_size), ("max_batches_in_flight", max_batches_in_flight)):
            if type(value) is not int or value <= 0:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        self._transform = transform
        self._batch_size = batch_size
        self._max_in_flight = max_batches_in_flight
        self._batches = ArrowBatches(spark, schema)  # used by the transform task only
        self._execute = as_execute(default_executor() if executor is None else executor)
        # Serialises calls on the upstream subscription (rule 2.7). Re-entrant:
        # a synchronous upstream may call on_next inside request(). Never
        # acquired while self._lock is held.
        self._request_lock = threading.RLock()
        self._lock = threading.Lock()
        # --- Guarded by self._lock ----------------------------------------
        self._upstream: Subscription | None = None  # set once by on_subscribe
        self._downstream: _ResultSubscription | None = None  # set by subscribe, cleared when it ends
        self._served = False  # a subscriber came: no other may (set once)
        self._collecting: list[Mapping[str, Any]] = []  # rows of the batch being filled
        self._pending: deque[list[Mapping[str, Any]]] = deque()  # full batches awaiting transform
        self._results: deque[deque[dict[str, Any]]] = deque()  # transformed, not yet delivered
        self._in_flight = 0  # batches requested and not yet fully delivered
        self._transforming = False  # the transform task is queued or running
        self._upstream_done = False  # upstream completed, or the stream failed or was cancelled
        self._error: BaseException | None = None  # the failure to signal downstream
        self._stopped = False  # cancelled or failed: drop rows, request nothing

    # -- Upstream side (Subscriber) ---------------------------------------------

    def on_subscribe(self, subscription: Subscription) -> None:
        """Keep the upstream subscription; request once a subscriber is attached."""
        if subscription is None:
            raise TypeError("subscription must not be None (rule 2.13)")
        with self._lock:
            duplicate = self._upstream is not None or self._upstream_done
            if not duplicate:
                self._upstream = subscription
        if duplicate:
            subscription.cancel()  # rule 2.5
            return
        self._refill()

    def on_next(self, item: Mapping[str, Any]) -> None:
        """Add ``item`` to the micro-batch being filled."""
        if item is None:
            raise TypeError("item must not be None (rule 2.13)")
        with self._lock:
            if self._stopped:
                return
            self._collecting.append(item)
            if len(self._collecting) < self._batch_size:
                return
            self._pending.append(self._collecting)
            self._collecting = []
            start = not self._transforming
            self._transforming = True
        if start:
            self._execute(self._transform_loop)

    def on_error(self, error: BaseException) -> None:
        """Pass ``error`` downstream at once."""
        if error is None:
            raise TypeError("error must not be None (rule 2.13)")
        self._fail(error, cancel_upstream=False)

    def on_complete(self) -> None:
        """Transform the last partial batch; complete downstream once every result is delivered."""
        with self._lock:
            if self._upstream_done:
                return
            self._upstream_done = True
            if self._collecting:
                self._pending.append(self._collecting)
                self._collecting = []
            start = bool(self._pending) and not self._transforming
            if start:
                self._transforming = True
            downstream = self._downstream
        if start:
            self._execute(self._transform_loop)
        elif downstream is not None:
            downstream.signal()

    # -- Downstream side (Publisher) ----------------------------------------------

    def subscribe(self, subscriber: Subscriber[dict[str, Any]]) -> None:
        """Attach the one subscriber this processor serves.

        Raises:
            TypeError: if ``subscriber`` is ``None`` (rule 1.9).
        """
        if subscriber is None:
            raise TypeError("subscriber must not be None (rule 1.9)")
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
            if upstream is None or self._downstream is None or self._upstream_done or self._stopped:
                return
            batches = self._max_in_flight - self._in_flight
            self._in_flight += batches
        if batches > 0:
            with self._request_lock:
                upstream.request(batches * self._batch_size)

    def _transform_loop(self) -> None:
        while True:
            with self._lock:
                if self._stopped or not self._pending:
                    self._transforming = False
                    downstream = self._downstream
                    break
                batch = self._pending.popleft()
            try:
                results = dicts_of(self._transform(self._batches.dataframe(batch)).toArrow())
            except BaseException as exc:
                self._fail(exc, cancel_upstream=True)
                return
            with self._lock:
                if results:
                    self._results.append(deque(results))
                else:
                    self._in_flight -= 1
                downstream = self._downstream
            if downstream is not None:
                downstream.signal()
            if not results:
                self._refill()
        if downstream is not None:
            downstream.signal()  # upstream may have completed while the last batch ran

    def _fail(self, error: BaseException, *, cancel_upstream: bool) -> None:
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
            self._upstream_done = True
            self._error = error
            self._collecting = []
            self._pending.clear()
            self._results.clear()
            upstream = self._upstream if cancel_upstream else None
            downstream = self._downstream
        if upstream is not None:
            with self._request_lock:
                upstream.cancel()
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
                self._upstream_done
                and self._error is None
                and not self._collecting
                and not self._pending
                and not self._transforming
                and not self._results
            )

    def _failed(self) -> BaseException | None:
        with self._lock:
            return self._error

    def _detach(self) -> None:
        """The downstream subscription ended: forget it (rule 3.13) and cancel upstream."""
        with self._lock:
            self._downstream = None
            if self._stopped:
                return
            self._stopped = True
            upstream = None if self._upstream_done else self._upstream
            self._upstream_done = True
            self._collecting = []
            self._pending.clear()
            self._results.clear()
        if upstream is not None:
            with self._request_lock:
                upstream.cancel()

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
