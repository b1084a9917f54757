"""Context propagation: a subscriber's signals run in a copy of the context current at subscribe().

The tests of SubmissionPublisher and its subscriptions, and of the pipeline
whose source is one, run once per core (the ``core`` fixture,
tests/core_impl.py), on what they build from ``core``. The rest run once:
MulticastProcessor, SerialDrain and ``set_context_propagation``'s check are
the same code whichever core runs, and TransformProcessor is a
SubmissionPublisher on the core this process chose (the free-threaded CI job
runs the whole core suite once per core, each in a process of its own).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextvars import copy_context
from typing import Any

import pytest

from flowpy._core.serial import SerialDrain
from flowpy.context import context_propagation, set_context_propagation
from flowpy.executors import DaemonThreadPool, direct_executor
from flowpy.operators import flat_map, observe_on
from flowpy.processors import MulticastProcessor, TransformProcessor
from flowpy.sources import IterablePublisher
from flowpy.submission import SubmissionPublisher
from tests.context_helpers import MISSING, REQUEST_ID, ContextRecorder, in_context, in_fresh_thread
from tests.core_impl import Core
from tests.support import ManualExecutor, Recorder, RejectingExecutor

WAIT = 30.0


@pytest.fixture
def pool() -> Iterator[DaemonThreadPool]:
    executor = DaemonThreadPool(4, thread_name_prefix="context-test")
    try:
        yield executor
    finally:
        executor.shutdown()


# --- SubmissionPublisher ------------------------------------------------------------


def test_every_signal_runs_in_the_subscribe_context_on_a_pool(core: Core, pool: DaemonThreadPool) -> None:
    publisher: SubmissionPublisher[int] = core.SubmissionPublisher(executor=pool)
    recorder = ContextRecorder(initial=100)
    in_context("request-1", publisher.subscribe, recorder)

    def produce() -> str:
        REQUEST_ID.set("producer")
        for i in range(50):
            publisher.submit(i)
        publisher.close()
        return REQUEST_ID.get()

    assert in_fresh_thread(produce) == "producer"
    assert recorder.done.wait(WAIT)
    assert recorder.items == list(range(50))
    assert recorder.seen[0] == ("on_subscribe", "request-1")
    assert recorder.seen[-1] == ("on_complete", "request-1")
    assert recorder.values() == {"request-1"}
    assert recorder.violations == []


def test_on_error_and_handler_run_in_the_subscribe_context(core: Core) -> None:
    executor = ManualExecutor()
    handled: list[str] = []
    publisher: SubmissionPublisher[int] = core.SubmissionPublisher(
        executor=executor, handler=lambda subscriber, exc: handled.append(REQUEST_ID.get(MISSING))
    )

    def fail(item: Any) -> None:
        raise ValueError("boom")

    recorder = ContextRecorder(initial=1, on_next_hook=fail)
    in_context("request-1", publisher.subscribe, recorder)
    in_context("producer", publisher.submit, 1)
    in_context("producer", executor.run_all)
    assert recorder.kinds() == ["on_subscribe", "on_next", "on_error"]
    assert recorder.values() == {"request-1"}
    assert handled == ["request-1"]


def test_on_drop_runs_in_the_producer_context(core: Core) -> None:
    executor = ManualExecutor()
    publisher: SubmissionPublisher[int] = core.SubmissionPublisher(executor=executor, max_buffer_capacity=1)
    in_context("request-1", publisher.subscribe, ContextRecorder())
    dropped: list[str] = []

    def on_drop(subscriber: Any, item: int) -> bool:
        dropped.append(REQUEST_ID.get(MISSING))
        return False

    assert in_context("producer", publisher.offer, 1, on_drop) == 1
    assert in_context("producer", publisher.offer, 2, on_drop) < 0
    assert dropped == ["producer"]


def test_a_change_made_in_on_next_persists_to_the_next_signal_and_does_not_leak(core: Core) -> None:
    executor = ManualExecutor()
    publisher: SubmissionPublisher[int] = core.SubmissionPublisher(executor=executor)

    def tag(item: int) -> None:
        REQUEST_ID.set(f"after-{item}")

    changing = ContextRecorder(initial=10, on_next_hook=tag)
    other = ContextRecorder(initial=10)

    def subscribe_both() -> str:
        publisher.subscribe(changing)
        publisher.subscribe(other)
        executor.run_all()
        return REQUEST_ID.get()

    # The subscriber's copy is its own: the caller's context keeps its value.
    assert in_context("request-1", subscribe_both) == "request-1"

    def produce() -> str:
        for i in range(3):
            publisher.submit(i)
            executor.run_all()  # one task per item: the change survives across tasks
        publisher.close()
        executor.run_all()
        return REQUEST_ID.get()

    assert in_context("producer", produce) == "producer"
    assert changing.seen == [
        ("on_subscribe", "request-1"),
        ("on_next", "request-1"),
        ("on_next", "after-0"),
        ("on_next", "after-1"),
        ("on_complete", "after-2"),
    ]
    assert other.values() == {"request-1"}


def test_a_subscriber_from_a_thread_without_the_value_sees_none(core: Core) -> None:
    executor = ManualExecutor()
    publisher: SubmissionPublisher[int] = core.SubmissionPublisher(executor=executor)
    recorder = ContextRecorder(initial=5)
    in_fresh_thread(lambda: publisher.subscribe(recorder))

    def produce() -> None:
        publisher.submit(1)
        publisher.close()
        executor.run_all()

    in_context("producer", produce)
    assert recorder.kinds() == ["on_subscribe", "on_next", "on_complete"]
    assert recorder.values() == {MISSING}


def test_direct_executor_reentrant_delivery_never_enters_the_context_twice(core: Core) -> None:
    # on_next submits to its own publisher and requests more: with direct_executor
    # both happen inside the delivery that is running, in the same context.
    publisher: SubmissionPublisher[int] = core.SubmissionPublisher(executor=direct_executor)
    joined: list[ContextRecorder] = []

    def reenter(item: int) -> None:
        if item == 1:
            late = ContextRecorder(initial=10)
            joined.append(late)
            publisher.subscribe(late)  # its context: a copy of this on_next's
        if item < 3:
            publisher.submit(item + 1)
        recorder.request(1)

    recorder = ContextRecorder(initial=1, on_next_hook=reenter)
    in_context("request-1", publisher.subscribe, recorder)
    in_context("producer", publisher.submit, 0)
    in_context("producer", publisher.close)
    assert recorder.items == [0, 1, 2, 3]
    assert recorder.completed
    assert recorder.values() == {"request-1"}
    assert joined[0].items == [2, 3]
    assert joined[0].values() == {"request-1"}
    assert recorder.violations == [] and joined[0].violations == []


def test_a_blocked_producer_runs_the_consumer_task_in_the_subscriber_context(core: Core) -> None:
    # The task is queued on an executor that never runs it: the producer,
    # blocked on the full buffer, claims it and delivers on its own thread.
    executor = ManualExecutor()
    publisher: SubmissionPublisher[int] = core.SubmissionPublisher(executor=executor, max_buffer_capacity=1)
    recorder = ContextRecorder(initial=10)
    in_context("request-1", publisher.subscribe, recorder)
    executor.run_all()

    def produce() -> None:
        for i in range(4):
            publisher.submit(i)

    in_context("producer", produce)
    assert recorder.items[:3] == [0, 1, 2]
    executor.run_all()
    assert recorder.items == [0, 1, 2, 3]
    assert recorder.values() == {"request-1"}


class _ReleasedCallback:
    """An ``on_next`` made afresh at each lookup; its release runs ``owner.released()``."""

    def __init__(self, owner: _ReleaseWatcher) -> None:
        self.owner = owner

    def __call__(self, item: int) -> None:
        self.owner.items.append(item)
        self.owner.seen.append(REQUEST_ID.get(MISSING))

    def __del__(self) -> None:
        self.owner.released()


class _ReleaseWatcher(Recorder):
    """Runs ``on_release`` whenever the publisher lets go of a looked-up ``on_next``."""

    def __init__(self, initial: int) -> None:
        super().__init__(initial)
        self.seen: list[str] = []
        self.on_release: Any = None

    @property  # type: ignore[override]
    def on_next(self) -> _ReleasedCallback:
        return _ReleasedCallback(self)

    def released(self) -> None:
        hook, self.on_release = self.on_release, None
        if hook is not None:
            hook()


def test_code_run_as_a_delivery_pass_ends_cannot_start_a_task_inside_the_context(core: Core) -> None:
    # The last reference to the on_next that a delivery pass looked up goes
    # when the pass ends; code run then (here a submit that, on
    # direct_executor, would run a new consumer task at once) must find the
    # task still running, not enter the context a second time.
    publisher: SubmissionPublisher[int] = core.SubmissionPublisher(executor=direct_executor)
    watcher = _ReleaseWatcher(initial=10)
    in_context("request-1", publisher.subscribe, watcher)
    watcher.on_release = lambda: publisher.submit(1)
    in_context("producer", publisher.submit, 0)
    assert watcher.items == [0, 1]
    assert set(watcher.seen) == {"request-1"}
    assert watcher.error is None


@pytest.mark.timeout(120)
def test_consumer_tasks_handing_over_between_threads_never_collide_in_the_context(
    core: Core, pool: DaemonThreadPool, tiny_switch_interval: None
) -> None:
    # Each item starts a new consumer task, usually on another pool thread,
    # right as the previous task goes idle: the next task must be able to
    # enter the context as soon as the previous one cleared "running".
    for _ in range(20):
        publisher: SubmissionPublisher[int] = core.SubmissionPublisher(executor=pool)
        recorder = ContextRecorder(initial=2**63 - 1)
        in_context("request-1", publisher.subscribe, recorder)
        for i in range(300):
            publisher.submit(i)
        publisher.close()
        assert recorder.done.wait(WAIT)
        assert recorder.completed
        assert len(recorder.items) == 300
        assert recorder.values() == {"request-1"}


def test_a_context_entered_elsewhere_fails_the_task_and_delivers_nothing(core: Core) -> None:
    executor = ManualExecutor()
    recorder = Recorder(initial=1)
    context = copy_context()
    subscription = core.BufferedSubscription(recorder, executor.execute, 4, None, threading.Condition(), context)
    subscription.signal_subscribe()
    with pytest.raises(RuntimeError, match=r"^cannot enter context: <.*> is already entered$"):
        context.run(executor.run_one)
    assert recorder.signals == []


def test_the_context_must_be_a_context_or_none(core: Core) -> None:
    with pytest.raises(
        TypeError, match=r"^BufferedSubscription context must be a contextvars.Context or None, got 'context'$"
    ):
        core.BufferedSubscription(Recorder(), ManualExecutor().execute, 4, None, threading.Condition(), "context")


@pytest.fixture
def propagation_restored() -> Iterator[None]:
    try:
        yield
    finally:
        set_context_propagation(True)


def test_propagation_switched_off_runs_signals_in_the_delivering_thread_context(
    core: Core, propagation_restored: None
) -> None:
    executor = ManualExecutor()
    publisher: SubmissionPublisher[int] = core.SubmissionPublisher(executor=executor)
    kept = ContextRecorder(initial=1)
    in_context("request-1", publisher.subscribe, kept)
    set_context_propagation(False)
    assert not context_propagation()
    recorder = ContextRecorder(initial=1)
    in_context("request-1", publisher.subscribe, recorder)
    set_context_propagation(True)
    assert context_propagation()
    in_context("producer", publisher.submit, 1)
    in_context("producer", executor.run_all)
    assert recorder.values() == {"producer"}
    assert kept.values() == {"request-1"}  # made before the switch: keeps its copy


def test_set_context_propagation_takes_a_bool() -> None:
    with pytest.raises(TypeError, match=r"^set_context_propagation enabled must be a bool, got 1$"):
        set_context_propagation(1)  # type: ignore[arg-type]
    assert context_propagation()


# --- Processors --------------------------------------------------------------------


def test_multicast_processor_signals_each_subscriber_in_its_own_context() -> None:
    executor = ManualExecutor()
    upstream: SubmissionPublisher[int] = SubmissionPublisher(executor=executor)
    processor: MulticastProcessor[int] = MulticastProcessor(prefetch=4)
    first, second = ContextRecorder(initial=10), ContextRecorder(initial=10)
    in_context("first", processor.subscribe, first)
    in_context("second", processor.subscribe, second)
    in_context("upstream", upstream.subscribe, processor)

    def produce() -> None:
        executor.run_all()
        for i in range(6):
            upstream.submit(i)
            executor.run_all()
        upstream.close()
        executor.run_all()

    in_context("producer", produce)
    assert first.items == second.items == list(range(6))
    assert first.completed and second.completed
    assert first.values() == {"first"}
    assert second.values() == {"second"}
    late = ContextRecorder()
    in_context("late", processor.subscribe, late)
    assert late.kinds() == ["on_subscribe", "on_complete"]
    assert late.values() == {"late"}


def test_multicast_processor_on_error_for_a_bad_request_runs_in_that_subscriber_context() -> None:
    processor: MulticastProcessor[int] = MulticastProcessor(prefetch=4)
    recorder = ContextRecorder()
    in_context("request-1", processor.subscribe, recorder)
    in_context("other", recorder.request, 0)
    assert recorder.kinds() == ["on_subscribe", "on_error"]
    assert recorder.values() == {"request-1"}


def test_transform_processor_subscribers_run_in_their_subscribe_context(pool: DaemonThreadPool) -> None:
    upstream: SubmissionPublisher[int] = SubmissionPublisher(executor=pool)
    seen_by_fn: list[str] = []

    def double(item: int) -> int:
        seen_by_fn.append(REQUEST_ID.get(MISSING))
        return item * 2

    processor: TransformProcessor[int, int] = TransformProcessor(double, executor=pool)
    recorder = ContextRecorder(initial=10)
    in_context("downstream", processor.subscribe, recorder)
    in_context("stage", upstream.subscribe, processor)

    def produce() -> None:
        for i in range(5):
            upstream.submit(i)
        upstream.close()

    in_context("producer", produce)
    assert recorder.done.wait(WAIT)
    assert recorder.items == [0, 2, 4, 6, 8]
    assert recorder.values() == {"downstream"}
    assert set(seen_by_fn) == {"stage"}  # fn runs as the processor's own upstream signals


# --- A pipeline of hops -----------------------------------------------------------------


def test_the_value_set_before_subscribing_reaches_every_signal_across_every_hop(
    core: Core, pool: DaemonThreadPool
) -> None:
    # The source is on the core under test; the TransformProcessor stage on this process's core.
    source: SubmissionPublisher[int] = core.SubmissionPublisher(executor=pool)
    seen_in_stages: list[str] = []

    def inner(item: int) -> IterablePublisher[int]:
        seen_in_stages.append(REQUEST_ID.get(MISSING))
        return IterablePublisher([item, item + 100], executor=pool)

    def triple(item: int) -> int:
        seen_in_stages.append(REQUEST_ID.get(MISSING))
        return item * 3

    processor: TransformProcessor[int, int] = TransformProcessor(triple, executor=pool)
    recorder = ContextRecorder(initial=2**63 - 1)

    def subscribe() -> None:
        processor.subscribe(recorder)
        flat_map(observe_on(source, pool), inner, max_concurrency=2).subscribe(processor)

    in_context("request-1", subscribe)

    def produce() -> None:
        REQUEST_ID.set("producer")
        for i in range(20):
            source.submit(i)
        source.close()

    in_fresh_thread(produce)
    assert recorder.done.wait(WAIT)
    assert recorder.completed
    assert sorted(recorder.items) == sorted([i * 3 for i in range(20)] + [(i + 100) * 3 for i in range(20)])
    assert recorder.values() == {"request-1"}
    assert set(seen_in_stages) == {"request-1"}
    assert recorder.violations == []


# --- SerialDrain, the loop behind the operators, sources and AsyncSubscriber -----------


def test_serial_drain_passes_and_rejection_run_in_the_context_it_was_made_in() -> None:
    seen: list[tuple[str, str]] = []

    def drain(first: bool) -> bool:
        seen.append(("drain", REQUEST_ID.get(MISSING)))
        return False

    executor = ManualExecutor()
    serial = in_context("made", SerialDrain, executor.execute, drain, lambda exc: None)
    in_context("signaller", serial.signal)
    in_context("runner", executor.run_all)

    def on_reject(exc: BaseException) -> None:
        seen.append(("reject", REQUEST_ID.get(MISSING)))

    refused = in_context("made", SerialDrain, RejectingExecutor(0).execute, drain, on_reject)
    in_context("signaller", refused.signal)
    assert seen == [("drain", "made"), ("reject", "made")]


def test_serial_drain_resubmitting_inline_never_enters_its_context_twice() -> None:
    # A pass that yields re-submits itself; direct_executor runs that task
    # inside the pass's own call to the executor, in the same thread.
    passes: list[str] = []

    def drain(first: bool) -> bool:
        passes.append(REQUEST_ID.get(MISSING))
        return len(passes) < 3

    serial = in_context("made", SerialDrain, direct_executor.execute, drain, lambda exc: None)
    in_context("signaller", serial.signal)
    assert passes == ["made"] * 3
