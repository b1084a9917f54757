"""publish and share: one upstream subscription for many subscribers."""

from __future__ import annotations

from flowpy import operators
from flowpy.sources import RangePublisher
from tests.operators.conftest import Spy
from tests.support import Recorder


def test_publish_starts_only_on_connect_and_multicasts() -> None:
    spy = Spy(RangePublisher(0, 5))
    shared = operators.publish(spy, prefetch=2)
    first, second = Recorder(), Recorder()
    shared.subscribe(first)
    shared.subscribe(second)
    first.request(10)
    second.request(10)
    assert spy.subscriptions == []
    assert not shared.is_connected
    shared.connect()
    shared.connect()
    assert len(spy.subscriptions) == 1
    assert first.items == second.items == [0, 1, 2, 3, 4]
    assert first.completed and second.completed


def test_publish_slowest_subscriber_paces_the_source() -> None:
    spy = Spy(RangePublisher(0, 100))
    shared = operators.publish(spy, prefetch=4)
    fast, slow = Recorder(), Recorder()
    shared.subscribe(fast)
    shared.subscribe(slow)
    shared.connect()
    fast.request(50)
    slow.request(2)
    assert fast.items == [0, 1]
    assert spy.subscription.total <= 2 + 4


def test_share_connects_on_first_subscriber() -> None:
    spy = Spy(RangePublisher(0, 3))
    shared = operators.share(spy)
    recorder = Recorder()
    shared.subscribe(recorder)
    assert shared.is_connected
    recorder.request(5)
    assert recorder.items == [0, 1, 2]
    assert len(spy.subscriptions) == 1
