"""ParquetSink: a Subscriber that writes what it receives to Parquet, batch by batch."""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, get_args

from flowpy.executors import as_execute, default_executor
from flowpy.flow import Subscriber, Subscription
from flowpy.spark._arrow import ArrowBatches, SchemaLike

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["ParquetSink", "ParquetSinkError", "SinkStats", "WriteMode", "staging_name"]

WriteMode = Literal["append", "overwrite", "error"]
"""What the sink does with data already at its path: keep it, delete it first, or refuse to start."""

def staging_name(name: str) -> str:
    """Return the name of the staging directory beside the output directory ``name``.

    Batches are written there before they are moved into place. It is a
    sibling, not a child, so that a reader listing the output directory
    recursively never meets Spark's temporary files; its leading ``_`` hides
    it from readers of the parent directory.
    """
    return f"_{name}_flowpy_staging"


@dataclass(frozen=True)
class SinkStats:
    """What a sink wrote, once its stream completed.

    Attributes:
        rows: the rows written, each exactly once.
        batches: the Parquet files committed, one per batch.
        seconds: the time from ``on_subscribe`` to the last commit.
    """

    rows: int
    batches: int
    seconds: float


class ParquetSinkError(RuntimeError):
    """The sink stopped before writing everything it received.

    The rows counted in :attr:`rows_committed` are in the output, each
    exactly once; the rest of what the sink received was not written.
    ``__cause__`` holds the error that stopped it.

    Attributes:
        rows_committed: the rows of the batches that were committed.
        batches_committed: the batches (files) that were committed.
    """

    def __init__(self, message: str, *, rows_committed: int, batches_committed: int) -> None:
        super().__init__(message)
        self.rows_committed = rows_committed
        self.batches_committed = batches_committed


class _ParquetDirectory:
    """The sink's output directory on any Hadoop file system (local, HDFS, S3, ...).

    A batch is written by Spark as a single file into its own directory
    under the staging directory (see :func:`staging_name`), then renamed
    into the output directory: a reader lists either the whole batch or none
    of it.
    """

    def __init__(self, spark: SparkSession, path: str) -> None:
        jvm: Any = spark._jvm  # the Hadoop FileSystem API, through py4j
        self._spark = spark
        self._path = path
        self._hadoop_path = jvm.org.apache.hadoop.fs.Path
        self._root = self._hadoop_path(path)
        self._fs = self._root.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
        parent = self._root.getParent()
        self._staging = (
            self._hadoop_path(self._root, "_flowpy_staging")  # a file system's root directory
            if parent is None
            else self._hadoop_path(parent, staging_name(self._root.getName()))
        )
        self._run = uuid.uuid4().hex[:12]  # tells this sink's files from earlier runs' files

    def prepare(self, mode: WriteMode) -> None:
        """Apply ``mode`` to what is at the path, then create the directory.

        Raises:
            FileExistsError: if ``mode`` is ``"error"`` and the path holds data.
        """
        if self._fs.exists(self._root):
            if mode == "overwrite":
                self._fs.delete(self._root, True)
            elif mode == "error" and any(
                not name.startswith(("_", ".")) for name in self._names(self._root)
            ):
                raise FileExistsError(
                    f"ParquetSink path {self._path!r} already holds data; use mode='append' or 'overwrite'"
                )
        self._fs.mkdirs(self._root)

    def commit(self, df: DataFrame, sequence: int) -> None:
        """Write ``df`` as one Parquet file and move it into the output directory.

        Raises:
            OSError: if the written file cannot be found or moved into place.
            Exception: whatever Spark raised while writing.
        """
        name = f"{self._run}-{sequence:06d}"
        staging = self._hadoop_path(self._staging, name)
        df.coalesce(1).write.mode("errorifexists").parquet(staging.toString())
        parts = [part for part in self._names(staging) if part.startswith("part-") and part.endswith(".parquet")]
        if len(parts) != 1:
            raise OSError(f"ParquetSink expected one Parquet file in {staging.toString()!r}, got {parts!r}")
        source = self._hadoop_path(staging, parts[0])
        target = self._hadoop_path(self._root, f"part-{name}.parquet")
        if not self._fs.rename(source, target):
            raise OSError(f"ParquetSink could not move {source.toString()!r} to {target.toString()!r}")
        self._fs.delete(staging, True)
        if not self._fs.listStatus(self._staging):
            self._fs.delete(self._staging, False)  # empty: leave nothing behind

    def _names(self, directory: Any) -> list[str]:
        return [status.getPath().getName() for status in self._fs.listStatus(directory)]


class ParquetSink(Subscriber[Mapping[str, Any]]):
    """Writes the rows it receives (mappings) to Parquet, ``batch_size`` rows per Spark write.

    The sink requests ``batch_size`` rows, converts a full batch to one
    Arrow table, has Spark write it as one Parquet file and moves the file
    into ``path``; only after that commit does it request the next batch. So
    at most ``batch_size`` rows are outstanding, and Spark's write speed is
    the backpressure: a producer submitting to a bounded publisher blocks
    while a write is under way. On ``on_complete`` the last, partial batch is
    written and :attr:`result` gets the :class:`SinkStats`.

    Nothing received is lost silently: every row is written exactly once, or
    :attr:`result` fails with :class:`ParquetSinkError`, which says how many
    rows were committed. A failed write cancels the upstream subscription. An
    upstream ``on_error`` writes the rows received so far, then fails
    :attr:`result` with the upstream error as the cause. Cancelling
    :attr:`result` cancels the upstream subscription and drops the rows of
    the batch not yet written.

    Readers of ``path`` see whole batches only: a batch is one file, written
    by Spark in a staging directory beside ``path`` and moved into place by
    one rename once complete (atomic on local and HDFS file systems).

    Protocol:   rules 2.1-2.13 as a subscriber; a second ``on_subscribe`` is
                cancelled (rule 2.5).
    Threading:  signals may arrive on any thread; writes run on the default
                executor, one at a time.
    """

    def __init__(
        self,
        spark: SparkSession,
        path: str,
        *,
        batch_size: int = 10_000,
        schema: SchemaLike | None = None,
        mode: WriteMode = "append",
    ) -> None:
        """Args:
            spark: the session that writes.
            path: the output directory, any URI Spark can write (``file:``, ``hdfs:``, ``s3a:``...).
            batch_size: rows per Parquet file, and per ``request``.
            schema: the rows' Spark schema; ``None`` infers it from the first batch.
            mode: ``"append"``, ``"overwrite"`` (delete the path first) or ``"error"``
                (refuse a path that holds data); applied before the first batch.

        Raises:
            TypeError: if ``spark`` or ``path`` is ``None``, or ``schema`` has the wrong type.
            ValueError: if ``batch_size`` is not a positive int or ``mode`` is unknown.
        """
        if spark is None or path is None:
            raise TypeError("spark and path must not be None")
        if type(batch_size) is not int or batch_size <= 0:
            raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
        if mode not in get_args(WriteMode):
            raise ValueError(f"mode must be one of 'append', 'overwrite', 'error', got {mode!r}")
        self._path = str(path)
        self._batch_size = batch_size
        self._mode: WriteMode = mode
        self._spark = spark
        self._batches = ArrowBatches(spark, schema)
        self._execute = as_execute(default_executor())
        self._result: Future[SinkStats] = Future()
        self._result.add_done_callback(self._result_done)
        self._lock = threading.Lock()
        # --- Guarded by self._lock ----------------------------------------
        self._subscription: Subscription | None = None  # set once by on_subscribe
        self._buffer: list[Mapping[str, Any]] = []  # received, not yet written
        self._writing = False  # the writer task is queued or running; it alone writes
        self._terminal: BaseException | bool = False  # True: on_complete; an error: on_error
        self._stopped = False  # a write failed or result was cancelled: drop everything
        # --- Touched only by the writer task -------------------------------
        self._directory: _ParquetDirectory | None = None
        self._rows = 0
        self._committed = 0
        self._started = 0.0

    @property
    def result(self) -> Future[SinkStats]:
        """The future of the stats; fails with :class:`ParquetSinkError`. Cancel it to stop the sink."""
        return self._result

    @property
    def path(self) -> str:
        """The output directory."""
        return self._path

    @property
    def batch_size(self) -> int:
        """Rows per Parquet file and per request."""
        return self._batch_size

    # -- Subscriber ---------------------------------------------------------------

    def on_subscribe(self, subscription: Subscription) -> None:
        """Start the sink: prepare the path, then request the first batch."""
        if subscription is None:
            raise TypeError("subscription must not be None (rule 2.13)")
        with self._lock:
            duplicate = self._subscription is not None or self._stopped
            if not duplicate:
                self._subscription = subscription
                self._writing = True
        if duplicate:
            subscription.cancel()  # rule 2.5
            return
        self._started = time.perf_counter()
        self._execute(self._write_loop)

    def on_next(self, item: Mapping[str, Any]) -> None:
        """Buffer ``item``; a full batch starts a write."""
        if item is None:
            raise TypeError("item must not be None (rule 2.13)")
        with self._lock:
            if self._stopped:
                return
            self._buffer.append(item)
            start = not self._writing and len(self._buffer) >= self._batch_size
            if start:
                self._writing = True
        if start:
            self._execute(self._write_loop)

    def on_error(self, error: BaseException) -> None:
        """Write the rows received so far, then fail :attr:`result` with ``error`` as cause."""
        if error is None:
            raise TypeError("error must not be None (rule 2.13)")
        self._end(error)

    def on_complete(self) -> None:
        """Write the last partial batch, then complete :attr:`result`."""
        self._end(True)

    def _end(self, terminal: BaseException | bool) -> None:
        with self._lock:
            if self._terminal is not False or self._stopped:
                return
            self._terminal = terminal
            start = not self._writing
            self._writing = True
        if start:
            self._execute(self._write_loop)

    # -- The writer -----------------------------------------------------------------

    def _write_loop(self) -> None:
        """Write full batches (and, at the end, the rest), then request more or finish."""
        try:
            if self._directory is None:
                directory = _ParquetDirectory(self._spark, self._path)
                directory.prepare(self._mode)
                self._directory = directory
        except BaseException as exc:
            self._fail(exc, f"could not prepare {self._path!r}")
            return
        while True:
            with self._lock:
                if self._stopped:
                    self._writing = False
                    return
                batch: list[Mapping[str, Any]] | None = None
                if len(self._buffer) >= self._batch_size:
                    batch = self._buffer[: self._batch_size]
                    del self._buffer[: self._batch_size]
                elif self._terminal is not False and self._buffer:
                    batch, self._buffer = self._buffer, []
                terminal = self._terminal
                subscription = self._subscription
                if batch is None and terminal is False:
                    self._writing = False
            if batch is not None:
                try:
                    self._directory.commit(self._batches.dataframe(batch), self._committed)
                except BaseException as exc:
                    self._fail(exc, f"writing batch {self._committed + 1} ({len(batch)} rows) failed")
                    return
                self._committed += 1
                self._rows += len(batch)
            elif terminal is False:
                assert subscription is not None
                subscription.request(self._batch_size)  # only after the commit
                return
            else:
                self._finish(terminal)
                return

    def _finish(self, terminal: BaseException | bool) -> None:
        if terminal is True:
            stats = SinkStats(self._rows, self._committed, time.perf_counter() - self._started)
            self._settle(lambda: self._result.set_result(stats))
            return
        assert isinstance(terminal, BaseException)
        error = self._error(f"upstream signalled on_error: {terminal!r}")
        error.__cause__ = terminal
        self._settle(lambda: self._result.set_exception(error))

    def _fail(self, exc: BaseException, what: str) -> None:
        with self._lock:
            self._stopped = True
            self._writing = False
            self._buffer = []
            subscription = self._subscription
        if subscription is not None:
            subscription.cancel()
        error = self._error(f"{what}: {exc!r}")
        error.__cause__ = exc
        self._settle(lambda: self._result.set_exception(error))

    def _error(self, what: str) -> ParquetSinkError:
        return ParquetSinkError(
            f"ParquetSink {self._path!r} committed {self._rows} rows "
            f"in {self._committed} batches, then {what}",
            rows_committed=self._rows,
            batches_committed=self._committed,
        )

    def _settle(self, settle: Callable[[], None]) -> None:
        with contextlib.suppress(InvalidStateError):  # result was cancelled by its owner
            settle()

    def _result_done(self, result: Future[SinkStats]) -> None:
        if not result.cancelled():
            return
        with self._lock:
            self._stopped = True
            self._buffer = []
            subscription = self._subscription
        if subscription is not None:
            subscription.cancel()

    def __repr__(self) -> str:
        return f"<ParquetSink path={self._path!r} batch_size={self._batch_size} mode={self._mode!r}>"
