"""DataFramePublisher: a cold Publisher of a DataFrame's rows, pulled on demand."""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from flowpy.executors import DEFAULT, Default, Executor, Task, resolve_execute
from flowpy.flow import Publisher, Subscriber
from flowpy.spark._arrow import row_to_dict
from flowpy.spark._pull import END, Pulled, PullSubscription

if TYPE_CHECKING:
    from collections.abc import Callable

    from pyspark.sql import DataFrame

__all__ = ["DataFramePublisher"]

_tags = itertools.count()
_NOTHING: Any = object()


class DataFramePublisher(Publisher[dict[str, Any]]):
    """Publishes the rows of a DataFrame, as dicts, pulling them only as they are requested.

    Cold: every subscriber gets its own pass over the DataFrame, which Spark
    evaluates anew. Rows come through ``DataFrame.toLocalIterator``, which
    runs one Spark job per partition when the previous partition has been
    read, so the driver holds one partition at a time (two with
    ``prefetch_partitions=True``, which overlaps the next job with reading).
    A partition is the unit of work: to read the head of a huge DataFrame
    quickly, give it small partitions.

    The subscription pulls only while there is demand, looking at most one
    row ahead to signal ``on_complete`` without waiting for another request.
    ``cancel()`` stops pulling and cancels the Spark job under way.

    Protocol:   rules 1.1-1.9 and 3.x; ``on_subscribe`` and every signal after
                it run on the executor, one at a time.
    Threading:  ``subscribe`` is thread-safe; the drain that calls
                ``toLocalIterator`` blocks an executor thread while Spark works.
    """

    def __init__(
        self, df: DataFrame, *, prefetch_partitions: bool = False, executor: Executor | Default = DEFAULT
    ) -> None:
        """Args:
            df: the DataFrame to publish.
            prefetch_partitions: compute the next partition while the current one is read.
            executor: where the drain runs; left out, :func:`flowpy.default_executor`.

        Raises:
            TypeError: if ``df`` is ``None``, or ``executor`` is ``None`` or not an executor.
        """
        if df is None:
            raise TypeError("df must be a pyspark DataFrame, got None")
        self._df = df
        self._prefetch = bool(prefetch_partitions)
        self._execute = resolve_execute(executor)

    @property
    def dataframe(self) -> DataFrame:
        """The DataFrame whose rows this publisher sends."""
        return self._df

    def subscribe(self, subscriber: Subscriber[dict[str, Any]]) -> None:
        """Start a new pass over the DataFrame for ``subscriber``.

        Raises:
            TypeError: if ``subscriber`` is ``None`` (rule 1.9).
        """
        if subscriber is None:
            raise TypeError("subscriber must not be None (rule 1.9)")
        _RowSubscription(subscriber, self._execute, self._df, self._prefetch).start()

    def __repr__(self) -> str:
        return f"<DataFramePublisher prefetch_partitions={self._prefetch} of {self._df!r}>"


class _RowSubscription(PullSubscription[dict[str, Any]]):
    """One pass over the DataFrame; its Spark jobs carry a tag so cancel() can stop them."""

    def __init__(
        self,
        subscriber: Subscriber[dict[str, Any]],
        execute: Callable[[Task], object],
        df: DataFrame,
        prefetch: bool,
    ) -> None:
        super().__init__(subscriber, execute)
        self._df = df
        self._prefetch = prefetch
        self._tag = f"flowpy-dataframe-publisher-{next(_tags)}"
        # --- Drain task only ---------------------------------------------
        self._rows: Iterator[Any] | None = None  # Spark rows, opened on first pull
        self._ahead: Any = _NOTHING  # one row read ahead by _at_end, or END

    def _iterator(self) -> Iterator[Any]:
        rows = self._rows
        if rows is None:
            context = self._df.sparkSession.sparkContext
            # Local properties are inherited by the thread that toLocalIterator
            # starts, so every partition job it submits carries the tag.
            context.addJobTag(self._tag)
            try:
                rows = self._rows = iter(self._df.toLocalIterator(prefetchPartitions=self._prefetch))
            finally:
                context.removeJobTag(self._tag)
        return rows

    def _next(self) -> Pulled[dict[str, Any]]:
        row = self._ahead
        if row is _NOTHING:
            row = next(self._iterator(), END)
        else:
            self._ahead = _NOTHING
        return row if row is END else row_to_dict(row)

    def _at_end(self) -> bool:
        if self._rows is None:
            return False  # nothing requested yet: do not start a Spark job for a look-ahead
        if self._ahead is _NOTHING:
            self._ahead = next(self._iterator(), END)
        return self._ahead is END

    def _interrupt(self) -> None:
        # Harmless when no job runs: the tag belongs to this subscription alone.
        with contextlib.suppress(Exception):
            self._df.sparkSession.sparkContext.cancelJobsWithTag(self._tag)

    def _release(self) -> None:
        rows, self._rows = self._rows, None
        self._ahead = _NOTHING
        close = getattr(rows, "close", None)
        if close is not None:
            with contextlib.suppress(Exception):  # a cancelled job fails its reader
                close()
