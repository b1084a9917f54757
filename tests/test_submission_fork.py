"""SubmissionPublisher and os.fork(): the producer lock of both cores, and what a forked child may do.

The contract (docs/submission-publisher.md, "Fork"): a publisher made before
``os.fork()`` is not used in the child; its producer lock is in whatever
state it was at the fork, in both cores alike, and ``_at_fork_reinit()``
resets it as ``threading.RLock``'s does. Publishers made in the child work as
anywhere and at once, whatever the parent's threads were doing at the fork,
on an executor made there or on the default one (the child gets a shared pool
of its own on first use). The child inherits none of the parent's streams,
pools' tasks or exit duties: it exits at once and silently about them.

The scripts run in a fresh interpreter (the process that forks has only the
threads they start); every wait in them is bounded, and a child that does not
answer in time is killed and reported as hung. The tests that ask for the
``core`` fixture (tests/core_impl.py) run once per core: on ``core.ProducerLock``
in this process, or in an interpreter that gets the core through
``FLOWPY_NO_EXTENSIONS`` and checks it. One script runs both cores side by
side in one interpreter (``flowpy.submission.TWINS``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest

import flowpy
from flowpy import submission
from tests.core_impl import Core


def hold_in_thread(lock: Any) -> tuple[threading.Thread, threading.Event, list[BaseException]]:
    """Start a thread that takes ``lock``, holds it until the event is set, then tries to release it."""
    held, done = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def run() -> None:
        lock.acquire()
        held.set()
        done.wait(10)
        try:
            lock.release()
        except RuntimeError as exc:
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    assert held.wait(10)
    return thread, done, errors


def test_at_fork_reinit_frees_a_lock_that_another_thread_holds(core: Core) -> None:
    lock = core.ProducerLock()
    thread, done, errors = hold_in_thread(lock)
    try:
        assert lock.acquire(False) is False
        lock._at_fork_reinit()
        assert lock.acquire(False) is True
        assert lock._is_owned()
        lock.release()
        assert not lock._is_owned()
    finally:
        done.set()
        thread.join(10)
    assert not thread.is_alive()
    # The former owner no longer owns it: its release fails as RLock's does.
    assert [str(e) for e in errors] == ["cannot release un-acquired lock"]


def test_at_fork_reinit_forgets_the_callers_own_count(core: Core) -> None:
    lock = core.ProducerLock()
    lock.acquire()
    lock.acquire()
    lock._at_fork_reinit()
    assert not lock._is_owned()
    with pytest.raises(RuntimeError, match=r"^cannot release un-acquired lock$"):
        lock.release()
    assert lock.acquire(False) is True
    lock.release()


# Run in a fresh interpreter, so that the process that forks has only the
# threads this script starts (pytest's process may have pool threads).
CHILD_SCRIPT = textwrap.dedent(
    """
    import json, os, sys, threading
    from flowpy.executors import DEFAULT, DaemonThreadPool, direct_executor
    from flowpy.submission import TWINS, SubmissionPublisher

    class Collect:
        def __init__(self):
            self.items, self.done = [], threading.Event()
        def on_subscribe(self, subscription):
            subscription.request(10)
        def on_next(self, item):
            self.items.append(item)
        def on_error(self, error):
            self.done.set()
        def on_complete(self):
            self.items.append("complete")
            self.done.set()

    def deliver(publisher_class, executor):
        publisher = publisher_class(executor)
        sink = Collect()
        publisher.subscribe(sink)
        for item in (1, 2, 3):
            publisher.submit(item)
        publisher.close()
        return sink.items if sink.done.wait(10) else "timed out"

    def in_child(old):
        publisher_class = type(old)
        lock = old._lock
        result = {"held": not lock.acquire(False)}
        lock._at_fork_reinit()
        result["after_reinit"] = lock.acquire(False)
        lock.release()
        result["direct"] = deliver(publisher_class, direct_executor)
        pool = DaemonThreadPool(max_workers=1)
        result["new_pool"] = deliver(publisher_class, pool)
        pool.shutdown()
        result["default"] = deliver(publisher_class, DEFAULT)
        return result

    results = {}
    deliver(SubmissionPublisher, DEFAULT)  # the shared pool has a thread at the fork
    for core in sys.argv[1:]:
        old = TWINS[core](direct_executor)
        held, release = threading.Event(), threading.Event()
        def hold():
            with old._lock:
                held.set()
                release.wait(10)
        thread = threading.Thread(target=hold)
        thread.start()
        held.wait(10)
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read)
            try:
                os.write(write, json.dumps(in_child(old)).encode())
            finally:
                os._exit(0)
        os.close(write)
        with os.fdopen(read) as stream:
            results[core] = json.loads(stream.read() or "null")
        os.waitpid(pid, 0)
        release.set()
        thread.join(10)
        old.close()
    print(json.dumps(results))
    """
)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork() is POSIX only")
@pytest.mark.timeout(60)
def test_both_cores_behave_the_same_in_a_forked_child() -> None:
    cores = list(submission.TWINS)  # "python", and "c" where it is available
    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": str(root)}
    out = subprocess.run(
        [sys.executable, "-c", CHILD_SCRIPT, *cores],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=50,
        check=True,
    )
    results = json.loads(out.stdout)
    expected = {
        "held": True,  # held at the fork by a thread that does not exist in the child
        "after_reinit": True,
        "direct": [1, 2, 3, "complete"],
        "new_pool": [1, 2, 3, "complete"],
        "default": [1, 2, 3, "complete"],  # the child's own shared pool
    }
    assert results == {core: expected for core in cores}


def run_script(script: str, core: str, *args: str, env: dict[str, str] | None = None) -> Any:
    """Run ``script`` in a fresh interpreter, which checks it runs on ``core``; return the JSON it prints last.

    The interpreter inherits this process's ``FLOWPY_NO_EXTENSIONS``, which the ``core`` fixture sets.
    """
    root = Path(__file__).resolve().parent.parent
    full_env = {**os.environ, "PYTHONPATH": str(root), **(env or {})}
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT_PRELUDE + textwrap.dedent(script), core, *args],
        cwd=root,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=100,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.splitlines()[-1])


SCRIPT_PRELUDE = textwrap.dedent(
    """
    import json, os, select, signal, sys, threading, time
    import flowpy
    from flowpy import _exit, _pool
    from flowpy.executors import DEFAULT, DaemonThreadPool, default_executor
    from flowpy.submission import SubmissionPublisher

    assert flowpy.implementation == sys.argv[1], (flowpy.implementation, sys.argv[1])

    class Collect:
        def __init__(self):
            self.items, self.done = [], threading.Event()
        def on_subscribe(self, subscription):
            subscription.request(10)
        def on_next(self, item):
            self.items.append(item)
        def on_error(self, error):
            self.items.append(repr(error))
            self.done.set()
        def on_complete(self):
            self.items.append("complete")
            self.done.set()

    def deliver(executor):
        publisher = SubmissionPublisher(executor)
        sink = Collect()
        publisher.subscribe(sink)
        for item in (1, 2, 3):
            publisher.submit(item)
        publisher.close()
        return sink.items if sink.done.wait(10) else "timed out"

    def hold(locks):
        \"\"\"Hold ``locks`` on a thread, as one inside subscribe() or a pool would; return the release event.\"\"\"
        held, release = threading.Event(), threading.Event()
        def run():
            for lock in locks:
                lock.acquire()
            held.set()
            release.wait(60)
            for lock in reversed(locks):
                lock.release()
        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        assert held.wait(10)
        return release

    def in_child(work, timeout):
        \"\"\"Fork; run ``work()`` in the child and return what it returns, or "hung" (and kill the child).\"\"\"
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read)
            try:
                os.write(write, json.dumps(work()).encode())
            finally:
                os._exit(0)
        os.close(write)
        ready, _, _ = select.select([read], [], [], timeout)
        if ready:
            with os.fdopen(read) as stream:
                result = json.loads(stream.read() or "null")
        else:
            os.close(read)
            os.kill(pid, signal.SIGKILL)
            result = "hung"
        os.waitpid(pid, 0)
        return result
    """
)

HELD_AT_FORK_SCRIPT = """
own_pool = DaemonThreadPool(2)
deliver(DEFAULT)  # the pools have threads at the fork
deliver(own_pool)
# At the fork a parent thread is inside subscribe() (it holds the exit
# registry's lock), inside a pool's creation (the pool registry's lock) and
# inside both pools' execute() (their locks).
release = hold([_exit._lock, _pool._pools_lock, default_executor()._lock, own_pool._lock])

def work():
    start = time.monotonic()
    result = {
        "default": deliver(DEFAULT),
        "new_pool": deliver(DaemonThreadPool(1)),
        "parent_pool": deliver(own_pool),
        "parent_pool_idle": own_pool.wait_idle(1),
        "new_default": default_executor() is not DEFAULT_AT_FORK,
    }
    result["seconds"] = time.monotonic() - start
    return result

DEFAULT_AT_FORK = default_executor()
results = in_child(work, 30)
release.set()
print(json.dumps(results))
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork() is POSIX only")
@pytest.mark.timeout(120)
def test_a_child_forked_while_a_parent_thread_holds_flowpys_locks_publishes_at_once(core: Core) -> None:
    result = run_script(HELD_AT_FORK_SCRIPT, core.name)
    assert result != "hung", "the child deadlocked on a lock held by a parent thread at the fork"
    done = [1, 2, 3, "complete"]
    assert {key: value for key, value in result.items() if key != "seconds"} == {
        "default": done,
        "new_pool": done,
        "parent_pool": done,  # empty in the child: it starts threads of its own
        "parent_pool_idle": True,  # the parent's tasks are not the child's
        "new_default": True,
    }
    assert result["seconds"] < 5


EXIT_SCRIPT = """
class Blocked:
    \"\"\"Requests everything; its first on_next blocks, so the rest stays buffered with demand.\"\"\"
    def __init__(self):
        self.entered, self.release, self.done = threading.Event(), threading.Event(), threading.Event()
    def on_subscribe(self, subscription):
        subscription.request(100)
    def on_next(self, item):
        self.entered.set()
        self.release.wait(60)
    def on_error(self, error):
        self.done.set()
    def on_complete(self):
        self.done.set()

class Idle:
    \"\"\"Requests nothing: its items are undelivered.\"\"\"
    def on_subscribe(self, subscription):
        self.subscription = subscription
    def on_next(self, item):
        pass
    def on_error(self, error):
        pass
    def on_complete(self):
        pass

publisher = SubmissionPublisher()
blocked, idle = Blocked(), Idle()
publisher.subscribe(blocked)
publisher.subscribe(idle)
for item in range(5):
    publisher.submit(item)
assert blocked.entered.wait(10)
err_path, result_path = sys.argv[2], sys.argv[3]
start = time.monotonic()
pid = os.fork()
if pid == 0:
    os.dup2(os.open(err_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), 2)
    signal.alarm(25)  # a bound: the test fails rather than hangs
    with open(result_path, "w") as out:
        json.dump(deliver(DEFAULT), out)
    sys.exit(0)  # a normal exit: the atexit handlers run
_, status = os.waitpid(pid, 0)
elapsed = time.monotonic() - start
blocked.release.set()
idle.subscription.cancel()
publisher.close()
assert blocked.done.wait(10)
print(json.dumps({"exit_code": os.waitstatus_to_exitcode(status), "seconds": elapsed}))
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork() is POSIX only")
@pytest.mark.timeout(120)
def test_a_child_exits_at_once_and_silently_about_the_parents_undelivered_items(core: Core, tmp_path: Path) -> None:
    err, result = tmp_path / "child-stderr", tmp_path / "child-result"
    outcome = run_script(EXIT_SCRIPT, core.name, str(err), str(result), env={"FLOWPY_EXIT_TIMEOUT": "30"})
    assert outcome["exit_code"] == 0, f"the child was killed by signal {-outcome['exit_code']}"
    assert outcome["seconds"] < 10  # FLOWPY_EXIT_TIMEOUT is 30
    assert json.loads(result.read_text()) == [1, 2, 3, "complete"]
    assert err.read_text() == ""  # no UndeliveredItemsWarning, nothing else


MULTIPROCESSING_SCRIPT = """
import multiprocessing

deliver(DEFAULT)
release = hold([_exit._lock, _pool._pools_lock, default_executor()._lock])

def child(connection):
    connection.send(deliver(DEFAULT))

context = multiprocessing.get_context("fork")
receiving, sending = context.Pipe(duplex=False)
process = context.Process(target=child, args=(sending,))
process.start()
result = receiving.recv() if receiving.poll(30) else "hung"
process.join(10)
if process.is_alive():
    process.kill()
    process.join()
release.set()
print(json.dumps({"result": result, "exit_code": process.exitcode}))
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork() is POSIX only")
@pytest.mark.timeout(120)
def test_a_multiprocessing_fork_child_publishes_at_once_while_a_parent_thread_is_inside_subscribe(core: Core) -> None:
    outcome = run_script(MULTIPROCESSING_SCRIPT, core.name)
    assert outcome == {"result": [1, 2, 3, "complete"], "exit_code": 0}


EVERY_LOCK_SCRIPT = """
import asyncio
from flowpy import schedulers
from flowpy.interop import asyncio as flowpy_asyncio
from flowpy.interop.asyncio import from_async_iterable

async def numbers():
    for item in (1, 2, 3):
        yield item

def pull(publisher):
    sink = Collect()
    publisher.subscribe(sink)
    return sink.items if sink.done.wait(10) else "timed out"

assert pull(from_async_iterable(numbers())) == [1, 2, 3, "complete"]  # the background loop runs
fired = threading.Event()
schedulers.default_scheduler().schedule(fired.set, 0.0)
assert fired.wait(10)  # the timer thread runs
release = hold([
    _exit._lock, _pool._pools_lock, default_executor()._lock,
    schedulers._default_lock, schedulers._queue.lock, flowpy_asyncio._background_lock,
])

def work():
    timer = threading.Event()
    schedulers.default_scheduler().schedule(timer.set, 0.0)
    return {
        "publish": deliver(DEFAULT),
        "timer": timer.wait(10),
        "asyncio": pull(from_async_iterable(numbers())),
    }

results = in_child(work, 30)
release.set()
print(json.dumps(results))
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork() is POSIX only")
@pytest.mark.timeout(120)
def test_a_child_forked_while_a_parent_thread_holds_every_process_wide_lock_uses_timers_and_asyncio() -> None:
    result = run_script(EVERY_LOCK_SCRIPT, flowpy.implementation)  # the core this process chose, as inherited
    assert result == {"publish": [1, 2, 3, "complete"], "timer": True, "asyncio": [1, 2, 3, "complete"]}
