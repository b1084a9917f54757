"""Flowable: the operators as chained methods over any publisher."""

from __future__ import annotations

import operator
from typing import Any

import pytest

from flowpy import operators
from flowpy.flow import Publisher
from flowpy.flowable import ConnectableFlowable, Flowable
from flowpy.operators._fused import FusedPublisher
from flowpy.sources import RangePublisher, just
from flowpy.subscribers import LambdaSubscriber
from tests.operators.conftest import WAIT
from tests.support import Recorder


def test_flowable_is_a_publisher_and_wraps_once() -> None:
    flowable = Flowable.from_publisher(just(1))
    assert isinstance(flowable, Publisher)
    assert Flowable.from_publisher(flowable) is flowable


def test_flowable_range_map_filter_to_list() -> None:
    result = Flowable.range(0, 10).map(lambda x: x * x).filter(lambda x: x % 2).to_list().result(WAIT)
    assert result == [1, 9, 25, 49, 81]


def test_flowable_chain_of_synchronous_methods_is_one_fused_stage() -> None:
    chain = Flowable.range(0, 100).map(str).filter(bool).skip(2).take(3)
    assert isinstance(chain.publisher, FusedPublisher)
    assert len(chain.publisher.steps) == 4
    assert chain.to_list().result(WAIT) == ["2", "3", "4"]


def test_flowable_from_iterable_publishes_on_executor() -> None:
    assert Flowable.from_iterable("abc").map(str.upper).to_list().result(WAIT) == ["A", "B", "C"]


def test_flowable_every_operator_method_chains() -> None:
    result = (
        Flowable.just(1, 2, 3, 4, 5, 6)
        .scan(operator.add)
        .take_while(lambda x: x < 20)
        .buffer(2)
        .map(sum)
        .observe_on(prefetch=2)
        .subscribe_on()
        .flat_map(lambda x: just(x, -x), max_concurrency=1)
        .on_backpressure_buffer(16)
        .to_list()
        .result(WAIT)
    )
    assert result == [4, -4, 16, -16, 15, -15]


def test_flowable_static_and_instance_combinators() -> None:
    assert Flowable.merge(just(1), just(2)).reduce(operator.add, 0).result(WAIT) == 3
    assert Flowable.concat(just(1), just(2)).to_list().result(WAIT) == [1, 2]
    assert Flowable.zip(just(1, 2), just(3, 4)).to_list().result(WAIT) == [(1, 3), (2, 4)]
    assert Flowable.just(1).concat_with(just(2), just(3)).to_list().result(WAIT) == [1, 2, 3]
    assert Flowable.just(1).merge_with(just(2)).reduce(operator.add, 0).result(WAIT) == 3
    assert Flowable.just(1, 2).zip_with(just(10, 20), fn=operator.add).to_list().result(WAIT) == [11, 22]
    assert Flowable.empty().to_list().result(WAIT) == []
    with pytest.raises(KeyError):
        Flowable.error(KeyError("k")).to_list().result(WAIT)


def test_flowable_subscribe_accepts_a_subscriber() -> None:
    recorder = Recorder()
    assert Flowable.just(1, 2).subscribe(recorder) is None
    recorder.request(2)
    assert recorder.items == [1, 2]


def test_flowable_subscribe_accepts_callbacks_and_returns_the_subscriber() -> None:
    seen: list[Any] = []
    subscriber = Flowable.range(0, 3).subscribe(seen.append, on_complete=lambda: seen.append("done"))
    assert isinstance(subscriber, LambdaSubscriber)
    assert seen == [0, 1, 2, "done"]


class _DuckSubscriber:
    """A subscriber that is no :class:`~flowpy.flow.Subscriber` subclass: the four methods are enough."""

    def __init__(self) -> None:
        self.signals: list[Any] = []

    def on_subscribe(self, subscription: Any) -> None:
        subscription.request(10)

    def on_next(self, item: Any) -> None:
        self.signals.append(item)

    def on_error(self, error: BaseException) -> None:
        self.signals.append(error)

    def on_complete(self) -> None:
        self.signals.append("done")


def test_flowable_subscribe_accepts_a_duck_typed_subscriber() -> None:
    duck = _DuckSubscriber()
    assert Flowable.just(1, 2).subscribe(duck) is None  # type: ignore[call-overload]
    assert duck.signals == [1, 2, "done"]


def test_flowable_subscribe_of_neither_a_subscriber_nor_a_callable_names_both() -> None:
    with pytest.raises(TypeError, match=r"^subscriber must be a Subscriber or an on_next callable, got 3$"):
        Flowable.just(1).subscribe(3)  # type: ignore[call-overload]


def test_flowable_subscribe_none_raises_type_error() -> None:
    with pytest.raises(TypeError, match=r"^subscriber must not be None \(rule 1\.9\)$"):
        Flowable.just(1).subscribe(None)  # type: ignore[call-overload]


def test_flowable_publish_connects_on_demand_and_share_automatically() -> None:
    published = Flowable.range(0, 3).publish()
    assert isinstance(published, ConnectableFlowable)
    first = published.to_list()
    second = published.to_list()
    published.connect()
    assert first.result(WAIT) == second.result(WAIT) == [0, 1, 2]
    assert Flowable.range(0, 2).share().to_list().result(WAIT) == [0, 1]


def test_flowable_blocking_iter_and_backpressure_methods() -> None:
    with Flowable.range(0, 5).blocking_iter(prefetch=2) as items:
        assert list(items) == [0, 1, 2, 3, 4]
    assert Flowable.range(0, 3).on_backpressure_drop().to_list().result(WAIT) == [0, 1, 2]
    assert Flowable.range(0, 3).on_backpressure_latest().to_list().result(WAIT) == [0, 1, 2]
    assert Flowable.range(0, 3).on_backpressure_error().to_list().result(WAIT) == [0, 1, 2]
    assert Flowable.range(0, 3).on_backpressure("latest", on_drop=print).to_list().result(WAIT) == [0, 1, 2]
    drops: list[int] = []
    buffered = Flowable.range(0, 5).on_backpressure_buffer(2, on_overflow="drop_latest", on_drop=drops.append)
    recorder = Recorder()
    buffered.subscribe(recorder)  # requests nothing: the range overflows the buffer of 2 at once
    assert drops == [2, 3, 4]
    recorder.request(5)
    assert recorder.items == [0, 1] and recorder.completed


def test_flowable_operator_functions_accept_a_flowable() -> None:
    assert operators.to_list(operators.map(Flowable.range(0, 2), str)).result(WAIT) == ["0", "1"]


def test_flowable_wrapping_non_publisher_raises_type_error() -> None:
    with pytest.raises(TypeError, match=r"^publisher must be a Publisher, got 3$"):
        Flowable(3)  # type: ignore[arg-type]


def test_flowable_repr_names_the_source() -> None:
    assert repr(Flowable(RangePublisher(0, 2))) == "Flowable(RangePublisher(start=0, count=2))"


def test_flowable_time_methods_chain_in_virtual_time() -> None:
    from flowpy.operators import TimeInterval, Timestamped
    from flowpy.testing import TestScheduler

    s = TestScheduler()
    ticks = Flowable.interval(1.0, scheduler=s).take(4)
    chained = (
        ticks.delay(0.5, scheduler=s)
        .delay_subscription(0.5, scheduler=s)
        .timeout(10.0, scheduler=s)
        .throttle_first(0.1, scheduler=s)
        .debounce(0.2, scheduler=s)
        .sample(0.25, scheduler=s)
        .buffer_with_time(100.0, scheduler=s)
        .timestamp(scheduler=s)
        .time_interval(scheduler=s)
        .test()
    )
    windows = Flowable.timer(1.0, scheduler=s).window_with_time(5.0, scheduler=s).test()
    counted = Flowable.range(0, 4).window_with_count(2).test()
    s.advance_time_by(20.0)
    (result,) = chained.assert_complete().values
    assert isinstance(result, TimeInterval) and isinstance(result.value, Timestamped)
    # The last tick reaches sample together with the completion, unsampled: dropped, as in RxJava.
    assert result.value.value == [0, 1, 2]
    assert all(isinstance(w, Flowable) for w in windows.values + counted.values)
    assert [w.test().values for w in counted.values] == [[0, 1], [2, 3]]
    assert s.pending == 0
