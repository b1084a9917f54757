"""group_by: one group per key, replenished as the groups consume, abandoned when nobody subscribes."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flowpy import operators
from flowpy.errors import MissingBackpressureError
from flowpy.executors import DaemonThreadPool, direct_executor
from flowpy.flow import Subscriber, Subscription
from flowpy.flowable import Flowable, GroupedFlowable
from flowpy.operators import GroupedPublisher
from flowpy.sources import RangePublisher, error, just
from flowpy.submission import SubmissionPublisher
from flowpy.testing import TestSubscriber
from tests.context_helpers import REQUEST_ID, ContextRecorder, in_context, in_fresh_thread
from tests.operators.conftest import Spy

WAIT = 10.0


@pytest.fixture
def pool() -> Iterator[DaemonThreadPool]:
    executor = DaemonThreadPool(4, thread_name_prefix="group-by")
    try:
        yield executor
    finally:
        executor.shutdown()


class GroupCollector(Subscriber[GroupedPublisher[Any, Any]]):
    """Subscribes a TestSubscriber(initial) to every group, inside on_next, and keeps them by emission order."""

    def __init__(self, initial: int = 2**63 - 1, main_request: int = 2**63 - 1, keys: set[Any] | None = None) -> None:
        self.initial = initial
        self.main_request = main_request
        self.keys = keys  # subscribe only to groups with these keys; None: all
        self.groups: list[tuple[Any, TestSubscriber[Any] | None]] = []
        self.published: list[GroupedPublisher[Any, Any]] = []
        self.main = TestSubscriber[Any](0)
        self.subscription: Subscription | None = None

    def on_subscribe(self, subscription: Subscription) -> None:
        self.subscription = subscription
        self.main.on_subscribe(subscription)
        self.main.request(self.main_request)

    def on_next(self, group: GroupedPublisher[Any, Any]) -> None:
        self.main.on_next(group)
        self.published.append(group)
        if self.keys is not None and group.key not in self.keys:
            self.groups.append((group.key, None))
            return
        subscriber: TestSubscriber[Any] = TestSubscriber(self.initial)
        self.groups.append((group.key, subscriber))
        group.subscribe(subscriber)

    def on_error(self, error: BaseException) -> None:
        self.main.on_error(error)

    def on_complete(self) -> None:
        self.main.on_complete()

    def of(self, key: Any) -> list[TestSubscriber[Any]]:
        """The subscribers of every group with ``key``, in order."""
        return [s for k, s in self.groups if k == key and s is not None]


def test_group_by_flat_map_delivers_every_item_in_its_group() -> None:
    result = Flowable.range(0, 10).group_by(lambda x: x % 3).flat_map(lambda g: g.map(lambda v: (g.key, v))).test()
    result.assert_complete().assert_no_errors()
    assert sorted(result.values) == sorted((x % 3, x) for x in range(10))


def test_group_by_emits_grouped_flowables_with_their_key() -> None:
    groups: list[GroupedFlowable[int, int]] = []
    collected: list[TestSubscriber[int]] = []

    def keep(group: GroupedFlowable[int, int]) -> None:
        groups.append(group)
        collected.append(group.test())

    Flowable.range(0, 6).group_by(lambda x: x % 2).subscribe(keep)
    assert [g.key for g in groups] == [0, 1]
    assert all(isinstance(g, GroupedFlowable) for g in groups)
    collected[0].assert_result(0, 2, 4)
    collected[1].assert_result(1, 3, 5)
    assert repr(groups[0]) == "GroupedFlowable(key=0)"


def test_group_by_value_fn_maps_the_items_of_each_group() -> None:
    collector = GroupCollector()
    operators.group_by(just("apple", "avocado", "banana"), lambda s: s[0], len).subscribe(collector)
    assert [k for k, _ in collector.groups] == ["a", "b"]
    collector.of("a")[0].assert_result(5, 7)
    collector.of("b")[0].assert_result(6)
    collector.main.assert_complete()


def test_group_by_none_key_is_a_key_like_any_other() -> None:
    collector = GroupCollector()
    operators.group_by(just(1, 2, 3), lambda x: None if x % 2 else "even").subscribe(collector)
    collector.of(None)[0].assert_result(1, 3)
    collector.of("even")[0].assert_result(2)


# --- Demand ---------------------------------------------------------------------------


def test_group_by_requests_prefetch_then_replenishes_as_groups_consume() -> None:
    spy = Spy(RangePublisher(0, 100))
    collector = GroupCollector(initial=0)
    operators.group_by(spy, lambda x: x % 2, prefetch=8).subscribe(collector)
    assert spy.subscription.requests == [8]
    assert spy.delivered == 8  # the groups hold them all: nobody has requested an item yet
    evens, odds = collector.of(0)[0], collector.of(1)[0]
    evens.request(3)
    assert spy.subscription.requests == [8]  # 3 consumed: under the 6 (75 %) that trigger a request
    odds.request(3)
    assert spy.subscription.requests == [8, 6]  # 6 consumed across the groups
    assert spy.delivered - (len(evens.values) + len(odds.values)) <= 8


@settings(max_examples=30, deadline=None)
@given(
    keys=st.integers(min_value=1, max_value=6),
    prefetch=st.integers(min_value=1, max_value=8),
    chunks=st.lists(st.integers(min_value=1, max_value=5), min_size=1, max_size=20),
)
def test_group_by_never_holds_more_than_prefetch_items(keys: int, prefetch: int, chunks: list[int]) -> None:
    spy = Spy(RangePublisher(0, 60))
    collector = GroupCollector(initial=0)
    operators.group_by(spy, lambda x: x % keys, prefetch=prefetch).subscribe(collector)
    for turn, chunk in enumerate(chunks * 10):
        live = [s for _, s in collector.groups if s is not None and not s.is_terminated]
        if not live:
            break
        live[turn % len(live)].request(chunk)
        consumed = sum(len(s.values) for _, s in collector.groups if s is not None)
        assert spy.delivered - consumed <= prefetch
        assert spy.subscription.total - consumed <= prefetch
    for _, subscriber in collector.groups:
        assert subscriber is not None
        subscriber.request(1000)
    collector.main.assert_complete()
    values = sorted(v for _, s in collector.groups if s is not None for v in s.values)
    assert values == list(range(60))


def test_group_by_group_that_does_not_request_paces_the_source() -> None:
    spy = Spy(RangePublisher(0, 1000))
    collector = GroupCollector(initial=0)
    operators.group_by(spy, lambda x: x % 2, prefetch=4).subscribe(collector)
    collector.of(0)[0].request(1000)
    # The odd group holds its items unconsumed: the source is never asked beyond them.
    assert spy.subscription.total <= 4 + 3 * 2
    assert len(collector.of(1)[0].values) == 0


def test_group_by_without_demand_for_a_new_group_fails_with_missing_backpressure() -> None:
    spy = Spy(RangePublisher(0, 10))
    collector = GroupCollector(main_request=1)
    operators.group_by(spy, lambda x: x % 3).subscribe(collector)
    collector.main.assert_error(MissingBackpressureError).assert_value_count(1)
    (failure,) = collector.main.errors
    assert str(failure) == (
        "group_by could not emit group #2 (key 1): only 1 groups were requested; the subscriber of groups must ask "
        "for every new key (flat_map with max_concurrency at least the number of keys does)"
    )
    collector.of(0)[0].assert_failure(MissingBackpressureError, 0)
    assert spy.subscription.cancelled.is_set()


def test_group_by_flat_map_with_fewer_slots_than_keys_fails_instead_of_hanging() -> None:
    result = Flowable.range(0, 100).group_by(lambda x: x % 10).flat_map(lambda g: g, max_concurrency=4).test()
    result.assert_error(MissingBackpressureError)


# --- Abandoned groups ------------------------------------------------------------------


def test_group_by_groups_nobody_subscribes_to_are_abandoned_and_never_stall() -> None:
    spy = Spy(RangePublisher(0, 1000))
    main: TestSubscriber[GroupedPublisher[int, int]] = TestSubscriber()
    operators.group_by(spy, lambda x: x % 10, prefetch=4).subscribe(main)
    main.assert_complete().assert_value_count(1000)  # each item made a group: each was abandoned
    assert [g.key for g in main.values[:12]] == [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1]
    late: TestSubscriber[int] = TestSubscriber()
    main.values[123].subscribe(late)
    late.assert_result(123)  # an abandoned group still delivers its one item, then completes


def test_group_by_ignored_groups_do_not_stall_the_subscribed_ones() -> None:
    collector = GroupCollector(keys={0})
    operators.group_by(RangePublisher(0, 1000), lambda x: x % 3, prefetch=4).subscribe(collector)
    collector.main.assert_complete()
    (zeros,) = collector.of(0)
    zeros.assert_result(*range(0, 1000, 3))


def test_group_by_abandoned_group_admits_one_subscriber_only() -> None:
    main: TestSubscriber[GroupedPublisher[int, int]] = TestSubscriber()
    operators.group_by(just(7), lambda x: x).subscribe(main)
    group = main.values[0]
    first: TestSubscriber[int] = TestSubscriber()
    second: TestSubscriber[int] = TestSubscriber()
    group.subscribe(first)
    group.subscribe(second)
    first.assert_result(7)
    second.assert_error(RuntimeError)
    assert str(second.errors[0]) == "a group serves one subscriber; share() it to have more"


def test_group_by_second_subscriber_of_a_live_group_is_refused() -> None:
    seconds: list[TestSubscriber[int]] = []

    def subscribe_twice(group: GroupedPublisher[int, int]) -> GroupedPublisher[int, int]:
        group.subscribe(TestSubscriber())
        second: TestSubscriber[int] = TestSubscriber()
        group.subscribe(second)
        seconds.append(second)
        return group

    operators.map(operators.group_by(just(1, 2), lambda x: 0), subscribe_twice).subscribe(TestSubscriber())
    (second,) = seconds
    second.assert_error(RuntimeError).assert_no_values()


# --- Cancelling -------------------------------------------------------------------------


def test_group_by_cancelled_group_is_replaced_when_its_key_comes_again() -> None:
    result = (
        Flowable.range(0, 10)
        .group_by(lambda x: x % 2)
        .flat_map(lambda g: g.take(2).map(lambda v: (g.key, v)), max_concurrency=100)
        .test()
    )
    result.assert_complete()
    assert result.values == [(0, 0), (1, 1), (0, 2), (1, 3), (0, 4), (1, 5), (0, 6), (1, 7), (0, 8), (1, 9)]


def test_group_by_cancelled_group_returns_its_queued_items_to_the_source() -> None:
    spy = Spy(RangePublisher(0, 1000))
    collector = GroupCollector(initial=0)
    operators.group_by(spy, lambda x: x % 2, prefetch=8).subscribe(collector)
    odds = collector.of(1)[0]
    odds.cancel()  # it held 4 items, never requested
    collector.initial = 2**63 - 1  # groups from now on take everything
    evens = collector.of(0)[0]
    evens.request(2**63 - 1)
    evens.assert_complete()
    odd_groups = collector.of(1)
    assert len(odd_groups) == 2  # the key came again after the cancel: a new group
    assert odd_groups[1].values[0] == 9  # 1, 3, 5, 7 were dropped with the cancelled group


def test_group_by_cancelling_the_groups_stream_lets_live_groups_go_on() -> None:
    spy = Spy(RangePublisher(0, 100))
    groups: list[TestSubscriber[int]] = []

    class TakesFirstGroup(Subscriber[GroupedPublisher[int, int]]):
        def on_subscribe(self, subscription: Subscription) -> None:
            self.subscription = subscription
            subscription.request(10)

        def on_next(self, group: GroupedPublisher[int, int]) -> None:
            subscriber: TestSubscriber[int] = TestSubscriber()
            groups.append(subscriber)
            group.subscribe(subscriber)
            self.subscription.cancel()

        def on_error(self, error: BaseException) -> None:
            raise AssertionError(error)

        def on_complete(self) -> None:
            raise AssertionError("the stream of groups was cancelled")

    operators.group_by(spy, lambda x: x % 5, prefetch=4).subscribe(TakesFirstGroup())
    (first,) = groups
    first.assert_result(*range(0, 100, 5))  # the other keys' items were dropped, and replaced upstream
    assert not spy.subscription.cancelled.is_set()


def test_group_by_cancels_the_source_when_the_stream_and_every_group_cancelled() -> None:
    spy = Spy(RangePublisher(0, 100))
    collector = GroupCollector(initial=1)
    operators.group_by(spy, lambda x: x % 2, prefetch=4).subscribe(collector)
    assert collector.subscription is not None
    collector.subscription.cancel()
    assert not spy.subscription.cancelled.is_set()
    collector.of(0)[0].cancel()
    assert not spy.subscription.cancelled.is_set()
    collector.of(1)[0].cancel()
    assert spy.subscription.cancelled.is_set()


def test_group_by_cancel_in_on_subscribe_cancels_the_source_and_requests_nothing() -> None:
    spy = Spy(RangePublisher(0, 100))
    main: TestSubscriber[Any] = TestSubscriber()
    main.cancel()
    operators.group_by(spy, lambda x: x).subscribe(main)
    assert spy.subscription.cancelled.is_set()
    assert spy.subscription.requests == []


# --- Errors -------------------------------------------------------------------------------


def test_group_by_upstream_error_fails_every_group_and_the_stream_at_once() -> None:
    source = SubmissionPublisher[int](executor=direct_executor)
    collector = GroupCollector(initial=0)
    operators.group_by(source, lambda x: x % 2).subscribe(collector)
    source.submit(1)
    source.submit(2)
    failure = RuntimeError("source failed")
    source.close_exceptionally(failure)
    collector.main.assert_error(failure)
    for _, subscriber in collector.groups:
        assert subscriber is not None
        subscriber.assert_error(failure).assert_no_values()  # ahead of the queued item


@pytest.mark.parametrize(
    ("key_fn", "value_fn", "expected"),
    [
        (lambda x: 1 // (x - 2), None, ZeroDivisionError),
        (lambda x: x, lambda x: None if x == 2 else x, TypeError),
        (lambda x: [x] if x == 2 else x, None, TypeError),
    ],
    ids=["key_fn raises", "value_fn returns None", "unhashable key"],
)
def test_group_by_function_failure_cancels_the_source_and_fails_everything(
    key_fn: Any, value_fn: Any, expected: type[BaseException]
) -> None:
    spy = Spy(RangePublisher(0, 10))
    collector = GroupCollector()
    operators.group_by(spy, key_fn, value_fn).subscribe(collector)
    collector.main.assert_error(expected)
    assert spy.subscription.cancelled.is_set()
    for _, subscriber in collector.groups:
        assert subscriber is not None
        subscriber.assert_error(expected)


def test_group_by_value_fn_none_message_names_the_function() -> None:
    def nothing(x: int) -> None:
        return None

    result = Flowable.just(1).group_by(lambda x: x, nothing).test()
    result.assert_error(TypeError)
    assert str(result.errors[0]) == (f"group_by's value_fn must not return None (rule 2.13), got None from {nothing!r}")


def test_group_by_invalid_request_for_groups_is_signalled_by_the_source() -> None:
    collector = GroupCollector(main_request=0)
    operators.group_by(RangePublisher(0, 10), lambda x: x).subscribe(collector)
    assert collector.subscription is not None
    collector.subscription.request(0)
    collector.main.assert_error(ValueError)
    assert "3.9" in str(collector.main.errors[0])


def test_group_by_invalid_request_of_a_group_fails_only_that_group() -> None:
    collector = GroupCollector(initial=0)
    operators.group_by(RangePublisher(0, 20), lambda x: x % 2, prefetch=4).subscribe(collector)
    collector.of(1)[0].request(-1)
    collector.of(1)[0].assert_error(ValueError).assert_no_values()
    collector.initial = 2**63 - 1  # groups from now on take everything
    evens = collector.of(0)[0]
    evens.request(2**63 - 1)
    evens.assert_result(*range(0, 20, 2))  # the failed group's items went back to the source
    later_odds = [v for s in collector.of(1)[1:] for v in s.values]
    assert later_odds == list(range(5, 20, 2))  # 1 and 3 were dropped with the failed group


def test_group_by_group_subscriber_raising_is_reported_and_the_others_go_on(caplog: pytest.LogCaptureFixture) -> None:
    class Raises(TestSubscriber[int]):
        def on_next(self, item: int) -> None:
            raise ValueError("bad subscriber")

    taken: list[TestSubscriber[int]] = []

    def subscribe(group: GroupedPublisher[int, int]) -> GroupedPublisher[int, int]:
        subscriber: TestSubscriber[int] = Raises() if group.key == 1 else TestSubscriber()
        taken.append(subscriber)
        group.subscribe(subscriber)
        return group

    main: TestSubscriber[Any] = TestSubscriber()
    with caplog.at_level(logging.ERROR, logger="flowpy"):
        operators.map(operators.group_by(RangePublisher(0, 50), lambda x: x % 2, prefetch=4), subscribe).subscribe(main)
    main.assert_complete()
    raisers = [s for s in taken if isinstance(s, Raises)]
    assert len(raisers) == 25  # each odd item: a new group, since the one before was cancelled
    assert len([r for r in caplog.records if "bad subscriber" in r.getMessage()]) == 25
    evens = [s for s in taken if not isinstance(s, Raises)]
    assert [v for s in evens for v in s.values] == list(range(0, 50, 2))


def test_group_by_keyboard_interrupt_in_a_group_ends_everything_and_propagates() -> None:
    class Interrupts(TestSubscriber[int]):
        def on_next(self, item: int) -> None:
            if item == 3:
                raise KeyboardInterrupt
            super().on_next(item)

    spy = Spy(RangePublisher(0, 50))
    others: list[TestSubscriber[int]] = []
    main: TestSubscriber[Any] = TestSubscriber()

    def subscribe(group: GroupedPublisher[int, int]) -> GroupedPublisher[int, int]:
        subscriber: TestSubscriber[int] = Interrupts() if group.key == 1 else TestSubscriber()
        if group.key != 1:
            others.append(subscriber)
        group.subscribe(subscriber)
        return group

    with pytest.raises(KeyboardInterrupt):
        operators.map(operators.group_by(spy, lambda x: x % 2), subscribe).subscribe(main)
    assert spy.subscription.cancelled.is_set()
    main.assert_error(KeyboardInterrupt)
    others[0].assert_failure(KeyboardInterrupt, 0, 2)


def test_group_by_rejects_bad_arguments() -> None:
    with pytest.raises(TypeError, match=r"^key_fn must be callable, got 3$"):
        operators.group_by(just(1), 3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^value_fn must be callable or None, got 3$"):
        operators.group_by(just(1), str, 3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^prefetch must be positive, got 0$"):
        operators.group_by(just(1), str, prefetch=0)
    with pytest.raises(TypeError, match=r"^subscriber must not be None \(rule 1\.9\)$"):
        operators.group_by(just(1), str).subscribe(None)  # type: ignore[arg-type]


def test_group_by_of_a_failed_source_fails() -> None:
    failure = RuntimeError("nope")
    Flowable.from_publisher(error(failure)).group_by(str).test().assert_error(failure)


# --- Threads and contexts ---------------------------------------------------------------


@pytest.mark.timeout(60)
@pytest.mark.parametrize("run", range(10))
def test_group_by_groups_consumed_on_pool_threads_receive_everything(
    pool: DaemonThreadPool, tiny_switch_interval: None, run: int
) -> None:
    count = 3000
    result = (
        Flowable.from_iterable(range(count), executor=pool)
        .group_by(lambda x: x % 7, prefetch=16)
        .flat_map(lambda g: g.observe_on(pool, prefetch=4).map(lambda v: (g.key, v)), max_concurrency=100)
        .test()
    )
    result.await_done(WAIT * 3).assert_complete()
    assert sorted(v for _, v in result.values) == list(range(count))
    for key in range(7):
        assert [v for k, v in result.values if k == key] == list(range(key, count, 7))


def test_group_by_group_signals_run_in_the_context_of_its_subscriber(pool: DaemonThreadPool) -> None:
    source = SubmissionPublisher[int](executor=pool)
    recorders: list[ContextRecorder] = []
    done = threading.Event()

    class SubscribesGroups(Subscriber[GroupedPublisher[int, int]]):
        def on_subscribe(self, subscription: Subscription) -> None:
            subscription.request(2**63 - 1)

        def on_next(self, group: GroupedPublisher[int, int]) -> None:
            recorder = ContextRecorder(2**63 - 1)
            recorders.append(recorder)
            in_context(f"group-{group.key}", group.subscribe, recorder)

        def on_error(self, error: BaseException) -> None:
            done.set()

        def on_complete(self) -> None:
            done.set()

    in_context("request-1", operators.group_by(source, lambda x: x % 2).subscribe, SubscribesGroups())

    def produce() -> None:
        REQUEST_ID.set("producer")
        for i in range(20):
            source.submit(i)
        source.close()

    in_fresh_thread(produce)
    assert done.wait(WAIT)
    for recorder in recorders:
        assert recorder.done.wait(WAIT)
    assert {tuple(sorted(r.values())) for r in recorders} == {("group-0",), ("group-1",)}
