"""timestamp and time_interval: fused steps that pair each item with the scheduler's time."""

from __future__ import annotations

import dataclasses

import pytest

from flowpy import operators
from flowpy.flowable import Flowable
from flowpy.operators import TimeInterval, Timestamped
from flowpy.operators._fused import FusedPublisher
from flowpy.sources import RangePublisher
from flowpy.testing import TestScheduler
from tests.operators.conftest import HotSource, Spy


def test_timestamp_pairs_each_item_with_now() -> None:
    scheduler = TestScheduler(start=10.0)
    source = HotSource()
    subscriber = Flowable(source).timestamp(scheduler=scheduler).test()
    source.emit("a")
    scheduler.advance_time_by(2.5)
    source.emit("b")
    source.complete()
    subscriber.assert_result(Timestamped("a", 10.0), Timestamped("b", 12.5))
    assert subscriber.values[0].value == "a"
    assert subscriber.values[0].timestamp == 10.0


def test_time_interval_measures_the_first_from_the_subscription() -> None:
    scheduler = TestScheduler()
    source = HotSource()
    subscriber = Flowable(source).time_interval(scheduler=scheduler).test()
    scheduler.advance_time_by(2.0)
    source.emit("a")
    scheduler.advance_time_by(6.0)
    source.emit("b")
    source.emit("c")
    subscriber.assert_values(TimeInterval("a", 2.0), TimeInterval("b", 6.0), TimeInterval("c", 0.0))


def test_each_subscription_measures_from_its_own_start() -> None:
    scheduler = TestScheduler()
    intervals = Flowable.range(0, 1).time_interval(scheduler=scheduler)
    scheduler.advance_time_by(5.0)
    intervals.test().assert_result(TimeInterval(0, 0.0))


def test_default_scheduler_timestamps_are_monotonic() -> None:
    values = Flowable.range(0, 100).timestamp().test().assert_value_count(100).values
    stamps = [v.timestamp for v in values]
    assert stamps == sorted(stamps)


def test_both_fuse_and_pass_demand_through() -> None:
    scheduler = TestScheduler()
    spy = Spy(RangePublisher(0, 10))
    chain = operators.time_interval(
        operators.timestamp(operators.map(spy, abs), scheduler=scheduler), scheduler=scheduler
    )
    assert isinstance(chain, FusedPublisher)
    subscriber = Flowable(chain).test(initial_request=3)
    subscriber.assert_value_count(3)
    assert spy.subscription.requests == [3]


def test_the_item_types_are_frozen_and_compare_by_value() -> None:
    stamped = Timestamped(1, 2.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        stamped.value = 3  # type: ignore[misc]
    assert stamped == Timestamped(1, 2.0)
    assert TimeInterval("x", 1.0) != TimeInterval("x", 2.0)
    assert repr(stamped) == "Timestamped(value=1, timestamp=2.0)"


def test_scheduler_must_be_a_scheduler() -> None:
    with pytest.raises(TypeError, match=r"^scheduler must be a Scheduler"):
        operators.timestamp(RangePublisher(0, 1), scheduler="clock")  # type: ignore[arg-type]
