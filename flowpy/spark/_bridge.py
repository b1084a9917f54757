"""The Spark side of the streaming bridge: a Python data source that talks to the app over a socket.

:func:`~flowpy.spark.stream_source` and :func:`~flowpy.spark.stream_publisher`
register :class:`FlowpyDataSource` under the name ``flowpy``. Its stream
reader (driver side: offsets, partitions, commits; executor side: ``read``)
and its stream writer (executors: ``write``; driver: ``commit``/``abort``)
run in Spark's Python workers, on the driver and the executors, and reach
the app that serves the stream at the ``host``/``port`` of the data source's
options, presenting the stream's ``token`` on every connection.

This module is shipped to Spark *by value* (cloudpickle): it imports
nothing from flowpy, only the standard library, PySpark and pyarrow, so
Spark's Python workers need PySpark and pyarrow, not flowpy. The app side
(:mod:`flowpy.spark._endpoint`) uses the same framing functions.

Wire protocol. Every message is a frame: an 8-byte big-endian length, then
the payload. A connection starts with a JSON hello,
``{"token", "op", "stream", ...}``, answered by ``{"ok": true, ...}`` or
``{"error": "<one line>"}``. Then, by ``op``:

* ``control`` (the stream reader on the driver; one connection for the
  query's life): JSON requests ``{"call": "initial" | "latest" |
  "available_now" | "commit" | "stop", ...}``, each answered by one JSON frame.
  The app takes the connection's end for the end of the query.
* ``read`` (a read task): the hello names the rows ``[start, end)``; the
  app answers with one frame holding an Arrow IPC stream of those rows.
* ``write`` (a write task): frames of the Arrow schema, then of record
  batches (IPC messages), then an empty frame; the app answers
  ``{"ok": true, "rows": n}`` once it has all of them. The app reads the
  frames only as fast as its buffer allows: a full buffer blocks the task.
* ``commit`` / ``abort`` (the driver, once per micro-batch): the hello
  carries the batch id and the task attempts whose commit messages Spark
  collected; it is answered once, when the app has acted on it.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import struct
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql.types import StructType

__all__ = [
    "BATCH_ID_PROPERTY",
    "FORMAT",
    "FlowpyDataSource",
    "offset_row",
    "recv_frame",
    "recv_json",
    "send_frame",
    "send_json",
    "send_table",
]

FORMAT = "flowpy"
"""The name the data source is registered under (``readStream.format("flowpy")``)."""

BATCH_ID_PROPERTY = "streaming.sql.batchId"
"""The local property through which Spark tells a micro-batch's tasks its batch id."""

CONNECT_SECONDS = 30.0
"""How long the Spark side waits for the app to accept a connection and answer its hello."""

MAX_HELLO_BYTES = 1 << 16
"""The largest JSON frame accepted before a connection has shown its token."""

_LENGTH = "!Q"  # a format, not a struct.Struct: this module is pickled by value, and a Struct is not picklable
_LENGTH_SIZE = 8
_SMALL_FRAME = 1 << 16  # frames up to this size are copied behind their header and sent in one call
_GONE = "the app serving it is gone or stopped serving it (its query ended, the stream was closed, or the app exited)"


# -- Framing ---------------------------------------------------------------------------


def send_frame(sock: socket.socket, payload: bytes | bytearray | memoryview | Any) -> None:
    """Send one frame: the payload's length, then the payload (bytes or an Arrow buffer)."""
    view = memoryview(payload)
    header = struct.pack(_LENGTH, view.nbytes)
    if view.nbytes <= _SMALL_FRAME:
        sock.sendall(header + view)  # one segment: no wait on a delayed acknowledgement
    else:
        sock.sendall(header)
        sock.sendall(view)


def send_table(sock: socket.socket, table: pa.Table) -> None:
    """Send ``table`` as one frame holding an Arrow IPC stream, written straight to the socket.

    The stream's length is measured first (without copying any data), so the
    stream is never assembled in memory: a growing buffer would copy and
    page in the whole stream once more.
    """
    import pyarrow as pa

    mock = pa.MockOutputStream()
    with pa.ipc.new_stream(mock, table.schema) as writer:
        writer.write_table(table)
    sock.sendall(struct.pack(_LENGTH, mock.size()))
    with sock.makefile("wb") as out, pa.ipc.new_stream(out, table.schema) as writer:
        writer.write_table(table)


def _recv_exact(sock: socket.socket, size: int) -> bytearray:
    buffer = bytearray(size)
    view = memoryview(buffer)
    received = 0
    while received < size:
        got = sock.recv_into(view[received:], size - received)
        if got == 0:
            raise ConnectionError(f"the connection closed after {received} of {size} bytes")
        received += got
    return buffer


def recv_frame(sock: socket.socket, limit: int | None = None) -> bytearray:
    """Receive one frame's payload.

    Raises:
        EOFError: if the connection closed between frames.
        ConnectionError: if it closed inside a frame.
        ValueError: if the frame is longer than ``limit``.
    """
    header = bytearray()
    while len(header) < _LENGTH_SIZE:
        chunk = sock.recv(_LENGTH_SIZE - len(header))
        if not chunk:
            if header:
                raise ConnectionError("the connection closed inside a frame header")
            raise EOFError("the connection closed")
        header += chunk
    (size,) = struct.unpack(_LENGTH, header)
    if limit is not None and size > limit:
        raise ValueError(f"a frame of {size} bytes is over the limit of {limit}")
    return _recv_exact(sock, size)


def send_json(sock: socket.socket, message: Mapping[str, Any]) -> None:
    """Send a JSON object as one frame."""
    send_frame(sock, json.dumps(message).encode())


def recv_json(sock: socket.socket, limit: int | None = None) -> dict[str, Any]:
    """Receive one frame holding a JSON object.

    Raises:
        EOFError, ConnectionError: as :func:`recv_frame`.
        ValueError: if the frame is over ``limit`` or is not a JSON object.
    """
    message = json.loads(recv_frame(sock, limit))
    if not isinstance(message, dict):
        raise ValueError(f"expected a JSON object, got {type(message).__name__}")
    return message


def offset_row(offset: Mapping[str, Any], stream: str) -> int:
    """The row an offset points at, in ``stream``'s numbering: 0 for an offset of another stream.

    A query restarted from its checkpoint resumes from the offsets of the
    stream that served its previous run; their rows are not this stream's.
    """
    return int(offset.get("row", 0)) if offset.get("stream") == stream else 0


# -- Connections -----------------------------------------------------------------------


class _Options:
    """The options every connection needs, read from the data source's options."""

    def __init__(self, options: Mapping[str, str]) -> None:
        missing = [key for key in ("host", "port", "token", "stream", "kind") if key not in options]
        if missing:
            raise ValueError(
                f"the flowpy data source lacks the options {', '.join(missing)}: "
                "make the stream with flowpy.spark.stream_source or stream_publisher"
            )
        self.host = options["host"]
        self.port = int(options["port"])
        self.token = options["token"]
        self.stream = options["stream"]
        self.kind = options["kind"]
        self.values = dict(options)

    @property
    def name(self) -> str:
        return f"flowpy {self.kind} {self.stream} at {self.host}:{self.port}"

    def connect(self, op: str, **fields: Any) -> socket.socket:
        """Open a connection, present the token and ``fields``; return the socket once the app accepted.

        Raises:
            ConnectionError: if the app cannot be reached or closes the connection.
            RuntimeError: with the app's one-line reason, if it refuses the request.
        """
        sock = self._open(op, fields)
        try:
            self.answer(sock)
        except BaseException:
            sock.close()
            raise
        return sock

    def _open(self, op: str, fields: Mapping[str, Any]) -> socket.socket:
        """Connect and send the hello."""
        try:
            sock = socket.create_connection((self.host, self.port), timeout=CONNECT_SECONDS)
        except OSError as exc:
            reason = (exc.strerror or type(exc).__name__).lower()
            raise ConnectionError(f"cannot reach {self.name}: {reason}; {_GONE}") from None
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            send_json(sock, {"token": self.token, "op": op, "stream": self.stream, **fields})
        except OSError as exc:
            sock.close()
            raise ConnectionError(f"lost the connection to {self.name}: {exc}; {_GONE}") from None
        sock.settimeout(None)
        return sock

    def answer(self, sock: socket.socket) -> dict[str, Any]:
        """Receive the app's JSON answer; raise its error, if it sent one.

        Raises:
            ConnectionError: if the connection closed first.
            RuntimeError: with the app's one-line error.
        """
        try:
            reply = recv_json(sock)
        except (EOFError, OSError) as exc:
            raise ConnectionError(f"lost the connection to {self.name}: {exc}; {_GONE}") from None
        if "error" in reply:
            raise RuntimeError(str(reply["error"]))
        return reply

    def call_once(self, op: str, **fields: Any) -> dict[str, Any]:
        """Send one request as the hello of its own connection; return the app's one answer."""
        with self._open(op, fields) as sock:
            return self.answer(sock)


# -- Reading: the app's publisher as a streaming source ------------------------------------


class _Reader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """The stream reader: offsets count rows; the app keeps them until ``commit``.

    On the driver one instance serves the query, over one control connection
    opened by its first call and closed by ``stop`` (or by the worker's
    exit, which the app sees the same way). ``read`` runs on executors, on
    instances that never open the control connection.
    """

    def __init__(self, options: Mapping[str, str]) -> None:
        self._options = _Options(options)
        self._control: socket.socket | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"_options": self._options, "_control": None}  # a socket stays in its process

    def _call(self, call: str, **fields: Any) -> dict[str, Any]:
        if self._control is None:
            self._control = self._options.connect("control")
        try:
            send_json(self._control, {"call": call, **fields})
        except OSError as exc:
            raise ConnectionError(f"lost the connection to {self._options.name}: {exc}; {_GONE}") from None
        return self._options.answer(self._control)

    def initialOffset(self) -> dict[str, Any]:
        offset: dict[str, Any] = self._call("initial")["offset"]
        return offset

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(int(self._options.values["max_rows"]))

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        everything = isinstance(limit, ReadAllAvailable)
        offset: dict[str, Any] = self._call("latest", start=start, max_rows=max_rows, everything=everything)["offset"]
        return offset

    def prepareForTriggerAvailableNow(self) -> None:
        self._call("available_now")

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        stream = self._options.stream
        first, last = offset_row(start, stream), offset_row(end, stream)
        size = int(self._options.values["partition_rows"])
        return [InputPartition((row, min(row + size, last))) for row in range(first, last, size)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        import pyarrow as pa

        first, last = partition.value
        with self._options.connect("read", start=first, end=last, pid=os.getpid()) as sock:
            try:
                payload = recv_frame(sock)
            except (EOFError, OSError) as exc:
                raise ConnectionError(
                    f"lost the connection to {self._options.name} while reading rows {first} to {last}: {exc}"
                ) from None
        yield from pa.ipc.open_stream(pa.py_buffer(payload))

    def commit(self, end: dict[str, Any]) -> None:
        self._call("commit", end=end)

    def stop(self) -> None:
        control, self._control = self._control, None
        if control is not None:
            with control, contextlib.suppress(OSError):  # the app may be gone already
                send_json(control, {"call": "stop"})


# -- Writing: a streaming query into the app's publisher ------------------------------------


class _Writer(DataSourceStreamArrowWriter):
    """The stream writer: tasks send their record batches; the driver's commit releases them to the app."""

    def __init__(self, options: Mapping[str, str]) -> None:
        self._options = _Options(options)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        from pyspark import TaskContext

        context = TaskContext.get()
        assert context is not None, "a stream writer's write runs in a Spark task"
        batch_id = int(context.getLocalProperty(BATCH_ID_PROPERTY) or -1)
        task = context.taskAttemptId()
        rows = 0
        with self._options.connect(
            "write",
            batch=batch_id,
            task=task,
            partition=context.partitionId(),
            attempt=context.attemptNumber(),
            pid=os.getpid(),
        ) as sock:
            try:
                schema_sent = False
                for batch in iterator:
                    if batch.num_rows == 0:
                        continue
                    if not schema_sent:
                        send_frame(sock, batch.schema.serialize())
                        schema_sent = True
                    send_frame(sock, batch.serialize())
                    rows += batch.num_rows
                send_frame(sock, b"")
            except OSError as exc:
                raise ConnectionError(
                    f"lost the connection to {self._options.name} while writing batch {batch_id}: {exc}; {_GONE}"
                ) from None
            self._options.answer(sock)
        message = WriterCommitMessage()
        message.__dict__.update(stream=self._options.stream, batch=batch_id, task=task, rows=rows)
        return message

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        tasks = [message.__dict__["task"] for message in messages if message is not None]
        self._options.call_once("commit", batch=batchId, tasks=tasks)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        tasks = [message.__dict__["task"] for message in messages if message is not None]
        self._options.call_once("abort", batch=batchId, tasks=tasks)


class FlowpyDataSource(DataSource):
    """A flowpy stream as a Spark data source: read by ``stream_source``, written by ``stream_publisher``."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> str:
        raise ValueError("a flowpy stream needs its schema: make it with flowpy.spark.stream_source")

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return _Reader(self.options)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        return _Writer(self.options)
