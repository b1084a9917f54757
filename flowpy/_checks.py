"""Argument checks of flowpy's API: the one home of their rules and messages.

Every message reads "<name> must <rule>, got <value!r>" (or "<name> must not
be None", with the spec rule when one applies: ``(rule 1.9)`` for a
subscriber, ``(rule 2.13)`` for a signal's argument). ``bool`` is not an
``int`` where the API asks for one. This module imports nothing from flowpy:
it belongs to the API layer the TCK may use (see :mod:`flowpy.tck`).

A check is a function call; on a per-item path, keep the test inline and
call only to build the error::

    if item is None:
        raise none_error("item", "2.13")
"""

from __future__ import annotations

import threading
from numbers import Real

__all__ = [
    "check_timeout",
    "is_subscriber",
    "none_error",
    "require",
    "require_callable",
    "require_callable_or_none",
    "require_int",
    "require_non_negative_int",
    "require_positive_int",
    "require_publisher",
    "require_seconds",
    "require_subscriber",
]


def none_error(name: str, rule: str = "") -> TypeError:
    """Return ``TypeError("<name> must not be None")``, with `` (rule <rule>)`` appended when ``rule`` is given.

    For per-item paths, where the ``is None`` test stays inline and only the failure calls.
    """
    return TypeError(f"{name} must not be None (rule {rule})" if rule else f"{name} must not be None")


def require(value: object, name: str, rule: str = "") -> None:
    """Raise :func:`none_error` if ``value`` is ``None`` (rules 1.9, 2.13 when ``rule`` names them).

    Raises:
        TypeError: if ``value`` is ``None``.
    """
    if value is None:
        raise none_error(name, rule)


def is_subscriber(value: object) -> bool:
    """Whether ``value`` can be subscribed: it has a callable ``on_subscribe`` (a Flow or Reactive Streams subscriber,
    or a duck-typed one)."""
    return callable(getattr(value, "on_subscribe", None))


def require_subscriber(subscriber: object) -> None:
    """Raise unless ``subscriber`` is a subscriber: not ``None``, with a callable ``on_subscribe``.

    What every ``Publisher.subscribe`` checks first (rule 1.9). The other
    three methods are the subscriber's own business: one that is missing
    fails when its signal comes, as a method that raises does.

    Raises:
        TypeError: if ``subscriber`` is ``None`` (rule 1.9), or has no
            callable ``on_subscribe``.
    """
    if subscriber is None:
        raise none_error("subscriber", "1.9")
    if not is_subscriber(subscriber):
        raise TypeError(f"subscriber must be a Subscriber (with a callable on_subscribe), got {subscriber!r}")


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


def require_non_negative_int(value: object, name: str) -> int:
    """Return ``value`` if it is an ``int`` of at least 0.

    Raises:
        TypeError: if it is not an ``int``.
        ValueError: if it is negative.
    """
    number = require_int(value, name)
    if number < 0:
        raise ValueError(f"{name} must be non-negative, got {number!r}")
    return number


def require_seconds(value: object, name: str, *, positive: bool = False) -> float:
    """Return ``value`` as a ``float`` if it is a finite number of seconds, at least 0 (above 0 if ``positive``).

    An ``int`` or a ``float`` is a number; ``bool`` is not.

    Raises:
        TypeError: if it is not a number.
        ValueError: if it is infinite, NaN, negative, or 0 when ``positive``.
    """
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise TypeError(f"{name} must be a number of seconds, got {value!r}")
    seconds = float(value)
    if not (seconds > 0 if positive else seconds >= 0) or seconds == float("inf"):
        bound = "> 0" if positive else ">= 0"
        raise ValueError(f"{name} must be a finite number of seconds {bound}, got {value!r}")
    return seconds


def require_callable(fn: object, name: str) -> None:
    """Raise unless ``fn`` is callable.

    Raises:
        TypeError: if it is not (``None`` included).
    """
    if not callable(fn):
        raise TypeError(f"{name} must be callable, got {fn!r}")


def require_callable_or_none(fn: object, name: str) -> None:
    """Raise unless ``fn`` is callable or ``None`` (an optional callback).

    Raises:
        TypeError: if it is neither.
    """
    if fn is not None and not callable(fn):
        raise TypeError(f"{name} must be callable or None, got {fn!r}")


def require_publisher(publisher: object, name: str = "publisher") -> None:
    """Raise unless ``publisher`` has a callable ``subscribe`` (a Flow or Reactive Streams publisher).

    Raises:
        TypeError: if it has none (``None`` included).
    """
    if not callable(getattr(publisher, "subscribe", None)):
        raise TypeError(f"{name} must be a Publisher, got {publisher!r}")


def check_timeout(
    value: object,
    name: str = "timeout",
    *,
    negative_is_zero: bool = False,
    none_allowed: bool = True,
    millis: bool = False,
) -> float:
    """Return ``value`` as the seconds to wait, for every call that takes a timeout.

    A real number (``bool`` is not), not NaN: of seconds, or of milliseconds
    with ``millis`` (the TCK's timeouts). One above ``threading.TIMEOUT_MAX``
    seconds (about 292 years), ``inf`` included, waits that long: for ever,
    in practice. With ``negative_is_zero``, a negative one is 0, no wait
    (``offer``, as in the JDK); else it is an error. ``None``, where a call
    allows it, is the caller's to handle: the messages offer it unless
    ``none_allowed`` is false.

    Raises:
        TypeError: if ``value`` is not a real number.
        ValueError: if it is NaN, or negative without ``negative_is_zero``.
    """
    or_none = " or None" if none_allowed else ""
    unit = "milliseconds" if millis else "seconds"
    if not isinstance(value, Real) or isinstance(value, bool):
        raise TypeError(f"{name} must be a number of {unit}{or_none}, got {value!r}")
    if value != value:  # NaN, of any Real type
        raise ValueError(f"{name} must be a number of {unit}, got {value!r}")
    if value < 0:
        if negative_is_zero:
            return 0.0
        raise ValueError(f"{name} must be >= 0{or_none}, got {value!r}")
    try:
        seconds = float(value)
    except OverflowError:  # an int or Fraction beyond float
        return threading.TIMEOUT_MAX
    if millis:
        seconds /= 1000
    return seconds if seconds <= threading.TIMEOUT_MAX else threading.TIMEOUT_MAX
