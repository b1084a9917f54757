"""distinct and distinct_until_changed: fused filters of repeated items."""

from __future__ import annotations

import pytest
from hypothesis import given, settings

from flowpy import operators
from flowpy.flowable import Flowable
from flowpy.operators._fused import FusedPublisher
from flowpy.sources import RangePublisher, just
from tests.operators.conftest import Spy, drive, items_lists, patterns


def test_distinct_emits_each_key_once() -> None:
    Flowable.just(1, 2, 1, 3, 2).distinct().test().assert_result(1, 2, 3)
    Flowable.just("a", "B", "A", "b", "c").distinct(str.lower).test().assert_result("a", "B", "c")


def test_distinct_seen_keys_are_per_subscription() -> None:
    distinct = Flowable.just(1, 1, 2).distinct()
    distinct.test().assert_result(1, 2)
    distinct.test().assert_result(1, 2)


def test_distinct_asks_again_for_the_items_it_drops() -> None:
    source = Spy(RangePublisher(0, 100))
    subscriber = Flowable.from_publisher(source).distinct(lambda x: x // 10).test(initial_request=3)
    subscriber.assert_values(0, 10, 20)
    assert source.subscription.total == 21  # 3 asked, 18 dropped asked again


def test_distinct_unhashable_key_fails_and_cancels() -> None:
    source = Spy(just([1], [2]))
    subscriber = Flowable.from_publisher(source).distinct().test()
    subscriber.assert_error(TypeError)
    assert source.subscription.cancelled.is_set()


def test_distinct_until_changed_drops_consecutive_repeats_only() -> None:
    Flowable.just(1, 1, 2, 2, 1, 1).distinct_until_changed().test().assert_result(1, 2, 1)
    Flowable.just(1.0, 1.9, 2.2, 2.8).distinct_until_changed(int).test().assert_result(1.0, 2.2)


def test_distinct_until_changed_raising_key_function_fails_and_cancels() -> None:
    def key(x: int) -> int:
        raise LookupError("bug")

    source = Spy(RangePublisher(0, 10))
    Flowable.from_publisher(source).distinct_until_changed(key).test().assert_error(LookupError)
    assert source.subscription.cancelled.is_set()


def test_distinct_fuse_with_their_neighbours() -> None:
    chain = Flowable.range(0, 20).map(lambda x: x // 3).distinct().filter(lambda x: x % 2).distinct_until_changed()
    assert isinstance(chain.publisher, FusedPublisher)
    assert len(chain.publisher.steps) == 4
    chain.test().assert_result(1, 3, 5)


@settings(max_examples=60, deadline=None)
@given(items=items_lists, pattern=patterns)
def test_distinct_operators_match_their_list_equivalents_under_any_request_pattern(
    items: list[int], pattern: list[int]
) -> None:
    unique = drive(operators.distinct(just(*items), abs), pattern)
    seen: set[int] = set()
    assert unique.items == [x for x in items if not (abs(x) in seen or seen.add(abs(x)))]  # type: ignore[func-returns-value]
    changes = drive(operators.distinct_until_changed(just(*items)), pattern)
    assert changes.items == [x for i, x in enumerate(items) if i == 0 or items[i - 1] != x]
    assert unique.completed and changes.completed


@pytest.mark.parametrize("name", ["distinct", "distinct_until_changed"])
def test_distinct_key_function_must_be_callable(name: str) -> None:
    with pytest.raises(TypeError, match=r"^key_fn must be callable or None, got 3$"):
        getattr(operators, name)(just(1), 3)
