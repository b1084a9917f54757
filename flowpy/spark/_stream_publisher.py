"""stream_publisher: a Structured Streaming query as a flowpy publisher, delivered on Spark's commit."""

from __future__ import annotations

import logging
import shutil
import socket
import tempfile
import threading
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from flowpy._checks import require_positive_int
from flowpy.errors import ClosedPublisherError
from flowpy.flow import default_buffer_size
from flowpy.spark._bridge import FORMAT, recv_frame, send_json
from flowpy.spark._endpoint import Endpoint, close_at_exit, register, reply_error
from flowpy.spark._stream import StreamPublisher

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming.query import StreamingQuery

__all__ = ["QueryPublisher", "StreamMode", "stream_publisher"]

T = TypeVar("T")

StreamMode = Literal["rows", "arrow"]
"""How ``stream_publisher`` hands rows over: one dict per row, or ``pyarrow.RecordBatch`` items."""

_log = logging.getLogger("flowpy.spark")

_EXIT_SECONDS = 30.0  # how long the exit hook waits for a query to stop

# Implementation overview
#
# A micro-batch's write tasks send their record batches here; each task
# attempt's batches are staged under its task attempt id. When Spark commits
# the batch (the driver's commit, after every task succeeded), the staged
# batches of exactly the attempts named by the commit messages move, in
# partition order, to the backlog; every other attempt of that batch is
# dropped, and so is the whole batch on abort. The pump thread hands the
# backlog to the SubmissionPublisher with its blocking submit. A write task
# is read only while the backlog is empty or backlog + staged items are
# under the capacity, so a slow subscriber blocks the query's tasks; staging
# may exceed the capacity only while the backlog is empty, since a batch
# must be staged whole before Spark can commit it.


@dataclass
class _Staged:
    """One task attempt's record batches, waiting for Spark's commit."""

    batch: int
    partition: int
    batches: list[pa.RecordBatch] = field(default_factory=list)
    units: int = 0  # the items they make: rows in rows mode, record batches in arrow mode
    complete: bool = False  # the task sent its last batch


class QueryPublisher(StreamPublisher[T]):
    """The publisher of :func:`stream_publisher`: a SubmissionPublisher fed by a query's committed micro-batches.

    Closing it (``close()`` or ``close_exceptionally()``) stops the query; the
    micro-batches not yet handed over are dropped.
    """

    def __init__(self, max_buffer_capacity: int) -> None:
        super().__init__(max_buffer_capacity)
        self._bridge: _QueryBridge | None = None  # set once, before the query starts

    @property
    def batches_delivered(self) -> int:
        """Micro-batches committed by Spark and handed over in full (racy read: for monitoring)."""
        return 0 if self._bridge is None else self._bridge.batches_delivered

    @property
    def held_items(self) -> int:
        """Items held beyond the subscribers' buffers: staged and committed, not yet submitted (racy read)."""
        return 0 if self._bridge is None else self._bridge.held

    @property
    def peak_held_items(self) -> int:
        """The most items held at once beyond the subscribers' buffers (racy read: for monitoring)."""
        return 0 if self._bridge is None else self._bridge.peak_held

    def close(self) -> None:
        super().close()
        if self._bridge is not None:
            self._bridge.stop("the app closed the publisher")

    def close_exceptionally(self, error: BaseException) -> None:
        super().close_exceptionally(error)
        if self._bridge is not None:
            self._bridge.stop("the app closed the publisher")


class _QueryBridge:
    """Stages a query's micro-batches, delivers the committed ones, and ends the publisher with the query."""

    def __init__(self, publisher: QueryPublisher[Any], rows: bool, capacity: int) -> None:
        self._publisher = publisher
        self._rows = rows
        self._capacity = capacity
        self.endpoint: Endpoint | None = None  # set once, before the query starts
        self.query: StreamingQuery | None = None  # set once, before the threads start
        self._pump_thread: threading.Thread | None = None  # set once, by start()
        self._watch_thread: threading.Thread | None = None  # set once, by start()
        self.scratch: str | None = None  # the temporary checkpoint directory this bridge made, if any
        self._lock = threading.Lock()
        # Notified when the backlog shrinks or grows, staging shrinks, the query ends or the bridge stops.
        self._changed = threading.Condition(self._lock)
        # --- Guarded by self._lock ----------------------------------------
        # Its with blocks wait with wait_for and loop only in methods they call:
        # a loop in the block itself could lose the lock to a Ctrl-C on CPython
        # 3.12+ (docs/internals.md, "Loops and locks").
        self._staged: dict[int, _Staged] = {}  # by task attempt id
        self._staged_units = 0
        # Committed record batches, in order, not yet submitted; each with whether it ends its micro-batch.
        self._backlog: deque[tuple[pa.RecordBatch, bool]] = deque()
        self._backlog_units = 0
        self._committed_through = -1  # the highest batch id delivered: one seen again is not delivered twice
        self._query_over = False  # the query terminated
        self._query_error: BaseException | None = None  # why it failed, if it did
        self._stopping: str | None = None  # why writes are refused: the publisher was closed, the app exits
        self.batches_delivered = 0  # micro-batches handed over whole; written under the lock, read racily
        self.peak_held = 0  # written under the lock, read racily

    @property
    def held(self) -> int:
        with self._lock:
            return self._staged_units + self._backlog_units

    def _units(self, batch: pa.RecordBatch) -> int:
        return int(batch.num_rows) if self._rows else 1

    @property
    def _name(self) -> str:
        assert self.endpoint is not None
        return f"flowpy stream_publisher {self.endpoint.stream}"

    def start(self, query: StreamingQuery) -> None:
        """Watch ``query`` and start handing its committed micro-batches to the publisher."""
        assert self.endpoint is not None
        self.query = query
        name = self.endpoint.name
        self._watch_thread = threading.Thread(target=self._watch, name=f"{name}-watch", daemon=True)
        self._watch_thread.start()
        self._pump_thread = threading.Thread(target=self._pump, name=f"{name}-pump", daemon=True)
        self._pump_thread.start()

    # -- The Spark side's connections ------------------------------------------------------

    def serve(self, connection: socket.socket, hello: dict[str, Any]) -> None:
        """Serve one connection of the Spark side (the endpoint's handler)."""
        op = hello.get("op")
        if op == "write":
            self._write(connection, int(hello["batch"]), int(hello["task"]), int(hello["partition"]))
        elif op == "commit":
            reply = self._commit(int(hello["batch"]), [int(task) for task in hello["tasks"]])
            send_json(connection, reply)
        elif op == "abort":
            self._drop(lambda entry: entry.batch == int(hello["batch"]))
            send_json(connection, {"ok": True})
        else:
            reply_error(connection, f"{self._name} serves no {op!r} requests")

    def _write(self, connection: socket.socket, batch_id: int, task: int, partition: int) -> None:
        import pyarrow as pa

        entry = _Staged(batch_id, partition)
        with self._lock:
            refusal = self._stopping
            if refusal is None:
                self._staged[task] = entry
        if refusal is not None:
            reply_error(connection, f"{self._name} takes no more rows: {refusal}")
            return
        schema: pa.Schema | None = None
        try:
            send_json(connection, {"ok": True})
            while True:
                with self._changed:
                    self._changed.wait_for(lambda: self._stopping is not None or self._query_over or not self._full())
                    refusal = self._stopping or ("its query has ended" if self._query_over else None)
                if refusal is not None:
                    reply_error(connection, f"{self._name} takes no more rows: {refusal}")
                    return
                frame = recv_frame(connection)
                if not frame:
                    break
                if schema is None:
                    schema = pa.ipc.read_schema(pa.py_buffer(frame))
                    continue
                batch = pa.ipc.read_record_batch(pa.py_buffer(frame), schema)
                units = self._units(batch)
                with self._lock:
                    dropped = self._staged.get(task) is not entry  # the batch was aborted meanwhile
                    if not dropped:
                        entry.batches.append(batch)
                        entry.units += units
                        self._staged_units += units
                        self.peak_held = max(self.peak_held, self._staged_units + self._backlog_units)
                if dropped:
                    reply_error(connection, f"{self._name} takes no more rows of batch {batch_id}: it was aborted")
                    return
            with self._lock:
                entry.complete = self._staged.get(task) is entry
            if not entry.complete:
                reply_error(connection, f"{self._name} takes no more rows of batch {batch_id}: it was aborted")
                return
            send_json(connection, {"ok": True, "rows": sum(b.num_rows for b in entry.batches)})
        except (EOFError, OSError):
            pass  # the task died or was killed mid-write: its attempt's rows are dropped below
        finally:
            if not entry.complete:
                self._drop(lambda staged: staged is entry)

    def _full(self) -> bool:
        # Caller holds self._lock.
        return self._backlog_units > 0 and self._backlog_units + self._staged_units >= self._capacity

    def _commit(self, batch_id: int, tasks: list[int]) -> dict[str, Any]:
        with self._changed:
            if self._stopping is not None:
                return {"error": f"{self._name} cannot commit batch {batch_id}: {self._stopping}"}
            delivered = batch_id <= self._committed_through
            if not delivered:
                missing = self._commit_locked(batch_id, tasks)
                if missing:
                    return {
                        "error": f"{self._name} cannot commit batch {batch_id}: the rows of task attempts "
                        f"{missing} did not all arrive"
                    }
                self._changed.notify_all()
        # Attempts that failed or lost a race, and a batch delivered before: none is delivered.
        self._drop(lambda entry: entry.batch <= batch_id)
        return {"ok": True, "duplicate": delivered}

    def _commit_locked(self, batch_id: int, tasks: list[int]) -> list[int]:
        # Caller holds self._lock. Moves the staged rows of `tasks` to the backlog,
        # as batch `batch_id`; or, when some have not all arrived, changes nothing
        # and returns those tasks.
        entries = [self._staged.get(task) for task in tasks]
        missing = [t for t, entry in zip(tasks, entries, strict=True) if entry is None or not entry.complete]
        if missing:
            return missing
        batches: list[pa.RecordBatch] = []
        for entry in sorted((e for e in entries if e is not None), key=lambda e: e.partition):
            batches.extend(entry.batches)
            self._backlog_units += entry.units
            self._staged_units -= entry.units
        for task in tasks:
            del self._staged[task]
        if batches:
            self._backlog.extend((batch, False) for batch in batches[:-1])
            self._backlog.append((batches[-1], True))
        else:
            self.batches_delivered += 1
        self._committed_through = batch_id
        return []

    def _drop(self, which: Any) -> None:
        """Drop the staged attempts for which ``which(entry)`` is true."""
        with self._changed:
            self._drop_locked(which)
            self._changed.notify_all()

    def _drop_locked(self, which: Any) -> None:
        # Caller holds self._lock.
        for task, entry in list(self._staged.items()):
            if which(entry):
                del self._staged[task]
                self._staged_units -= entry.units

    # -- Delivery and the end ----------------------------------------------------------------

    def _pump(self) -> None:
        publisher = self._publisher
        try:
            while True:
                with self._changed:
                    self._changed.wait_for(lambda: self._backlog or self._query_over or self._stopping is not None)
                    if self._stopping is not None or not self._backlog:
                        break
                    batch, ends_batch = self._backlog[0]
                publisher.await_subscriber()
                if self._rows:
                    publisher.submit_many(batch.to_pylist())
                else:
                    publisher.submit(batch)
                with self._changed:
                    if self._backlog:  # stop() may have cleared it meanwhile
                        self._backlog.popleft()
                        self._backlog_units -= self._units(batch)
                    self.batches_delivered += ends_batch
                    self._changed.notify_all()
        except ClosedPublisherError:
            pass  # the app closed the publisher, which called stop()
        except BaseException as exc:
            _log.exception("%s: handing rows to the publisher failed", self._name)
            publisher.close_exceptionally(exc)
        with self._changed:
            stop = self._stopping is not None and not self._query_over
        if stop:
            assert self.query is not None
            try:
                self.query.stop()
            except Exception:
                _log.exception("%s: stopping the query failed", self._name)
        with self._changed:
            self._changed.wait_for(lambda: self._query_over)
            error = self._query_error
        if error is None:
            publisher.close()
        else:
            publisher.fail(error)  # after the rows the subscribers' demand lets them take
        assert self.endpoint is not None
        self.endpoint.close()
        self.remove_scratch()

    def remove_scratch(self) -> None:
        """Delete the temporary checkpoint directory, if this bridge made one."""
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)

    def _watch(self) -> None:
        assert self.query is not None
        error: BaseException | None = None
        try:
            self.query.awaitTermination()
        except BaseException as exc:
            error = exc
        with self._changed:
            self._query_over = True
            self._query_error = error
            self._changed.notify_all()

    def stop(self, reason: str) -> None:
        """Refuse further rows and drop what is not handed over; the pump then stops the query. Idempotent."""
        with self._changed:
            if self._stopping is not None or self._query_over:
                return
            self._stopping = reason
            self._backlog.clear()
            self._backlog_units = 0
            self._changed.notify_all()

    def close(self) -> None:
        """At process exit: close the publisher, which stops the query, and wait for the pump to end it."""
        self.stop("the app exited")
        self._publisher.close()
        if self._pump_thread is not None:
            self._pump_thread.join(_EXIT_SECONDS)


def stream_publisher(
    streaming_df: DataFrame,
    *,
    mode: StreamMode = "rows",
    max_buffer_capacity: int = default_buffer_size(),
    checkpoint_location: str | None = None,
    output_mode: Literal["append", "complete"] = "append",
    trigger: Mapping[str, Any] | None = None,
    query_name: str | None = None,
    host: str = "127.0.0.1",
    port: int = 0,
) -> tuple[QueryPublisher[Any], StreamingQuery]:
    """Start ``streaming_df`` and publish what each of its micro-batches writes, once Spark commits it.

    The query writes into the ``flowpy`` data source: its write tasks, on
    Spark's executors, send their rows as Arrow record batches to this
    process (``host``:``port``, presenting a random token made for this
    stream), where they wait for Spark's commit. Delivery follows Spark's
    commit protocol: a micro-batch's rows are handed to the publisher once
    Spark's ``commit(messages, batch_id)`` arrives, in partition order, from
    the task attempts that Spark committed; a batch id committed again (a
    retry) is not delivered twice; an aborted batch, and the rows of a task
    attempt that failed, are never delivered.

    Subscribers get the rows with demand: dicts with ``mode="rows"``
    (``max_buffer_capacity`` rows per subscriber), ``pyarrow.RecordBatch``
    items with ``mode="arrow"`` (that many record batches). This process
    holds at most ``max(max_buffer_capacity, one micro-batch)`` items beyond
    the subscribers' buffers (plus one record batch): a write task is read
    only while there is room, so while a subscriber is slow the query's
    tasks block and the query slows down instead of memory growing. The
    first micro-batch waits for the first subscriber.

    When the query ends (``query.stop()``, an ``availableNow`` trigger
    running out of input, a failure) the publisher closes after handing over
    every committed row: ``on_complete``, or ``on_error`` with the query's
    exception, once each subscriber took the rows its demand lets it take
    (:meth:`~flowpy.spark._stream.StreamPublisher.fail`: a subscriber whose
    demand is spent gets it without the rest). Closing the publisher stops
    the query. Works on classic
    sessions and on Spark Connect alike (unlike :func:`publish_stream`, whose
    ``foreachBatch`` runs on a Connect server, not here).

    Args:
        streaming_df: a streaming DataFrame (``spark.readStream...``).
        mode: ``"rows"`` or ``"arrow"``.
        max_buffer_capacity: each subscriber's buffer, and the bound above, in items.
        checkpoint_location: the query's checkpoint directory; ``None`` makes a new one under this
            machine's temporary directory, deleted when the query has ended (a Spark Connect
            server on another machine makes and keeps it there).
        output_mode: ``"append"``, or ``"complete"`` for an aggregation: every micro-batch then
            delivers the whole result table. (Spark refuses ``"update"`` for Python data sources.)
        trigger: keyword arguments for ``DataStreamWriter.trigger``, e.g.
            ``{"processingTime": "1 second"}`` or ``{"availableNow": True}``.
        query_name: the query's name, shown by ``spark.streams``.
        host: the address to serve on, which Spark's executors and driver must reach.
        port: the port to serve on; 0 takes a free one.

    Returns:
        The publisher and the running query.

    Raises:
        ValueError: if ``streaming_df`` is not streaming, ``mode`` or ``output_mode`` is
            unknown, or ``max_buffer_capacity`` is not positive.
        TypeError: if ``max_buffer_capacity`` is not an int.
        OSError: if ``host``:``port`` cannot be bound.
    """
    if mode not in ("rows", "arrow"):
        raise ValueError(f"mode must be 'rows' or 'arrow', got {mode!r}")
    if output_mode not in ("append", "complete"):
        raise ValueError(
            f"output_mode must be 'append' or 'complete', got {output_mode!r}: Spark writes streams into Python "
            "data sources in those two modes only (an aggregation can use 'complete')"
        )
    capacity = require_positive_int(max_buffer_capacity, "max_buffer_capacity")
    if not streaming_df.isStreaming:
        raise ValueError(f"streaming_df must be a streaming DataFrame (spark.readStream), got {streaming_df!r}")
    publisher: QueryPublisher[Any] = QueryPublisher(capacity)
    bridge = _QueryBridge(publisher, mode == "rows", capacity)
    endpoint = bridge.endpoint = Endpoint("stream_publisher", bridge.serve, host=host, port=port)
    try:
        register(streaming_df.sparkSession)
        writer = streaming_df.writeStream.format(FORMAT).options(**endpoint.options()).outputMode(output_mode)
        if trigger:
            writer = writer.trigger(**trigger)
        if checkpoint_location is None:
            bridge.scratch = tempfile.mkdtemp(prefix="flowpy-stream_publisher-")
            checkpoint_location = bridge.scratch
        writer = writer.option("checkpointLocation", checkpoint_location)
        if query_name is not None:
            writer = writer.queryName(query_name)
        query = writer.start()
    except BaseException:
        endpoint.close()
        bridge.remove_scratch()
        raise
    publisher._bridge = bridge
    bridge.start(query)
    close_at_exit(bridge)
    return publisher, query
