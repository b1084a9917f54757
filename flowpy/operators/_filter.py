"""``filter``: items that pass a predicate; asks again for the ones it drops."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, cast

from flowpy._checks import require_callable, require_publisher
from flowpy.flow import Publisher
from flowpy.operators._fused import Step, fuse

__all__ = ["filter_"]

T = TypeVar("T")


class _Filter(Step):
    __slots__ = ("_predicate",)

    def __init__(self, predicate: Callable[[Any], object]) -> None:
        self._predicate = predicate

    @property
    def drops(self) -> bool:
        return True

    def code(self, index: int) -> list[str]:
        return [f"if not predicate{index}(item):", f"    dropped{index} += 1", "    break"]

    def arguments(self, index: int) -> dict[str, object]:
        return {f"predicate{index}": self._predicate}

    def state(self, index: int) -> dict[str, str]:
        return {f"dropped{index}": "0"}


def filter_(source: Publisher[T], predicate: Callable[[T], object]) -> Publisher[T]:
    """Emit the items of ``source`` for which ``predicate(item)`` is true::

        source:  --1--2--3--4--|
        filter(even)
        result:  -----2-----4--|

    Demand: passed through; each dropped item is asked for again, so the
    subscriber still gets what it requested. The drops are re-requested in
    one ``request`` once every item requested upstream has arrived, so the
    upstream never has more outstanding than the subscriber asked for plus
    the drops. A raising ``predicate`` cancels ``source`` and signals
    ``on_error``.

    Raises:
        TypeError: if ``source`` is not a publisher or ``predicate`` is not callable.
    """
    require_publisher(source, "source")
    require_callable(predicate, "predicate")
    return cast("Publisher[T]", fuse(source, _Filter(predicate)))
