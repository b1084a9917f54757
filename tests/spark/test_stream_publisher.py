"""stream_publisher: Spark's commit protocol as delivery, a full buffer as backpressure, the ends of a query.

The first tests run the Spark side's own writer (``_Writer``, in this
process, over the socket) as Spark's tasks and driver call it, with a task
context made by hand and a query object that the test ends: every step of
the commit protocol is one call of the test. The last ones run real queries
on the local session.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from flowpy.spark._bridge import _Writer, recv_frame
from flowpy.spark._endpoint import Endpoint
from flowpy.spark._stream import _TaskCount
from flowpy.spark._stream_publisher import QueryPublisher, _QueryBridge
from tests.spark.helpers import Arrivals, Gate, WorkerKiller, assert_threads_end
from tests.support import Recorder

pa = pytest.importorskip("pyarrow")
pyspark = pytest.importorskip("pyspark")

SCHEMA = pa.schema([("id", pa.int64())])


def _batch(start: int, stop: int) -> Any:
    return pa.record_batch([pa.array(range(start, stop), pa.int64())], schema=SCHEMA)


@dataclass
class _Task:
    """What a Spark task tells its writer about itself (``pyspark.TaskContext``)."""

    batch: int
    attempt_id: int
    partition: int

    def getLocalProperty(self, key: str) -> str | None:
        return str(self.batch) if key == "streaming.sql.batchId" else None

    def taskAttemptId(self) -> int:
        return self.attempt_id

    def partitionId(self) -> int:
        return self.partition

    def attemptNumber(self) -> int:
        return 0


class _Query:
    """A StreamingQuery that ends when the test says so."""

    def __init__(self) -> None:
        self.ended = threading.Event()
        self.error: BaseException | None = None
        self.stops = 0

    def awaitTermination(self) -> None:
        self.ended.wait()
        if self.error is not None:
            raise self.error

    def stop(self) -> None:
        self.stops += 1
        self.ended.set()

    def fail(self, error: BaseException) -> None:
        self.error = error
        self.ended.set()


class _Bridge:
    """A stream_publisher's app side with a hand-made query, and Spark's writer in this process."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, *, rows: bool = True, capacity: int = 64) -> None:
        self.publisher: QueryPublisher[Any] = QueryPublisher(capacity)
        self.bridge = _QueryBridge(self.publisher, rows, capacity)
        self.endpoint = self.bridge.endpoint = Endpoint("stream_publisher", self.bridge.serve, host="127.0.0.1", port=0)
        self.publisher._bridge = self.bridge
        self.query = _Query()
        self.bridge.start(self.query)  # type: ignore[arg-type]
        self.writer = _Writer(self.endpoint.options())
        self._task = threading.local()
        monkeypatch.setattr(pyspark.TaskContext, "get", staticmethod(lambda: self._task.current))

    def write(self, task: _Task, batches: Iterable[Any]) -> Any:
        """Run one write task; return its commit message."""
        self._task.current = task
        return self.writer.write(iter(batches))

    def close(self) -> None:
        self.query.stop()
        self.endpoint.close()


@pytest.fixture
def bridge(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Bridge]:
    made = _Bridge(monkeypatch)
    try:
        yield made
    finally:
        made.close()


def _ids(recorder: Recorder) -> list[int]:
    return [row["id"] for row in recorder.items]


def _assert_ended(made: _Bridge) -> None:
    """The pump ends by itself once the query has ended; then no thread of the stream is left."""
    assert_threads_end(made.endpoint.name)
    assert made.endpoint.closed


def _recording(initial: int) -> Recorder:
    """A Recorder whose arrivals a test can wait for."""
    return Recorder(initial=initial, on_next_hook=Arrivals())


def _delivered(recorder: Recorder, count: int) -> None:
    assert isinstance(recorder.on_next_hook, Arrivals)
    recorder.on_next_hook.wait_for(count, timeout=30)


def test_stream_publisher_delivers_a_batch_on_commit_in_partition_order(bridge: _Bridge) -> None:
    recorder = _recording(100)
    bridge.publisher.subscribe(recorder)
    second = bridge.write(_Task(batch=0, attempt_id=11, partition=1), [_batch(3, 5)])
    first = bridge.write(_Task(batch=0, attempt_id=10, partition=0), [_batch(0, 2), _batch(2, 3)])
    assert bridge.publisher.held_items == 5 and recorder.items == []  # staged, not delivered
    assert (second.task, second.rows, first.rows) == (11, 2, 3)
    bridge.writer.commit([second, first], 0)
    _delivered(recorder, 5)
    assert _ids(recorder) == [0, 1, 2, 3, 4]
    assert bridge.publisher.batches_delivered == 1 and bridge.publisher.held_items == 0


def test_stream_publisher_batch_committed_again_is_not_delivered_twice(bridge: _Bridge) -> None:
    recorder = _recording(100)
    bridge.publisher.subscribe(recorder)
    bridge.writer.commit([bridge.write(_Task(0, 1, 0), [_batch(0, 2)])], 0)
    # A retry of batch 0 (Spark re-ran it): new attempts, the same batch id.
    again = bridge.write(_Task(0, 2, 0), [_batch(0, 2)])
    bridge.writer.commit([again], 0)
    bridge.writer.commit([bridge.write(_Task(1, 3, 0), [_batch(2, 3)])], 1)
    _delivered(recorder, 3)
    assert _ids(recorder) == [0, 1, 2]
    assert bridge.publisher.held_items == 0


def test_stream_publisher_aborted_batch_is_never_delivered(bridge: _Bridge) -> None:
    recorder = _recording(100)
    bridge.publisher.subscribe(recorder)
    bridge.writer.abort([bridge.write(_Task(0, 1, 0), [_batch(0, 2)]), None], 0)
    assert bridge.publisher.held_items == 0
    bridge.writer.commit([bridge.write(_Task(1, 2, 0), [_batch(100, 101)])], 1)
    _delivered(recorder, 1)
    assert _ids(recorder) == [100]


def test_stream_publisher_abort_during_a_write_stops_reading_it(bridge: _Bridge) -> None:
    recorder = _recording(100)
    bridge.publisher.subscribe(recorder)
    more = threading.Event()

    def first_then_more() -> Iterator[Any]:
        yield _batch(0, 2)
        more.wait(30)
        yield _batch(2, 4)

    failures: list[BaseException] = []

    def task() -> None:
        try:
            bridge.write(_Task(0, 1, 0), first_then_more())
        except (RuntimeError, ConnectionError) as exc:
            failures.append(exc)

    writer = threading.Thread(target=task)
    writer.start()
    deadline = threading.Event()
    for _ in range(600):  # until the app has the first record batch (staging notifies no one)
        if bridge.publisher.held_items == 2:
            break
        deadline.wait(0.05)
    assert bridge.publisher.held_items == 2
    bridge.writer.abort([None], 0)  # another task of batch 0 failed
    more.set()
    writer.join(30)
    assert len(failures) == 1 and bridge.publisher.held_items == 0  # the task's later rows were not taken in
    bridge.writer.commit([bridge.write(_Task(1, 2, 0), [_batch(7, 8)])], 1)
    _delivered(recorder, 1)
    assert _ids(recorder) == [7]


def test_stream_publisher_rows_of_failed_and_losing_attempts_are_dropped(bridge: _Bridge) -> None:
    recorder = _recording(100)
    bridge.publisher.subscribe(recorder)

    def dies_after_one_batch() -> Iterator[Any]:
        yield _batch(0, 2)
        raise RuntimeError("the Python worker died")

    with pytest.raises(RuntimeError, match=r"^the Python worker died$"):
        bridge.write(_Task(0, 1, 0), dies_after_one_batch())
    loser = bridge.write(_Task(0, 2, 0), [_batch(50, 52)])  # a speculative attempt Spark did not keep
    winner = bridge.write(_Task(0, 3, 0), [_batch(0, 2)])
    assert loser.rows == winner.rows == 2
    bridge.writer.commit([winner], 0)
    _delivered(recorder, 2)
    assert _ids(recorder) == [0, 1]
    assert bridge.publisher.held_items == 0  # neither the dead attempt's rows nor the loser's remain


def test_stream_publisher_commit_of_rows_that_never_arrived_fails_the_batch(bridge: _Bridge) -> None:
    message = (
        rf"^flowpy stream_publisher {bridge.endpoint.stream} cannot commit batch 0: "
        r"the rows of task attempts \[7\] did not all arrive$"
    )
    with pytest.raises(RuntimeError, match=message):
        bridge.writer.commit([bridge.write(_Task(0, 6, 0), [_batch(0, 1)]), _fake_message(7)], 0)


def _fake_message(task: int) -> Any:
    message = pyspark.sql.datasource.WriterCommitMessage()
    message.__dict__.update(task=task)
    return message


@pytest.mark.timeout(60)
def test_stream_publisher_write_task_blocks_while_the_buffer_is_full(monkeypatch: pytest.MonkeyPatch) -> None:
    made = _Bridge(monkeypatch, capacity=4)
    try:
        recorder = _recording(0)
        made.publisher.subscribe(recorder)
        # Batch 0 is staged whole (8 rows, over the capacity: a batch must be whole to commit) and committed.
        made.writer.commit([made.write(_Task(0, 1, 0), [_batch(0, 8)])], 0)
        sent = threading.Event()

        def rows_then_flag() -> Iterator[Any]:
            yield _batch(8, 10)
            sent.set()

        results: list[Any] = []
        task = threading.Thread(target=lambda: results.append(made.write(_Task(1, 2, 0), rows_then_flag())))
        task.start()
        assert sent.wait(30)  # the task sent everything into its socket ...
        assert made.bridge._staged[2].units == 0  # ... and none of it was read: the backlog is full
        assert made.publisher.peak_held_items == 8
        recorder.request(100)
        task.join(30)
        made.writer.commit(results, 1)
        _delivered(recorder, 10)
        assert _ids(recorder) == list(range(10))
        assert made.publisher.peak_held_items <= 8 + 2  # max(capacity, one micro-batch) + one record batch
    finally:
        made.close()


def test_stream_publisher_arrow_mode_hands_over_record_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    made = _Bridge(monkeypatch, rows=False)
    try:
        recorder = _recording(100)
        made.publisher.subscribe(recorder)
        made.writer.commit([made.write(_Task(0, 1, 0), [_batch(0, 2), _batch(2, 5)])], 0)
        _delivered(recorder, 2)
        assert [batch.to_pylist() for batch in recorder.items] == [
            [{"id": 0}, {"id": 1}],
            [{"id": 2}, {"id": 3}, {"id": 4}],
        ]
    finally:
        made.close()


def test_stream_publisher_end_of_the_query_completes_after_every_committed_row(bridge: _Bridge) -> None:
    recorder = Recorder(initial=1)
    bridge.publisher.subscribe(recorder)
    bridge.writer.commit([bridge.write(_Task(0, 1, 0), [_batch(0, 3)])], 0)
    bridge.write(_Task(1, 2, 0), [_batch(3, 4)])  # never committed: the query stops first
    bridge.query.stop()
    recorder.request(10)
    assert recorder.done.wait(30) and recorder.completed
    assert _ids(recorder) == [0, 1, 2]
    _assert_ended(bridge)


def test_stream_publisher_failure_of_the_query_is_signalled_after_the_committed_rows(bridge: _Bridge) -> None:
    recorder = Recorder(initial=10)
    bridge.publisher.subscribe(recorder)
    bridge.writer.commit([bridge.write(_Task(0, 1, 0), [_batch(0, 1)])], 0)
    failure = RuntimeError("executor lost")
    bridge.query.fail(failure)
    assert recorder.done.wait(30) and recorder.error is failure
    assert _ids(recorder) == [0]


def _fail_the_query(bridge: _Bridge, failure: BaseException) -> None:
    """Fail the query; return once the bridge has handed the failure to its publisher and ended."""
    bridge.query.fail(failure)
    pump = bridge.bridge._pump_thread
    assert pump is not None
    pump.join(30)
    assert not pump.is_alive()


def test_stream_publisher_failure_waits_for_a_subscriber_still_taking_the_committed_rows(bridge: _Bridge) -> None:
    gate = Gate()
    recorder = Recorder(initial=10, on_next_hook=gate)
    bridge.publisher.subscribe(recorder)
    bridge.writer.commit([bridge.write(_Task(0, 1, 0), [_batch(0, 5)])], 0)
    assert gate.entered.wait(30)  # row 0 is being delivered, rows 1-4 wait in the subscriber's buffer
    failure = RuntimeError("executor lost")
    _fail_the_query(bridge, failure)
    gate.open()
    assert recorder.done.wait(30) and recorder.error is failure
    assert _ids(recorder) == [0, 1, 2, 3, 4] and recorder.violations == []
    _assert_ended(bridge)


def test_stream_publisher_failure_waits_for_a_request_whose_task_is_not_handed_over_yet(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A request made before the failure is honoured even while its consumer task is still on the way.

    The subscriber requests from its own thread; that thread is held after
    the request has raised the demand and before its task reaches the
    executor (where a preempted thread may be), and the query fails there.
    """
    handed_over = threading.Event()
    release = threading.Event()
    requester: list[int] = []
    execute = _TaskCount.execute

    def held_execute(self: _TaskCount, task: Any) -> None:
        if threading.get_ident() in requester:
            handed_over.set()
            assert release.wait(30), "the requester was never released"
        execute(self, task)

    monkeypatch.setattr(_TaskCount, "execute", held_execute)
    made = _Bridge(monkeypatch)
    try:
        recorder = Recorder(initial=0)
        made.publisher.subscribe(recorder)
        assert recorder.subscribed.wait(30)
        made.writer.commit([made.write(_Task(0, 1, 0), [_batch(0, 4)])], 0)
        with made.bridge._changed:  # the rows wait in the subscriber's buffer, without demand
            assert made.bridge._changed.wait_for(lambda: made.bridge.batches_delivered == 1, 30)

        def request() -> None:
            requester.append(threading.get_ident())
            recorder.request(4)

        thread = threading.Thread(target=request)
        thread.start()
        assert handed_over.wait(30)  # the demand is raised; its task is not with the executor yet
        failure = RuntimeError("executor lost")
        _fail_the_query(made, failure)
        release.set()
        thread.join(30)
        assert recorder.done.wait(30) and recorder.error is failure
        assert _ids(recorder) == [0, 1, 2, 3] and recorder.violations == []
        _assert_ended(made)
    finally:
        release.set()
        made.close()


def test_stream_publisher_failure_goes_to_a_subscriber_without_demand_at_once(bridge: _Bridge) -> None:
    """The failure waits for the rows a subscriber's demand lets it take, not for new requests."""
    idle = Recorder(initial=0)
    partial = Recorder(initial=2)
    bridge.publisher.subscribe(idle)
    bridge.publisher.subscribe(partial)
    bridge.writer.commit([bridge.write(_Task(0, 1, 0), [_batch(0, 5)])], 0)
    failure = RuntimeError("executor lost")
    bridge.query.fail(failure)
    assert idle.done.wait(30) and idle.error is failure and idle.items == []
    assert partial.done.wait(30) and partial.error is failure
    assert _ids(partial) == [0, 1]
    _assert_ended(bridge)


def test_stream_publisher_closing_the_publisher_stops_the_query_and_refuses_rows(bridge: _Bridge) -> None:
    recorder = Recorder(initial=10)
    bridge.publisher.subscribe(recorder)
    bridge.publisher.close()
    assert bridge.query.ended.wait(30) and bridge.query.stops == 1
    assert recorder.done.wait(30) and recorder.completed
    _assert_ended(bridge)


def test_stream_publisher_exit_hook_stops_the_query(bridge: _Bridge) -> None:
    bridge.bridge.close()
    assert bridge.query.stops == 1 and bridge.publisher.is_closed


# -- Real queries on the local session -----------------------------------------------------


def _json_files(directory: Path, files: int, rows: int) -> None:
    directory.mkdir()
    for part in range(files):
        lines = [json.dumps({"id": part * rows + i, "key": f"k{i % 3}"}) for i in range(rows)]
        (directory / f"part-{part}.json").write_text("\n".join(lines) + "\n")


@pytest.mark.timeout(120)
@pytest.mark.parametrize("mode", ["rows", "arrow"])
def test_stream_publisher_query_rows_arrive_once_each_then_completion(spark: Any, tmp_path: Path, mode: str) -> None:
    from flowpy.spark import stream_publisher

    _json_files(tmp_path / "in", files=3, rows=100)
    stream = spark.readStream.schema("id LONG, key STRING").option("maxFilesPerTrigger", 1).json(str(tmp_path / "in"))
    publisher, query = stream_publisher(
        stream.selectExpr("id", "upper(key) AS key"),
        mode=mode,  # type: ignore[arg-type]
        max_buffer_capacity=16,
        trigger={"availableNow": True},
        checkpoint_location=str(tmp_path / "checkpoint"),
    )
    recorder = Recorder(initial=2**63 - 1)
    publisher.subscribe(recorder)
    assert recorder.done.wait(90) and recorder.completed and recorder.violations == []
    rows = recorder.items if mode == "rows" else [row for batch in recorder.items for row in batch.to_pylist()]
    assert sorted(row["id"] for row in rows) == list(range(300))
    assert {row["key"] for row in rows} == {"K0", "K1", "K2"}
    assert publisher.batches_delivered == 3 and not query.isActive


@pytest.mark.timeout(120)
def test_stream_publisher_aggregation_in_complete_mode_delivers_each_whole_result(spark: Any, tmp_path: Path) -> None:
    from flowpy.spark import stream_publisher

    _json_files(tmp_path / "in", files=2, rows=30)
    stream = spark.readStream.schema("id LONG, key STRING").option("maxFilesPerTrigger", 1).json(str(tmp_path / "in"))
    counts = stream.groupBy("key").count()
    publisher, _ = stream_publisher(counts, output_mode="complete", trigger={"availableNow": True})
    recorder = Recorder(initial=2**63 - 1)
    publisher.subscribe(recorder)
    assert recorder.done.wait(90) and recorder.completed
    assert publisher.batches_delivered == 2
    first, last = recorder.items[:3], recorder.items[3:]
    assert sorted((r["key"], r["count"]) for r in first) == [("k0", 10), ("k1", 10), ("k2", 10)]
    assert sorted((r["key"], r["count"]) for r in last) == [("k0", 20), ("k1", 20), ("k2", 20)]


def test_stream_publisher_refuses_update_mode_static_frames_and_unknown_modes(spark: Any) -> None:
    from flowpy.spark import stream_publisher

    stream = spark.readStream.format("rate").load()
    message = (
        r"^output_mode must be 'append' or 'complete', got 'update': Spark writes streams into Python data "
        r"sources in those two modes only \(an aggregation can use 'complete'\)$"
    )
    with pytest.raises(ValueError, match=message):
        stream_publisher(stream, output_mode="update")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^mode must be 'rows' or 'arrow', got 'pandas'$"):
        stream_publisher(stream, mode="pandas")  # type: ignore[arg-type]
    static = r"^streaming_df must be a streaming DataFrame \(spark\.readStream\), got DataFrame\[id: bigint\]$"
    with pytest.raises(ValueError, match=static):
        stream_publisher(spark.range(3))
    with pytest.raises(ValueError, match=r"^max_buffer_capacity must be positive, got 0$"):
        stream_publisher(stream, max_buffer_capacity=0)


@pytest.mark.timeout(120)
def test_stream_publisher_slow_subscriber_holds_the_query_within_the_bound(spark: Any, tmp_path: Path) -> None:
    from flowpy.spark import stream_publisher

    rows_per_batch, capacity = 200, 50
    stream = (
        spark.readStream.format("rate-micro-batch")
        .option("rowsPerBatch", rows_per_batch)
        .option("numPartitions", 2)
        .load()
    )
    publisher, query = stream_publisher(stream.select("value"), max_buffer_capacity=capacity)
    reached = threading.Event()
    values: list[int] = []

    def slow(item: Any) -> None:
        values.append(item["value"])
        if len(values) == 6 * rows_per_batch:
            reached.set()

    recorder = Recorder(initial=1, on_next_hook=slow)
    recorder.on_next_hook = lambda item: (slow(item), recorder.request(1))
    publisher.subscribe(recorder)
    try:
        assert reached.wait(90)
    finally:
        query.stop()
    assert recorder.done.wait(30) and recorder.completed
    assert sorted(values) == list(range(len(values)))  # every row of the committed batches, once
    # Beyond the subscriber's buffer: at most max(capacity, one micro-batch) + one record batch.
    assert publisher.peak_held_items <= max(capacity, rows_per_batch) + rows_per_batch // 2


# -- Failures on real queries: a worker dying mid-batch, a connection cut, a stop from outside ----


def _counted(spark: Any, batches: int, rows: int) -> Any:
    """A stream of ``batches`` micro-batches of ``rows`` ids each, in two partitions."""
    return (
        spark.readStream.format("rate-micro-batch")
        .option("rowsPerBatch", rows)
        .option("numPartitions", 2)
        .load()
        .selectExpr("value AS id")
        .where(f"id < {batches * rows}")
    )


@pytest.mark.timeout(120)
def test_stream_publisher_worker_killed_mid_batch_fails_the_local_query_after_the_committed_batches(
    spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pyspark.errors import StreamingQueryException

    from flowpy.spark import stream_publisher

    WorkerKiller(monkeypatch, _QueryBridge, "write", when=lambda hello: hello["batch"] == 1)
    publisher, query = stream_publisher(_counted(spark, 3, 20))
    recorder = _recording(1_000)
    publisher.subscribe(recorder)
    assert recorder.done.wait(90)
    assert isinstance(recorder.error, StreamingQueryException)
    assert "Python worker exited unexpectedly" in str(recorder.error)
    assert sorted(_ids(recorder)) == list(range(20))  # batch 0 only: batch 1 was aborted
    assert not query.isActive


@pytest.mark.timeout(120)
def test_stream_publisher_connection_cut_mid_write_fails_the_local_query_after_the_committed_batches(
    spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from flowpy.spark import _stream_publisher, stream_publisher

    frames = iter(range(10**6))

    def cut_in_batch_one(sock: Any) -> Any:
        frame = recv_frame(sock)
        if next(frames) == 7:  # a frame of the second batch's tasks
            sock.shutdown(2)
            raise ConnectionError("cut")
        return frame

    monkeypatch.setattr(_stream_publisher, "recv_frame", cut_in_batch_one)
    publisher, _ = stream_publisher(_counted(spark, 3, 20), mode="arrow")
    recorder = _recording(1_000)
    publisher.subscribe(recorder)
    assert recorder.done.wait(90) and recorder.error is not None
    assert "lost the connection to flowpy stream_publisher" in str(recorder.error)
    delivered = [row["id"] for batch in recorder.items for row in batch.to_pylist()]
    assert sorted(delivered) == list(range(20))  # no row of the batch the cut broke


@pytest.mark.timeout(120)
def test_stream_publisher_query_stopped_while_its_tasks_wait_for_a_slow_subscriber(spark: Any) -> None:
    from flowpy.spark import stream_publisher

    publisher, query = stream_publisher(_counted(spark, 50, 40), max_buffer_capacity=10)
    recorder = _recording(1)
    publisher.subscribe(recorder)
    _delivered(recorder, 1)
    # Batch 0's 40 rows wait in the backlog: batch 1's tasks are blocked until the subscriber asks.
    stopper = threading.Thread(target=query.stop)
    stopper.start()
    stopper.join(60)
    assert not stopper.is_alive() and not query.isActive
    recorder.request(1_000)
    assert recorder.done.wait(30) and recorder.completed
    assert sorted(_ids(recorder)) == list(range(40))  # batch 0 whole, nothing of the stopped batch


@pytest.mark.spark_cluster("standalone")
@pytest.mark.timeout(240)
def test_stream_publisher_worker_killed_mid_batch_is_retried_and_delivered_once(
    spark_sessions: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from flowpy.spark import stream_publisher

    standalone = spark_sessions.get("standalone")
    killer = WorkerKiller(monkeypatch, _QueryBridge, "write", when=lambda hello: hello["batch"] == 1)
    publisher, query = stream_publisher(_counted(standalone, 3, 20))
    recorder = _recording(1_000)
    publisher.subscribe(recorder)
    _delivered(recorder, 60)
    query.stop()
    assert recorder.done.wait(60) and recorder.completed
    assert sorted(_ids(recorder)) == list(range(60))  # every row once: the killed attempt's rows never
    [killed] = killer.killed
    attempts = [h["task"] for h in killer.of("write") if (h["batch"], h["partition"]) == (1, killed["partition"])]
    assert len(attempts) == 2 and killed["task"] == attempts[0]
