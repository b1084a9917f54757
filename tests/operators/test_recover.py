"""retry, retry_when, on_error_resume and on_error_return."""

from __future__ import annotations

from typing import Any

import pytest

from flowpy import operators
from flowpy.errors import MissingBackpressureError
from flowpy.flow import Publisher, Subscriber
from flowpy.flowable import Flowable
from flowpy.sources import empty, error, just
from flowpy.testing import TestSubscriber
from tests.operators.conftest import Attempts, Spy, StubSubscription, then_fail


def _fails(times: int, *then: int) -> Attempts:
    """A source that fails ``times`` times (each attempt emits 1 first), then emits ``then`` and completes."""
    return Attempts(*[then_fail([1], RuntimeError(f"attempt {n}")) for n in range(times)], just(*then))


# --- retry ---------------------------------------------------------------------------


def test_retry_resubscribes_until_the_source_succeeds() -> None:
    source = _fails(2, 7, 8)
    Flowable.from_publisher(source).retry().test().assert_result(1, 1, 7, 8)
    assert source.count == 3


def test_retry_n_subscribes_at_most_n_plus_one_times_then_passes_the_last_error() -> None:
    source = _fails(5, 7)
    subscriber = Flowable.from_publisher(source).retry(2).test()
    subscriber.assert_failure(RuntimeError, 1, 1, 1)
    assert str(subscriber.errors[0]) == "attempt 2"
    assert source.count == 3


def test_retry_zero_never_resubscribes() -> None:
    source = _fails(1, 7)
    Flowable.from_publisher(source).retry(0).test().assert_failure(RuntimeError, 1)
    assert source.count == 1


def test_retry_completion_is_passed_on_without_resubscribing() -> None:
    source = Attempts(just(1, 2))
    Flowable.from_publisher(source).retry(3).test().assert_result(1, 2)
    assert source.count == 1


def test_retry_predicate_decides_which_errors_are_retried() -> None:
    seen: list[BaseException] = []
    first, second = TimeoutError("transient"), KeyError("permanent")
    source = Attempts(then_fail([], first), then_fail([], second), just(9))

    def transient(error: BaseException) -> bool:
        seen.append(error)
        return isinstance(error, TimeoutError)

    Flowable.from_publisher(source).retry(predicate=transient).test().assert_error(second).assert_no_values()
    assert seen == [first, second]
    assert source.count == 2


def test_retry_predicate_is_not_asked_once_the_times_are_used_up() -> None:
    seen: list[BaseException] = []
    source = _fails(3)
    Flowable.from_publisher(source).retry(1, predicate=lambda e: seen.append(e) or True).test().assert_error(
        RuntimeError
    )
    assert len(seen) == 1


def test_retry_raising_predicate_fails_the_stream_with_the_source_error_as_context() -> None:
    cause = RuntimeError("source failed")
    bug = ValueError("predicate bug")

    def predicate(error: BaseException) -> bool:
        raise bug

    source = Attempts(then_fail([], cause), just(1))
    subscriber = Flowable.from_publisher(source).retry(predicate=predicate).test()
    subscriber.assert_error(bug)
    assert bug.__context__ is cause
    assert source.count == 1


def test_retry_keyboard_interrupt_from_predicate_ends_the_stream_then_propagates() -> None:
    def predicate(error: BaseException) -> bool:
        raise KeyboardInterrupt

    subscriber: TestSubscriber[Any] = TestSubscriber()
    with pytest.raises(KeyboardInterrupt):
        operators.retry(error(RuntimeError("x")), predicate=predicate).subscribe(subscriber)
    subscriber.assert_error(KeyboardInterrupt)


def test_retry_items_before_a_failure_are_delivered_again_by_a_cold_source() -> None:
    source = Attempts(then_fail([1, 2], RuntimeError("x")), just(1, 2, 3))
    Flowable.from_publisher(source).retry().test().assert_result(1, 2, 1, 2, 3)


@pytest.mark.parametrize(
    ("arguments", "exception", "message"),
    [
        ({"times": -1}, ValueError, r"^times must be non-negative, got -1$"),
        ({"times": True}, TypeError, r"^times must be an int, got True$"),
        ({"predicate": 3}, TypeError, r"^predicate must be callable or None, got 3$"),
    ],
)
def test_retry_bad_arguments_raise(arguments: dict[str, Any], exception: type[Exception], message: str) -> None:
    with pytest.raises(exception, match=message):
        operators.retry(just(1), **arguments)


# --- retry_when ------------------------------------------------------------------------


def test_retry_when_each_item_of_the_handler_resubscribes() -> None:
    seen: list[BaseException] = []
    source = _fails(2, 7)
    subscriber = Flowable.from_publisher(source).retry_when(lambda errors: errors.do_on_next(seen.append)).test()
    subscriber.assert_result(1, 1, 7)
    assert [str(e) for e in seen] == ["attempt 0", "attempt 1"]
    assert source.count == 3


def test_retry_when_completion_of_the_handler_completes_the_stream() -> None:
    source = _fails(5, 7)
    # The second failure is the last the handler passes on, and take completes right after it.
    Flowable.from_publisher(source).retry_when(lambda errors: errors.take(2)).test().assert_result(1, 1)
    assert source.count == 2


def test_retry_when_error_of_the_handler_fails_the_stream() -> None:
    def give_up(error: BaseException) -> Any:
        raise LookupError(f"gave up after {error}")

    source = _fails(5, 7)
    subscriber = Flowable.from_publisher(source).retry_when(lambda errors: errors.map(give_up)).test()
    subscriber.assert_failure(LookupError, 1)
    assert str(subscriber.errors[0]) == "gave up after attempt 0"
    assert source.count == 1


def test_retry_when_handler_that_ignores_the_errors_counts_attempts() -> None:
    source = _fails(5, 7)
    Flowable.from_publisher(source).retry_when(lambda errors: Flowable.range(0, 3)).test().assert_result(1, 1, 1)
    assert source.count == 3


def test_retry_when_item_while_the_source_is_subscribed_is_ignored() -> None:
    class Driven(Publisher[int]):
        """Keeps its subscriber, which the test signals by hand."""

        subscriber: Subscriber[int]

        def subscribe(self, subscriber: Subscriber[int]) -> None:
            self.subscriber = subscriber
            subscriber.on_subscribe(StubSubscription())

    when = Driven()
    held = Driven()
    subscriber: TestSubscriber[int] = TestSubscriber()
    operators.retry_when(held, lambda errors: when).subscribe(subscriber)
    first = held.subscriber
    when.subscriber.on_next(0)  # no failure is waiting for it
    assert held.subscriber is first
    first.on_error(RuntimeError("x"))
    assert held.subscriber is first  # the earlier item did not count for this failure
    when.subscriber.on_next(1)  # this one answers it
    assert held.subscriber is not first
    held.subscriber.on_next(5)
    subscriber.assert_values(5).assert_not_complete()


def test_retry_when_handler_is_called_once_per_subscription() -> None:
    calls: list[object] = []

    def handler(errors: Flowable[BaseException]) -> Flowable[BaseException]:
        calls.append(errors)
        return errors

    retried = Flowable.from_publisher(_fails(1, 7)).retry_when(handler)
    retried.test().assert_result(1, 7)
    assert len(calls) == 1
    assert isinstance(calls[0], Flowable)


def test_retry_when_raising_handler_fails_the_subscriber_before_subscribing_the_source() -> None:
    bug = RuntimeError("handler bug")

    def handler(errors: Flowable[BaseException]) -> Flowable[Any]:
        raise bug

    source = _fails(1, 7)
    Flowable.from_publisher(source).retry_when(handler).test().assert_error(bug)
    assert source.count == 0


def test_retry_when_handler_returning_a_non_publisher_fails_with_type_error() -> None:
    subscriber = Flowable.just(1).retry_when(lambda errors: 42).test()  # type: ignore[arg-type, return-value]
    subscriber.assert_error(TypeError)
    assert str(subscriber.errors[0]) == "retry_when handler result must be a Publisher, got 42"


def test_retry_when_failures_the_handler_does_not_request_overflow_into_missing_backpressure() -> None:
    parked: TestSubscriber[BaseException] = TestSubscriber(initial_request=0)

    def handler(errors: Flowable[BaseException]) -> Flowable[int]:
        errors.subscribe(parked)  # subscribed, but never asks for a failure
        return Flowable.range(0, 1000)

    subscriber = Flowable.error(RuntimeError("x")).retry_when(handler).test()
    subscriber.assert_error(MissingBackpressureError)
    assert str(subscriber.errors[0]) == "retry_when's handler pipeline did not request the failures: 256 are waiting"
    parked.request(1000).assert_value_count(256).assert_complete()


def test_retry_when_cancel_cancels_the_handler_publisher() -> None:
    when = Spy(Flowable.range(0, 10))
    source = Attempts(then_fail([1], RuntimeError("x")), just(1, 2, 3))
    subscriber = TestSubscriber[int](initial_request=2)
    operators.retry_when(source, lambda errors: when).subscribe(subscriber)
    subscriber.assert_values(1, 1).cancel()
    assert when.subscription.cancelled.is_set()
    assert source.subscriptions[1].cancelled.is_set()


# --- on_error_resume / on_error_return -------------------------------------------------------


def test_on_error_resume_goes_on_with_the_fallback_and_its_unmet_demand() -> None:
    fallback = Spy(just(8, 9, 10))
    received: list[BaseException] = []
    cause = RuntimeError("x")

    def resume(error: BaseException) -> Spy:
        received.append(error)
        return fallback

    subscriber: TestSubscriber[int] = TestSubscriber(initial_request=4)
    operators.on_error_resume(then_fail([1, 2], cause), resume).subscribe(subscriber)
    subscriber.assert_values(1, 2, 8, 9).assert_not_complete()
    assert received == [cause]
    assert fallback.subscription.requests == [2]
    subscriber.request(1).assert_result(1, 2, 8, 9, 10)


def test_on_error_resume_failure_of_the_fallback_is_passed_on() -> None:
    second = RuntimeError("second")
    Flowable.error(RuntimeError("first")).on_error_resume(lambda e: error(second)).test().assert_error(second)


def test_on_error_resume_completion_does_not_call_the_function() -> None:
    Flowable.just(1).on_error_resume(lambda e: pytest.fail("called")).test().assert_result(1)


@pytest.mark.parametrize("result", ["raises", "not a publisher"])
def test_on_error_resume_bad_function_fails_with_the_source_error_as_context(result: str) -> None:
    cause = RuntimeError("source failed")

    def fallback(error: BaseException) -> Any:
        if result == "raises":
            raise LookupError("no fallback")
        return 42

    subscriber = Flowable.error(cause).on_error_resume(fallback).test()
    subscriber.assert_error(LookupError if result == "raises" else TypeError)
    assert subscriber.errors[0].__context__ is cause
    if result == "not a publisher":
        assert str(subscriber.errors[0]) == "on_error_resume function result must be a Publisher, got 42"


def test_on_error_return_emits_one_last_item_when_requested_then_completes() -> None:
    source = then_fail([1], RuntimeError("x"))
    subscriber = Flowable.from_publisher(source).on_error_return(lambda e: str(e)).test(initial_request=1)
    subscriber.assert_values(1).assert_not_complete()
    subscriber.request(1).assert_result(1, "x")


def test_on_error_return_completion_passes_through() -> None:
    Flowable.just(1).on_error_return(lambda e: pytest.fail("called")).test().assert_result(1)
    Flowable.from_publisher(empty()).on_error_return(lambda e: 0).test().assert_result()


def test_on_error_return_none_fails_with_type_error_naming_rule_2_13() -> None:
    cause = RuntimeError("x")
    subscriber = Flowable.error(cause).on_error_return(lambda e: None).test()
    subscriber.assert_error(TypeError)
    message = str(subscriber.errors[0])
    assert message.startswith("on_error_return function must not return None (rule 2.13), got None from ")
    assert subscriber.errors[0].__context__ is cause


@pytest.mark.parametrize("name", ["on_error_resume", "on_error_return", "retry_when"])
def test_error_operators_refuse_a_function_that_is_not_callable(name: str) -> None:
    with pytest.raises(TypeError, match=r"^(fn|handler) must be callable, got 3$"):
        getattr(operators, name)(just(1), 3)
