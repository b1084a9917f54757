"""Deliberately broken implementations, one defect each, that the TCK must catch."""

from __future__ import annotations

import threading
from typing import Any, TypeVar

from flowpy import flow
from tests.tck.reference import (
    IdentityProcessor,
    MulticastProcessor,
    RangePublisher,
    RangeSubscription,
    SyncSubscriber,
)

T = TypeVar("T")


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


class _Recursive(RangeSubscription):
    def request(self, n: int) -> None:
        # Emits inside request, even when called from on_next: unbounded recursion.
        for _ in range(n):
            subscriber = self.subscriber
            if subscriber is None or self.index == self.end:
                return
            self.index += 1
            subscriber.on_next(self.index - 1)


class RecursivePublisher(_CustomRange):
    """Rule 3.3: ``request`` calls ``on_next`` synchronously, recursing without bound."""

    subscription_class = _Recursive


class _IgnoringRequestZero(RangeSubscription):
    def request(self, n: int) -> None:
        if n > 0:
            super().request(n)


class SilentRequestZeroPublisher(_CustomRange):
    """Rule 3.9: ``request(0)`` and negative requests are silently ignored."""

    subscription_class = _IgnoringRequestZero


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


class _IgnoringCancel(RangeSubscription):
    def cancel(self) -> None:
        return None


class CancelIgnoringPublisher(_CustomRange):
    """Rules 1.8, 3.6: ``cancel`` does nothing, so later requests still emit."""

    subscription_class = _IgnoringCancel


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


class ReferenceKeepingPublisher(RangePublisher):
    """Rule 3.13: keeps every subscriber it ever had."""

    def __init__(self, start: int, count: int) -> None:
        super().__init__(start, count)
        self.everyone: list[flow.Subscriber[int]] = []

    def subscribe(self, subscriber: flow.Subscriber[int]) -> None:
        super().subscribe(subscriber)
        self.everyone.append(subscriber)


class NoneAcceptingPublisher(RangePublisher):
    """Rule 1.9: ``subscribe(None)`` returns normally."""

    def subscribe(self, subscriber: flow.Subscriber[int]) -> None:
        if subscriber is not None:
            super().subscribe(subscriber)


class WrongNoneErrorPublisher(RangePublisher):
    """Rule 1.9: ``subscribe(None)`` raises ValueError instead of TypeError."""

    def subscribe(self, subscriber: flow.Subscriber[int]) -> None:
        if subscriber is None:
            raise ValueError("no subscriber")
        super().subscribe(subscriber)


class SilentPublisher(flow.Publisher[int]):
    """Rule 1.9: never calls ``on_subscribe``."""

    def __init__(self, start: int = 0, count: int = 0) -> None:
        self.count = count

    def subscribe(self, subscriber: flow.Subscriber[int]) -> None:
        if subscriber is None:
            raise TypeError("subscriber must not be None")


class NeverCompletingPublisher(RangePublisher):
    """Rule 1.2/1.5: sends its elements but never ``on_complete``."""

    def subscribe(self, subscriber: flow.Subscriber[int]) -> None:
        class Mute(flow.Subscriber[int]):
            def on_subscribe(self, subscription: flow.Subscription) -> None:
                subscriber.on_subscribe(subscription)

            def on_next(self, item: int) -> None:
                subscriber.on_next(item)

            def on_error(self, error: BaseException) -> None:
                subscriber.on_error(error)

            def on_complete(self) -> None:
                return None

        super().subscribe(Mute() if subscriber is not None else subscriber)  # type: ignore[arg-type]


class ConcurrentPublisher(flow.Publisher[int]):
    """Rule 1.3: each requested element is signalled from a thread of its own, without waiting."""

    def __init__(self, count: int) -> None:
        self.count = count

    def subscribe(self, subscriber: flow.Subscriber[int]) -> None:
        if subscriber is None:
            raise TypeError("subscriber must not be None")
        lock = threading.Lock()
        state = {"index": 0, "done": False}

        def emit_one() -> None:
            with lock:
                if state["done"]:
                    return
                index = state["index"]
                state["index"] += 1
                state["done"] = index >= self.count
            if index < self.count:
                subscriber.on_next(index)
            else:
                subscriber.on_complete()

        class Subscription(flow.Subscription):
            def request(self, n: int) -> None:
                for _ in range(min(n, self_count + 1)):
                    threading.Thread(target=emit_one, daemon=True).start()

            def cancel(self) -> None:
                with lock:
                    state["done"] = True

        self_count = self.count
        subscriber.on_subscribe(Subscription())


class RaisingFailedPublisher(flow.Publisher[int]):
    """Rule 1.4/1.9: the failed publisher raises from ``subscribe`` instead of signalling ``on_error``."""

    def subscribe(self, subscriber: flow.Subscriber[int]) -> None:
        raise RuntimeError("cannot serve you")


class CompletingFailedPublisher(flow.Publisher[int]):
    """Rule 1.4: the failed publisher signals ``on_complete`` instead of ``on_error``."""

    def subscribe(self, subscriber: flow.Subscriber[int]) -> None:
        RangePublisher(0, 0).subscribe(subscriber)
        subscriber.on_complete()


# --- Subscribers ---------------------------------------------------------------------


class RequestInOnCompleteSubscriber(SyncSubscriber[T]):
    """Rule 2.3: calls ``request`` from ``on_complete``."""

    def on_complete(self) -> None:
        if self.subscription is not None:
            self.subscription.request(1)


class CancelInOnErrorSubscriber(SyncSubscriber[T]):
    """Rule 2.3: calls ``cancel`` from ``on_error``."""

    def on_error(self, error: BaseException) -> None:
        super().on_error(error)
        if self.subscription is not None:
            self.subscription.cancel()


class KeepsSecondSubscriptionSubscriber(SyncSubscriber[T]):
    """Rule 2.5: a second subscription replaces the first, and neither is cancelled."""

    def on_subscribe(self, subscription: flow.Subscription) -> None:
        if subscription is None:
            raise TypeError("subscription must not be None")
        self.subscription = subscription
        subscription.request(1)


class NoneAcceptingSubscriber(SyncSubscriber[T]):
    """Rule 2.13: ``on_next(None)`` returns normally."""

    def on_next(self, item: T) -> None:
        if item is not None:
            super().on_next(item)


class NeverRequestingSubscriber(SyncSubscriber[T]):
    """Rule 2.1: never signals demand."""

    def on_subscribe(self, subscription: flow.Subscription) -> None:
        if subscription is None:
            raise TypeError("subscription must not be None")
        self.subscription = subscription


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
