"""The stress scenario engine shared by ``tests/stress`` and ``benchmarks/stress.py``.

One scenario, fully decided by ``(kind, seed)``: producer threads submit
``(producer, seq)`` items through a topology (a SubmissionPublisher alone, a
MulticastProcessor, a TransformProcessor, or one of the buffering operators
``observe_on``, ``on_backpressure_buffer``, ``buffer``, ``merge``,
``flat_map``) to several probe subscribers, at a 1 µs switch interval. Two
more kinds run the SubmissionPublisher alone under a disturbance: ``fork``
forks the process while producers and subscribers run (and another thread
keeps subscribing to new publishers), and checks that each child can
publish on the default executor and on the scenario's pool at once and exits
at once and silently; ``interrupt`` raises ``KeyboardInterrupt`` into
producer threads inside ``submit`` (``PyThreadState_SetAsyncExc``: where
CPython would run a Ctrl-C handler). Probes
request in random batches from ``on_next`` or from their own thread, some
cancel (from ``on_next`` or from another thread), some raise ``Exception`` or
``KeyboardInterrupt`` from ``on_next``; the executor of one stage may start
refusing tasks or be shut down while items flow.

Checks, each a line in :class:`StressFailure`:

* per producer, a probe sees items in submission order, none lost or
  duplicated: a probe that ended normally sees every accepted item, one
  that ended early (it cancelled, raised, or got an allowed error) a prefix;
* rule 1.1 (no more ``on_next`` than requested) and serial signals (1.3);
* every probe ends with exactly one terminal signal, or by its own choice
  (cancel, raise) with at most an ``on_error`` of its own exception after;
* no hang: every wait is bounded; a hang reports a dump of every thread;
* no exception escapes a thread, except the ``KeyboardInterrupt`` a probe
  raised, which must not be swallowed (it reaches ``threading.excepthook``
  or the thread that called into flowpy);
* ``submit()`` raises nothing while producing, except an injected interrupt;
  after an interrupted ``submit`` its item may or may not be delivered (to
  each probe), every other accepted item is, in order, and the producer lock
  is free once the producers are done;
* a forked child publishes and exits at once, warns about nothing, and the
  parent's probes see their checks through as without the fork.
"""

from __future__ import annotations

import ctypes
import dataclasses
import json
import logging
import os
import random
import select
import signal
import sys
import threading
import time
import traceback
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from flowpy import _exit, operators
from flowpy.errors import ClosedPublisherError, MissingBackpressureError
from flowpy.executors import DEFAULT, DaemonThreadPool, Task
from flowpy.flow import Publisher, Subscriber, Subscription
from flowpy.processors import MulticastProcessor, TransformProcessor
from flowpy.sources import IterablePublisher
from flowpy.submission import SubmissionPublisher
from tests.support import ThreadExceptionLog

__all__ = ["KINDS", "Scenario", "StressFailure", "repro_command", "run", "run_many"]

MAX = 2**63 - 1
Item = tuple[int, int]

KINDS = (
    "publisher",
    "multicast",
    "transform",
    "observe_on",
    "on_backpressure_buffer",
    "buffer",
    "merge",
    "flat_map",
    "fork",
    "interrupt",
)
"""The topologies a scenario can take (``fork`` and ``interrupt`` are the SubmissionPublisher alone)."""


class StressFailure(AssertionError):
    """A scenario broke a check; the message names the seed and how to rerun it.

    ``problems`` holds one line per broken check, ``scenario`` what was run.
    """

    def __init__(self, message: str, scenario: Scenario, problems: list[str]) -> None:
        super().__init__(message)
        self.scenario = scenario
        self.problems = problems


class Refused(RuntimeError):
    """What the rejecting executor raises once it refuses tasks."""


class RunEnded(Exception):
    """What the sources are closed with when a run ends early, to release blocked producers."""


class ProbeInterrupt(KeyboardInterrupt):
    """The KeyboardInterrupt a probe raises from ``on_next``."""


class ProbeError(Exception):
    """The Exception a probe raises from ``on_next``."""


class AsyncInterrupt(KeyboardInterrupt):
    """The KeyboardInterrupt the ``interrupt`` kind raises into a producer thread."""


def repro_command(kind: str, seed: int) -> str:
    """The command that reruns one scenario."""
    return f"python benchmarks/stress.py --kind {kind} --seed {seed}"


# --- Executors that fail -------------------------------------------------------


class RejectingExecutor:
    """Hands tasks to ``pool`` until armed and ``accept`` more were taken; then refuses every task."""

    def __init__(self, pool: DaemonThreadPool, accept: int) -> None:
        self.pool = pool
        self.accept = accept
        self.armed = False
        self._lock = threading.Lock()

    def execute(self, task: Task) -> None:
        with self._lock:
            if self.armed:
                if self.accept <= 0:
                    raise Refused("executor refused the task")
                self.accept -= 1
        self.pool.execute(task)


# --- Interrupts into producer threads --------------------------------------------------


def _set_async_exc(thread_id: int, exc: type[BaseException] | None) -> int:
    """Make ``thread_id`` raise ``exc`` at its next check for pending work; ``None`` withdraws a pending one.

    Returns how many threads it reached. More than one happens when the
    target is starting a thread: CPython makes the new thread's state with
    the starter's id, which the new thread replaces only once it runs.
    """
    target = ctypes.c_ulong(thread_id)
    if exc is None:
        return int(ctypes.pythonapi.PyThreadState_SetAsyncExc(target, None))
    return int(ctypes.pythonapi.PyThreadState_SetAsyncExc(target, ctypes.py_object(exc)))


class InterruptWindows:
    """Where :class:`AsyncInterrupt` may be raised: in a producer thread, inside its ``submit``, once per call.

    A producer opens its window just before ``submit`` and closes it just
    after (``close`` withdraws an interrupt that did not fire yet), both
    inside the ``try`` that catches the interrupt, so that none lands in the
    harness's bookkeeping. A probe's signal that runs on a producer thread
    (a blocked ``submit`` delivers) pauses the window first: an interrupt
    lands at its start or not at all, never in the middle of its checks.
    """

    def __init__(self, producers: int) -> None:
        self._local = threading.local()  # .index: the producer this thread is
        self._lock = threading.Lock()
        # --- Guarded by self._lock -------------------------------------
        self._threads = [0] * producers  # thread ids
        self._open = [False] * producers  # inside submit, not paused
        self._posted = [False] * producers  # an interrupt was raised into this submit already
        self.posted = 0
        self.stray = 0  # interrupts withdrawn at once because they reached a second thread

    def open(self, index: int) -> None:
        """Producer ``index`` is about to call ``submit``."""
        self._local.index = index
        with self._lock:
            self._threads[index] = threading.get_ident()
            self._posted[index] = False
            self._open[index] = True

    def close(self, index: int) -> None:
        """Producer ``index`` left ``submit``; idempotent."""
        with self._lock:
            self._open[index] = False
            if self._posted[index]:
                _set_async_exc(self._threads[index], None)

    def pause(self) -> int | None:
        """Close the calling producer's window for a probe's signal; return what :meth:`resume` takes."""
        index: int | None = getattr(self._local, "index", None)
        if index is None:
            return None  # a pool thread
        with self._lock:
            if not self._open[index]:
                return None
            self._open[index] = False
            if self._posted[index]:
                _set_async_exc(self._threads[index], None)
        return index

    def resume(self, index: int | None) -> None:
        """Reopen the window :meth:`pause` closed (the probe's signal returned normally)."""
        if index is not None:
            with self._lock:
                self._open[index] = True

    def strike(self, rng: random.Random) -> bool:
        """Raise an interrupt into one producer whose window is open; whether one was."""
        with self._lock:
            ready = [i for i in range(len(self._open)) if self._open[i] and not self._posted[i]]
            if not ready:
                return False
            index = rng.choice(ready)
            self._posted[index] = True
            if _set_async_exc(self._threads[index], AsyncInterrupt) != 1:
                _set_async_exc(self._threads[index], None)
                self.stray += 1
                return False
            self.posted += 1
        return True


class NoWindows(InterruptWindows):
    """No interrupts: every method does nothing."""

    def __init__(self) -> None:
        super().__init__(0)

    def open(self, index: int) -> None:
        return None

    def close(self, index: int) -> None:
        return None

    def pause(self) -> int | None:
        return None


# --- The probe subscriber -------------------------------------------------------


@dataclasses.dataclass
class ProbePlan:
    """What one probe does; decided by the scenario's random generator."""

    name: str
    batch: int  # request size; MAX for unbounded
    request_from_thread: bool  # request from a thread of its own, else from on_next
    cancel_at: int | None  # cancel after this many items
    cancel_from_thread: bool
    raise_at: int | None  # raise from on_next at this item
    raise_interrupt: bool  # raise ProbeInterrupt, else ProbeError


class Probe(Subscriber[Any]):
    """A subscriber that checks order per producer, demand, serial calls and the terminal signal."""

    def __init__(
        self,
        plan: ProbePlan,
        producers: int,
        unpack: bool,
        deadline: float,
        uncertain: list[set[int]] | None = None,
        windows: InterruptWindows | None = None,
    ) -> None:
        self.plan = plan
        self.unpack = unpack
        self.deadline = deadline
        # Per producer, the seqs of the submits that raised: they may be missing.
        self.uncertain = uncertain if uncertain is not None else [set() for _ in range(producers)]
        self.windows = windows if windows is not None else NoWindows()
        self.subscription: Subscription | None = None
        self.next_seq = [0] * producers
        self.received = 0
        self.problems: list[str] = []
        self.terminals: list[str] = []
        self.error: BaseException | None = None
        self.raised: BaseException | None = None
        self.cancelled = False
        self.ended = threading.Event()  # a terminal arrived, or it cancelled or raised
        self.subscribed = threading.Event()
        self.stopped = False  # the run is over: helper threads return
        # Notified when items arrive or it ends; the requester and canceller threads wait on it.
        self._changed = threading.Condition(threading.Lock())
        # --- Guarded by self._changed ------------------------------------
        self.requested = 0  # total requested so far (saturating)
        self._inside = threading.Lock()  # held during a signal: overlapping signals break rule 1.3

    # --- demand ---------------------------------------------------------------

    def _request(self, n: int) -> None:
        subscription = self.subscription
        assert subscription is not None
        with self._changed:
            self.requested = min(self.requested + n, MAX)
        subscription.request(n)

    def _outstanding(self) -> int:
        with self._changed:
            if self.requested == MAX:
                return MAX
            return self.requested - self.received

    def _cancel(self) -> None:
        subscription = self.subscription
        assert subscription is not None
        self.cancelled = True
        self._end()
        subscription.cancel()

    def _end(self) -> None:
        """Mark the probe ended (terminal, cancel or raise) and wake its helper threads."""
        with self._changed:
            self.ended.set()
            self._changed.notify_all()

    def stop_helpers(self) -> None:
        """Make the requester and canceller threads return (the run is over)."""
        with self._changed:
            self.stopped = True
            self._changed.notify_all()

    # --- signals ----------------------------------------------------------------

    def _enter(self, name: str) -> bool:
        if not self._inside.acquire(blocking=False):
            self.problems.append(f"{name} overlaps another signal (rule 1.3)")
            return False
        if self.terminals:
            self.problems.append(f"{name} after terminal {self.terminals[0]}")
        return True

    def on_subscribe(self, subscription: Subscription) -> None:
        entered = self._enter("on_subscribe")
        try:
            if self.subscription is not None:
                self.problems.append("second on_subscribe (rule 2.5)")
                subscription.cancel()
                return
            self.subscription = subscription
            self.subscribed.set()
            if not self.plan.request_from_thread:
                self._request(self.plan.batch)
        finally:
            if entered:
                self._inside.release()

    def on_next(self, item: Any) -> None:
        paused = self.windows.pause()
        entered = self._enter("on_next")
        try:
            if self.raised is not None:
                self.problems.append(f"on_next({item!r}) after on_next raised {self.raised!r}")
            for producer, seq in item if self.unpack else (item,):
                expected = self.next_seq[producer]
                if seq < expected or any(s not in self.uncertain[producer] for s in range(expected, seq)):
                    what = "duplicated or reordered" if seq < expected else f"items {expected}..{seq - 1} lost"
                    self.problems.append(f"producer {producer}: got seq {seq}, expected {expected} ({what})")
                self.next_seq[producer] = max(expected, seq + 1)
            with self._changed:
                self.received += 1
                if self.received > self.requested:
                    self.problems.append(f"on_next #{self.received} with only {self.requested} requested (rule 1.1)")
                self._changed.notify_all()
            plan = self.plan
            if plan.raise_at is not None and self.received == plan.raise_at and self.raised is None:
                error: BaseException = ProbeInterrupt(plan.name) if plan.raise_interrupt else ProbeError(plan.name)
                self.raised = error
                self._end()
                raise error
            if plan.cancel_at is not None and self.received >= plan.cancel_at and not plan.cancel_from_thread:
                if not self.cancelled:
                    self._cancel()
                return
            if not plan.request_from_thread and self._outstanding() == 0:
                self._request(plan.batch)
        finally:
            if entered:
                self._inside.release()
        self.windows.resume(paused)

    def _terminal(self, name: str, error: BaseException | None) -> None:
        self.windows.pause()  # closed for the rest of this submit: the probe has ended
        entered = self._enter(name)
        try:
            described = f"on_error({error!r})" if error is not None else "on_complete"
            if self.raised is not None and error is not self.raised:
                self.problems.append(f"{described} after on_next raised {self.raised!r}")
            self.terminals.append(described)
            self.error = error
        finally:
            if entered:
                self._inside.release()
            self._end()

    def on_error(self, error: BaseException) -> None:
        self._terminal("on_error", error)

    def on_complete(self) -> None:
        self._terminal("on_complete", None)

    def outcome(self) -> str:
        """What the probe saw, for a failure message."""
        own = ", cancelled" if self.cancelled else ""
        own += f", raised {self.raised!r}" if self.raised is not None else ""
        return (
            f"saw {self.next_seq} per producer, {self.received} on_next of {self.requested} requested{own}, "
            f"terminals {self.terminals or 'none'}"
        )

    # --- helper threads ---------------------------------------------------------

    def requester(self) -> None:
        """Request a batch whenever the outstanding demand ran out, until the probe ends."""
        if not self.subscribed.wait(max(0.0, self.deadline - time.monotonic())):
            return
        while not self.ended.is_set() and not self.stopped and time.monotonic() < self.deadline:
            if self._outstanding() == 0:
                self._request(self.plan.batch)
            with self._changed:
                self._changed.wait_for(
                    lambda: self.ended.is_set() or self.stopped or self.requested - self.received <= 0, timeout=0.05
                )

    def canceller(self) -> None:
        """Cancel once ``cancel_at`` items arrived."""
        cancel_at = self.plan.cancel_at
        assert cancel_at is not None
        with self._changed:
            self._changed.wait_for(
                lambda: self.received >= cancel_at or self.ended.is_set() or self.stopped,
                timeout=max(0.0, self.deadline - time.monotonic()),
            )
        if not self.ended.is_set() and not self.stopped and self.received >= cancel_at:
            self._cancel()


# --- Scenarios -----------------------------------------------------------------------


@dataclasses.dataclass
class Scenario:
    """Everything random about one run, drawn from ``random.Random(seed)``."""

    kind: str
    seed: int
    producers: int
    items: int
    capacity: int  # SubmissionPublisher buffer capacity
    prefetch: int  # prefetch of the operator or processor
    pool_threads: int
    fault: str  # "none", "reject" or "shutdown"
    fault_at: int  # items accepted (over all producers) before the fault strikes
    fault_on_stage: bool  # the fault hits the operator's executor, else the source's
    probes: list[ProbePlan]
    strikes: tuple[int, ...] = ()  # fork, interrupt: items accepted (over all producers) before each fork or interrupt
    struck: int = 0  # after a run: the children forked, or the submits an interrupt ended

    @classmethod
    def draw(cls, kind: str, seed: int) -> Scenario:
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
        rng = random.Random(f"{kind}:{seed}")
        producers = rng.randint(2, 4)
        items = rng.choice([50, 150, 300])
        total = producers * items
        probes = []
        for index in range(rng.randint(2, 4)):
            behaviour = rng.choice(["plain", "plain", "cancel", "raise"])
            probes.append(
                ProbePlan(
                    name=f"s{index}",
                    batch=rng.choice([1, 2, 7, 64, MAX]),
                    request_from_thread=rng.random() < 0.5,
                    cancel_at=rng.randint(1, total) if behaviour == "cancel" else None,
                    cancel_from_thread=rng.random() < 0.7,
                    raise_at=rng.randint(1, total // 2) if behaviour == "raise" else None,
                    raise_interrupt=rng.random() < 0.5,
                )
            )
        fault = rng.choice(["none", "none", "reject", "shutdown"])
        fault_at = rng.randint(0, total)
        fault_on_stage = kind in ("observe_on", "transform") and rng.random() < 0.5
        strikes: tuple[int, ...] = ()
        if kind in ("fork", "interrupt"):
            fault = "none"  # the disturbance is the fork or the interrupts
            count = rng.randint(1, 2) if kind == "fork" else rng.randint(1, 12)
            strikes = tuple(sorted(rng.randint(0, total - 1) for _ in range(count)))
        return cls(
            kind=kind,
            seed=seed,
            producers=producers,
            items=items,
            capacity=rng.choice([1, 2, 4, 32]),
            prefetch=rng.choice([1, 2, 8, 64]),
            pool_threads=rng.choice([1, 2, 3]),
            fault=fault,
            fault_at=fault_at,
            fault_on_stage=fault_on_stage,
            probes=probes,
            strikes=strikes,
        )

    def describe(self) -> str:
        probes = "; ".join(
            f"{p.name}: batch={'MAX' if p.batch == MAX else p.batch}"
            f"{' from thread' if p.request_from_thread else ''}"
            + (f", cancel at {p.cancel_at}{' from thread' if p.cancel_from_thread else ''}" if p.cancel_at else "")
            + (
                f", raise {'KeyboardInterrupt' if p.raise_interrupt else 'Exception'} at {p.raise_at}"
                if p.raise_at
                else ""
            )
            for p in self.probes
        )
        fault = (
            "no fault"
            if self.fault == "none"
            else (
                f"{self.fault} on the {'stage' if self.fault_on_stage else 'source'} executor after "
                + (f"{self.fault_at} more tasks" if self.fault == "reject" else f"{self.fault_at} items")
            )
        )
        if self.strikes:
            what = "forks" if self.kind == "fork" else "interrupts"
            fault = f"{what} after {', '.join(map(str, self.strikes))} items"
        return (
            f"{self.kind}: {self.producers} producers x {self.items} items, capacity {self.capacity}, "
            f"prefetch {self.prefetch}, {self.pool_threads} pool threads, {fault}; {probes}"
        )


@dataclasses.dataclass
class Topology:
    """The built pipeline: the publishers producers submit to, and how probes subscribe."""

    sources: list[SubmissionPublisher[Item]]  # one shared, or one per producer
    stream: Publisher[Any]
    expected_subscribers: int  # subscribers each source has once everything is subscribed
    connect: Callable[[], None] = lambda: None  # run after the probes subscribed
    unpack: bool = False  # items arrive as lists of (producer, seq)


def _build(scenario: Scenario, source_executor: Any, stage_executor: Any) -> Topology:
    kind = scenario.kind
    probes = len(scenario.probes)
    per_producer = kind in ("merge", "flat_map")
    sources = [
        SubmissionPublisher[Item](source_executor, scenario.capacity)
        for _ in range(scenario.producers if per_producer else 1)
    ]
    source = sources[0]
    if kind in ("publisher", "fork", "interrupt"):
        return Topology(sources, source, probes)
    if kind == "multicast":
        multicast = MulticastProcessor[Item](scenario.prefetch)
        return Topology(sources, multicast, 1, connect=lambda: source.subscribe(multicast))
    if kind == "transform":
        transform = TransformProcessor[Item, Item](
            lambda item: item, executor=stage_executor, max_buffer_capacity=scenario.capacity
        )
        return Topology(sources, transform, 1, connect=lambda: source.subscribe(transform))
    if kind == "observe_on":
        return Topology(sources, operators.observe_on(source, stage_executor, prefetch=scenario.prefetch), probes)
    if kind == "on_backpressure_buffer":
        # Room for every item: an overflow error would be a defect, not an allowed early end.
        total = scenario.producers * scenario.items
        return Topology(sources, operators.on_backpressure_buffer(source, total), probes)
    if kind == "buffer":
        return Topology(sources, operators.buffer(source, scenario.prefetch), probes, unpack=True)
    if kind == "merge":
        return Topology(sources, operators.merge(*sources, prefetch=scenario.prefetch), probes)
    assert kind == "flat_map"
    outer = IterablePublisher(range(scenario.producers), executor=stage_executor)
    stream = operators.flat_map(
        outer, lambda producer: sources[producer], max_concurrency=scenario.producers, prefetch=scenario.prefetch
    )
    return Topology(sources, stream, probes)


@contextmanager
def _switch_interval(seconds: float) -> Iterator[None]:
    previous = sys.getswitchinterval()
    sys.setswitchinterval(seconds)
    try:
        yield
    finally:
        sys.setswitchinterval(previous)


def thread_dump() -> str:
    """Every thread's stack, as text."""
    names = {thread.ident: thread.name for thread in threading.enumerate()}
    parts = []
    for ident, frame in sys._current_frames().items():
        stack = "".join(traceback.format_stack(frame))
        parts.append(f"--- thread {names.get(ident, '?')} ({ident}):\n{stack}")
    return "\n".join(parts)


class _FlowpyLog(logging.Handler):
    """Keeps what flowpy logs (errors it could not signal) while installed as a context manager."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []
        self._logger = logging.getLogger("flowpy")
        self._propagate = True

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def __enter__(self) -> _FlowpyLog:
        self._logger.addHandler(self)
        self._propagate, self._logger.propagate = self._logger.propagate, False
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._logger.removeHandler(self)
        self._logger.propagate = self._propagate


class _Run:
    """The state of one running scenario."""

    def __init__(self, scenario: Scenario, timeout: float) -> None:
        self.scenario = scenario
        self.deadline = time.monotonic() + timeout
        self.problems: list[str] = []
        self.caught: list[tuple[str, BaseException, str]] = []  # exceptions that ended a helper thread
        self.threads: list[threading.Thread] = []
        self.accepted = [0] * scenario.producers  # submits that returned
        # Per producer, the seqs whose submit raised: each may or may not be delivered.
        self.uncertain: list[set[int]] = [set() for _ in range(scenario.producers)]
        self.windows = InterruptWindows(scenario.producers) if scenario.kind == "interrupt" else NoWindows()
        self.interrupted = 0  # submits an AsyncInterrupt ended (guarded by progress)
        self.forks = 0  # children forked and checked
        self.accepted_total = 0
        self.released = False  # the sources were closed to release a failed run's threads
        self.over = False  # production ended (or the run failed): the saboteur gives up (guarded by progress)
        self._count_lock = threading.Lock()
        self.progress = threading.Condition(self._count_lock)  # notified as items are accepted

    def spawn(self, name: str, target: Callable[[], None]) -> threading.Thread:
        def guarded() -> None:
            try:
                target()
            except BaseException as exc:  # kept for the checks: a probe's interrupt, or a failure
                self.caught.append((name, exc, traceback.format_exc()))

        thread = threading.Thread(target=guarded, name=f"stress-{name}", daemon=True)
        self.threads.append(thread)
        thread.start()
        return thread

    def end_production(self) -> None:
        with self.progress:
            self.over = True
            self.progress.notify_all()

    def remaining(self) -> float:
        return max(0.0, self.deadline - time.monotonic())


def run(
    kind: str,
    seed: int,
    *,
    timeout: float = 20.0,
    switch_interval: float = 1e-6,
    wrap: Callable[[Publisher[Any]], Publisher[Any]] | None = None,
) -> Scenario:
    """Run one scenario; raise :class:`StressFailure` describing every broken check.

    ``timeout`` bounds the whole run: whatever has not ended by then is a hang.
    ``wrap``, if given, is applied to the stream the probes subscribe to (the
    engine's own tests use it to break a stream on purpose).
    """
    scenario = Scenario.draw(kind, seed)
    logged = _FlowpyLog()
    with _switch_interval(switch_interval), ThreadExceptionLog() as log, logged:
        state = _Run(scenario, timeout)
        prefix = f"stress-pool-{kind}-{seed}"
        pool = DaemonThreadPool(scenario.pool_threads, thread_name_prefix=prefix)
        stage_pool = DaemonThreadPool(scenario.pool_threads, thread_name_prefix=f"{prefix}-stage")
        faulty_pool = stage_pool if scenario.fault_on_stage else pool
        rejecting = RejectingExecutor(faulty_pool, scenario.fault_at)
        source_executor: Any = pool
        stage_executor: Any = stage_pool
        if scenario.fault == "reject":
            if scenario.fault_on_stage:
                stage_executor = rejecting
            else:
                source_executor = rejecting
        topology = _build(scenario, source_executor, stage_executor)
        if wrap is not None:
            topology.stream = wrap(topology.stream)
        probes = [
            Probe(plan, scenario.producers, topology.unpack, state.deadline, state.uncertain, state.windows)
            for plan in scenario.probes
        ]
        dump = ""
        try:
            _drive(state, topology, probes, rejecting, faulty_pool, pool)
        finally:
            if any(problem.startswith("hang") for problem in state.problems):
                dump = thread_dump()
            # Release whatever still waits: helper threads, a blocked submit, then the pools.
            state.released = True
            state.end_production()
            for probe in probes:
                probe.stop_helpers()
            for source in topology.sources:
                source.close_exceptionally(RunEnded("stress run ended"))
            for probe in probes:
                if probe.subscription is not None and not probe.ended.is_set():
                    probe.subscription.cancel()
            for each in (pool, stage_pool):
                each.shutdown(wait=False)
            end = time.monotonic() + 5.0
            for thread in [*state.threads, *(t for t in threading.enumerate() if t.name.startswith(prefix))]:
                thread.join(max(0.0, end - time.monotonic()))
            hung = [t.name for t in state.threads if t.is_alive()]
            if hung:
                state.problems.append(f"hang: threads still running after the cleanup: {', '.join(hung)}")
        records = log.take()
    if state.windows.stray:
        state.problems.append(f"harness: {state.windows.stray} interrupts reached a thread starting meanwhile")
    _check(state, topology, probes, records, logged.records)
    scenario.struck = state.forks + state.interrupted
    if state.problems:
        lines = "\n".join(f"  - {problem}" for problem in state.problems)
        accepted = f"  accepted per producer: {state.accepted}"
        outcomes = "\n".join(f"  {probe.plan.name}: {probe.outcome()}" for probe in probes)
        raise StressFailure(
            f"stress scenario {kind} seed {seed} failed ({repro_command(kind, seed)}):\n"
            f"  {scenario.describe()}\n{lines}\n{accepted}\n{outcomes}"
            + (f"\nthread dump at the hang:\n{dump}" if dump else ""),
            scenario,
            list(state.problems),
        )
    return scenario


def _drive(
    state: _Run,
    topology: Topology,
    probes: list[Probe],
    rejecting: RejectingExecutor,
    faulty_pool: DaemonThreadPool,
    pool: DaemonThreadPool,
) -> None:
    scenario = state.scenario
    for probe in probes:
        topology.stream.subscribe(probe)
        if probe.plan.request_from_thread:
            state.spawn(f"{probe.plan.name}-requester", probe.requester)
        if probe.plan.cancel_at is not None and probe.plan.cancel_from_thread:
            state.spawn(f"{probe.plan.name}-canceller", probe.canceller)
    topology.connect()

    # Producers start once every source has all its subscribers, or nothing could be checked.
    while any(s.number_of_subscribers < topology.expected_subscribers for s in topology.sources):
        if state.remaining() == 0 or any(p.ended.is_set() for p in probes):
            counts = [s.number_of_subscribers for s in topology.sources]
            state.problems.append(
                f"setup: sources have {counts} subscribers, expected {topology.expected_subscribers} each"
            )
            return
        time.sleep(0.001)

    disturbers: list[threading.Thread] = []  # they end soon after production does
    if scenario.fault == "reject":
        rejecting.armed = True
    elif scenario.fault == "shutdown":

        def saboteur() -> None:
            with state.progress:
                state.progress.wait_for(
                    lambda: state.accepted_total >= scenario.fault_at or state.over, state.remaining()
                )
            faulty_pool.shutdown(wait=False)

        state.spawn("saboteur", saboteur)
    elif scenario.kind == "fork":
        disturbers.append(state.spawn("forker", lambda: _forker(state, pool)))
        disturbers.append(state.spawn("subscriber-churn", lambda: _churn(state)))
    elif scenario.kind == "interrupt":
        _start_every_thread(pool)  # no thread starts inside a submit (see _set_async_exc)
        disturbers.append(state.spawn("interrupter", lambda: _interrupter(state)))

    windows = state.windows

    def producer(index: int) -> Callable[[], None]:
        target = topology.sources[index if len(topology.sources) > 1 else 0]

        def produce() -> None:
            for seq in range(scenario.items):
                # The window opens and closes inside the try: an interrupt lands in it or not at all.
                error: BaseException | None = None
                started = accepted = interrupted = False
                while True:
                    try:
                        if not started:
                            started = True
                            windows.open(index)
                            target.submit((index, seq))
                            accepted = True
                        windows.close(index)
                        break
                    except AsyncInterrupt:
                        interrupted = True
                    except BaseException as exc:
                        error = exc
                if interrupted:
                    with state.progress:
                        state.interrupted += 1
                if error is None and not accepted:
                    state.uncertain[index].add(seq)  # before the next submit, which a probe may see first
                    continue
                if error is not None:
                    exc = error
                    state.uncertain[index].add(seq)
                    if state.released and isinstance(exc, ClosedPublisherError):
                        return  # the run already failed; its cleanup closed the sources
                    if not isinstance(exc, ProbeInterrupt):
                        state.problems.append(
                            f"producer {index}: submit(({index}, {seq})) raised {exc!r}\n"
                            + "".join(traceback.format_exception(exc))
                        )
                        return
                    # The probe's interrupt ran inline here (a blocked producer runs a
                    # pending consumer task): it ends this producer, as it would a program.
                    state.caught.append((f"producer-{index}", exc, ""))
                    return
                with state.progress:
                    state.accepted[index] = seq + 1
                    state.accepted_total += 1
                    state.progress.notify_all()

        return produce

    producers = [state.spawn(f"producer-{i}", producer(i)) for i in range(scenario.producers)]
    for thread in producers:
        thread.join(state.remaining())
    state.end_production()
    for thread in disturbers:
        thread.join(state.remaining())
    stuck = [t.name for t in [*producers, *disturbers] if t.is_alive()]
    if stuck:
        state.problems.append(f"hang: {', '.join(stuck)} still running after the run's timeout")
        return
    for index, source in enumerate(topology.sources):
        if not _lock_is_free(source):
            state.problems.append(f"hang: the producer lock of source {index} is held after every producer returned")
            return
    for source in topology.sources:
        source.close()
    for probe in probes:
        probe.ended.wait(state.remaining())
    silent = [p.plan.name for p in probes if not p.ended.is_set()]
    if silent:
        state.problems.append(
            f"hang: {', '.join(silent)} got no terminal signal after every producer finished and the sources closed"
        )


def _lock_is_free(publisher: SubmissionPublisher[Any]) -> bool:
    """Whether another thread can take the producer lock (a query takes it) within a few seconds."""
    answered = threading.Event()
    querier = threading.Thread(target=lambda: (publisher.number_of_subscribers, answered.set()), daemon=True)
    querier.start()
    return answered.wait(5)


def _wait_for_items(state: _Run, at: int) -> bool:
    """Wait until ``at`` items were accepted; whether production still runs."""
    with state.progress:
        state.progress.wait_for(lambda: state.accepted_total >= at or state.over, state.remaining())
        return not state.over


def _start_every_thread(pool: DaemonThreadPool) -> None:
    """Make ``pool`` start all its threads now: as many tasks as threads, each waiting for the others."""
    barrier = threading.Barrier(pool.max_workers + 1)
    for _ in range(pool.max_workers):
        pool.execute(lambda: barrier.wait(10))
    barrier.wait(10)
    pool.wait_idle(10)


def _interrupter(state: _Run) -> None:
    """Raise an AsyncInterrupt into a producer inside submit at each strike, while production runs."""
    rng = random.Random(f"interrupter:{state.scenario.seed}")
    for at in state.scenario.strikes:
        if not _wait_for_items(state, at):
            return
        while not state.windows.strike(rng):  # no producer is inside submit just now
            with state.progress:
                if state.over:
                    return
            time.sleep(0)


def _churn(state: _Run) -> None:
    """Subscribe to new publishers on the default executor until production ends: a fork may come mid-subscribe."""
    while True:
        with state.progress:
            if state.over:
                return
        publisher = SubmissionPublisher[int]()
        sink = _Collect()
        publisher.subscribe(sink)
        publisher.submit(1)
        publisher.close()
        if sink.outcome(state.remaining()) != [1, "complete"]:
            state.problems.append(f"subscriber churn in the parent: got {sink.items}")
            return


class _Collect(Subscriber[Any]):
    """Requests everything and keeps what arrives."""

    def __init__(self) -> None:
        self.items: list[Any] = []
        self.done = threading.Event()

    def on_subscribe(self, subscription: Subscription) -> None:
        subscription.request(MAX)

    def on_next(self, item: Any) -> None:
        self.items.append(item)

    def on_error(self, error: BaseException) -> None:
        self.items.append(repr(error))
        self.done.set()

    def on_complete(self) -> None:
        self.items.append("complete")
        self.done.set()

    def outcome(self, timeout: float) -> list[Any] | str:
        return self.items if self.done.wait(timeout) else f"timed out with {self.items}"


CHILD_TIMEOUT = 10.0
"""Seconds a forked child has to answer before it counts as hung."""


def _in_child(pool: DaemonThreadPool) -> dict[str, Any]:
    """In a forked child: publish on the default executor and on the parent's pool, then run flowpy's exit duties."""
    start = time.monotonic()
    result: dict[str, Any] = {}
    for name, executor in (("default", DEFAULT), ("parent pool", pool)):
        publisher = SubmissionPublisher[int](executor)
        sink = _Collect()
        publisher.subscribe(sink)
        for item in range(3):
            publisher.submit(item)
        publisher.close()
        result[name] = sink.outcome(CHILD_TIMEOUT / 3)
    result["use seconds"] = time.monotonic() - start
    os.environ["FLOWPY_EXIT_TIMEOUT"] = str(CHILD_TIMEOUT * 2)  # a wait for the parent's streams would show
    start = time.monotonic()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _exit._at_exit()
    result["exit seconds"] = time.monotonic() - start
    result["warnings"] = [str(w.message) for w in caught]
    return result


def _fork_once(pool: DaemonThreadPool) -> list[str]:
    """Fork; check the child (see :func:`_in_child`); return the problems."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        code = 1
        try:
            os.close(read)
            os.write(write, json.dumps(_in_child(pool)).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    ready, _, _ = select.select([read], [], [], CHILD_TIMEOUT)
    if ready:
        with os.fdopen(read, "rb") as stream:
            text = stream.read()
    else:
        os.close(read)
        os.kill(pid, signal.SIGKILL)
        text = b""
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if not text:
        return [f"fork: the child {'hung' if not ready else 'failed'} (exit code {code})"]
    result = json.loads(text)
    problems = [
        f"fork: in the child, a publisher on the {name} executor got {result[name]}"
        for name in ("default", "parent pool")
        if result[name] != [0, 1, 2, "complete"]
    ]
    if result["use seconds"] > CHILD_TIMEOUT / 3:
        problems.append(f"fork: the child took {result['use seconds']:.1f} s to publish")
    if result["exit seconds"] > 1.0:
        problems.append(f"fork: the child's exit duties took {result['exit seconds']:.1f} s")
    problems.extend(f"fork: the child warned at exit: {message}" for message in result["warnings"])
    if code != 0:
        problems.append(f"fork: the child exited with {code}")
    return problems


def _forker(state: _Run, pool: DaemonThreadPool) -> None:
    """Fork at each strike while production runs."""
    for at in state.scenario.strikes:
        if not _wait_for_items(state, at):
            return
        problems = _fork_once(pool)
        state.problems.extend(problems)
        with state.progress:
            state.forks += 1
        if problems:
            return


def _check(
    state: _Run, topology: Topology, probes: list[Probe], records: list[Any], logged: list[logging.LogRecord]
) -> None:
    scenario = state.scenario
    problems = state.problems
    interrupts = {id(p.raised): p for p in probes if isinstance(p.raised, ProbeInterrupt)}
    raised = {id(p.raised) for p in probes if p.raised is not None}
    log_of: dict[int, str] = {}
    for entry in logged:
        error = entry.exc_info[1] if entry.exc_info else None
        if error is not None and id(error) in raised:
            log_of[id(error)] = entry.getMessage()
        else:
            problems.append(f"flowpy logged an error it could not signal: {entry.getMessage()}")
    surfaced: set[int] = set()

    def surface(error: BaseException) -> bool:
        """Mark ``error`` and the interrupts in its ``__context__`` chain seen; whether it is one."""
        chained: BaseException | None = error.__context__
        while chained is not None:  # a later interrupt in one pass propagates chained to the earlier
            if id(chained) in interrupts:
                surfaced.add(id(chained))
            chained = chained.__context__
        if id(error) in interrupts:
            surfaced.add(id(error))
            return True
        return False

    for record in records:
        if not surface(record.error):
            problems.append(f"unexpected {record.describe()}")
    for name, exc, formatted in state.caught:
        if not surface(exc):
            problems.append(f"thread {name} raised {exc!r}\n{formatted}")
    for key, probe in interrupts.items():
        if key not in surfaced:
            where = f"; flowpy logged it: {log_of[key]}" if key in log_of else ""
            problems.append(
                f"{probe.plan.name}: its KeyboardInterrupt from on_next was swallowed "
                f"(not seen by threading.excepthook nor by the thread that called flowpy){where}"
            )

    def fault_error(error: BaseException) -> bool:
        """Whether ``error`` is what the failing executor raised."""
        if scenario.fault == "reject":
            return isinstance(error, Refused)
        if scenario.fault == "shutdown":
            return isinstance(error, RuntimeError) and str(error) == "cannot schedule new tasks after shutdown"
        return False

    for probe in probes:
        name = probe.plan.name
        problems.extend(f"{name}: {problem}" for problem in probe.problems)
        if not probe.ended.is_set():
            continue  # reported as a hang
        if len(probe.terminals) > 1:
            problems.append(f"{name}: {len(probe.terminals)} terminal signals: {probe.terminals}")
        own_choice = probe.cancelled or probe.raised is not None
        if not own_choice and not probe.terminals:
            problems.append(f"{name}: ended without a terminal signal")
        error = probe.error
        early = own_choice
        if error is not None and error is not probe.raised:
            if fault_error(error) or isinstance(error, RunEnded):
                early = True
            elif scenario.kind == "interrupt" and isinstance(error, AsyncInterrupt):
                # The interrupt landed in a delivery on the producer's thread: that
                # subscription ends with it (docs/submission-publisher.md, "Ctrl-C").
                early = True
            elif scenario.kind in {"multicast", "transform"} and isinstance(error, ProbeInterrupt):
                # A KeyboardInterrupt from one subscriber is re-raised on the thread it
                # was raised on (docs/java-mapping.md, "Exceptions raised by user code").
                # MulticastProcessor serves its subscribers in lock step, so it ends
                # them all; a TransformProcessor whose blocked submit ran that delivery
                # gets it from submit, in its own on_next, and ends as a failed stage.
                early = True
            elif not probe.cancelled:
                problems.append(f"{name}: unexpected on_error({error!r})")
                early = True
        if isinstance(error, MissingBackpressureError):
            problems.append(f"{name}: on_error({error!r}) although the buffer had room for every item")
        for producer in range(scenario.producers):
            seen = probe.next_seq[producer]
            accepted = state.accepted[producer]
            most = max(accepted, max(state.uncertain[producer], default=-1) + 1)
            if seen > most:
                problems.append(f"{name}: producer {producer}: saw {seen} items, only {accepted} were accepted")
            elif not early and seen < accepted:
                problems.append(
                    f"{name}: producer {producer}: completed after {seen} of {accepted} accepted items (lost)"
                )


def run_many(
    kinds: list[str],
    seeds: Iterator[int],
    *,
    seconds: float | None,
    timeout: float = 20.0,
    repeat: int = 1,
    on_result: Callable[[str, int, StressFailure | None], None] = lambda kind, seed, failure: None,
) -> tuple[int, list[StressFailure]]:
    """Run each kind and seed ``repeat`` times until ``seconds`` pass; return (runs, failures)."""
    end = None if seconds is None else time.monotonic() + seconds
    runs = 0
    failures: list[StressFailure] = []
    for seed in seeds:
        for kind in [kind for kind in kinds for _ in range(repeat)]:
            if end is not None and time.monotonic() >= end:
                return runs, failures
            try:
                run(kind, seed, timeout=timeout)
            except StressFailure as failure:
                failures.append(failure)
                on_result(kind, seed, failure)
            else:
                on_result(kind, seed, None)
            runs += 1
    return runs, failures
