"""``map`` and ``scan``: one output per input, demand passed through unchanged.

Both fuse with their neighbours (see :mod:`flowpy.operators._fused`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, cast

from flowpy._checks import require_callable, require_publisher
from flowpy._core.sentinels import NO_INITIAL
from flowpy.flow import Publisher
from flowpy.operators._fused import Step, fuse, indent

__all__ = ["map_", "scan"]

T = TypeVar("T")
R = TypeVar("R")


def _none_message(name: str, fn: object) -> str:
    return f"{name} function must not return None (rule 2.13), got None from {fn!r}"


class _Map(Step):
    __slots__ = ("_fn",)

    def __init__(self, fn: Callable[[Any], Any]) -> None:
        self._fn = fn

    def code(self, index: int) -> list[str]:
        return [
            f"item = fn{index}(item)",
            "if item is None:",
            f"    raise TypeError(message{index})",
        ]

    def arguments(self, index: int) -> dict[str, object]:
        return {f"fn{index}": self._fn, f"message{index}": _none_message("map", self._fn)}


class _Scan(Step):
    __slots__ = ("_fn", "_initial")

    def __init__(self, fn: Callable[[Any, Any], Any], initial: Any) -> None:
        self._fn = fn
        self._initial = initial

    def code(self, index: int) -> list[str]:
        accumulator = f"accumulator{index}"
        fold = [
            f"{accumulator} = fn{index}({accumulator}, item)",
            f"if {accumulator} is None:",
            f"    raise TypeError(message{index})",
            f"item = {accumulator}",
        ]
        if self._initial is not NO_INITIAL:
            return fold
        # Without an initial value the first item is the first accumulator.
        return [f"if {accumulator} is no_initial{index}:", f"    {accumulator} = item", "else:", *indent(fold)]

    def arguments(self, index: int) -> dict[str, object]:
        return {
            f"fn{index}": self._fn,
            f"initial{index}": self._initial,
            f"no_initial{index}": NO_INITIAL,
            f"message{index}": _none_message("scan", self._fn),
        }

    def state(self, index: int) -> dict[str, str]:
        return {f"accumulator{index}": f"initial{index}"}


def map_(source: Publisher[T], fn: Callable[[T], R]) -> Publisher[R]:
    """Emit ``fn(item)`` for each item of ``source``::

        source:  --1--2--3--|
        map(x*10)
        result:  --10-20-30-|

    Demand: passed through; ``request(n)`` asks ``source`` for ``n``.
    A raising ``fn`` cancels ``source`` and signals ``on_error``; so does a
    ``fn`` that returns ``None`` (``TypeError``, rule 2.13).

    Raises:
        TypeError: if ``source`` is not a publisher or ``fn`` is not callable.
    """
    require_publisher(source, "source")
    require_callable(fn, "fn")
    return cast("Publisher[R]", fuse(source, _Map(fn)))


def scan(source: Publisher[T], fn: Callable[[R, T], R], initial: R = NO_INITIAL) -> Publisher[R]:
    """Emit the running fold of ``source``: one accumulated value per item.

    ::

        source:  --1--2--3--|
        scan(+)
        result:  --1--3--6--|

    With ``initial``, the first value is ``fn(initial, first_item)``; the
    seed itself is not emitted, so the output has exactly one value per input
    (``itertools.accumulate(items, fn, initial=initial)`` without its first
    element). Without it, the first item is emitted as is.

    Demand: passed through. A raising ``fn`` (or one returning ``None``)
    cancels ``source`` and signals ``on_error``.

    Raises:
        TypeError: if ``source`` is not a publisher or ``fn`` is not callable.
    """
    require_publisher(source, "source")
    require_callable(fn, "fn")
    return cast("Publisher[R]", fuse(source, _Scan(fn, initial)))
