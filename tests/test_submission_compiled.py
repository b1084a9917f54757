"""The compiled core's own parts: ProducerLock, PublisherCore (submit, offer, _publish_chunk, _recover), first_none
and the compiled subscription's state word.

These parts exist only in flowpy/_cbuffered.c; the behaviour they share with
the pure-Python reference is tested for both cores by the tests that ask for
the ``core`` fixture (tests/core_impl.py). Here:

- the lock's own contract, and first_none;
- on publishers of the compiled twin (``CORES["c"].SubmissionPublisher``,
  the ``compiled`` fixture): the producer path's error paths, with stand-in
  subscriptions, executors and subscribers that raise, and allocation
  failures injected one at a time;
- subscriptions of either core under the producer path of either twin
  (:func:`subscribe_with`);
- scenarios run on each core (the ``core`` fixture): blocked producers,
  close, offer and on_drop, submit_many, re-entrant calls, interrupts and
  failing notifies and prunes, the compiled twin made by :func:`strict`,
  whose Python producer methods fail, so the compiled path provably calls no
  method of the publisher by name;
- stand-in subscriptions whose every step the compiled path must call in the
  reference's order, with the reference's result or exception chain;
- the compiled subscription's state word (``_ctl``, ``CTL_BITS``).
"""

from __future__ import annotations

import copy
import functools
import importlib
import re
import signal
import sys
import threading
import weakref
from typing import Any

import pytest

from flowpy import _impl
from flowpy._buffered import FREE_THREADED
from flowpy.errors import ClosedPublisherError, ReentrantSubmitError
from flowpy.executors import direct_executor
from flowpy.submission import TWINS, SubmissionPublisher
from tests.core_impl import CORES, CTL_BITS, Core, not_built_reason
from tests.support import ManualExecutor, Recorder, wait_until_waiting

pytestmark = pytest.mark.skipif("c" not in CORES, reason=str(not_built_reason()))

MAX = 2**63 - 1

PublisherClass = type[SubmissionPublisher[Any]]

REFERENCE_PRODUCER_METHODS = (
    "_publish",
    "_publish_locked",
    "_publish_to",
    "_retry",
    "_await_space",
    "_wait_turn",
    "_offer_each",
    "_closed_error",
)
"""The reference twin's Python helpers of its producer path, which the compiled twin does in C."""


@pytest.fixture
def lock() -> Any:
    return CORES["c"].ProducerLock()


@pytest.fixture
def compiled() -> PublisherClass:
    """The SubmissionPublisher of the compiled core."""
    return CORES["c"].SubmissionPublisher


def twin_of(core: Core) -> PublisherClass:
    """The twin of ``core`` that scenarios run on: the reference, or the compiled one as :func:`strict` makes it."""
    return strict(core) if core.name == "c" else core.SubmissionPublisher


def subscribe_with(publisher: SubmissionPublisher[Any], core: str, subscriber: Any) -> None:
    """Subscribe ``subscriber`` to ``publisher`` through a subscription of ``core``, whichever core the publisher is on.

    Each twin builds only its own core's subscriptions; this swaps the
    publisher's subscription class for one ``subscribe``. The producer paths
    take any object with the subscription's interface (the compiled one calls
    the methods of what is not its own BufferedSubscription), and the tests
    that use this check them with the other core's real one.
    """
    publisher._subscription_type = CORES[core].BufferedSubscription  # type: ignore[misc]
    try:
        publisher.subscribe(subscriber)
    finally:
        del publisher._subscription_type


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
    with pytest.raises(TypeError, match=r"^ProducerLock\(\) takes no arguments$"):
        CORES["c"].ProducerLock(1)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=r"^ProducerLock\(\) takes no arguments$"):
        CORES["c"].ProducerLock(blocking=True)  # type: ignore[call-arg]


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


def test_a_compiled_publisher_has_the_compiled_lock_and_submit(compiled: PublisherClass) -> None:
    assert compiled is TWINS["c"] and not issubclass(compiled, TWINS["python"])
    publisher: SubmissionPublisher[int] = compiled(ManualExecutor())
    assert type(publisher._lock) is _impl.CProducerLock
    assert isinstance(publisher, _impl.CPublisherCore)
    for name in ("submit", "offer", "_publish_chunk", "_recover"):
        assert getattr(type(publisher), name) is _impl.CPublisherCore.__dict__[name]
    for name in REFERENCE_PRODUCER_METHODS:  # the reference's helpers: the compiled twin has none of them
        assert callable(vars(TWINS["python"])[name]) and not hasattr(compiled, name)


def test_lock_free_submit_fills_every_buffer_and_returns_the_largest_lag(compiled: PublisherClass) -> None:
    executor = ManualExecutor()
    publisher: SubmissionPublisher[int] = compiled(executor, 8)
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


def either_core_under_either_twin(capacity: int) -> tuple[ManualExecutor, list[Any], list[Recorder]]:
    """A publisher of each core, each with a subscription of each core; their recorders request everything."""
    executor = ManualExecutor()
    publishers: list[Any] = [CORES[twin].SubmissionPublisher(executor, capacity) for twin in ("python", "c")]
    recorders: list[Recorder] = []
    for publisher in publishers:
        for core in ("python", "c"):
            recorders.append(Recorder(initial=MAX))
            subscribe_with(publisher, core, recorders[-1])
        assert [type(each) for each in publisher._subscriptions] == [
            CORES["python"].BufferedSubscription,
            CORES["c"].BufferedSubscription,
        ]
    executor.run_all()
    return executor, publishers, recorders


def test_subscriptions_of_either_core_work_under_either_twin() -> None:
    executor, publishers, recorders = either_core_under_either_twin(16)
    for publisher in publishers:
        assert publisher.submit(1) == 1  # the compiled submit offers to a Python subscription through offer()
        assert publisher.submit(2) == 2
    executor.run_all()
    for publisher in publishers:
        publisher.close()
    executor.run_all()
    for recorder in recorders:
        assert recorder.items == [1, 2] and recorder.completed and recorder.violations == []


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
    compiled: PublisherClass, outcome: Any, error: type[BaseException], message: str
) -> None:
    publisher: SubmissionPublisher[int] = compiled(ManualExecutor())
    subscription = StandIn(offer=outcome)
    publisher._subscriptions = (subscription,)  # type: ignore[assignment]
    with pytest.raises(error, match=message):
        publisher.submit(1)
    assert_lock_free(publisher)
    assert subscription.calls == ["offer", "resume"]  # _recover resumed it


def test_a_closed_subscription_is_pruned_and_the_item_goes_to_the_rest(compiled: PublisherClass) -> None:
    executor = ManualExecutor()
    publisher: SubmissionPublisher[int] = compiled(executor)
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


def test_submit_without_subscribers_or_closed(compiled: PublisherClass) -> None:
    publisher: SubmissionPublisher[int] = compiled(ManualExecutor())
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
    compiled: PublisherClass, many: bool
) -> None:
    accepted: list[Any] = []

    def execute(task: Any) -> None:
        if len(accepted) == 1:
            raise Abort()
        accepted.append(task)

    publisher: SubmissionPublisher[int] = compiled(execute)
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
    publisher_class: PublisherClass, subscribers: int, hook: Any = None, idle: int = 0
) -> tuple[SubmissionPublisher[int], ManualExecutor, list[Recorder]]:
    """Capacity 1, each subscriber holding item 0 and its task queued; the first's on_next runs ``hook``.

    The last ``idle`` subscribers request nothing, so no task of theirs is queued.
    """
    executor = ManualExecutor()
    publisher: SubmissionPublisher[int] = publisher_class(executor, 1)
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
    compiled: PublisherClass,
) -> None:
    def abort(item: int) -> None:
        raise Abort()

    publisher, _, (recorder,) = full_buffers(compiled, 1, abort)
    with pytest.raises(Abort):
        publisher.submit(1)
    assert isinstance(recorder.error, Abort) and publisher._blocked == 0
    assert_lock_free(publisher)


@pytest.mark.parametrize("raising_on_next", [False, True], ids=["drained", "on_next raised"])
def test_a_failing_turn_notify_after_a_drain_propagates_and_leaves_the_producer_unblocked(
    core: Core, raising_on_next: bool
) -> None:
    def abort(item: int) -> None:
        if raising_on_next:
            raise Abort()

    publisher, _, (recorder,) = full_buffers(twin_of(core), 1, abort)
    turn, publisher._turn = publisher._turn, Turn(fail_at=1)  # type: ignore[assignment]
    publisher._turn_waiters = 1  # as if a producer waited for its turn
    with pytest.raises(RuntimeError, match=r"^no notify$") as raised:
        publisher.submit(1)
    # Each later notify (the recovery's) fails too and is chained to the one
    # before; what on_next raised is at the root, as a finally: block chains it.
    *notifies, root = chain(raised.value)
    if raising_on_next:
        assert root == ("Abort", "") and isinstance(recorder.error, Abort)
    else:
        assert root == ("RuntimeError", "no notify") and recorder.error is None
    assert notifies and set(notifies) == {("RuntimeError", "no notify")}
    assert recorder.items == [0] and publisher._blocked == 0
    assert_released(publisher)
    publisher._turn, publisher._turn_waiters = turn, 0
    publisher.close()


def test_a_failing_turn_notify_for_a_buffer_freed_meanwhile_propagates(core: Core) -> None:
    # The first subscriber's on_next runs the queue, so the second's task,
    # which frees the second buffer before the producer looks at it.
    def run_queued(item: int) -> None:
        if item == 0:
            executor.run_all()

    publisher, executor, (first, second) = full_buffers(twin_of(core), 2, run_queued)
    turn, publisher._turn = publisher._turn, Turn(fail_at=2)  # type: ignore[assignment]
    publisher._turn_waiters = 1
    with pytest.raises(RuntimeError, match=r"^no notify$"):
        publisher.submit(1)
    assert first.items == second.items == [0] and publisher._blocked == 0
    assert_released(publisher)
    publisher._turn, publisher._turn_waiters = turn, 0
    publisher.close()


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


def chunk_publisher(publisher_class: PublisherClass, *subscriptions: ChunkSubscription) -> SubmissionPublisher[int]:
    publisher: SubmissionPublisher[int] = publisher_class(ManualExecutor())
    publisher._subscriptions = subscriptions  # type: ignore[assignment]
    return publisher


def test_publish_chunk_of_stand_in_subscriptions_extends_each_by_the_least_room(compiled: PublisherClass) -> None:
    roomy, tight = ChunkSubscription(free=8), ChunkSubscription(free=3)
    publisher = chunk_publisher(compiled, roomy, tight)
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
    compiled: PublisherClass, subscription: ChunkSubscription, error: type[BaseException], message: str
) -> None:
    publisher = chunk_publisher(compiled, subscription)
    with pytest.raises(error, match=message):
        publisher.submit_many(range(4))
    assert_lock_free(publisher)
    assert subscription.resumed == 1  # items it took before the failure are not left waiting


class FailingPrune(ChunkSubscription):
    """A closed stand-in whose ``is_closed`` raises, so pruning it fails."""

    @property  # type: ignore[override]
    def is_closed(self) -> bool:
        raise RuntimeError("no pruning")


def test_a_closed_stand_in_is_pruned_and_a_failing_prune_propagates(core: Core) -> None:
    closed, staying = ChunkSubscription(extended=-1), ChunkSubscription()
    closed.is_closed = True
    publisher = chunk_publisher(twin_of(core), closed, staying)
    assert publisher.submit_many(range(2)) == 2
    assert publisher._subscriptions == (staying,) and staying.parts == [[0, 1]]
    failing = FailingPrune(extended=-1)
    publisher._subscriptions = (failing,)  # type: ignore[assignment]
    with pytest.raises(RuntimeError, match=r"^no pruning$"):
        publisher.submit_many(range(2))
    assert publisher._subscriptions == (failing,)
    assert_released(publisher)
    publisher._subscriptions = ()
    publisher.close()


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
def test_publish_chunk_checks_its_arguments(
    compiled: PublisherClass, args: Any, error: type[Exception], message: str
) -> None:
    publisher = chunk_publisher(compiled, ChunkSubscription())
    with pytest.raises(error, match=message):
        publisher._publish_chunk(*args)


def test_publish_chunk_needs_a_tuple_of_subscriptions(compiled: PublisherClass) -> None:
    publisher = chunk_publisher(compiled)
    publisher._subscriptions = [ChunkSubscription()]  # type: ignore[assignment]
    with pytest.raises(TypeError, match=r"^_publish_chunk\(\): _subscriptions must be a tuple$"):
        publisher.submit_many(range(2))
    del publisher._subscriptions
    with pytest.raises(TypeError, match=r"^_publish_chunk\(\): _subscriptions must be a tuple$"):
        publisher.submit_many(range(2))
    publisher._subscriptions = ()


@pytest.mark.parametrize("free", [2, 0], ids=["then extended", "then offered"])
def test_publish_chunk_stops_if_the_chunk_shrinks_under_it(compiled: PublisherClass, free: int) -> None:
    chunk = [1, 2, 3, 4]
    frees = iter([2, free])
    shrinking = ChunkSubscription(on_extend=chunk.clear)
    shrinking.free_slots = lambda: next(frees)  # type: ignore[method-assign]
    publisher = chunk_publisher(compiled, shrinking)
    with pytest.raises(RuntimeError, match=r"^_publish_chunk\(\): the chunk shrank while it was published$"):
        publisher._publish_chunk(chunk, 4)
    assert shrinking.parts == [[1, 2]]


def test_submit_many_over_subscriptions_of_either_core_under_either_twin() -> None:
    executor, publishers, recorders = either_core_under_either_twin(4)
    for publisher in publishers:
        assert publisher.submit_many(range(10)) == 10  # fits, then full: extend, then offer and wait
        executor.run_all()
        publisher.close()
    executor.run_all()
    for recorder in recorders:
        assert recorder.items == list(range(10)) and recorder.completed and recorder.violations == []


def test_extend_takes_only_a_list(compiled: PublisherClass) -> None:
    publisher: SubmissionPublisher[int] = compiled(ManualExecutor())
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
    if FREE_THREADED:
        # set_nomemory swaps in a hook for every allocator domain, and a free-threaded
        # build allocates objects from heaps of its own that such a hook bypasses:
        # CPython itself then crashes inside mimalloc. The paths run on the GIL build.
        pytest.skip("_testcapi.set_nomemory is unsafe on a free-threaded build")
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
    compiled: PublisherClass,
) -> None:
    def setup() -> Any:
        return full_buffers(compiled, 1)[0]

    def check(publisher: Any) -> None:
        assert publisher._blocked == 0 and not publisher._lock._is_owned()

    assert fail_each_allocation(setup, lambda publisher: publisher.submit(1), check) > 0


def test_a_chunk_that_cannot_allocate_raises_memory_error_and_releases_the_lock(compiled: PublisherClass) -> None:
    def setup() -> Any:
        executor = ManualExecutor()
        publisher: SubmissionPublisher[int] = compiled(executor, 64)
        publisher.subscribe(Recorder(initial=MAX))  # compiled
        subscribe_with(publisher, "python", Recorder(initial=MAX))  # pure Python: extended through a slice
        executor.run_all()
        full = ChunkSubscription(extended=0)
        publisher._subscriptions = (*publisher._subscriptions, full)  # offered each item: offer_each
        return publisher

    def check(publisher: Any) -> None:
        assert not publisher._lock._is_owned()

    assert fail_each_allocation(setup, lambda publisher: publisher.submit_many(range(40)), check) > 0


def test_an_executor_raising_base_exception_after_a_drain_from_c_propagates(compiled: PublisherClass) -> None:
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
    publisher: SubmissionPublisher[int] = compiled(execute, 1)
    recorder = Recorder(initial=MAX, on_next_hook=run_queued_then_refuse)
    publisher.subscribe(recorder)
    executor.run_all()
    publisher.submit(0)  # buffered; its task queued
    with pytest.raises(Abort):
        publisher.submit(1)
    assert recorder.items == [0] and isinstance(recorder.error, Abort) and publisher._blocked == 0
    assert_lock_free(publisher)


# --- The whole producer path in C, as the reference ------------------------------------------------


@functools.cache
def strict(core: Core) -> PublisherClass:
    """``core``'s twin, subclassed to fail in every Python producer method: the compiled path must call none.

    The compiled twin derives from the shared base only, so it has none of
    :data:`REFERENCE_PRODUCER_METHODS`; this subclass defines each of them to
    fail, as it does the base's ``_live`` and ``_acquire_contended`` outside
    the Python methods that use them. A producer path that looks a method of
    ``self`` up by name finds these and fails, as the reference twin's does
    (:func:`test_strict_fails_a_producer_path_that_calls_methods_of_self`).
    """

    def forbidden(self: Any, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the producer path called a Python method of the publisher")

    def only_from(name: str, *callers: str) -> Any:
        def method(self: Any, *args: Any) -> Any:
            if sys._getframe(1).f_code.co_name not in callers:
                forbidden(self)
            return getattr(super(strict_class, self), name)(*args)

        return method

    namespace: dict[str, Any] = dict.fromkeys(REFERENCE_PRODUCER_METHODS, forbidden)
    namespace["_live"] = only_from("_live", "_subscribe", "_prune")  # subscribe() and the queries, Python
    namespace["_acquire_contended"] = only_from("_acquire_contended", "submit_many")  # the shared loop, Python
    strict_class: PublisherClass = type("Strict", (core.SubmissionPublisher,), namespace)
    return strict_class


@pytest.mark.parametrize(
    ("close", "call", "expected"),
    [
        (False, lambda publisher: publisher.offer(1, timeout=0), -1),
        (False, lambda publisher: publisher.offer(1, lambda subscriber, item: False), -1),
        (True, lambda publisher: publisher.submit(1), ClosedPublisherError),
        (True, lambda publisher: publisher.submit_many([1]), ClosedPublisherError),
    ],
    ids=["offer to a full buffer", "offer with on_drop", "submit when closed", "submit_many when closed"],
)
def test_strict_fails_a_producer_path_that_calls_methods_of_self(
    core: Core, close: bool, call: Any, expected: Any
) -> None:
    # With a full buffer, or closed, the reference calls its helpers by name
    # and fails; the compiled path does what the reference would without them.
    executor = ManualExecutor()
    publisher = strict(core)(executor, 1)
    recorder = Recorder()
    publisher.subscribe(recorder)
    executor.run_all()
    (subscription,) = publisher._subscriptions
    assert subscription.offer(0) == 1  # as submit would; the buffer is full
    if close:
        publisher.close()
    if core.name == "python":
        with pytest.raises(AssertionError, match=r"^the producer path called a Python method of the publisher$"):
            call(publisher)
    elif isinstance(expected, type):
        with pytest.raises(expected):
            call(publisher)
    else:
        assert call(publisher) == expected
    assert_released(publisher)
    publisher.close()


def assert_released(publisher: SubmissionPublisher[Any]) -> None:
    """This thread does not hold the producer lock, and another takes and releases it."""
    lock: Any = publisher._lock
    assert not lock._is_owned()
    assert in_thread(lambda: lock.acquire(False) and (lock.release() or True)) is True


def publisher_of(core: Core, executor: Any, capacity: int = 1) -> SubmissionPublisher[int]:
    """A publisher of :func:`twin_of` ``core``."""
    return twin_of(core)(executor, capacity)


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


@pytest.mark.timeout(60)
def test_submit_waits_for_space_and_for_the_turn(core: Core) -> None:
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


@pytest.mark.parametrize("exceptionally", [False, True], ids=["close", "close_exceptionally"])
@pytest.mark.timeout(60)
def test_closing_while_producers_wait_for_space_and_for_the_turn_fails_both(core: Core, exceptionally: bool) -> None:
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
    with pytest.raises(ClosedPublisherError, match=rf"^cannot offer\(\): publisher was closed by {re.escape(how)}$"):
        publisher.offer(3, timeout=1)
    with pytest.raises(ClosedPublisherError, match=r"^cannot submit\(\)"):
        publisher.submit_many([3])
    assert_released(publisher)


def test_offer_with_timeout_and_on_drop(core: Core) -> None:
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


def test_submit_many_through_full_buffers_and_a_part_that_no_longer_fits(core: Core) -> None:
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


def test_reentrant_submit_and_offer_raise_or_drop(core: Core) -> None:
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


@pytest.mark.parametrize("recovery_fails", [False, True], ids=["recovered", "recovery fails"])
@pytest.mark.timeout(60)
def test_an_interrupt_inside_condition_wait_after_it_released_the_lock(core: Core, recovery_fails: bool) -> None:
    # _recover takes the lock back and wakes the producers waiting for the
    # turn; a failure there is raised with the interrupt as its __context__.
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


def outcome_of(core: Core, subscription: StandIn, call: Any) -> tuple[Any, ...]:
    """What ``call(publisher)`` does to a publisher of core ``core`` whose one subscription is ``subscription``."""
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
        ({"offer": -1, "is_closed": RuntimeError("no pruning")}, "submit", [("RuntimeError", "no pruning")]),
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
    reference = outcome_of(CORES["python"], StandIn(**copy.deepcopy(outcomes)), calls[call])
    compiled = outcome_of(CORES["c"], StandIn(**copy.deepcopy(outcomes)), calls[call])
    assert compiled == reference
    assert reference[0] == expected


# --- The compiled subscription's state word --------------------------------------------------


@pytest.fixture
def cbuffered() -> Any:
    return importlib.import_module("flowpy._cbuffered")


def flags(subscription: Any) -> set[str]:
    """The names of the bits set in ``subscription._ctl``; every bit has a name."""
    ctl = subscription._ctl
    named = {name for name, bit in CTL_BITS.items() if ctl & bit}
    assert sum(CTL_BITS[name] for name in named) == ctl, f"unnamed bits in {ctl:#x}"
    return named


def compiled_subscription(
    cbuffered: Any, execute: Any, capacity: int = 4, space: threading.Condition | None = None
) -> tuple[Recorder, Any]:
    subscriber = Recorder()
    subscription = cbuffered.BufferedSubscription(
        subscriber, execute, capacity, None, space if space is not None else threading.Condition()
    )
    return subscriber, subscription


def test_the_state_bits_have_the_reference_names_and_values(cbuffered: Any) -> None:
    assert cbuffered.CTL_BITS == CTL_BITS
    for name, bit in CTL_BITS.items():
        assert getattr(cbuffered, name) == bit


def test_the_state_word_is_read_only(cbuffered: Any) -> None:
    _, subscription = compiled_subscription(cbuffered, direct_executor.execute)
    with pytest.raises(AttributeError):
        subscription._ctl = cbuffered.CLOSED


def test_the_state_word_through_a_task_life_on_a_manual_executor(cbuffered: Any) -> None:
    executor = ManualExecutor()
    subscriber, subscription = compiled_subscription(cbuffered, executor.execute)
    assert subscription._ctl == 0
    subscription.signal_subscribe()
    assert flags(subscription) == {"RUNNING", "PENDING", "QUEUED"}
    assert executor.run_all() == 1
    assert flags(subscription) == {"OPENED"}
    assert subscriber.signals == [("on_subscribe", None)]

    subscription.request(2)
    assert flags(subscription) == {"OPENED", "RUNNING", "PENDING", "QUEUED"}
    assert subscription.claim_pending() is True  # as a blocked producer does
    assert flags(subscription) == {"OPENED", "RUNNING", "QUEUED"}
    subscription.consume()  # nothing buffered: the exit handshake lets the task go
    assert flags(subscription) == {"OPENED", "QUEUED"}  # the handed-over task has yet to start
    assert executor.run_all() == 1  # it starts, finds nothing pending, and ends
    assert flags(subscription) == {"OPENED"}

    assert subscription.offer("a") == 1
    assert flags(subscription) == {"OPENED", "RUNNING", "PENDING", "QUEUED"}
    subscription.signal_complete()  # a task is under way: no second one
    assert flags(subscription) == {"OPENED", "RUNNING", "PENDING", "QUEUED", "COMPLETE"}
    assert len(executor.tasks) == 1
    assert executor.run_all() == 1
    assert flags(subscription) == {"OPENED", "CLOSED", "RUNNING", "STOP", "ALERT"}  # on_complete delivered
    assert subscriber.items == ["a"] and subscriber.completed
    assert subscription.is_closed and not subscription.has_task()


def test_the_state_word_on_a_direct_executor_and_after_cancel(cbuffered: Any) -> None:
    subscriber, subscription = compiled_subscription(cbuffered, direct_executor.execute)
    subscription.signal_subscribe()
    assert flags(subscription) == {"OPENED"}
    subscription.request(1)
    assert flags(subscription) == {"OPENED"}  # the task ran at once and let go
    subscription.cancel()
    closed = {"OPENED", "CLOSED", "STOP", "ALERT", "RUNNING"}
    assert flags(subscription) == closed
    subscription.request(1)
    subscription.signal_complete()
    subscription.cancel()
    assert flags(subscription) == closed  # terminal: nothing changes it
    assert subscription.offer("late") == -1
    assert subscriber.signals == [("on_subscribe", None)]


def test_a_cancel_before_the_first_task_runs_opens_then_closes(cbuffered: Any) -> None:
    executor = ManualExecutor()
    subscriber, subscription = compiled_subscription(cbuffered, executor.execute)
    subscription.signal_subscribe()
    subscription.cancel()  # the task is pending: no second one
    assert flags(subscription) == {"RUNNING", "PENDING", "QUEUED", "STOP", "ALERT"}
    assert executor.run_all() == 1
    assert flags(subscription) == {"OPENED", "CLOSED", "STOP", "ALERT", "RUNNING"}
    assert subscriber.signals == [("on_subscribe", None)]  # a cancel is silent


def test_an_error_due_closes_with_the_error(cbuffered: Any) -> None:
    executor = ManualExecutor()
    subscriber, subscription = compiled_subscription(cbuffered, executor.execute)
    subscription.signal_subscribe()
    executor.run_all()
    assert subscription.offer("dropped") == 1  # no demand: buffered
    error = RuntimeError("due")
    subscription.signal_error(error)
    assert flags(subscription) == {"OPENED", "STOP", "ALERT", "RUNNING", "PENDING", "QUEUED"}
    executor.run_all()
    assert flags(subscription) == {"OPENED", "CLOSED", "STOP", "ALERT", "RUNNING"}
    assert subscriber.items == [] and subscriber.error is error


@pytest.mark.timeout(60)
def test_a_producer_blocked_for_space_gets_the_slot_a_small_request_frees(core: Core) -> None:
    # request(1) on a full buffer of 4 leaves it above half full and ends
    # the batch: the producer is woken, and its submit returns before any
    # further demand.
    publisher = twin_of(core)(max_buffer_capacity=4)
    recorder = Recorder()
    publisher.subscribe(recorder)
    assert recorder.subscribed.wait(10)
    producer = threading.Thread(target=lambda: [publisher.submit(item) for item in range(5)])
    producer.start()
    wait_until_waiting(producer)
    recorder.request(1)
    producer.join(10)
    assert not producer.is_alive()
    recorder.request(4)
    publisher.close()
    assert recorder.done.wait(10)
    assert recorder.items == list(range(5)) and recorder.completed


def test_a_waiting_producer_sets_waiting_and_alert_and_the_consumer_clears_them(cbuffered: Any) -> None:
    space = threading.Condition()
    subscriber, subscription = compiled_subscription(cbuffered, direct_executor.execute, capacity=1, space=space)
    subscription.signal_subscribe()
    assert subscription.offer(1) == 1 and subscription.offer(2) == 0  # full, no demand
    with space:  # the publisher's lock, which the producer holds
        assert subscription.wait_for_space(0) is False
        assert flags(subscription) == {"OPENED", "WAITING", "ALERT"}
        subscription.stop_waiting()
        assert flags(subscription) == {"OPENED", "ALERT"}  # a hint: the consumer clears it
        assert subscription.wait_for_space(0) is False
        assert flags(subscription) == {"OPENED", "WAITING", "ALERT"}
        subscription.request(1)  # pops the item, sees ALERT and WAITING, wakes the producer
        assert flags(subscription) == {"OPENED"}
        assert subscription.has_space()
        assert subscription.wait_for_space(0) is True  # room: WAITING is not left set
        assert flags(subscription) == {"OPENED", "ALERT"}
    assert subscriber.items == [1]
