"""DataFramePublisher: a cold Publisher of a DataFrame's rows, or Arrow record batches, pulled on demand."""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Literal, TypeVar, get_args

from flowpy._checks import require_positive_int, require_subscriber
from flowpy._fork import at_fork_in_child
from flowpy.executors import DEFAULT, Default, Executor, Task, resolve_execute
from flowpy.flow import Publisher, Subscriber
from flowpy.spark._arrow import row_to_dict
from flowpy.spark._pull import END, Pulled, PullSubscription

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["DataFramePublisher", "PublishMode"]

PublishMode = Literal["rows", "arrow"]
"""What a :class:`DataFramePublisher` sends: one dict per row, or ``pyarrow.RecordBatch`` items."""

T = TypeVar("T")

_tags = itertools.count()
_NOTHING: Any = object()

# Spark work is tagged per thread: a classic session keys a tag by the JVM
# thread that added it (PySpark pins each Python thread to one JVM thread),
# tags the jobs started from work that thread began (the thread serving
# toLocalIterator inherits them), and interruptTag looks the tag up on the
# calling thread only. So the read is opened, and later interrupted, on one
# thread of the process: the tagging thread. Each call adds the tag, runs,
# and removes it again, so work of another subscription never carries it.
# (A Spark Connect client sends the tag with the request and interrupts by
# name from any thread; the same calls serve it.)
_tagging: ThreadPoolExecutor | None = None
_tagging_lock = threading.Lock()  # guards the creation of _tagging


@at_fork_in_child
def _forget_tagging_in_child() -> None:
    """After ``os.fork()``, in the child: the tagging thread is not there; the child's first read starts its own."""
    global _tagging, _tagging_lock
    _tagging = None
    _tagging_lock = threading.Lock()


def _on_tagging_thread(spark: SparkSession, tag: str, call: Callable[[], T]) -> Future[T]:
    """Run ``call`` with ``tag`` added, on the process's one tagging thread."""
    global _tagging
    with _tagging_lock:
        if _tagging is None:
            _tagging = ThreadPoolExecutor(1, thread_name_prefix="flowpy-spark-tags")
        tagging = _tagging

    def tagged() -> T:
        spark.addTag(tag)
        try:
            return call()
        finally:
            spark.removeTag(tag)

    return tagging.submit(tagged)


_ARROW_COLUMN = "arrow_ipc"  # the one binary column of the encoded DataFrame


def _encoded(df: DataFrame, max_rows: int) -> DataFrame:
    """Return ``df`` as a DataFrame of Arrow IPC streams, one row per record batch of at most ``max_rows`` rows.

    The encoding runs on the executors (``mapInArrow``), so the driver
    receives a partition as a few binary values instead of one Python
    object per row. The function is nested so that it is shipped by value:
    executors need pyarrow, not flowpy.
    """

    def encode(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow as pa

        for batch in batches:
            for start in range(0, batch.num_rows, max_rows):
                sink = pa.BufferOutputStream()
                chunk = batch.slice(start, max_rows)
                with pa.ipc.new_stream(sink, chunk.schema) as writer:
                    writer.write_batch(chunk)
                yield pa.record_batch([pa.array([sink.getvalue().to_pybytes()], pa.binary())], names=[_ARROW_COLUMN])

    return df.mapInArrow(encode, f"{_ARROW_COLUMN} BINARY")


def _decoded(row: Any) -> pa.RecordBatch:
    import pyarrow as pa

    return pa.ipc.open_stream(pa.py_buffer(row[0])).read_next_batch()


class DataFramePublisher(Publisher[Any]):
    """Publishes the rows of a DataFrame, as dicts or as Arrow record batches, pulling them only as requested.

    Cold: every subscriber gets its own pass over the DataFrame, which Spark
    evaluates anew. Items come through ``DataFrame.toLocalIterator``, which
    reads one partition at a time (on a classic session, one Spark job per
    partition, started when the previous partition has been read; on Spark
    Connect, one query whose results stream in as they are read), so the
    driver holds about one partition (two with ``prefetch_partitions=True``
    on a classic session, which overlaps the next job with reading). A
    partition is the unit of work: to read the head of a huge DataFrame
    quickly, give it small partitions.

    ``mode="rows"`` (the default) sends one dict per row. ``mode="arrow"``
    sends ``pyarrow.RecordBatch`` items of at most ``max_rows_per_batch``
    rows: the executors cut each partition into record batches and encode
    them as Arrow IPC (``mapInArrow``), the driver receives a few binary
    values per partition and decodes each into a record batch without
    copying, so no Python work is done per row. Demand then counts batches.

    The subscription pulls only while there is demand, looking at most one
    item ahead to signal ``on_complete`` without waiting for another request.
    ``cancel()`` stops pulling, interrupts the Spark work tagged for this
    subscription (``SparkSession.interruptTag``) and closes the iterator;
    the end of a cancelled read is not reported as an error.

    Protocol:   rules 1.1-1.9 and 3.x; ``on_subscribe`` and every signal after
                it run on the executor, one at a time.
    Threading:  ``subscribe`` is thread-safe; the drain that calls
                ``toLocalIterator`` blocks an executor thread while Spark works.
    """

    def __init__(
        self,
        df: DataFrame,
        *,
        mode: PublishMode = "rows",
        max_rows_per_batch: int = 10_000,
        prefetch_partitions: bool = False,
        executor: Executor | Default = DEFAULT,
    ) -> None:
        """Args:
            df: the DataFrame to publish.
            mode: ``"rows"`` (dicts) or ``"arrow"`` (``pyarrow.RecordBatch`` items).
            max_rows_per_batch: the largest record batch sent in ``"arrow"`` mode.
            prefetch_partitions: compute the next partition while the current one is read.
            executor: where the drain runs; left out, :func:`flowpy.default_executor`.

        Raises:
            TypeError: if ``df`` is ``None``, ``max_rows_per_batch`` is not an int, or
                ``executor`` is ``None`` or not an executor.
            ValueError: if ``mode`` is unknown or ``max_rows_per_batch`` is not positive.
        """
        if df is None:
            raise TypeError("df must be a pyspark DataFrame, got None")
        if mode not in get_args(PublishMode):
            raise ValueError(f"mode must be 'rows' or 'arrow', got {mode!r}")
        self._df = df
        self._mode: PublishMode = mode
        self._max_rows = require_positive_int(max_rows_per_batch, "max_rows_per_batch")
        self._prefetch = bool(prefetch_partitions)
        self._execute = resolve_execute(executor)

    @property
    def dataframe(self) -> DataFrame:
        """The DataFrame whose rows this publisher sends."""
        return self._df

    @property
    def mode(self) -> PublishMode:
        """``"rows"`` or ``"arrow"``."""
        return self._mode

    def subscribe(self, subscriber: Subscriber[Any]) -> None:
        """Start a new pass over the DataFrame for ``subscriber``.

        Raises:
            TypeError: if ``subscriber`` is ``None`` (rule 1.9).
        """
        require_subscriber(subscriber)
        if self._mode == "arrow":
            source, convert = _encoded(self._df, self._max_rows), _decoded
        else:
            source, convert = self._df, row_to_dict
        _PartitionSubscription(subscriber, self._execute, source, convert, self._prefetch).start()

    def __repr__(self) -> str:
        return f"<DataFramePublisher mode={self._mode!r} prefetch_partitions={self._prefetch} of {self._df!r}>"


class _PartitionSubscription(PullSubscription[Any]):
    """One pass over the DataFrame; its Spark work carries a tag so that cancel() can interrupt it."""

    def __init__(
        self,
        subscriber: Subscriber[Any],
        execute: Callable[[Task], object],
        df: DataFrame,
        convert: Callable[[Any], Any],
        prefetch: bool,
    ) -> None:
        super().__init__(subscriber, execute)
        self._df = df
        self._convert = convert
        self._prefetch = prefetch
        self._tag = f"flowpy-dataframe-publisher-{next(_tags)}"
        # --- Drain task only ---------------------------------------------
        self._rows: Iterator[Any] | None = None  # Spark rows, opened on first pull
        self._ahead: Any = _NOTHING  # one row read ahead, or END

    def _open(self) -> Any:
        """Open the iterator and read its first row, with this subscription's tag on the Spark work."""
        spark = self._df.sparkSession
        # A classic session starts the jobs from a JVM thread that toLocalIterator
        # creates, and that inherits the tags of the thread opening it: open on the
        # tagging thread, where _interrupt finds the tag. A Connect client sends the
        # query with the first next(), with the tags of the thread calling it.
        opened = _on_tagging_thread(spark, self._tag, lambda: self._df.toLocalIterator(self._prefetch))
        self._rows = iter(opened.result())
        if self.cancelled:  # its interrupt may have run before the open: start no job
            return END  # dropped by the drain, which sees the cancel (rule 3.12)
        spark.addTag(self._tag)
        try:
            return next(self._rows, END)
        finally:
            spark.removeTag(self._tag)

    def _pull(self) -> Any:
        if self._rows is None:
            return self._open()
        return next(self._rows, END)

    def _next(self) -> Pulled[Any]:
        row = self._ahead
        if row is _NOTHING:
            row = self._pull()
        else:
            self._ahead = _NOTHING
        return row if row is END else self._convert(row)

    def _at_end(self) -> bool:
        if self._rows is None:
            return False  # nothing requested yet: do not start a Spark job for a look-ahead
        if self._ahead is _NOTHING:
            self._ahead = self._pull()
        return self._ahead is END

    def _interrupt(self) -> None:
        # Harmless when nothing runs: the tag belongs to this subscription alone.
        # Queued behind an open of this subscription under way, so it cannot miss it.
        spark = self._df.sparkSession
        with contextlib.suppress(Exception):  # a stopped session, or an interpreter shutting down
            _on_tagging_thread(spark, self._tag, lambda: spark.interruptTag(self._tag))

    def _release(self) -> None:
        rows, self._rows = self._rows, None
        self._ahead = _NOTHING
        close = getattr(rows, "close", None)
        if close is not None:
            with contextlib.suppress(Exception):  # an interrupted read fails its reader
                close()
