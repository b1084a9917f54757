"""``distinct`` and ``distinct_until_changed``: drop repeated items.

Both are steps of the fused stage (:mod:`flowpy.operators._fused`) and ask
again for what they drop, as ``filter`` does.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, TypeVar, cast

from flowpy._checks import require_callable_or_none, require_publisher
from flowpy._core.sentinels import Sentinel
from flowpy.flow import Publisher
from flowpy.operators._fused import Step, fuse

__all__ = ["distinct", "distinct_until_changed"]

T = TypeVar("T")

_NO_KEY = Sentinel("NO_KEY")


def _key_lines(index: int, key_fn: object) -> list[str]:
    """Source lines that bind the item's key to ``key<index>``."""
    return [f"key{index} = key_fn{index}(item)" if key_fn is not None else f"key{index} = item"]


class _Distinct(Step):
    __slots__ = ("_key_fn",)

    def __init__(self, key_fn: Callable[[Any], Hashable] | None) -> None:
        self._key_fn = key_fn

    @property
    def drops(self) -> bool:
        return True

    def code(self, index: int) -> list[str]:
        return [
            *_key_lines(index, self._key_fn),
            f"if key{index} in seen{index}:",
            f"    dropped{index} += 1",
            "    break",
            f"seen{index}.add(key{index})",
        ]

    def arguments(self, index: int) -> dict[str, object]:
        return {f"key_fn{index}": self._key_fn} if self._key_fn is not None else {}

    def state(self, index: int) -> dict[str, str]:
        return {f"seen{index}": "set()", f"dropped{index}": "0"}


class _DistinctUntilChanged(Step):
    __slots__ = ("_key_fn",)

    def __init__(self, key_fn: Callable[[Any], object] | None) -> None:
        self._key_fn = key_fn

    @property
    def drops(self) -> bool:
        return True

    def code(self, index: int) -> list[str]:
        return [
            *_key_lines(index, self._key_fn),
            f"if last{index} is not no_key{index} and key{index} == last{index}:",
            f"    dropped{index} += 1",
            "    break",
            f"last{index} = key{index}",
        ]

    def arguments(self, index: int) -> dict[str, object]:
        arguments: dict[str, object] = {f"no_key{index}": _NO_KEY}
        if self._key_fn is not None:
            arguments[f"key_fn{index}"] = self._key_fn
        return arguments

    def state(self, index: int) -> dict[str, str]:
        return {f"last{index}": f"no_key{index}", f"dropped{index}": "0"}


def distinct(source: Publisher[T], key_fn: Callable[[T], Hashable] | None = None) -> Publisher[T]:
    """Emit each item whose key (``key_fn(item)``, or the item) was not seen before in this subscription::

        source:  --1--2--1--3--2--|
        distinct()
        result:  --1--2-----3-----|

    Memory: the keys seen, in a ``set`` per subscription, released when it
    ends; it grows with the number of *distinct* keys, not of items, so use
    it on streams with a bounded set of keys (RxJava's ``distinct`` keeps a
    ``HashSet`` the same way). An unhashable key fails the stream with
    ``TypeError``.

    Demand: passed through; each dropped item is asked for again, as
    ``filter`` does. A raising ``key_fn`` cancels ``source`` and signals
    ``on_error``. Fused with its synchronous neighbours.

    Raises:
        TypeError: if ``source`` is not a publisher or ``key_fn`` is not callable.
    """
    require_publisher(source, "source")
    require_callable_or_none(key_fn, "key_fn")
    return cast("Publisher[T]", fuse(source, _Distinct(key_fn)))


def distinct_until_changed(source: Publisher[T], key_fn: Callable[[T], object] | None = None) -> Publisher[T]:
    """Drop each item whose key (``key_fn(item)``, or the item) equals (``==``) the previous item's key::

        source:  --1--1--2--2--1--|
        distinct_until_changed()
        result:  --1-----2-----1--|

    Memory: one key, the last. Demand: passed through; each dropped item is
    asked for again. A raising ``key_fn`` (or ``==``) cancels ``source`` and
    signals ``on_error``. Fused with its synchronous neighbours.

    Raises:
        TypeError: if ``source`` is not a publisher or ``key_fn`` is not callable.
    """
    require_publisher(source, "source")
    require_callable_or_none(key_fn, "key_fn")
    return cast("Publisher[T]", fuse(source, _DistinctUntilChanged(key_fn)))
