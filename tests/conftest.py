"""Fixtures shared by every test module.

Exceptions in other threads: every exception that reaches
:func:`threading.excepthook` while a test runs fails that test, unless the
test claims it with :func:`tests.support.expect_thread_exceptions`. The log is
installed for the whole session, so an exception reported after a test's last
phase (a pool thread still finishing) is not lost: it fails the next test's
setup, naming the test that ran before, or the session at its end.
"""

from __future__ import annotations

import sys
from collections.abc import Generator, Iterator

import pytest

from tests.core_impl import CORES, Core, core_params
from tests.support import ThreadException, thread_exceptions

_last_test: list[str] = []  # the node id of the test that ran last, for late reports


def _raise_if_any(records: list[ThreadException], where: str) -> None:
    if records:
        details = "\n".join(record.describe() for record in records)
        pytest.fail(f"{len(records)} unexpected exception(s) in other threads {where}:\n{details}", pytrace=False)


@pytest.fixture(scope="session", autouse=True)
def _thread_exception_log() -> Iterator[None]:
    """Install the thread exception log for the whole session."""
    thread_exceptions.install()
    try:
        yield
    finally:
        thread_exceptions.uninstall()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, None, None]:
    where = f"after {_last_test[-1]} ended" if _last_test else "before this test"
    _last_test[:] = [item.nodeid]
    if thread_exceptions.installed:
        _raise_if_any(thread_exceptions.take(), where)
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    result = yield
    _raise_if_any(thread_exceptions.take(), "during the test")
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Generator[None, None, None]:
    result = yield
    _raise_if_any(thread_exceptions.take(), "during teardown")
    return result


def pytest_sessionfinish(session: pytest.Session) -> None:
    records = thread_exceptions.take()
    if records:
        where = f"after {_last_test[-1]} ended" if _last_test else "during the session"
        details = "\n".join(record.describe() for record in records)
        sys.stderr.write(f"\n{len(records)} unexpected exception(s) in other threads {where}:\n{details}\n")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture
def tiny_switch_interval() -> Iterator[None]:
    """Switch threads as often as CPython allows, to shake out more interleavings."""
    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(previous)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Run every test that asks for ``core`` (itself or through a fixture) once per core (tests/core_impl.py)."""
    if "core" in metafunc.fixturenames:
        metafunc.parametrize("core", core_params(), indirect=True)


@pytest.fixture
def core(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Core:
    """The core this test runs on; Python interpreters the test starts get it through ``FLOWPY_NO_EXTENSIONS``."""
    name: str = request.param
    if name == "python":
        monkeypatch.setenv("FLOWPY_NO_EXTENSIONS", "1")
    else:
        monkeypatch.delenv("FLOWPY_NO_EXTENSIONS", raising=False)
    return CORES[name]
