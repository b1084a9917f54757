"""combine_latest and with_latest_from."""

from __future__ import annotations

import itertools
import threading
from typing import Any

import pytest

from flowpy import operators
from flowpy.executors import DaemonThreadPool, direct_executor
from flowpy.flowable import Flowable
from flowpy.sources import RangePublisher, empty, error, just
from flowpy.submission import SubmissionPublisher
from flowpy.testing import TestSubscriber
from tests.operators.conftest import GatedPublisher, Spy
from tests.support import Recorder

WAIT = 10.0


def _hot() -> SubmissionPublisher[Any]:
    return SubmissionPublisher(executor=direct_executor)


# --- combine_latest ---------------------------------------------------------------------


def test_combine_latest_emits_a_row_whenever_a_source_emits_once_each_has_a_value() -> None:
    first, second = _hot(), _hot()
    subscriber = Flowable.combine_latest(first, second).test()
    first.submit(1)
    first.submit(2)  # replaces 1 before second has a value
    second.submit("a")
    first.submit(3)
    second.submit("b")
    first.close()
    subscriber.assert_values((2, "a"), (3, "a"), (3, "b")).assert_not_complete()
    second.close()
    subscriber.assert_complete()


def test_combine_latest_combiner_makes_the_rows() -> None:
    subscriber = Flowable.combine_latest(just(1), just(10, 20), combiner=lambda a, b: a + b).test()
    subscriber.assert_result(11, 21)


def test_combine_latest_source_completing_without_a_value_completes_at_once() -> None:
    other = Spy(RangePublisher(0, 1000))
    subscriber = Flowable.combine_latest(empty(), other).test()
    subscriber.assert_result()
    assert other.subscriptions == []  # the stream was over before it was subscribed


def test_combine_latest_rows_wait_for_demand_and_the_sources_for_their_rows() -> None:
    first, second = Spy(just(0)), Spy(RangePublisher(0, 100))
    subscriber = Flowable.combine_latest(first, second, prefetch=4).test(initial_request=0)
    assert second.subscription.requests == [4]  # four rows wait, no more asked for
    subscriber.request(3)  # three rows consumed: 75 % of the prefetch, asked for again
    assert second.subscription.requests == [4, 3]
    subscriber.request(1000).assert_value_count(100).assert_complete()
    assert subscriber.values[-1] == (0, 99)


def test_combine_latest_error_cancels_the_others() -> None:
    failure = RuntimeError("x")
    other = Spy(RangePublisher(0, 10))
    subscriber = Flowable.combine_latest(other, error(failure)).test(initial_request=0)
    subscriber.assert_error(failure)
    assert other.subscription.cancelled.is_set()


@pytest.mark.parametrize("result", ["raises", "None"])
def test_combine_latest_bad_combiner_fails_and_cancels(result: str) -> None:
    def combiner(a: int, b: int) -> Any:
        if result == "raises":
            raise LookupError("bug")
        return None

    source = Spy(RangePublisher(0, 10))
    subscriber = Flowable.combine_latest(just(1), source, combiner=combiner).test()
    subscriber.assert_error(LookupError if result == "raises" else TypeError)
    if result == "None":
        message = str(subscriber.errors[0])
        assert message.startswith("combine_latest combiner must not return None (rule 2.13), got None from ")
    assert source.subscription.cancelled.is_set()


def test_combine_latest_no_sources_completes_at_once() -> None:
    Flowable.combine_latest().test().assert_result()


def test_combine_latest_from_threads_emits_each_row_once_in_a_consistent_order() -> None:
    pool = DaemonThreadPool(2, thread_name_prefix="combine")
    try:
        first = Flowable.from_iterable(range(500), executor=pool)
        second = Flowable.from_iterable(range(500), executor=pool)
        subscriber = Flowable.combine_latest(first, second, prefetch=8).test().await_done(WAIT)
        subscriber.assert_complete()
        rows = subscriber.values
        # Each row moves one source forward by one (a row per item), never back.
        assert all((b[0] - a[0], b[1] - a[1]) in ((1, 0), (0, 1)) for a, b in itertools.pairwise(rows))
        assert rows[-1] == (499, 499)
    finally:
        pool.shutdown()


def test_combine_latest_refuses_a_non_publisher() -> None:
    with pytest.raises(TypeError, match=r"^sources\[1\] must be a Publisher, got 3$"):
        operators.combine_latest(just(1), 3)  # type: ignore[arg-type]


# --- with_latest_from ---------------------------------------------------------------------


def test_with_latest_from_pairs_each_item_with_the_latest_of_other() -> None:
    source, other = _hot(), _hot()
    subscriber = Flowable.from_publisher(source).with_latest_from(other).test()
    source.submit(0)  # other has no value yet: dropped
    other.submit("a")
    other.submit("b")
    source.submit(1)
    source.submit(2)
    other.close()  # other's completion changes nothing
    source.submit(3)
    source.close()
    subscriber.assert_result((1, "b"), (2, "b"), (3, "b"))


def test_with_latest_from_asks_again_for_the_items_it_drops() -> None:
    other, hot = _hot(), _hot()
    source = Spy(hot)
    subscriber = Flowable.from_publisher(source).with_latest_from(other, lambda x, y: x * y).test(initial_request=2)
    hot.submit(0)
    hot.submit(1)  # both come before other has a value: dropped, and asked for again
    subscriber.assert_no_values()
    assert source.subscription.requests == [2, 2]
    other.submit(10)
    hot.submit(4)
    hot.submit(5)
    subscriber.assert_values(40, 50)
    assert source.subscription.requests == [2, 2]


def test_with_latest_from_error_of_other_cancels_the_source() -> None:
    failure = RuntimeError("x")
    source = Spy(RangePublisher(0, 100))
    subscriber = Flowable.from_publisher(source).with_latest_from(error(failure)).test()
    subscriber.assert_error(failure).assert_no_values()
    assert source.subscriptions == []  # other is subscribed first, and failed at once


def test_with_latest_from_end_of_the_source_cancels_other() -> None:
    never: SubmissionPublisher[int] = _hot()  # never emits nor ends
    other = Spy(operators.concat(just(0), never))
    Flowable.just(1, 2).with_latest_from(other).test().assert_result((1, 0), (2, 0))
    assert other.subscription.requests == [2**63 - 1]
    assert other.subscription.cancelled.is_set()


def test_with_latest_from_combiner_returning_none_fails_with_rule_2_13() -> None:
    source = Spy(RangePublisher(0, 10))
    subscriber = Flowable.from_publisher(source).with_latest_from(just(1), lambda x, y: None).test()
    subscriber.assert_error(TypeError)
    assert str(subscriber.errors[0]).startswith("with_latest_from combiner must not return None (rule 2.13)")
    assert source.subscription.cancelled.is_set()


def test_with_latest_from_other_error_while_an_item_is_delivered_waits_for_it() -> None:
    other = _hot()
    inside, release = threading.Event(), threading.Event()

    class Slow(TestSubscriber[Any]):
        def on_next(self, item: Any) -> None:
            super().on_next(item)
            inside.set()
            assert release.wait(WAIT)

    source = _hot()
    subscriber = Slow()
    operators.with_latest_from(source, other).subscribe(subscriber)
    other.submit("a")
    delivering = threading.Thread(target=source.submit, args=(1,))
    delivering.start()
    assert inside.wait(WAIT)
    failure = RuntimeError("other failed")
    other.close_exceptionally(failure)  # lands while on_next runs on the other thread
    subscriber.assert_values((1, "a")).assert_no_errors()
    release.set()
    delivering.join(WAIT)
    subscriber.assert_failure(failure, (1, "a"))


def test_combine_latest_source_subscription_arriving_as_the_downstream_cancels_is_cancelled() -> None:
    recorder = Recorder()
    first = GatedPublisher(lambda _: recorder.cancel())  # the sweep runs in the source's window
    operators.combine_latest(first, GatedPublisher()).subscribe(recorder)
    assert first.subscription.cancels == 1
    assert first.subscription.requests == []
