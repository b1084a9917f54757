"""stream_source: demand from Spark's read limit, items held until Spark commits, the ends of a stream.

The first tests drive the app side through the Spark side's own reader
(``_Reader``, in this process, over the socket), the way Spark's driver and
executors call it, with no JVM: each Spark call is one step of the test. The
last ones run real queries on the local session.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from flowpy.spark import _stream_source
from flowpy.spark._bridge import _Reader
from flowpy.spark._endpoint import Endpoint
from flowpy.spark._stream_source import HELD_BATCHES, _SourceStream
from flowpy.submission import SubmissionPublisher
from tests.operators.conftest import StubSubscription
from tests.spark.helpers import HandUpstream, WorkerKiller, assert_threads_end
from tests.support import GatedSlot

pa = pytest.importorskip("pyarrow")
types = pytest.importorskip("pyspark.sql.types")
datasource = pytest.importorskip("pyspark.sql.streaming.datasource")

STRUCT = types.StructType([types.StructField("id", types.LongType()), types.StructField("name", types.StringType())])


def _rows(start: int, stop: int) -> list[dict[str, Any]]:
    return [{"id": i, "name": f"n{i}"} for i in range(start, stop)]


def _batch(start: int, stop: int) -> Any:
    return pa.RecordBatch.from_pylist(_rows(start, stop), schema=pa.schema([("id", pa.int64()), ("name", pa.string())]))


class _Source:
    """A stream_source's app side, its upstream driven by hand, and Spark's reader in this process."""

    def __init__(self, max_rows: int) -> None:
        self.stream = _SourceStream(STRUCT, max_rows)
        self.endpoint = self.stream.endpoint = Endpoint("stream_source", self.stream.serve, host="127.0.0.1", port=0)
        self.upstream = HandUpstream()
        self.upstream.subscribe(self.stream)
        self.options = {**self.endpoint.options(), "max_rows": str(max_rows), "partition_rows": str(max_rows)}
        self.reader = _Reader(self.options)
        self.name = f"flowpy stream_source {self.endpoint.stream}"

    def limit(self, rows: int | None = None) -> Any:
        return self.reader.getDefaultReadLimit() if rows is None else datasource.ReadMaxRows(rows)

    def start(self) -> dict[str, Any]:
        offset: dict[str, Any] = self.reader.initialOffset()
        return offset

    def latest(self, start: dict[str, Any], rows: int | None = None) -> dict[str, Any]:
        offset: dict[str, Any] = self.reader.latestOffset(start, self.limit(rows))
        return offset

    def read(self, start: dict[str, Any], end: dict[str, Any]) -> list[dict[str, Any]]:
        """What the batch's read tasks get, in partition order."""
        return [
            row
            for partition in self.reader.partitions(start, end)
            for batch in self.reader.read(partition)
            for row in batch.to_pylist()
        ]

    def wait_for_requests(self, total: int) -> None:
        deadline = time.monotonic() + 30
        while sum(self.upstream.requests) < total:
            assert time.monotonic() < deadline, f"requested {self.upstream.requests}, waiting for {total}"
            self.upstream.wait_for_requests(len(self.upstream.requests) + 1, timeout=30)

    def close(self) -> None:
        self.reader.stop()
        self.stream.close()


@pytest.fixture
def source() -> Iterator[_Source]:
    made = _Source(max_rows=4)
    try:
        yield made
    finally:
        made.close()


@pytest.fixture
def short_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    """Idle waits of 50 ms instead of a second: the tests that wait them out stay short."""
    monkeypatch.setattr(_stream_source, "IDLE_WAIT", 0.05)
    monkeypatch.setattr(_stream_source, "AVAILABLE_NOW_TICK", 0.05)


def test_stream_source_requests_nothing_until_a_query_reads_then_one_batch(source: _Source) -> None:
    assert source.upstream.requests == []
    start = source.start()
    assert start == {"stream": source.endpoint.stream, "row": 0}
    source.upstream.wait_for_requests(1)
    assert source.upstream.requests == [1]  # one item until it is known to be a row
    source.upstream.emit(_rows(0, 1))
    source.wait_for_requests(4)
    assert source.upstream.requests == [1, 3]  # then rows up to the read limit, in one request


def test_stream_source_offset_takes_arrived_rows_up_to_the_limit_and_requests_the_next_batch(
    source: _Source,
) -> None:
    start = source.start()
    source.upstream.wait_for_requests(1)
    source.upstream.emit(_rows(0, 1))
    source.wait_for_requests(4)
    source.upstream.emit(_rows(1, 4))
    end = source.latest(start)
    assert end == {"stream": source.endpoint.stream, "row": 4}
    source.wait_for_requests(8)  # the next batch is requested ahead
    assert source.upstream.requests == [1, 3, 4]
    source.upstream.emit(_rows(4, 6))
    assert source.latest(end) == {"stream": source.endpoint.stream, "row": 6}  # what has arrived
    assert source.latest(end, rows=1) == {"stream": source.endpoint.stream, "row": 5}  # Spark's limit rules


def test_stream_source_retried_read_gets_the_same_rows_until_spark_commits(source: _Source) -> None:
    start = source.start()
    source.upstream.wait_for_requests(1)
    source.upstream.emit(_rows(0, 1))
    source.wait_for_requests(4)
    source.upstream.emit(_rows(1, 4))
    end = source.latest(start)
    assert source.read(start, end) == _rows(0, 4)
    assert source.read(start, end) == _rows(0, 4)  # a retried task
    assert source.stream.held_rows == 4
    source.reader.commit(end)
    assert source.stream.held_rows == 0
    message = rf"^rows 0 to 4 of {source.name} were let go when Spark committed them \(held: rows 4 to 4\)$"
    with pytest.raises(RuntimeError, match=message):
        source.read(start, end)


def test_stream_source_columnar_items_are_requested_one_at_a_time_and_sliced_at_the_limit(source: _Source) -> None:
    start = source.start()
    source.upstream.wait_for_requests(1)
    source.upstream.emit([_batch(0, 3)])
    source.wait_for_requests(2)
    source.upstream.emit([_batch(3, 6)])
    end = source.latest(start)
    assert end["row"] == 4  # the limit cuts the second batch
    assert source.read(start, end) == _rows(0, 4)
    source.wait_for_requests(3)  # 2 rows held beyond the plan: one more item
    assert source.upstream.requests == [1, 1, 1]
    source.reader.commit(end)
    assert source.stream.held_rows == 2  # the cut batch is held whole until its last row is committed
    assert source.read(end, source.latest(end)) == _rows(4, 6)


def test_stream_source_rows_of_every_kind_are_converted_to_the_schema(source: _Source) -> None:
    from pyspark.sql import Row

    pd = pytest.importorskip("pandas")
    start = source.start()
    source.upstream.wait_for_requests(1)
    source.upstream.emit([{"id": 0, "name": "n0"}])
    source.wait_for_requests(4)
    source.upstream.emit([(1, "n1"), Row(name="n2", id=2), pd.DataFrame({"id": [3, 4], "name": ["n3", "n4"]})])
    end = source.latest(start)
    assert source.read(start, end) == _rows(0, 4)  # a frame straddles the batches: sliced
    assert source.read(end, source.latest(end)) == _rows(4, 5)


def test_stream_source_item_that_does_not_fit_the_schema_fails_the_read_with_one_line(source: _Source) -> None:
    start = source.start()
    source.upstream.wait_for_requests(1)
    source.upstream.emit([{"id": "not a number", "name": "x"}])
    end = source.latest(start)
    message = (
        rf"^rows 0 to 1 of {source.name} do not fit the schema: "
        r"ArrowInvalid: Could not convert 'not a number' with type str: tried to convert to int64$"
    )
    with pytest.raises(RuntimeError, match=message):
        source.read(start, end)


def test_stream_source_publisher_error_fails_the_query_after_the_rows_before_it(source: _Source) -> None:
    start = source.start()
    source.upstream.wait_for_requests(1)
    source.upstream.emit(_rows(0, 1))
    source.upstream.fail(ValueError("the sensor went away"))
    end = source.latest(start)
    assert source.read(start, end) == _rows(0, 1)
    message = rf"^the publisher of {source.name} failed: ValueError: the sensor went away$"
    with pytest.raises(RuntimeError, match=message):
        source.latest(end)


@pytest.mark.usefixtures("short_waits")
def test_stream_source_completion_ends_the_input(source: _Source) -> None:
    start = source.start()
    source.upstream.wait_for_requests(1)
    assert source.latest(start) == start  # nothing yet: no new offset, after the idle wait
    source.upstream.emit(_rows(0, 1))
    source.upstream.complete()
    end = source.latest(start)
    assert source.read(start, end) == _rows(0, 1)
    assert source.latest(end) == end  # no more: a query under availableNow ends here


@pytest.mark.usefixtures("short_waits")
def test_stream_source_available_now_moves_on_empty_until_the_publisher_completes(source: _Source) -> None:
    start = source.start()
    source.reader.prepareForTriggerAvailableNow()
    tick = source.latest(start)
    assert tick == {"stream": source.endpoint.stream, "row": 0, "tick": 1}  # an empty micro-batch, not the end
    assert source.reader.partitions(start, tick) == []
    source.upstream.complete()
    assert source.latest(tick) == tick


def test_stream_source_offsets_of_an_earlier_stream_start_from_this_one(source: _Source) -> None:
    before = {"stream": "an-earlier-run", "row": 1_000}
    assert source.reader.partitions({"stream": "an-earlier-run", "row": 990}, before) == []  # nothing is re-read
    source.upstream.wait_for_requests(0)
    source.reader.commit(before)  # Spark commits the last batch of the earlier run: not this stream's rows
    source.upstream.wait_for_requests(1)
    source.upstream.emit(_rows(0, 1))
    end = source.latest(before)
    assert end == {"stream": source.endpoint.stream, "row": 1}
    assert source.read(before, end) == _rows(0, 1)


def test_stream_source_second_query_is_refused(source: _Source) -> None:
    source.start()
    second = _Reader(source.options)
    message = rf"^{source.name} already feeds a running query; make one per query$"
    with pytest.raises(RuntimeError, match=message):
        second.initialOffset()


@pytest.mark.parametrize("how", ["stop", "worker exit"])
def test_stream_source_end_of_the_query_cancels_the_subscription_and_closes_everything(
    source: _Source, how: str
) -> None:
    source.start()
    source.upstream.wait_for_requests(1)
    source.upstream.emit(_rows(0, 1))
    if how == "stop":
        source.reader.stop()
    else:  # the reader's Python worker is killed: its connection just closes
        assert source.reader._control is not None
        source.reader._control.close()
    source.upstream.wait_for_cancel()
    assert_threads_end(source.endpoint.name)
    assert source.stream.held_rows == 0
    with pytest.raises(ConnectionError, match=r"^cannot reach .* connection refused"):
        _Reader(source.options).initialOffset()


@pytest.mark.timeout(60)
@pytest.mark.usefixtures("tiny_switch_interval", "short_waits")
@pytest.mark.parametrize("columnar", [False, True])
def test_stream_source_holds_at_most_three_batches_while_producers_race_spark(columnar: bool) -> None:
    max_rows, total = 50, 3_000
    stream = _SourceStream(STRUCT, max_rows)
    endpoint = stream.endpoint = Endpoint("stream_source", stream.serve, host="127.0.0.1", port=0)
    reader = _Reader({**endpoint.options(), "max_rows": str(max_rows), "partition_rows": "20"})
    publisher: SubmissionPublisher[Any] = SubmissionPublisher(max_buffer_capacity=64)
    publisher.subscribe(stream)

    def produce() -> None:
        with publisher:
            for first in range(0, total, 7):
                if columnar:
                    publisher.submit(_batch(first, min(first + 7, total)))
                else:
                    publisher.submit_many(_rows(first, min(first + 7, total)))

    producer = threading.Thread(target=produce)
    producer.start()
    try:
        read: list[dict[str, Any]] = []
        start = reader.initialOffset()
        while len(read) < total:
            end = reader.latestOffset(start, reader.getDefaultReadLimit())
            reader.commit(start)  # as Spark does: the previous batch is committed once this one is planned
            read += [row for p in reader.partitions(start, end) for b in reader.read(p) for row in b.to_pylist()]
            start = end
        assert read == _rows(0, total)
        assert stream.peak_held_rows <= HELD_BATCHES * max_rows + (6 if columnar else 0)
    finally:
        producer.join(30)
        reader.stop()
        stream.close()


def test_stream_source_refuses_a_bad_max_rows_per_batch(spark: Any) -> None:
    from flowpy.spark import stream_source

    with pytest.raises(ValueError, match=r"^max_rows_per_batch must be positive, got 0$"):
        stream_source(HandUpstream(), "id BIGINT", spark=spark, max_rows_per_batch=0)


# -- Real queries on the local session -----------------------------------------------------


@pytest.mark.timeout(120)
def test_stream_source_rows_and_arrow_into_spark_file_sink_exactly_once(spark: Any, tmp_path: Path) -> None:
    from flowpy.spark import stream_source

    publisher: SubmissionPublisher[Any] = SubmissionPublisher(max_buffer_capacity=8)
    frame = stream_source(publisher, "id BIGINT, name STRING", spark=spark, max_rows_per_batch=100)
    assert frame.isStreaming
    out = tmp_path / "out"
    query = (
        frame.writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    with publisher:
        publisher.submit_many(_rows(0, 150))
        for first in range(150, 450, 50):
            publisher.submit(_batch(first, first + 50))
    query.awaitTermination(90)  # ends by itself: the publisher completed
    assert not query.isActive and query.exception() is None
    progress = query.recentProgress
    assert sum(p.numInputRows for p in progress) == 450
    assert all(p.numInputRows <= 100 for p in progress)
    assert sorted(tuple(r) for r in spark.read.parquet(str(out)).collect()) == [(i, f"n{i}") for i in range(450)]


@pytest.mark.timeout(120)
def test_stream_source_publisher_error_fails_the_query_with_its_text(spark: Any) -> None:
    from pyspark.errors import StreamingQueryException

    from flowpy.spark import stream_source

    upstream = HandUpstream()
    query = stream_source(upstream, "id BIGINT", spark=spark).writeStream.format("noop").start()
    upstream.wait_for_requests(1)
    upstream.fail(ValueError("the sensor went away"))
    with pytest.raises(StreamingQueryException, match=r"ValueError: the sensor went away"):
        query.awaitTermination(90)


@pytest.mark.timeout(120)
def test_stream_source_query_stop_cancels_the_subscription_promptly(
    spark: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from flowpy.spark import stream_source

    upstream = HandUpstream()
    query = stream_source(upstream, "id BIGINT", spark=spark).writeStream.format("noop").start()
    upstream.wait_for_requests(1)
    upstream.emit([{"id": 1}])
    query.processAllAvailable()
    query.explain(extended=True)
    stream = upstream.subscriber
    assert isinstance(stream, _SourceStream) and stream.endpoint is not None
    assert stream.endpoint.token not in capsys.readouterr().out  # the plan does not show the token
    started = time.monotonic()
    query.stop()
    assert time.monotonic() - started < 10  # not a timing claim: a hang would be minutes
    upstream.wait_for_cancel()
    assert_threads_end(stream.endpoint.name)
    assert stream.held_rows == 0 and stream.endpoint.closed


# -- Failures on real queries: a worker dying mid-batch, a connection cut --------------------


def _file_sink(frame: Any, tmp_path: Path) -> Any:
    return (
        frame.writeStream.format("parquet")
        .option("path", str(tmp_path / "out"))
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )


@pytest.mark.timeout(120)
def test_stream_source_worker_killed_mid_batch_fails_the_local_query_and_ends_the_stream(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pyspark.errors import StreamingQueryException

    from flowpy.spark import stream_source

    killer = WorkerKiller(monkeypatch, _SourceStream, "read")
    upstream = HandUpstream()
    query = _file_sink(stream_source(upstream, "id BIGINT", spark=spark), tmp_path)
    upstream.wait_for_requests(1)
    upstream.emit([{"id": 1}])
    # local[2] runs a task once: the query fails with Spark's reason, and the stream ends with it.
    with pytest.raises(StreamingQueryException, match=r"Python worker exited unexpectedly"):
        query.awaitTermination(90)
    upstream.wait_for_cancel()
    assert len(killer.killed) == 1 and spark.read.schema("id BIGINT").parquet(str(tmp_path / "out")).count() == 0


@pytest.mark.timeout(120)
def test_stream_source_connection_cut_mid_read_fails_the_local_query_with_one_line(
    spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pyspark.errors import StreamingQueryException

    from flowpy.spark import stream_source

    def half_then_cut(sock: Any, table: Any) -> None:
        import pyarrow as pa

        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table)
        view = memoryview(sink.getvalue())
        sock.sendall((view.nbytes).to_bytes(8, "big") + view[: view.nbytes // 2])
        sock.shutdown(2)

    monkeypatch.setattr(_stream_source, "send_table", half_then_cut)
    upstream = HandUpstream()
    query = stream_source(upstream, "id BIGINT", spark=spark).writeStream.format("noop").start()
    upstream.wait_for_requests(1)
    upstream.emit([{"id": 1}])
    message = r"lost the connection to flowpy stream_source \w+ at 127\.0\.0\.1:\d+ while reading rows 0 to 1: "
    with pytest.raises(StreamingQueryException, match=message):
        query.awaitTermination(90)
    upstream.wait_for_cancel()


@pytest.mark.spark_cluster("standalone")
@pytest.mark.timeout(240)
def test_stream_source_worker_killed_mid_batch_is_retried_with_the_same_rows_exactly_once(
    spark_sessions: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from flowpy.spark import stream_source

    standalone = spark_sessions.get("standalone")
    killer = WorkerKiller(monkeypatch, _SourceStream, "read", when=lambda hello: hello["start"] > 0)
    publisher: SubmissionPublisher[Any] = SubmissionPublisher(max_buffer_capacity=8)
    query = _file_sink(
        stream_source(publisher, "id BIGINT, name STRING", spark=standalone, max_rows_per_batch=100), tmp_path
    )
    with publisher:
        publisher.submit_many(_rows(0, 300))
    query.awaitTermination(200)
    assert query.exception() is None
    [killed] = killer.killed
    retried = [(h["start"], h["end"]) for h in killer.of("read") if h["start"] == killed["start"]]
    assert len(retried) == 2 and retried[0] == retried[1]  # the retried task read the same rows again
    written = sorted(tuple(row) for row in standalone.read.parquet(str(tmp_path / "out")).collect())
    assert written == [(i, f"n{i}") for i in range(300)]


def test_stream_source_subscription_arriving_as_the_stream_closes_is_cancelled() -> None:
    stream = _SourceStream(STRUCT, 4)
    stream._slot = GatedSlot(stream.close)  # closed in on_subscribe's window
    subscription = StubSubscription()
    stream.on_subscribe(subscription)
    assert subscription.cancels == 1
    assert subscription.requests == []
