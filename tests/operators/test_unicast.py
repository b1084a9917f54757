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
