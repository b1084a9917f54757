"""Notification, materialize and dematerialize."""

from __future__ import annotations

from typing import Any

import pytest

from flowpy import operators
from flowpy.flowable import Flowable
from flowpy.operators import Notification, NotificationKind
from flowpy.operators._base import CancelledSubscription
from flowpy.operators._fused import FusedPublisher
from flowpy.sources import RangePublisher, error, just
from flowpy.testing import TestSubscriber
from tests.operators.conftest import Spy

# --- Notification -----------------------------------------------------------------------


def test_notification_constructors_equality_and_repr() -> None:
    failure = RuntimeError("x")
    assert Notification.on_next(1) == Notification.on_next(1) != Notification.on_next(2)
    assert Notification.on_error(failure) == Notification.on_error(failure)
    assert Notification.on_error(failure) != Notification.on_error(RuntimeError("x"))  # errors by identity
    assert Notification.on_complete() is Notification.on_complete()
    assert repr(Notification.on_next(1)) == "Notification.on_next(1)"
    assert repr(Notification.on_error(failure)) == "Notification.on_error(RuntimeError('x'))"
    assert repr(Notification.on_complete()) == "Notification.on_complete()"
    assert Notification.on_next("v").kind is NotificationKind.ON_NEXT


@pytest.mark.parametrize(
    ("kind", "value", "error", "message"),
    [
        (NotificationKind.ON_NEXT, None, None, r"^value must not be None for ON_NEXT \(rule 2\.13\)$"),
        (NotificationKind.ON_COMPLETE, 1, None, r"^value must be None for ON_COMPLETE \(rule 2\.13\)$"),
        (NotificationKind.ON_ERROR, None, None, r"^error must not be None for ON_ERROR \(rule 2\.13\)$"),
        (NotificationKind.ON_NEXT, 1, RuntimeError(), r"^error must be None for ON_NEXT \(rule 2\.13\)$"),
        (NotificationKind.ON_ERROR, None, "boom", r"^error must be an exception instance, got 'boom'$"),
        ("on_next", 1, None, r"^kind must be a NotificationKind, got 'on_next'$"),
    ],
)
def test_notification_fields_that_do_not_fit_the_kind_raise(kind: Any, value: Any, error: Any, message: str) -> None:
    with pytest.raises(TypeError, match=message):
        Notification(kind, value, error)


def test_notification_accept_signals_a_subscriber() -> None:
    subscriber: TestSubscriber[int] = TestSubscriber()
    subscriber.on_subscribe(CancelledSubscription())
    Notification.on_next(1).accept(subscriber)
    Notification.on_complete().accept(subscriber)
    subscriber.assert_result(1)


# --- materialize -----------------------------------------------------------------------------


def test_materialize_turns_every_signal_into_an_item_then_completes() -> None:
    failure = RuntimeError("x")
    Flowable.just(1, 2).materialize().test().assert_result(
        Notification.on_next(1), Notification.on_next(2), Notification.on_complete()
    )
    Flowable.error(failure).materialize().test().assert_result(Notification.on_error(failure))


def test_materialize_terminal_notification_waits_for_demand() -> None:
    source = Spy(just(1))
    subscriber = Flowable.from_publisher(source).materialize().test(initial_request=1)
    subscriber.assert_values(Notification.on_next(1)).assert_not_complete()
    assert source.subscription.requests == [1]
    subscriber.request(1).assert_result(Notification.on_next(1), Notification.on_complete())


def test_materialize_invalid_request_still_fails_the_stream() -> None:
    subscriber = Flowable.range(0, 5).materialize().test(initial_request=0)
    subscriber.request(-1).assert_error(ValueError).assert_no_values()


# --- dematerialize --------------------------------------------------------------------------


def test_dematerialize_turns_notifications_back_into_signals() -> None:
    failure = RuntimeError("x")
    Flowable.just(1, 2).materialize().dematerialize().test().assert_result(1, 2)
    Flowable.error(failure).materialize().dematerialize().test().assert_error(failure)


def test_dematerialize_terminal_notification_cancels_the_source() -> None:
    failure = RuntimeError("x")
    notifications = [Notification.on_next(1), Notification.on_error(failure), Notification.on_next(2)]
    source = Spy(just(*notifications))
    Flowable.from_publisher(source).dematerialize().test().assert_failure(failure, 1)
    assert source.subscription.cancelled.is_set()
    completing = Spy(just(Notification.on_complete(), Notification.on_next(2)))
    Flowable.from_publisher(completing).dematerialize().test().assert_result()
    assert completing.subscription.cancelled.is_set()


def test_dematerialize_item_that_is_not_a_notification_fails_with_type_error() -> None:
    source = Spy(just(Notification.on_next(1), 2))
    subscriber = Flowable.from_publisher(source).dematerialize().test()
    subscriber.assert_failure(TypeError, 1)
    assert str(subscriber.errors[0]) == "dematerialize expects Notification items, got 2"
    assert source.subscription.cancelled.is_set()


def test_dematerialize_materialized_keyboard_interrupt_is_signalled_not_raised() -> None:
    interrupt = KeyboardInterrupt()
    Flowable.just(Notification.on_error(interrupt)).dematerialize().test().assert_error(interrupt)


def test_dematerialize_fuses_and_passes_demand_through() -> None:
    source = Spy(RangePublisher(0, 10))
    chain = Flowable.from_publisher(source).map(Notification.on_next).dematerialize().map(lambda x: x * 2)
    assert isinstance(chain.publisher, FusedPublisher)
    chain.test(initial_request=3).assert_values(0, 2, 4)
    assert source.subscription.requests == [3]


def test_materialize_and_dematerialize_refuse_a_non_publisher() -> None:
    with pytest.raises(TypeError, match=r"^source must be a Publisher, got 1$"):
        operators.materialize(1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^source must be a Publisher, got 1$"):
        operators.dematerialize(1)  # type: ignore[arg-type]


def test_error_source_error_is_used_as_is() -> None:
    failure = RuntimeError("x")
    Flowable.from_publisher(error(failure)).dematerialize().test().assert_error(failure)
