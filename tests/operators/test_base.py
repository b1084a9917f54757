"""StagePublisher, the publisher every operator returns."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from flowpy import operators
from flowpy._core.serial import NESTING, trampoline
from flowpy._signals import call_subscription
from flowpy.flow import Subscriber
from flowpy.operators._base import CancelledSubscription, HalfSerial, StagePublisher, signal_deep
from flowpy.operators._hooks import _Peek
from flowpy.sources import RangePublisher
from flowpy.testing import TestSubscriber
from tests.operators.conftest import StubSubscription
from tests.support import Recorder


def test_stage_publisher_connects_one_stage_per_subscriber() -> None:
    connected: list[Subscriber[Any]] = []
    publisher: StagePublisher[int] = StagePublisher("probe", connected.append)
    first, second = Recorder(), Recorder()
    publisher.subscribe(first)
    publisher.subscribe(second)
    assert connected == [first, second]
    assert repr(publisher) == "<probe publisher>"


def test_stage_publisher_none_subscriber_is_a_type_error_and_connects_nothing() -> None:
    connected: list[Subscriber[Any]] = []
    publisher: StagePublisher[int] = StagePublisher("probe", connected.append)
    with pytest.raises(TypeError, match=r"^subscriber must not be None \(rule 1\.9\)$"):
        publisher.subscribe(None)  # type: ignore[arg-type]
    assert connected == []


@pytest.mark.parametrize(
    "make",
    [
        lambda: operators.on_backpressure_drop(RangePublisher(0, 3)),
        lambda: operators.merge(RangePublisher(0, 3)),
        lambda: operators.zip(RangePublisher(0, 3)),
    ],
)
def test_operator_publishers_are_stage_publishers_and_check_rule_1_9(make: Any) -> None:
    publisher = make()
    assert isinstance(publisher, StagePublisher)
    with pytest.raises(TypeError, match=r"^subscriber must not be None \(rule 1\.9\)$"):
        publisher.subscribe(None)


def test_stage_publisher_is_cold_each_subscriber_gets_the_whole_stream() -> None:
    publisher = operators.map(operators.merge(RangePublisher(0, 3)), lambda n: n * 10)
    first, second = Recorder(initial=10), Recorder(initial=10)
    publisher.subscribe(first)
    publisher.subscribe(second)
    assert first.items == second.items == [0, 10, 20]
    assert first.completed and second.completed


# --- HalfSerial: items from one thread, the terminal signal from any ---------------


class _Gate(TestSubscriber[int]):
    """Blocks inside on_next until released, so another thread can act meanwhile."""

    def __init__(self) -> None:
        super().__init__()
        self.inside = threading.Event()
        self.release = threading.Event()

    def on_next(self, item: int) -> None:
        super().on_next(item)
        self.inside.set()
        assert self.release.wait(10)


def test_half_serial_terminal_from_another_thread_waits_for_the_on_next_under_way() -> None:
    downstream = _Gate()
    downstream.on_subscribe(CancelledSubscription())
    serial = HalfSerial(downstream)
    delivering = threading.Thread(target=serial.on_next, args=(1,))
    delivering.start()
    assert downstream.inside.wait(10)
    assert serial.terminate(None)  # claimed, but the on_next thread sends it
    downstream.assert_values(1).assert_not_complete()
    downstream.release.set()
    delivering.join(10)
    downstream.assert_result(1)


def test_half_serial_first_claim_wins_and_later_items_are_dropped() -> None:
    downstream: TestSubscriber[int] = TestSubscriber()
    downstream.on_subscribe(CancelledSubscription())
    serial = HalfSerial(downstream)
    serial.on_next(1)
    failure = RuntimeError("first")
    assert serial.terminate(failure)
    assert not serial.terminate(None)
    serial.on_next(2)
    downstream.assert_failure(failure, 1)


def test_half_serial_terminal_claimed_inside_on_next_is_sent_after_it_returns() -> None:
    class Terminating(TestSubscriber[int]):
        def on_next(self, item: int) -> None:
            super().on_next(item)
            serial.terminate(None)
            assert self.completions == 0, "on_complete came inside on_next"

    downstream = Terminating()
    downstream.on_subscribe(CancelledSubscription())
    serial = HalfSerial(downstream)
    serial.on_next(1)
    downstream.assert_result(1)


def test_half_serial_after_a_raising_on_next_no_terminal_signal_follows() -> None:
    class Raising(TestSubscriber[int]):
        def on_next(self, item: int) -> None:
            super().on_next(item)
            raise RuntimeError("subscriber bug")

    downstream = Raising()
    downstream.on_subscribe(CancelledSubscription())
    serial = HalfSerial(downstream)
    with pytest.raises(RuntimeError, match=r"^subscriber bug$"):
        serial.on_next(1)
    serial.terminate(None)  # the downstream broke rule 2.13: it counts as cancelled
    downstream.assert_values(1).assert_not_complete()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("run", range(30))
def test_half_serial_items_and_a_racing_terminal_never_overlap(run: int, tiny_switch_interval: None) -> None:
    # Recorder sees overlapping calls itself (TestSubscriber's lock would serialise them);
    # its hook makes each on_next last long enough for the terminal signal to land inside one.
    downstream = Recorder(initial=2**63 - 1, on_next_hook=lambda item: sum(range(100)))
    downstream.on_subscribe(CancelledSubscription())
    serial = HalfSerial(downstream)
    start = threading.Barrier(2)

    def deliver() -> None:
        start.wait()
        for item in range(2000):
            serial.on_next(item)

    delivering = threading.Thread(target=deliver)
    delivering.start()
    start.wait()
    while len(downstream.items) <= run * 20 and delivering.is_alive():  # a different point of the stream each run
        time.sleep(0)
    serial.terminate(None)
    delivering.join(10)
    assert downstream.violations == []
    assert downstream.kinds()[-1] == "on_complete"
    assert downstream.items == list(range(len(downstream.items)))


# --- Relays: the hand-off through the trampoline --------------------------------------


def _nested(depth: int, task: Any) -> None:
    """Run ``task`` inside ``depth`` nested trampolined calls."""
    if depth == 0:
        task()
    else:
        trampoline(lambda: _nested(depth - 1, task))


def test_relay_holds_a_terminal_until_its_handed_down_subscription_reached_the_downstream() -> None:
    log: list[str] = []

    class Logging(TestSubscriber[Any]):
        def on_subscribe(self, subscription: Any) -> None:
            log.append("on_subscribe")
            super().on_subscribe(subscription)

        def on_complete(self) -> None:
            log.append("on_complete")
            super().on_complete()

    relay = _Peek(Logging())

    def subscribe_and_complete() -> None:
        relay.on_subscribe(StubSubscription())  # NESTING calls deep: the hand-off waits for the bottom
        relay.on_complete()  # before the downstream has its subscription: held
        log.append("returned")

    _nested(NESTING, subscribe_and_complete)
    assert log == ["returned", "on_subscribe", "on_complete"]


def test_signal_deep_makes_a_call_that_ran_out_of_stack_again_from_the_bottom() -> None:
    log: list[str] = []

    def signal() -> None:
        log.append("signal")
        if log.count("signal") == 1:
            raise RecursionError("out of stack")

    _nested(3, lambda: (signal_deep(signal), log.append("returned")))
    assert log == ["signal", "returned", "signal"]  # again once the trampolined calls had returned


def test_a_cancel_that_runs_out_of_stack_is_made_again_from_the_bottom_not_reported(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class OutOfStackOnce(StubSubscription):
        def cancel(self) -> None:
            super().cancel()
            if self.cancels == 1:
                raise RecursionError("out of stack")

    subscription = OutOfStackOnce()
    _nested(3, lambda: call_subscription(subscription, None))
    assert subscription.cancels == 2
    assert not caplog.records
