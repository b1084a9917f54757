"""``timestamp`` and ``time_interval``: each item with the time it arrived, or the time since the one before.

Both are fused steps (they join ``map``, ``filter`` and the other synchronous
operators in one stage): one item out per item in, demand passed through,
the scheduler's clock read once per item on the source's thread.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, TypeVar, cast

from flowpy._checks import require_publisher
from flowpy.flow import Publisher
from flowpy.operators._fused import Step, fuse
from flowpy.schedulers import Scheduler, resolve_scheduler

__all__ = ["TimeInterval", "Timestamped", "time_interval", "timestamp"]

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)


@dataclass(frozen=True, slots=True)
class Timestamped(Generic[T_co]):
    """An item and the scheduler's time when it arrived (RxJava's ``Timed``)."""

    value: T_co
    """The item."""
    timestamp: float
    """``scheduler.now()`` when it arrived, in seconds (:func:`time.monotonic` on the default scheduler)."""


@dataclass(frozen=True, slots=True)
class TimeInterval(Generic[T_co]):
    """An item and the seconds since the item before it (since the subscription, for the first)."""

    value: T_co
    """The item."""
    interval: float
    """Seconds since the item before, by the scheduler's clock."""


class _Timestamp(Step):
    __slots__ = ("_now",)

    def __init__(self, now: Any) -> None:
        self._now = now

    def code(self, index: int) -> list[str]:
        return [f"item = timed{index}(item, clock{index}())"]

    def arguments(self, index: int) -> dict[str, object]:
        return {f"timed{index}": Timestamped, f"clock{index}": self._now}


class _TimeInterval(Step):
    __slots__ = ("_now",)

    def __init__(self, now: Any) -> None:
        self._now = now

    def code(self, index: int) -> list[str]:
        return [
            f"now{index} = clock{index}()",
            f"item = timed{index}(item, now{index} - last{index})",
            f"last{index} = now{index}",
        ]

    def arguments(self, index: int) -> dict[str, object]:
        return {f"timed{index}": TimeInterval, f"clock{index}": self._now}

    def state(self, index: int) -> dict[str, str]:
        return {f"last{index}": f"clock{index}()"}  # read when the stage is made, at subscribe


def timestamp(source: Publisher[T], *, scheduler: Scheduler | None = None) -> Publisher[Timestamped[T]]:
    """Emit each item of ``source`` as ``Timestamped(value, timestamp)``, ``timestamp`` being ``scheduler.now()``::

        source:  --a-----b--|            (at 2 s and 8 s)
        timestamp()
        result:  --(a,2)-(b,8)--|

    The time is the scheduler's ``now()``: :func:`time.monotonic` on the
    default scheduler (seconds since an arbitrary point, never going back),
    virtual time on a :class:`~flowpy.testing.TestScheduler`.

    Demand: passed through; fused with its neighbours.

    Raises:
        TypeError: if ``source`` is not a publisher or ``scheduler`` is not a Scheduler.
    """
    require_publisher(source, "source")
    clock = resolve_scheduler(scheduler)
    return cast("Publisher[Timestamped[T]]", fuse(source, _Timestamp(clock.now)))


def time_interval(source: Publisher[T], *, scheduler: Scheduler | None = None) -> Publisher[TimeInterval[T]]:
    """Emit each item of ``source`` as ``TimeInterval(value, interval)``: the seconds since the item before::

        subscribe at 0
        source:  --a-----b--|            (at 2 s and 8 s)
        time_interval()
        result:  --(a,2)-(b,6)--|

    The first interval is measured from the subscription, as in RxJava.

    Demand: passed through; fused with its neighbours.

    Raises:
        TypeError: if ``source`` is not a publisher or ``scheduler`` is not a Scheduler.
    """
    require_publisher(source, "source")
    clock = resolve_scheduler(scheduler)
    return cast("Publisher[TimeInterval[T]]", fuse(source, _TimeInterval(clock.now)))
