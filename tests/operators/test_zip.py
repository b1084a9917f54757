"""zip: the n-th items of each publisher together."""

from __future__ import annotations

import operator

import pytest
from hypothesis import given, settings

from flowpy import operators
from flowpy.sources import RangePublisher, error, just
from tests.operators.conftest import WAIT, GatedPublisher, Spy, drive, items_lists, patterns
from tests.support import Recorder


def test_zip_pairs_items_into_tuples_and_stops_at_shortest() -> None:
    recorder = Recorder()
    operators.zip(just(1, 2, 3), just("a", "b")).subscribe(recorder)
    recorder.request(10)
    assert recorder.items == [(1, "a"), (2, "b")]
    assert recorder.completed


def test_zip_applies_fn() -> None:
    recorder = Recorder()
    operators.zip(just(1, 2), just(10, 20), fn=operator.add).subscribe(recorder)
    recorder.request(10)
    assert recorder.items == [11, 22]


def test_zip_never_requests_more_than_prefetch_per_source() -> None:
    first, second = Spy(RangePublisher(0, 100)), Spy(RangePublisher(0, 100))
    recorder = Recorder()
    operators.zip(first, second, prefetch=4).subscribe(recorder)
    assert first.subscription.requests == [4]
    assert second.subscription.requests == [4]
    recorder.request(3)
    assert first.subscription.requests == [4, 3]  # 3 consumed: 75 % of 4
    assert recorder.items == [(0, 0), (1, 1), (2, 2)]


def test_zip_error_cancels_other_sources() -> None:
    spy = Spy(RangePublisher(0, 100))
    recorder = Recorder()
    operators.zip(spy, error(KeyError("k"))).subscribe(recorder)
    assert isinstance(recorder.error, KeyError)
    assert spy.subscription.cancelled.is_set()


def test_zip_fn_returns_none_signals_type_error() -> None:
    recorder = Recorder()
    operators.zip(just(1), just(2), fn=lambda a, b: None).subscribe(recorder)
    recorder.request(1)
    assert isinstance(recorder.error, TypeError)


def test_zip_without_publishers_raises_value_error() -> None:
    with pytest.raises(ValueError, match=r"^zip must be given at least one publisher, got none$"):
        operators.zip()


@pytest.mark.timeout(60)
@pytest.mark.usefixtures("tiny_switch_interval")
def test_zip_of_asynchronous_sources_pairs_every_item() -> None:
    for round_ in range(10):
        first = operators.observe_on(RangePublisher(0, 300), prefetch=3 + round_ % 4)
        second = operators.observe_on(RangePublisher(1000, 250), prefetch=5)
        recorder = Recorder()
        operators.zip(first, second, prefetch=2 + round_ % 3).subscribe(recorder)
        for _ in range(60):
            recorder.request(5)
        assert recorder.done.wait(WAIT)
        assert recorder.items == [(k, 1000 + k) for k in range(250)]
        assert recorder.violations == []


@settings(max_examples=50, deadline=None)
@given(first=items_lists, second=items_lists, pattern=patterns)
def test_zip_matches_builtin_zip_under_any_request_pattern(
    first: list[int], second: list[int], pattern: list[int]
) -> None:
    recorder = drive(operators.zip(just(*first), just(*second), prefetch=2), pattern)
    assert recorder.items == list(zip(first, second, strict=False))


def test_zip_source_subscription_arriving_as_the_downstream_cancels_is_cancelled() -> None:
    recorder = Recorder()
    # The subscription comes once zip is connected; the coordinator's sweep runs in the source's window.
    first = GatedPublisher(lambda _: recorder.cancel(), hold=True)
    second = GatedPublisher()
    operators.zip(first, second).subscribe(recorder)
    first.arrive()
    assert first.subscription.cancels == 1  # not left neither requested nor cancelled
    assert first.subscription.requests == []
    assert second.subscription.cancels == 1
