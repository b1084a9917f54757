"""flowpy.subscribers under the blackbox and whitebox subscriber verifications."""

from __future__ import annotations

from typing import Any

from flowpy import flow
from flowpy.subscribers import AsyncSubscriber, LambdaSubscriber, SyncSubscriber
from flowpy.tck import (
    SubscriberBlackboxVerification,
    SubscriberWhiteboxVerification,
    SubscriptionPuppet,
    TestEnvironment,
    WhiteboxSubscriberProbe,
)


class _Fast:
    def create_test_environment(self) -> TestEnvironment:
        return TestEnvironment(1000, 30, 10)


class _Probing:
    """Reports the signals a subscriber received to a whitebox probe, after handling them."""

    probe: WhiteboxSubscriberProbe[Any]

    def on_subscribe(self, subscription: flow.Subscription) -> None:
        super().on_subscribe(subscription)  # type: ignore[misc]
        self.probe.register_on_subscribe(SubscriptionPuppet(subscription))

    def on_next(self, item: Any) -> None:
        super().on_next(item)  # type: ignore[misc]
        self.probe.register_on_next(item)

    def on_error(self, error: BaseException) -> None:
        super().on_error(error)  # type: ignore[misc]
        self.probe.register_on_error(error)

    def on_complete(self) -> None:
        super().on_complete()  # type: ignore[misc]
        self.probe.register_on_complete()


# --- SyncSubscriber ------------------------------------------------------------------


class Counting(SyncSubscriber[int]):
    def __init__(self) -> None:
        super().__init__()
        self.total = 0

    def when_next(self, item: int) -> bool:
        self.total += item
        return True


class ProbedCounting(_Probing, Counting):
    def __init__(self, probe: WhiteboxSubscriberProbe[int]) -> None:
        super().__init__()
        self.probe = probe


class TestSyncSubscriberBlackbox(_Fast, SubscriberBlackboxVerification[int]):
    def create_subscriber(self) -> flow.Subscriber[int]:
        return Counting()


class TestSyncSubscriberWhitebox(_Fast, SubscriberWhiteboxVerification[int]):
    def create_subscriber(self, probe: WhiteboxSubscriberProbe[int]) -> flow.Subscriber[int]:
        return ProbedCounting(probe)


# --- AsyncSubscriber -----------------------------------------------------------------


class Accumulating(AsyncSubscriber[int]):
    def __init__(self, executor: Any) -> None:
        super().__init__(executor)
        self.total = 0
        self.outcome: BaseException | str | None = None

    def when_next(self, item: int) -> bool:
        self.total += item
        return True

    def when_complete(self) -> None:
        self.outcome = "complete"

    def when_error(self, error: BaseException) -> None:
        self.outcome = error


class ProbedAccumulating(_Probing, Accumulating):
    def __init__(self, executor: Any, probe: WhiteboxSubscriberProbe[int]) -> None:
        super().__init__(executor)
        self.probe = probe


class TestAsyncSubscriberBlackbox(_Fast, SubscriberBlackboxVerification[int]):
    def create_subscriber(self) -> flow.Subscriber[int]:
        return Accumulating(self.helper_executor())


class TestAsyncSubscriberWhitebox(_Fast, SubscriberWhiteboxVerification[int]):
    def create_subscriber(self, probe: WhiteboxSubscriberProbe[int]) -> flow.Subscriber[int]:
        return ProbedAccumulating(self.helper_executor(), probe)


# --- LambdaSubscriber ----------------------------------------------------------------


class ProbedLambda(_Probing, LambdaSubscriber[int]):
    def __init__(self, probe: WhiteboxSubscriberProbe[int]) -> None:
        super().__init__(lambda item: None, lambda error: None, prefetch=4)
        self.probe = probe


class TestLambdaSubscriberBlackbox(_Fast, SubscriberBlackboxVerification[int]):
    def create_subscriber(self) -> flow.Subscriber[int]:
        return LambdaSubscriber(lambda item: None, lambda error: None, prefetch=4)


class TestLambdaSubscriberWhitebox(_Fast, SubscriberWhiteboxVerification[int]):
    def create_subscriber(self, probe: WhiteboxSubscriberProbe[int]) -> flow.Subscriber[int]:
        return ProbedLambda(probe)
