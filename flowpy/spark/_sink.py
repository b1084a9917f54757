"""ParquetSink: a Subscriber that writes what it receives to Parquet, batch by batch."""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, get_args
from urllib.parse import urlsplit

from flowpy._signals import call_subscription
from flowpy.executors import DEFAULT, resolve_execute
from flowpy.spark._arrow import ArrowBatches, SchemaLike
from flowpy.spark._batching import BatchingSubscriber, Item, Terminal
from flowpy.spark._session import is_connect

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.fs as pafs
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["ParquetSink", "ParquetSinkError", "SinkStats", "SinkWriter", "WriteMode", "choose_writer", "describe_error"]

WriteMode = Literal["append", "overwrite", "error"]
"""What the sink does with data already at its path: keep it, replace it, or refuse to start."""

SinkWriter = Literal["auto", "spark", "pyarrow"]
"""Who writes the sink's files: Spark's file writer, this process with pyarrow, or (``"auto"``) the fastest
that sees the path as Spark does (see :func:`choose_writer`)."""

# Options of every batch's write. They reach the Hadoop configuration of that
# write only: no _SUCCESS marker per batch (completion is the sink's result,
# and a marker per batch would be rewritten by every batch), and the commit
# algorithm whose job commit moves each finished file into place by one rename.
_WRITE_OPTIONS = {
    "mapreduce.fileoutputcommitter.marksuccessfuljobs": "false",
    "mapreduce.fileoutputcommitter.algorithm.version": "1",
}


def describe_error(error: BaseException) -> str:
    """Return ``error`` as one line: its type and the first meaningful line of its message."""
    lines = [line.strip().lstrip(": ").strip() for line in str(error).splitlines()]
    lines = [line for line in lines if line and not line.startswith("An error occurred while calling")]
    text = lines[0] if lines else ""
    if len(text) > 300:
        text = text[:297] + "..."
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


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


class _Directory(ABC):
    """The sink's output directory: commits one Arrow table at a time as one Parquet file."""

    def __init__(self) -> None:
        # The mode of the next write: "overwrite" until the first commit of
        # mode="overwrite" has replaced the path, then "append".
        self._next_mode = "append"

    def prepare(self, mode: WriteMode) -> None:
        """Apply ``mode``: refuse a path that holds data (``"error"``), or replace it at the first commit.

        Raises:
            FileExistsError: if ``mode`` is ``"error"`` and the path holds data.
        """
        self._check(mode)
        self._next_mode = "overwrite" if mode == "overwrite" else "append"

    @property
    def replaced(self) -> bool:
        """Whether a pending ``"overwrite"`` has been applied (always, for the other modes)."""
        return self._next_mode == "append"

    @abstractmethod
    def _check(self, mode: WriteMode) -> None:
        """Raise if the path cannot be written in ``mode`` (see :meth:`prepare`)."""

    @abstractmethod
    def commit(self, table: pa.Table, sequence: int) -> None:
        """Write ``table`` (batch number ``sequence``, from 0) as one Parquet file that appears at once.

        Raises:
            Exception: whatever the write raised; nothing of this batch is left visible.
        """

    @abstractmethod
    def commit_empty(self, batches: ArrowBatches) -> None:
        """Replace the path with an empty file of the stream's schema (``"overwrite"`` of an empty stream)."""


def holds_files(spark: SparkSession, path: str) -> bool:
    """Whether ``path`` has a visible file; asked of Spark, which sees the path as its writes will."""
    from pyspark.errors import AnalysisException

    try:
        found = spark.read.format("binaryFile").load(path).select("path").limit(1).collect()
    except AnalysisException as exc:
        if exc.getCondition() == "PATH_NOT_FOUND":
            return False
        raise
    return bool(found)


_FILE_EXISTS = "ParquetSink path {path!r} already holds data; use mode='append' or 'overwrite'"


class _SparkDirectory(_Directory):
    """The output directory written through Spark's own file writer (classic or Connect alike).

    A batch is one Spark write of one partition (``coalesce(1)``) in append
    mode: Spark's task writes the file under ``<path>/_temporary/``, and the
    job commit moves the finished file into ``path`` by one rename, under a
    name unique to that write (``part-00000-<write id>-c000...parquet``). A
    reader listing ``path`` sees the whole batch or none of it; a failed
    write is aborted by Spark, which deletes its ``_temporary`` files.
    """

    def __init__(self, spark: SparkSession, path: str, batches: ArrowBatches) -> None:
        self._spark = spark
        self._path = path
        self._batches = batches
        super().__init__()

    def _check(self, mode: WriteMode) -> None:
        if mode == "error" and holds_files(self._spark, self._path):
            raise FileExistsError(_FILE_EXISTS.format(path=self._path))

    def commit(self, table: pa.Table, sequence: int) -> None:
        self.write(self._batches.frame(table), sequence)

    def commit_empty(self, batches: ArrowBatches) -> None:
        self.write(self._spark.createDataFrame([], batches.struct), 0)

    def write(self, df: DataFrame, sequence: int) -> None:
        """Have Spark write ``df`` as one file in one job; the job commit renames it into place."""
        df.coalesce(1).write.mode(self._next_mode).options(**_WRITE_OPTIONS).parquet(self._path)
        self._next_mode = "append"


def _parquet_file(table: pa.Table, filesystem: pafs.FileSystem, path: str) -> None:
    """Write ``table`` to ``path`` on ``filesystem`` as one Snappy-compressed Parquet file."""
    import pyarrow.parquet as pq

    with filesystem.open_output_stream(path) as out:
        pq.write_table(table, out, compression="snappy")


class _ArrowDirectory(_Directory):
    """The output directory written by this process with pyarrow (``pyarrow.fs``), no Spark job per batch.

    A batch is written to a hidden staging file in ``path``
    (``_flowpy-staging-<run>-<n>.parquet``, skipped by readers for its
    ``_``), then moved to its visible name (``part-<n>-<run>.snappy.parquet``)
    by one rename in the same directory: atomic on local file systems and
    HDFS; on object stores the object appears whole. ``<n>`` is the batch
    number, so the names of one sink sort in commit order; ``<run>`` is
    unique per sink. A failed write deletes its staging file.
    """

    def __init__(self, path: str) -> None:
        import pyarrow.fs as pafs

        if urlsplit(path).scheme == "":
            self._fs: pafs.FileSystem = pafs.LocalFileSystem()
            self._root = os.path.abspath(path)
        else:
            self._fs, self._root = pafs.FileSystem.from_uri(path)
        self._path = path
        self._run = uuid.uuid4().hex
        super().__init__()

    def _check(self, mode: WriteMode) -> None:
        import pyarrow.fs as pafs

        kind = self._fs.get_file_info(self._root).type
        if kind == pafs.FileType.File:
            raise NotADirectoryError(f"ParquetSink path {self._path!r} is a file, not a directory")
        if mode == "error" and self._entries(visible=True):
            raise FileExistsError(_FILE_EXISTS.format(path=self._path))

    def commit(self, table: pa.Table, sequence: int) -> None:
        self._fs.create_dir(self._root, recursive=True)
        staging = f"{self._root}/_flowpy-staging-{self._run}-{sequence:05d}.parquet"
        final = f"{self._root}/part-{sequence:05d}-{self._run}.snappy.parquet"
        try:
            _parquet_file(table, self._fs, staging)
            if self._next_mode == "overwrite":
                self._delete_all_but(staging)
            self._fs.move(staging, final)
        except BaseException:
            with contextlib.suppress(Exception):
                self._fs.delete_file(staging)
            raise
        self._next_mode = "append"

    def commit_empty(self, batches: ArrowBatches) -> None:
        schema = batches.arrow_schema
        assert schema is not None  # a schema was given: commit_empty is only called then
        self.commit(schema.empty_table(), 0)

    def _entries(self, *, visible: bool) -> list[pafs.FileInfo]:
        import pyarrow.fs as pafs

        if self._fs.get_file_info(self._root).type != pafs.FileType.Directory:
            return []
        entries = self._fs.get_file_info(pafs.FileSelector(self._root))
        return [e for e in entries if not visible or not e.base_name.startswith(("_", "."))]

    def _delete_all_but(self, keep: str) -> None:
        import pyarrow.fs as pafs

        for entry in self._entries(visible=False):
            if entry.path == keep:
                continue
            if entry.type == pafs.FileType.Directory:
                self._fs.delete_dir(entry.path)
            else:
                self._fs.delete_file(entry.path)


def choose_writer(spark: SparkSession, path: str, writer: SinkWriter) -> Literal["spark", "pyarrow"]:
    """Resolve ``writer="auto"``: pyarrow where this process certainly sees the path as Spark does.

    That is a classic session with a ``local`` master (Spark runs in this
    process's JVM, on this machine) and a local path (no scheme, or
    ``file:``). Everything else (a cluster, Spark Connect, ``hdfs:``,
    ``s3a:``...) is written through Spark, whose executors define the path.
    """
    if writer != "auto":
        return writer
    if is_connect(spark) or urlsplit(path).scheme not in ("", "file"):
        return "spark"
    master = spark.conf.get("spark.master", None) or ""
    return "pyarrow" if master.startswith("local") else "spark"


class ParquetSink(BatchingSubscriber):
    """Writes the items it receives to Parquet, ``batch_size`` items per file.

    An item is a row (a mapping) or a columnar batch of many rows (a
    ``pyarrow.RecordBatch`` or ``Table``, or a ``pandas.DataFrame``); demand
    counts items. The sink requests ``batch_size`` items, converts a full
    batch to one Arrow table (rows column by column, columnar items as they
    are), and writes it as one Parquet file that appears in ``path`` by one
    rename; only after that commit does it request the next batch. So at
    most ``batch_size`` items are outstanding, and the write speed is the
    backpressure: a producer submitting to a bounded publisher
    blocks while a write is under way. On ``on_complete`` the last, partial
    batch is written and :attr:`result` gets the :class:`SinkStats`.

    Nothing received is lost silently: every row is written exactly once, or
    :attr:`result` fails with :class:`ParquetSinkError`, which says how many
    rows were committed. A failed write cancels the upstream subscription. An
    upstream ``on_error`` writes the rows received so far, then fails
    :attr:`result` with the upstream error as the cause. Cancelling
    :attr:`result` cancels the upstream subscription and drops the rows of
    the batch not yet written.

    Readers of ``path`` see whole batches only: a batch is one file, staged
    under a hidden name and moved into place by one rename once complete
    (atomic on local and HDFS file systems). ``writer`` says who writes it:
    Spark's own file commit protocol (``"spark"``: through the session,
    classic or Spark Connect alike, so ``path`` is the path as Spark's
    executors see it), or this process with pyarrow (``"pyarrow"``: a hidden
    staging file in ``path``, no Spark job). ``"auto"`` takes pyarrow only
    where this process sees the path as Spark does (:func:`choose_writer`).

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
        writer: SinkWriter = "auto",
    ) -> None:
        """Args:
            spark: the session that writes.
            path: the output directory, any URI Spark can write (``file:``, ``hdfs:``, ``s3a:``...).
            batch_size: items per Parquet file, and per ``request``.
            schema: the rows' Spark schema; ``None`` infers it from the first batch.
            mode: ``"append"``, ``"overwrite"`` (the first batch replaces what the path holds) or
                ``"error"`` (refuse a path that holds data, before the first request).
            writer: ``"spark"`` (a Spark write per batch; the path as Spark's executors see it),
                ``"pyarrow"`` (this process writes each file with pyarrow: the path as this process
                sees it, through ``pyarrow.fs``), or ``"auto"``: pyarrow for a local path on a
                classic session with a ``local`` master, Spark otherwise.

        Raises:
            TypeError: if ``spark`` or ``path`` is ``None``, ``schema`` has the wrong type,
                or ``batch_size`` is not an int.
            ValueError: if ``batch_size`` is not positive, or ``mode`` or ``writer`` is unknown.
        """
        if spark is None or path is None:
            raise TypeError("spark and path must not be None")
        super().__init__(batch_size, resolve_execute(DEFAULT))
        if mode not in get_args(WriteMode):
            raise ValueError(f"mode must be one of 'append', 'overwrite', 'error', got {mode!r}")
        if writer not in get_args(SinkWriter):
            raise ValueError(f"writer must be one of 'auto', 'spark', 'pyarrow', got {writer!r}")
        self._path = str(path)
        self._mode: WriteMode = mode
        self._spark = spark
        self._batches = ArrowBatches(spark, schema)
        self._writer = choose_writer(spark, self._path, writer)
        self._result: Future[SinkStats] = Future()
        self._result.add_done_callback(self._result_done)
        # --- Touched only by the worker task --------------------------------
        self._directory: _Directory | None = None  # prepared by the first _idle or _process
        # Written by the worker task only; read racily by rows_committed / batches_committed.
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

    @property
    def writer(self) -> Literal["spark", "pyarrow"]:
        """Who writes the files: ``"spark"`` or ``"pyarrow"`` (``"auto"`` resolved at construction)."""
        return self._writer

    @property
    def rows_committed(self) -> int:
        """Rows committed so far (racy: for monitoring, not for synchronisation)."""
        return self._rows

    @property
    def batches_committed(self) -> int:
        """Batches (files) committed so far (racy: for monitoring, not for synchronisation)."""
        return self._committed

    # -- The worker -----------------------------------------------------------------

    def _subscribed(self) -> None:
        self._started = time.perf_counter()
        self._kick()  # prepare the path, then request the first batch

    def _process(self, batch: list[Item]) -> bool:
        directory = self._prepared()
        if directory is None:
            return False
        number = self._committed + 1
        try:
            table = self._batches.table(batch)
        except BaseException as exc:
            self._fail(exc, f"converting batch {number} ({len(batch)} items) to Arrow failed")
            return False
        try:
            directory.commit(table, self._committed)
        except BaseException as exc:
            self._fail(exc, f"writing batch {number} ({table.num_rows} rows) failed")
            return False
        self._rows += table.num_rows
        self._committed += 1
        return True

    def _idle(self, terminal: Terminal) -> None:
        if self._prepared() is None:
            return
        if terminal is False:
            assert self._upstream is not None
            call_subscription(self._upstream, self._batch_size)  # only after the last commit
        elif terminal is True:
            if not self._replace_if_empty():
                return
            stats = SinkStats(self._rows, self._committed, time.perf_counter() - self._started)
            self._settle(lambda: self._result.set_result(stats))
        else:
            error = self._error(f"upstream signalled on_error: {terminal!r}")
            error.__cause__ = terminal
            self._settle(lambda: self._result.set_exception(error))

    def _prepared(self) -> _Directory | None:
        """Return the output directory, applying the mode on first use; ``None`` if that failed."""
        if self._directory is None:
            try:
                directory: _Directory
                if self._writer == "spark":
                    directory = _SparkDirectory(self._spark, self._path, self._batches)
                else:
                    directory = _ArrowDirectory(self._path)
                directory.prepare(self._mode)
            except BaseException as exc:
                self._fail(exc, f"could not prepare {self._path!r}")
                return None
            self._directory = directory
        return self._directory

    def _replace_if_empty(self) -> bool:
        """For ``mode="overwrite"`` with no batch at all: replace the path with an empty file of the schema."""
        directory = self._directory
        if directory is None or directory.replaced or self._batches.struct is None:
            return True
        try:
            directory.commit_empty(self._batches)
        except BaseException as exc:
            self._fail(exc, "replacing the path with an empty output failed")
            return False
        return True

    def _refused(self, error: BaseException) -> None:
        self._fail(error, "the executor refused the worker task")

    def _fail(self, exc: BaseException, what: str) -> None:
        upstream = self._stop()
        if upstream is not None:
            call_subscription(upstream, None)
        error = self._error(f"{what}: {describe_error(exc)}")
        error.__cause__ = exc
        self._settle(lambda: self._result.set_exception(error))

    def _error(self, what: str) -> ParquetSinkError:
        return ParquetSinkError(
            f"ParquetSink {self._path!r} committed {self._rows} rows in {self._committed} batches, then {what}",
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
        return (
            f"<ParquetSink path={self._path!r} batch_size={self._batch_size} mode={self._mode!r} "
            f"writer={self._writer!r}>"
        )
