"""UnicastPublisher: an inner stream its owner feeds, for one subscriber (the windows; groups can share it)."""

from __future__ import annotations

from typing import Any

import pytest

from flowpy.operators import UnicastPublisher
from flowpy.testing import TestSubscriber
from tests.support import Recorder


def make() -> tuple[UnicastPublisher[Any], list[str]]:
    told: list[str] = []
    return UnicastPublisher("window", lambda: told.append("cancelled")), told


def test_items_pushed_before_the_subscriber_are_kept_and_delivered_on_request() -> None:
    inner, told = make()
    inner.push(1)
    inner.push(2)
    assert inner.queued == 2
    subscriber: TestSubscriber[int] = TestSubscriber(initial_request=1)
    inner.subscribe(subscriber)
    subscriber.assert_values(1)
    inner.push(3)
    inner.complete()
    subscriber.assert_not_complete()
    subscriber.request(5).assert_result(1, 2, 3)
    assert told == []


def test_an_error_comes_after_the_queued_items() -> None:
    inner, told = make()
    inner.push(1)
    inner.fail(KeyError("x"))
    subscriber: TestSubscriber[int] = TestSubscriber()
    inner.subscribe(subscriber)
    subscriber.assert_failure(KeyError, 1)
    assert told == []


@pytest.mark.parametrize("how", ["cancel", "invalid request"])
def test_the_owner_is_told_once_when_the_subscriber_ends_it(how: str) -> None:
    inner, told = make()
    subscriber: TestSubscriber[int] = TestSubscriber()
    inner.subscribe(subscriber)
    if how == "cancel":
        subscriber.cancel()
        subscriber.cancel()
    else:
        subscriber.request(0)
        subscriber.assert_error(ValueError)
    assert told == ["cancelled"]
    inner.push(1)  # the owner may still push meanwhile: dropped
    assert inner.queued == 0


def test_a_raising_subscriber_tells_the_owner() -> None:
    inner, told = make()
    recorder = Recorder(initial=5, on_next_hook=lambda item: (_ for _ in ()).throw(ValueError("bad")))
    inner.subscribe(recorder)
    inner.push(1)
    assert told == ["cancelled"]


def test_a_second_subscriber_is_refused() -> None:
    inner, _ = make()
    inner.subscribe(TestSubscriber())
    second: TestSubscriber[int] = TestSubscriber()
    inner.subscribe(second)
    second.assert_subscribed().assert_failure(RuntimeError)
    assert str(second.errors[0]) == "a window serves one subscriber; share() it to have more"


def test_none_subscriber_raises_type_error() -> None:
    inner, _ = make()
    with pytest.raises(TypeError, match=r"^subscriber must not be None \(rule 1\.9\)$"):
        inner.subscribe(None)  # type: ignore[arg-type]


# --- Consumption, abandonment, errors ahead of the items (the groups of group_by) ------------


def counted(*, delay_error: bool = True) -> tuple[UnicastPublisher[Any], list[int], list[str]]:
    consumed: list[int] = []
    told: list[str] = []
    inner: UnicastPublisher[Any] = UnicastPublisher(
        "group", lambda: told.append("cancelled"), on_consumed=consumed.append, delay_error=delay_error
    )
    return inner, consumed, told


def test_consumption_is_reported_as_items_are_delivered_and_dropped() -> None:
    inner, consumed, told = counted()
    for item in range(5):
        inner.push(item)
    subscriber: TestSubscriber[int] = TestSubscriber(initial_request=2)
    inner.subscribe(subscriber)
    assert sum(consumed) == 2
    subscriber.cancel()  # the 3 still queued are dropped: consumed too
    assert sum(consumed) == 5
    inner.push(5)  # after the end: dropped and counted, never left in the queue
    assert sum(consumed) == 6 and inner.queued == 0
    assert told == ["cancelled"]


def test_an_abandoned_stream_reports_no_consumption_and_still_delivers_what_it_holds() -> None:
    inner, consumed, _ = counted()
    inner.push(1)
    assert inner.try_abandon()
    assert not inner.try_abandon()
    inner.complete()
    subscriber: TestSubscriber[int] = TestSubscriber()
    inner.subscribe(subscriber)
    subscriber.assert_result(1)
    assert consumed == []


def test_a_subscribed_stream_cannot_be_abandoned() -> None:
    inner, _, _ = counted()
    inner.subscribe(TestSubscriber())
    assert not inner.try_abandon()


def test_without_delay_error_the_error_goes_ahead_of_the_queued_items() -> None:
    inner, consumed, told = counted(delay_error=False)
    inner.push(1)
    inner.push(2)
    inner.fail(KeyError("x"))
    subscriber: TestSubscriber[int] = TestSubscriber()
    inner.subscribe(subscriber)
    subscriber.assert_error(KeyError).assert_no_values()
    assert sum(consumed) == 2  # dropped with the error
    assert told == []  # the owner ended it
    assert inner.is_ended


def test_the_end_given_while_a_pass_reports_consumption_is_signalled() -> None:
    # group_by replenishes its source from on_consumed, inside the pass; a
    # synchronous source then completes, and so the group, before the pass ends.
    def complete_on_consumed(count: int) -> None:
        inner.complete()

    inner: UnicastPublisher[int] = UnicastPublisher("group", lambda: None, on_consumed=complete_on_consumed)
    subscriber: TestSubscriber[int] = TestSubscriber()
    inner.subscribe(subscriber)
    inner.push(1)
    subscriber.assert_result(1)
