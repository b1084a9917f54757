"""Snapshots of an operator's stages: which stages of one operator publisher are alive, and their readings.

An operator publisher (``observe_on``, the backpressure operators, ``merge``,
``flat_map``) makes one stage per ``subscribe``. It keeps weak references to
them in a :class:`StageTracker`, so :meth:`snapshot` can read every open stage
without keeping any alive. Tracking costs one weak reference per subscribe and
nothing per item.
"""

from __future__ import annotations

import threading
import weakref
from typing import Protocol

from flowpy.snapshots import PublisherSnapshot, SubscriberSnapshot

__all__ = ["Stage", "StageTracker"]


class Stage(Protocol):
    """A stage that can say how full it is."""

    def reading(self) -> SubscriberSnapshot | None:
        """This stage's buffer and counters, or ``None`` once it has ended."""


class StageTracker:
    """The stages one operator publisher made, held weakly."""

    __slots__ = ("_lock", "_stages")

    def __init__(self) -> None:
        self._lock = threading.Lock()  # a leaf lock: serialises track(); nothing is called under it but reading()
        # --- Replaced under self._lock, never mutated; read without it ---
        self._stages: tuple[weakref.ref[Stage], ...] = ()

    def track(self, stage: Stage) -> None:
        """Remember ``stage``; forget those that ended or were collected."""
        with self._lock:
            live = tuple(ref for ref in self._stages if _open(ref))
            self._stages = (*live, weakref.ref(stage))

    def snapshot(self, capacity: int) -> PublisherSnapshot:
        """A :class:`PublisherSnapshot` of the open stages; ``capacity`` is the operator's queue size."""
        readings = []
        for ref in self._stages:
            stage = ref()
            reading = None if stage is None else stage.reading()
            if reading is not None:
                readings.append(reading)
        return PublisherSnapshot(False, capacity, tuple(readings))


def _open(ref: weakref.ref[Stage]) -> bool:
    stage = ref()
    return stage is not None and stage.reading() is not None
