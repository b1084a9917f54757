"""stream_source: a flowpy publisher as a Spark streaming DataFrame, Spark's read limit as its demand."""

from __future__ import annotations

import bisect
import socket
import threading
import weakref
from typing import TYPE_CHECKING, Any, Final, Literal

from flowpy._checks import require_positive_int, require_publisher
from flowpy._core.serial import SerialDrain
from flowpy._core.upstream import UpstreamSlot
from flowpy._fork import at_fork_in_child
from flowpy.flow import Publisher, Subscriber, Subscription
from flowpy.spark._arrow import ArrowTables, SchemaLike, is_columnar, rows_of, struct_of
from flowpy.spark._bridge import FORMAT, offset_row, recv_json, send_json, send_table
from flowpy.spark._endpoint import Endpoint, close_at_exit, register, reply_error

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["AVAILABLE_NOW_TICK", "HELD_BATCHES", "IDLE_WAIT", "stream_source"]

IDLE_WAIT: Final = 0.5
"""Seconds Spark's request for the next offset waits for a first row when none is held.

Bounds how long ``query.stop()`` waits for that request, and how often an
idle stream is polled."""

AVAILABLE_NOW_TICK: Final = 1.0
"""Seconds after which an idle stream under ``Trigger.AvailableNow`` offers an empty micro-batch.

Under that trigger Spark ends the query when the source offers no new
offset, so until the publisher completes the stream moves its offset on
without rows: an empty micro-batch per second of idleness."""

HELD_BATCHES: Final = 3
"""The source holds at most this many micro-batches of rows (see :func:`stream_source`)."""

_streams: weakref.WeakSet[_SourceStream] = weakref.WeakSet()  # the live streams, for monitoring and tests


@at_fork_in_child
def _forget_streams_in_child() -> None:
    """After ``os.fork()``, in the child: the parent's streams are not the child's."""
    global _streams
    _streams = weakref.WeakSet()


# Implementation overview
#
# Rows are numbered from 0 in arrival order; an offset is {"stream": id, "row": n}.
# The app holds every item from the first row Spark has not committed
# (`_released`) to the last received (`_received`); `_planned` is the end of
# the last offset handed to Spark. Demand keeps `_target` rows (Spark's read
# limit) received or requested beyond `_planned`: rows one request for many,
# columnar items one at a time (their size is known only when they arrive).
# Every request and the cancel go through one inline SerialDrain, so calls on
# the subscription are serial (rule 2.7) whichever thread asks: the control
# connection's thread, or the publisher's on_next.


class _SourceStream(Subscriber[Any]):
    """Holds a publisher's items for one streaming query and serves them to Spark's reader."""

    def __init__(self, struct: Any, max_rows: int) -> None:
        self._tables = ArrowTables(struct)  # has a schema: read-only, shared by the read threads
        self._max_rows = max_rows
        self._slot = UpstreamSlot()
        self._demand = SerialDrain.inline(self._request_pass)
        self.endpoint: Endpoint | None = None  # set once, before the publisher is subscribed to
        self._lock = threading.Lock()
        # Notified when items arrive, the publisher ends, or the stream ends.
        self._changed = threading.Condition(self._lock)
        # --- Guarded by self._lock ----------------------------------------
        self._items: list[Any] = []  # held items, in order; a pandas frame is held as a pyarrow Table
        self._starts: list[int] = []  # the first row of each held item
        self._received = 0  # rows received: the end of the last item
        self._released = 0  # rows before this one were committed by Spark and let go
        self._planned = 0  # the end of the last offset handed to Spark
        self._target = max_rows  # rows to hold or request beyond _planned: Spark's read limit
        self._outstanding = 0  # items requested and not yet received
        self._kind: Literal["rows", "columnar"] | None = None  # set by the first item that has rows
        self._terminal: BaseException | bool = False  # True after on_complete, the error after on_error
        self._available_now = False  # the query runs under Trigger.AvailableNow
        self._ticks = 0  # empty offsets handed out under AvailableNow
        self._reader = False  # a query's reader is connected (set once)
        self._ended = False  # the query ended or the stream was closed: nothing is held or requested
        self._cancel_due = False  # the subscription is to be cancelled by the next request pass
        self.peak_held_rows = 0  # the most rows held at once (racy read: for monitoring)

    @property
    def stream(self) -> str:
        assert self.endpoint is not None
        return self.endpoint.stream

    @property
    def held_rows(self) -> int:
        """Rows held now, received and not yet released (racy read: for monitoring)."""
        with self._lock:
            return self._received - self._released

    # -- Subscriber -------------------------------------------------------------------

    def on_subscribe(self, subscription: Subscription) -> None:
        # Refused once closed: close() has the request pass cancel the slot.
        if self._slot.accept(subscription):
            self._demand.signal()

    def on_next(self, item: Any) -> None:
        columnar = is_columnar(item)
        if columnar and type(item).__module__.startswith("pandas"):
            import pyarrow as pa

            item = pa.Table.from_pandas(item, preserve_index=False)
        rows = rows_of(item)
        with self._changed:
            self._outstanding = max(self._outstanding - 1, 0)
            if self._ended:
                return
            if rows:
                self._kind = "columnar" if columnar else self._kind or "rows"
                self._items.append(item)
                self._starts.append(self._received)
                self._received += rows
                self.peak_held_rows = max(self.peak_held_rows, self._received - self._released)
                self._changed.notify_all()
        self._demand.signal()

    def on_error(self, error: BaseException) -> None:
        self._slot.detach()
        with self._changed:
            self._terminal = error
            self._changed.notify_all()

    def on_complete(self) -> None:
        self._slot.detach()
        with self._changed:
            self._terminal = True
            self._changed.notify_all()

    def _request_pass(self, first: bool) -> bool:
        with self._lock:
            cancel, self._cancel_due = self._cancel_due, False
            n = 0 if cancel else self._wanted()
            self._outstanding += n
        if cancel:
            self._slot.cancel()
        elif n:
            subscription = self._slot.current
            if subscription is not None:
                subscription.request(n)
        return False

    def _wanted(self) -> int:
        # Caller holds self._lock.
        if not self._reader or self._ended or self._terminal is not False:
            return 0
        beyond = self._received - self._planned
        if self._kind != "rows":  # unknown or columnar: one item in flight at a time
            return 1 if self._outstanding == 0 and beyond < self._target else 0
        return max(self._target - beyond - self._outstanding, 0)

    # -- The Spark side's connections ------------------------------------------------------

    def serve(self, connection: socket.socket, hello: dict[str, Any]) -> None:
        """Serve one connection of the Spark side (the endpoint's handler)."""
        op = hello.get("op")
        if op == "control":
            self._control(connection)
        elif op == "read":
            self._read(connection, int(hello["start"]), int(hello["end"]))
        else:
            reply_error(connection, f"flowpy stream_source {self.stream} serves no {op!r} requests")

    def _control(self, connection: socket.socket) -> None:
        with self._lock:
            refusal = None
            if self._ended:
                refusal = (
                    f"flowpy stream_source {self.stream} has ended: its query stopped or it was closed; "
                    "make a new one with stream_source for a new query"
                )
            elif self._reader:
                refusal = f"flowpy stream_source {self.stream} already feeds a running query; make one per query"
            self._reader = True
        if refusal is not None:
            reply_error(connection, refusal)
            return
        try:
            send_json(connection, {"ok": True})
            self._demand.signal()
            while True:
                request = recv_json(connection)
                call = request.get("call")
                if call == "stop":
                    return
                send_json(connection, self._answer(call, request))
        except (EOFError, OSError):
            return  # the reader's worker is gone: the query ended
        finally:
            self.close()

    def _answer(self, call: object, request: dict[str, Any]) -> dict[str, Any]:
        if call == "initial":
            with self._lock:
                return {"offset": {"stream": self.stream, "row": self._released}}
        if call == "latest":
            return self._latest(request["start"], request.get("max_rows"), bool(request.get("everything")))
        if call == "available_now":
            with self._lock:
                self._available_now = True
            return {"ok": True}
        if call == "commit":
            self._commit(offset_row(request["end"], self.stream))
            return {"ok": True}
        return {"error": f"flowpy stream_source {self.stream} has no call {call!r}"}

    def _latest(self, start: dict[str, Any], max_rows: int | None, everything: bool) -> dict[str, Any]:
        """The next offset: up to ``max_rows`` rows after ``start``, or ``start`` when there are none yet."""
        first = offset_row(start, self.stream)
        limit = min(max_rows or self._max_rows, self._max_rows)
        with self._changed:
            self._target = limit
            # wait_for, not a loop here: a loop in this with block could lose the lock
            # to a Ctrl-C on CPython 3.12+ (docs/internals.md, "Loops and locks").
            self._changed.wait_for(
                lambda: self._received > first or self._terminal is not False or self._ended,
                AVAILABLE_NOW_TICK if self._available_now else IDLE_WAIT,
            )
            if self._received <= first:
                if isinstance(self._terminal, BaseException):
                    error = self._terminal
                    return {
                        "error": f"the publisher of flowpy stream_source {self.stream} failed: "
                        f"{type(error).__name__}: {error}"
                    }
                if self._available_now and self._terminal is False and not self._ended:
                    self._ticks += 1  # a new offset with no rows: an empty micro-batch
                    return {"offset": {"stream": self.stream, "row": first, "tick": self._ticks}}
                return {"offset": start}
            end = self._received if everything else min(self._received, first + limit)
            self._planned = max(self._planned, end)
        self._demand.signal()
        return {"offset": {"stream": self.stream, "row": end}}

    def _commit(self, row: int) -> None:
        """Let go of every item whose rows all come before ``row``: Spark has committed them."""
        with self._lock:
            if row <= self._released:
                return
            self._released = row
            starts = self._starts
            # Items starting at or before row: all but the last end by row; the last one ends by row
            # only if it is the last item held and every row received comes before row.
            whole = bisect.bisect_right(starts, row)
            if whole < len(starts) or self._received > row:
                whole = max(whole - 1, 0)
            del self._items[:whole], starts[:whole]

    def _read(self, connection: socket.socket, first: int, last: int) -> None:
        with self._lock:
            problem = (
                f"flowpy stream_source {self.stream} has ended"
                if self._ended
                else f"rows {first} to {last} of flowpy stream_source {self.stream} were let go "
                f"when Spark committed them (held: rows {self._released} to {self._received})"
                if first < self._released or last > self._received
                else None
            )
            pieces = [] if problem else self._pieces(first, last)
        if problem is not None:
            reply_error(connection, problem)
            return
        import pyarrow as pa

        try:
            table = self._tables.table(pieces)
        except (pa.ArrowException, KeyError, TypeError, ValueError) as exc:
            reply_error(
                connection,
                f"rows {first} to {last} of flowpy stream_source {self.stream} do not fit the schema: "
                f"{type(exc).__name__}: {exc}",
            )
            return
        send_json(connection, {"ok": True})
        send_table(connection, table)

    def _pieces(self, first: int, last: int) -> list[Any]:
        """The items, sliced where they straddle an end, that hold rows ``[first, last)``."""
        # Caller holds self._lock.
        starts, items = self._starts, self._items
        index = bisect.bisect_right(starts, first) - 1
        if self._kind == "rows":
            return items[index : bisect.bisect_left(starts, last)]
        pieces = []
        while index < len(items) and starts[index] < last:
            item, start = items[index], starts[index]
            if is_columnar(item):
                low, high = max(first - start, 0), min(last - start, item.num_rows)
                pieces.append(item if (low, high) == (0, item.num_rows) else item.slice(low, high - low))
            else:
                pieces.append(item)
            index += 1
        return pieces

    def close(self) -> None:
        """End the stream: cancel the subscription, let go of every item, close the endpoint; idempotent."""
        with self._changed:
            first_close = not self._ended
            self._ended = True
            self._cancel_due = first_close and self._terminal is False
            self._items.clear()
            self._starts.clear()
            self._released = self._received
            self._changed.notify_all()
        if first_close:
            self._demand.signal()
        if self.endpoint is not None:
            self.endpoint.close()


def stream_source(
    publisher: Publisher[Any],
    schema: SchemaLike,
    *,
    spark: SparkSession | None = None,
    max_rows_per_batch: int = 10_000,
    host: str = "127.0.0.1",
    port: int = 0,
) -> DataFrame:
    """Return a streaming DataFrame (``df.isStreaming``) whose rows are ``publisher``'s items.

    Items are rows (mappings, tuples in the schema's order, ``pyspark.sql.Row``)
    or columnar batches (``pyarrow.RecordBatch``/``Table``, ``pandas.DataFrame``),
    mixed if need be, converted to ``schema``. flowpy registers the Python
    data source ``flowpy`` with the session and serves the stream from this
    process over a socket (``host``:``port``) that Spark's reader connects
    to, presenting a random token made for this stream.

    Demand follows Spark: nothing is requested before a query starts
    reading; then the source requests items so that it holds or awaits
    one micro-batch (Spark's read limit: ``max_rows_per_batch`` rows) beyond
    what Spark has planned: rows in one request, columnar items one at a
    time. A micro-batch takes what has arrived, up to the limit. Items are
    held until Spark commits the micro-batch that read them, so a retried
    task reads the same rows again. The source holds at most
    :data:`HELD_BATCHES` (3) micro-batches: the one Spark runs, the previous
    one until Spark commits it (Spark commits a batch when it plans the
    next), and the next one, requested ahead; for columnar items, plus the
    rest of one item.

    The publisher's completion ends the input: a query under
    ``Trigger.AvailableNow`` finishes, ``processAllAvailable()`` returns, a
    query under another trigger sees no more rows. Its error fails the
    query, after the rows received before it, with a message that holds the
    error's type and text. Stopping the query, or its failure, cancels the
    subscription, lets go of every held item and closes the socket: a
    stream feeds one query run; make a new one to run a query again.

    Args:
        publisher: the items; subscribed to at once.
        schema: the rows' Spark schema, a ``StructType`` or a DDL string.
        spark: the session (classic or Spark Connect); ``None`` means the active one.
        max_rows_per_batch: the most rows of one micro-batch.
        host: the address to serve on, which Spark's driver and executors
            must reach; 127.0.0.1 keeps the stream on this machine.
        port: the port to serve on; 0 takes a free one.

    Returns:
        The streaming DataFrame; start one query on it with ``writeStream``.

    Raises:
        TypeError: if ``publisher`` is not a Publisher, ``schema`` is not a
            schema, or ``max_rows_per_batch`` is not an int.
        ValueError: if ``max_rows_per_batch`` is not positive.
        OSError: if ``host``:``port`` cannot be bound.
    """
    require_publisher(publisher)
    max_rows = require_positive_int(max_rows_per_batch, "max_rows_per_batch")
    session = _session(spark)
    struct = struct_of(schema)
    stream = _SourceStream(struct, max_rows)
    endpoint = stream.endpoint = Endpoint("stream_source", stream.serve, host=host, port=port)
    try:
        register(session)
        frame = (
            session.readStream.format(FORMAT)
            .schema(struct)
            .options(**endpoint.options(), max_rows=str(max_rows), partition_rows=str(max_rows))
            .load()
        )
    except BaseException:
        endpoint.close()
        raise
    _streams.add(stream)
    close_at_exit(stream)
    publisher.subscribe(stream)
    return frame


def _session(spark: SparkSession | None) -> SparkSession:
    if spark is not None:
        return spark
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is None:
        from flowpy.spark._session import local_session

        return local_session()
    return active
