"""Fixtures shared by every test module."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest

import flowpy
from tests.core_impl import CORE_MODULES, core_params, use_core


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
    """Run every test of the core modules once per implementation (tests/core_impl.py)."""
    if metafunc.module.__name__.rpartition(".")[2] in CORE_MODULES:
        metafunc.parametrize("core_impl", core_params(), indirect=True)


@pytest.fixture(autouse=True)
def core_impl(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The core implementation this test runs against: ``"python"`` or ``"c"``.

    Parametrised for the core modules; elsewhere the default one, unchanged.
    Python interpreters the test starts inherit the choice through
    ``FLOWPY_NO_EXTENSIONS``.
    """
    name: str | None = getattr(request, "param", None)
    if name is None:
        yield flowpy._impl.implementation
        return
    if name == "python":
        monkeypatch.setenv("FLOWPY_NO_EXTENSIONS", "1")
    else:
        monkeypatch.delenv("FLOWPY_NO_EXTENSIONS", raising=False)
    with use_core(name):
        yield name
