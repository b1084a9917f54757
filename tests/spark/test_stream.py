"""publish_stream: a streaming query into a SubmissionPublisher whose submit slows it."""

from __future__ import annotations

import json
import statistics
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from flowpy.flow import Subscriber, Subscription
from flowpy.spark import publish_stream
from flowpy.spark._stream import StreamPublisher
from tests.spark.helpers import Gate
from tests.support import Recorder


@pytest.mark.timeout(120)
def test_stream_available_now_delivers_every_file_row_then_completes(spark: Any, tmp_path: Path) -> None:
    source = tmp_path / "in"
    source.mkdir()
    for part in range(3):
        lines = [json.dumps({"id": part * 100 + i, "part": part}) for i in range(100)]
        (source / f"part-{part}.json").write_text("\n".join(lines) + "\n")
    stream = spark.readStream.schema("id LONG, part INT").option("maxFilesPerTrigger", 1).json(str(source))
    publisher, query = publish_stream(
        stream,
        max_buffer_capacity=16,
        trigger={"availableNow": True},
        checkpoint_location=str(tmp_path / "checkpoint"),
    )
    recorder = Recorder(initial=2**63 - 1)
    publisher.subscribe(recorder)
    assert recorder.done.wait(90)  # the query stops by itself once the files are read
    assert recorder.completed and recorder.violations == []
    assert sorted(row["id"] for row in recorder.items) == list(range(300))
    assert not query.isActive and publisher.is_closed


def test_stream_publisher_fail_waits_until_no_subscriber_is_taking_items() -> None:
    publisher: StreamPublisher[int] = StreamPublisher(16)
    gate = Gate()
    taking = Recorder(initial=10, on_next_hook=gate)
    idle = Recorder(initial=0)
    publisher.subscribe(taking)
    publisher.subscribe(idle)
    publisher.submit_many([1, 2, 3])
    assert gate.entered.wait(30)  # item 1 is being delivered to `taking`; 2 and 3 wait in its buffer
    failure = RuntimeError("the query failed")
    publisher.fail(failure)  # returns at once
    assert not publisher.is_closed and not idle.done.is_set()
    gate.open()
    assert taking.done.wait(30) and taking.error is failure and taking.items == [1, 2, 3]
    # `idle` requested nothing: it gets the error once `taking` is done, without its buffered items.
    assert idle.done.wait(30) and idle.error is failure and idle.items == []
    assert taking.violations == [] and idle.violations == []


def test_stream_publisher_fail_without_a_busy_subscriber_closes_at_once() -> None:
    publisher: StreamPublisher[int] = StreamPublisher(16)
    recorder = Recorder(initial=0)
    publisher.subscribe(recorder)
    assert recorder.subscribed.wait(30)
    publisher.submit(1)
    failure = RuntimeError("the query failed")
    publisher.fail(failure)
    assert recorder.done.wait(30) and recorder.error is failure and recorder.items == []


@pytest.mark.timeout(120)
def test_stream_failure_is_signalled_after_the_rows_a_subscriber_is_still_taking(spark: Any, tmp_path: Path) -> None:
    source = tmp_path / "in"
    source.mkdir()
    (source / "good.json").write_text("".join(json.dumps({"id": i}) + "\n" for i in range(5)))
    stream = spark.readStream.schema("id LONG").option("maxFilesPerTrigger", 1).json(str(source))
    failing = stream.selectExpr("CASE WHEN id >= 100 THEN raise_error('bad row') ELSE id END AS id")
    publisher, query = publish_stream(failing, checkpoint_location=str(tmp_path / "checkpoint"))
    gate = Gate()
    recorder = Recorder(initial=2**63 - 1, on_next_hook=gate)
    publisher.subscribe(recorder)
    assert gate.entered.wait(90)  # batch 0 was handed over; its row 0 is being delivered
    (source / "bad.json").write_text(json.dumps({"id": 100}) + "\n")  # batch 1 fails
    with pytest.raises(Exception, match="bad row"):
        query.awaitTermination(90)
    for watcher in [t for t in threading.enumerate() if t.name == f"flowpy-stream-{query.id}"]:
        watcher.join(30)  # it hands the failure to the publisher, then ends
        assert not watcher.is_alive()
    gate.open()
    assert recorder.done.wait(30) and recorder.error is not None and "bad row" in str(recorder.error)
    assert [row["id"] for row in recorder.items] == [0, 1, 2, 3, 4] and recorder.violations == []


class _Paced(Subscriber[dict[str, Any]]):
    """Requests one row at a time and takes ``delay`` seconds over each row in ``slow``."""

    def __init__(self, slow: range, delay: float, stop_after: int) -> None:
        self.slow, self.delay, self.stop_after = slow, delay, stop_after
        self.values: list[int] = []
        self.reached = threading.Event()  # stop_after rows arrived
        self.done = threading.Event()
        self.error: BaseException | None = None
        self.subscription: Subscription | None = None

    def on_subscribe(self, subscription: Subscription) -> None:
        self.subscription = subscription
        subscription.request(1)

    def on_next(self, item: dict[str, Any]) -> None:
        value = item["value"]
        self.values.append(value)
        if value in self.slow:
            time.sleep(self.delay)  # the subscriber's own slow work, not synchronisation
        if len(self.values) == self.stop_after:
            self.reached.set()
        assert self.subscription is not None
        self.subscription.request(1)

    def on_error(self, error: BaseException) -> None:
        self.error = error
        self.done.set()

    def on_complete(self) -> None:
        self.done.set()


@pytest.mark.timeout(120)
def test_stream_slow_subscriber_slows_the_query_and_gets_every_row(spark: Any, tmp_path: Path) -> None:
    rows_per_batch = 200
    stream = (
        spark.readStream.format("rate-micro-batch")
        .option("rowsPerBatch", rows_per_batch)
        .option("numPartitions", 1)
        .load()
    )
    publisher, query = publish_stream(stream, max_buffer_capacity=8, checkpoint_location=str(tmp_path / "cp"))
    slow_batches = (4, 5)
    subscriber = _Paced(
        slow=range(slow_batches[0] * rows_per_batch, (slow_batches[-1] + 1) * rows_per_batch),
        delay=0.01,
        stop_after=7 * rows_per_batch,
    )
    publisher.subscribe(subscriber)
    try:
        assert subscriber.reached.wait(90)
    finally:
        query.stop()
    assert subscriber.done.wait(30) and subscriber.error is None
    # Every row the query produced arrived, in order, with no gap.
    assert subscriber.values == list(range(len(subscriber.values)))
    rates = {p["batchId"]: p["processedRowsPerSecond"] for p in query.recentProgress if p["numInputRows"]}
    fast = statistics.median(rates[b] for b in (1, 2, 3))
    slow = max(rates[b] for b in slow_batches)
    assert slow * 3 < fast, f"rows/s while slow {slow:.0f}, while fast {fast:.0f}"


def test_stream_static_dataframe_is_refused(spark: Any) -> None:
    message = r"^streaming_df must be a streaming DataFrame \(spark\.readStream\), got DataFrame\[id: bigint\]$"
    with pytest.raises(ValueError, match=message):
        publish_stream(spark.range(3))
