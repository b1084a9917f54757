"""Every operator refuses a None item or error from its upstream with the same message (rule 2.13)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from flowpy import operators
from flowpy.executors import direct_executor
from flowpy.flow import Publisher, Subscriber
from tests.support import Recorder


class _Capturing(Publisher[Any]):
    """Keeps the subscriber an operator subscribes upstream, so the test can signal it directly."""

    def __init__(self) -> None:
        self.subscriber: Subscriber[Any] | None = None

    def subscribe(self, subscriber: Subscriber[Any]) -> None:
        self.subscriber = subscriber


OPERATORS: dict[str, Callable[[Publisher[Any]], Publisher[Any]]] = {
    "map": lambda source: operators.map(source, str),
    "filter": lambda source: operators.filter(source, bool),
    "buffer": lambda source: operators.buffer(source, 2),
    "on_backpressure_buffer": lambda source: operators.on_backpressure_buffer(source, 4),
    "on_backpressure_latest": operators.on_backpressure_latest,
    "on_backpressure_drop": operators.on_backpressure_drop,
    "observe_on": lambda source: operators.observe_on(source, direct_executor),
    "subscribe_on": lambda source: operators.subscribe_on(source, direct_executor),
    "merge": lambda source: operators.merge(source),
    # --- Rx vocabulary ---
    "retry": operators.retry,
    "repeat": lambda source: operators.repeat(source, 2),
    "on_error_resume": lambda source: operators.on_error_resume(source, lambda e: source),
    "concat_map": lambda source: operators.concat_map(source, operators.first),
    "switch_map": lambda source: operators.switch_map(source, operators.first),
    "combine_latest": lambda source: operators.combine_latest(source, source),
    "with_latest_from": lambda source: operators.with_latest_from(source, source),
    "amb": lambda source: operators.amb(source, source),
    "using": lambda source: operators.using(lambda: 1, lambda resource: source, lambda resource: None),
    "take_until": lambda source: operators.take_until(source, source),
    "take_last": lambda source: operators.take_last(source, 2),
    "ignore_elements": operators.ignore_elements,
    "distinct": operators.distinct,
    "skip_while": lambda source: operators.skip_while(source, bool),
    "dematerialize": operators.dematerialize,
    "do_on_next": lambda source: operators.do_on_next(source, print),
    "do_on_error": lambda source: operators.do_on_error(source, print),
    "do_finally": lambda source: operators.do_finally(source, print),
}


def _upstream_subscriber(name: str) -> Subscriber[Any]:
    source = _Capturing()
    OPERATORS[name](source).subscribe(Recorder())
    assert source.subscriber is not None
    return source.subscriber


@pytest.mark.parametrize("name", sorted(OPERATORS))
def test_operator_on_next_none_raises_type_error_naming_rule_2_13(name: str) -> None:
    with pytest.raises(TypeError, match=r"^item must not be None \(rule 2\.13\)$"):
        _upstream_subscriber(name).on_next(None)


@pytest.mark.parametrize(
    "name",
    [
        "observe_on",
        "subscribe_on",
        "merge",
        "on_backpressure_buffer",
        # --- Rx vocabulary ---
        "retry",
        "concat_map",
        "switch_map",
        "combine_latest",
        "amb",
        "using",
        "take_last",
        "ignore_elements",
        "do_on_error",
    ],
)
def test_operator_on_error_none_raises_type_error_naming_rule_2_13(name: str) -> None:
    with pytest.raises(TypeError, match=r"^error must not be None \(rule 2\.13\)$"):
        _upstream_subscriber(name).on_error(None)  # type: ignore[arg-type]
