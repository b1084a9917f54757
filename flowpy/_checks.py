"""Argument checks shared by the constructors of flowpy (messages: "<name> must <rule>, got <value>")."""

from __future__ import annotations

__all__ = ["require", "require_int", "require_positive_int"]


def require_int(value: object, name: str) -> int:
    """Return ``value`` if it is an ``int`` (``bool`` is not).

    Raises:
        TypeError: if it is not.
    """
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} must be an int, got {value!r}")
    return value


def require_positive_int(value: object, name: str) -> int:
    """Return ``value`` if it is an ``int`` greater than 0.

    Raises:
        TypeError: if it is not an ``int``.
        ValueError: if it is not positive.
    """
    number = require_int(value, name)
    if number <= 0:
        raise ValueError(f"{name} must be positive, got {number!r}")
    return number


def require(value: object, name: str) -> None:
    """Raise ``TypeError("<name> must not be None")`` if ``value`` is ``None`` (rules 1.9, 2.13)."""
    if value is None:
        raise TypeError(f"{name} must not be None")
