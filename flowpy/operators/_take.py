"""``take``, ``skip``, ``take_while`` and ``skip_while``: operators that limit a stream.

Each fuses with its neighbours and adjusts the demand that crosses it: ``take``
caps it, ``skip`` adds to it, ``take_while`` passes it through, ``skip_while``
asks again for what it drops.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, cast

from flowpy._checks import require_callable, require_non_negative_int, require_publisher
from flowpy._demand import add_demand
from flowpy.flow import Publisher
from flowpy.operators._fused import Demand, Step, fuse

__all__ = ["skip", "skip_while", "take", "take_while"]

T = TypeVar("T")


class _Take(Step):
    __slots__ = ("_count",)

    def __init__(self, count: int) -> None:
        self._count = count

    @property
    def is_empty(self) -> bool:
        return self._count == 0

    def demand(self) -> Demand:
        budget = self._count  # still to be requested upstream

        def cap(n: int) -> int:
            nonlocal budget
            if n > budget:
                n = budget
            budget -= n
            return n

        return cap

    def code(self, index: int) -> list[str]:
        return [f"remaining{index} -= 1"]

    def after(self, index: int) -> list[str]:
        # For an item that did not reach this step, remaining is still above
        # 0: it reaches 0 only with the last item taken, and complete() stops the chain.
        return [f"if not remaining{index}:", "    complete()"]

    def arguments(self, index: int) -> dict[str, object]:
        return {f"count{index}": self._count}

    def state(self, index: int) -> dict[str, str]:
        return {f"remaining{index}": f"count{index}"}


class _Skip(Step):
    __slots__ = ("_count",)

    def __init__(self, count: int) -> None:
        self._count = count

    def demand(self) -> Demand:
        extra = self._count  # added to the first request, then 0

        def add(n: int) -> int:
            nonlocal extra
            n = add_demand(n, extra)
            extra = 0
            return n

        return add

    def code(self, index: int) -> list[str]:
        return [f"if remaining{index}:", f"    remaining{index} -= 1", "    break"]

    def arguments(self, index: int) -> dict[str, object]:
        return {f"count{index}": self._count}

    def state(self, index: int) -> dict[str, str]:
        return {f"remaining{index}": f"count{index}"}


class _TakeWhile(Step):
    __slots__ = ("_predicate",)

    def __init__(self, predicate: Callable[[Any], object]) -> None:
        self._predicate = predicate

    def code(self, index: int) -> list[str]:
        return [f"if not predicate{index}(item):", "    complete()", "    break"]

    def arguments(self, index: int) -> dict[str, object]:
        return {f"predicate{index}": self._predicate}


class _SkipWhile(Step):
    __slots__ = ("_predicate",)

    def __init__(self, predicate: Callable[[Any], object]) -> None:
        self._predicate = predicate

    @property
    def drops(self) -> bool:
        return True

    def code(self, index: int) -> list[str]:
        # Once an item has passed, the predicate is no longer called.
        return [
            f"if skipping{index} and predicate{index}(item):",
            f"    dropped{index} += 1",
            "    break",
            f"skipping{index} = False",
        ]

    def arguments(self, index: int) -> dict[str, object]:
        return {f"predicate{index}": self._predicate}

    def state(self, index: int) -> dict[str, str]:
        return {f"skipping{index}": "True", f"dropped{index}": "0"}


def take(source: Publisher[T], count: int) -> Publisher[T]:
    """Emit the first ``count`` items of ``source``, then cancel it and complete::

        source:  --1--2--3--4--5--
        take(3)
        result:  --1--2--3|

    Demand: the total requested from ``source`` never exceeds ``count``, so
    ``take(5)`` on an infinite source asks for 5 items at most and cancels it
    after the fifth. ``take(0)`` completes at once and requests nothing.

    Raises:
        TypeError: if ``source`` is not a publisher or ``count`` is not an int.
        ValueError: if ``count`` is negative.
    """
    require_publisher(source, "source")
    require_non_negative_int(count, "count")
    return cast("Publisher[T]", fuse(source, _Take(count)))


def skip(source: Publisher[T], count: int) -> Publisher[T]:
    """Drop the first ``count`` items of ``source``, emit the rest::

        source:  --1--2--3--4--|
        skip(2)
        result:  --------3--4--|

    Demand: the first ``request(n)`` asks ``source`` for ``n + count``; later
    requests pass through. So ``skip(3)`` followed by ``request(2)`` requests
    5 upstream.

    Raises:
        TypeError: if ``source`` is not a publisher or ``count`` is not an int.
        ValueError: if ``count`` is negative.
    """
    require_publisher(source, "source")
    require_non_negative_int(count, "count")
    if count == 0:
        return source
    return cast("Publisher[T]", fuse(source, _Skip(count)))


def take_while(source: Publisher[T], predicate: Callable[[T], object]) -> Publisher[T]:
    """Emit items while ``predicate(item)`` is true; at the first false one, cancel and complete::

        source:  --1--2--7--3--|
        take_while(x < 5)
        result:  --1--2--|

    Demand: passed through. A raising ``predicate`` cancels ``source`` and
    signals ``on_error``.

    Raises:
        TypeError: if ``source`` is not a publisher or ``predicate`` is not callable.
    """
    require_publisher(source, "source")
    require_callable(predicate, "predicate")
    return cast("Publisher[T]", fuse(source, _TakeWhile(predicate)))


def skip_while(source: Publisher[T], predicate: Callable[[T], object]) -> Publisher[T]:
    """Drop items while ``predicate(item)`` is true; from the first false one on, emit everything::

        source:  --1--2--7--3--|
        skip_while(x < 5)
        result:  --------7--3--|

    Demand: passed through; the dropped items are asked for again, as
    ``filter`` does, so the subscriber gets what it requested. Nothing is
    buffered. Once an item has passed, ``predicate`` is not called again. A raising ``predicate``
    cancels ``source`` and signals ``on_error``. Fused with its synchronous
    neighbours.

    Raises:
        TypeError: if ``source`` is not a publisher or ``predicate`` is not callable.
    """
    require_publisher(source, "source")
    require_callable(predicate, "predicate")
    return cast("Publisher[T]", fuse(source, _SkipWhile(predicate)))
