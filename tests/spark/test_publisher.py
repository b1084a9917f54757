"""DataFramePublisher: rows as dicts, pulled from Spark only as demand arrives."""

from __future__ import annotations

import time
from typing import Any

import pytest

from flowpy.spark import DataFramePublisher
from tests.spark.helpers import Arrivals, TasksStarted
from tests.support import Recorder


def _counted(spark: Any, rows: int, partitions: int) -> tuple[Any, Any]:
    """A DataFrame of ``rows`` ids whose evaluation is counted row by row in an accumulator."""
    from pyspark.sql.functions import udf

    evaluated = spark.sparkContext.accumulator(0)

    @udf("long")
    def count(value):  # type: ignore[no-untyped-def]  # unannotated: Spark infers UDF kinds from hints
        evaluated.add(1)
        return value

    return spark.range(0, rows, 1, partitions).select(count("id").alias("id")), evaluated


@pytest.mark.timeout(60)
def test_publisher_all_rows_arrive_as_dicts_then_complete(spark: Any) -> None:
    df = spark.createDataFrame([(1, "a", 1.5), (2, "b", None), (3, "c", 3.5)], "id INT, name STRING, x DOUBLE")
    recorder = Recorder(initial=10)
    DataFramePublisher(df).subscribe(recorder)
    assert recorder.done.wait(30)
    assert recorder.items == [
        {"id": 1, "name": "a", "x": 1.5},
        {"id": 2, "name": "b", "x": None},
        {"id": 3, "name": "c", "x": 3.5},
    ]
    assert recorder.completed and recorder.violations == []


@pytest.mark.timeout(60)
def test_publisher_exact_demand_completes_without_another_request(spark: Any) -> None:
    recorder = Recorder(initial=5)
    DataFramePublisher(spark.range(5)).subscribe(recorder)
    assert recorder.done.wait(30)
    assert [row["id"] for row in recorder.items] == [0, 1, 2, 3, 4]
    assert recorder.kinds()[-1] == "on_complete"


@pytest.mark.timeout(60)
def test_publisher_without_request_starts_no_spark_job(spark: Any) -> None:
    df, evaluated = _counted(spark, 100, 2)
    recorder = Recorder(initial=0)
    DataFramePublisher(df).subscribe(recorder)
    assert recorder.subscribed.wait(30)
    recorder.request(1)  # the only pull: one partition of 50 rows
    arrivals = Arrivals()
    recorder.on_next_hook = arrivals
    arrivals.wait_for(1)
    assert evaluated.value == 50


@pytest.mark.timeout(90)
@pytest.mark.parametrize(("prefetch", "partitions_ahead"), [(False, 1), (True, 2)])
def test_publisher_pulls_no_more_than_requested_plus_partitions(
    spark: Any, prefetch: bool, partitions_ahead: int
) -> None:
    df, evaluated = _counted(spark, 10_000, 100)  # partitions of 100 rows
    arrivals = Arrivals()
    recorder = Recorder(initial=0, on_next_hook=arrivals)
    DataFramePublisher(df, prefetch_partitions=prefetch).subscribe(recorder)
    assert recorder.subscribed.wait(30)
    for requested in (150, 420):
        recorder.request(requested - arrivals.count)
        arrivals.wait_for(requested)
        # The look-ahead for on_complete may open the next partition.
        assert evaluated.value <= (requested // 100 + partitions_ahead + 1) * 100
    recorder.cancel()
    assert len(recorder.items) == 420
    assert [row["id"] for row in recorder.items] == list(range(420))


def _last_job(spark: Any) -> int:
    """The highest job id of the session so far (-1 before any)."""
    return max(spark.sparkContext.statusTracker().getJobIdsForGroup(None), default=-1)


def _jobs_since(spark: Any, last: int, timeout: float = 30) -> list[str]:
    """Wait until no job after ``last`` runs; return the statuses of those jobs, in order."""
    tracker = spark.sparkContext.statusTracker()
    deadline = time.monotonic() + timeout
    while True:
        ids = sorted(j for j in tracker.getJobIdsForGroup(None) if j > last)
        statuses = [tracker.getJobInfo(j).status for j in ids]
        if "RUNNING" not in statuses:
            return statuses
        assert time.monotonic() < deadline, f"jobs {ids} still {statuses} after {timeout} s"
        time.sleep(0.05)  # polling Spark's status tracker: it has no notification


@pytest.mark.timeout(60)
def test_publisher_head_of_a_billion_rows_then_cancel_runs_no_more_jobs(spark: Any) -> None:
    df = spark.range(0, 10**9, 1, 100_000)  # partitions of 10,000 rows
    arrivals = Arrivals()
    recorder = Recorder(initial=1_000, on_next_hook=arrivals)
    last = _last_job(spark)
    DataFramePublisher(df).subscribe(recorder)
    arrivals.wait_for(1_000)
    recorder.cancel()
    assert [row["id"] for row in recorder.items] == list(range(1_000))
    assert _jobs_since(spark, last) == ["SUCCEEDED"]  # one job per partition read
    assert not recorder.done.is_set()  # cancel is silent (rule 3.5)


@pytest.mark.timeout(90)
@pytest.mark.parametrize("mode", ["rows", "arrow"])
def test_publisher_cancel_interrupts_the_partition_job_under_way(spark: Any, mode: Any) -> None:
    """A cancel from another thread interrupts the job reading a partition, which would run for days.

    The job is started from the thread that opened the read, which carries the
    subscription's tag; the interrupt runs there too, so it finds the tag.
    """
    started = TasksStarted()
    try:
        recorder = Recorder(initial=1)
        last = _last_job(spark)
        DataFramePublisher(started.slow_ids(spark), mode=mode).subscribe(recorder)
        started.wait_for(1)  # the first partition's task runs
        recorder.cancel()
        assert _jobs_since(spark, last, timeout=60) == ["FAILED"]  # interrupted, and no other job started
        assert spark.range(10).count() == 10  # both cores are free again
        assert recorder.items == [] and not recorder.done.is_set(), recorder.error
    finally:
        started.close()


@pytest.mark.timeout(60)
def test_publisher_each_subscriber_gets_its_own_pass(spark: Any) -> None:
    publisher = DataFramePublisher(spark.range(0, 30, 1, 3))
    first, second = Recorder(initial=100), Recorder(initial=7)
    publisher.subscribe(first)
    publisher.subscribe(second)
    assert first.done.wait(30)
    arrivals = Arrivals()
    second.on_next_hook = arrivals
    second.request(23)
    assert second.done.wait(30)
    assert [row["id"] for row in first.items] == list(range(30))
    assert [row["id"] for row in second.items] == list(range(30))
    assert first.violations == second.violations == []


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("n", "kind"), [(0, ValueError), (-3, ValueError), ("2", TypeError)])
def test_publisher_bad_request_signals_error(spark: Any, n: Any, kind: type[BaseException]) -> None:
    recorder = Recorder(initial=0)
    DataFramePublisher(spark.range(3)).subscribe(recorder)
    assert recorder.subscribed.wait(30)
    recorder.subscription.request(n)  # type: ignore[union-attr]
    assert recorder.done.wait(30)
    assert isinstance(recorder.error, kind)
    assert recorder.items == []


def test_publisher_none_subscriber_raises_type_error(spark: Any) -> None:
    with pytest.raises(TypeError, match=r"^subscriber must not be None \(rule 1\.9\)$"):
        DataFramePublisher(spark.range(1)).subscribe(None)  # type: ignore[arg-type]


@pytest.mark.timeout(60)
def test_publisher_failing_query_signals_on_error(spark: Any) -> None:
    from pyspark.sql.functions import udf

    @udf("long")
    def broken(value):  # type: ignore[no-untyped-def]
        raise ArithmeticError(f"row {value} is broken")

    recorder = Recorder(initial=5)
    DataFramePublisher(spark.range(3).select(broken("id"))).subscribe(recorder)
    assert recorder.done.wait(30)
    assert recorder.error is not None and "row 0 is broken" in str(recorder.error)


_CANCEL_SCRIPT = """
import threading
from flowpy.spark import DataFramePublisher, local_session
from tests.support import Recorder
from tests.spark.helpers import Arrivals, TasksStarted

spark = local_session("cancel-quietly", master="local[2]")
for mode in ("rows", "arrow"):
    arrivals = Arrivals()
    recorder = Recorder(initial=3, on_next_hook=arrivals)
    DataFramePublisher(spark.range(0, 2_000_000, 1, 8), mode=mode, max_rows_per_batch=1_000).subscribe(recorder)
    arrivals.wait_for(3)
    recorder.cancel()
    assert spark.range(10).count() == 10
started = TasksStarted()  # a cancel that interrupts a job under way
recorder = Recorder(initial=1)
DataFramePublisher(started.slow_ids(spark), mode="arrow").subscribe(recorder)
started.wait_for(1)
recorder.cancel()
assert spark.range(10).count() == 10
started.close()
spark.stop()
print("done")
"""


@pytest.mark.timeout(240)
def test_publisher_cancel_prints_no_spark_error() -> None:
    """A cancel the subscriber asked for is not an error: Spark logs no ERROR line and no stack trace for it.

    Both after the last job ended and while one runs (which the cancel interrupts).
    """
    import subprocess
    import sys
    from pathlib import Path

    result = subprocess.run(
        [sys.executable, "-c", _CANCEL_SCRIPT],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=230,  # a JVM start and four reads on a loaded machine
    )
    assert result.returncode == 0 and result.stdout == "done\n", result.stderr
    lines = [line for line in result.stderr.splitlines() if not line.startswith("WARNING: Using incubator")]
    assert lines == []
