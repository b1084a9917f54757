"""The core's error paths and reference handling, on each core.

Every test here runs once per core: it asks for the ``core`` fixture
(tests/conftest.py, tests/core_impl.py) and builds what it tests from it.
Covered: the classes a core's publisher is built on, beside its twin's;
exceptions that are not ``Exception`` raised by subscriber methods and
handlers; items whose ``__del__`` calls back into the publisher; demand at
and past the 64-bit limit; garbage collection of subscriptions caught in
reference cycles.
"""

from __future__ import annotations

import dataclasses
import gc
import subprocess
import sys
import threading
import weakref
from typing import Any

import pytest

from flowpy import _buffered, direct_executor, submission
from flowpy._buffered import ALERT, CLOSED, COMPLETE, CTL_BITS, OPENED, PENDING, QUEUED, RUNNING, STOP, WAITING
from flowpy.executors import DaemonThreadPool
from flowpy.flow import Subscriber, Subscription
from flowpy.submission import SubmissionPublisher
from tests.core_impl import CORES, Core
from tests.core_impl import CTL_BITS as SPECIFIED_BITS
from tests.support import ManualExecutor, Recorder, RejectingExecutor, wait_until_waiting

MAX = 2**63 - 1


class Abort(BaseException):
    """Not an ``Exception``: flowpy lets it propagate, as it does ``KeyboardInterrupt``."""


def manual(core: Core, capacity: int = 8, handler: Any = None) -> tuple[SubmissionPublisher[Any], ManualExecutor]:
    executor = ManualExecutor()
    return core.SubmissionPublisher(executor, capacity, handler), executor


def submit_into(publisher: SubmissionPublisher[Any], item: Any, results: list[int]) -> None:
    """Submit ``item`` to ``publisher``; append what ``submit`` returned to ``results``."""
    results.append(publisher.submit(item))


def test_each_core_builds_subscriptions_and_a_producer_lock_of_its_own_alongside_its_twin(core: Core) -> None:
    # A publisher of this core and one of its twin, alive at once (two of this
    # core where the twin is not built or disabled): each is built on its own
    # core's classes, and neither affects the other.
    twins = [other for other in CORES.values() if other is not core]
    cores = [core, *(twins or [core])]
    executors = [ManualExecutor(), ManualExecutor()]
    publishers: list[SubmissionPublisher[tuple[int, int]]] = [
        of.SubmissionPublisher(executor, 16) for of, executor in zip(cores, executors, strict=True)
    ]
    recorders = [Recorder(initial=MAX), Recorder(initial=MAX)]
    for publisher, recorder in zip(publishers, recorders, strict=True):
        publisher.subscribe(recorder)
    for of, publisher in zip(cores, publishers, strict=True):
        assert type(publisher) is of.SubmissionPublisher
        (subscription,) = publisher._subscriptions
        assert type(subscription) is of.BufferedSubscription
        assert type(publisher._lock) is type(of.ProducerLock())
    # Twins share none of these classes (checked without the Core, whose names come from the twins).
    kinds = len(set(cores))
    assert len({type(publisher) for publisher in publishers}) == kinds
    assert len({type(publisher._subscriptions[0]) for publisher in publishers}) == kinds
    assert len({type(publisher._lock) for publisher in publishers}) == kinds
    for executor in reversed(executors):  # on_subscribe, the twin's first
        executor.run_all()
    for publisher, recorder in zip(publishers, recorders, strict=True):
        assert recorder.subscription is publisher._subscriptions[0]

    # Submits to both, interleaved; while this thread holds one publisher's
    # producer lock, another thread submits to the other without waiting for it.
    for i in range(6):
        for n in (0, 1):
            accepted: list[int] = []
            with publishers[n]._lock:
                producer = threading.Thread(target=submit_into, args=(publishers[1 - n], (1 - n, i), accepted))
                producer.start()
                producer.join(10)
                assert not producer.is_alive(), "a submit waited for the producer lock of the other publisher"
            lag = 2 * i + 1 + n  # the items each subscriber holds after this submit
            assert accepted == [lag]
            assert publishers[n].submit((n, i)) == lag
    for executor in reversed(executors):
        executor.run_all()
    for n, recorder in enumerate(recorders):
        assert recorder.items == [(n, i) for i in range(6) for _ in range(2)]

    publishers[0].close()  # closing one leaves the other open and delivering
    executors[0].run_all()
    assert recorders[0].completed and not publishers[1].is_closed
    assert publishers[1].submit((1, 6)) == 1  # the lag: only this item
    executors[1].run_all()
    assert recorders[1].items[-1] == (1, 6) and not recorders[1].completed
    publishers[1].close()
    executors[1].run_all()
    for recorder in recorders:
        assert recorder.completed and recorder.violations == []


# --- BaseException from subscriber methods and handlers -----------------------------------


def test_on_subscribe_raising_base_exception_delivers_on_error_then_propagates(core: Core) -> None:
    publisher, executor = manual(core)
    abort = Abort("stop in on_subscribe")

    class Failing(Recorder):
        def on_subscribe(self, subscription: Any) -> None:
            super().on_subscribe(subscription)
            raise abort

    recorder = Failing(initial=MAX)
    publisher.subscribe(recorder)
    with pytest.raises(Abort) as raised:
        executor.run_one()
    assert raised.value is abort
    assert recorder.kinds() == ["on_subscribe", "on_error"] and recorder.error is abort
    assert publisher.submit(1) == 0 and publisher.number_of_subscribers == 0


def test_on_next_raising_base_exception_calls_handler_then_on_error_then_propagates(core: Core) -> None:
    handled: list[BaseException] = []
    publisher, executor = manual(core, handler=lambda s, e: handled.append(e))
    abort = Abort("stop in on_next")

    def fail(item: int) -> None:
        if item == 1:
            raise abort

    recorder = Recorder(initial=MAX, on_next_hook=fail)
    publisher.subscribe(recorder)
    executor.run_all()
    for i in range(4):
        publisher.submit(i)
    with pytest.raises(Abort) as raised:
        executor.run_all()
    assert raised.value is abort and handled == [abort]
    assert recorder.items == [0, 1] and recorder.error is abort
    assert recorder.kinds()[-1] == "on_error" and recorder.violations == []
    assert publisher.submit(5) == 0


def test_handler_raising_base_exception_propagates_with_the_on_next_error_as_context(core: Core) -> None:
    abort = Abort("stop in the handler")
    boom = ValueError("bad item")

    def handler(subscriber: Any, error: BaseException) -> None:
        raise abort

    publisher, executor = manual(core, handler=handler)

    def fail(item: int) -> None:
        raise boom

    recorder = Recorder(initial=MAX, on_next_hook=fail)
    publisher.subscribe(recorder)
    executor.run_all()
    publisher.submit(1)
    with pytest.raises(Abort) as raised:
        executor.run_all()
    assert raised.value is abort and raised.value.__context__ is boom
    # The stream still ends (on_error with the on_next failure), then the handler's exception goes on.
    assert recorder.kinds() == ["on_subscribe", "on_next", "on_error"] and recorder.error is boom
    assert publisher.submit(2) == 0


@pytest.mark.parametrize("method", ["on_error", "on_complete"])
def test_terminal_signal_raising_base_exception_propagates_after_release(core: Core, method: str) -> None:
    abort = Abort(f"stop in {method}")

    class Failing(Recorder):
        def on_error(self, error: BaseException) -> None:
            super().on_error(error)
            raise abort

        def on_complete(self) -> None:
            super().on_complete()
            raise abort

    publisher, executor = manual(core)
    recorder = Failing(initial=MAX)
    publisher.subscribe(recorder)
    executor.run_all()
    subscription = recorder.subscription
    assert subscription is not None
    publisher.submit(1)
    if method == "on_error":
        publisher.close_exceptionally(ValueError("closed"))
    else:
        publisher.close()
    with pytest.raises(Abort) as raised:
        executor.run_all()
    assert raised.value is abort
    assert recorder.kinds()[-1] == method
    assert subscription.is_closed and subscription.subscriber is None  # type: ignore[attr-defined]


def test_on_error_raising_exception_is_dropped_and_the_subscription_released(core: Core) -> None:
    class Failing(Recorder):
        def on_error(self, error: BaseException) -> None:
            super().on_error(error)
            raise RuntimeError("on_error failed")

    publisher, executor = manual(core)
    recorder = Failing(initial=MAX)
    publisher.subscribe(recorder)
    executor.run_all()
    subscription = recorder.subscription
    recorder.request(0)  # rule 3.9: on_error(ValueError)
    executor.run_all()
    assert isinstance(recorder.error, ValueError)
    assert subscription is not None and subscription.subscriber is None  # type: ignore[attr-defined]
    publisher.close()


# --- Items whose __del__ calls back into the publisher -------------------------------------


class Reentrant:
    """An item that, when freed, runs ``action`` (which calls the publisher)."""

    __slots__ = ("action", "value")

    def __init__(self, value: int, action: Any) -> None:
        self.value = value
        self.action = action

    def __del__(self) -> None:
        action, self.action = self.action, None
        if action is not None:
            action(self.value)


class Values(Subscriber[Any]):
    """Keeps only each item's ``value``, so an item is freed as soon as ``on_next`` returns."""

    def __init__(self, initial: int) -> None:
        self.initial = initial
        self.values: list[int] = []
        self.subscription: Subscription | None = None
        self.terminal: list[str] = []

    def on_subscribe(self, subscription: Subscription) -> None:
        self.subscription = subscription
        subscription.request(self.initial)

    def on_next(self, item: Reentrant) -> None:
        self.values.append(item.value)

    def on_error(self, error: BaseException) -> None:
        self.terminal.append("on_error")

    def on_complete(self) -> None:
        self.terminal.append("on_complete")


def test_items_freed_after_on_next_may_submit_more_items(core: Core) -> None:
    publisher: SubmissionPublisher[Any] = core.SubmissionPublisher(direct_executor, 4)

    def on_free(value: int) -> None:
        if value < 50:
            publisher.submit(Reentrant(value + 1, on_free))

    subscriber = Values(initial=MAX)
    publisher.subscribe(subscriber)
    publisher.submit(Reentrant(0, on_free))
    publisher.close()
    assert subscriber.values == list(range(51))
    assert subscriber.terminal == ["on_complete"]


def test_items_freed_after_on_next_may_cancel_and_request(core: Core) -> None:
    publisher, executor = manual(core, capacity=16)
    subscriber = Values(initial=3)

    def on_free(value: int) -> None:
        assert subscriber.subscription is not None
        if value == 2:
            subscriber.subscription.request(2)  # demand for two more, from inside the drain loop
        elif value == 4:
            subscriber.subscription.cancel()

    publisher.subscribe(subscriber)
    executor.run_all()
    for i in range(10):
        publisher.submit(Reentrant(i, on_free))
    executor.run_all()
    assert subscriber.values == [0, 1, 2, 3, 4]
    assert publisher.number_of_subscribers == 0 and subscriber.terminal == []


def test_buffered_items_freed_on_cancel_may_call_the_publisher(core: Core) -> None:
    publisher, executor = manual(core, capacity=8)
    calls: list[int] = []

    def on_free(value: int) -> None:
        calls.append(publisher.offer(100 + value))  # the subscription is closed: no one left

    recorder = Recorder()
    publisher.subscribe(recorder)
    executor.run_all()
    for i in range(5):
        publisher.submit(Reentrant(i, on_free))
    recorder.cancel()
    executor.run_all()  # the cancel drops the five buffered items
    gc.collect()
    assert sorted(calls) == [0] * 5
    assert recorder.kinds() == ["on_subscribe"]


# --- Demand at the 64-bit limit -----------------------------------------------------------


@pytest.mark.parametrize("requests", [[MAX], [MAX, MAX], [2**64], [2**200, 5], [MAX - 1, 1], [MAX - 1, 3]])
def test_demand_saturates_at_the_long_maximum(core: Core, requests: list[int]) -> None:
    publisher, executor = manual(core)
    recorder = Recorder()
    publisher.subscribe(recorder)
    executor.run_all()
    assert recorder.subscription is not None
    for n in requests:
        recorder.subscription.request(n)
    assert publisher.estimate_minimum_demand() == MAX
    for i in range(3):
        publisher.submit(i)
    executor.run_all()
    assert recorder.items == [0, 1, 2]
    assert publisher.estimate_minimum_demand() == MAX  # unbounded demand is never decremented


@pytest.mark.parametrize(
    ("n", "error"),
    [
        (-(2**70), r"^non-positive subscription request: n must be > 0 \(rule 3\.9\), got -1180591620717411303424$"),
        (-MAX - 1, r"^non-positive subscription request: n must be > 0 \(rule 3\.9\), got -9223372036854775808$"),
        (True, r"^subscription request must be an int \(rule 3\.9\), got True$"),
        (1.5, r"^subscription request must be an int \(rule 3\.9\), got 1\.5$"),
    ],
)
def test_invalid_requests_past_the_64_bit_range_signal_on_error(core: Core, n: Any, error: str) -> None:
    publisher, executor = manual(core)
    recorder = Recorder()
    publisher.subscribe(recorder)
    executor.run_all()
    assert recorder.subscription is not None
    recorder.subscription.request(n)
    executor.run_all()
    assert recorder.kinds() == ["on_subscribe", "on_error"]
    with pytest.raises((ValueError, TypeError), match=error):
        raise recorder.error  # type: ignore[misc]


def test_int_subclass_request_counts_as_its_int_value(core: Core) -> None:
    class Count(int):
        pass

    publisher, executor = manual(core)
    recorder = Recorder()
    publisher.subscribe(recorder)
    executor.run_all()
    assert recorder.subscription is not None
    recorder.subscription.request(Count(2))
    for i in range(3):
        publisher.submit(i)
    executor.run_all()
    assert recorder.items == [0, 1]
    publisher.close()


# --- Garbage collection ------------------------------------------------------------------


def test_abandoned_subscription_in_a_cycle_through_its_items_is_collected(core: Core) -> None:
    publisher, executor = manual(core)

    class Holder(Recorder):
        pass

    recorder = Holder()
    publisher.subscribe(recorder)
    executor.run_all()
    subscription = recorder.subscription

    class Node:
        pass

    item = Node()
    item.subscription = subscription  # type: ignore[attr-defined]
    publisher.submit(item)  # buffered, never requested: subscription -> item -> subscription
    publisher.close()  # on_complete waits for demand that never comes
    refs = [weakref.ref(subscription), weakref.ref(recorder), weakref.ref(item)]
    del item, recorder, subscription, publisher, executor
    gc.collect()
    assert [r() for r in refs] == [None, None, None]


def test_subscriber_and_items_are_released_on_close(core: Core) -> None:
    publisher, executor = manual(core)
    freed: list[int] = []
    subscriber = Values(initial=2)
    publisher.subscribe(subscriber)
    executor.run_all()
    for i in range(4):
        publisher.submit(Reentrant(i, freed.append))
    executor.run_all()
    assert freed == [0, 1]  # delivered: freed after on_next
    assert subscriber.subscription is not None
    subscriber.subscription.cancel()
    executor.run_all()
    assert freed == [0, 1, 2, 3]  # buffered: freed on cancel
    publisher.close()
    ref = weakref.ref(subscriber)
    del subscriber
    assert ref() is None  # no cycle to collect: the closed subscription dropped it (rule 3.13)


def test_repr_names_the_state(core: Core) -> None:
    publisher, executor = manual(core)
    recorder = Recorder(initial=3)
    publisher.subscribe(recorder)
    executor.run_all()
    publisher.submit(1)
    subscription = recorder.subscription
    assert repr(subscription) == f"<BufferedSubscription demand=3 buffered=1 subscriber={recorder!r}>"
    recorder.cancel()
    executor.run_all()
    assert repr(subscription) == "<BufferedSubscription closed subscriber=None>"
    publisher.close()


# --- Executor refusals that are not Exceptions -------------------------------------------


@pytest.mark.parametrize("path", ["request", "submit"])
def test_executor_raising_base_exception_delivers_on_error_then_propagates(core: Core, path: str) -> None:
    abort = Abort("executor stopped")
    executor = RejectingExecutor(accept=1, error=abort)
    publisher: SubmissionPublisher[int] = core.SubmissionPublisher(executor, 4)
    recorder = Recorder(initial=0 if path == "request" else MAX)
    publisher.subscribe(recorder)
    executor.inner.run_all()
    with pytest.raises(Abort) as raised:
        if path == "request":
            recorder.request(1)
        else:
            publisher.submit(1)
    assert raised.value is abort
    assert recorder.kinds() == ["on_subscribe", "on_error"] and recorder.error is abort
    assert publisher.number_of_subscribers == 0


# --- A producer that finds the producer lock held --------------------------------------------


@pytest.mark.timeout(30)
def test_a_producer_waiting_for_a_held_producer_lock_goes_on_once_it_is_released(core: Core) -> None:
    publisher, executor = manual(core)
    recorder = Recorder(initial=MAX)
    publisher.subscribe(recorder)
    executor.run_all()
    publisher._lock.acquire()  # another producer's submit, say
    results: list[int] = []
    producer = threading.Thread(target=lambda: results.append(publisher.submit(1)))
    producer.start()
    producer.join(0.5)  # it yields a few times, then blocks on the lock
    assert producer.is_alive() and results == []
    publisher._lock.release()
    producer.join(10)
    assert results == [1]
    executor.run_all()
    assert recorder.items == [1]
    publisher.close()


@pytest.mark.timeout(60)
def test_contending_producers_keep_one_order_for_every_subscriber(core: Core, tiny_switch_interval: None) -> None:
    pool = DaemonThreadPool(2)
    publisher: SubmissionPublisher[tuple[int, int]] = core.SubmissionPublisher(pool, 8)
    recorders = [Recorder(initial=MAX) for _ in range(3)]
    for recorder in recorders:
        publisher.subscribe(recorder)

    def produce(producer: int) -> None:
        for i in range(2_000):
            publisher.submit((producer, i))

    threads = [threading.Thread(target=produce, args=(p,)) for p in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    publisher.close()
    for recorder in recorders:
        assert recorder.done.wait(30) and recorder.completed
    assert recorders[0].items == recorders[1].items == recorders[2].items
    for producer in range(4):
        assert [i for p, i in recorders[0].items if p == producer] == list(range(2_000))
    pool.shutdown()


def test_interpreters_started_by_a_test_use_the_same_core(core: Core) -> None:
    code = "import flowpy; print(flowpy.implementation)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == core.name


def test_request_takes_n_by_position_or_by_name_as_subscription_request_does(core: Core) -> None:
    subscription = core.BufferedSubscription(Recorder(), ManualExecutor().execute, 4, None, threading.Condition())
    subscription.request(n=3)
    subscription.request(2)
    assert subscription.estimate_demand() == 5
    for call, message in [
        (lambda: subscription.request(), "argument"),
        (lambda: subscription.request(1, 2), "argument"),
        (lambda: subscription.request(1, n=2), "argument"),
        (lambda: subscription.request(m=1), "'m'"),
    ]:
        with pytest.raises(TypeError, match=message):
            call()
    assert subscription.estimate_demand() == 5


# --- The state word -----------------------------------------------------------------------
# Both cores keep a subscription's state in _ctl (docs/internals.md): the same
# steps leave the same bits in each.


TERMINATED = OPENED | CLOSED | RUNNING | STOP | ALERT
"""``_ctl`` once the terminal signal (or none, for a cancel) was delivered: ``RUNNING`` stays set."""


def test_ctl_bits_are_distinct_single_bits_with_the_compiled_cores_values() -> None:
    assert CTL_BITS == SPECIFIED_BITS
    values = list(CTL_BITS.values())
    assert all(value > 0 and value & (value - 1) == 0 for value in values)
    assert len(set(values)) == len(values)
    for name, value in CTL_BITS.items():
        assert getattr(_buffered, name) == value
        assert name in _buffered.__all__
    assert "CTL_BITS" in _buffered.__all__
    # The per-item looks, tables indexed by _ctl, cover every combination of the bits.
    every = range(sum(values) + 1)
    assert tuple(not ctl & RUNNING for ctl in every) == _buffered.NOT_RUNNING
    assert tuple(bool(ctl & ALERT) for ctl in every) == _buffered.ALERTED


def test_ctl_of_a_fresh_subscription_is_zero(core: Core) -> None:
    space = threading.Condition(threading.RLock())
    subscription = core.BufferedSubscription(Recorder(), ManualExecutor().execute, 8, None, space)
    assert subscription._ctl == 0


def test_ctl_moves_through_subscribe_demand_completion(core: Core) -> None:
    publisher, executor = manual(core, capacity=4)
    recorder = Recorder()
    publisher.subscribe(recorder)
    (subscription,) = publisher._subscriptions
    assert subscription._ctl == RUNNING | PENDING | QUEUED  # signal_subscribe handed a task over
    executor.run_all()
    assert subscription._ctl == OPENED  # on_subscribe delivered, the task ended
    publisher.submit(1)
    assert subscription._ctl == OPENED  # no demand: no task
    assert recorder.subscription is not None
    recorder.subscription.request(1)
    assert subscription._ctl == OPENED | RUNNING | PENDING | QUEUED
    executor.run_one()
    assert subscription._ctl == OPENED and recorder.items == [1]
    publisher.submit(2)
    publisher.close()
    assert subscription._ctl == OPENED | COMPLETE | RUNNING | PENDING | QUEUED
    executor.run_all()
    assert subscription._ctl == OPENED | COMPLETE  # due once item 2 went out, which lacks demand
    recorder.subscription.request(1)
    executor.run_all()
    assert subscription._ctl == TERMINATED  # COMPLETE cleared as on_complete was delivered
    assert recorder.kinds() == ["on_subscribe", "on_next", "on_next", "on_complete"]


def test_ctl_on_a_direct_executor_is_opened_then_terminated_by_cancel(core: Core) -> None:
    publisher: SubmissionPublisher[int] = core.SubmissionPublisher(direct_executor, 4)
    recorder = Recorder()
    publisher.subscribe(recorder)
    (subscription,) = publisher._subscriptions
    assert subscription._ctl == OPENED
    assert recorder.subscription is not None
    recorder.subscription.cancel()
    assert subscription._ctl == TERMINATED
    assert recorder.kinds() == ["on_subscribe"]
    publisher.close()


def test_ctl_of_a_cancel_before_the_first_task_keeps_the_task_then_delivers_on_subscribe_only(core: Core) -> None:
    publisher, executor = manual(core)
    recorder = Recorder()
    publisher.subscribe(recorder)
    (subscription,) = publisher._subscriptions
    subscription.cancel()
    assert subscription._ctl == RUNNING | PENDING | QUEUED | STOP | ALERT  # the queued task claims the stop
    executor.run_all()
    assert subscription._ctl == TERMINATED and recorder.kinds() == ["on_subscribe"]
    publisher.close()


def test_ctl_announces_a_waiting_producer_until_the_consumer_frees_a_slot(core: Core) -> None:
    executor = ManualExecutor()
    space = threading.Condition(threading.RLock())
    recorder = Recorder()
    subscription = core.BufferedSubscription(recorder, executor.execute, 1, None, space)
    subscription.signal_subscribe()
    executor.run_all()
    assert subscription.offer(1) == 1 and not subscription.has_space()
    with space:  # the publisher's lock, as a producer holds it
        assert subscription.wait_for_space(0) is False  # timed out, still announced
        assert subscription._ctl == OPENED | WAITING | ALERT
        subscription.stop_waiting()
        assert subscription._ctl == OPENED | ALERT
        assert subscription.wait_for_space(0) is False
    assert recorder.subscription is not None
    recorder.subscription.request(1)
    executor.run_all()  # the consumer sees ALERT at the item, clears it and wakes the producer
    assert subscription._ctl == OPENED and recorder.items == [1]
    subscription.cancel()
    executor.run_all()
    assert subscription._ctl == TERMINATED


class CountingSpace(threading.Condition):
    """The publisher's space condition, counting ``notify_all``; its ``wait`` returns at once."""

    def __init__(self) -> None:
        super().__init__(threading.RLock())
        self.notified = 0

    def notify_all(self) -> None:
        self.notified += 1
        super().notify_all()

    def wait(self, timeout: float | None = None) -> bool:
        return False


def waiting_on_a_full_buffer(core: Core, timeout: float | None) -> tuple[Recorder, Any, CountingSpace, list[int]]:
    """A subscription of capacity 8, full, without demand, and a producer that waited (``timeout``) for space.

    The returned list gets, at each ``on_next``, how many wake-ups the producer had so far.
    """
    space = CountingSpace()
    woken: list[int] = []
    subscriber = Recorder(on_next_hook=lambda item: woken.append(space.notified))
    subscription = core.BufferedSubscription(subscriber, direct_executor.execute, 8, None, space)
    subscription.signal_subscribe()
    for item in range(8):
        assert subscription.offer(item) == item + 1
    assert subscription.offer(8) == 0
    with space:  # the publisher's lock, which the producer holds
        assert subscription.wait_for_space(timeout) is False
    assert subscription._ctl == OPENED | WAITING | ALERT
    return subscriber, subscription, space, woken


@pytest.mark.parametrize(
    ("timeout", "expected"),
    [(None, [0, 0, 0, 1, 1, 1, 1, 1]), (0.5, [1] * 8)],
    ids=["submit", "offer_with_timeout"],
)
def test_a_producer_waiting_without_a_timeout_is_woken_once_the_buffer_is_half_empty(
    core: Core, timeout: float | None, expected: list[int]
) -> None:
    # Waking a producer that waits without a timeout for every freed slot
    # costs a sleep and a wake-up per item: it is woken once the buffer is
    # down to half the capacity, and then refills many slots at once. A wait
    # with a timeout is woken by the first freed slot.
    subscriber, subscription, space, woken = waiting_on_a_full_buffer(core, timeout)
    subscriber.request(8)
    assert subscriber.items == list(range(8))
    assert woken == expected and space.notified == 1
    assert subscription._ctl == OPENED


def test_a_producer_waiting_without_a_timeout_is_woken_when_the_batch_ends_above_half(core: Core) -> None:
    # The consumer stops popping with the buffer above half full (the demand
    # is used up): the end of the batch wakes the producer, which would
    # otherwise wait with free slots until more demand comes.
    subscriber, subscription, space, woken = waiting_on_a_full_buffer(core, None)
    subscriber.request(2)
    assert subscriber.items == [0, 1] and woken == [0, 0]
    assert space.notified == 1
    assert subscription._ctl == OPENED | ALERT  # a hint: the next pop clears it
    subscriber.request(1)
    assert woken == [0, 0, 1] and space.notified == 1
    assert subscription._ctl == OPENED


class StartingSpace(threading.Condition):
    """The publisher's space condition whose ``wait`` records its timeout and returns at once.

    With ``start`` given, the wait first runs it: the executor starting the
    pending task while the producer waits.
    """

    def __init__(self, start: Any = None) -> None:
        super().__init__(threading.RLock())
        self.start = start
        self.timeouts: list[float | None] = []

    def wait(self, timeout: float | None = None) -> bool:
        self.timeouts.append(timeout)
        if self.start is not None:
            self.start()
        return False


def pending_on_a_full_buffer(core: Core, space: StartingSpace, executor: ManualExecutor) -> tuple[Recorder, Any]:
    """A subscription of capacity 2 on ``executor``: full, with demand, its task pending (never started)."""
    recorder = Recorder(initial=10)
    subscription = core.BufferedSubscription(recorder, executor.execute, 2, None, space)
    subscription.signal_subscribe()
    executor.run_all()  # on_subscribe and the request
    assert subscription.offer(1) == 1 and subscription.offer(2) == 2
    assert subscription._ctl == RUNNING | PENDING | QUEUED | OPENED and len(executor.tasks) == 1
    return recorder, subscription


def test_a_producer_runs_a_pending_task_the_executor_has_not_started_at_once_with_the_gil_else_after_claim_delay(
    core: Core,
) -> None:
    # The JDK's helpAsyncBlocker: a producer blocked on a full buffer runs
    # the consumer task that the executor has not started. With the GIL it
    # does so at once; without, it first leaves the executor CLAIM_DELAY
    # seconds to start it on another core (the same for both cores).
    executor = ManualExecutor()
    space = StartingSpace()
    recorder, subscription = pending_on_a_full_buffer(core, space, executor)
    me = threading.get_ident()
    seen: list[int] = []
    recorder.on_next_hook = lambda item: seen.append(threading.get_ident())
    with space:
        assert subscription.wait_for_space(None) is True
    assert recorder.items == [1, 2] and seen == [me, me]
    assert space.timeouts == ([_buffered.CLAIM_DELAY] if _buffered.CLAIM_DELAY else [])
    executor.run_all()  # the stale task finds nothing to do
    assert recorder.items == [1, 2]


@pytest.mark.skipif(not _buffered.CLAIM_DELAY, reason="with the GIL a producer runs a pending task at once")
@pytest.mark.parametrize("timeout", [None, 0.5, 0.0002])
def test_without_the_gil_a_task_the_executor_starts_within_claim_delay_is_left_to_it(
    core: Core, timeout: float | None
) -> None:
    executor = ManualExecutor()
    started: list[int] = []

    def start() -> None:
        started.append(threading.get_ident())
        executor.run_all()

    space = StartingSpace(start)
    recorder, subscription = pending_on_a_full_buffer(core, space, executor)
    with space:
        subscription.wait_for_space(timeout)
    # The wait is the shorter of the two; the executor's run delivered both items, the producer ran nothing more.
    assert space.timeouts == [min(_buffered.CLAIM_DELAY, timeout if timeout is not None else 1.0)]
    assert recorder.items == [1, 2] and started == [threading.get_ident()] and not executor.tasks


class OwnedLock:
    """A lock that knows which thread holds it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.owner = 0

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        taken = self._lock.acquire(blocking, timeout)
        if taken:
            self.owner = threading.get_ident()
        return taken

    def release(self) -> None:
        self.owner = 0
        self._lock.release()

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc_info: object) -> None:
        self.release()


def checked_subscription_class(unlocked: list[str]) -> type[Any]:
    """A pure-core subscription that records, in ``unlocked``, every write of ``_ctl`` not under its ``_lock``."""
    slot = _buffered.BufferedSubscription._ctl  # type: ignore[attr-defined]

    def get(self: Any) -> int:
        value: int = slot.__get__(self)
        return value

    def set_(self: Any, value: int) -> None:
        lock = self._lock
        if isinstance(lock, OwnedLock) and lock.owner != threading.get_ident():
            frame = sys._getframe(1)
            unlocked.append(f"{frame.f_code.co_name}:{frame.f_lineno}")
        slot.__set__(self, value)

    class Checked(_buffered.BufferedSubscription[Any]):
        __slots__ = ()
        _ctl = property(get, set_)

        def __init__(self, *args: Any) -> None:
            super().__init__(*args)
            self._lock = OwnedLock()

    return Checked


def test_every_write_of_ctl_holds_the_subscriptions_lock() -> None:
    """The pure core's writes; the compiled core's are in sections, which C cannot leave out (see _cbuffered.c)."""
    unlocked: list[str] = []

    class Checked(submission._PySubmissionPublisher[Any]):
        _subscription_type = checked_subscription_class(unlocked)

    checked = dataclasses.replace(CORES["python"], SubmissionPublisher=Checked)

    # Subscribe, demand, delivery, completion, cancel and a refused task.
    publisher, executor = manual(checked, capacity=2)
    completing, cancelling = Recorder(initial=MAX), Recorder()
    publisher.subscribe(completing)
    publisher.subscribe(cancelling)
    executor.run_all()
    publisher.submit(1)
    executor.run_all()
    assert cancelling.subscription is not None
    cancelling.subscription.cancel()
    executor.run_all()
    publisher.close()
    executor.run_all()
    assert completing.kinds() == ["on_subscribe", "on_next", "on_complete"]
    rejecting = RejectingExecutor(1)
    refusing: SubmissionPublisher[int] = Checked(rejecting, 2)
    refused = Recorder(initial=MAX)
    refusing.subscribe(refused)
    rejecting.inner.run_all()
    refusing.submit(1)  # the executor refuses the delivery task: on_error here
    assert refused.kinds() == ["on_subscribe", "on_error"]

    # A producer waiting for space, woken by the consumer on another thread.
    publisher, executor = manual(checked, capacity=1)
    inside, release = threading.Event(), threading.Event()

    def hold_first(item: int) -> None:
        if item == 1:
            inside.set()
            assert release.wait(30)

    waited = Recorder(initial=MAX, on_next_hook=hold_first)
    publisher.subscribe(waited)
    executor.run_all()
    publisher.submit(1)
    consumer = threading.Thread(target=executor.run_all, name="consumer")
    consumer.start()
    assert inside.wait(30)
    publisher.submit(2)  # fills the buffer again
    producer = threading.Thread(target=publisher.submit, args=(3,), name="producer")
    producer.start()
    wait_until_waiting(producer)
    (subscription,) = publisher._subscriptions
    assert subscription._ctl & (WAITING | ALERT) == WAITING | ALERT
    release.set()
    producer.join(30)
    consumer.join(30)
    assert not producer.is_alive() and not consumer.is_alive()
    executor.run_all()
    assert waited.items == [1, 2, 3]
    publisher.close()
    executor.run_all()
    assert waited.kinds()[-1] == "on_complete"

    assert unlocked == []
