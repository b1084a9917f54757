"""amb: the first publisher to signal wins; the others are cancelled."""

from __future__ import annotations

import pytest

from flowpy import operators
from flowpy.executors import DaemonThreadPool, direct_executor
from flowpy.flowable import Flowable
from flowpy.sources import RangePublisher, empty, error, just
from flowpy.submission import SubmissionPublisher
from flowpy.testing import TestSubscriber
from tests.operators.conftest import Spy


def _hot() -> SubmissionPublisher[int]:
    return SubmissionPublisher(executor=direct_executor)


def test_amb_follows_the_first_to_emit_and_cancels_the_others() -> None:
    first, second = _hot(), _hot()
    spied_first, spied_second = Spy(first), Spy(second)
    subscriber = Flowable.amb(spied_first, spied_second).test()
    second.submit(10)
    first.submit(1)  # too late
    second.submit(11)
    second.close()
    subscriber.assert_result(10, 11)
    assert spied_first.subscription.cancelled.is_set()
    assert not spied_second.subscription.cancelled.is_set()


@pytest.mark.parametrize("signal", ["error", "complete"])
def test_amb_a_terminal_signal_wins_too(signal: str) -> None:
    first = _hot()
    spied = Spy(first)
    failure = RuntimeError("x")
    subscriber = Flowable.amb(spied, error(failure) if signal == "error" else empty()).test()
    if signal == "error":
        subscriber.assert_error(failure)
    else:
        subscriber.assert_result()
    assert spied.subscription.cancelled.is_set()


def test_amb_demand_goes_to_every_contender_until_one_wins_then_to_the_winner() -> None:
    first, second = _hot(), Spy(RangePublisher(0, 10))
    spied_first = Spy(first)
    subscriber: TestSubscriber[int] = TestSubscriber(initial_request=0)
    operators.amb(spied_first, second).subscribe(subscriber)
    subscriber.request(2)  # the range emits at once: it wins
    subscriber.request(3)
    assert spied_first.subscription.requests == [2]
    assert second.subscription.requests == [2, 3]
    subscriber.assert_values(0, 1, 2, 3, 4)


def test_amb_a_synchronous_winner_stops_the_subscribing_of_the_rest() -> None:
    later = Spy(RangePublisher(0, 3))
    Flowable.amb(just(1), later).test().assert_result(1)
    assert later.subscriptions == []


def test_amb_cancel_cancels_every_contender() -> None:
    first, second = Spy(_hot()), Spy(_hot())
    subscriber = Flowable.amb(first, second).test()
    subscriber.cancel()
    assert first.subscription.cancelled.is_set()
    assert second.subscription.cancelled.is_set()


def test_amb_of_none_completes_and_of_one_is_that_publisher() -> None:
    Flowable.amb().test().assert_result()
    only = just(1)
    assert operators.amb(only) is only


def test_amb_refuses_a_non_publisher() -> None:
    with pytest.raises(TypeError, match=r"^sources\[0\] must be a Publisher, got None$"):
        operators.amb(None, just(1))  # type: ignore[arg-type]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("run", range(20))
def test_amb_contenders_racing_on_threads_yield_one_winner(run: int, tiny_switch_interval: None) -> None:
    pool = DaemonThreadPool(2, thread_name_prefix="amb")
    try:
        letters = Flowable.from_iterable("abcdefgh", executor=pool)
        digits = Flowable.from_iterable("01234567", executor=pool)
        subscriber = Flowable.amb(letters, digits).test().await_done(10)
        subscriber.assert_complete()
        assert "".join(subscriber.values) in ("abcdefgh", "01234567")
    finally:
        pool.shutdown()
