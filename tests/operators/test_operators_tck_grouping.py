"""The TCK PublisherVerification for group_by, replay, cache and the parallel rails.

Built as in tests/operators/test_operators_tck.py: each class makes, for
``elements`` items, the operator over a :class:`~flowpy.sources.RangePublisher`
(``2**63 - 1`` is an infinite stream), and a failed publisher seen through
the same operator.
"""

from __future__ import annotations

import operator
from typing import Any

from flowpy import flow, operators
from flowpy._checks import require_subscriber
from flowpy.executors import default_executor
from flowpy.flow import Publisher, Subscriber, Subscription
from flowpy.operators import GroupedPublisher
from flowpy.operators._parallel_join import reduce_rails, sorted_rails
from flowpy.operators._share import ConnectablePublisher
from flowpy.sources import RangePublisher, empty, error
from tests.operators.test_operators_tck import _OperatorVerification


def _range(count: int) -> flow.Publisher[int]:
    return RangePublisher(0, count)


class TestGroupByFlatMap(_OperatorVerification):
    """The groups' items, merged back: the groups' demand and replenishment under every TCK pattern."""

    def apply(self, source: flow.Publisher[Any]) -> flow.Publisher[Any]:
        groups = operators.group_by(source, lambda v: v & 1, prefetch=4)
        return operators.flat_map(groups, lambda group: group, prefetch=2)


class TestGroupByManyKeys(_OperatorVerification):
    def apply(self, source: flow.Publisher[Any]) -> flow.Publisher[Any]:
        groups = operators.group_by(source, lambda v: v % 5, lambda v: v * 2, prefetch=3)
        return operators.flat_map(groups, lambda group: group, max_concurrency=5, prefetch=1)


class _TakesTheGroup(Subscriber[GroupedPublisher[int, Any]]):
    """Subscribes ``subscriber`` to the first group, or to the end that came instead of one.

    A class of the module's, not one made in ``subscribe``: CPython 3.13t never
    frees a class made once a thread has started (docs/internals.md, "Classes
    made at run time"), and this one's methods would keep the subscriber.
    """

    def __init__(self, subscriber: Subscriber[Any]) -> None:
        self.subscriber = subscriber
        self.got_group = False

    def on_subscribe(self, subscription: Subscription) -> None:
        subscription.request(1)

    def on_next(self, group: GroupedPublisher[int, Any]) -> None:
        self.got_group = True
        group.subscribe(self.subscriber)

    def on_error(self, failure: BaseException) -> None:
        if not self.got_group:
            error(failure).subscribe(self.subscriber)

    def on_complete(self) -> None:
        if not self.got_group:
            empty().subscribe(self.subscriber)


class _FirstGroup(Publisher[Any]):
    """A group as a publisher: every item has key 0, so the first group holds them all."""

    def __init__(self, source: Publisher[int]) -> None:
        self.source = source

    def subscribe(self, subscriber: Subscriber[Any]) -> None:
        require_subscriber(subscriber)
        operators.group_by(self.source, lambda v: 0).subscribe(_TakesTheGroup(subscriber))


class TestGroupedPublisher(_OperatorVerification):
    def apply(self, source: flow.Publisher[Any]) -> flow.Publisher[Any]:
        return _FirstGroup(source)


class _ConnectOnSubscribe(Publisher[Any]):
    """Subscribe, then connect: RxJava's ``replay().autoConnect()``."""

    def __init__(self, replayed: ConnectablePublisher[Any]) -> None:
        self.replayed = replayed

    def subscribe(self, subscriber: Subscriber[Any]) -> None:
        self.replayed.subscribe(subscriber)
        self.replayed.connect()


class TestReplay(_OperatorVerification):
    """Keeps every item, and the source connected when subscribers leave: the TCK's streams are kept finite."""

    def max_elements_from_publisher(self) -> int:
        return 1024

    def apply(self, source: flow.Publisher[Any]) -> flow.Publisher[Any]:
        return _ConnectOnSubscribe(operators.replay(source))


class TestReplayBounded(_OperatorVerification):
    def apply(self, source: flow.Publisher[Any]) -> flow.Publisher[Any]:
        return _ConnectOnSubscribe(operators.replay(source, 5))


class TestCache(_OperatorVerification):
    """cache consumes its source at once: the TCK's streams are kept finite."""

    def max_elements_from_publisher(self) -> int:
        return 1024

    def apply(self, source: flow.Publisher[Any]) -> flow.Publisher[Any]:
        return operators.cache(source)


def _rails(source: flow.Publisher[Any]) -> operators.ParallelPublisher[Any]:
    parallel = operators.parallel(source, 3, prefetch=4)
    return parallel.through(lambda rail: operators.observe_on(rail, default_executor(), prefetch=2))


class TestParallelSequential(_OperatorVerification):
    def apply(self, source: flow.Publisher[Any]) -> flow.Publisher[Any]:
        return operators.sequential(_rails(source), prefetch=2)


class TestParallelSequentialSynchronous(_OperatorVerification):
    """The rails without run_on: everything on the requesting thread."""

    def apply(self, source: flow.Publisher[Any]) -> flow.Publisher[Any]:
        rails = operators.parallel(source, 2, prefetch=3).through(lambda rail: operators.map(rail, lambda x: x + 1))
        return operators.sequential(rails, prefetch=2)


class TestParallelReduce(_OperatorVerification):
    """One item, or none from an empty source."""

    def max_elements_from_publisher(self) -> int:
        return 1

    def apply(self, source: flow.Publisher[Any]) -> flow.Publisher[Any]:
        return reduce_rails(_rails(source), operator.add)

    def build(self, elements: int) -> flow.Publisher[Any]:
        return self.apply(_range(10 * elements))


class TestParallelSorted(_OperatorVerification):
    def max_elements_from_publisher(self) -> int:
        return 1024

    def apply(self, source: flow.Publisher[Any]) -> flow.Publisher[Any]:
        return sorted_rails(_rails(source), lambda x: -x)
