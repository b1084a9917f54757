"""ParquetSink: batches written once each, committed atomically, requested only after commit."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from flowpy.spark import ParquetSink, ParquetSinkError, SinkStats
from flowpy.spark import _sink as sink_module
from flowpy.submission import SubmissionPublisher
from tests.spark.helpers import HandUpstream

SCHEMA = "id BIGINT, name STRING, score DOUBLE"
WRITERS = ("spark", "pyarrow")


def _rows(start: int, stop: int) -> list[dict[str, Any]]:
    return [{"id": i, "name": f"n{i}", "score": i / 4 if i % 7 else None} for i in range(start, stop)]


def _read(spark: Any, path: Path) -> list[dict[str, Any]]:
    return sorted((row.asDict() for row in spark.read.parquet(str(path)).collect()), key=lambda r: r["id"])


def _files(path: Path) -> list[str]:
    """The Parquet files a reader of ``path`` lists (none before the first commit created it)."""
    if not path.exists():
        return []
    return sorted(p.name for p in path.iterdir() if p.suffix == ".parquet" and not p.name.startswith((".", "_")))


def _leftovers(path: Path) -> list[str]:
    """Everything under ``path`` but the committed Parquet files and their checksums."""
    return sorted(
        str(p.relative_to(path))
        for p in path.rglob("*")
        if not (p.parent == path and p.name.endswith((".parquet", ".parquet.crc")))
    )


def _fed_by_hand(
    spark: Any, out: Path, batch_size: int, full_batches: int, writer: Any = "auto"
) -> tuple[ParquetSink, HandUpstream]:
    """A sink fed ``full_batches`` full batches by hand, checking each request came after the last commit."""
    upstream = HandUpstream()
    sink = ParquetSink(spark, str(out), batch_size=batch_size, schema=SCHEMA, writer=writer)
    upstream.subscribe(sink)
    for batch in range(full_batches):
        upstream.wait_for_requests(batch + 1)
        assert upstream.requests == [batch_size] * (batch + 1)
        assert len(_files(out)) == batch  # the previous batch was committed first
        upstream.emit(_rows(batch * batch_size, (batch + 1) * batch_size))
        assert upstream.outstanding == 0
    upstream.wait_for_requests(full_batches + 1)
    return sink, upstream


@pytest.mark.timeout(90)
@pytest.mark.parametrize("writer", WRITERS)
def test_sink_round_trip_writes_every_row_once(spark: Any, tmp_path: Path, writer: Any) -> None:
    out = tmp_path / "out"
    sink = ParquetSink(spark, str(out), batch_size=1_000, schema=SCHEMA, writer=writer)
    with SubmissionPublisher[dict[str, Any]](max_buffer_capacity=64) as publisher:
        publisher.subscribe(sink)
        for row in _rows(0, 2_500):
            publisher.submit(row)
    stats = sink.result.result(timeout=60)
    assert stats.rows == 2_500 and stats.batches == 3 and stats.seconds > 0
    assert _read(spark, out) == _rows(0, 2_500)
    assert len(_files(out)) == 3


@pytest.mark.timeout(90)
def test_sink_requests_next_batch_only_after_commit(spark: Any, tmp_path: Path) -> None:
    out = tmp_path / "out"
    sink, upstream = _fed_by_hand(spark, out, batch_size=50, full_batches=3)
    upstream.emit(_rows(150, 170))
    upstream.complete()
    assert sink.result.result(timeout=60) == SinkStats(170, 4, sink.result.result().seconds)
    assert _read(spark, out) == _rows(0, 170)
    assert max(upstream.requests) == 50


@pytest.mark.timeout(90)
def test_sink_slow_write_blocks_submit_instead_of_buffering(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    entered, release = threading.Event(), threading.Event()
    commit = sink_module._ArrowDirectory.commit

    def slow_commit(self: Any, table: Any, sequence: int) -> None:
        entered.set()
        assert release.wait(60)
        commit(self, table, sequence)

    monkeypatch.setattr(sink_module._ArrowDirectory, "commit", slow_commit)
    sink = ParquetSink(spark, str(tmp_path / "out"), batch_size=100, schema=SCHEMA)
    assert sink.writer == "pyarrow"  # "auto" on a local master and a local path
    publisher = SubmissionPublisher[dict[str, Any]](max_buffer_capacity=16)
    publisher.subscribe(sink)
    returned = [0]

    def produce() -> None:
        for row in _rows(0, 300):
            publisher.submit(row)
            returned[0] += 1
        publisher.close()

    producer = threading.Thread(target=produce)
    producer.start()
    assert entered.wait(60)
    changed = threading.Condition()
    with changed:
        changed.wait_for(lambda: publisher.estimate_maximum_lag() >= 16, timeout=30)
    assert publisher.estimate_maximum_lag() == 16
    assert producer.is_alive() and returned[0] <= 100 + 16
    release.set()
    producer.join(60)
    assert sink.result.result(timeout=60).rows == 300


def _failing_batch(monkeypatch: pytest.MonkeyPatch, failing: int, writer: str) -> str:
    """Make the write of batch ``failing`` (0-based) fail after some of it was written; return the error's text."""
    if writer == "pyarrow":
        write = sink_module._parquet_file

        def write_failing(table: Any, filesystem: Any, path: str) -> None:
            write(table, filesystem, path)  # the whole staging file exists, then the disk fills up
            if path.endswith(f"-{failing:05d}.parquet"):
                raise OSError("disk quota")

        monkeypatch.setattr(sink_module, "_parquet_file", write_failing)
        return r"OSError: disk quota$"

    from pyspark.sql import functions as F
    from pyspark.sql.window import Window

    spark_write = sink_module._SparkDirectory.write

    def spark_write_failing(self: Any, df: Any, sequence: int) -> None:
        if sequence == failing:  # the task fails at the batch's last row, after writing the others
            last = F.max("id").over(Window.partitionBy())
            df = df.withColumn("id", F.when(F.col("id") == last, F.raise_error(F.lit("disk quota"))).otherwise(df.id))
        spark_write(self, df, sequence)

    monkeypatch.setattr(sink_module._SparkDirectory, "write", spark_write_failing)
    return r"\w+Exception: \[USER_RAISED_EXCEPTION\] disk quota"


@pytest.mark.timeout(90)
@pytest.mark.parametrize("writer", WRITERS)
def test_sink_failed_write_of_batch_k_keeps_the_first_k_minus_1_and_cleans_its_files(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, writer: str
) -> None:
    out = tmp_path / "out"
    reason = _failing_batch(monkeypatch, failing=2, writer=writer)
    sink, upstream = _fed_by_hand(spark, out, batch_size=10, full_batches=2, writer=writer)
    upstream.emit(_rows(20, 30))
    message = (
        rf"^ParquetSink '{out}' committed 20 rows in 2 batches, then writing batch 3 \(10 rows\) failed: " + reason
    )
    with pytest.raises(ParquetSinkError, match=message) as info:
        sink.result.result(timeout=60)
    assert "\n" not in str(info.value)
    assert info.value.rows_committed == 20 and info.value.batches_committed == 2
    assert info.value.__cause__ is not None
    upstream.wait_for_cancel()
    assert _read(spark, out) == _rows(0, 20)
    assert len(_files(out)) == 2 and _leftovers(out) == []  # nothing of batch 3 stays staged


@pytest.mark.timeout(90)
def test_sink_row_that_does_not_fit_fails_and_cancels_the_publisher(spark: Any, tmp_path: Path) -> None:
    """A row whose value does not fit the schema fails the batch's conversion, before Spark writes anything."""
    sink = ParquetSink(spark, str(tmp_path / "out"), batch_size=10, schema=SCHEMA)
    publisher = SubmissionPublisher[dict[str, Any]](max_buffer_capacity=8)
    publisher.subscribe(sink)
    for row in _rows(0, 15):
        publisher.submit(row)
    publisher.submit({"id": "sixteen", "name": "bad", "score": 1.0})
    publisher.close()
    with pytest.raises(ParquetSinkError) as info:
        sink.result.result(timeout=60)
    assert info.value.rows_committed == 10
    assert "then converting batch 2 (6 items) to Arrow failed: ArrowInvalid" in str(info.value)
    assert _read(spark, tmp_path / "out") == _rows(0, 10)


@pytest.mark.timeout(90)
@pytest.mark.parametrize("writer", WRITERS)
def test_sink_readers_see_whole_batches_only(spark: Any, tmp_path: Path, writer: Any) -> None:
    """A reader listing the directory while batches commit never sees part of a batch."""
    import pyarrow.parquet as pq

    out = tmp_path / "out"
    sink = ParquetSink(spark, str(out), batch_size=200, schema=SCHEMA, writer=writer)
    seen: list[int] = []
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            # A reader lists the directory itself (Spark's and pyarrow's readers skip "_" and "."
            # entries); committed files are never removed, so each listed file can be read.
            seen.append(sum(pq.ParquetFile(out / name).metadata.num_rows for name in _files(out)))

    reader = threading.Thread(target=read)
    reader.start()
    with SubmissionPublisher[dict[str, Any]](max_buffer_capacity=256) as publisher:
        publisher.subscribe(sink)
        for row in _rows(0, 1_200):
            publisher.submit(row)
    try:
        assert sink.result.result(timeout=60).batches == 6
    finally:
        stop.set()
        reader.join()
    assert seen and all(count % 200 == 0 for count in seen)
    assert max(seen) <= 1_200


@pytest.mark.timeout(90)
def test_sink_upstream_error_writes_what_arrived_then_fails(spark: Any, tmp_path: Path) -> None:
    sink, upstream = _fed_by_hand(spark, tmp_path / "out", batch_size=100, full_batches=0)
    upstream.emit(_rows(0, 42))
    failure = ConnectionError("source went away")
    upstream.fail(failure)
    with pytest.raises(ParquetSinkError, match=r"committed 42 rows in 1 batches, then upstream") as info:
        sink.result.result(timeout=60)
    assert info.value.__cause__ is failure
    assert _read(spark, tmp_path / "out") == _rows(0, 42)


@pytest.mark.timeout(90)
@pytest.mark.parametrize("writer", WRITERS)
def test_sink_modes_apply_before_the_first_batch(spark: Any, tmp_path: Path, writer: Any) -> None:
    out = tmp_path / "out"

    def write(rows: list[dict[str, Any]], mode: Any) -> ParquetSink:
        sink = ParquetSink(spark, str(out), batch_size=100, schema=SCHEMA, mode=mode, writer=writer)
        upstream = HandUpstream()
        upstream.subscribe(sink)
        upstream.wait_for_requests(1)
        if not upstream.cancelled:  # mode="error" refuses before requesting
            upstream.emit(rows)
            upstream.complete()
        return sink

    write(_rows(0, 5), "error").result.result(timeout=60)
    write(_rows(5, 8), "append").result.result(timeout=60)
    assert _read(spark, out) == _rows(0, 8)
    with pytest.raises(ParquetSinkError, match=r"already holds data; use mode='append' or 'overwrite'"):
        write(_rows(8, 9), "error").result.result(timeout=60)
    write(_rows(10, 12), "overwrite").result.result(timeout=60)
    assert _read(spark, out) == _rows(10, 12)
    assert _leftovers(out) == []  # no _SUCCESS marker, no staging files


@pytest.mark.timeout(60)
@pytest.mark.parametrize("writer", WRITERS)
def test_sink_overwrite_with_an_empty_stream_leaves_an_empty_output(spark: Any, tmp_path: Path, writer: Any) -> None:
    out = tmp_path / "out"
    spark.range(3).write.parquet(str(out))
    sink = ParquetSink(spark, str(out), batch_size=10, schema=SCHEMA, mode="overwrite", writer=writer)
    upstream = HandUpstream()
    upstream.subscribe(sink)
    upstream.wait_for_requests(1)
    upstream.complete()
    assert sink.result.result(timeout=60).rows == 0
    assert spark.read.parquet(str(out)).count() == 0
    assert spark.read.parquet(str(out)).columns == ["id", "name", "score"]


def _columnar(start: int, stop: int, kind: str) -> Any:
    import pandas as pd
    import pyarrow as pa

    frame = pd.DataFrame(_rows(start, stop))
    if kind == "pandas":
        return frame
    table = pa.Table.from_pandas(frame, preserve_index=False)
    return table if kind == "table" else table.to_batches()[0]


@pytest.mark.timeout(90)
def test_sink_columnar_items_count_as_one_item_each(spark: Any, tmp_path: Path) -> None:
    """RecordBatch, Table and pandas items, mixed with rows: demand counts items, files hold their rows."""
    out = tmp_path / "out"
    upstream = HandUpstream()
    sink = ParquetSink(spark, str(out), batch_size=2, schema=SCHEMA)
    upstream.subscribe(sink)
    upstream.wait_for_requests(1)
    assert upstream.requests == [2]
    upstream.emit([_columnar(0, 500, "batch"), _columnar(500, 1_200, "table")])
    upstream.wait_for_requests(2)
    assert _files(out) and len(_files(out)) == 1
    upstream.emit([_columnar(1_200, 1_300, "pandas"), *_rows(1_300, 1_301)])
    upstream.wait_for_requests(3)
    upstream.complete()
    stats = sink.result.result(timeout=60)
    assert (stats.rows, stats.batches) == (1_301, 2)
    assert upstream.requests == [2, 2, 2]
    assert _read(spark, out) == _rows(0, 1_301)


def test_sink_rows_convert_column_by_column_with_missing_keys_as_null(spark: Any) -> None:
    from flowpy.spark._arrow import ArrowBatches

    batches = ArrowBatches(spark, SCHEMA)
    table = batches.table([{"id": 1, "name": "a", "score": 0.5}, {"id": 2}])
    assert table.to_pylist() == [{"id": 1, "name": "a", "score": 0.5}, {"id": 2, "name": None, "score": None}]
    inferred = ArrowBatches(spark, None).table([{"id": 1}, {"id": 2, "extra": "x"}])
    assert inferred.to_pylist() == [{"id": 1, "extra": None}, {"id": 2, "extra": "x"}]


@pytest.mark.timeout(60)
def test_sink_cancelling_result_cancels_upstream(spark: Any, tmp_path: Path) -> None:
    upstream = HandUpstream()
    sink = ParquetSink(spark, str(tmp_path / "out"), batch_size=100)
    upstream.subscribe(sink)
    upstream.wait_for_requests(1)
    assert sink.result.cancel()
    upstream.wait_for_cancel()


@pytest.mark.parametrize(
    ("kwargs", "kind", "message"),
    [
        ({"batch_size": 0}, ValueError, r"^batch_size must be positive, got 0$"),
        ({"batch_size": True}, TypeError, r"^batch_size must be an int, got True$"),
        ({"mode": "ignore"}, ValueError, r"^mode must be one of 'append', 'overwrite', 'error', got 'ignore'$"),
        ({"writer": "jvm"}, ValueError, r"^writer must be one of 'auto', 'spark', 'pyarrow', got 'jvm'$"),
    ],
)
def test_sink_bad_arguments_raise(spark: Any, kwargs: dict[str, Any], kind: type, message: str) -> None:
    with pytest.raises(kind, match=message):
        ParquetSink(spark, "/unused", **kwargs)


def test_sink_second_subscription_is_cancelled(spark: Any, tmp_path: Path) -> None:
    sink = ParquetSink(spark, str(tmp_path / "out"))
    first, second = HandUpstream(), HandUpstream()
    first.subscribe(sink)
    second.subscribe(sink)
    assert second.cancelled and not first.cancelled
    sink.result.cancel()


@pytest.mark.parametrize(
    ("master_local", "path", "expected"),
    [
        (True, "/data/out", "pyarrow"),
        (True, "file:///data/out", "pyarrow"),
        (True, "hdfs://nn/out", "spark"),
        (False, "/data/out", "spark"),
    ],
)
def test_sink_auto_writer_is_pyarrow_only_where_this_process_sees_the_path_as_spark(
    spark: Any, master_local: bool, path: str, expected: str
) -> None:
    class _Conf:
        def get(self, key: str, default: Any = None) -> Any:
            assert key == "spark.master"
            return "local[2]" if master_local else "spark://127.0.0.1:7077"

    class _Session:
        conf = _Conf()

    assert sink_module.choose_writer(_Session(), path, "auto") == expected  # type: ignore[arg-type]
    assert ParquetSink(spark, path).writer == ("pyarrow" if path != "hdfs://nn/out" else "spark")
    assert ParquetSink(spark, path, writer="spark").writer == "spark"


@pytest.mark.timeout(60)
def test_sink_pyarrow_files_are_named_in_commit_order_and_leave_no_staging(spark: Any, tmp_path: Path) -> None:
    out = tmp_path / "out"
    sink, upstream = _fed_by_hand(spark, out, batch_size=10, full_batches=12, writer="pyarrow")
    upstream.complete()
    assert sink.result.result(timeout=60).batches == 12
    import pyarrow.parquet as pq

    firsts = [pq.read_table(out / name).column("id")[0].as_py() for name in _files(out)]
    assert firsts == list(range(0, 120, 10))  # sorted by name = committed order
    assert _leftovers(out) == []


@pytest.mark.timeout(60)
def test_sink_pyarrow_path_that_is_a_file_fails_before_the_first_request(spark: Any, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.write_text("not a directory")
    sink = ParquetSink(spark, str(out), batch_size=10, writer="pyarrow")
    upstream = HandUpstream()
    upstream.subscribe(sink)
    message = (
        rf"^ParquetSink '{out}' committed 0 rows in 0 batches, then could not prepare '{out}': "
        rf"NotADirectoryError: ParquetSink path '{out}' is a file, not a directory$"
    )
    with pytest.raises(ParquetSinkError, match=message):
        sink.result.result(timeout=60)
    upstream.wait_for_cancel()
    assert upstream.requests == []
