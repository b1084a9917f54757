"""Who shuts down the helper publisher's executor: the TCK only what it created."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from flowpy.executors import DaemonThreadPool, Executor
from flowpy.tck import TestEnvironment
from flowpy.tck._base import Verification
from flowpy.tck.executor import DaemonPool, as_execute
from flowpy.tck.runner import Status, run_verification, verification_for
from tests.tck.reference import SyncSubscriber


def _env() -> TestEnvironment:
    return TestEnvironment(1000, 20)


def _blackbox(name: str, executor: Executor | None) -> type[Verification]:
    base = verification_for("subscriber-blackbox", SyncSubscriber, env=_env)
    hooks: dict[str, Any] = {} if executor is None else {"publisher_executor_service": lambda self: executor}
    return type(name, (base,), hooks)


def _required(name: str) -> bool:
    return "_required_" in name


def _rejects_new_tasks(pool: DaemonThreadPool | DaemonPool) -> bool:
    try:
        pool.execute(lambda: None)
    except RuntimeError as exc:
        assert str(exc) == "cannot schedule new tasks after shutdown"
        return True
    return False


@pytest.mark.timeout(60)
def test_two_verification_classes_share_a_user_executor() -> None:
    pool = DaemonThreadPool(2, thread_name_prefix="user-pool")
    try:
        first = run_verification(_blackbox("TestFirst", pool), _required)
        second = run_verification(_blackbox("TestSecond", pool), _required)
        for outcome in first + second:
            assert outcome.status is Status.PASSED, outcome
        assert len(second) == 11
        assert not _rejects_new_tasks(pool)  # still the user's, still running
    finally:
        pool.shutdown(wait=True)


def test_default_helper_executor_is_shut_down_by_teardown_class() -> None:
    verification = _blackbox("TestDefault", None)
    instance: Any = verification()
    pool = instance.helper_executor()
    assert isinstance(pool, DaemonPool)  # the TCK's own pool, not the library's
    assert instance.helper_executor() is pool  # one per class
    verification.teardown_class()  # type: ignore[attr-defined]
    assert _rejects_new_tasks(pool)
    assert verification().helper_executor() is not pool  # type: ignore[attr-defined]  # a new one on next use
    verification.teardown_class()  # type: ignore[attr-defined]


def test_override_returning_the_default_pool_leaves_it_to_the_tck() -> None:
    class TestLogged(_blackbox("Base", None)):  # type: ignore[misc]
        calls = 0

        def publisher_executor_service(self) -> Executor:
            TestLogged.calls += 1
            return super().publisher_executor_service()  # type: ignore[no-any-return]

    pool = TestLogged().helper_executor()
    TestLogged.teardown_class()
    assert TestLogged.calls == 1
    assert isinstance(pool, DaemonPool)
    assert _rejects_new_tasks(pool)


def test_user_executor_is_not_shut_down_by_teardown_class() -> None:
    pool = DaemonThreadPool(1, thread_name_prefix="user-pool")
    try:
        verification = _blackbox("TestUser", pool)
        assert verification().helper_executor() is pool  # type: ignore[attr-defined]
        verification.teardown_class()  # type: ignore[attr-defined]
        assert not _rejects_new_tasks(pool)
    finally:
        pool.shutdown(wait=True)



# --- The TCK's own pool and executor kinds (flowpy.tck.executor) ---------------------


def test_daemon_pool_runs_tasks_on_at_most_its_daemon_threads() -> None:
    pool = DaemonPool(2, thread_name_prefix="tck-pool")
    release = threading.Event()
    started = threading.Semaphore(0)
    threads: list[threading.Thread] = []

    def task() -> None:
        threads.append(threading.current_thread())
        started.release()
        release.wait(10)

    try:
        for _ in range(4):
            pool.execute(task)
        assert started.acquire(timeout=10) and started.acquire(timeout=10)
        assert not started.acquire(timeout=0.05)  # both threads are busy: the other two wait
        release.set()
        assert started.acquire(timeout=10) and started.acquire(timeout=10)
    finally:
        pool.shutdown(wait=True)
    assert {thread.name for thread in threads} == {"tck-pool-0", "tck-pool-1"}
    assert all(thread.daemon for thread in threads)


def test_daemon_pool_submit_returns_the_result_or_the_exception() -> None:
    pool = DaemonPool(1)
    try:
        assert pool.submit(lambda x: x * 2, 21).result(timeout=10) == 42
        with pytest.raises(KeyError, match=r"^'gone'$"):
            pool.submit(lambda: {}["gone"]).result(timeout=10)
    finally:
        pool.shutdown(wait=True)


def test_daemon_pool_reports_an_executed_task_that_raised_and_goes_on(monkeypatch: pytest.MonkeyPatch) -> None:
    reported: list[BaseException | None] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: reported.append(args.exc_value))
    pool = DaemonPool(1)
    try:
        pool.execute(lambda: {}["gone"])
        assert pool.submit(lambda: "still running").result(timeout=10) == "still running"
    finally:
        pool.shutdown(wait=True)
    assert [repr(error) for error in reported] == ["KeyError('gone')"]


def test_daemon_pool_shutdown_with_cancel_futures_drops_what_is_queued() -> None:
    pool = DaemonPool(1)
    release = threading.Event()
    ran: list[str] = []
    pool.execute(lambda: release.wait(10))
    pool.execute(lambda: ran.append("queued"))
    pool.shutdown(wait=False, cancel_futures=True)
    release.set()
    pool.shutdown(wait=True)
    assert ran == []
    assert _rejects_new_tasks(pool)


@pytest.mark.parametrize(
    ("threads", "error", "message"),
    [
        (0, ValueError, r"^threads must be positive, got 0$"),
        (True, TypeError, r"^threads must be an int, got True$"),
        (2.0, TypeError, r"^threads must be an int, got 2\.0$"),
    ],
)
def test_daemon_pool_needs_a_positive_int_of_threads(threads: Any, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        DaemonPool(threads)


def test_as_execute_takes_execute_then_submit_then_a_callable() -> None:
    ran: list[str] = []

    class WithExecute:
        def execute(self, task: Callable[[], object]) -> None:
            ran.append("execute")
            task()

    def plain(task: Callable[[], object]) -> None:
        ran.append("callable")
        task()

    as_execute(WithExecute())(lambda: ran.append("task"))
    as_execute(plain)(lambda: ran.append("task"))
    with ThreadPoolExecutor(1) as futures_pool:
        assert as_execute(futures_pool) == futures_pool.submit
    assert ran == ["execute", "task", "callable", "task"]


@pytest.mark.parametrize(
    ("executor", "message"),
    [
        (None, r"^executor must not be None$"),
        (3, r"^executor must be a concurrent\.futures\.Executor, an object with execute\(fn\) or a callable, got 3$"),
    ],
)
def test_as_execute_rejects_what_is_no_executor(executor: Any, message: str) -> None:
    with pytest.raises(TypeError, match=message):
        as_execute(executor)
