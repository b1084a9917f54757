"""skip_while: drops items while a predicate holds, then emits everything."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings

from flowpy import operators
from flowpy.flowable import Flowable
from flowpy.sources import RangePublisher, just
from tests.operators.conftest import Spy, drive, items_lists, patterns


def test_skip_while_drops_until_the_first_failing_item_then_emits_all() -> None:
    Flowable.just(1, 2, 7, 3, 9).skip_while(lambda x: x < 5).test().assert_result(7, 3, 9)


def test_skip_while_stops_calling_the_predicate_after_the_first_pass() -> None:
    calls: list[int] = []
    Flowable.range(0, 6).skip_while(lambda x: calls.append(x) or x < 2).test().assert_result(2, 3, 4, 5)
    assert calls == [0, 1, 2]


def test_skip_while_asks_again_for_the_items_it_drops() -> None:
    source = Spy(RangePublisher(0, 100))
    subscriber = Flowable.from_publisher(source).skip_while(lambda x: x < 10).test(initial_request=2)
    subscriber.assert_values(10, 11)
    assert source.subscription.total == 12


def test_skip_while_raising_predicate_fails_and_cancels() -> None:
    def predicate(x: int) -> bool:
        raise LookupError("bug")

    source = Spy(RangePublisher(0, 10))
    Flowable.from_publisher(source).skip_while(predicate).test().assert_error(LookupError)
    assert source.subscription.cancelled.is_set()


@settings(max_examples=60, deadline=None)
@given(items=items_lists, pattern=patterns)
def test_skip_while_matches_itertools_dropwhile_under_any_request_pattern(items: list[int], pattern: list[int]) -> None:
    recorder = drive(operators.skip_while(just(*items), lambda x: x < 10), pattern)
    assert recorder.items == list(itertools.dropwhile(lambda x: x < 10, items))
    assert recorder.completed


def test_skip_while_predicate_must_be_callable() -> None:
    with pytest.raises(TypeError, match=r"^predicate must be callable, got None$"):
        operators.skip_while(just(1), None)  # type: ignore[arg-type]
