"""AsyncIterablePublisher beyond what PublisherVerification drives: executor rejection, raising sources."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from flowpy.executors import DaemonThreadPool, direct_executor
from flowpy.flow import Subscription
from flowpy.tck import AsyncIterablePublisher
from tests.support import ManualExecutor, Recorder, RejectingExecutor


def test_rejected_first_task_signals_on_subscribe_then_on_error() -> None:
    publisher = AsyncIterablePublisher(range(3), RejectingExecutor(0, RuntimeError("full")))
    recorder = Recorder()
    publisher.subscribe(recorder)
    assert [name for name, _ in recorder.signals] == ["on_subscribe", "on_error"]
    assert str(recorder.error) == "publisher terminated: executor rejected the task: RuntimeError('full')"
    assert recorder.violations == []


def test_rejected_request_ends_the_stream_with_on_error() -> None:
    executor = RejectingExecutor(1, RuntimeError("full"))
    publisher = AsyncIterablePublisher(range(3), executor)
    recorder = Recorder()
    publisher.subscribe(recorder)
    executor.inner.run_all()
    recorder.request(1)  # the executor refuses this task; request returns normally
    assert [name for name, _ in recorder.signals] == ["on_subscribe", "on_error"]
    assert recorder.violations == []


def test_raising_iterator_signals_on_error_after_items() -> None:
    def items() -> Iterator[int]:
        yield 1
        raise KeyError("gone")

    recorder = Recorder(initial=10)
    AsyncIterablePublisher(items(), direct_executor).subscribe(recorder)
    assert [name for name, _ in recorder.signals] == ["on_subscribe", "on_next", "on_error"]
    assert repr(recorder.error) == "KeyError('gone')"


def test_batch_size_below_one_raises() -> None:
    with pytest.raises(ValueError, match=r"^batch_size must be positive, got 0$"):
        AsyncIterablePublisher(range(1), direct_executor, batch_size=0)


def test_none_subscriber_raises_type_error() -> None:
    subscriber: Any = None
    with pytest.raises(TypeError, match=r"^subscriber must not be None \(rule 1.9\)$"):
        AsyncIterablePublisher(range(1), direct_executor).subscribe(subscriber)


# --- One task per signal (no task ever finds the signal queue empty) -------------------


class _PausingLock:
    """A lock that parks one chosen thread at two points, so a test can act in between.

    In ``thread``: after its first ``release`` it sets ``paused_after_release`` and
    waits for ``resume_first``; before its next ``acquire`` it sets
    ``paused_before_acquire`` and waits for ``resume_second``. Other threads
    are not held.
    """

    def __init__(self, stopped: threading.Event) -> None:
        self._lock = threading.Lock()
        self.thread: threading.Thread | None = None
        self.paused_after_release = threading.Event()
        self.resume_first = threading.Event()
        self.paused_before_acquire = stopped  # also set by the test when the thread ends
        self.resume_second = threading.Event()
        self._released_once = False

    def _mine(self) -> bool:
        return threading.current_thread() is self.thread

    def __enter__(self) -> bool:
        if self._mine() and self._released_once and not self.paused_before_acquire.is_set():
            self.paused_before_acquire.set()
            assert self.resume_second.wait(10)
        return self._lock.__enter__()

    def __exit__(self, *exc: Any) -> None:
        self._lock.__exit__(*exc)
        if self._mine() and not self._released_once:
            self._released_once = True
            self.paused_after_release.set()
            assert self.resume_first.wait(10)


class _LockSwappingSubscriber(Recorder):
    """Installs ``lock`` into the subscription when ``on_subscribe`` arrives (no one holds the old one then)."""

    def __init__(self, lock: _PausingLock) -> None:
        super().__init__()
        self.lock = lock

    def on_subscribe(self, subscription: Subscription) -> None:
        subscription._lock = self.lock  # type: ignore[attr-defined]
        super().on_subscribe(subscription)


def test_signal_arriving_while_a_task_exits_is_served_by_exactly_one_task() -> None:
    # The task T0 (on_subscribe) is exiting; a request arrives right after it
    # let go of the "scheduled" flag, and starts T1; T1 runs before T0 looks
    # at the signal queue again. T0 must not queue a second task for the
    # signal T1 already took (that task popped an empty deque: IndexError).
    executor = ManualExecutor()
    stopped = threading.Event()  # T0 paused before its next acquire, or finished
    lock = _PausingLock(stopped)
    recorder = _LockSwappingSubscriber(lock)
    AsyncIterablePublisher(range(3), executor).subscribe(recorder)
    failures: list[BaseException] = []

    def run_subscribe_task() -> None:
        try:
            executor.run_one()
        except BaseException as exc:  # reported by the test thread
            failures.append(exc)
        finally:
            stopped.set()

    t0 = threading.Thread(target=run_subscribe_task)
    lock.thread = t0
    t0.start()
    assert lock.paused_after_release.wait(10)  # T0 cleared the flag
    recorder.request(1)  # queues T1 for the request
    lock.resume_first.set()
    assert stopped.wait(10)  # before the fix T0 saw the request pending and tries to schedule a task
    assert len(executor.tasks) == 1
    executor.run_one()  # T1 takes the request and delivers item 0
    lock.resume_second.set()
    t0.join(10)
    assert not t0.is_alive()
    executor.run_all()  # before the fix: a second task pops the empty queue
    assert failures == []
    assert recorder.kinds() == ["on_subscribe", "on_next"]
    assert recorder.violations == []


class _GateBeforeFirstAcquire:
    """A lock that parks ``thread`` before its first ``acquire`` until ``resume`` is set."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.thread: threading.Thread | None = None
        self.paused = threading.Event()
        self.resume = threading.Event()

    def __enter__(self) -> bool:
        if threading.current_thread() is self.thread and not self.paused.is_set():
            self.paused.set()
            assert self.resume.wait(10)
        return self._lock.__enter__()

    def __exit__(self, *exc: Any) -> None:
        self._lock.__exit__(*exc)


def test_signal_queued_and_taken_by_another_task_before_its_caller_schedules() -> None:
    # A request is queued but its caller has not yet claimed the task; the
    # next request's task takes it, hands over, and the last task lets go.
    # Then the first caller claims: its task must still have a signal to
    # pop (before the fix the signal was appended outside the lock, and this
    # task popped an empty deque: IndexError).
    executor = ManualExecutor()
    gate = _GateBeforeFirstAcquire()
    recorder = _LockSwappingSubscriber(gate)  # type: ignore[arg-type]
    AsyncIterablePublisher(range(3), executor).subscribe(recorder)
    executor.run_all()  # on_subscribe; no task is queued or running now
    failures: list[BaseException] = []

    def first_request() -> None:
        try:
            recorder.request(1)
        except BaseException as exc:  # reported by the test thread
            failures.append(exc)

    caller = threading.Thread(target=first_request)
    gate.thread = caller
    caller.start()
    assert gate.paused.wait(10)
    recorder.request(1)  # the second request starts a task
    executor.run_all()  # serves every pending request
    gate.resume.set()
    caller.join(10)
    assert not caller.is_alive()
    executor.run_all()  # before the fix: IndexError
    assert failures == []
    assert recorder.kinds() == ["on_subscribe", "on_next", "on_next"]  # two requests, two items
    assert recorder.items == [0, 1]
    assert recorder.violations == []


@pytest.mark.timeout(60)
def test_many_threads_requesting_get_every_item_once(tiny_switch_interval: None) -> None:
    # Requests from several threads on a real pool: no task fails, nothing is lost or doubled.
    failures: list[BaseException] = []
    pool = DaemonThreadPool(4, thread_name_prefix="helper-stress")

    def execute(task: Callable[[], object]) -> None:
        def guarded() -> None:
            try:
                task()
            except BaseException as exc:  # any task failure fails the test
                failures.append(exc)

        pool.execute(guarded)

    try:
        items = 40
        for _ in range(400):
            recorder = Recorder()
            AsyncIterablePublisher(range(items), execute, batch_size=3).subscribe(recorder)
            assert recorder.subscribed.wait(10)
            counting = threading.Lock()  # Recorder.request counts the demand unguarded

            def requester(recorder: Recorder = recorder, counting: threading.Lock = counting) -> None:
                for _ in range(items // 4):
                    with counting:
                        recorder.request(1)

            threads = [threading.Thread(target=requester) for _ in range(4)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(10)
            assert recorder.done.wait(10), recorder.kinds()
            assert [item for name, item in recorder.signals if name == "on_next"] == list(range(items))
            assert recorder.kinds()[-1] == "on_complete"
            assert recorder.violations == []
    finally:
        pool.shutdown(wait=True)
    assert failures == []
