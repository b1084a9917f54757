"""Deliberately broken implementations, one defect each, that the TCK must catch."""

from __future__ import annotations

import contextlib
import itertools
import random
import sys
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any, TypeVar

from flowpy import flow
from flowpy.executors import Executor, as_execute
from flowpy.tck import SubscriberPuppet, SubscriptionPuppet, TestException, WhiteboxSubscriberProbe
from tests.tck.reference import (
    IdentityProcessor,
    MulticastProcessor,
    RangePublisher,
    RangeSubscription,
    SyncSubscriber,
)

T = TypeVar("T")

LONG_MAX = 2**63 - 1


# --- Publishers ----------------------------------------------------------------------


class _CustomRange(RangePublisher):
    """A RangePublisher whose subscription class is chosen by the subclass."""

    subscription_class: type[RangeSubscription] = RangeSubscription

    def subscribe(self, subscriber: flow.Subscriber[int]) -> None:
        if subscriber is None:
            raise TypeError("subscriber must not be None (rule 1.9)")
        subscriber.on_subscribe(self.subscription_class(subscriber, self.start, self.start + self.count))


class _OverDelivering(RangeSubscription):
    def request(self, n: int) -> None:
        super().request(n + 1 if n > 0 else n)


class OverDeliveringPublisher(_CustomRange):
    """Rule 1.1: emits one more element than each request asks for."""

    subscription_class = _OverDelivering


class _WrongMessage(RangeSubscription):
    def request(self, n: int) -> None:
        if n <= 0:
            with self.lock:
                subscriber, self.subscriber = self.subscriber, None
                self.cancelled = True
            if subscriber is not None:
                subscriber.on_error(ValueError("bad n"))
            return
        super().request(n)


class VagueErrorMessagePublisher(_CustomRange):
    """Optional rule 3.9 message: the error does not say why the request was illegal."""

    subscription_class = _WrongMessage


class _FloodOnCancel(RangeSubscription):
    def cancel(self) -> None:
        subscriber = self.subscriber
        super().cancel()
        if subscriber is not None:
            while self.index < self.end:  # ignores demand: everything left, at once
                self.index += 1
                subscriber.on_next(self.index - 1)


class FloodOnCancelPublisher(_CustomRange):
    """Rule 3.12: on ``cancel`` it sends every remaining element, beyond the demand."""

    subscription_class = _FloodOnCancel


class WrongNoneErrorPublisher(RangePublisher):
    """Rule 1.9: ``subscribe(None)`` raises ValueError instead of TypeError."""

    def subscribe(self, subscriber: flow.Subscriber[int]) -> None:
        if subscriber is None:
            raise ValueError("no subscriber")
        super().subscribe(subscriber)


class CompletingFailedPublisher(flow.Publisher[int]):
    """Rule 1.4: the failed publisher signals ``on_complete`` instead of ``on_error``."""

    def subscribe(self, subscriber: flow.Subscriber[int]) -> None:
        RangePublisher(0, 0).subscribe(subscriber)
        subscriber.on_complete()


# --- Subscribers ---------------------------------------------------------------------


class NoneAcceptingSubscriber(SyncSubscriber[T]):
    """Rule 2.13: ``on_next(None)`` returns normally."""

    def on_next(self, item: T) -> None:
        if item is not None:
            super().on_next(item)


# --- Processors ----------------------------------------------------------------------


class ErrorSwallowingProcessor(IdentityProcessor[T]):
    """Rule 4.2: an upstream ``on_error`` is not passed downstream."""

    def on_error(self, error: BaseException) -> None:
        if error is None:
            raise TypeError("error must not be None")


class ErrorToFirstOnlyProcessor(MulticastProcessor[T]):
    """Rule 1.4: an upstream error reaches only the first subscriber."""

    def on_error(self, error: BaseException) -> None:
        if error is None:
            raise TypeError("error must not be None")
        with self._lock:
            if self._subscriptions:
                self._subscriptions[0].error = error
        self._drain()


def over_delivering_publisher(elements: int) -> Any:
    """The runner's factory for :class:`OverDeliveringPublisher`."""
    return OverDeliveringPublisher(0, elements)


# --- Building blocks of the upstream self-tests (PublisherVerificationTest & co.) ------


class NoopSubscription(flow.Subscription):
    """A subscription that ignores ``request`` and ``cancel``."""

    def request(self, n: int) -> None:
        return None

    def cancel(self) -> None:
        return None


class SubscriberSubscription(NoopSubscription):
    """A :class:`NoopSubscription` that keeps its subscriber, for subclasses that signal it."""

    def __init__(self, subscriber: flow.Subscriber[int]) -> None:
        self.subscriber = subscriber


class CallbackPublisher(flow.Publisher[int]):
    """A publisher whose ``subscribe`` only calls ``on_subscribe_call(subscriber)``: any behaviour, no checks."""

    def __init__(self, on_subscribe_call: Callable[[flow.Subscriber[int]], None]) -> None:
        self._call = on_subscribe_call

    def subscribe(self, subscriber: flow.Subscriber[int]) -> None:
        self._call(subscriber)


def subscription_publisher(make: Callable[[flow.Subscriber[int]], flow.Subscription]) -> CallbackPublisher:
    """A publisher that gives each subscriber ``make(subscriber)`` and does nothing more."""
    return CallbackPublisher(lambda subscriber: subscriber.on_subscribe(make(subscriber)))


def noop_publisher() -> CallbackPublisher:
    """Rules 1.1, 1.2: subscribes, then never signals anything."""
    return subscription_publisher(lambda subscriber: NoopSubscription())


class _ErrorOnRequest(SubscriberSubscription):
    def request(self, n: int) -> None:
        self.subscriber.on_error(TestException())


def on_erroring_publisher() -> CallbackPublisher:
    """Rule 3.2: every ``request`` is answered with ``on_error(TestException())``."""
    return subscription_publisher(_ErrorOnRequest)


class _DemandIgnoring(SubscriberSubscription):
    def request(self, n: int) -> None:
        i = 0
        while i <= n:  # one too many, on the caller's thread
            self.subscriber.on_next(i)
            i += 1


def demand_ignoring_publisher() -> CallbackPublisher:
    """Rules 1.1, 3.6: ``request(n)`` sends ``0..n`` at once (one more than asked), even after cancel."""
    return subscription_publisher(_DemandIgnoring)


class AsyncDemandIgnoringPublisher(flow.Publisher[int]):
    """Rules 1.1, 1.3, 3.12: each of the first two requests floods ``on_next`` from ``pool`` threads.

    Each flood sends ``0..min(n, FLOOD_LIMIT)``, every element in a task of
    its own, so the subscriber is called concurrently and beyond demand for
    small ``n``. The limit keeps two floods (22 elements) inside the test
    subscriber's buffer (32). Exceptions from ``on_next`` are swallowed, as
    in the upstream self-test.
    """

    FLOOD_LIMIT = 10

    def __init__(self, pool: Executor) -> None:
        self._execute = as_execute(pool)
        self._floods = itertools.count()

    def subscribe(self, subscriber: flow.Subscriber[int]) -> None:
        publisher = self

        class Flooding(NoopSubscription):
            def request(self, n: int) -> None:
                while next(publisher._floods) < 2:
                    publisher._try_execute(lambda n=n: publisher._flood(subscriber, n))  # type: ignore[misc]

        subscriber.on_subscribe(Flooding())

    def _try_execute(self, task: Callable[[], None]) -> bool:
        try:
            self._execute(task)
        except RuntimeError:  # the pool was shut down: the test is over
            return False
        return True

    def _flood(self, subscriber: flow.Subscriber[int], n: int) -> None:
        for i in range(min(n, self.FLOOD_LIMIT) + 1):
            if not self._try_execute(lambda i=i: self._send(subscriber, i)):  # type: ignore[misc]
                return

    @staticmethod
    def _send(subscriber: flow.Subscriber[int], element: int) -> None:
        try:
            subscriber.on_next(element)
        except Exception:  # e.g. the test subscriber's buffer overflowing: not what these tests look at
            return


class ConcurrentSignallingPublisher(flow.Publisher[int]):
    """Rule 1.3: each request starts signalling tasks on ``pool`` (ten in all), which call ``on_next`` at once.

    ``start`` makes the tasks wait for each other, so that they signal concurrently.
    """

    SIGNALLERS = 10

    def __init__(self, pool: Executor) -> None:
        self._execute = as_execute(pool)
        self._started = itertools.count()
        self._start = threading.Barrier(2)

    def subscribe(self, subscriber: flow.Subscriber[int]) -> None:
        publisher = self

        class Signalling(NoopSubscription):
            def request(self, n: int) -> None:
                while next(publisher._started) < publisher.SIGNALLERS:
                    publisher._execute(lambda n=n: publisher._signal(subscriber, n))  # type: ignore[misc]

        subscriber.on_subscribe(Signalling())

    def _signal(self, subscriber: flow.Subscriber[int], n: int) -> None:
        with contextlib.suppress(threading.BrokenBarrierError):  # a lone signaller signals anyway
            self._start.wait(1)
        for i in range(n):
            subscriber.on_next(i)


class _SynchronousCompleting(NoopSubscription):
    def __init__(self, subscriber: flow.Subscriber[int]) -> None:
        self.subscriber = subscriber
        self.element = 0

    def request(self, n: int) -> None:
        for _ in range(n):
            self.subscriber.on_next(self.element)
            self.element += 1
        self.subscriber.on_complete()


def synchronous_completing_publisher() -> CallbackPublisher:
    """A correct-enough publisher for rule 1.3: ``request(n)`` sends ``n`` elements and ``on_complete``, inline."""
    return subscription_publisher(_SynchronousCompleting)


class _NeverCompleting(NoopSubscription):
    def __init__(self, subscriber: flow.Subscriber[int]) -> None:
        self.subscriber = subscriber
        self.element = 0

    def request(self, n: int) -> None:
        for _ in range(n):
            self.subscriber.on_next(self.element)
            self.element += 1


def never_completing_publisher() -> CallbackPublisher:
    """Rule 1.5: sends what is requested, inline, and never ``on_complete``."""
    return subscription_publisher(_NeverCompleting)


def eager_on_complete_publisher() -> CallbackPublisher:
    """Rule 1.9: ``on_complete`` without ``on_subscribe`` first."""
    return CallbackPublisher(lambda subscriber: subscriber.on_complete())


def empty_publisher() -> CallbackPublisher:
    """An empty publisher that completes synchronously inside ``subscribe``, after ``on_subscribe``."""

    def subscribe(subscriber: flow.Subscriber[int]) -> None:
        subscriber.on_subscribe(NoopSubscription())
        subscriber.on_complete()

    return CallbackPublisher(subscribe)


class _CompletingButServing(NoopSubscription):
    def __init__(self, subscriber: flow.Subscriber[int]) -> None:
        self.subscriber = subscriber
        self.completed = False

    def request(self, n: int) -> None:
        self.subscriber.on_next(0)
        if not self.completed:
            self.completed = True
            self.subscriber.on_complete()


def completing_but_serving_publisher() -> CallbackPublisher:
    """Rule 1.7: completes after the first element, then sends one more per request."""
    return subscription_publisher(_CompletingButServing)


def doing_nothing_publisher() -> CallbackPublisher:
    """Rules 1.9: ``subscribe`` neither calls ``on_subscribe`` nor raises, even for ``None``."""
    return CallbackPublisher(lambda subscriber: None)


def busy_failed_publisher() -> CallbackPublisher:
    """A correct failed publisher: ``on_subscribe``, then ``on_error`` (rules 1.4, 1.9)."""

    def subscribe(subscriber: flow.Subscriber[int]) -> None:
        subscriber.on_subscribe(NoopSubscription())
        subscriber.on_error(RuntimeError("Sorry, I'm busy now. Call me later."))

    return CallbackPublisher(subscribe)


def silent_failed_publisher() -> CallbackPublisher:
    """Rule 1.9: the failed publisher calls ``on_subscribe`` and never ``on_error``."""
    return noop_publisher()


def throwing_failed_publisher() -> CallbackPublisher:
    """Rule 1.4: the failed publisher raises from ``subscribe`` instead of signalling ``on_error``."""

    def subscribe(subscriber: flow.Subscriber[int]) -> None:
        raise RuntimeError("It is not valid to throw here!")

    return CallbackPublisher(subscribe)


class MultiSubscribersPublisher(flow.Publisher[int]):
    """Serves ``elements`` in all to any number of subscribers; with ``blow_up``, every subscriber
    after the first gets ``on_error(RuntimeError("Unexpected additional subscriber"))`` (rule 1.11)."""

    def __init__(self, elements: int, *, blow_up: bool) -> None:
        self._blow_up = blow_up
        self._lock = threading.Lock()
        self._source = elements  # guarded by self._lock; the stream completes below zero
        self._subscriptions: list[flow.Subscription] = []  # guarded by self._lock

    def subscribe(self, subscriber: flow.Subscriber[int]) -> None:
        publisher = self

        class Cancelable(flow.Subscription):
            def __init__(self) -> None:
                self.subscriber: flow.Subscriber[int] | None = subscriber
                self.cancelled = False

            def request(self, n: int) -> None:
                for i in range(n):
                    target = self.subscriber
                    if self.cancelled or target is None:
                        return
                    with publisher._lock:
                        left = publisher._source
                        publisher._source -= 1
                    if left < 0:
                        self.cancelled = True
                        target.on_complete()
                    else:
                        target.on_next(i)

            def cancel(self) -> None:
                self.cancelled = True
                self.subscriber = None
                with publisher._lock:
                    if self in publisher._subscriptions:
                        publisher._subscriptions.remove(self)

        subscription = Cancelable()
        subscriber.on_subscribe(subscription)
        with self._lock:
            refused = self._blow_up and bool(self._subscriptions)
            if not refused:
                self._subscriptions.append(subscription)
        if refused:
            subscriber.on_error(RuntimeError("Unexpected additional subscriber"))


class _RandomElements(SubscriberSubscription):
    def request(self, n: int) -> None:
        for _ in range(n):
            self.subscriber.on_next(random.getrandbits(31))


def random_elements_publisher() -> CallbackPublisher:
    """Rule 1.11 (multicast): every subscriber gets different, random elements."""
    return subscription_publisher(_RandomElements)


class _NextOnRequest(SubscriberSubscription):
    def request(self, n: int) -> None:
        self.subscriber.on_next(0)  # inside request: recursion without bound


def recursing_publisher() -> CallbackPublisher:
    """Rule 3.3: ``request`` calls ``on_next`` inline, so ``on_next -> request -> on_next`` recurses."""
    return subscription_publisher(_NextOnRequest)


class _ErrorOnCancel(SubscriberSubscription):
    def cancel(self) -> None:
        self.subscriber.on_error(TestException())


def error_on_cancel_publisher() -> CallbackPublisher:
    """Rule 3.7: ``cancel`` signals ``on_error``."""
    return subscription_publisher(_ErrorOnCancel)


class _RejectingNonPositive(SubscriberSubscription):
    def request(self, n: int) -> None:
        if n <= 0:
            self.subscriber.on_error(ValueError("Illegal request value detected!"))


def rejecting_non_positive_publisher() -> CallbackPublisher:
    """A correct rule 3.9 answer, with a message of its own: ``request(n <= 0)`` signals ``on_error(ValueError)``."""
    return subscription_publisher(_RejectingNonPositive)


class ReferenceHoldingPublisher(flow.Publisher[int]):
    """Rule 3.13: keeps its last subscriber after ``cancel``; ``request(n)`` sends ``n`` copies of ``n``."""

    def __init__(self) -> None:
        self.kept: flow.Subscriber[int] | None = None

    def subscribe(self, subscriber: flow.Subscriber[int]) -> None:
        self.kept = subscriber

        class Sending(NoopSubscription):
            def request(self, n: int) -> None:
                for _ in range(n):
                    subscriber.on_next(n)

        subscriber.on_subscribe(Sending())


class LateLettingGoPublisher(flow.Publisher[int]):
    """Rule 3.13, kept: lets go of its subscriber at the ``at``-th call its canceller's thread makes after ``cancel``.

    The subscriber is then freed on that thread, wherever that call is: inside
    the TCK's own wait for it, for one ``at``. ``request(n)`` sends ``n``
    copies of ``n``. ``let_go`` is set once it has let go.
    """

    def __init__(self, at: int) -> None:
        self.at = at
        self.kept: flow.Subscriber[int] | None = None
        self.let_go = threading.Event()

    def subscribe(self, subscriber: flow.Subscriber[int]) -> None:
        self.kept = subscriber
        subscriber.on_subscribe(_LettingGoLater(self))

    def count_calls(self, frame: FrameType, event: str, arg: object) -> None:
        """A profile function: lets go at the ``at``-th call, then profiles no more."""
        if event in ("call", "c_call"):
            self.at -= 1
            if self.at <= 0:
                sys.setprofile(None)
                self.kept = None  # the subscriber's last reference: freed here, on this thread
                self.let_go.set()


class _LettingGoLater(NoopSubscription):
    def __init__(self, publisher: LateLettingGoPublisher) -> None:
        self.publisher = publisher

    def request(self, n: int) -> None:
        subscriber = self.publisher.kept
        if subscriber is not None:
            for _ in range(n):
                subscriber.on_next(n)

    def cancel(self) -> None:
        sys.setprofile(self.publisher.count_calls)


class _OverflowingDemand(NoopSubscription):
    # Java's long wraps at 2**63; here demand above 2**63 - 1 stands for it.
    def __init__(self, subscriber: flow.Subscriber[int], publisher: DemandCountingPublisher) -> None:
        self.subscriber = subscriber
        self.publisher = publisher

    def request(self, n: int) -> None:
        self.publisher.demand += n
        if self.publisher.demand > LONG_MAX:
            self.subscriber.on_error(RuntimeError("Illegally signalling onError (violates rule 3.17)"))
        else:
            self.subscriber.on_next(0)


class _ErrorAtMaxDemand(_OverflowingDemand):
    def request(self, n: int) -> None:
        self.publisher.demand += n
        if self.publisher.demand == LONG_MAX:
            self.subscriber.on_error(
                RuntimeError(
                    "Illegally signalling onError too soon! Cumulative demand equal to Long.MAX_VALUE is legal."
                )
            )
        self.subscriber.on_next(0)


class DemandCountingPublisher(flow.Publisher[int]):
    """Rule 3.17: sums demand across its subscriptions without saturating at ``2**63 - 1``.

    ``fail_at_max``: signals ``on_error`` as soon as the sum reaches
    ``2**63 - 1`` (and still sends an element); otherwise once it exceeds it.
    Each request otherwise sends one ``0``.
    """

    def __init__(self, *, fail_at_max: bool) -> None:
        self.demand = 0
        self._subscription = _ErrorAtMaxDemand if fail_at_max else _OverflowingDemand

    def subscribe(self, subscriber: flow.Subscriber[int]) -> None:
        subscriber.on_subscribe(self._subscription(subscriber, self))


class UnboundedSynchronousPublisher(flow.Publisher[int]):
    """A correct publisher for rule 3.17: the first request sends elements inline until cancelled.

    ``sent`` counts the elements sent.
    """

    def __init__(self) -> None:
        self.sent = 0

    def subscribe(self, subscriber: flow.Subscriber[int]) -> None:
        publisher = self

        class Unbounded(flow.Subscription):
            started = False
            cancelled = False

            def request(self, n: int) -> None:
                if not self.started:
                    self.started = True
                    while not self.cancelled:
                        subscriber.on_next(publisher.sent)
                        publisher.sent += 1

            def cancel(self) -> None:
                self.cancelled = True

        subscriber.on_subscribe(Unbounded())


# --- Subscribers of the upstream self-tests ----------------------------------------------


class NoopSubscriber(flow.Subscriber[int]):
    """Rules 2.1, 2.13: ignores every signal, ``None`` included, and never requests."""

    def on_subscribe(self, subscription: flow.Subscription) -> None:
        return None

    def on_next(self, item: int) -> None:
        return None

    def on_error(self, error: BaseException) -> None:
        return None

    def on_complete(self) -> None:
        return None


class KeepSubscriptionSubscriber(NoopSubscriber):
    """A noop subscriber that keeps its (last) subscription."""

    def __init__(self) -> None:
        self.subscription: flow.Subscription | None = None

    def on_subscribe(self, subscription: flow.Subscription) -> None:
        self.subscription = subscription


def call_subscription(subscription: flow.Subscription | None, call: str) -> None:
    """``request(1)`` or ``cancel()`` on ``subscription``."""
    assert subscription is not None
    if call == "request":
        subscription.request(1)
    else:
        subscription.cancel()


class TerminalCallSubscriber(KeepSubscriptionSubscriber):
    """Rule 2.3: calls ``call`` (``"request"``/``"cancel"``) on its subscription from ``signal``
    (``"on_complete"``/``"on_error"``)."""

    def __init__(self, call: str, signal: str) -> None:
        super().__init__()
        self.call = call
        self.signal = signal

    def on_error(self, error: BaseException) -> None:
        if self.signal == "on_error":
            call_subscription(self.subscription, self.call)

    def on_complete(self) -> None:
        if self.signal == "on_complete":
            call_subscription(self.subscription, self.call)


class UnrelatedTerminalCall(NoopSubscriber):
    """Another subscriber whose ``signal`` calls ``call`` on a subscription it does not own."""

    def __init__(self, subscription: flow.Subscription, call: str, signal: str) -> None:
        self.subscription = subscription
        self.call = call
        self.signal = signal

    def fire(self) -> None:
        """Call its own ``signal`` method (the call is in an ``on_complete``/``on_error``, but not the TCK's)."""
        if self.signal == "on_complete":
            self.on_complete()
        else:
            self.on_error(TestException())

    def on_error(self, error: BaseException) -> None:
        call_subscription(self.subscription, self.call)

    def on_complete(self) -> None:
        call_subscription(self.subscription, self.call)


class UnrelatedTerminalCallSubscriber(NoopSubscriber):
    """A correct subscriber for rule 2.3: from ``on_subscribe`` an unrelated ``on_complete``/``on_error``
    calls ``request``/``cancel`` on the subscription."""

    def __init__(self, call: str, signal: str) -> None:
        self.call = call
        self.signal = signal

    def on_subscribe(self, subscription: flow.Subscription) -> None:
        UnrelatedTerminalCall(subscription, self.call, self.signal).fire()


class RequestingEverySubscriptionSubscriber(KeepSubscriptionSubscriber):
    """Rule 2.5: requests from every subscription it is given, a second one too."""

    def on_subscribe(self, subscription: flow.Subscription) -> None:
        super().on_subscribe(subscription)
        subscription.request(1)


class CancellingEverySubscriptionSubscriber(KeepSubscriptionSubscriber):
    """Cancels every subscription it is given (the first too); counts down ``completed`` on ``on_complete``."""

    def __init__(self) -> None:
        super().__init__()
        self.completed = threading.Event()

    def on_subscribe(self, subscription: flow.Subscription) -> None:
        super().on_subscribe(subscription)
        subscription.cancel()

    def on_complete(self) -> None:
        self.completed.set()


class RequestingSubscriber(NoopSubscriber):
    """Requests one element in ``on_subscribe`` and, with ``more``, one per element."""

    def __init__(self, *, more: bool = False) -> None:
        self.more = more
        self.subscription: flow.Subscription | None = None

    def on_subscribe(self, subscription: flow.Subscription) -> None:
        self.subscription = subscription
        subscription.request(1)

    def on_next(self, item: int) -> None:
        if self.more and self.subscription is not None:
            self.subscription.request(1)


class ThrowingOnErrorSubscriber(RequestingSubscriber):
    """Rules 2.10, 2.13: ``on_error`` raises (caused by the error it received)."""

    def on_error(self, error: BaseException) -> None:
        raise RuntimeError("Wrong, don't do this!") from error


# --- Whitebox subscribers of the upstream self-tests -----------------------------------


class ProbedSubscriber(flow.Subscriber[int]):
    """The simplest subscriber that reports every signal to its whitebox probe.

    Subclasses break it in one place.
    """

    def __init__(self, probe: WhiteboxSubscriberProbe[int]) -> None:
        self.probe = probe
        self.subscription: flow.Subscription | None = None

    def on_subscribe(self, subscription: flow.Subscription) -> None:
        self.subscription = subscription
        self.probe.register_on_subscribe(SubscriptionPuppet(subscription))

    def on_next(self, item: int) -> None:
        self.probe.register_on_next(item)

    def on_error(self, error: BaseException) -> None:
        self.probe.register_on_error(error)

    def on_complete(self) -> None:
        self.probe.register_on_complete()


class DeafPuppetSubscriber(ProbedSubscriber):
    """Whitebox instrumentation bug: the puppet's ``trigger_request`` does nothing."""

    def on_subscribe(self, subscription: flow.Subscription) -> None:
        self.subscription = subscription

        class Deaf(SubscriptionPuppet):
            def trigger_request(self, elements: int) -> None:
                return None

        self.probe.register_on_subscribe(Deaf(subscription))


class TerminalCallProbedSubscriber(ProbedSubscriber):
    """Rule 2.3: calls ``call`` on its subscription from ``signal``; reports ``on_complete`` only."""

    def __init__(self, probe: WhiteboxSubscriberProbe[int], call: str, signal: str) -> None:
        super().__init__(probe)
        self.call = call
        self.signal = signal

    def on_error(self, error: BaseException) -> None:
        if self.signal == "on_error":
            call_subscription(self.subscription, self.call)

    def on_complete(self) -> None:
        if self.signal == "on_complete":
            call_subscription(self.subscription, self.call)
        self.probe.register_on_complete()


class UnrelatedTerminalCallProbedSubscriber(ProbedSubscriber):
    """Correct for rule 2.3: an unrelated ``on_complete``/``on_error`` calls its subscription from ``on_subscribe``."""

    def __init__(self, probe: WhiteboxSubscriberProbe[int], call: str, signal: str) -> None:
        super().__init__(probe)
        self.call = call
        self.signal = signal

    def on_subscribe(self, subscription: flow.Subscription) -> None:
        super().on_subscribe(subscription)
        UnrelatedTerminalCall(subscription, self.call, self.signal).fire()


class RequestingEverySubscriptionProbedSubscriber(ProbedSubscriber):
    """Rule 2.5: requests from every subscription, a second one too, and never cancels it."""

    def on_subscribe(self, subscription: flow.Subscription) -> None:
        super().on_subscribe(subscription)
        subscription.request(1)


class ThrowingAfterCancelProbedSubscriber(ProbedSubscriber):
    """Rule 2.8: ``on_next`` after its own ``cancel`` raises."""

    def on_subscribe(self, subscription: flow.Subscription) -> None:
        self.subscription = subscription
        cancelled = threading.Event()
        self.cancelled = cancelled

        class Cancelling(SubscriptionPuppet):
            def signal_cancel(self) -> None:
                cancelled.set()
                super().signal_cancel()

        self.probe.register_on_subscribe(Cancelling(subscription))

    def on_next(self, item: int) -> None:
        if self.cancelled.is_set():
            raise RuntimeError("But I thought it's cancelled!")
        self.probe.register_on_next(item)


class DelayedDemandProbedSubscriber(ProbedSubscriber):
    """A correct subscriber that requests and cancels later, through ``schedule``; ``on_next`` raises if
    it arrives before a request was made (rules 1.1, 3.8).

    ``one_at_a_time``: ``trigger_request(n)`` is served by ``n`` requests of one,
    each made after the previous element arrived.
    """

    def __init__(
        self,
        probe: WhiteboxSubscriberProbe[int],
        schedule: Callable[[Callable[[], None]], None],
        *,
        one_at_a_time: bool = False,
    ) -> None:
        super().__init__(probe)
        self.schedule = schedule
        self.one_at_a_time = one_at_a_time
        self.lock = threading.Lock()
        self.demand_requested = False  # guarded by self.lock
        self.outstanding = 0  # guarded by self.lock

    def _request_later(self, n: int) -> None:
        def request() -> None:
            with self.lock:
                self.demand_requested = True
            assert self.subscription is not None
            self.subscription.request(n)

        self.schedule(request)

    def on_subscribe(self, subscription: flow.Subscription) -> None:
        self.subscription = subscription
        subscriber = self

        class Later(SubscriberPuppet):
            def trigger_request(self, elements: int) -> None:
                if subscriber.one_at_a_time:
                    with subscriber.lock:
                        subscriber.outstanding += elements
                    subscriber._request_later(1)
                else:
                    subscriber._request_later(elements)

            def signal_cancel(self) -> None:
                subscriber.schedule(subscription.cancel)  # later too, so it cannot overtake a request

        self.probe.register_on_subscribe(Later())

    def on_next(self, item: int) -> None:
        with self.lock:
            requested = self.demand_requested
            if self.one_at_a_time:
                self.demand_requested = False
                self.outstanding -= 1
                more = self.outstanding > 0
        if not requested:
            raise RuntimeError("onNext signalled without demand!")
        if self.one_at_a_time and more:
            self._request_later(1)
        self.probe.register_on_next(item)


class ForgetfulOnCompleteProbedSubscriber(ProbedSubscriber):
    """Whitebox instrumentation bug: ``on_complete`` does not call ``register_on_complete``."""

    def on_complete(self) -> None:
        return None


class UnregisteredProbedSubscriber(ProbedSubscriber):
    """Whitebox instrumentation bug: ``on_subscribe`` does not call ``register_on_subscribe``."""

    def on_subscribe(self, subscription: flow.Subscription) -> None:
        self.subscription = subscription


class ThrowingOnErrorProbedSubscriber(ProbedSubscriber):
    """Rules 2.10, 2.13: ``on_error`` raises (caused by the error it received)."""

    def on_error(self, error: BaseException) -> None:
        raise RuntimeError("Wrong, don't do this!") from error


# --- Processors of the upstream self-tests ---------------------------------------------


class NoopProcessor(NoopSubscriber, flow.Processor[int, int]):
    """Rules 1.4, 4.2: ignores upstream, and gives subscribers a subscription that does nothing."""

    def subscribe(self, subscriber: flow.Subscriber[int]) -> None:
        subscriber.on_subscribe(NoopSubscription())


class _ZeroOnRequest(SubscriberSubscription):
    def request(self, n: int) -> None:
        self.subscriber.on_next(0)


class ErrorIgnoringProcessor(NoopProcessor):
    """Rule 1.4: requests one element from upstream, answers every downstream request with ``0``,
    and never passes an upstream ``on_error`` on."""

    def subscribe(self, subscriber: flow.Subscriber[int]) -> None:
        subscriber.on_subscribe(_ZeroOnRequest(subscriber))

    def on_subscribe(self, subscription: flow.Subscription) -> None:
        subscription.request(1)


class _TenOnRequest(SubscriberSubscription):
    def request(self, n: int) -> None:
        for i in range(10):
            self.subscriber.on_next(i)


def ten_per_request_publisher() -> CallbackPublisher:
    """A helper publisher that sends ``0..9`` inline for every request, whatever its size."""
    return subscription_publisher(_TenOnRequest)


class _Hanging(flow.Publisher[int]):
    """Never returns from ``subscribe`` until released: a test of it can only end by a timeout."""

    def __init__(self, release: threading.Event) -> None:
        self.release = release

    def subscribe(self, subscriber: flow.Subscriber[int]) -> None:
        self.release.wait()


hanging_release = threading.Event()
"""Set by a test when it is done with :func:`hanging_publisher`, so its abandoned threads end."""


def hanging_publisher(elements: int) -> flow.Publisher[int]:
    return _Hanging(hanging_release)


# --- Factories and publishers that misbehave outside the rules: for the command line --------


def hanging_factory(*args: object) -> flow.Publisher[int]:
    """Does not return until :data:`hanging_release` is set: the up-front check can only end by a timeout."""
    hanging_release.wait()
    return RangePublisher(0, 1)


def exiting_factory(*args: object) -> flow.Publisher[int]:
    """Raises ``SystemExit(0)``, as a factory calling ``sys.exit()`` would."""
    raise SystemExit(0)


class _RaisingOnSubscribe(flow.Publisher[int]):
    def __init__(self, raised: Callable[[], BaseException]) -> None:
        self.raised = raised

    def subscribe(self, subscriber: flow.Subscriber[int]) -> None:
        raise self.raised()


def exiting_publisher(elements: int) -> flow.Publisher[int]:
    """``subscribe`` raises ``SystemExit(0)``: every test of it ends that way."""
    return _RaisingOnSubscribe(lambda: SystemExit(0))


def exiting_with_message_publisher(elements: int) -> flow.Publisher[int]:
    """``subscribe`` raises ``SystemExit("stopped")`` (exit status 1)."""
    return _RaisingOnSubscribe(lambda: SystemExit("stopped"))


UNPRINTABLE = "NUL \x00 ESC \x1b[31m BEL \x07 surrogate \ud800 noncharacter \ufffe end"
"""Characters that XML 1.0 does not allow, that UTF-8 cannot encode, or that act on a terminal."""


def unprintable_publisher(elements: int) -> flow.Publisher[int]:
    """``subscribe`` raises ``ValueError(UNPRINTABLE)``."""
    return _RaisingOnSubscribe(lambda: ValueError(UNPRINTABLE))


_interrupting_calls = itertools.count(1)


def interrupting_factory(elements: int) -> flow.Publisher[int]:
    """A range publisher from the first two calls (the up-front check, the first test), then ``KeyboardInterrupt``."""
    if next(_interrupting_calls) > 2:
        raise KeyboardInterrupt
    return RangePublisher(0, elements)
