"""flowpy.testing: TestScheduler (virtual time) and TestSubscriber (recording and assertions)."""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from flowpy.flow import Publisher, Subscriber
from flowpy.flowable import Flowable
from flowpy.sources import RangePublisher
from flowpy.testing import TestScheduler, TestSubscriber
from tests.operators.conftest import StubSubscription
from tests.support import wait_until_waiting

ROOT = Path(__file__).resolve().parent.parent
WAIT = 10.0


# --- TestScheduler ---------------------------------------------------------------------------


def test_actions_run_in_time_order_with_now_at_their_due_time() -> None:
    scheduler = TestScheduler()
    seen: list[tuple[str, float]] = []
    scheduler.schedule(lambda: seen.append(("c", scheduler.now())), 3.0)
    scheduler.schedule(lambda: seen.append(("a", scheduler.now())), 1.0)
    scheduler.schedule(lambda: seen.append(("b", scheduler.now())), 2.0)
    scheduler.advance_time_by(2.5)
    assert seen == [("a", 1.0), ("b", 2.0)]
    assert scheduler.now() == 2.5
    assert scheduler.pending == 1
    scheduler.advance_time_to(10.0)
    assert seen[-1] == ("c", 3.0)
    assert scheduler.now() == 10.0
    assert scheduler.pending == 0


def test_actions_due_together_run_in_scheduling_order() -> None:
    scheduler = TestScheduler()
    order: list[int] = []
    for i in range(10):
        scheduler.schedule(lambda i=i: order.append(i), 1.0)
    scheduler.advance_time_by(1.0)
    assert order == list(range(10))


def test_nothing_runs_inside_schedule_or_before_the_clock_moves() -> None:
    scheduler = TestScheduler()
    ran: list[int] = []
    scheduler.schedule(lambda: ran.append(1))
    assert ran == []
    scheduler.trigger_actions()
    assert ran == [1]
    assert scheduler.now() == 0.0


def test_action_scheduled_by_an_action_for_a_time_in_the_window_runs_in_the_same_advance() -> None:
    scheduler = TestScheduler()
    seen: list[float] = []

    def first() -> None:
        seen.append(scheduler.now())
        scheduler.schedule(lambda: seen.append(scheduler.now()), 0.5)
        scheduler.schedule(lambda: seen.append(scheduler.now()), 5.0)

    scheduler.schedule(first, 1.0)
    scheduler.advance_time_by(2.0)
    assert seen == [1.0, 1.5]
    assert scheduler.pending == 1


def test_periodic_runs_at_a_fixed_rate_in_exact_nanoseconds() -> None:
    scheduler = TestScheduler()
    seen: list[float] = []
    task = scheduler.schedule_periodic(lambda: seen.append(scheduler.now()), 0.1, 0.1)
    for _ in range(10):
        scheduler.advance_time_by(0.1)
    assert scheduler.now() == 1.0
    assert len(seen) == 10
    assert seen[-1] == 1.0
    task.cancel()
    assert task.cancelled
    scheduler.advance_time_by(5.0)
    assert len(seen) == 10
    assert scheduler.pending == 0


def test_periodic_action_cancelled_from_inside_its_run_stops() -> None:
    scheduler = TestScheduler()
    runs: list[float] = []
    handle: list[Any] = []

    def fn() -> None:
        runs.append(scheduler.now())
        if len(runs) == 3:
            handle[0].cancel()

    handle.append(scheduler.schedule_periodic(fn, 0.0, 1.0))
    scheduler.advance_time_by(10.0)
    assert runs == [0.0, 1.0, 2.0]
    assert scheduler.pending == 0


def test_raising_action_propagates_with_the_clock_at_its_due_time() -> None:
    scheduler = TestScheduler()
    ran: list[float] = []

    def boom() -> None:
        raise ValueError("boom")

    scheduler.schedule(boom, 1.0)
    scheduler.schedule(lambda: ran.append(scheduler.now()), 2.0)
    with pytest.raises(ValueError, match=r"^boom$"):
        scheduler.advance_time_by(5.0)
    assert scheduler.now() == 1.0
    assert scheduler.pending == 1
    scheduler.advance_time_by(4.0)
    assert ran == [2.0]
    assert scheduler.now() == 5.0


def test_raising_periodic_action_is_not_run_again() -> None:
    scheduler = TestScheduler()
    calls: list[int] = []

    def boom() -> None:
        calls.append(1)
        raise ValueError("boom")

    scheduler.schedule_periodic(boom, 1.0, 1.0)
    with pytest.raises(ValueError, match=r"^boom$"):
        scheduler.advance_time_by(5.0)
    scheduler.advance_time_by(5.0)
    assert calls == [1]
    assert scheduler.pending == 0


def test_cancelled_action_never_runs_and_is_not_pending() -> None:
    scheduler = TestScheduler()
    ran: list[int] = []
    task = scheduler.schedule(lambda: ran.append(1), 1.0)
    task.cancel()
    task.cancel()
    assert scheduler.pending == 0
    scheduler.advance_time_by(2.0)
    assert ran == []


def test_many_cancelled_actions_leave_the_heap() -> None:
    scheduler = TestScheduler()
    tasks = [scheduler.schedule(lambda: None, i) for i in range(1000)]
    for task in tasks:
        task.cancel()
    assert scheduler.pending == 0
    assert len(scheduler._heap) <= 1


def test_advance_from_inside_an_action_raises_runtime_error() -> None:
    scheduler = TestScheduler()
    errors: list[BaseException] = []

    def nested() -> None:
        try:
            scheduler.advance_time_by(1.0)
        except RuntimeError as exc:
            errors.append(exc)

    scheduler.schedule(nested, 1.0)
    scheduler.advance_time_by(1.0)
    assert [str(e) for e in errors] == [
        "advance_time_by() called from inside an action of this TestScheduler; advance from the test"
    ]


def test_advance_time_to_the_past_raises_value_error() -> None:
    scheduler = TestScheduler(start=5.0)
    with pytest.raises(ValueError, match=r"^t must not be before now\(\) \(5\.0\), got 4$"):
        scheduler.advance_time_to(4)


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda s: s.advance_time_by(-1), ValueError, r"^seconds must be a finite number of seconds >= 0, got -1$"),
        (lambda s: s.schedule(lambda: None, "1"), TypeError, r"^delay must be a number of seconds, got '1'$"),
        (
            lambda s: s.schedule_periodic(lambda: None, 0, 1e-12),
            ValueError,
            r"^period must be at least 1 nanosecond on a TestScheduler, got 1e-12$",
        ),
        (lambda s: s.schedule(None), TypeError, r"^fn must be callable, got None$"),
    ],
)
def test_bad_arguments_raise(call: Callable[[TestScheduler], object], error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        call(TestScheduler())


def test_schedule_from_another_thread_runs_at_the_next_advance() -> None:
    scheduler = TestScheduler()
    ran: list[float] = []
    thread = threading.Thread(target=lambda: scheduler.schedule(lambda: ran.append(scheduler.now()), 1.0))
    thread.start()
    thread.join(WAIT)
    scheduler.advance_time_by(1.0)
    assert ran == [1.0]


# --- TestSubscriber: recording ---------------------------------------------------------------


def test_flowable_test_subscribes_and_records_everything() -> None:
    subscriber = Flowable.range(1, 3).test()
    assert subscriber.values == [1, 2, 3]
    assert subscriber.errors == []
    assert subscriber.completions == 1
    subscriber.assert_subscribed().assert_values(1, 2, 3).assert_value_count(3).assert_complete().assert_no_errors()
    subscriber.assert_result(1, 2, 3)


def test_initial_request_zero_requests_nothing_until_asked() -> None:
    subscriber = Flowable.range(1, 5).test(initial_request=0)
    subscriber.assert_no_values().assert_not_complete()
    subscriber.request(2)
    subscriber.assert_values(1, 2)
    subscriber.request(10).assert_result(1, 2, 3, 4, 5)


def test_request_and_cancel_before_on_subscribe_take_effect_in_it() -> None:
    early: TestSubscriber[int] = TestSubscriber(initial_request=1)
    early.request(2)
    RangePublisher(0, 10).subscribe(early)
    early.assert_values(0, 1, 2)

    cancelled: TestSubscriber[int] = TestSubscriber()
    cancelled.cancel()
    stub = StubSubscription()
    cancelled.on_subscribe(stub)
    assert cancelled.is_cancelled
    assert stub.cancels == 1
    assert stub.requests == []


def test_invalid_request_is_passed_on_for_the_publisher_to_signal() -> None:
    subscriber = Flowable.range(0, 3).test(initial_request=0)
    subscriber.request(0)
    subscriber.assert_error(ValueError).assert_no_values()


def test_cancel_stops_the_stream() -> None:
    subscriber = Flowable.range(0, 10).test(initial_request=2)
    subscriber.cancel()
    subscriber.request(5)
    subscriber.assert_values(0, 1).assert_not_complete()
    assert subscriber.is_cancelled


def test_error_is_recorded_and_matched_by_type_instance_or_predicate() -> None:
    failure = KeyError("missing")
    subscriber = Flowable.error(failure).test()
    subscriber.assert_error(KeyError).assert_error(LookupError).assert_error((ValueError, KeyError))
    subscriber.assert_error(failure).assert_error(lambda e: e.args == ("missing",))
    subscriber.assert_failure(KeyError).assert_not_complete().assert_no_values()
    assert subscriber.is_terminated


# --- TestSubscriber: failures say what was seen ------------------------------------------------


def fails(call: Callable[[], object], message: str) -> None:
    with pytest.raises(AssertionError) as info:
        call()
    assert str(info.value) == message


def test_assertion_messages_show_what_was_seen() -> None:
    done = Flowable.range(1, 3).test()
    seen = "(values: [1, 2, 3], errors: [], completions: 1)"
    fails(lambda: done.assert_values(1, 2, 4), f"expected values [1, 2, 4]; first difference at index 2: 3 != 4 {seen}")
    fails(lambda: done.assert_values(1, 2), f"expected values [1, 2]; 1 more from index 2 {seen}")
    fails(lambda: done.assert_values(1, 2, 3, 4), f"expected values [1, 2, 3, 4]; 1 missing from index 3 {seen}")
    fails(lambda: done.assert_value_count(2), f"expected 2 values, got 3 {seen}")
    fails(lambda: done.assert_no_values(), f"expected 0 values, got 3 {seen}")
    fails(lambda: done.assert_not_complete(), f"expected no completion {seen}")
    fails(lambda: done.assert_error(ValueError), f"expected an error {seen}")

    failed_subscriber = Flowable.just(1).concat_with(Flowable.error(ValueError("bad"))).test()
    seen = "(values: [1], errors: [ValueError('bad')], completions: 0)"
    fails(lambda: failed_subscriber.assert_complete(), f"expected completion {seen}")
    fails(lambda: failed_subscriber.assert_no_errors(), f"expected no error {seen}")
    fails(lambda: failed_subscriber.assert_error(KeyError), f"expected an error of type KeyError {seen}")
    fails(
        lambda: failed_subscriber.assert_error((KeyError, TypeError)),
        f"expected an error of type KeyError or TypeError {seen}",
    )
    fails(lambda: failed_subscriber.assert_error(ValueError("bad")), f"expected the error ValueError('bad') {seen}")
    predicate = lambda e: False  # noqa: E731
    fails(
        lambda: failed_subscriber.assert_error(predicate), f"expected an error for which {predicate!r} is true {seen}"
    )


def test_assert_subscribed_fails_before_on_subscribe() -> None:
    subscriber: TestSubscriber[int] = TestSubscriber()
    fails(
        subscriber.assert_subscribed,
        "on_subscribe was not called (values: [], errors: [], completions: 0, not subscribed)",
    )


def test_assert_error_with_something_else_raises_type_error() -> None:
    subscriber = Flowable.error(ValueError("x")).test()
    with pytest.raises(TypeError, match=r"^expected must be an exception type, an exception or a predicate, got 3$"):
        subscriber.assert_error(3)  # type: ignore[arg-type]


def test_long_value_lists_are_shortened_in_messages() -> None:
    subscriber = Flowable.range(0, 100).test()
    with pytest.raises(AssertionError, match=r"\(values: \[0, 1, 2, .*, \.\.\.\], errors: \[\], completions: 1\)$"):
        subscriber.assert_value_count(1)


# --- TestSubscriber: the rules it checks -----------------------------------------------------


class Misbehaving(Publisher[int]):
    """Signals whatever the test tells it to, ignoring the rules."""

    def __init__(self, script: Callable[[Subscriber[int]], None]) -> None:
        self.script = script

    def subscribe(self, subscriber: Subscriber[int]) -> None:
        self.script(subscriber)


@pytest.mark.parametrize(
    ("script", "violation"),
    [
        (lambda s: (s.on_subscribe(StubSubscription()), s.on_next(1)), "on_next #1 with only 0 requested (rule 1.1)"),
        (lambda s: s.on_next(1), "on_next before on_subscribe (rule 1.9)"),
        (
            lambda s: (s.on_subscribe(StubSubscription()), s.on_complete(), s.on_complete()),
            "on_complete after a terminal signal (rule 1.7)",
        ),
        (
            lambda s: (s.on_subscribe(StubSubscription()), s.on_subscribe(StubSubscription())),
            "a second on_subscribe (rule 2.5); it was cancelled",
        ),
        (lambda s: (s.on_subscribe(StubSubscription()), s.on_next(None)), "on_next(None) (rule 2.13)"),
        (lambda s: (s.on_subscribe(StubSubscription()), s.on_error(None)), "on_error(None) (rule 2.13)"),
    ],
)
def test_protocol_violations_are_recorded_and_fail_every_assertion(
    script: Callable[[Subscriber[Any]], object], violation: str
) -> None:
    subscriber = Flowable(Misbehaving(script)).test(initial_request=0)  # type: ignore[arg-type]
    assert violation in subscriber.violations
    with pytest.raises(AssertionError, match=rf"^the publisher broke the protocol: .*{re.escape(violation)}"):
        subscriber.assert_subscribed()


def test_a_second_on_subscribe_is_cancelled() -> None:
    subscriber: TestSubscriber[int] = TestSubscriber()
    first, second = StubSubscription(), StubSubscription()
    subscriber.on_subscribe(first)
    subscriber.on_subscribe(second)
    assert second.cancels == 1
    assert first.cancels == 0


def test_overlapping_signals_are_recorded() -> None:
    subscriber: TestSubscriber[int] = TestSubscriber()
    subscriber.on_subscribe(StubSubscription())
    subscriber._active = "on_next"  # another thread is inside on_next
    subscriber.on_next(2)
    assert subscriber.violations == ["on_next while on_next was under way (rule 1.3)"]


def test_synchronous_emission_inside_the_initial_request_is_not_an_overlap() -> None:
    Flowable.just(1, 2).test().assert_result(1, 2)


# --- TestSubscriber: waiting -------------------------------------------------------------------


def test_await_done_returns_once_a_terminal_signal_arrives_from_another_thread() -> None:
    subscriber = Flowable.range(0, 100).observe_on().test()
    subscriber.await_done(WAIT).assert_value_count(100).assert_complete()


def test_await_done_timeout_cancels_and_fails() -> None:
    stub = StubSubscription()
    subscriber: TestSubscriber[int] = TestSubscriber()
    subscriber.on_subscribe(stub)
    with pytest.raises(
        AssertionError,
        match=r"^no terminal signal within 0\.01 s; the subscription was cancelled "
        r"\(values: \[\], errors: \[\], completions: 0, cancelled\)$",
    ):
        subscriber.await_done(0.01)
    assert stub.cancels == 1


def test_await_count_waits_for_items_from_another_thread() -> None:
    subscriber: TestSubscriber[int] = TestSubscriber()
    subscriber.on_subscribe(StubSubscription())
    thread = threading.Thread(target=lambda: [subscriber.on_next(i) for i in range(3)])
    thread.start()
    subscriber.await_count(3, WAIT).assert_values(0, 1, 2)
    thread.join(WAIT)


def test_await_count_fails_when_the_stream_ends_first_or_time_runs_out() -> None:
    ended = Flowable.range(0, 2).test()
    with pytest.raises(AssertionError, match=r"^expected at least 3 values; the stream ended first \(values: \[0, 1\]"):
        ended.await_count(3, WAIT)
    waiting = Flowable.range(0, 2).test(initial_request=1)
    with pytest.raises(AssertionError, match=r"^expected at least 2 values; none came within 0\.01 s \(values: \[0\]"):
        waiting.await_count(2, 0.01)


@pytest.mark.parametrize("timeout", [math.inf, 1e300, 2**70], ids=["inf", "1e300", "2**70"])
def test_await_done_and_await_count_take_a_timeout_beyond_what_the_platform_can_wait(timeout: float) -> None:
    # refused as "not finite" where offer() and iterate() take it; by the rule that every timeout follows
    subscriber: TestSubscriber[int] = TestSubscriber()
    subscriber.on_subscribe(StubSubscription())
    waiter = threading.Thread(target=lambda: subscriber.await_count(1, timeout).await_done(timeout))
    waiter.start()
    wait_until_waiting(waiter)
    subscriber.on_next(1)
    subscriber.on_complete()
    waiter.join(WAIT)
    assert not waiter.is_alive()
    subscriber.assert_result(1)


@pytest.mark.parametrize(
    ("timeout", "error", "message"),
    [
        (math.nan, ValueError, r"^timeout must be a number of seconds, got nan$"),
        (-1, ValueError, r"^timeout must be >= 0, got -1$"),
        (None, TypeError, r"^timeout must be a number of seconds, got None$"),
        ("1", TypeError, r"^timeout must be a number of seconds, got '1'$"),
    ],
)
def test_await_done_and_await_count_refuse_a_bad_timeout(timeout: Any, error: type[Exception], message: str) -> None:
    subscriber: TestSubscriber[int] = TestSubscriber()
    subscriber.on_subscribe(StubSubscription())
    with pytest.raises(error, match=message):
        subscriber.await_done(timeout)
    with pytest.raises(error, match=message):
        subscriber.await_count(1, timeout)


def test_initial_request_must_be_a_non_negative_int() -> None:
    with pytest.raises(ValueError, match=r"^initial_request must be non-negative, got -1$"):
        TestSubscriber(-1)
    with pytest.raises(TypeError, match=r"^initial_request must be an int, got 1\.5$"):
        TestSubscriber(1.5)  # type: ignore[arg-type]


def test_pytest_does_not_collect_the_test_kit() -> None:
    assert TestScheduler.__test__ is False
    assert TestSubscriber.__test__ is False


# --- The docs -------------------------------------------------------------------------------------


@pytest.mark.timeout(60)
def test_docs_testing_snippets_run() -> None:
    # Blocks marked ```py are counter-examples (a test that sleeps); only ```python blocks run.
    text = (ROOT / "docs" / "testing.md").read_text()
    snippets = re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)
    assert len(snippets) >= 3
    for snippet in snippets:
        exec(compile(snippet, "docs/testing.md", "exec"), {"__name__": "docs_testing"})
