"""defer and using: publishers (and resources) made per subscriber."""

from __future__ import annotations

from typing import Any

import pytest

from flowpy import operators
from flowpy.executors import direct_executor
from flowpy.flowable import Flowable
from flowpy.sources import RangePublisher, error, just
from flowpy.submission import SubmissionPublisher
from flowpy.testing import TestSubscriber
from tests.operators.conftest import Spy

# --- defer ------------------------------------------------------------------------------


def test_defer_calls_the_factory_once_per_subscriber() -> None:
    calls: list[int] = []

    def factory() -> Any:
        calls.append(len(calls))
        return just(len(calls))

    deferred = Flowable.defer(factory)
    assert calls == []
    deferred.test().assert_result(1)
    deferred.test().assert_result(2)


@pytest.mark.parametrize("result", ["raises", "not a publisher"])
def test_defer_bad_factory_fails_the_subscriber_after_on_subscribe(result: str) -> None:
    def factory() -> Any:
        if result == "raises":
            raise LookupError("no publisher")
        return 42

    subscriber = Flowable.defer(factory).test()
    subscriber.assert_subscribed().assert_error(LookupError if result == "raises" else TypeError)
    if result == "not a publisher":
        assert str(subscriber.errors[0]) == "defer factory result must be a Publisher, got 42"


def test_defer_keyboard_interrupt_in_the_factory_fails_the_subscriber_then_propagates() -> None:
    def factory() -> Any:
        raise KeyboardInterrupt

    subscriber: TestSubscriber[Any] = TestSubscriber()
    with pytest.raises(KeyboardInterrupt):
        operators.defer(factory).subscribe(subscriber)
    subscriber.assert_error(KeyboardInterrupt)


def test_defer_refuses_a_factory_that_is_not_callable() -> None:
    with pytest.raises(TypeError, match=r"^factory must be callable, got 1$"):
        operators.defer(1)  # type: ignore[arg-type]


# --- using ----------------------------------------------------------------------------------


class Resource:
    def __init__(self, name: str, log: list[str]) -> None:
        self.name = name
        self.log = log
        log.append(f"open {name}")

    def close(self) -> None:
        self.log.append(f"close {self.name}")


class Logging(TestSubscriber[Any]):
    def __init__(self, log: list[str], initial_request: int = 2**63 - 1) -> None:
        super().__init__(initial_request)
        self.log = log

    def on_complete(self) -> None:
        self.log.append("on_complete")
        super().on_complete()

    def on_error(self, error: BaseException) -> None:
        self.log.append("on_error")
        super().on_error(error)


def _using(log: list[str], publisher: Any = None, disposer: Any = None) -> Any:
    return operators.using(
        lambda: Resource("r", log),
        lambda resource: just(resource.name) if publisher is None else publisher,
        disposer or (lambda resource: resource.close()),
    )


def test_using_disposes_of_the_resource_before_the_completion_is_passed_on() -> None:
    log: list[str] = []
    subscriber = Logging(log)
    _using(log).subscribe(subscriber)
    subscriber.assert_result("r")
    assert log == ["open r", "close r", "on_complete"]


def test_using_disposes_of_the_resource_before_the_error_is_passed_on() -> None:
    log: list[str] = []
    failure = RuntimeError("x")
    subscriber = Logging(log)
    _using(log, error(failure)).subscribe(subscriber)
    subscriber.assert_error(failure)
    assert log == ["open r", "close r", "on_error"]


def test_using_disposes_of_the_resource_once_at_cancel_before_the_upstream_is_cancelled() -> None:
    log: list[str] = []
    source = Spy(RangePublisher(0, 10))
    source_cancelled: list[bool] = []

    def dispose(resource: Resource) -> None:
        source_cancelled.append(source.subscription.cancelled.is_set())
        resource.close()

    subscriber = Logging(log, initial_request=1)
    _using(log, source, dispose).subscribe(subscriber)
    subscriber.cancel()
    subscriber.cancel()
    assert log == ["open r", "close r"]
    assert source_cancelled == [False]
    assert source.subscription.cancelled.is_set()


def test_using_each_subscriber_gets_its_own_resource() -> None:
    log: list[str] = []
    names = iter("ab")
    publisher = operators.using(
        lambda: Resource(next(names), log), lambda resource: just(resource.name), lambda resource: resource.close()
    )
    Flowable.from_publisher(publisher).test().assert_result("a")
    Flowable.from_publisher(publisher).test().assert_result("b")
    assert log == ["open a", "close a", "open b", "close b"]


def test_using_raising_resource_factory_fails_the_subscriber() -> None:
    bug = LookupError("no resource")

    def resource() -> Any:
        raise bug

    subscriber = Flowable.using(resource, lambda r: just(1), lambda r: pytest.fail("nothing to dispose of")).test()
    subscriber.assert_subscribed().assert_error(bug)


def test_using_raising_flowable_factory_disposes_of_the_resource_first() -> None:
    log: list[str] = []

    def factory(resource: Resource) -> Any:
        raise LookupError("no publisher")

    subscriber = Logging(log)
    operators.using(lambda: Resource("r", log), factory, lambda resource: resource.close()).subscribe(subscriber)
    subscriber.assert_error(LookupError)
    assert log == ["open r", "close r", "on_error"]


def test_using_raising_disposer_at_completion_fails_the_stream_instead() -> None:
    bug = OSError("close failed")

    def dispose(resource: Resource) -> None:
        raise bug

    log: list[str] = []
    subscriber = Logging(log)
    _using(log, disposer=dispose).subscribe(subscriber)
    subscriber.assert_failure(bug, "r")


def test_using_raising_disposer_at_an_error_is_signalled_with_the_error_as_context() -> None:
    failure, bug = RuntimeError("source failed"), OSError("close failed")

    def dispose(resource: Resource) -> None:
        raise bug

    log: list[str] = []
    subscriber = Logging(log)
    _using(log, error(failure), dispose).subscribe(subscriber)
    subscriber.assert_error(bug)
    assert bug.__context__ is failure


def test_using_raising_disposer_at_cancel_is_reported(caplog: pytest.LogCaptureFixture) -> None:
    def dispose(resource: Resource) -> None:
        raise OSError("close failed")

    hot: SubmissionPublisher[int] = SubmissionPublisher(executor=direct_executor)
    subscriber = Flowable.using(lambda: "r", lambda r: hot, dispose).test()
    subscriber.cancel()
    assert "using's disposer" in caplog.text
    assert "close failed" in caplog.text
    subscriber.assert_no_errors().assert_not_complete()


def test_using_cancel_racing_the_completion_disposes_once() -> None:
    log: list[str] = []
    hot: SubmissionPublisher[str] = SubmissionPublisher(executor=direct_executor)
    subscriber = Logging(log)
    operators.using(lambda: Resource("r", log), lambda resource: hot, lambda resource: resource.close()).subscribe(
        subscriber
    )
    hot.close()
    subscriber.cancel()
    assert log == ["open r", "close r", "on_complete"]
