"""An interrupt at any point of SubmissionPublisher's code leaves it consistent.

A ``KeyboardInterrupt`` (Ctrl-C) may arrive wherever CPython checks for
signals (see tests/interrupts.py). Each test runs a fixed script of calls
on the main thread (subscribe, submit, offer, submit_many, request, cancel,
delivery on that thread, close) once to count those points in the core's
code, then once per point with an interrupt there. After each run it checks
that the interrupt reached the caller, that the producer lock is free, and,
once the rest of the script ran, that every subscription ended with a
signal, delivering in order every item that a call accepted before or after
the interrupt. A deterministic executor (``direct_executor``, or tasks run
on the main thread from a queue) makes every run the same up to its
interrupt. Statistical runs with real signals and threads:
``python benchmarks/stress.py --kind interrupt``.

Every test runs once per core: it asks for the ``core`` fixture
(tests/conftest.py, tests/core_impl.py) and builds its publisher from it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import threading
from collections.abc import Callable
from typing import Any

import pytest

from flowpy.executors import direct_executor
from flowpy.submission import SubmissionPublisher
from tests.core_impl import Core
from tests.interrupts import InjectedInterrupt, InterruptAt, sweep
from tests.support import ManualExecutor, Recorder, wait_until_waiting

MAX = 2**63 - 1


def core_files(core: Core) -> frozenset[str]:
    """The files of the code under test: the core's publisher, its subscription (if Python), the executors."""
    publisher: SubmissionPublisher[int] = core.SubmissionPublisher(direct_executor)
    recorder = Recorder()
    publisher.subscribe(recorder)
    publisher.close()
    files = {inspect.getfile(core.SubmissionPublisher), inspect.getfile(type(direct_executor))}
    with contextlib.suppress(TypeError):  # a compiled class has no file
        files.add(inspect.getfile(type(recorder.subscription)))
    return frozenset(files)


def lock_is_free(publisher: SubmissionPublisher[Any]) -> bool:
    """Whether another thread can take the producer lock (a query takes it) within a few seconds."""
    answered = threading.Event()
    querier = threading.Thread(target=lambda: (publisher.number_of_subscribers, answered.set()), daemon=True)
    querier.start()
    return answered.wait(5)


@dataclasses.dataclass(eq=False)
class Step:
    """One call of the script; ``items`` are what it publishes, ``repeat`` whether an interrupted one is made again."""

    name: str
    call: Callable[[], object]
    items: tuple[int, ...] = ()
    repeat: bool = False


class Script:
    """A publisher of ``core``, its subscribers and the calls made to them, on the main thread."""

    def __init__(self, core: Core, executor_kind: str) -> None:
        self.executor = ManualExecutor() if executor_kind == "manual" else None
        publisher: SubmissionPublisher[int] = core.SubmissionPublisher(self.executor or direct_executor, 2)
        self.publisher = publisher
        self.unbounded = Recorder(initial=MAX)
        self.one_by_one = Recorder(initial=1)
        self.one_by_one.on_next_hook = lambda item: self.one_by_one.request(1)
        self.later = Recorder(initial=3)  # requests more in a step of its own
        self.cancelling = Recorder(initial=MAX)
        self.late = Recorder(initial=MAX)  # subscribes in a step
        for recorder in (self.unbounded, self.one_by_one, self.later, self.cancelling):
            publisher.subscribe(recorder)
        self.run_tasks()
        self.steps = [
            Step("submit", lambda: publisher.submit(1), (1,)),
            Step("subscribe", lambda: publisher.subscribe(self.late)),
            Step("submit", lambda: publisher.submit(2), (2,)),
            Step("request", lambda: self.later.request(100), repeat=True),
            Step("submit_many", lambda: publisher.submit_many([3, 4, 5]), (3, 4, 5)),
            Step("run", self.run_tasks, repeat=True),
            Step("offer", lambda: publisher.offer(6, lambda subscriber, item: True, timeout=0.0), (6,)),
            Step("cancel", self.cancelling.cancel, repeat=True),
            Step("submit", lambda: publisher.submit(7), (7,)),
            Step("run", self.run_tasks, repeat=True),
            Step("submit_many", lambda: publisher.submit_many(range(8, 14)), tuple(range(8, 14))),
            Step("run", self.run_tasks, repeat=True),
            Step("close", publisher.close, repeat=True),
            Step("run", self.run_tasks, repeat=True),
        ]

    @property
    def recorders(self) -> list[Recorder]:
        return [self.unbounded, self.one_by_one, self.later, self.cancelling, self.late]

    def run_tasks(self) -> None:
        if self.executor is not None:
            self.executor.run_all()


@dataclasses.dataclass
class Outcome:
    script: Script
    hook: InterruptAt
    raised: BaseException | None
    interrupted: Step | None


def play(core: Core, executor_kind: str, hook: InterruptAt) -> Outcome:
    """Run the script on ``core`` under ``hook`` until it ends or is interrupted."""
    script = Script(core, executor_kind)
    interrupted = None
    raised: BaseException | None = None
    step = None
    try:
        with hook:
            for step in script.steps:
                step.call()
    except InjectedInterrupt as exc:
        raised, interrupted = exc, step
    return Outcome(script, hook, raised, interrupted)


def finish_and_check(outcome: Outcome) -> list[str]:
    """The problems with one run: the interrupt, the lock, then every subscription once the script is finished."""
    script, hook = outcome.script, outcome.hook
    problems = []
    if outcome.raised is not hook.fired:
        problems.append(f"the caller got {outcome.raised!r}, not the interrupt")
    if not lock_is_free(script.publisher):
        problems.append("the producer lock is held")
    if problems:
        return problems
    # The rest of the script, on another thread (where a lock this thread
    # still held would block it); an interrupted step that may be repeated is.
    steps = script.steps
    rest: list[Step] = []
    if outcome.interrupted is not None:
        rest = steps[steps.index(outcome.interrupted) + (0 if outcome.interrupted.repeat else 1) :]
    finished: list[BaseException] = []

    def finish() -> None:
        try:
            for step in rest:
                step.call()
            for recorder in script.recorders:  # whatever a subscriber still holds, it asks for
                if recorder.subscription is not None and not recorder.done.is_set():
                    recorder.request(MAX)
            script.run_tasks()
        except BaseException as exc:
            finished.append(exc)

    finisher = threading.Thread(target=finish, daemon=True)  # a hang must fail the test, not block it
    finisher.start()
    finisher.join(10)
    if finisher.is_alive():
        return ["the rest of the script hangs"]
    if finished:
        return [f"the rest of the script raised {finished[0]!r}"]
    uncertain = set(outcome.interrupted.items) if outcome.interrupted is not None else set()
    uncertain.add(6)  # offered: dropped when a buffer is full
    fired = hook.fired
    for name, recorder in zip(
        ("unbounded", "one_by_one", "later", "cancelling", "late"), script.recorders, strict=True
    ):
        # A method that the interrupt hit as it started recorded nothing: it raised it.
        raised_in = ""
        if fired is not None and fired.receiver is recorder and fired.where.startswith("entering on_"):
            raised_in = fired.where.split()[1]
        violations = recorder.violations
        if raised_in == "on_subscribe":
            violations = [v for v in violations if v != "on_error before on_subscribe"]
        problems += [f"{name}: {violation}" for violation in violations]
        items = recorder.items
        if items != sorted(set(items)):
            problems.append(f"{name}: items out of order or twice: {items}")
        if recorder is script.cancelling:
            continue  # a cancel is silent
        interrupted = outcome.interrupted
        if recorder is script.late and not recorder.signals and interrupted and interrupted.name == "subscribe":
            continue  # its subscribe was interrupted before anything started
        if raised_in in ("on_complete", "on_error"):
            continue  # it ended there
        if not recorder.done.is_set():
            problems.append(f"{name}: never ended: {recorder.subscription!r}")
        elif recorder.error is not None:
            if recorder.error is not hook.fired:
                problems.append(f"{name}: ended with {recorder.error!r}")
        else:
            first = 2 if recorder is script.late else 1
            lost = [item for item in range(first, 14) if item not in uncertain and item not in items]
            if lost:
                problems.append(f"{name}: completed without {lost}: {items}")
    return problems


@pytest.mark.timeout(300)
@pytest.mark.parametrize("executor_kind", ["direct", "manual"])
def test_interrupt_at_any_point_leaves_every_subscription_deliverable_or_ended(core: Core, executor_kind: str) -> None:
    failures = []
    runs = 0
    for hook, outcome in sweep(core_files(core), lambda hook: play(core, executor_kind, hook)):
        runs += 1
        problems = finish_and_check(outcome)
        if problems:
            where = hook.fired.where if hook.fired is not None else "no interrupt"
            failures.append(f"interrupt {hook.at} ({where}): {problems}")
            if len(failures) >= 20:
                break
    assert runs > 50, f"only {runs} interrupt points: the script did not run the core's code"
    assert not failures, f"{len(failures)} of {runs} runs broke the publisher:\n" + "\n".join(failures[:20])


def submit_then_close(publisher: SubmissionPublisher[int], item: int) -> None:
    publisher.submit(item)
    publisher.close()


def wait_then_drop(
    core: Core, hook: InterruptAt
) -> tuple[SubmissionPublisher[int], Recorder, Recorder, BaseException | None]:
    """Offers with a timeout into a full buffer of a ``core`` publisher: each waits on its condition, then drops."""
    publisher: SubmissionPublisher[int] = core.SubmissionPublisher(direct_executor, 2)
    stalled, unbounded = Recorder(), Recorder(initial=MAX)
    publisher.subscribe(stalled)
    publisher.subscribe(unbounded)
    publisher.submit(1)
    publisher.submit(2)
    raised = None
    try:
        with hook:
            publisher.offer(3, timeout=0.001)
            publisher.offer(4, timeout=0.001)
    except InjectedInterrupt as exc:
        raised = exc
    return publisher, stalled, unbounded, raised


@pytest.mark.timeout(300)
def test_interrupt_inside_a_timed_wait_for_space_leaves_the_lock_and_subscriptions_consistent(core: Core) -> None:
    # threading.Condition.wait is included: an interrupt just after it
    # released the publisher's lock, before its finally takes it back,
    # leaves the lock released under the offer that then unwinds.
    failures = []
    runs = 0
    for hook, (publisher, stalled, unbounded, raised) in sweep(
        core_files(core) | {threading.__file__}, lambda hook: wait_then_drop(core, hook)
    ):
        runs += 1
        problems = []
        if raised is not hook.fired:
            problems.append(f"the caller got {raised!r}")
        if not lock_is_free(publisher):
            problems.append("the producer lock is held")
        else:
            stalled.request(MAX)
            # On another thread, where a lock this thread still held would block it.
            finisher = threading.Thread(target=submit_then_close, args=(publisher, 5), daemon=True)
            finisher.start()
            finisher.join(10)
            if finisher.is_alive():
                problems.append("submit or close hangs")
            for name, recorder in (("stalled", stalled), ("unbounded", unbounded)):
                if recorder.error is not None and recorder.error is hook.fired:
                    continue  # delivery on this thread was interrupted: the subscription ended with it
                if not recorder.completed or recorder.violations:
                    problems.append(f"{name}: {recorder.signals} {recorder.violations}")
                elif recorder.items[:2] != [1, 2] or recorder.items[-1] != 5:
                    problems.append(f"{name}: items {recorder.items}")
        if problems:
            where = hook.fired.where if hook.fired is not None else "no interrupt"
            failures.append(f"interrupt {hook.at} ({where}): {problems}")
    assert runs > 20
    assert not failures, f"{len(failures)} of {runs} runs broke the publisher:\n" + "\n".join(failures[:20])


@pytest.mark.timeout(60)
def test_interrupt_after_the_wait_for_space_released_the_lock_still_hands_the_turn_on(core: Core) -> None:
    # threading.Condition.wait releases the lock (_release_save) before its
    # try; an interrupt right there unwinds the blocked submit without the
    # lock, while another producer waits for the turn that submit holds.
    executor = ManualExecutor()
    publisher: SubmissionPublisher[int] = core.SubmissionPublisher(executor, 1)
    stalled = Recorder()
    publisher.subscribe(stalled)
    executor.run_all()
    publisher.submit(1)  # the buffer is full: the next submit blocks holding the turn
    space = publisher._space
    second: list[BaseException | None] = []

    def submit_three() -> None:
        try:
            publisher.submit(3)
        except BaseException as exc:
            second.append(exc)
        else:
            second.append(None)

    waiter = threading.Thread(target=submit_three, name="waits-for-the-turn", daemon=True)

    def interrupted_wait(timeout: float | None = None) -> bool:
        del space.wait  # the next waits are real ones
        space._release_save()  # type: ignore[attr-defined]
        waiter.start()
        wait_until_waiting(waiter)  # on the turn, since this producer holds it
        raise KeyboardInterrupt("inside Condition.wait, the lock released")

    space.wait = interrupted_wait  # type: ignore[method-assign]
    with pytest.raises(KeyboardInterrupt, match="the lock released"):
        publisher.submit(2)
    assert lock_is_free(publisher)
    stalled.request(MAX)
    executor.run_all()  # item 1 goes, which makes space for the waiter's item
    waiter.join(10)
    assert not waiter.is_alive(), "the producer waiting for the turn was never woken"
    assert second == [None]
    publisher.close()
    executor.run_all()
    assert stalled.items == [1, 3]
    assert stalled.completed and not stalled.violations
