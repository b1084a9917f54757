"""``map`` and ``scan``: one output per input, demand passed through unchanged.

Both fuse with their neighbours (see :mod:`flowpy.operators._fused`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, cast

from flowpy.flow import Publisher
from flowpy.operators._base import require_callable, require_publisher
from flowpy.operators._fused import FusedSubscriber, Handler, Step, fuse

__all__ = ["map_", "scan"]

T = TypeVar("T")
R = TypeVar("R")

_NO_INITIAL: Any = object()


def _none_error(name: str, fn: object) -> TypeError:
    return TypeError(f"{name} function must not return None (rule 2.13), got None from {fn!r}")


class _Map(Step):
    __slots__ = ("_fn",)

    def __init__(self, fn: Callable[[Any], Any]) -> None:
        self._fn = fn

    def link(self, stage: FusedSubscriber[Any], emit: Handler, index: int) -> Handler:
        fn = self._fn

        def on_map(item: Any) -> None:
            result = fn(item)
            if result is None:
                raise _none_error("map", fn)
            emit(result)

        return on_map


class _Scan(Step):
    __slots__ = ("_fn", "_initial")

    def __init__(self, fn: Callable[[Any, Any], Any], initial: Any) -> None:
        self._fn = fn
        self._initial = initial

    def link(self, stage: FusedSubscriber[Any], emit: Handler, index: int) -> Handler:
        fn = self._fn
        accumulator = self._initial

        def on_scan(item: Any) -> None:
            nonlocal accumulator
            if accumulator is _NO_INITIAL:
                accumulator = item
            else:
                accumulator = fn(accumulator, item)
                if accumulator is None:
                    raise _none_error("scan", fn)
            emit(accumulator)

        return on_scan


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


def scan(source: Publisher[T], fn: Callable[[R, T], R], initial: R = _NO_INITIAL) -> Publisher[R]:
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
