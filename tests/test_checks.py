"""flowpy._checks: every argument check, the values it accepts and refuses, and its exact message."""

from __future__ import annotations

import ast
import math
import threading
from collections.abc import Callable
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from flowpy import _checks
from flowpy._checks import (
    check_timeout,
    is_subscriber,
    none_error,
    require,
    require_callable,
    require_callable_or_none,
    require_int,
    require_non_negative_int,
    require_positive_int,
    require_publisher,
    require_seconds,
    require_subscriber,
)
from flowpy.sources import RangePublisher
from flowpy.subscribers import LambdaSubscriber


class _Int(int):
    """An int subclass other than bool: an int."""


def test_none_error_names_the_argument_and_the_rule_when_one_applies() -> None:
    error = none_error("item", "2.13")
    assert type(error) is TypeError
    assert str(error) == "item must not be None (rule 2.13)"
    assert str(none_error("fn")) == "fn must not be None"


@pytest.mark.parametrize("value", [0, "", False, [], object()])
def test_require_accepts_anything_but_none(value: object) -> None:
    require(value, "value")
    require(value, "value", "2.13")


@pytest.mark.parametrize(
    ("rule", "message"),
    [("", r"^error must not be None$"), ("2.13", r"^error must not be None \(rule 2\.13\)$")],
)
def test_require_refuses_none(rule: str, message: str) -> None:
    with pytest.raises(TypeError, match=message):
        require(None, "error", rule)


def test_require_subscriber_refuses_none_citing_rule_1_9() -> None:
    require_subscriber(LambdaSubscriber(print))
    with pytest.raises(TypeError, match=r"^subscriber must not be None \(rule 1\.9\)$"):
        require_subscriber(None)


class _OnSubscribeOnly:
    def on_subscribe(self, subscription: object) -> None:
        raise AssertionError("not called by the check")


def test_require_subscriber_accepts_what_has_on_subscribe_whatever_else_it_lacks() -> None:
    require_subscriber(_OnSubscribeOnly())
    assert is_subscriber(_OnSubscribeOnly()) and is_subscriber(LambdaSubscriber(print))
    assert not is_subscriber(print) and not is_subscriber(None)


@pytest.mark.parametrize(("value", "shown"), [(42, "42"), ("on_subscribe", "'on_subscribe'"), (print, "<built-in")])
def test_require_subscriber_refuses_what_has_no_on_subscribe(value: object, shown: str) -> None:
    with pytest.raises(
        TypeError, match=rf"^subscriber must be a Subscriber \(with a callable on_subscribe\), got {shown}"
    ):
        require_subscriber(value)


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        (0, 0.0),
        (1.5, 1.5),
        (_Int(2), 2.0),
        (Fraction(1, 4), 0.25),
        (math.inf, threading.TIMEOUT_MAX),
        (1e300, threading.TIMEOUT_MAX),
        (2**70, threading.TIMEOUT_MAX),
        (10**400, threading.TIMEOUT_MAX),
    ],
)
def test_check_timeout_returns_seconds_no_longer_than_the_platform_can_wait(value: object, seconds: float) -> None:
    assert check_timeout(value) == seconds
    assert type(check_timeout(value)) is float


def test_check_timeout_makes_a_negative_timeout_zero_only_when_asked() -> None:
    assert check_timeout(-3, negative_is_zero=True) == 0.0
    assert check_timeout(-math.inf, negative_is_zero=True) == 0.0
    with pytest.raises(ValueError, match=r"^timeout must be >= 0 or None, got -3$"):
        check_timeout(-3)


@pytest.mark.parametrize(
    ("value", "error", "message"),
    [
        (math.nan, ValueError, r"^wait must be a number of seconds, got nan$"),
        (True, TypeError, r"^wait must be a number of seconds or None, got True$"),
        ("1", TypeError, r"^wait must be a number of seconds or None, got '1'$"),
        (None, TypeError, r"^wait must be a number of seconds or None, got None$"),
        (Decimal("1"), TypeError, r"^wait must be a number of seconds or None, got Decimal\('1'\)$"),
    ],
)
def test_check_timeout_refuses_nan_and_what_is_no_number(value: object, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        check_timeout(value, "wait", negative_is_zero=True)


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        (0, 0.0),
        (1500, 1.5),
        (Fraction(1, 4), 0.00025),
        (10**13, threading.TIMEOUT_MAX),
        (math.inf, threading.TIMEOUT_MAX),
        (10**400, threading.TIMEOUT_MAX),
    ],
)
def test_check_timeout_of_milliseconds_returns_seconds_no_longer_than_the_platform_can_wait(
    value: object, seconds: float
) -> None:
    assert check_timeout(value, millis=True) == seconds


def test_check_timeout_messages_name_the_unit_and_offer_none_only_where_allowed() -> None:
    with pytest.raises(ValueError, match=r"^wait_millis must be a number of milliseconds, got nan$"):
        check_timeout(math.nan, "wait_millis", millis=True)
    with pytest.raises(TypeError, match=r"^wait_millis must be a number of milliseconds or None, got '1'$"):
        check_timeout("1", "wait_millis", millis=True)
    with pytest.raises(TypeError, match=r"^wait must be a number of seconds, got None$"):
        check_timeout(None, "wait", none_allowed=False)
    with pytest.raises(ValueError, match=r"^wait must be >= 0, got -1$"):
        check_timeout(-1, "wait", none_allowed=False)


@pytest.mark.parametrize("value", [0, -3, 2**63, _Int(5)])
def test_require_int_returns_an_int(value: int) -> None:
    assert require_int(value, "n") is value


@pytest.mark.parametrize(
    ("value", "shown"),
    [(True, "True"), (False, "False"), (1.0, "1.0"), ("1", "'1'"), (None, "None")],
)
def test_require_int_refuses_bool_float_str_and_none(value: object, shown: str) -> None:
    with pytest.raises(TypeError, match=rf"^n must be an int, got {shown}$"):
        require_int(value, "n")


@pytest.mark.parametrize("value", [1, 256, 2**63 - 1, _Int(1)])
def test_require_positive_int_returns_a_positive_int(value: int) -> None:
    assert require_positive_int(value, "capacity") is value


@pytest.mark.parametrize(
    ("value", "error", "message"),
    [
        (0, ValueError, r"^capacity must be positive, got 0$"),
        (-1, ValueError, r"^capacity must be positive, got -1$"),
        (True, TypeError, r"^capacity must be an int, got True$"),
        (2.0, TypeError, r"^capacity must be an int, got 2\.0$"),
    ],
)
def test_require_positive_int_refuses(value: object, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        require_positive_int(value, "capacity")


@pytest.mark.parametrize("value", [0, 1, 2**63, _Int(0)])
def test_require_non_negative_int_returns_an_int_of_at_least_zero(value: int) -> None:
    assert require_non_negative_int(value, "count") is value


@pytest.mark.parametrize(
    ("value", "error", "message"),
    [
        (-1, ValueError, r"^count must be non-negative, got -1$"),
        (False, TypeError, r"^count must be an int, got False$"),
        ("0", TypeError, r"^count must be an int, got '0'$"),
    ],
)
def test_require_non_negative_int_refuses(value: object, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        require_non_negative_int(value, "count")


@pytest.mark.parametrize("fn", [print, lambda: None, int, LambdaSubscriber(print).on_next])
def test_require_callable_accepts_callables(fn: Callable[..., Any]) -> None:
    require_callable(fn, "fn")
    require_callable_or_none(fn, "fn")


@pytest.mark.parametrize(("fn", "shown"), [(None, "None"), (3, "3"), ("print", "'print'")])
def test_require_callable_refuses_what_cannot_be_called(fn: object, shown: str) -> None:
    with pytest.raises(TypeError, match=rf"^fn must be callable, got {shown}$"):
        require_callable(fn, "fn")


def test_require_callable_or_none_accepts_none_and_refuses_the_rest() -> None:
    require_callable_or_none(None, "handler")
    with pytest.raises(TypeError, match=r"^handler must be callable or None, got 3$"):
        require_callable_or_none(3, "handler")


def test_require_publisher_accepts_what_has_subscribe() -> None:
    require_publisher(RangePublisher(0, 1))

    class Duck:
        def subscribe(self, subscriber: object) -> None:
            raise AssertionError("not called by the check")

    require_publisher(Duck(), "source")


class _NotCallableSubscribe:
    subscribe = 1

    def __repr__(self) -> str:
        return "<subscribe is no method>"


@pytest.mark.parametrize(
    ("value", "shown"), [(None, "None"), ([1], r"\[1\]"), (_NotCallableSubscribe(), "<subscribe is no method>")]
)
def test_require_publisher_refuses_what_cannot_be_subscribed_to(value: object, shown: str) -> None:
    with pytest.raises(TypeError, match=rf"^source must be a Publisher, got {shown}$"):
        require_publisher(value, "source")
    with pytest.raises(TypeError, match=r"^publisher must be a Publisher, got "):
        require_publisher(value)


@pytest.mark.parametrize(("value", "expected"), [(0, 0.0), (1, 1.0), (0.25, 0.25), (_Int(2), 2.0)])
def test_require_seconds_returns_a_float(value: object, expected: float) -> None:
    seconds = require_seconds(value, "delay")
    assert seconds == expected
    assert type(seconds) is float


@pytest.mark.parametrize(
    ("value", "positive", "error", "message"),
    [
        (True, False, TypeError, r"^delay must be a number of seconds, got True$"),
        ("1", False, TypeError, r"^delay must be a number of seconds, got '1'$"),
        (None, False, TypeError, r"^delay must be a number of seconds, got None$"),
        (-0.5, False, ValueError, r"^delay must be a finite number of seconds >= 0, got -0\.5$"),
        (float("inf"), False, ValueError, r"^delay must be a finite number of seconds >= 0, got inf$"),
        (float("nan"), True, ValueError, r"^delay must be a finite number of seconds > 0, got nan$"),
        (0, True, ValueError, r"^delay must be a finite number of seconds > 0, got 0$"),
    ],
)
def test_require_seconds_refuses(value: object, positive: bool, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        require_seconds(value, "delay", positive=positive)


def test_every_public_check_is_tested_here() -> None:
    tested = {name for name in globals() if name in _checks.__all__}
    assert tested == set(_checks.__all__)


def test_checks_import_nothing_from_flowpy() -> None:
    tree = ast.parse(Path(_checks.__file__).read_text(encoding="utf-8"))
    imported = [node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)] + [
        alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names
    ]
    assert [name for name in imported if name.startswith("flowpy")] == []
