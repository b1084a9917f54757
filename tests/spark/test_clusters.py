"""The sink, the publisher, the processor, the streaming bridge and the job on every kind of session.

``any_spark`` is a classic local session, a classic session on a standalone
master and worker, and a Spark Connect session, in turn (see conftest.py):
the same code and the same assertions for all three.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from flowpy.spark import DataFramePublisher, ParquetSink, SparkProcessor, is_connect, publish_stream
from flowpy.spark.job import run
from flowpy.submission import SubmissionPublisher
from tests.spark.helpers import Arrivals, TasksStarted
from tests.support import Recorder

SCHEMA = "id BIGINT, name STRING"


def _rows(start: int, stop: int) -> list[dict[str, Any]]:
    return [{"id": i, "name": f"n{i}"} for i in range(start, stop)]


@pytest.mark.timeout(180)
def test_sink_writes_rows_and_record_batches_on_every_session(
    any_spark: Any, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    import pyarrow as pa

    out = str(tmp_path / "out")
    sink = ParquetSink(any_spark, out, batch_size=3, schema=SCHEMA)
    # This process writes the files itself only where it runs Spark's executors too.
    assert (
        sink.writer
        == {"local": "pyarrow", "standalone": "spark", "connect": "spark"}[request.node.callspec.params["any_spark"]]
    )
    with SubmissionPublisher[Any](max_buffer_capacity=4) as publisher:
        publisher.subscribe(sink)
        for row in _rows(0, 4):
            publisher.submit(row)
        publisher.submit(pa.Table.from_pylist(_rows(4, 1_004)).to_batches()[0])
        publisher.submit(pa.Table.from_pylist(_rows(1_004, 1_010)))
    stats = sink.result.result(timeout=150)
    assert (stats.rows, stats.batches) == (1_010, 2)
    assert (sink.rows_committed, sink.batches_committed) == (1_010, 2)
    read = any_spark.read.parquet(out).orderBy("id").collect()
    assert [row.asDict() for row in read] == _rows(0, 1_010)


@pytest.mark.timeout(180)
def test_publisher_rows_and_arrow_modes_on_every_session(any_spark: Any) -> None:
    df = any_spark.range(0, 25_000, 1, 3).selectExpr("id", "id * 2 AS twice")
    rows = Recorder(initial=5)
    DataFramePublisher(df).subscribe(rows)
    arrivals = Arrivals()
    rows.on_next_hook = arrivals
    arrivals.wait_for(5, timeout=150)
    rows.cancel()
    assert rows.items[:5] == [{"id": i, "twice": 2 * i} for i in range(5)]

    batches = Recorder(initial=2**63 - 1)
    DataFramePublisher(df, mode="arrow", max_rows_per_batch=4_000).subscribe(batches)
    assert batches.done.wait(150) and batches.completed and batches.violations == []
    assert all(batch.num_rows <= 4_000 for batch in batches.items)
    ids = [i for batch in batches.items for i in batch.column("id").to_pylist()]
    assert ids == list(range(25_000))
    assert batches.items[0].schema.names == ["id", "twice"]


@pytest.mark.timeout(180)
def test_processor_transforms_rows_and_batches_on_every_session(any_spark: Any) -> None:
    import pyarrow as pa

    processor = SparkProcessor(
        any_spark, lambda df: df.selectExpr("id", "id * 2 AS twice"), batch_size=2, schema="id BIGINT"
    )
    recorder = Recorder(initial=1_000)
    processor.subscribe(recorder)
    with SubmissionPublisher[Any](max_buffer_capacity=8) as publisher:
        publisher.subscribe(processor)
        publisher.submit({"id": 0})
        publisher.submit(pa.record_batch([pa.array(range(1, 50), pa.int64())], names=["id"]))
        publisher.submit({"id": 50})
    assert recorder.done.wait(150) and recorder.completed
    assert recorder.items == [{"id": i, "twice": 2 * i} for i in range(51)]


@pytest.mark.timeout(240)
def test_job_on_every_session(any_spark: Any, tmp_path: Path) -> None:
    report = run(
        any_spark,
        str(tmp_path / "flights"),
        limit=5_000,
        producers=2,
        batch_size=2_000,
        chunk=1_000,
        out=open("/dev/null", "w"),  # noqa: SIM115 - closed with the process
    )
    assert report.ok and report.replayed == report.written == 5_000
    assert report.batches >= 3 and report.files == report.batches  # micro-batches of at most 2,000 rows
    assert report.names["UA"] == "United Air Lines Inc."


@pytest.mark.spark_cluster("connect")
@pytest.mark.timeout(180)
def test_publisher_cancel_interrupts_the_query_on_connect(spark_sessions: Any) -> None:
    """The query under way is interrupted by its tag: the server's two cores are free again at once."""
    connect = spark_sessions.get("connect")
    assert is_connect(connect)
    started = TasksStarted()
    try:
        recorder = Recorder(initial=1)
        DataFramePublisher(started.slow_ids(connect)).subscribe(recorder)
        started.wait_for(2, timeout=120)  # both partitions' tasks run on the server: hours of work each
        recorder.cancel()
        assert connect.range(10).count() == 10  # would wait for the slow tasks if they still held the cores
        assert recorder.items == [] and not recorder.done.is_set(), recorder.error
    finally:
        started.close()


@pytest.mark.spark_cluster("connect")
def test_stream_on_connect_is_refused_at_call_time(spark_sessions: Any) -> None:
    connect = spark_sessions.get("connect")
    stream = connect.readStream.format("rate").load()
    message = (
        r"^publish_stream needs a classic SparkSession: Spark Connect runs foreachBatch on the server, "
        r"so the query cannot wait for this process's subscribers; use stream_publisher, which works on both$"
    )
    with pytest.raises(NotImplementedError, match=message):
        publish_stream(stream)


@pytest.mark.timeout(240)
def test_stream_source_and_stream_publisher_rows_and_arrow_on_every_session(any_spark: Any) -> None:
    """Both directions, through Spark's Python workers: rows in and Arrow out, Arrow in and rows out."""
    import pyarrow as pa

    from flowpy.spark import stream_publisher, stream_source

    for columnar in (False, True):
        publisher: SubmissionPublisher[Any] = SubmissionPublisher(max_buffer_capacity=8)
        frame = stream_source(publisher, SCHEMA, spark=any_spark, max_rows_per_batch=200)
        out, query = stream_publisher(
            frame.selectExpr("id", "upper(name) AS name"),
            mode="rows" if columnar else "arrow",
            max_buffer_capacity=64,
            trigger={"availableNow": True},
        )
        recorder = Recorder(initial=2**63 - 1)
        out.subscribe(recorder)
        with publisher:
            if columnar:
                for first in range(0, 500, 100):
                    publisher.submit(pa.RecordBatch.from_pylist(_rows(first, first + 100)))
            else:
                publisher.submit_many(_rows(0, 500))
        assert recorder.done.wait(180) and recorder.completed, recorder.error
        rows = recorder.items if columnar else [row for batch in recorder.items for row in batch.to_pylist()]
        assert sorted(rows, key=lambda row: row["id"]) == [{"id": i, "name": f"N{i}"} for i in range(500)]
        assert not query.isActive and out.batches_delivered >= 3
