"""Who shuts down the helper publisher's executor: the TCK only what it created."""

from __future__ import annotations

from typing import Any

import pytest

from flowpy.executors import DaemonThreadPool, Executor
from flowpy.tck import TestEnvironment
from flowpy.tck._base import Verification
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


def _rejects_new_tasks(pool: DaemonThreadPool) -> bool:
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
    assert isinstance(pool, DaemonThreadPool)
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
    assert isinstance(pool, DaemonThreadPool)
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
