"""ParquetSink: a Subscriber that writes what it receives to Parquet, batch by batch."""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, get_args

from flowpy._signals import call_subscription
from flowpy.executors import DEFAULT, resolve_execute
from flowpy.spark._arrow import ArrowBatches, SchemaLike
from flowpy.spark._batching import BatchingSubscriber, Row, Terminal

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


class ParquetSink(BatchingSubscriber):
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
            TypeError: if ``spark`` or ``path`` is ``None``, ``schema`` has the wrong type,
                or ``batch_size`` is not an int.
            ValueError: if ``batch_size`` is not positive or ``mode`` is unknown.
        """
        if spark is None or path is None:
            raise TypeError("spark and path must not be None")
        super().__init__(batch_size, resolve_execute(DEFAULT))
        if mode not in get_args(WriteMode):
            raise ValueError(f"mode must be one of 'append', 'overwrite', 'error', got {mode!r}")
        self._path = str(path)
        self._mode: WriteMode = mode
        self._spark = spark
        self._batches = ArrowBatches(spark, schema)
        self._result: Future[SinkStats] = Future()
        self._result.add_done_callback(self._result_done)
        # --- Touched only by the worker task --------------------------------
        self._directory: _ParquetDirectory | None = None  # prepared by the first _idle or _process
        self._rows = 0  # rows committed
        self._committed = 0  # batches committed
        self._started = 0.0  # perf_counter() at on_subscribe

    @property
    def result(self) -> Future[SinkStats]:
        """The future of the stats; fails with :class:`ParquetSinkError`. Cancel it to stop the sink."""
        return self._result

    @property
    def path(self) -> str:
        """The output directory."""
        return self._path

    # -- The worker -----------------------------------------------------------------

    def _subscribed(self) -> None:
        self._started = time.perf_counter()
        self._kick()  # prepare the path, then request the first batch

    def _process(self, batch: list[Row]) -> bool:
        directory = self._prepared()
        if directory is None:
            return False
        try:
            directory.commit(self._batches.dataframe(batch), self._committed)
        except BaseException as exc:
            self._fail(exc, f"writing batch {self._committed + 1} ({len(batch)} rows) failed")
            return False
        self._committed += 1
        self._rows += len(batch)
        return True

    def _idle(self, terminal: Terminal) -> None:
        if self._prepared() is None:
            return
        if terminal is False:
            assert self._upstream is not None
            call_subscription(self._upstream, self._batch_size)  # only after the last commit
        elif terminal is True:
            stats = SinkStats(self._rows, self._committed, time.perf_counter() - self._started)
            self._settle(lambda: self._result.set_result(stats))
        else:
            error = self._error(f"upstream signalled on_error: {terminal!r}")
            error.__cause__ = terminal
            self._settle(lambda: self._result.set_exception(error))

    def _prepared(self) -> _ParquetDirectory | None:
        """Return the output directory, applying the mode on first use; ``None`` if that failed."""
        if self._directory is None:
            try:
                directory = _ParquetDirectory(self._spark, self._path)
                directory.prepare(self._mode)
            except BaseException as exc:
                self._fail(exc, f"could not prepare {self._path!r}")
                return None
            self._directory = directory
        return self._directory

    def _fail(self, exc: BaseException, what: str) -> None:
        upstream = self._stop()
        if upstream is not None:
            call_subscription(upstream, None)
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
        if result.cancelled():
            upstream = self._stop()
            if upstream is not None:
                call_subscription(upstream, None)

    def __repr__(self) -> str:
        return f"<ParquetSink path={self._path!r} batch_size={self._batch_size} mode={self._mode!r}>"
