"""Every operator's output passes the Reactive Streams TCK PublisherVerification.

Each class builds, for ``elements`` items, the operator over a
:class:`~flowpy.sources.RangePublisher` (``elements`` may be ``2**63 - 1``:
an infinite stream) and a failed publisher from :func:`~flowpy.sources.error`.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Callable
from typing import Any

from flowpy import flow, operators
from flowpy.executors import default_executor
from flowpy.operators._base import CancelledSubscription
from flowpy.sources import IterablePublisher, RangePublisher, error, just
from flowpy.tck import PublisherVerification, TestEnvironment
from flowpy.testing import TestScheduler

MAX = 2**63 - 1


def _range(count: int) -> flow.Publisher[int]:
    return RangePublisher(0, count)


class _OperatorVerification(PublisherVerification[Any]):
    """Fast timeouts, and the failed publisher seen through the same operator.

    Subclasses define ``apply(source)``, the operator applied to ``source``,
    and may override ``build(elements)``.
    """

    apply: Callable[[flow.Publisher[Any]], flow.Publisher[Any]]

    def create_test_environment(self) -> TestEnvironment:
        return TestEnvironment(1000, 20, 10)  # 1 s for expected signals: a loaded machine must not fail them

    def publisher_reference_gc_timeout_millis(self) -> int:
        return 50

    def create_failed_publisher(self) -> flow.Publisher[Any] | None:
        return self.apply(error(RuntimeError("failed source")))

    def create_publisher(self, elements: int) -> flow.Publisher[Any]:
        return self.build(elements)

    def build(self, elements: int) -> flow.Publisher[Any]:
        """A publisher of exactly ``elements`` items made with the operator."""
        return self.apply(_range(elements))


class TestMap(_OperatorVerification):
    def apply(self, source: flow.Publisher[Any]) -> flow.Publisher[Any]:
        return operators.map(source, lambda x: x + 1)


class TestFilter(_OperatorVerification):
    def apply(self, source: flow.Publisher[Any]) -> flow.Publisher[Any]:
        return operators.filter(source, lambda x: x % 2 == 0)

    def build(self, elements: int) -> flow.Publisher[Any]:
        return self.apply(_range(min(2 * elements, MAX)))


class TestTake(_OperatorVerification):
    def apply(self, source: flow.Publisher[Any]) -> flow.Publisher[Any]:
        return operators.take(source, MAX)

    def build(self, elements: int) -> flow.Publisher[Any]:
        return operators.take(_range(MAX), elements)


class TestSkip(_OperatorVerification):
    def apply(self, source: flow.Publisher[Any]) -> flow.Publisher[Any]:
        return operators.skip(source, 3)

    def build(self, elements: int) -> flow.Publisher[Any]:
        return self.apply(_range(min(elements + 3, MAX)))


class TestTakeWhile(_OperatorVerification):
    def apply(self, source: flow.Publisher[Any]) -> flow.Publisher[Any]:
        return operators.take_while(source, lambda x: True)

    def build(self, elements: int) -> flow.Publisher[Any]:
        return operators.take_while(_range(MAX), lambda x: x < elements)


class TestScan(_OperatorVerification):
    def apply(self, source: flow.Publisher[Any]) -> flow.Publisher[Any]:
        return operators.scan(source, operator.add, 0)


class TestFusedChain(_OperatorVerification):
    def apply(self, source: flow.Publisher[Any]) -> flow.Publisher[Any]:
        chain = operators.skip(operators.filter(operators.map(source, lambda x: x * 3), lambda x: x % 2 == 0), 1)
        return operators.scan(chain, max)

    def build(self, elements: int) -> flow.Publisher[Any]:
        return self.apply(_range(min(2 * elements + 2, MAX)))


class TestBuffer(_OperatorVerification):
    def apply(self, source: flow.Publisher[Any]) -> flow.Publisher[Any]:
        return operators.buffer(source, 3)

    def build(self, elements: int) -> flow.Publisher[Any]:
        return self.apply(_range(min(3 * elements, MAX)))


class TestObserveOn(_OperatorVerification):
    def apply(self, source: flow.Publisher[Any]) -> flow.Publisher[Any]:
        return operators.observe_on(source, default_executor(), prefetch=8)


class TestSubscribeOn(_OperatorVerification):
    def apply(self, source: flow.Publisher[Any]) -> flow.Publisher[Any]:
        return operators.subscribe_on(source, default_executor())


class TestMerge(_OperatorVerification):
    def apply(self, source: flow.Publisher[Any]) -> flow.Publisher[Any]:
        return operators.merge(source, just(), prefetch=4)

    def build(self, elements: int) -> flow.Publisher[Any]:
        half = elements // 2
        return operators.merge(_range(half), RangePublisher(half, elements - half), prefetch=4)


class TestConcat(_OperatorVerification):
    def apply(self, source: flow.Publisher[Any]) -> flow.Publisher[Any]:
        return operators.concat(just(), source, prefetch=4)

    def build(self, elements: int) -> flow.Publisher[Any]:
        half = elements // 2
        return operators.concat(_range(half), RangePublisher(half, elements - half), prefetch=4)


class TestFlatMap(_OperatorVerification):
    def apply(self, source: flow.Publisher[Any]) -> flow.Publisher[Any]:
        return operators.flat_map(source, lambda x: just(x), max_concurrency=4, prefetch=2)


class TestZip(_OperatorVerification):
    def apply(self, source: flow.Publisher[Any]) -> flow.Publisher[Any]:
        return operators.zip(source, _range(MAX), fn=operator.add, prefetch=4)


class TestBackpressureBuffer(_OperatorVerification):
    """The source emits everything at once into the buffer, so it is made large enough."""

    def max_elements_from_publisher(self) -> int:
        return 1024

    def apply(self, source: flow.Publisher[Any]) -> flow.Publisher[Any]:
        return operators.on_backpressure_buffer(source, 1024)


class _Dropping(_OperatorVerification):
    """Dropping is the contract: an exact element count cannot be promised.

    With ``max_elements_from_publisher() == 0`` the TCK skips the rules that
    count elements and verifies the rest (subscription, cancellation,
    request validation, failure).
    """

    def max_elements_from_publisher(self) -> int:
        return 0


class TestBackpressureDrop(_Dropping):
    def apply(self, source: flow.Publisher[Any]) -> flow.Publisher[Any]:
        return operators.on_backpressure_drop(source)


class TestBackpressureLatest(_Dropping):
    def apply(self, source: flow.Publisher[Any]) -> flow.Publisher[Any]:
        return operators.on_backpressure_latest(source)


class TestShare(_OperatorVerification):
    def apply(self, source: flow.Publisher[Any]) -> flow.Publisher[Any]:
        return operators.share(source, prefetch=4)


class TestObserveOnIterable(_OperatorVerification):
    """observe_on over the asynchronous IterablePublisher: two executors in a row."""

    def apply(self, source: flow.Publisher[Any]) -> flow.Publisher[Any]:
        return operators.observe_on(source, prefetch=3)

    def build(self, elements: int) -> flow.Publisher[Any]:
        return self.apply(IterablePublisher(itertools.count() if elements == MAX else range(elements)))


# --- Time ----------------------------------------------------------------------------------
#
# The timers of interval, timer, delay, delay_subscription and timeout run on
# the default scheduler, in real time (a few milliseconds). The operators whose
# output time decides (debounce, sample, throttle_first, buffer_with_time,
# window_with_time) run on a TestScheduler that the source itself advances:
# each item comes one virtual second after the one before (_paced), so the
# output is exactly known. Those that emit whatever time says, demand or not,
# are followed by on_backpressure_buffer, as the docs tell users to.


def _paced(count: int, scheduler: TestScheduler) -> flow.Publisher[int]:
    """``count`` ints, each after advancing ``scheduler`` by one second (on the requesting thread)."""

    def advance(x: int) -> int:
        scheduler.advance_time_by(1.0)
        return x

    return operators.map(_range(count), advance)


class _Silent(flow.Publisher[Any]):
    """Gives a subscription and emits nothing; an invalid request still gets its error (rule 3.9)."""

    def subscribe(self, subscriber: flow.Subscriber[Any]) -> None:
        subscriber.on_subscribe(_Idle(subscriber))


class _Idle(flow.Subscription):
    def __init__(self, subscriber: flow.Subscriber[Any]) -> None:
        self.subscriber: flow.Subscriber[Any] | None = subscriber

    def request(self, n: int) -> None:
        subscriber = self.subscriber
        if not (isinstance(n, int) and n > 0) and subscriber is not None:
            self.subscriber = None
            subscriber.on_error(ValueError(f"non-positive subscription request (rule 3.9), got {n!r}"))

    def cancel(self) -> None:
        self.subscriber = None


class _TimeDriven(_OperatorVerification):
    """Finite only: the paced source emits everything while the operator subscribes.

    ``apply`` is the operator alone (the failed publisher: the error must
    not wait behind on_backpressure_buffer's queue); ``build`` adds the buffer.
    """

    def max_elements_from_publisher(self) -> int:
        return 512

    def buffered(self, publisher: flow.Publisher[Any]) -> flow.Publisher[Any]:
        return operators.on_backpressure_buffer(publisher, 1024)


class TestInterval(_OperatorVerification):
    def create_failed_publisher(self) -> flow.Publisher[Any] | None:
        return None  # no source to fail

    def build(self, elements: int) -> flow.Publisher[Any]:
        return operators.take(operators.on_backpressure_drop(operators.interval(0.001)), elements)


class TestTimer(_OperatorVerification):
    def max_elements_from_publisher(self) -> int:
        return 1

    def create_failed_publisher(self) -> flow.Publisher[Any] | None:
        return None

    def build(self, elements: int) -> flow.Publisher[Any]:
        return operators.take(operators.on_backpressure_buffer(operators.timer(0.001), 1), elements)


class TestDelay(_OperatorVerification):
    def apply(self, source: flow.Publisher[Any]) -> flow.Publisher[Any]:
        return operators.delay(source, 0.001, prefetch=8)


class TestDelaySubscription(_OperatorVerification):
    def apply(self, source: flow.Publisher[Any]) -> flow.Publisher[Any]:
        return operators.delay_subscription(source, 0.001)


class TestTimeout(_OperatorVerification):
    def apply(self, source: flow.Publisher[Any]) -> flow.Publisher[Any]:
        return operators.timeout(source, 60.0)


class TestTimeoutFallback(_OperatorVerification):
    def apply(self, source: flow.Publisher[Any]) -> flow.Publisher[Any]:
        return operators.timeout(_Silent(), 0.001, fallback=source)


class TestDebounce(_TimeDriven):
    def apply(self, source: flow.Publisher[Any]) -> flow.Publisher[Any]:
        return operators.debounce(source, 0.5, scheduler=TestScheduler())

    def build(self, elements: int) -> flow.Publisher[Any]:
        scheduler = TestScheduler()  # each item comes 1 s after the one before: every one is emitted
        return self.buffered(operators.debounce(_paced(elements, scheduler), 0.5, scheduler=scheduler))


class TestSample(_TimeDriven):
    def apply(self, source: flow.Publisher[Any]) -> flow.Publisher[Any]:
        return operators.sample(source, 1.0, scheduler=TestScheduler())

    def build(self, elements: int) -> flow.Publisher[Any]:
        scheduler = TestScheduler()  # every tick samples one item; the last item is never sampled
        return self.buffered(operators.sample(_paced(elements + 1, scheduler), 1.0, scheduler=scheduler))


class TestThrottleFirst(_OperatorVerification):
    def apply(self, source: flow.Publisher[Any]) -> flow.Publisher[Any]:
        return operators.throttle_first(source, 0.5, scheduler=TestScheduler())

    def build(self, elements: int) -> flow.Publisher[Any]:
        scheduler = TestScheduler()  # each item comes after the window of the one before: every one passes
        return operators.throttle_first(_paced(elements, scheduler), 0.5, scheduler=scheduler)


class TestBufferWithTime(_TimeDriven):
    def apply(self, source: flow.Publisher[Any]) -> flow.Publisher[Any]:
        return operators.buffer_with_time(source, 1.0, scheduler=TestScheduler())

    def build(self, elements: int) -> flow.Publisher[Any]:
        if elements == 0:
            return operators.take(self.buffered(self.apply(_range(0))), 0)
        scheduler = TestScheduler()  # a list at each tick, and one at completion: n items make n + 1 lists
        return self.buffered(operators.buffer_with_time(_paced(elements - 1, scheduler), 1.0, scheduler=scheduler))


class TestWindowWithCount(_OperatorVerification):
    def apply(self, source: flow.Publisher[Any]) -> flow.Publisher[Any]:
        return operators.window_with_count(source, 3)

    def build(self, elements: int) -> flow.Publisher[Any]:
        return self.apply(_range(min(3 * elements, MAX)))


class TestWindowWithCountOverlapping(_OperatorVerification):
    def apply(self, source: flow.Publisher[Any]) -> flow.Publisher[Any]:
        return operators.window_with_count(source, 3, 1)


class TestWindowWithTime(_TimeDriven):
    def apply(self, source: flow.Publisher[Any]) -> flow.Publisher[Any]:
        return operators.window_with_time(source, 1.0, scheduler=TestScheduler())

    def build(self, elements: int) -> flow.Publisher[Any]:
        if elements == 0:
            return operators.take(self.buffered(self.apply(_range(0))), 0)
        scheduler = TestScheduler()  # a window at the start and at each tick: n items make n + 1 windows
        return self.buffered(operators.window_with_time(_paced(elements - 1, scheduler), 1.0, scheduler=scheduler))


class TestTimestamp(_OperatorVerification):
    def apply(self, source: flow.Publisher[Any]) -> flow.Publisher[Any]:
        return operators.timestamp(source)


class TestTimeInterval(_OperatorVerification):
    def apply(self, source: flow.Publisher[Any]) -> flow.Publisher[Any]:
        return operators.time_interval(source)


# --- Rx vocabulary: sources, error recovery, transforms, filters, hooks ---


class _Never(flow.Publisher[Any]):
    """Subscribes and never signals again: a companion publisher that never ends the stream."""

    def subscribe(self, subscriber: flow.Subscriber[Any]) -> None:
        subscriber.on_subscribe(CancelledSubscription())


def _fails_first(then: flow.Publisher[Any]) -> flow.Publisher[Any]:
    """A publisher whose first subscription fails at once and whose later ones are ``then``."""
    attempts = itertools.count()
    return operators.defer(lambda: error(RuntimeError("first attempt")) if next(attempts) == 0 else then)


def _then_fail(count: int) -> flow.Publisher[Any]:
    """``count`` items, then a failure."""
    return operators.concat(_range(count), error(RuntimeError("failed after the items")))


class _AtMostOne(_OperatorVerification):
    def max_elements_from_publisher(self) -> int:
        return 1


class _Finite(_OperatorVerification):
    """Operators that must see the end of their source: no infinite stream."""

    def max_elements_from_publisher(self) -> int:
        return 1024


class TestDefer(_OperatorVerification):
    def apply(self, source: flow.Publisher[Any]) -> flow.Publisher[Any]:
        return operators.defer(lambda: source)


class TestUsing(_OperatorVerification):
    def apply(self, source: flow.Publisher[Any]) -> flow.Publisher[Any]:
        return operators.using(lambda: "resource", lambda resource: source, lambda resource: None)


class TestCombineLatest(_OperatorVerification):
    def apply(self, source: flow.Publisher[Any]) -> flow.Publisher[Any]:
        return operators.combine_latest(just("a"), source, prefetch=4)


class TestAmb(_OperatorVerification):
    def apply(self, source: flow.Publisher[Any]) -> flow.Publisher[Any]:
        return operators.amb(source, _range(5))


class TestRetry(_OperatorVerification):
    def apply(self, source: flow.Publisher[Any]) -> flow.Publisher[Any]:
        return operators.retry(source, 3)

    def build(self, elements: int) -> flow.Publisher[Any]:
        return self.apply(_fails_first(_range(elements)))


class TestRetryWhen(_OperatorVerification):
    def apply(self, source: flow.Publisher[Any]) -> flow.Publisher[Any]:
        return operators.retry_when(source, lambda errors: errors.take(3))

    def build(self, elements: int) -> flow.Publisher[Any]:
        return self.apply(_fails_first(_range(elements)))

    def create_failed_publisher(self) -> flow.Publisher[Any] | None:
        return operators.retry_when(error(RuntimeError("failed source")), lambda errors: errors.map(_raise))


def _raise(error: BaseException) -> Any:
    raise error


class TestOnErrorResume(_OperatorVerification):
    def apply(self, source: flow.Publisher[Any]) -> flow.Publisher[Any]:
        return operators.on_error_resume(source, lambda e: error(e))

    def build(self, elements: int) -> flow.Publisher[Any]:
        half = elements // 2
        return operators.on_error_resume(_then_fail(half), lambda e: RangePublisher(half, elements - half))


class TestOnErrorReturn(_OperatorVerification):
    def apply(self, source: flow.Publisher[Any]) -> flow.Publisher[Any]:
        return operators.on_error_return(source, _raise)

    def build(self, elements: int) -> flow.Publisher[Any]:
        if elements in (0, MAX):
            return operators.on_error_return(_range(elements), _raise)
        return operators.on_error_return(_then_fail(elements - 1), lambda e: -1)


class TestConcatMap(_OperatorVerification):
    def apply(self, source: flow.Publisher[Any]) -> flow.Publisher[Any]:
        return operators.concat_map(source, lambda x: just(x))


class TestConcatMapAsynchronousInners(_OperatorVerification):
    def apply(self, source: flow.Publisher[Any]) -> flow.Publisher[Any]:
        return operators.concat_map(source, lambda x: IterablePublisher([x, x]), prefetch=3)

    def build(self, elements: int) -> flow.Publisher[Any]:
        pairs = operators.concat_map(_range(min(elements // 2 + 1, MAX)), lambda x: IterablePublisher([x, x]))
        return operators.take(pairs, elements)


class TestSwitchMap(_OperatorVerification):
    def apply(self, source: flow.Publisher[Any]) -> flow.Publisher[Any]:
        return operators.switch_map(just(0), lambda _: source, prefetch=4)


class TestDistinct(_OperatorVerification):
    def apply(self, source: flow.Publisher[Any]) -> flow.Publisher[Any]:
        return operators.distinct(source, lambda x: x // 2)

    def build(self, elements: int) -> flow.Publisher[Any]:
        return operators.distinct(
            operators.map(_range(min(2 * elements, MAX)), lambda x: x * 2 + x % 2), lambda x: x // 4
        )


class TestDistinctUntilChanged(_OperatorVerification):
    def apply(self, source: flow.Publisher[Any]) -> flow.Publisher[Any]:
        return operators.distinct_until_changed(source)

    def build(self, elements: int) -> flow.Publisher[Any]:
        return operators.distinct_until_changed(_range(min(2 * elements, MAX)), lambda x: x // 2)


class TestWithLatestFrom(_OperatorVerification):
    def apply(self, source: flow.Publisher[Any]) -> flow.Publisher[Any]:
        return operators.with_latest_from(source, just("x"))


class TestStartWith(_OperatorVerification):
    def apply(self, source: flow.Publisher[Any]) -> flow.Publisher[Any]:
        return operators.start_with(source, -1)

    def create_failed_publisher(self) -> flow.Publisher[Any] | None:
        return None  # the source's failure comes after the first item, which waits for demand

    def build(self, elements: int) -> flow.Publisher[Any]:
        if elements == 0:
            return operators.take(self.apply(_range(0)), 0)
        return self.apply(_range(elements - 1 if elements != MAX else MAX))


class TestDefaultIfEmpty(_OperatorVerification):
    def apply(self, source: flow.Publisher[Any]) -> flow.Publisher[Any]:
        return operators.default_if_empty(source, -1)

    def build(self, elements: int) -> flow.Publisher[Any]:
        if elements == 0:
            return operators.take(self.apply(_range(0)), 0)
        return self.apply(_range(0) if elements == 1 else _range(elements))


class TestRepeat(_OperatorVerification):
    def apply(self, source: flow.Publisher[Any]) -> flow.Publisher[Any]:
        return operators.repeat(source, 2)

    def build(self, elements: int) -> flow.Publisher[Any]:
        return operators.repeat(_range(1), None if elements == MAX else elements)


class TestMaterialize(_OperatorVerification):
    def apply(self, source: flow.Publisher[Any]) -> flow.Publisher[Any]:
        return operators.materialize(source)

    def build(self, elements: int) -> flow.Publisher[Any]:
        if elements == 0:
            return operators.take(self.apply(_range(0)), 0)
        return self.apply(_range(elements - 1 if elements != MAX else MAX))

    def create_failed_publisher(self) -> flow.Publisher[Any] | None:
        return None  # materialize turns the failure into an item


class TestDematerialize(_OperatorVerification):
    def apply(self, source: flow.Publisher[Any]) -> flow.Publisher[Any]:
        return operators.dematerialize(operators.materialize(source))

    def create_failed_publisher(self) -> flow.Publisher[Any] | None:
        # A materialized failure is an item, which waits for demand: fail the notifications' source itself.
        return operators.dematerialize(error(RuntimeError("failed source")))


class TestSkipWhile(_OperatorVerification):
    def apply(self, source: flow.Publisher[Any]) -> flow.Publisher[Any]:
        return operators.skip_while(source, lambda x: x < 3)

    def build(self, elements: int) -> flow.Publisher[Any]:
        return self.apply(_range(min(elements + 3, MAX)))


class TestTakeUntil(_OperatorVerification):
    def apply(self, source: flow.Publisher[Any]) -> flow.Publisher[Any]:
        return operators.take_until(source, _Never())


class TestTakeLast(_Finite):
    def apply(self, source: flow.Publisher[Any]) -> flow.Publisher[Any]:
        return operators.take_last(source, 5)

    def build(self, elements: int) -> flow.Publisher[Any]:
        return operators.take_last(_range(elements + 7), elements)


class TestLast(_AtMostOne):
    def apply(self, source: flow.Publisher[Any]) -> flow.Publisher[Any]:
        return operators.last(source)

    def build(self, elements: int) -> flow.Publisher[Any]:
        return self.apply(_range(5 * elements))


class TestFirst(_AtMostOne):
    def apply(self, source: flow.Publisher[Any]) -> flow.Publisher[Any]:
        return operators.first(source)

    def build(self, elements: int) -> flow.Publisher[Any]:
        return self.apply(_range(MAX if elements else 0))


class TestElementAt(_AtMostOne):
    def apply(self, source: flow.Publisher[Any]) -> flow.Publisher[Any]:
        return operators.element_at(source, 3)

    def build(self, elements: int) -> flow.Publisher[Any]:
        return self.apply(_range(MAX if elements else 3))


class TestIgnoreElements(_OperatorVerification):
    def max_elements_from_publisher(self) -> int:
        return 0

    def apply(self, source: flow.Publisher[Any]) -> flow.Publisher[Any]:
        return operators.ignore_elements(source)

    def build(self, elements: int) -> flow.Publisher[Any]:
        return self.apply(_range(10))


def _nothing(*args: object) -> None:
    """A hook that does nothing."""


class TestDoOnNext(_OperatorVerification):
    def apply(self, source: flow.Publisher[Any]) -> flow.Publisher[Any]:
        return operators.do_on_next(source, _nothing)


class TestDoOnError(_OperatorVerification):
    def apply(self, source: flow.Publisher[Any]) -> flow.Publisher[Any]:
        return operators.do_on_error(source, _nothing)


class TestDoOnComplete(_OperatorVerification):
    def apply(self, source: flow.Publisher[Any]) -> flow.Publisher[Any]:
        return operators.do_on_complete(source, _nothing)


class TestDoOnSubscribe(_OperatorVerification):
    def apply(self, source: flow.Publisher[Any]) -> flow.Publisher[Any]:
        return operators.do_on_subscribe(source, _nothing)


class TestDoOnRequest(_OperatorVerification):
    def apply(self, source: flow.Publisher[Any]) -> flow.Publisher[Any]:
        return operators.do_on_request(source, _nothing)


class TestDoOnCancel(_OperatorVerification):
    def apply(self, source: flow.Publisher[Any]) -> flow.Publisher[Any]:
        return operators.do_on_cancel(source, _nothing)


class TestDoFinally(_OperatorVerification):
    def apply(self, source: flow.Publisher[Any]) -> flow.Publisher[Any]:
        return operators.do_finally(source, _nothing)
