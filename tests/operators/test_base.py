"""StagePublisher, the publisher every operator returns."""

from __future__ import annotations

from typing import Any

import pytest

from flowpy import operators
from flowpy.flow import Subscriber
from flowpy.operators._base import StagePublisher
from flowpy.sources import RangePublisher
from tests.support import Recorder


def test_stage_publisher_connects_one_stage_per_subscriber() -> None:
    connected: list[Subscriber[Any]] = []
    publisher: StagePublisher[int] = StagePublisher("probe", connected.append)
    first, second = Recorder(), Recorder()
    publisher.subscribe(first)
    publisher.subscribe(second)
    assert connected == [first, second]
    assert repr(publisher) == "<probe publisher>"


def test_stage_publisher_none_subscriber_is_a_type_error_and_connects_nothing() -> None:
    connected: list[Subscriber[Any]] = []
    publisher: StagePublisher[int] = StagePublisher("probe", connected.append)
    with pytest.raises(TypeError, match=r"^subscriber must not be None \(rule 1\.9\)$"):
        publisher.subscribe(None)  # type: ignore[arg-type]
    assert connected == []


@pytest.mark.parametrize(
    "make",
    [
        lambda: operators.on_backpressure_drop(RangePublisher(0, 3)),
        lambda: operators.merge(RangePublisher(0, 3)),
        lambda: operators.zip(RangePublisher(0, 3)),
    ],
)
def test_operator_publishers_are_stage_publishers_and_check_rule_1_9(make: Any) -> None:
    publisher = make()
    assert isinstance(publisher, StagePublisher)
    with pytest.raises(TypeError, match=r"^subscriber must not be None \(rule 1\.9\)$"):
        publisher.subscribe(None)


def test_stage_publisher_is_cold_each_subscriber_gets_the_whole_stream() -> None:
    publisher = operators.map(operators.merge(RangePublisher(0, 3)), lambda n: n * 10)
    first, second = Recorder(initial=10), Recorder(initial=10)
    publisher.subscribe(first)
    publisher.subscribe(second)
    assert first.items == second.items == [0, 10, 20]
    assert first.completed and second.completed
