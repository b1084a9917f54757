"""do_on_next, do_on_error, do_on_complete, do_on_subscribe, do_on_request, do_on_cancel, do_finally."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from flowpy import operators
from flowpy.flow import Publisher, Subscriber, Subscription
from flowpy.flowable import Flowable
from flowpy.operators._fused import FusedPublisher
from flowpy.sources import RangePublisher, error, just
from flowpy.testing import TestSubscriber
from tests.operators.conftest import Spy, StubSubscription


class Logging(TestSubscriber[Any]):
    """Logs its signals into a shared list, to check the order against the hooks."""

    def __init__(self, log: list[Any], initial_request: int = 2**63 - 1) -> None:
        super().__init__(initial_request)
        self.log = log

    def on_subscribe(self, subscription: Subscription) -> None:
        self.log.append("on_subscribe")
        super().on_subscribe(subscription)

    def on_next(self, item: Any) -> None:
        self.log.append(("on_next", item))
        super().on_next(item)

    def on_error(self, error: BaseException) -> None:
        self.log.append("on_error")
        super().on_error(error)

    def on_complete(self) -> None:
        self.log.append("on_complete")
        super().on_complete()


def test_do_on_next_sees_each_item_before_it_goes_on_and_fuses() -> None:
    log: list[Any] = []
    chained = Flowable.just(1, 2).do_on_next(lambda x: log.append(("hook", x))).map(lambda x: x * 10)
    assert isinstance(chained.publisher, FusedPublisher)
    chained.subscribe(Logging(log))
    assert log == ["on_subscribe", ("hook", 1), ("on_next", 10), ("hook", 2), ("on_next", 20), "on_complete"]


def test_do_on_next_raising_cancels_the_source_and_fails() -> None:
    def hook(x: int) -> None:
        raise LookupError("bug")

    source = Spy(RangePublisher(0, 10))
    Flowable.from_publisher(source).do_on_next(hook).test().assert_error(LookupError).assert_no_values()
    assert source.subscription.cancelled.is_set()


def test_do_on_error_sees_the_error_before_it_goes_on() -> None:
    log: list[Any] = []
    failure = RuntimeError("x")
    Flowable.error(failure).do_on_error(lambda e: log.append(("hook", e))).subscribe(Logging(log))
    assert log == ["on_subscribe", ("hook", failure), "on_error"]


def test_do_on_error_raising_signals_its_exception_with_the_error_as_context() -> None:
    failure, bug = RuntimeError("x"), LookupError("hook bug")

    def hook(error: BaseException) -> None:
        raise bug

    Flowable.error(failure).do_on_error(hook).test().assert_error(bug)
    assert bug.__context__ is failure


def test_do_on_complete_runs_before_the_completion_and_raising_fails_instead() -> None:
    log: list[Any] = []
    Flowable.just(1).do_on_complete(lambda: log.append("hook")).subscribe(Logging(log))
    assert log == ["on_subscribe", ("on_next", 1), "hook", "on_complete"]

    def hook() -> None:
        raise LookupError("bug")

    Flowable.just(1).do_on_complete(hook).test().assert_failure(LookupError, 1)


def test_do_on_subscribe_gets_the_upstream_subscription_first() -> None:
    log: list[Any] = []
    source = Spy(RangePublisher(0, 1))
    Flowable.from_publisher(source).do_on_subscribe(lambda s: log.append(("hook", s))).subscribe(Logging(log))
    assert log[:2] == [("hook", source.subscription), "on_subscribe"]


def test_do_on_subscribe_raising_cancels_upstream_and_fails_the_subscriber() -> None:
    def hook(subscription: Subscription) -> None:
        raise LookupError("bug")

    source = Spy(RangePublisher(0, 10))
    Flowable.from_publisher(source).do_on_subscribe(hook).test().assert_subscribed().assert_error(LookupError)
    assert source.subscription.cancelled.is_set()
    assert source.subscription.requests == []


def test_do_on_request_sees_every_request_and_it_still_goes_up() -> None:
    seen: list[Any] = []
    source = Spy(RangePublisher(0, 10))
    subscriber = Flowable.from_publisher(source).do_on_request(seen.append).test(initial_request=2)
    subscriber.request(3)
    subscriber.request(0)  # invalid: seen, passed up, and the source signals rule 3.9
    assert seen == [2, 3, 0]
    assert source.subscription.requests == [2, 3, 0]
    subscriber.assert_error(ValueError)


def test_do_on_request_raising_is_reported_and_the_request_goes_up(caplog: pytest.LogCaptureFixture) -> None:
    def hook(n: int) -> None:
        raise LookupError("bug")

    source = Spy(RangePublisher(0, 3))
    Flowable.from_publisher(source).do_on_request(hook).test().assert_result(0, 1, 2)
    assert "do_on_request's function" in caplog.text


def test_do_on_request_keyboard_interrupt_propagates_after_the_request_went_up() -> None:
    def hook(n: int) -> None:
        raise KeyboardInterrupt

    source = Spy(RangePublisher(0, 3))
    subscriber: TestSubscriber[int] = TestSubscriber(initial_request=0)
    operators.do_on_request(source, hook).subscribe(subscriber)
    with pytest.raises(KeyboardInterrupt):
        subscriber.request(2)
    assert source.subscription.requests == [2]
    subscriber.assert_values(0, 1)


def test_do_on_cancel_runs_once_before_the_upstream_cancel_and_never_after_the_end() -> None:
    source = Spy(RangePublisher(0, 10))
    seen: list[bool] = []
    subscriber = (
        Flowable.from_publisher(source)
        .do_on_cancel(lambda: seen.append(source.subscription.cancelled.is_set()))
        .test(initial_request=1)
    )
    subscriber.cancel()
    subscriber.cancel()
    assert seen == [False]
    assert source.subscription.cancelled.is_set()
    ended: list[str] = []
    Flowable.just(1).do_on_cancel(lambda: ended.append("cancel")).test().assert_result(1).cancel()
    assert ended == []


def test_do_on_cancel_raising_is_reported_and_the_upstream_cancelled(caplog: pytest.LogCaptureFixture) -> None:
    def hook() -> None:
        raise LookupError("bug")

    source = Spy(RangePublisher(0, 10))
    Flowable.from_publisher(source).do_on_cancel(hook).test(initial_request=1).cancel()
    assert source.subscription.cancelled.is_set()
    assert "do_on_cancel's function" in caplog.text


@pytest.mark.parametrize("end", ["complete", "error", "cancel"])
def test_do_finally_runs_once_after_the_end(end: str) -> None:
    log: list[Any] = []
    source: Any = {"complete": just(1), "error": error(RuntimeError("x")), "cancel": RangePublisher(0, 10)}[end]
    subscriber = Logging(log, initial_request=1)
    operators.do_finally(source, lambda: log.append("finally")).subscribe(subscriber)
    subscriber.cancel()  # after the end it does nothing: finally still runs once
    expected_end = {"complete": ["on_complete"], "error": ["on_error"], "cancel": []}[end]
    assert log[-1 - len(expected_end) :] == [*expected_end, "finally"]
    assert log.count("finally") == 1


def test_do_finally_raising_is_reported(caplog: pytest.LogCaptureFixture) -> None:
    def hook() -> None:
        raise LookupError("bug")

    Flowable.just(1).do_finally(hook).test().assert_result(1)
    assert "do_finally's function" in caplog.text


class _Driven(Publisher[int]):
    """Keeps its subscriber, which the test signals by hand."""

    subscriber: Subscriber[int]

    def subscribe(self, subscriber: Subscriber[int]) -> None:
        self.subscriber = subscriber
        subscriber.on_subscribe(StubSubscription())


@pytest.mark.timeout(60)
@pytest.mark.parametrize("run", range(10))
def test_do_finally_cancel_racing_the_completion_runs_it_once(run: int, tiny_switch_interval: None) -> None:
    for _ in range(100):
        source = _Driven()
        calls: list[int] = []
        subscriber = Flowable.from_publisher(source).do_finally(lambda calls=calls: calls.append(1)).test()
        running = threading.Event()

        def complete(source: _Driven = source, running: threading.Event = running) -> None:
            running.set()
            source.subscriber.on_complete()

        completing = threading.Thread(target=complete)
        completing.start()
        while not running.is_set():  # both threads run: the cancel lands while the completion is under way
            pass
        subscriber.cancel()
        completing.join(10)
        assert calls == [1]


@pytest.mark.parametrize(
    "name",
    ["do_on_next", "do_on_error", "do_on_complete", "do_on_subscribe", "do_on_request", "do_on_cancel", "do_finally"],
)
def test_hooks_refuse_a_function_that_is_not_callable(name: str) -> None:
    with pytest.raises(TypeError, match=r"^fn must be callable, got None$"):
        getattr(operators, name)(just(1), None)


@pytest.mark.timeout(60)
def test_a_relay_chain_too_deep_for_the_stack_ends_with_on_error_not_a_hang() -> None:
    # Relays pass each item straight on, so 400 of them recurse through one
    # stack, past the recursion limit: the stream ends with on_error.
    chain = Flowable.range(0, 10)
    for _ in range(400):
        chain = chain.do_on_complete(lambda: None)
    with pytest.raises(RecursionError):
        chain.to_list().result(30)


# --- Thousands of relays in a row ---------------------------------------------------
#
# A relay hands itself to its downstream, and passes the terminal signal on,
# through the trampoline: subscribing, completing or failing thousands of
# them does not recurse through all of them. An item still crosses them on
# one stack: past a few hundred, the stream ends with on_error(RecursionError).

_DEEP = 2000

_RELAYS: dict[str, Any] = {
    "do_on_error": lambda chain: chain.do_on_error(lambda error: None),
    "do_on_complete": lambda chain: chain.do_on_complete(lambda: None),
    "do_on_subscribe": lambda chain: chain.do_on_subscribe(lambda subscription: None),
    "do_on_request": lambda chain: chain.do_on_request(lambda n: None),
    "do_on_cancel": lambda chain: chain.do_on_cancel(lambda: None),
    "do_finally": lambda chain: chain.do_finally(lambda: None),
    "ignore_elements": lambda chain: chain.ignore_elements(),
    "subscribe_on": lambda chain: chain.subscribe_on(),
}


def _deep(source: Flowable[Any], name: str, depth: int = _DEEP) -> Flowable[Any]:
    chain = source
    for _ in range(depth):
        chain = _RELAYS[name](chain)
    return chain


def _outcome(flowable: Flowable[Any]) -> list[Any] | RecursionError:
    """The items, or the RecursionError the stream ended with; a hang fails the test (result's timeout)."""
    try:
        return flowable.to_list().result(30)
    except RecursionError as error:
        return error


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", sorted(_RELAYS))
def test_thousands_of_relays_end_items_with_values_or_on_error_not_a_hang(name: str) -> None:
    expected = [] if name == "ignore_elements" else list(range(20))
    outcome = _outcome(_deep(Flowable.range(0, 20), name))
    # An item crosses the relays on one stack: ending with RecursionError is acceptable, a hang is not.
    assert outcome == expected or isinstance(outcome, RecursionError)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", sorted(_RELAYS))
def test_thousands_of_relays_pass_a_completion_on(name: str) -> None:
    assert _deep(Flowable.empty(), name).to_list().result(30) == []


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", sorted(_RELAYS))
def test_thousands_of_relays_pass_an_error_on_after_on_subscribe(name: str) -> None:
    # error() fails right after on_subscribe, while the relays' hand-offs wait
    # in the trampoline: each relay holds the error until its downstream's
    # on_subscribe has returned (rule 1.3).
    log: list[Any] = []
    subscriber = Logging(log)
    _deep(Flowable.from_publisher(error(ValueError("boom"))), name).subscribe(subscriber)
    subscriber.await_done(30)
    assert log == ["on_subscribe", "on_error"]
    assert isinstance(subscriber.errors[0], ValueError)


@pytest.mark.timeout(60)
def test_take_after_hundreds_of_relays_completes() -> None:
    # take's completion cancels upstream through every relay on the item's
    # deep stack: a cancel that runs out of stack is made again from the
    # bottom of the trampoline, and the completion still goes down.
    outcome = _outcome(_deep(Flowable.range(0, 20), "do_on_complete", 200).take(5))
    assert outcome == [0, 1, 2, 3, 4] or isinstance(outcome, RecursionError)
