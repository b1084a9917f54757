"""flowpy.interop.otel: snapshots reported as OpenTelemetry metrics, read with the SDK's in-memory reader."""

from __future__ import annotations

import gc
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader, Metric

from flowpy import SubmissionPublisher, operators
from flowpy.interop.otel import METER_NAME, StreamMetrics, instrument, subscriber_label
from tests.sources_helpers import SpyPublisher
from tests.support import ManualExecutor, Recorder

ROOT = Path(__file__).resolve().parents[2]

METRIC_NAMES = {
    "flowpy.subscriber.buffered",
    "flowpy.subscriber.capacity",
    "flowpy.subscriber.demand",
    "flowpy.subscriber.delivered",
    "flowpy.subscriber.dropped",
    "flowpy.publisher.subscribers",
}


@pytest.fixture
def reader() -> Iterator[InMemoryMetricReader]:
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    reader.provider = provider  # type: ignore[attr-defined]
    yield reader
    provider.shutdown()


def _provider(reader: InMemoryMetricReader) -> MeterProvider:
    provider: MeterProvider = reader.provider  # type: ignore[attr-defined]
    return provider


def _collect(reader: InMemoryMetricReader) -> dict[str, Metric]:
    data = reader.get_metrics_data()
    if data is None:
        return {}
    found: dict[str, Metric] = {}
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            assert scope.scope.name == METER_NAME
            for metric in scope.metrics:
                found[metric.name] = metric
    return found


def _points(metric: Metric) -> dict[tuple[tuple[str, Any], ...], Any]:
    return {tuple(sorted((point.attributes or {}).items())): point.value for point in metric.data.data_points}  # type: ignore[union-attr]


def _blocked_publisher() -> tuple[SubmissionPublisher[int], Recorder, ManualExecutor]:
    """A publisher with one subscriber that has 3 items buffered, 1 delivered and 2 dropped."""
    executor = ManualExecutor()
    publisher: SubmissionPublisher[int] = SubmissionPublisher(executor=executor, max_buffer_capacity=4)
    recorder = Recorder()
    publisher.subscribe(recorder)
    executor.run_all()
    for item in range(4):
        publisher.submit(item)
    recorder.request(1)
    executor.run_all()
    publisher.submit(4)
    assert publisher.offer(5) == -1
    assert publisher.offer(6) == -1
    return publisher, recorder, executor


def test_instrument_reports_every_metric_per_subscriber(reader: InMemoryMetricReader) -> None:
    publisher, recorder, _ = _blocked_publisher()
    with instrument(publisher, "orders", meter_provider=_provider(reader)):
        metrics = _collect(reader)
        assert set(metrics) == METRIC_NAMES
        key = (("flowpy.stage", "orders"), ("flowpy.subscriber", subscriber_label(recorder)))
        values = {name: _points(metric) for name, metric in metrics.items()}
        assert values["flowpy.subscriber.buffered"] == {key: 4}
        assert values["flowpy.subscriber.capacity"] == {key: 4}
        assert values["flowpy.subscriber.demand"] == {key: 0}
        assert values["flowpy.subscriber.delivered"] == {key: 1}
        assert values["flowpy.subscriber.dropped"] == {key: 2}
        assert values["flowpy.publisher.subscribers"] == {(("flowpy.stage", "orders"),): 1}
    publisher.close()


def test_instrument_metric_kinds_and_units(reader: InMemoryMetricReader) -> None:
    publisher, _, _ = _blocked_publisher()
    with instrument(publisher, "orders", meter_provider=_provider(reader)):
        metrics = _collect(reader)
    kinds = {
        name: (type(metric.data).__name__, getattr(metric.data, "is_monotonic", None), metric.unit)
        for name, metric in metrics.items()
    }
    assert kinds == {
        "flowpy.subscriber.buffered": ("Sum", False, "{item}"),
        "flowpy.subscriber.capacity": ("Sum", False, "{item}"),
        "flowpy.subscriber.demand": ("Gauge", None, "{item}"),
        "flowpy.subscriber.delivered": ("Sum", True, "{item}"),
        "flowpy.subscriber.dropped": ("Sum", True, "{item}"),
        "flowpy.publisher.subscribers": ("Sum", False, "{subscriber}"),
    }
    publisher.close()


def test_instrument_each_collection_reads_a_fresh_snapshot(reader: InMemoryMetricReader) -> None:
    publisher, recorder, executor = _blocked_publisher()
    with instrument(publisher, "orders", meter_provider=_provider(reader), subscriber_name=lambda s: "only"):
        key = (("flowpy.stage", "orders"), ("flowpy.subscriber", "only"))
        assert _points(_collect(reader)["flowpy.subscriber.delivered"]) == {key: 1}
        recorder.request(10)
        executor.run_all()
        metrics = _collect(reader)
        assert _points(metrics["flowpy.subscriber.delivered"]) == {key: 5}
        assert _points(metrics["flowpy.subscriber.buffered"]) == {key: 0}
        assert _points(metrics["flowpy.subscriber.demand"]) == {key: 6}
    publisher.close()


def test_instrument_several_stages_share_the_instruments(reader: InMemoryMetricReader) -> None:
    publisher, recorder, _ = _blocked_publisher()
    source = SpyPublisher()
    stage = operators.observe_on(source, ManualExecutor(), prefetch=8)
    downstream = Recorder()
    stage.subscribe(downstream)
    assert source.subscriber is not None
    source.subscriber.on_next(1)
    provider = _provider(reader)
    with instrument(publisher, "orders", meter_provider=provider), instrument(stage, "ui", meter_provider=provider):
        buffered = _points(_collect(reader)["flowpy.subscriber.buffered"])
    assert buffered == {
        (("flowpy.stage", "orders"), ("flowpy.subscriber", subscriber_label(recorder))): 4,
        (("flowpy.stage", "ui"), ("flowpy.subscriber", subscriber_label(downstream))): 1,
    }
    publisher.close()


def test_instrument_close_stops_reporting(reader: InMemoryMetricReader) -> None:
    publisher, _, _ = _blocked_publisher()
    handle = instrument(publisher, "orders", meter_provider=_provider(reader))
    assert not handle.closed
    handle.close()
    handle.close()  # idempotent
    assert handle.closed
    assert all(not metric.data.data_points for metric in _collect(reader).values())
    publisher.close()


def test_instrument_holds_the_publisher_weakly(reader: InMemoryMetricReader) -> None:
    publisher, _, executor = _blocked_publisher()
    handle = instrument(publisher, "orders", meter_provider=_provider(reader))
    publisher.close()
    executor.run_all()
    del publisher
    gc.collect()
    assert handle.closed and not handle.alive
    assert all(not metric.data.data_points for metric in _collect(reader).values())


def test_stream_metrics_on_a_given_meter(reader: InMemoryMetricReader) -> None:
    publisher, _, _ = _blocked_publisher()
    stream_metrics = StreamMetrics(_provider(reader).get_meter("custom"))
    with stream_metrics.register(publisher, "orders") as handle:
        assert stream_metrics.registrations == (handle,)
        data = reader.get_metrics_data()
        assert data is not None
        scopes = {scope.scope.name for resource in data.resource_metrics for scope in resource.scope_metrics}
        assert scopes == {"custom"}
    assert len(stream_metrics.registrations) == 0
    publisher.close()


def test_instrument_rejects_what_has_no_snapshot(reader: InMemoryMetricReader) -> None:
    with pytest.raises(TypeError, match=r"^publisher must have a snapshot\(\) method, got 42$"):
        instrument(42, "x", meter_provider=_provider(reader))  # type: ignore[arg-type]
    publisher, _, _ = _blocked_publisher()
    with pytest.raises(TypeError, match=r"^name must be a str, got 7$"):
        instrument(publisher, 7, meter_provider=_provider(reader))  # type: ignore[arg-type]
    publisher.close()


def test_instrument_rejects_a_publisher_without_weak_references(reader: InMemoryMetricReader) -> None:
    class Fixed:
        __slots__ = ()

        def snapshot(self) -> Any:
            raise AssertionError("never read")

    with pytest.raises(TypeError, match=r"^publisher must support weak references, got <.*Fixed object at .*>$"):
        instrument(Fixed(), "x", meter_provider=_provider(reader))


GLOBAL_PROBE = """
from opentelemetry import metrics
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from flowpy import SubmissionPublisher, direct_executor
from flowpy.interop.otel import instrument

reader = InMemoryMetricReader()
metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
publisher = SubmissionPublisher(direct_executor)
done = publisher.consume(lambda item: None)
handle = instrument(publisher, "global")
for item in range(5):
    publisher.submit(item)
for metric in reader.get_metrics_data().resource_metrics[0].scope_metrics[0].metrics:
    if metric.name == "flowpy.subscriber.delivered":
        print([(dict(p.attributes)["flowpy.stage"], p.value) for p in metric.data.data_points])
publisher.close()
"""


@pytest.mark.timeout(60)
def test_instrument_defaults_to_the_global_meter_provider() -> None:
    result = subprocess.run(
        [sys.executable, "-c", GLOBAL_PROBE], cwd=ROOT, capture_output=True, text=True, timeout=50, check=True
    )
    assert result.stdout.splitlines() == ["[('global', 5)]"]
