"""SparkProcessor: micro-batches transformed on Spark, results under downstream demand."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from flowpy.spark import SparkProcessor
from flowpy.submission import SubmissionPublisher
from tests.spark.helpers import Arrivals, HandUpstream
from tests.support import Recorder


def _doubled(df: Any) -> Any:
    return df.selectExpr("id", "id * 2 AS twice")


def _wired(spark: Any, transform: Any, *, batch_size: int, initial: int) -> tuple[Recorder, HandUpstream]:
    """A processor between a hand-driven upstream and a recorder, once it asked upstream for rows."""
    processor = SparkProcessor(spark, transform, batch_size=batch_size, schema="id BIGINT")
    recorder = Recorder(initial=initial)
    processor.subscribe(recorder)
    upstream = HandUpstream()
    upstream.subscribe(processor)
    upstream.wait_for_requests(1)
    return recorder, upstream


@pytest.mark.timeout(90)
def test_processor_transforms_every_row_in_order(spark: Any) -> None:
    processor = SparkProcessor(spark, _doubled, batch_size=40, schema="id BIGINT")
    recorder = Recorder(initial=1_000)
    processor.subscribe(recorder)
    with SubmissionPublisher[dict[str, Any]](max_buffer_capacity=32) as publisher:
        publisher.subscribe(processor)
        for i in range(100):
            publisher.submit({"id": i})
    assert recorder.done.wait(60)
    assert recorder.items == [{"id": i, "twice": 2 * i} for i in range(100)]
    assert recorder.completed and recorder.violations == []


@pytest.mark.timeout(90)
def test_processor_slow_downstream_bounds_batches_in_flight(spark: Any) -> None:
    upstream = HandUpstream()
    processor = SparkProcessor(spark, _doubled, batch_size=10, max_batches_in_flight=2)
    arrivals = Arrivals()
    recorder = Recorder(initial=0, on_next_hook=arrivals)
    upstream.subscribe(processor)
    assert upstream.requests == []  # nothing is requested before a subscriber comes
    processor.subscribe(recorder)
    upstream.wait_for_requests(1)
    assert recorder.subscribed.wait(30)
    assert upstream.requests == [20]
    upstream.emit({"id": i} for i in range(20))
    recorder.request(5)
    arrivals.wait_for(5)
    # Five results delivered out of two batches: still two in flight, nothing more requested.
    assert upstream.requests == [20] and upstream.outstanding == 0
    recorder.request(5)  # the first batch is now fully delivered: one more may come
    upstream.wait_for_requests(2)
    assert upstream.requests == [20, 10]
    upstream.emit({"id": i} for i in range(20, 30))
    recorder.request(100)
    arrivals.wait_for(30)
    upstream.wait_for_requests(4)
    assert sum(upstream.requests) == 50  # two batches again: in flight never exceeds two
    upstream.complete()
    assert recorder.done.wait(60)
    assert [row["twice"] for row in recorder.items] == [2 * i for i in range(30)]


@pytest.mark.timeout(90)
def test_processor_aggregating_transform_and_empty_results(spark: Any) -> None:
    recorder, upstream = _wired(spark, lambda df: df.where("id % 2 = 0").groupBy().count(), batch_size=10, initial=100)
    upstream.emit({"id": i} for i in range(15))
    upstream.complete()
    assert recorder.done.wait(60)
    assert recorder.items == [{"count": 5}, {"count": 3}]


@pytest.mark.timeout(90)
def test_processor_failing_transform_errors_downstream_and_cancels_upstream(spark: Any) -> None:
    def broken(df: Any) -> Any:
        return df.selectExpr("no_such_column")

    recorder, upstream = _wired(spark, broken, batch_size=5, initial=10)
    upstream.emit({"id": i} for i in range(5))
    assert recorder.done.wait(60)
    assert recorder.error is not None and "no_such_column" in str(recorder.error)
    upstream.wait_for_cancel()


@pytest.mark.timeout(60)
def test_processor_upstream_error_reaches_downstream(spark: Any) -> None:
    recorder, upstream = _wired(spark, _doubled, batch_size=5, initial=0)
    failure = LookupError("upstream broke")
    upstream.fail(failure)
    assert recorder.done.wait(30)
    assert recorder.error is failure


@pytest.mark.timeout(60)
def test_processor_downstream_cancel_cancels_upstream(spark: Any) -> None:
    recorder, upstream = _wired(spark, _doubled, batch_size=5, initial=1)
    assert recorder.subscribed.wait(30)
    recorder.cancel()
    upstream.wait_for_cancel()


@pytest.mark.timeout(60)
def test_processor_second_subscriber_gets_on_error(spark: Any) -> None:
    processor = SparkProcessor(spark, _doubled)
    first, second = Recorder(), Recorder()
    processor.subscribe(first)
    processor.subscribe(second)
    assert second.done.wait(30)
    assert str(second.error) == f"{processor!r} serves one subscriber and already has one"
    assert second.kinds() == ["on_subscribe", "on_error"]
    assert not first.done.is_set()


@pytest.mark.parametrize(
    ("kwargs", "kind", "message"),
    [
        ({"batch_size": 0}, ValueError, r"^batch_size must be positive, got 0$"),
        ({"max_batches_in_flight": 0}, ValueError, r"^max_batches_in_flight must be positive, got 0$"),
        ({"max_batches_in_flight": 1.5}, TypeError, r"^max_batches_in_flight must be an int, got 1\.5$"),
        ({"executor": None}, TypeError, r"^executor must not be None; leave it out to use the default executor$"),
        ({"transform": 3}, TypeError, r"^transform must be a callable DataFrame -> DataFrame, got 3$"),
    ],
)
def test_processor_bad_arguments_raise(spark: Any, kwargs: dict[str, Any], kind: type, message: str) -> None:
    arguments: dict[str, Any] = {"transform": _doubled, **kwargs}
    with pytest.raises(kind, match=message):
        SparkProcessor(spark, **arguments)


@pytest.mark.timeout(60)
def test_processor_concurrent_requests_stay_serial_upstream(spark: Any) -> None:
    """Requests to upstream come from several threads; rule 2.7 wants them serial."""
    overlaps: list[str] = []
    inside = threading.Lock()

    class Checking(HandUpstream):
        def request(self, n: int) -> None:
            if not inside.acquire(blocking=False):
                overlaps.append("overlapping request")
                return
            try:
                super().request(n)
            finally:
                inside.release()

    processor = SparkProcessor(spark, _doubled, batch_size=1, max_batches_in_flight=1)
    upstream = Checking()
    recorder = Recorder(initial=2**63 - 1)
    processor.subscribe(recorder)
    upstream.subscribe(processor)
    for i in range(8):
        upstream.wait_for_requests(i + 1)
        upstream.emit([{"id": i}])
    upstream.complete()
    assert recorder.done.wait(60)
    assert overlaps == [] and len(recorder.items) == 8
