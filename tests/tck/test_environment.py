"""TestEnvironment and its helpers: timeouts, flops, and the corrected expect_error wait."""

from __future__ import annotations

import math
import threading
from typing import Any

import pytest

from flowpy.flow import Publisher, Subscriber
from flowpy.tck import (
    DEFAULT_TIMEOUT_MILLIS,
    Latch,
    ManualSubscriberWithSubscriptionSupport,
    Promise,
    Receptacle,
    TestEnvironment,
)
from tests.support import wait_until_waiting


def test_environment_defaults_are_the_java_tck_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("DEFAULT_TIMEOUT_MILLIS", "DEFAULT_NO_SIGNALS_TIMEOUT_MILLIS", "DEFAULT_POLL_TIMEOUT_MILLIS"):
        monkeypatch.delenv(name, raising=False)
    env = TestEnvironment()
    assert (env.default_timeout_millis, env.default_no_signals_timeout_millis, env.default_poll_timeout_millis) == (
        100,
        100,
        100,
    )


def test_environment_variables_set_defaults_and_code_overrides_them(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEFAULT_TIMEOUT_MILLIS", "500")
    monkeypatch.setenv("DEFAULT_NO_SIGNALS_TIMEOUT_MILLIS", "40")
    monkeypatch.setenv("DEFAULT_POLL_TIMEOUT_MILLIS", "7")
    env = TestEnvironment()
    assert (env.default_timeout_millis, env.default_no_signals_timeout_millis, env.default_poll_timeout_millis) == (
        500,
        40,
        7,
    )
    assert TestEnvironment(30).default_timeout_millis == 30


def test_environment_no_signals_and_poll_default_to_the_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("DEFAULT_NO_SIGNALS_TIMEOUT_MILLIS", "DEFAULT_POLL_TIMEOUT_MILLIS"):
        monkeypatch.delenv(name, raising=False)
    env = TestEnvironment(250)
    assert (env.default_no_signals_timeout_millis, env.default_poll_timeout_millis) == (250, 250)


def test_environment_variable_not_an_integer_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEFAULT_TIMEOUT_MILLIS", "fast")
    with pytest.raises(
        ValueError,
        match=r"^environment variable DEFAULT_TIMEOUT_MILLIS must be an integer "
        r"\(milliseconds\), got 'fast'$",
    ):
        TestEnvironment()


def test_environment_negative_timeout_raises() -> None:
    with pytest.raises(ValueError, match=r"^default_timeout_millis must be a non-negative int, got -1$"):
        TestEnvironment(-1)


def test_flop_records_without_raising_and_verify_raises_first() -> None:
    env = TestEnvironment(50, 10)
    env.flop("first")
    env.flop("second")
    with pytest.raises(AssertionError, match=r"^first$"):
        env.verify_no_async_errors_no_delay()
    assert [str(e) for e in env.async_errors] == ["first", "second"]
    assert str(env.drop_async_error()) == "first"
    env.clear_async_errors()
    env.verify_no_async_errors()


def test_flop_with_exception_keeps_it_and_wraps_it_on_verify() -> None:
    env = TestEnvironment(50, 10)
    error = KeyError("k")
    env.flop("Unexpected on_error", error)
    assert env.async_errors == [error]
    with pytest.raises(AssertionError, match=r"^Async error during test execution: Unexpected on_error$") as info:
        env.verify_no_async_errors_no_delay()
    assert info.value.__cause__ is error


def test_expect_error_waits_the_whole_timeout_not_one_poll_interval() -> None:
    # TCK 1.0.4's `=-` bug gave up after one poll interval (10 ms here).
    env = TestEnvironment(2_000, 10, 10)
    receptacle: Receptacle[int] = Receptacle(env)
    late = threading.Timer(0.1, lambda: env.flop("late", ValueError("late")))
    late.start()
    try:
        error = receptacle.expect_error(ValueError, 2_000, 10, "Expected on_error(ValueError)")
    finally:
        late.cancel()
    assert str(error) == "late"
    env.verify_no_async_errors_no_delay()


def test_expect_error_of_other_type_fails() -> None:
    env = TestEnvironment(50, 10, 10)
    env.flop("boom", KeyError("boom"))
    with pytest.raises(AssertionError, match=r"^Expected on_error\(ValueError\): got KeyError: 'boom'$"):
        Receptacle(env).expect_error(ValueError, 50, 10, "Expected on_error(ValueError)")


def test_latch_expect_close_flops_with_timeout_in_message() -> None:
    env = TestEnvironment(20, 10)
    Latch(env).expect_close("Should have received on_subscribe")
    assert [str(e) for e in env.async_errors] == ["Should have received on_subscribe within 20 ms"]


@pytest.mark.parametrize("millis", [10**13, 2**80], ids=["10**13", "2**80"])
def test_a_timeout_longer_than_the_platform_can_wait_waits_for_the_signal(millis: int) -> None:
    # millis / 1000 went to the wait as it was: OverflowError beyond threading.TIMEOUT_MAX
    env = TestEnvironment(millis, 10)
    latch = Latch(env)
    receptacle: Receptacle[int] = Receptacle(env)
    taken: list[object] = []

    def wait_for_both() -> None:
        try:
            latch.expect_close("closed")
            taken.append(receptacle.next(millis, "an element"))
        except BaseException as exc:
            taken.append(exc)

    waiter = threading.Thread(target=wait_for_both)
    waiter.start()
    wait_until_waiting(waiter)  # for the latch
    latch.close()
    receptacle.add(7)
    waiter.join(10)
    assert not waiter.is_alive()
    assert taken == [7]
    assert env.async_errors == []


@pytest.mark.parametrize(
    ("millis", "error", "message"),
    [
        (math.nan, ValueError, r"^timeout_millis must be a number of milliseconds, got nan$"),
        (-1, ValueError, r"^timeout_millis must be >= 0 or None, got -1$"),
        ("5", TypeError, r"^timeout_millis must be a number of milliseconds or None, got '5'$"),
    ],
)
def test_a_bad_timeout_millis_is_refused(millis: Any, error: type[Exception], message: str) -> None:
    # NaN made the wait return at once: a flop "within nan ms" where no wait took place
    env = TestEnvironment(20, 10)
    with pytest.raises(error, match=message):
        Latch(env).expect_close("closed", millis)
    with pytest.raises(error, match=message):
        Receptacle(env).next(millis, "an element")
    assert env.async_errors == []


def test_promise_completed_twice_flops() -> None:
    env = TestEnvironment(20, 10)
    promise: Promise[int] = Promise(env)
    promise.complete(1)
    promise.complete(2)
    assert promise.value() == 1
    assert [str(e) for e in env.async_errors] == [
        "Cannot complete a promise more than once! Present value: 1, attempted to set: 2"
    ]


def test_receptacle_overflow_flops_and_raises() -> None:
    env = TestEnvironment(20, 10)
    receptacle: Receptacle[int] = Receptacle(env)
    for i in range(Receptacle.QUEUE_SIZE):
        receptacle.add(i)
    with pytest.raises(RuntimeError, match=r"^Received more than bufferSize \(32\) onNext signals$"):
        receptacle.add(32)
    assert receptacle.next_n(32, 20, "all") == list(range(32))


def test_manual_subscriber_signal_before_on_subscribe_flops() -> None:
    env = TestEnvironment(20, 10)
    subscriber: ManualSubscriberWithSubscriptionSupport[int] = ManualSubscriberWithSubscriptionSupport(env)
    subscriber.on_next(1)
    with pytest.raises(AssertionError, match=r"^Subscriber::on_next\(1\) called before Subscriber::on_subscribe$"):
        env.verify_no_async_errors_no_delay()


def test_configured_defaults_are_readable_without_an_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("DEFAULT_NO_SIGNALS_TIMEOUT_MILLIS", "DEFAULT_POLL_TIMEOUT_MILLIS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DEFAULT_TIMEOUT_MILLIS", "300")
    assert TestEnvironment.env_default_timeout_millis() == 300
    assert TestEnvironment.env_default_no_signals_timeout_millis() == 300
    assert TestEnvironment.env_default_poll_timeout_millis() == 300
    monkeypatch.setenv("DEFAULT_NO_SIGNALS_TIMEOUT_MILLIS", "20")
    monkeypatch.setenv("DEFAULT_POLL_TIMEOUT_MILLIS", "5")
    assert (
        TestEnvironment.env_default_no_signals_timeout_millis(),
        TestEnvironment.env_default_poll_timeout_millis(),
    ) == (20, 5)
    monkeypatch.delenv("DEFAULT_TIMEOUT_MILLIS")
    assert TestEnvironment.env_default_timeout_millis() == DEFAULT_TIMEOUT_MILLIS == 100


@pytest.mark.parametrize("wait", ["next", "expect_completion", "promise", "next_n"])
def test_timeout_failure_does_not_chain_queue_empty(wait: str) -> None:
    env = TestEnvironment(10, 10)
    receptacle: Receptacle[int] = Receptacle(env)
    with pytest.raises(AssertionError, match=r"^waited within 10 ms") as failure:
        if wait == "next":
            receptacle.next(10, "waited")
        elif wait == "expect_completion":
            receptacle.expect_completion(10, "waited")
        elif wait == "promise":
            Promise(env).expect_completion(10, "waited")
        else:
            receptacle.next_n(2, 10, "waited")
    assert failure.value.__context__ is None
    assert failure.value.__cause__ is None


def test_completion_timeout_reports_the_first_recorded_error() -> None:
    # As the Java TCK: the missing completion is a symptom; the illegal signal
    # recorded before it is what the test reports.
    env = TestEnvironment(10, 10)
    receptacle: Receptacle[int] = Receptacle(env)
    env.flop("Unexpected Subscriber::on_error(ValueError('too soon'))", ValueError("too soon"))
    with pytest.raises(
        AssertionError,
        match=r"^Async error during test execution: Unexpected "
        r"Subscriber::on_error\(ValueError\('too soon'\)\)$",
    ):
        receptacle.expect_completion(10, "Did not receive expected stream completion")
    assert [str(e) for e in env.async_errors] == ["too soon", "Did not receive expected stream completion within 10 ms"]


def test_element_instead_of_completion_reports_the_first_recorded_error() -> None:
    env = TestEnvironment(10, 10)
    receptacle: Receptacle[int] = Receptacle(env)
    receptacle.add(3)
    with pytest.raises(AssertionError, match=r"^Expected end-of-stream but got element 3: done$"):
        receptacle.expect_completion(10, "done")
    env.clear_async_errors()
    env.flop("earlier")
    receptacle.add(4)
    with pytest.raises(AssertionError, match=r"^earlier$"):
        receptacle.expect_completion(10, "done")


def test_subscribe_reports_a_signal_before_on_subscribe_not_the_timeout() -> None:
    env = TestEnvironment(10, 10)

    class EagerComplete(Publisher[int]):
        def subscribe(self, subscriber: Subscriber[int]) -> None:
            subscriber.on_complete()

    with pytest.raises(AssertionError, match=r"^Subscriber::on_complete\(\) called before Subscriber::on_subscribe$"):
        env.new_manual_subscriber(EagerComplete())
