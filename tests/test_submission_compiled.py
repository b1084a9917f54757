"""The compiled producer path: ProducerLock, PublisherCore (submit, offer, _publish_chunk, _recover) and first_none.

These parts exist only in flowpy/_cbuffered.c; the behaviour they share with
the pure-Python reference is tested for both cores by the core modules
(tests/core_impl.py). Here: the lock's own contract, the compiled path's
error paths, and scenarios run on both cores side by side, the compiled one
with a subclass whose Python producer methods fail (the compiled path calls
none of them), including stand-in subscriptions whose every step must be
called in the reference's order with the reference's outcome.
"""

from __future__ import annotations

import copy
import re
import signal
import sys
import threading
import weakref
from collections.abc import Iterator
from typing import Any

import pytest

from flowpy import _impl
from flowpy.errors import ClosedPublisherError, ReentrantSubmitError
from flowpy.executors import direct_executor
from flowpy.submission import SubmissionPublisher, core_name
from tests.support import ManualExecutor, Recorder, wait_until_waiting

pytestmark = pytest.mark.skipif(_impl.CProducerLock is None, reason="compiled core not built")

MAX = 2**63 - 1


@pytest.fixture
def lock() -> Any:
    assert _impl.CProducerLock is not None
    return _impl.CProducerLock()


@pytest.fixture
def compiled() -> Iterator[None]:
    with _impl.using("c"):
        yield


def in_thread(fn: Any) -> Any:
    """Run ``fn`` on another thread and return its result, or the exception it raised."""
    result: list[Any] = []

    def run() -> None:
        try:
            result.append(fn())
        except Exception as exc:
            result.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(10)
    assert not thread.is_alive()
    return result[0]


# --- ProducerLock ---------------------------------------------------------------------------


def test_lock_is_reentrant_and_owned_by_one_thread(lock: Any) -> None:
    assert lock.acquire() is True
    assert lock.acquire(False) is True
    assert lock._is_owned()
    assert in_thread(lambda: lock.acquire(False)) is False
    assert in_thread(lambda: lock.acquire(blocking=False)) is False
    assert in_thread(lock._is_owned) is False
    lock.release()
    assert in_thread(lambda: lock.acquire(False)) is False  # still held once
    lock.release()
    assert not lock._is_owned()
    assert in_thread(lambda: lock.acquire(False)) is True  # that thread ends holding it
    assert lock.acquire(False) is False


def test_lock_as_a_context_manager(lock: Any) -> None:
    with lock as taken:
        assert taken is True and lock._is_owned()
        with lock:
            assert lock._is_owned()
        assert lock._is_owned()
    assert not lock._is_owned()


def test_releasing_an_unheld_lock_is_runtime_error(lock: Any) -> None:
    with pytest.raises(RuntimeError, match=r"^cannot release un-acquired lock$"):
        lock.release()
    with pytest.raises(RuntimeError, match=r"^cannot release un-acquired lock$"):
        lock._release_save()
    lock.acquire()
    raised = in_thread(lock.release)
    assert isinstance(raised, RuntimeError) and str(raised) == "cannot release un-acquired lock"
    lock.release()


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        ((True, 1), {}, r"^acquire\(\) takes at most 1 argument, got 2$"),
        ((), {"timeout": 1}, r"^acquire\(\) got an unexpected keyword argument 'timeout'$"),
        ((True,), {"blocking": True}, r"^acquire\(\) takes at most 1 argument, got 2$"),
    ],
)
def test_lock_acquire_arguments_are_checked(lock: Any, args: Any, kwargs: Any, message: str) -> None:
    with pytest.raises(TypeError, match=message):
        lock.acquire(*args, **kwargs)
    assert not lock._is_owned()


def test_lock_acquire_propagates_what_the_truth_test_of_blocking_raises(lock: Any) -> None:
    class Ambiguous:
        def __bool__(self) -> bool:
            raise ValueError("no truth")

    with pytest.raises(ValueError, match=r"^no truth$"):
        lock.acquire(Ambiguous())
    assert not lock._is_owned()


def test_lock_takes_no_constructor_arguments() -> None:
    assert _impl.CProducerLock is not None
    with pytest.raises(TypeError, match=r"^ProducerLock\(\) takes no arguments$"):
        _impl.CProducerLock(1)
    with pytest.raises(TypeError, match=r"^ProducerLock\(\) takes no arguments$"):
        _impl.CProducerLock(blocking=True)


def test_lock_acquire_restore_checks_the_state(lock: Any) -> None:
    with pytest.raises(TypeError, match=r"^_acquire_restore\(\) state must be a \(count, owner\) tuple, got 5$"):
        lock._acquire_restore(5)
    with pytest.raises(TypeError):
        lock._acquire_restore(("1", 2))
    with pytest.raises(TypeError):
        lock._acquire_restore((1,))
    assert not lock._is_owned()


def test_condition_over_the_lock_waits_and_restores_the_reentrant_count(lock: Any) -> None:
    condition = threading.Condition(lock)
    ready: list[int] = []

    def notify() -> None:
        with condition:
            ready.append(1)
            condition.notify_all()

    with condition:
        lock.acquire()  # held twice
        thread = threading.Thread(target=notify)
        thread.start()
        assert condition.wait_for(lambda: ready, timeout=10)
        assert lock._is_owned()
        lock.release()  # the second hold came back with the wait
        assert lock._is_owned()
    thread.join(10)
    assert not lock._is_owned()
    with pytest.raises(RuntimeError, match=r"^cannot release un-acquired lock$"):
        lock.release()


@pytest.mark.skipif(sys.platform == "win32", reason="SIGALRM is POSIX")
@pytest.mark.timeout(30)
def test_a_blocked_acquire_runs_signal_handlers_and_propagates_what_they_raise(lock: Any) -> None:
    class Interrupted(Exception):
        pass

    held = threading.Event()
    release = threading.Event()

    def holder() -> None:
        lock.acquire()
        held.set()
        release.wait(20)
        lock.release()

    thread = threading.Thread(target=holder)
    thread.start()
    assert held.wait(10)
    calls: list[int] = []

    def quiet(signum: int, frame: Any) -> None:
        calls.append(signum)
        if len(calls) == 1:
            signal.setitimer(signal.ITIMER_REAL, 0.02)  # once more, to raise
        else:
            raise Interrupted()

    previous = signal.signal(signal.SIGALRM, quiet)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.02)
        with pytest.raises(Interrupted):
            lock.acquire()  # the first handler returns and the wait goes on; the second raises
        assert len(calls) == 2 and not lock._is_owned()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        release.set()
        thread.join(10)
    assert lock.acquire(False) is True
    lock.release()


def test_lock_repr_and_weak_reference(lock: Any) -> None:
    assert repr(lock) == "<ProducerLock unlocked owner=0 count=0>"
    with lock:
        assert repr(lock) == f"<ProducerLock locked owner={threading.get_ident()} count=1>"
    assert weakref.ref(lock)() is lock


# --- PublisherCore.submit --------------------------------------------------------------------


def test_a_compiled_publisher_has_the_compiled_lock_and_submit(compiled: None) -> None:
    assert core_name() == "c"
    publisher: SubmissionPublisher[int] = SubmissionPublisher(ManualExecutor())
    assert type(publisher._lock) is _impl.CProducerLock
    assert isinstance(publisher, _impl.CPublisherCore)
    for name in ("submit", "offer", "_publish_chunk", "_recover"):
        assert getattr(type(publisher), name) is _impl.CPublisherCore.__dict__[name]


def test_lock_free_submit_fills_every_buffer_and_returns_the_largest_lag(compiled: None) -> None:
    executor = ManualExecutor()
    publisher: SubmissionPublisher[int] = SubmissionPublisher(executor, 8)
    first, second = Recorder(), Recorder()
    publisher.subscribe(first)
    publisher.subscribe(second)
    executor.run_all()
    second.subscription.request(1)  # type: ignore[union-attr]
    executor.run_all()
    assert [publisher.submit(i) for i in range(3)] == [1, 2, 3]  # first: no demand, nothing starts
    assert len(executor.tasks) == 1  # second's, started by item 0; items 1 and 2 took no lock
    executor.run_all()
    assert second.items == [0]
    first.subscription.request(MAX)  # type: ignore[union-attr]
    executor.run_all()
    assert first.items == [0, 1, 2]
    publisher.close()


def test_publishers_and_subscriptions_of_either_core_work_under_the_other() -> None:
    with _impl.using("python"):
        executor = ManualExecutor()
        python_made: SubmissionPublisher[int] = SubmissionPublisher(executor)
        early = Recorder(initial=MAX)
        python_made.subscribe(early)
    with _impl.using("c"):
        late = Recorder(initial=MAX)
        python_made.subscribe(late)  # a compiled subscription beside a Python one
        compiled_made: SubmissionPublisher[int] = SubmissionPublisher(executor)
        compiled_made.subscribe(Recorder(initial=MAX))
        executor.run_all()
        assert python_made.submit(1) == 1  # the compiled submit over a threading.RLock: the Python path
        executor.run_all()
    with _impl.using("python"):
        assert compiled_made.submit(2) == 1  # the reference submit over the compiled lock
        assert python_made.submit(3) == 1
    with _impl.using("c"):
        publisher: SubmissionPublisher[int] = SubmissionPublisher(executor)
        mixed = Recorder(initial=MAX)
    with _impl.using("python"):
        publisher.subscribe(mixed)  # a Python subscription in a compiled publisher
    with _impl.using("c"):
        executor.run_all()
        assert publisher.submit(4) == 1  # offered through its Python offer()
        executor.run_all()
    assert early.items == late.items == [1, 3]
    assert mixed.items == [4]
    for each in (python_made, compiled_made, publisher):
        each.close()
    executor.run_all()
    assert early.completed and late.completed and mixed.completed


class StandIn:
    """A stand-in subscription in the publisher's tuple, full unless told otherwise.

    Each method (and the properties ``is_closed`` and ``subscriber``) returns
    or raises what ``outcomes`` gives for its name: a value, an exception, or
    a list of them, taken one per call, the last one repeated. ``calls``
    records the names in the order of the calls.
    """

    def __init__(self, **outcomes: Any) -> None:
        self.outcomes: dict[str, Any] = {
            "offer": 0,
            "free_slots": 0,
            "has_space": False,
            "delivering_here": False,
            "wait_for_space": True,
            "stop_waiting": None,
            "count_drop": None,
            "resume": None,
            "is_closed": False,
            "subscriber": "the subscriber",
        }
        self.outcomes.update(outcomes)
        self.calls: list[str] = []

    def _call(self, name: str) -> Any:
        self.calls.append(name)
        outcome = self.outcomes[name]
        if isinstance(outcome, list):
            outcome = outcome.pop(0) if len(outcome) > 1 else outcome[0]
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    def offer(self, item: Any) -> Any:
        return self._call("offer")

    def free_slots(self) -> Any:
        return self._call("free_slots")

    def has_space(self) -> Any:
        return self._call("has_space")

    def delivering_here(self) -> Any:
        return self._call("delivering_here")

    def wait_for_space(self, timeout: float | None) -> Any:
        return self._call("wait_for_space")

    def stop_waiting(self) -> Any:
        return self._call("stop_waiting")

    def count_drop(self) -> Any:
        return self._call("count_drop")

    def resume(self) -> Any:
        return self._call("resume")

    @property
    def is_closed(self) -> Any:
        return self._call("is_closed")

    @property
    def subscriber(self) -> Any:
        return self._call("subscriber")


def assert_lock_free(publisher: SubmissionPublisher[Any]) -> None:
    lock: Any = publisher._lock
    assert not lock._is_owned()
    assert in_thread(lambda: publisher._lock.acquire(False)) is True  # that thread ends holding it


@pytest.mark.parametrize(
    ("outcome", "error", "message"),
    [
        (RuntimeError("offer failed"), RuntimeError, r"^offer failed$"),
        ("one", TypeError, r"integer"),
        (2**70, OverflowError, r"too large"),
    ],
)
def test_a_failing_offer_propagates_and_releases_the_lock(
    compiled: None, outcome: Any, error: type[BaseException], message: str
) -> None:
    publisher: SubmissionPublisher[int] = SubmissionPublisher(ManualExecutor())
    subscription = StandIn(offer=outcome)
    publisher._subscriptions = (subscription,)  # type: ignore[assignment]
    with pytest.raises(error, match=message):
        publisher.submit(1)
    assert_lock_free(publisher)
    assert subscription.calls == ["offer", "resume"]  # _recover resumed it


def test_a_closed_subscription_is_pruned_and_the_item_goes_to_the_rest(compiled: None) -> None:
    executor = ManualExecutor()
    publisher: SubmissionPublisher[int] = SubmissionPublisher(executor)
    staying, leaving = Recorder(initial=MAX), Recorder(initial=MAX)
    publisher.subscribe(staying)
    publisher.subscribe(leaving)
    executor.run_all()
    leaving.subscription.cancel()  # type: ignore[union-attr]
    executor.run_all()
    assert len(publisher._subscriptions) == 2  # closed, not pruned yet
    assert publisher.submit(1) == 1
    assert len(publisher._subscriptions) == 1
    executor.run_all()
    assert staying.items == [1] and leaving.items == []
    publisher.close()


def test_submit_without_subscribers_or_closed(compiled: None) -> None:
    publisher: SubmissionPublisher[int] = SubmissionPublisher(ManualExecutor())
    assert publisher.submit(1) == 0
    publisher.close()
    with pytest.raises(Exception, match=r"^cannot submit\(\): publisher was closed by close\(\)$"):
        publisher.submit(1)
    assert_lock_free(publisher)


def test_a_compiled_publisher_before_init_has_no_lock_and_no_subscriptions() -> None:
    assert _impl.CPublisherCore is not None
    bare = _impl.CPublisherCore()
    assert bare._subscriptions == () and bare._blocked == 0 and bare._closed is False
    with pytest.raises(AttributeError):
        bare._lock  # noqa: B018
    with pytest.raises(AttributeError):
        bare.submit(1)  # no _lock
    with pytest.raises(AttributeError):
        bare.offer(1, timeout=1)
    with pytest.raises(TypeError, match=r"^item must not be None \(rule 2\.13\)$"):
        bare.submit(None)
    bare._recover(_impl.CProducerLock())  # nothing to wake or resume; the lock is taken


# --- first_none --------------------------------------------------------------------------------


class EqualToEverything:
    def __eq__(self, other: object) -> bool:
        return True

    __hash__ = object.__hash__


@pytest.mark.parametrize(
    ("items", "index"),
    [([], 0), ([1, 2], 2), ([None], 0), ([1, None, None], 1), ([EqualToEverything(), 0], 2)],
)
def test_first_none_is_by_identity(items: list[Any], index: int) -> None:
    assert _impl.c_first_none is not None
    assert _impl.c_first_none(items) == index


def test_first_none_takes_only_a_list() -> None:
    assert _impl.c_first_none is not None
    with pytest.raises(TypeError, match=r"^items must be a list, got \(1, None\)$"):
        _impl.c_first_none((1, None))  # type: ignore[arg-type]


class Abort(BaseException):
    """Not an Exception: what an executor's refusal may be (say, KeyboardInterrupt)."""


@pytest.mark.parametrize("many", [False, True], ids=["submit", "submit_many"])
def test_an_executor_raising_base_exception_in_submit_propagates_and_releases_the_lock(
    compiled: None, many: bool
) -> None:
    accepted: list[Any] = []

    def execute(task: Any) -> None:
        if len(accepted) == 1:
            raise Abort()
        accepted.append(task)

    publisher: SubmissionPublisher[int] = SubmissionPublisher(execute)
    recorder = Recorder(initial=MAX)
    publisher.subscribe(recorder)
    accepted[0]()  # on_subscribe, and the request that goes idle with nothing buffered
    with pytest.raises(Abort):  # the consumer task must start: the executor raises
        if many:
            publisher.submit_many(range(3))
        else:
            publisher.submit(1)
    assert recorder.items == [] and isinstance(recorder.error, Abort)
    assert_lock_free(publisher)


# --- A full buffer drained from C (the reference's _retry and _await_space) ------------------


class Turn:
    """A stand-in for ``_turn`` whose ``notify_all`` raises from call ``fail_at`` on (counting from 1)."""

    def __init__(self, fail_at: int) -> None:
        self.fail_at = fail_at
        self.calls = 0

    def notify_all(self) -> None:
        self.calls += 1
        if self.calls >= self.fail_at:
            raise RuntimeError("no notify")


def full_buffers(
    subscribers: int, hook: Any = None, idle: int = 0
) -> tuple[SubmissionPublisher[int], ManualExecutor, list[Recorder]]:
    """Capacity 1, each subscriber holding item 0 and its task queued; the first's on_next runs ``hook``.

    The last ``idle`` subscribers request nothing, so no task of theirs is queued.
    """
    executor = ManualExecutor()
    publisher: SubmissionPublisher[int] = SubmissionPublisher(executor, 1)
    recorders = [
        Recorder(initial=0 if i >= subscribers - idle else MAX, on_next_hook=hook if i == 0 else None)
        for i in range(subscribers)
    ]
    for recorder in recorders:
        publisher.subscribe(recorder)
    executor.run_all()
    publisher.submit(0)
    return publisher, executor, recorders


def test_an_on_next_raising_base_exception_in_a_drain_propagates_and_leaves_the_producer_unblocked(
    compiled: None,
) -> None:
    def abort(item: int) -> None:
        raise Abort()

    publisher, _, (recorder,) = full_buffers(1, abort)
    with pytest.raises(Abort):
        publisher.submit(1)
    assert isinstance(recorder.error, Abort) and publisher._blocked == 0
    assert_lock_free(publisher)


# --- The compiled _publish_chunk (submit_many) --------------------------------------------------


class ChunkSubscription:
    """A stand-in subscription for submit_many: ``free_slots`` and ``extend`` return or raise what they are given.

    ``on_extend`` runs first in each ``extend``; ``parts`` records what ``extend`` was given.
    """

    is_closed = False

    def __init__(self, free: Any = 8, extended: Any = None, offered: Any = 1, on_extend: Any = None) -> None:
        self.free, self.extended, self.offered, self.on_extend = free, extended, offered, on_extend
        self.parts: list[list[Any]] = []
        self.offers: list[Any] = []
        self.resumed = 0  # resume() calls: made by a producer call that an exception cut short

    @staticmethod
    def outcome(value: Any) -> Any:
        if isinstance(value, BaseException):
            raise value
        return value

    def free_slots(self) -> Any:
        return self.outcome(self.free)

    def extend(self, items: list[Any]) -> Any:
        if self.on_extend is not None:
            self.on_extend()
        self.parts.append(items)
        return self.outcome(len(items) if self.extended is None else self.extended)

    def offer(self, item: Any) -> Any:
        self.offers.append(item)
        return self.outcome(self.offered)

    def resume(self) -> None:
        self.resumed += 1


def chunk_publisher(*subscriptions: ChunkSubscription) -> SubmissionPublisher[int]:
    publisher: SubmissionPublisher[int] = SubmissionPublisher(ManualExecutor())
    publisher._subscriptions = subscriptions  # type: ignore[assignment]
    return publisher


def test_publish_chunk_of_stand_in_subscriptions_extends_each_by_the_least_room(compiled: None) -> None:
    roomy, tight = ChunkSubscription(free=8), ChunkSubscription(free=3)
    publisher = chunk_publisher(roomy, tight)
    tight_free = iter([3, 0, 8])
    tight.free_slots = lambda: next(tight_free)  # type: ignore[method-assign]
    assert publisher.submit_many(range(5)) == 5
    # 3 fit at once; then the tight one is full and item 3 goes the general way (offer); then item 4
    assert roomy.parts == tight.parts == [[0, 1, 2], [4]]
    assert_lock_free(publisher)


@pytest.mark.parametrize(
    ("subscription", "error", "message"),
    [
        (ChunkSubscription(free=RuntimeError("no room")), RuntimeError, r"^no room$"),
        (ChunkSubscription(free="one"), TypeError, r"integer"),
        (ChunkSubscription(extended=RuntimeError("no extend")), RuntimeError, r"^no extend$"),
        (ChunkSubscription(extended="one"), TypeError, r"integer"),
        (ChunkSubscription(free=0, offered=RuntimeError("no offer")), RuntimeError, r"^no offer$"),
    ],
    ids=["free_slots raises", "free_slots not an int", "extend raises", "extend not an int", "offer raises"],
)
def test_a_failing_stand_in_subscription_in_submit_many_propagates_and_releases_the_lock(
    compiled: None, subscription: ChunkSubscription, error: type[BaseException], message: str
) -> None:
    publisher = chunk_publisher(subscription)
    with pytest.raises(error, match=message):
        publisher.submit_many(range(4))
    assert_lock_free(publisher)
    assert subscription.resumed == 1  # items it took before the failure are not left waiting


@pytest.mark.parametrize(
    ("args", "error", "message"),
    [
        ((), TypeError, r"^_publish_chunk\(\) takes 2 arguments \(0 given\)$"),
        (((1, 2), 2), TypeError, r"^chunk must be a list, got \(1, 2\)$"),
        (([1, 2], "2"), TypeError, r"integer"),
        (([1, 2], 3), ValueError, r"^_publish_chunk\(\): end must be in \[0, 2\], got 3$"),
        (([1, 2], -1), ValueError, r"^_publish_chunk\(\): end must be in \[0, 2\], got -1$"),
    ],
)
def test_publish_chunk_checks_its_arguments(compiled: None, args: Any, error: type[Exception], message: str) -> None:
    publisher = chunk_publisher(ChunkSubscription())
    with pytest.raises(error, match=message):
        publisher._publish_chunk(*args)


def test_publish_chunk_needs_a_tuple_of_subscriptions(compiled: None) -> None:
    publisher = chunk_publisher()
    publisher._subscriptions = [ChunkSubscription()]  # type: ignore[assignment]
    with pytest.raises(TypeError, match=r"^_publish_chunk\(\): _subscriptions must be a tuple$"):
        publisher.submit_many(range(2))
    del publisher._subscriptions
    with pytest.raises(TypeError, match=r"^_publish_chunk\(\): _subscriptions must be a tuple$"):
        publisher.submit_many(range(2))
    publisher._subscriptions = ()


@pytest.mark.parametrize("free", [2, 0], ids=["then extended", "then offered"])
def test_publish_chunk_stops_if_the_chunk_shrinks_under_it(compiled: None, free: int) -> None:
    chunk = [1, 2, 3, 4]
    frees = iter([2, free])
    shrinking = ChunkSubscription(on_extend=chunk.clear)
    shrinking.free_slots = lambda: next(frees)  # type: ignore[method-assign]
    publisher = chunk_publisher(shrinking)
    with pytest.raises(RuntimeError, match=r"^_publish_chunk\(\): the chunk shrank while it was published$"):
        publisher._publish_chunk(chunk, 4)
    assert shrinking.parts == [[1, 2]]


def test_submit_many_over_subscriptions_of_either_core_under_either() -> None:
    executor = ManualExecutor()
    publishers: list[SubmissionPublisher[int]] = []
    recorders = [Recorder(initial=MAX) for _ in range(4)]
    for publisher_core, subscription_cores in (("c", ("python", "c")), ("python", ("c", "python"))):
        with _impl.using(publisher_core):  # type: ignore[arg-type]
            publisher: SubmissionPublisher[int] = SubmissionPublisher(executor, 4)
        for core in subscription_cores:
            with _impl.using(core):  # type: ignore[arg-type]
                publisher.subscribe(recorders[len(publishers) * 2 + subscription_cores.index(core)])
        publishers.append(publisher)
    executor.run_all()
    for publisher_core, publisher in zip(("c", "python"), publishers, strict=True):
        with _impl.using(publisher_core):  # type: ignore[arg-type]
            assert publisher.submit_many(range(10)) == 10  # fits, then full: extend, then offer and wait
        executor.run_all()
        publisher.close()
    executor.run_all()
    for recorder in recorders:
        assert recorder.items == list(range(10)) and recorder.completed and recorder.violations == []


def test_extend_takes_only_a_list(compiled: None) -> None:
    publisher: SubmissionPublisher[int] = SubmissionPublisher(ManualExecutor())
    publisher.subscribe(Recorder())
    (subscription,) = publisher._subscriptions
    with pytest.raises(TypeError, match=r"^items must be a list, got \(1, 2\)$"):
        subscription.extend((1, 2))  # type: ignore[arg-type]
    publisher.close()


# --- Allocation failures, injected one at a time ------------------------------------------------


def fail_each_allocation(setup: Any, operation: Any, check: Any, allocations: int = 300) -> int:
    """Run ``operation(setup())`` once for each of its first ``allocations`` allocations, making just that one fail.

    Each run either succeeds (a failure that was handled, say in a
    subscriber, or past the operation's last allocation) or raises
    ``MemoryError``; ``check(state)`` then holds. Returns how many runs raised.
    """
    testcapi = pytest.importorskip("_testcapi")
    if not hasattr(testcapi, "set_nomemory"):
        pytest.skip("_testcapi.set_nomemory is not available")
    raised = 0
    for n in range(allocations):
        state = setup()
        testcapi.set_nomemory(n, n + 1)
        try:
            operation(state)
        except MemoryError:
            raised += 1
        finally:
            testcapi.remove_mem_hooks()
        check(state)
    return raised


def test_a_drain_from_c_that_cannot_allocate_raises_memory_error_and_leaves_the_producer_unblocked(
    compiled: None,
) -> None:
    def setup() -> Any:
        return full_buffers(1)[0]

    def check(publisher: Any) -> None:
        assert publisher._blocked == 0 and not publisher._lock._is_owned()

    assert fail_each_allocation(setup, lambda publisher: publisher.submit(1), check) > 0


def test_a_chunk_that_cannot_allocate_raises_memory_error_and_releases_the_lock(compiled: None) -> None:
    def setup() -> Any:
        executor = ManualExecutor()
        publisher: SubmissionPublisher[int] = SubmissionPublisher(executor, 64)
        publisher.subscribe(Recorder(initial=MAX))  # compiled
        with _impl.using("python"):
            publisher.subscribe(Recorder(initial=MAX))  # pure Python: extended through a slice
        executor.run_all()
        full = ChunkSubscription(extended=0)
        publisher._subscriptions = (*publisher._subscriptions, full)  # offered each item: offer_each
        return publisher

    def check(publisher: Any) -> None:
        assert not publisher._lock._is_owned()

    assert fail_each_allocation(setup, lambda publisher: publisher.submit_many(range(40)), check) > 0


def test_an_executor_raising_base_exception_after_a_drain_from_c_propagates(compiled: None) -> None:
    # The producer drains the full buffer; meanwhile the queued task runs and
    # finds nothing to do, so the next item's task must be handed over anew.
    refusing = False

    def execute(task: Any) -> None:
        if refusing:
            raise Abort()
        executor.execute(task)

    def run_queued_then_refuse(item: int) -> None:
        nonlocal refusing
        executor.run_all()
        refusing = True

    executor = ManualExecutor()
    publisher: SubmissionPublisher[int] = SubmissionPublisher(execute, 1)
    recorder = Recorder(initial=MAX, on_next_hook=run_queued_then_refuse)
    publisher.subscribe(recorder)
    executor.run_all()
    publisher.submit(0)  # buffered; its task queued
    with pytest.raises(Abort):
        publisher.submit(1)
    assert recorder.items == [0] and isinstance(recorder.error, Abort) and publisher._blocked == 0
    assert_lock_free(publisher)


# --- The whole producer path in C, as the reference ------------------------------------------------


class Strict(SubmissionPublisher[int]):
    """A compiled publisher whose Python producer methods fail: the compiled path must call none of them."""

    def _forbidden(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the compiled producer path called a Python method of the publisher")

    _publish = _publish_locked = _retry = _forbidden  # type: ignore[assignment]
    _wait_turn = _closed_error = _offer_each = _await_space = _forbidden  # type: ignore[assignment]

    def _live(self) -> Any:
        # subscribe() and the queries, Python with either core, prune through it.
        if sys._getframe(1).f_code.co_name in ("_subscribe", "_prune"):
            return super()._live()
        return self._forbidden()


BOTH = pytest.mark.parametrize("core", ["python", "c"])


def assert_released(publisher: SubmissionPublisher[Any]) -> None:
    """This thread does not hold the producer lock, and another takes and releases it."""
    lock: Any = publisher._lock
    assert not lock._is_owned()
    assert in_thread(lambda: lock.acquire(False) and (lock.release() or True)) is True


def publisher_of(core: str, executor: Any, capacity: int = 1) -> SubmissionPublisher[int]:
    """A publisher of core ``core`` (made and used under it): the reference, or a :class:`Strict` compiled one."""
    return (Strict if core == "c" else SubmissionPublisher)(executor, capacity)


def chain(exc: BaseException | None) -> list[tuple[str, str]]:
    """An exception and its ``__context__`` chain, as (type name, message) pairs."""
    links = []
    while exc is not None:
        links.append((type(exc).__name__, str(exc)))
        exc = exc.__context__
    return links


def blocked_producers(
    publisher: SubmissionPublisher[int], *items: int
) -> tuple[list[threading.Thread], list[BaseException | int]]:
    """One thread per item submits it; returns once the first waits for space and the others for the turn."""
    results: list[BaseException | int] = []

    def produce(item: int) -> None:
        try:
            results.append(publisher.submit(item))
        except BaseException as exc:
            results.append(exc)

    threads = [threading.Thread(target=produce, args=(item,), daemon=True) for item in items]
    for n, thread in enumerate(threads):
        thread.start()
        wait_until_waiting(thread)
        assert publisher._turn_waiters == n  # the first waits for space, holding the turn
    assert publisher._blocked == threads[0].ident
    return threads, results


@BOTH
@pytest.mark.timeout(60)
def test_submit_waits_for_space_and_for_the_turn(core: str) -> None:
    with _impl.using(core):  # type: ignore[arg-type]
        executor = ManualExecutor()
        publisher = publisher_of(core, executor)
        recorder = Recorder()
        publisher.subscribe(recorder)
        executor.run_all()
        assert publisher.submit(0) == 1
        threads, results = blocked_producers(publisher, 1, 2)
        recorder.request(MAX)
        for thread in threads:  # each item frees the space the next producer waits for
            while thread.is_alive():
                executor.run_all()
                thread.join(0.01)
        executor.run_all()
        assert recorder.items == [0, 1, 2] and results == [1, 1]
        assert publisher._blocked == 0 and publisher._turn_waiters == 0
        assert_released(publisher)
        publisher.close()


@BOTH
@pytest.mark.parametrize("exceptionally", [False, True], ids=["close", "close_exceptionally"])
@pytest.mark.timeout(60)
def test_closing_while_producers_wait_for_space_and_for_the_turn_fails_both(core: str, exceptionally: bool) -> None:
    with _impl.using(core):  # type: ignore[arg-type]
        executor = ManualExecutor()
        publisher = publisher_of(core, executor)
        publisher.subscribe(Recorder())
        executor.run_all()
        publisher.submit(0)
        threads, results = blocked_producers(publisher, 1, 2)
        if exceptionally:
            publisher.close_exceptionally(ValueError("gone"))
        else:
            publisher.close()
        for thread in threads:
            thread.join(10)
            assert not thread.is_alive()
        how = "close_exceptionally(); check closed_exception" if exceptionally else "close()"
        assert (
            chain(results[0])
            == chain(results[1])
            == [("ClosedPublisherError", f"cannot submit(): publisher was closed by {how}")]
        )
        assert publisher._blocked == 0 and publisher._turn_waiters == 0
        with pytest.raises(
            ClosedPublisherError, match=rf"^cannot offer\(\): publisher was closed by {re.escape(how)}$"
        ):
            publisher.offer(3, timeout=1)
        with pytest.raises(ClosedPublisherError, match=r"^cannot submit\(\)"):
            publisher.submit_many([3])
        assert_released(publisher)


@BOTH
def test_offer_with_timeout_and_on_drop(core: str) -> None:
    with _impl.using(core):  # type: ignore[arg-type]
        executor = ManualExecutor()
        publisher = publisher_of(core, executor)
        recorder = Recorder()
        publisher.subscribe(recorder)
        executor.run_all()
        assert publisher.offer(0) == 1
        assert publisher.offer(1, timeout=0.001) == -1  # waited, then dropped
        assert publisher.offer(1, timeout=-5) == -1  # no wait
        drops: list[tuple[Any, int]] = []
        assert publisher.offer(2, lambda subscriber, item: drops.append((subscriber, item)) or False) == -1

        def refuse(subscriber: Any, item: int) -> bool:
            raise KeyError("no drop")

        with pytest.raises(KeyError, match="no drop"):
            publisher.offer(3, refuse, timeout=0)

        def make_room(subscriber: Any, item: int) -> bool:
            recorder.request(1)
            executor.run_all()  # item 0 goes: the retry fits
            return True

        assert publisher.offer(4, make_room, timeout=0.001) == 1
        assert drops == [(recorder, 2)]
        (reading,) = publisher.snapshot().subscribers
        assert reading.dropped == 3  # 1 twice and 2; not 3, whose on_drop raised
        with pytest.raises(TypeError, match=r"^on_drop must be callable or None, got 5$"):
            publisher.offer(5, 5)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match=r"^timeout must be a number of seconds, got nan$"):
            publisher.offer(5, timeout=float("nan"))
        with pytest.raises(TypeError, match=r"^item must not be None \(rule 2\.13\)$"):
            publisher.offer(None, timeout=1)  # type: ignore[arg-type]
        assert_released(publisher)
        recorder.request(MAX)
        publisher.close()
        executor.run_all()
        assert recorder.items == [0, 4] and recorder.completed


@BOTH
def test_submit_many_through_full_buffers_and_a_part_that_no_longer_fits(core: str) -> None:
    with _impl.using(core):  # type: ignore[arg-type]
        executor = ManualExecutor()
        publisher = publisher_of(core, executor, 2)
        recorder = Recorder(initial=MAX)
        publisher.subscribe(recorder)
        executor.run_all()
        assert publisher.submit_many(range(7)) == 7  # each full buffer drained by this producer
        executor.run_all()
        assert recorder.items == list(range(7))
        full = ChunkSubscription(extended=0)  # takes no part whole: offered each item (_offer_each)
        publisher._subscriptions = (*publisher._subscriptions, full)  # type: ignore[assignment]
        assert publisher.submit_many([7, 8, 9]) == 3
        executor.run_all()
        assert full.parts == [[7, 8]] and full.offers == [7, 8, 9] and recorder.items == list(range(10))
        publisher._subscriptions = publisher._subscriptions[:1]
        assert_released(publisher)
        publisher.close()


@BOTH
def test_reentrant_submit_and_offer_raise_or_drop(core: str) -> None:
    with _impl.using(core):  # type: ignore[arg-type]
        publisher = publisher_of(core, direct_executor)
        outcomes: list[Any] = []

        def reenter(item: int) -> None:
            if item == 0:
                outcomes.append(publisher.submit(1))  # fits
                outcomes.append(publisher.offer(2, timeout=60))  # full, and only this thread drains: dropped
                try:
                    publisher.submit(3)
                except ReentrantSubmitError as exc:
                    outcomes.append(exc)

        recorder = Recorder(initial=MAX, on_next_hook=reenter)
        publisher.subscribe(recorder)
        publisher.submit(0)
        assert outcomes[:2] == [1, -1] and type(outcomes[2]) is ReentrantSubmitError
        assert re.fullmatch(
            r"cannot submit\(\): the buffer of <.*Recorder.*> is full and this thread is inside one of its "
            r"methods, so it could never drain; submit from another thread, use offer\(\), or deliver on a "
            r"pool executor",
            str(outcomes[2]),
        )
        assert recorder.items == [0, 1] and recorder.error is None
        publisher._blocked = threading.get_ident()  # as if this thread's outer submit waited for space
        for call, name in ((lambda: publisher.submit(4), "submit"), (lambda: publisher.offer(4), "offer")):
            with pytest.raises(ReentrantSubmitError) as raised:
                call()
            assert str(raised.value) == (
                f"cannot {name}(): this thread's own submit() is waiting for buffer space, and a subscriber it "
                f"delivers to meanwhile must not publish to the same publisher"
            )
        publisher._blocked = 0
        assert_released(publisher)
        publisher.close()
        assert recorder.completed


@BOTH
@pytest.mark.parametrize("recovery_fails", [False, True], ids=["recovered", "recovery fails"])
@pytest.mark.timeout(60)
def test_an_interrupt_inside_condition_wait_after_it_released_the_lock(core: str, recovery_fails: bool) -> None:
    # _recover takes the lock back and wakes the producers waiting for the
    # turn; a failure there is raised with the interrupt as its __context__.
    with _impl.using(core):  # type: ignore[arg-type]
        executor = ManualExecutor()
        publisher = publisher_of(core, executor)
        stalled = Recorder()
        publisher.subscribe(stalled)
        executor.run_all()
        publisher.submit(1)
        space: Any = publisher._space
        turn = publisher._turn

        def interrupted_wait(timeout: float | None = None) -> bool:
            del space.wait  # the next waits are real ones
            space._release_save()
            publisher._turn_waiters = 1  # as if a producer waited for the turn this one holds
            if recovery_fails:
                publisher._turn = Turn(fail_at=1)  # type: ignore[assignment]
            raise KeyboardInterrupt("inside Condition.wait")

        space.wait = interrupted_wait
        with pytest.raises(BaseException) as raised:
            publisher.submit(2)
        expected = [("KeyboardInterrupt", "inside Condition.wait")]
        assert chain(raised.value) == ([("RuntimeError", "no notify"), *expected] if recovery_fails else expected)
        assert publisher._blocked == 0
        assert_released(publisher)
        publisher._turn, publisher._turn_waiters = turn, 0
        stalled.request(MAX)
        executor.run_all()
        publisher.submit(3)  # the publisher goes on
        publisher.close()
        executor.run_all()
        assert stalled.items == [1, 3] and stalled.completed


def outcome_of(core: str, subscription: StandIn, call: Any) -> tuple[Any, ...]:
    """What ``call(publisher)`` does to a publisher of core ``core`` whose one subscription is ``subscription``."""
    with _impl.using(core):  # type: ignore[arg-type]
        publisher = publisher_of(core, ManualExecutor())
        publisher._subscriptions = (subscription,)  # type: ignore[assignment]
        try:
            result: Any = call(publisher)
        except BaseException as exc:  # compared below, whatever it is
            result = chain(exc)
        assert_released(publisher)
        return result, subscription.calls, publisher._blocked, len(publisher._subscriptions)


@pytest.mark.parametrize(
    ("outcomes", "call", "expected"),
    [
        (
            {"offer": RuntimeError("no offer"), "resume": RuntimeError("no resume")},
            "submit",
            [("RuntimeError", "no resume"), ("RuntimeError", "no offer")],
        ),
        ({"delivering_here": RuntimeError("no check")}, "submit", [("RuntimeError", "no check")]),
        (
            {"delivering_here": True},
            "submit",
            [
                (
                    "ReentrantSubmitError",
                    "cannot submit(): the buffer of 'the subscriber' is full and this thread is inside one of its "
                    "methods, so it could never drain; submit from another thread, use offer(), or deliver on a "
                    "pool executor",
                )
            ],
        ),
        (
            {"delivering_here": True, "subscriber": RuntimeError("no subscriber")},
            "submit",
            [("RuntimeError", "no subscriber")],
        ),
        ({"delivering_here": True}, "offer_waiting", -1),
        ({"has_space": RuntimeError("no look")}, "submit", [("RuntimeError", "no look")]),
        ({"wait_for_space": RuntimeError("no wait")}, "submit", [("RuntimeError", "no wait")]),
        (
            {"has_space": [False, True], "stop_waiting": RuntimeError("no stop")},
            "submit",
            [("RuntimeError", "no stop")],
        ),
        ({"has_space": [False, True], "offer": [0, 3]}, "submit", 3),
        (
            {"has_space": True, "offer": [0, -1], "is_closed": RuntimeError("no pruning")},
            "submit",
            [("RuntimeError", "no pruning")],
        ),
        ({"has_space": True, "offer": [0, -1], "is_closed": True}, "submit", 0),
        ({"offer": [0, 0], "count_drop": RuntimeError("no count")}, "offer_dropping", [("RuntimeError", "no count")]),
        ({"subscriber": RuntimeError("no subscriber")}, "offer_dropping", [("RuntimeError", "no subscriber")]),
        ({"subscriber": None}, "offer_dropping", -1),
        ({"offer": [0, 0, 2], "has_space": [False, True]}, "offer_retrying", 2),
        ({"offer": -1, "is_closed": "yes"}, "submit", 0),
        ({"offer": RuntimeError("no offer")}, "submit_many", [("RuntimeError", "no offer")]),
    ],
)
def test_each_step_of_the_producer_path_as_the_reference(outcomes: dict[str, Any], call: str, expected: Any) -> None:
    # The same stand-in subscription under each core: the same calls, in the
    # same order, and the same result or exception chain.
    calls = {
        "submit": lambda publisher: publisher.submit(1),
        "offer_waiting": lambda publisher: publisher.offer(1, timeout=60),
        "offer_dropping": lambda publisher: publisher.offer(1, lambda subscriber, item: True),
        "offer_retrying": lambda publisher: publisher.offer(1, lambda subscriber, item: True, timeout=60),
        "submit_many": lambda publisher: publisher.submit_many([1]),
    }
    reference = outcome_of("python", StandIn(**copy.deepcopy(outcomes)), calls[call])
    compiled = outcome_of("c", StandIn(**copy.deepcopy(outcomes)), calls[call])
    assert compiled == reference
    assert reference[0] == expected
