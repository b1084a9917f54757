"""flat_map: map to publishers, merge them; bounded concurrency and prefetch."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flowpy import operators
from flowpy.flow import Publisher
from flowpy.sources import RangePublisher, just
from tests.operators.conftest import (
    WAIT,
    GatedPublisher,
    Spy,
    StubSubscription,
    before_each_failure,
    drive,
    patterns,
)
from tests.sources_helpers import SpyPublisher
from tests.support import Recorder


def test_flat_map_merges_inner_publishers() -> None:
    recorder = Recorder()
    operators.flat_map(just(1, 2), lambda x: just(x, x * 10)).subscribe(recorder)
    recorder.request(10)
    assert sorted(recorder.items) == [1, 2, 10, 20]
    assert recorder.completed


def test_flat_map_max_concurrency_bounds_outer_requests() -> None:
    outer = Spy(RangePublisher(0, 10))
    inners: list[Spy] = []

    def inner(x: int) -> Spy:
        spy = Spy(RangePublisher(x * 100, 3))
        inners.append(spy)
        return spy

    recorder = Recorder()
    operators.flat_map(outer, inner, max_concurrency=2, prefetch=2).subscribe(recorder)
    assert outer.subscription.requests == [2]
    assert all(spy.subscription.requests == [2] for spy in inners)
    recorder.request(100)
    assert recorder.completed
    assert len(recorder.items) == 30
    for spy in inners:  # never more than prefetch outstanding per inner
        assert spy.subscription.requests[0] == 2
        assert all(n <= 2 for n in spy.subscription.requests)


def test_flat_map_function_raises_signals_error_and_cancels() -> None:
    outer = Spy(RangePublisher(0, 10))
    recorder = Recorder()
    operators.flat_map(outer, lambda x: 1 / 0).subscribe(recorder)  # type: ignore[arg-type,return-value]
    assert isinstance(recorder.error, ZeroDivisionError)
    assert outer.subscription.cancelled.is_set()


def test_flat_map_result_not_a_publisher_signals_type_error() -> None:
    recorder = Recorder()
    operators.flat_map(just(1), lambda x: [x]).subscribe(recorder)  # type: ignore[arg-type,return-value]
    assert isinstance(recorder.error, TypeError)
    assert str(recorder.error) == "flat_map function result must be a Publisher, got [1]"


def test_flat_map_zero_concurrency_raises_value_error() -> None:
    with pytest.raises(ValueError, match=r"^max_concurrency must be positive, got 0$"):
        operators.flat_map(just(1), just, max_concurrency=0)


@pytest.mark.timeout(60)
@pytest.mark.usefixtures("tiny_switch_interval")
def test_flat_map_asynchronous_inners_deliver_everything() -> None:
    for _ in range(5):
        recorder = Recorder()
        operators.flat_map(
            RangePublisher(0, 20),
            lambda x: operators.observe_on(RangePublisher(x * 100, 30), prefetch=4),
            max_concurrency=3,
            prefetch=2,
        ).subscribe(recorder)
        for _ in range(100):
            recorder.request(7)
        assert recorder.done.wait(WAIT)
        assert sorted(recorder.items) == sorted(x * 100 + k for x in range(20) for k in range(30))
        assert recorder.violations == []


@settings(max_examples=40, deadline=None)
@given(sizes=st.lists(st.integers(min_value=0, max_value=6), max_size=8), pattern=patterns)
def test_flat_map_contains_every_inner_item_under_any_pattern(sizes: list[int], pattern: list[int]) -> None:
    recorder = drive(
        operators.flat_map(
            just(*range(len(sizes))), lambda i: RangePublisher(i * 10, sizes[i]), max_concurrency=2, prefetch=2
        ),
        pattern,
    )
    expected = [i * 10 + k for i, size in enumerate(sizes) for k in range(size)]
    assert sorted(recorder.items) == sorted(expected)


def test_a_source_error_is_never_completed_by_a_drain_that_runs_while_it_is_recorded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    before_each_failure(monkeypatch, lambda coordinator: coordinator._signal())
    source = SpyPublisher()
    recorder = Recorder()
    operators.flat_map(source, just).subscribe(recorder)
    recorder.request(1)
    assert source.subscriber is not None
    source.subscriber.on_error(KeyError("source"))
    assert not recorder.completed
    assert isinstance(recorder.error, KeyError)


def test_a_raising_function_is_never_completed_by_a_drain_that_runs_while_it_is_recorded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def fail(item: int) -> Publisher[int]:
        raise KeyError(item)

    before_each_failure(monkeypatch, lambda coordinator: coordinator._signal())
    source = SpyPublisher()
    recorder = Recorder()
    operators.flat_map(source, fail).subscribe(recorder)
    recorder.request(1)
    assert source.subscriber is not None
    source.subscriber.on_next(1)
    assert not recorder.completed
    assert isinstance(recorder.error, KeyError)
    assert source.cancelled.is_set()


def test_flat_map_cancels_a_second_source_subscription_and_keeps_the_first() -> None:
    source = SpyPublisher()
    recorder = Recorder()
    operators.flat_map(source, lambda x: just(x), max_concurrency=2).subscribe(recorder)
    outer = source.subscriber
    assert outer is not None
    assert source.requests == [2]
    second = StubSubscription()
    outer.on_subscribe(second)  # rule 2.5
    assert second.cancels == 1
    assert second.requests == []
    assert recorder.kinds() == ["on_subscribe"]
    recorder.request(5)
    outer.on_next(7)
    assert recorder.items == [7]
    assert source.requests == [2, 1]  # the kept subscription is asked for the next publisher
    recorder.cancel()
    assert source.cancelled.is_set()
    assert second.cancels == 1


def test_flat_map_none_source_subscription_raises() -> None:
    source = SpyPublisher()
    operators.flat_map(source, lambda x: just(x)).subscribe(Recorder())
    assert source.subscriber is not None
    with pytest.raises(TypeError, match=r"^subscription must not be None \(rule 2\.13\)$"):
        source.subscriber.on_subscribe(None)  # type: ignore[arg-type]


def test_flat_map_raising_cancel_of_a_second_source_subscription_is_reported(caplog: pytest.LogCaptureFixture) -> None:
    class _RaisingCancel(StubSubscription):
        def cancel(self) -> None:
            super().cancel()
            raise RuntimeError("cancel failed")

    source = SpyPublisher()
    operators.flat_map(source, lambda x: just(x)).subscribe(Recorder())
    assert source.subscriber is not None
    second = _RaisingCancel()
    with caplog.at_level(logging.ERROR, logger="flowpy"):
        source.subscriber.on_subscribe(second)  # rules 2.5, 3.15: the publisher is not thrown at
    assert second.cancels == 1
    assert any("cancel failed" in repr(record.exc_info) for record in caplog.records)


def test_flat_map_inner_subscription_arriving_as_the_downstream_cancels_is_cancelled() -> None:
    recorder = Recorder()
    inner = GatedPublisher(lambda _: recorder.cancel())  # the coordinator's sweep runs in the inner's window
    source = SpyPublisher()
    operators.flat_map(source, lambda _: inner).subscribe(recorder)
    assert source.subscriber is not None
    source.subscriber.on_next(1)
    assert source.cancelled.is_set()
    assert inner.subscription.cancels == 1  # not left neither requested nor cancelled
    assert inner.subscription.requests == []


def test_flat_map_inner_added_after_the_downstream_cancelled_is_cancelled_on_arrival() -> None:
    recorder = Recorder()
    inner = GatedPublisher()

    def cancel_then_map(_: object) -> Publisher[Any]:
        recorder.cancel()  # the coordinator's sweep is over before this inner exists
        return inner

    source = SpyPublisher()
    operators.flat_map(source, cancel_then_map).subscribe(recorder)
    assert source.subscriber is not None
    source.subscriber.on_next(1)
    assert inner.subscription.cancels == 1
    assert inner.subscription.requests == []


@pytest.mark.timeout(60)
def test_flat_map_1000_stages_deliver_everything() -> None:
    # The on_subscribe of each stage and the subscribes of its inners go
    # through the trampoline: no stage recurses through all those below it.
    chain: Any = RangePublisher(0, 20)
    for _ in range(1000):
        chain = operators.flat_map(chain, just)
    recorder = drive(chain, [1, 3, 7])
    assert recorder.items == list(range(20))
    assert recorder.completed
