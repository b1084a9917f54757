"""Latest values of several publishers: ``combine_latest`` and ``with_latest_from``.

``combine_latest`` emits a row of every source's latest item whenever any
source emits, once each has emitted; ``with_latest_from`` pairs each item of
one source with the latest item of another.

Threading:  ``combine_latest`` delivers from a drain loop that runs on
            whichever thread made progress possible, one thread at a time
            (rule 1.3); ``with_latest_from`` delivers on the source's thread.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any, TypeVar

from flowpy._checks import none_error, require, require_callable_or_none, require_positive_int, require_publisher
from flowpy._core.sentinels import Sentinel
from flowpy._core.upstream import UpstreamSlot
from flowpy._demand import MAX_DEMAND, replenish_limit
from flowpy._signals import reraise_fatal, signal_subscribe
from flowpy.flow import Publisher, Subscriber, Subscription
from flowpy.operators._base import DemandDrain, StagePublisher
from flowpy.operators._fused import Step, fuse
from flowpy.operators._sequence import Companion, SequenceStage
from flowpy.sources import empty

__all__ = ["combine_latest", "with_latest_from"]

T = TypeVar("T")
R = TypeVar("R")

_NOTHING = Sentinel("NOTHING")


def _none_message(name: str, fn: object) -> str:
    return f"{name} combiner must not return None (rule 2.13), got None from {fn!r}"


# --- combine_latest ----------------------------------------------------------------


class _Source(Subscriber[Any]):
    """One source of ``combine_latest``: keeps ``prefetch`` items requested, one more per item consumed."""

    __slots__ = ("_consumed", "_limit", "_slot", "done", "index", "parent", "prefetch")

    def __init__(self, parent: _CombineLatest, index: int, prefetch: int) -> None:
        self.parent = parent
        self.index = index
        self.prefetch = prefetch
        self._limit = replenish_limit(prefetch)
        self._slot = UpstreamSlot()  # the one subscription (rule 2.5)
        self._consumed = 0  # see consumed(): one thread at a time
        self.done = False  # set on the first terminal signal, or by cancel()

    def on_subscribe(self, subscription: Subscription) -> None:
        """Keep ``subscription`` and request ``prefetch`` items.

        Raises:
            TypeError: if ``subscription`` is ``None`` (rule 2.13).
        """
        if self._slot.accept(subscription):  # refused once the parent cancelled: it cancels every source's slot
            subscription.request(self.prefetch)

    def on_next(self, item: Any) -> None:
        """Make ``item`` this source's latest value.

        Raises:
            TypeError: if ``item`` is ``None`` (rule 2.13).
        """
        if item is None:
            raise none_error("item", "2.13")
        if not self.done:
            self.parent.latest(self, item)

    def on_error(self, error: BaseException) -> None:
        """Fail the stream at once.

        Raises:
            TypeError: if ``error`` is ``None`` (rule 2.13).
        """
        require(error, "error", "2.13")
        if not self.done:
            self.done = True
            self.parent.fail(error)

    def on_complete(self) -> None:
        """Tell the parent that this source is done."""
        if not self.done:
            self.done = True
            self.parent.completed(self)

    def consumed(self) -> None:
        """Count one item as used up; request 75 % of ``prefetch`` again each time that many were.

        Called on this source's thread while no row can be made yet, then by
        the drain only (the switch happens once, under the parent's lock).
        """
        self._consumed += 1
        if self._consumed == self._limit:
            self._consumed = 0
            subscription = self._slot.current
            if subscription is not None and not self.done:
                subscription.request(self._limit)

    def cancel(self) -> None:
        """Cancel the subscription, now or when it arrives."""
        self.done = True
        self._slot.cancel()


class _CombineLatest(DemandDrain):
    """The downstream's subscription: queues a row per item once every source has a value."""

    __slots__ = (
        "_combiner",
        "_completed",
        "_done",
        "_downstream",
        "_filled",
        "_latest",
        "_rows",
        "_terminated",
        "sources",
    )

    def __init__(
        self, downstream: Subscriber[Any], combiner: Callable[..., Any] | None, count: int, prefetch: int
    ) -> None:
        super().__init__()
        self._downstream = downstream
        self._combiner = combiner
        self.sources = tuple(_Source(self, index, prefetch) for index in range(count))
        self._terminated = False  # drain only: the terminal signal went downstream
        # --- Guarded by self._lock (appended there, popped by the drain) ----
        self._latest: list[Any] = [_NOTHING] * count
        self._filled = 0  # sources with a value
        self._completed = 0  # sources that completed with a value
        # At most prefetch rows per source: a row is made per item, and a
        # source is asked for one more item only once its row was consumed.
        self._rows: deque[tuple[_Source, tuple[Any, ...]]] = deque()
        self._done = False  # no row will be added any more

    def latest(self, source: _Source, item: Any) -> None:
        """Record ``item``; queue a row if every source has a value, else ask ``source`` for one more."""
        with self._lock:
            latest = self._latest
            if latest[source.index] is _NOTHING:
                self._filled += 1
            latest[source.index] = item
            full = self._filled == len(latest)
            if full:
                self._rows.append((source, tuple(latest)))
        if not full:
            source.consumed()  # the item is used up: no row will wait for it
        elif not self.draining:
            self._signal()

    def completed(self, source: _Source) -> None:
        """A source completed: the stream ends at once if it never had a value, else when all are done."""
        with self._lock:
            if self._latest[source.index] is _NOTHING:
                self._done = True  # no row can ever be made
            else:
                self._completed += 1
                self._done = self._done or self._completed == len(self._latest)
        self._signal()

    def _has_work(self) -> bool:
        return self._requested > 0 and bool(self._rows)

    def _cancel_upstream(self) -> None:
        for source in self.sources:
            source.cancel()
        self._rows.clear()

    def _signal_downstream_error(self, error: BaseException) -> None:
        if not self._terminated:
            self._terminated = True
            self._downstream.on_error(error)

    def _end(self, error: BaseException | None) -> None:
        self._terminated = True
        self.cancelled = True
        self._cancel_upstream()
        if error is None:
            self._downstream.on_complete()
        else:
            self._downstream.on_error(error)

    def _drain(self) -> None:
        if self._terminated:
            return
        if self.cancelled:
            self._cancel_upstream()
            return
        if self._failure is not None:
            self._end(self._failure)
            return
        rows = self._rows
        combiner = self._combiner
        on_next = self._downstream.on_next
        requested = self._requested
        emitted = 0
        while True:
            done = self._done  # read before the rows: no row follows it
            if not rows:
                if done:
                    self._end(None)
                    return
                break
            if emitted == requested or self.cancelled or self._failure is not None:
                break
            source, row = rows.popleft()
            if combiner is None:
                value: Any = row
            else:
                try:
                    value = combiner(*row)
                    if value is None:
                        raise TypeError(_none_message("combine_latest", combiner))
                except BaseException as error:
                    self._end(error)
                    reraise_fatal(error)
                    return
            on_next(value)
            emitted += 1
            source.consumed()
        self._produced(emitted, requested)


def combine_latest(
    *sources: Publisher[Any], combiner: Callable[..., R] | None = None, prefetch: int = 256
) -> Publisher[Any]:
    """Emit the latest item of every source whenever one of them emits, once each has emitted::

        first:   --1-----2-----------3--|
        second:  -----a-----b--|
        combine_latest(first, second)
        result:  -----(1,a)-(2,a)-(2,b)-(3,b)--|

    Rows are tuples unless ``combiner(*latest)`` is given. Completes when
    every source has completed (after the rows waiting), or at once when a
    source completes without ever emitting (no row can be made); the first
    error cancels the others and is signalled at once. A raising
    ``combiner``, or one returning ``None``, does the same. With no
    sources, completes at once.

    Demand: each source is asked for ``prefetch`` items, and for 75 % of
    that again as its items are used: an item that comes before every
    source has a value is used at once, the others when their row is
    delivered. So at most ``prefetch`` rows per source wait for the
    subscriber's demand (RxJava's ``combineLatest`` with its queue).

    Raises:
        TypeError: if an argument is not a publisher or ``combiner`` is not callable.
        ValueError: if ``prefetch`` is not positive.
    """
    for index, source in enumerate(sources):
        require_publisher(source, f"sources[{index}]")
    require_callable_or_none(combiner, "combiner")
    require_positive_int(prefetch, "prefetch")
    if not sources:
        return empty()

    def connect(subscriber: Subscriber[Any]) -> None:
        stage = _CombineLatest(subscriber, combiner, len(sources), prefetch)
        if not signal_subscribe(subscriber, stage):
            return
        stage._release()
        for source, inner in zip(sources, stage.sources, strict=True):
            if stage.cancelled:
                break
            source.subscribe(inner)

    return StagePublisher("combine_latest", connect)


# --- with_latest_from ------------------------------------------------------------------


class _Latest:
    """The latest item of ``other``: written on its thread, read by the source's (one reference, atomic)."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value: Any = _NOTHING

    def set(self, item: Any) -> None:
        self.value = item


class _WithLatest(Step):
    """Combines each item with the latest of ``other``; drops (and asks again for) items that come before it."""

    __slots__ = ("_combiner", "_latest")

    def __init__(self, latest: _Latest, combiner: Callable[[Any, Any], Any] | None) -> None:
        self._latest = latest
        self._combiner = combiner

    @property
    def drops(self) -> bool:
        return True

    def code(self, index: int) -> list[str]:
        combine = (
            [f"item = (item, other{index})"]
            if self._combiner is None
            else [
                f"item = combiner{index}(item, other{index})",
                "if item is None:",
                f"    raise TypeError(message{index})",
            ]
        )
        return [
            f"other{index} = latest{index}.value",
            f"if other{index} is nothing{index}:",
            f"    dropped{index} += 1",
            "    break",
            *combine,
        ]

    def arguments(self, index: int) -> dict[str, object]:
        arguments: dict[str, object] = {f"latest{index}": self._latest, f"nothing{index}": _NOTHING}
        if self._combiner is not None:
            arguments[f"combiner{index}"] = self._combiner
            arguments[f"message{index}"] = _none_message("with_latest_from", self._combiner)
        return arguments

    def state(self, index: int) -> dict[str, str]:
        return {f"dropped{index}": "0"}


class _WithLatestFrom(SequenceStage):
    """The source, combined in a fused step, as one attempt; ``other`` feeds the latest value."""

    __slots__ = ("_other", "_other_publisher")

    def __init__(
        self,
        downstream: Subscriber[Any],
        source: Publisher[Any],
        other: Publisher[Any],
        combiner: Callable[[Any, Any], Any] | None,
    ) -> None:
        super().__init__(downstream)
        latest = _Latest()
        self._pending = fuse(source, _WithLatest(latest, combiner))
        self._other_publisher = other
        self._other = Companion(latest.set, self._terminate, _ignore)

    def _started(self) -> None:
        self._other.request(MAX_DEMAND)
        self._other_publisher.subscribe(self._other)

    def _release(self) -> None:
        self._other.cancel()


def _ignore() -> None:
    """``other`` completed: its latest value stays in use (RxJava's ``withLatestFrom``)."""


def with_latest_from(
    source: Publisher[T], other: Publisher[Any], combiner: Callable[[T, Any], R] | None = None
) -> Publisher[Any]:
    """Pair each item of ``source`` with the latest item of ``other``::

        source:  ----1-----2-----3--|
        other:   --a-----b------------c
        with_latest_from(other)
        result:  ----(1,a)-(2,b)-(3,b)|

    Pairs are tuples ``(item, latest)`` unless ``combiner(item, latest)`` is
    given. ``other`` is subscribed first, with unbounded demand. Items of
    ``source`` that come before ``other`` has emitted are dropped (and asked
    for again, as ``filter`` does); ``other`` completing changes nothing, its
    error cancels ``source`` and fails the stream. The stream ends with
    ``source``. A raising ``combiner``, or one returning ``None``, cancels
    both and fails it. Fused with the synchronous operators before it.

    Demand: passed through to ``source``, plus the dropped items; ``other``
    is asked for everything and only its latest item is kept.

    Raises:
        TypeError: if ``source`` or ``other`` is not a publisher or ``combiner`` is not callable.
    """
    require_publisher(source, "source")
    require_publisher(other, "other")
    require_callable_or_none(combiner, "combiner")
    return StagePublisher(
        "with_latest_from", lambda subscriber: _WithLatestFrom(subscriber, source, other, combiner).start()
    )
