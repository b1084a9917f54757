"""SubmissionPublisher and os.fork(): the producer lock of both cores, and what a forked child may do.

The contract (docs/submission-publisher.md, "Fork"): a publisher made before
``os.fork()`` is not used in the child; its producer lock is in whatever
state it was at the fork, in both cores alike, and ``_at_fork_reinit()``
resets it as ``threading.RLock``'s does. Publishers made in the child work as
anywhere, on an executor made there or on the default one (the child gets a
shared pool of its own on first use).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from flowpy import _impl


def lock_factories() -> list[Any]:
    factories: list[Any] = [pytest.param(threading.RLock, id="threading.RLock")]
    reason = "compiled core not built" if _impl.CProducerLock is None else ""
    factories.append(
        pytest.param(_impl.CProducerLock, id="ProducerLock", marks=pytest.mark.skipif(bool(reason), reason=reason))
    )
    return factories


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


@pytest.mark.parametrize("make_lock", lock_factories())
def test_at_fork_reinit_frees_a_lock_that_another_thread_holds(make_lock: Callable[[], Any]) -> None:
    lock = make_lock()
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


@pytest.mark.parametrize("make_lock", lock_factories())
def test_at_fork_reinit_forgets_the_callers_own_count(make_lock: Callable[[], Any]) -> None:
    lock = make_lock()
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
    from flowpy import _impl
    from flowpy.executors import DEFAULT, DaemonThreadPool, direct_executor
    from flowpy.submission import SubmissionPublisher

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

    def deliver(executor):
        publisher = SubmissionPublisher(executor)
        sink = Collect()
        publisher.subscribe(sink)
        for item in (1, 2, 3):
            publisher.submit(item)
        publisher.close()
        return sink.items if sink.done.wait(10) else "timed out"

    def in_child(old):
        lock = old._lock
        result = {"held": not lock.acquire(False)}
        lock._at_fork_reinit()
        result["after_reinit"] = lock.acquire(False)
        lock.release()
        result["direct"] = deliver(direct_executor)
        pool = DaemonThreadPool(max_workers=1)
        result["new_pool"] = deliver(pool)
        pool.shutdown()
        result["default"] = deliver(DEFAULT)
        return result

    results = {}
    deliver(DEFAULT)  # the shared pool has a thread at the fork
    for core in sys.argv[1:]:
        with _impl.using(core):
            old = SubmissionPublisher(direct_executor)
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
    cores = ["python"] if _impl.CBufferedSubscription is None else ["python", "c"]
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
