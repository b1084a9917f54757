"""UpstreamSlot: the first subscription is kept, later ones and early-cancelled ones are cancelled (rules 2.5, 2.6)."""

from __future__ import annotations

import threading

import pytest

from flowpy._core.upstream import UpstreamSlot
from flowpy.flow import Subscription


class _Subscription(Subscription):
    def __init__(self, raises: BaseException | None = None) -> None:
        self.cancels = 0
        self.raises = raises

    def request(self, n: int) -> None:
        raise AssertionError("the slot never requests")

    def cancel(self) -> None:
        self.cancels += 1
        if self.raises is not None:
            raise self.raises


def test_upstream_slot_keeps_the_first_and_cancels_a_second_subscription() -> None:
    slot = UpstreamSlot()
    first, second = _Subscription(), _Subscription()
    assert slot.accept(first)
    assert not slot.accept(second)
    assert slot.current is first and slot.connected
    assert (first.cancels, second.cancels) == (0, 1)


def test_upstream_slot_cancel_before_the_subscription_cancels_it_on_arrival() -> None:
    slot = UpstreamSlot()
    slot.cancel()
    subscription = _Subscription()
    assert not slot.accept(subscription)
    assert subscription.cancels == 1 and slot.current is None


def test_upstream_slot_cancel_after_set_cancels_once_and_forgets_it() -> None:
    slot = UpstreamSlot()
    subscription = _Subscription()
    slot.accept(subscription)
    slot.cancel()
    slot.cancel()
    assert subscription.cancels == 1 and slot.current is None and slot.cancelled


def test_upstream_slot_detached_before_any_subscription_refuses_even_the_first() -> None:
    slot = UpstreamSlot()
    assert slot.detach() is None  # the owner ended before its subscription came
    subscription = _Subscription()
    assert not slot.accept(subscription)
    assert subscription.cancels == 1 and not slot.connected and slot.closed and not slot.cancelled


def test_upstream_slot_detach_forgets_without_cancelling_and_refuses_later_ones() -> None:
    slot = UpstreamSlot()
    first, second = _Subscription(), _Subscription()
    slot.accept(first)
    assert slot.detach() is first
    assert slot.current is None and first.cancels == 0
    assert not slot.accept(second) and second.cancels == 1


def test_upstream_slot_none_subscription_is_a_type_error() -> None:
    with pytest.raises(TypeError, match=r"^subscription must not be None \(rule 2\.13\)$"):
        UpstreamSlot().accept(None)  # type: ignore[arg-type]


def test_upstream_slot_raising_cancel_of_a_refused_subscription_is_reported_not_raised(
    caplog: pytest.LogCaptureFixture,
) -> None:
    slot = UpstreamSlot()
    slot.accept(_Subscription())
    assert not slot.accept(_Subscription(raises=RuntimeError("broken cancel")))
    assert "rules 3.15, 3.16" in caplog.text


@pytest.mark.timeout(60)
@pytest.mark.usefixtures("tiny_switch_interval")
def test_upstream_slot_racing_subscriptions_and_cancel_leave_exactly_the_kept_one_live() -> None:
    for _ in range(200):
        slot = UpstreamSlot()
        subscriptions = [_Subscription() for _ in range(4)]
        start = threading.Barrier(5)

        def offer(slot: UpstreamSlot, start: threading.Barrier, subscription: _Subscription) -> None:
            start.wait()
            slot.accept(subscription)

        def cancel(slot: UpstreamSlot, start: threading.Barrier) -> None:
            start.wait()
            slot.cancel()

        threads = [threading.Thread(target=offer, args=(slot, start, s)) for s in subscriptions]
        threads.append(threading.Thread(target=cancel, args=(slot, start)))
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(10)
        assert [s.cancels for s in subscriptions].count(1) == 4  # every one ends up cancelled, once
        assert slot.current is None
