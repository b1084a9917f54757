"""Marker objects shared across flowpy: one definition each, with a readable ``repr``."""

from __future__ import annotations

from typing import Any, Final

__all__ = ["NO_INITIAL", "Sentinel"]


class Sentinel:
    """A unique marker; compare with ``is``. Its ``repr`` is its name."""

    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def __repr__(self) -> str:
        return self._name


NO_INITIAL: Final[Any] = Sentinel("NO_INITIAL")
"""The default of ``scan``'s ``initial``: no seed was given (``None`` is not a valid seed either, rule 2.13)."""
