"""Fixtures shared by every test module."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest


@pytest.fixture
def tiny_switch_interval() -> Iterator[None]:
    """Switch threads as often as CPython allows, to shake out more interleavings."""
    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(previous)
