"""Fixtures shared by the interop tests."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest


@pytest.fixture
def fast_switching() -> Iterator[None]:
    """Switch threads as often as possible, to shake out interleavings."""
    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(previous)
