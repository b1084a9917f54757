"""Backpressure operators: for sources that cannot slow down.

Each requests everything from its source (demand ``2**63 - 1``) and decides
what to do with items the subscriber has not asked for yet: keep them in a
bounded buffer (``on_backpressure_buffer``), keep only the latest
(``on_backpressure_latest``), drop them (``on_backpressure_drop``) or fail
(``on_backpressure_error``). These four are the one vocabulary of overflow
strategies, :data:`BackpressureStrategy`, which :func:`on_backpressure`
selects by name and ``flowpy.interop.reactivex.from_observable`` applies to
an Observable. Every operator that drops items tells ``on_drop(item)``.

Threading:  ``on_backpressure_drop`` and ``on_backpressure_error`` signal on
            the source's thread; the buffering operators deliver from a drain
            loop on whichever thread made progress possible (the source's, or
            a ``request``'s), one thread at a time (rule 1.3). ``on_drop``
            runs on the source's thread, outside every lock; if it raises,
            the source is cancelled and the subscriber gets that error.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Final, Generic, Literal, TypeVar, get_args

from flowpy._checks import none_error, require_callable_or_none, require_positive_int, require_publisher
from flowpy._demand import MAX_DEMAND, add_demand, unfilled_demand
from flowpy._signals import reraise_fatal
from flowpy.errors import MissingBackpressureError
from flowpy.flow import Publisher, Subscriber
from flowpy.operators._base import Relay, TrackedStagePublisher
from flowpy.operators._queue import HeadSubscriber, QueueDrain
from flowpy.operators._tracking import Stage
from flowpy.snapshots import SubscriberSnapshot

__all__ = [
    "BackpressureStrategy",
    "DropHandler",
    "OverflowPolicy",
    "on_backpressure",
    "on_backpressure_buffer",
    "on_backpressure_drop",
    "on_backpressure_error",
    "on_backpressure_latest",
]

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)

BackpressureStrategy = Literal["buffer", "drop", "latest", "error"]
"""What happens to items the subscriber has not asked for: the ``on_backpressure_<strategy>`` operator."""

OverflowPolicy = Literal["error", "drop_oldest", "drop_latest"]
"""What ``on_backpressure_buffer`` does with an item that finds the buffer full."""

DropHandler = Callable[[T], object]
"""``on_drop(item)``: told of each item an operator discards, on the source's thread."""

_STRATEGIES: Final[tuple[BackpressureStrategy, ...]] = get_args(BackpressureStrategy)
_POLICIES: Final[tuple[OverflowPolicy, ...]] = get_args(OverflowPolicy)


def _check_on_drop(on_drop: object, drops: bool, setting: str, remedy: str) -> None:
    """Refuse an ``on_drop`` that is not callable, or one that ``setting`` would never call."""
    require_callable_or_none(on_drop, "on_drop")
    if on_drop is not None and not drops:
        raise ValueError(f"on_drop must be None with {setting}, which never drops items; use {remedy}")


def _dropped(on_drop: DropHandler[Any], item: Any, fail: Callable[[BaseException], None]) -> None:
    """Tell ``on_drop`` of ``item``; if it raises, hand the error to ``fail`` (which ends the stream)."""
    try:
        on_drop(item)
    except BaseException as error:
        fail(error)
        reraise_fatal(error)


class _OverflowSubscriber(HeadSubscriber):
    """Requests everything and applies the overflow policy to what does not fit."""

    __slots__ = ("_evicting", "_on_drop", "_policy")

    def __init__(
        self, parent: QueueDrain[Any], capacity: int, policy: OverflowPolicy, on_drop: DropHandler[Any] | None
    ) -> None:
        super().__init__(parent, capacity, "on_backpressure_buffer's upstream", delay_error=True)
        self._policy = policy
        self._on_drop = on_drop
        # "drop_oldest" only: an eviction (popleft, append) and the drain's
        # popleft hold it, so the drain never finds the queue emptied by an
        # eviction between its length check and its popleft, and the evicted
        # item is known exactly. The other appends and the length checks
        # need no lock: only this thread appends, only the drain pops.
        self._evicting = threading.Lock() if policy == "drop_oldest" else None

    def start(self) -> None:
        """Ask the upstream for everything it has (rule 3.17)."""
        if self.subscription is not None and not self.parent.cancelled:
            self.subscription.request(MAX_DEMAND)

    def _admit_over_capacity(self, item: Any) -> bool:
        """Apply the overflow policy; ``drop_oldest`` queues ``item`` itself, in place of the oldest."""
        policy = self._policy
        if policy == "error":
            self.overflow()
            return False
        dropped = item
        if policy == "drop_oldest":
            assert self._evicting is not None
            with self._evicting:
                if len(self.queue) < self.prefetch:
                    return True  # the drain took one meanwhile: room after all, queue and signal
                dropped = self.queue.popleft()
                self.queue.append(item)
            # A drain that looked at the queue between the popleft and the append found
            # it empty and may have ended its pass: signal as for any append.
            self.queued()
        self.parent.dropped += 1
        if self._on_drop is not None:
            _dropped(self._on_drop, dropped, self.abort)
        return False

    def overflow_message(self) -> str:
        return f"on_backpressure_buffer overflowed its capacity of {self.prefetch} items"

    def poll(self) -> Any:
        """Take the next item; nothing to replenish, everything was requested."""
        lock = self._evicting
        if lock is None:
            return self.queue.popleft()
        with lock:
            return self.queue.popleft()


class _BufferStage(QueueDrain[T], Generic[T]):
    __slots__ = ()

    def __init__(
        self, downstream: Subscriber[T], capacity: int, policy: OverflowPolicy, on_drop: DropHandler[T] | None
    ) -> None:
        super().__init__(downstream)
        self.upstream = _OverflowSubscriber(self, capacity, policy, on_drop)


def on_backpressure_buffer(
    source: Publisher[T],
    capacity: int = 256,
    *,
    on_overflow: OverflowPolicy = "error",
    on_drop: DropHandler[T] | None = None,
) -> Publisher[T]:
    """Request everything from ``source``; keep up to ``capacity`` items the subscriber has not asked for::

        source:   --1--2--3--4--|     (request(1) after 4 arrived; capacity 2)
        on_backpressure_buffer(2, on_overflow="drop_oldest")
        result:   --1-----------3-4|

    ``on_overflow`` says what happens to an item that finds the buffer full:
    ``"error"`` cancels ``source`` and signals
    :class:`~flowpy.errors.MissingBackpressureError` at once (the buffered
    items are dropped); ``"drop_oldest"`` drops the oldest buffered item to
    make room; ``"drop_latest"`` drops the arriving item. Each dropped item
    goes to ``on_drop(item)``. An error from ``source`` arrives after the
    buffered items.

    Raises:
        TypeError: if ``source`` is not a publisher, ``capacity`` is not an
            int or ``on_drop`` is not callable.
        ValueError: if ``capacity`` is not positive, ``on_overflow`` is not a
            policy, or ``on_drop`` is given with ``on_overflow="error"``.
    """
    require_publisher(source, "source")
    require_positive_int(capacity, "capacity")
    if on_overflow not in _POLICIES:
        raise ValueError(f"on_overflow must be one of 'error', 'drop_oldest', 'drop_latest', got {on_overflow!r}")
    _check_on_drop(on_drop, on_overflow != "error", "on_overflow='error'", "on_overflow='drop_oldest' or 'drop_latest'")

    def connect(subscriber: Subscriber[T], track: Callable[[Stage], None]) -> None:
        stage = _BufferStage(subscriber, capacity, on_overflow, on_drop)
        track(stage)
        source.subscribe(stage.upstream)

    return TrackedStagePublisher("on_backpressure_buffer", connect, capacity)


def on_backpressure_latest(source: Publisher[T], on_drop: DropHandler[T] | None = None) -> Publisher[T]:
    """Request everything from ``source``; keep only the latest item the subscriber has not taken::

        source:   --1--2--3--4--|     (request(1) at the start and after 3 arrived)
        on_backpressure_latest()
        result:   --1-------3-----|

    The same as ``on_backpressure_buffer(source, 1, on_overflow="drop_oldest", on_drop=on_drop)``:
    each item replaced by a newer one goes to ``on_drop(item)``.
    """
    return on_backpressure_buffer(source, 1, on_overflow="drop_oldest", on_drop=on_drop)


class _DemandGate(Relay, Generic[T]):
    """Passes an item on if the subscriber has demand for it; otherwise drops it, or fails. No queue."""

    __slots__ = ("__weakref__", "_dropped", "_emitted", "_lock", "_on_drop", "_requested", "_strict")

    def __init__(self, downstream: Subscriber[T], on_drop: DropHandler[T] | None, *, strict: bool) -> None:
        super().__init__(downstream)
        self._on_drop = on_drop
        self._strict = strict  # an item without demand fails the stream instead of being dropped
        self._emitted = 0  # delivering thread only
        self._dropped = 0  # delivering thread only: items dropped for want of demand
        # Guarded by self._lock; read racily by on_next, which can only see it too small.
        self._lock = threading.Lock()
        self._requested = 0

    def _started(self) -> None:
        """The downstream has its subscription: request everything (rule 3.17)."""
        upstream = self.upstream
        assert upstream is not None  # set before the hand-off
        upstream.request(MAX_DEMAND)

    def on_next(self, item: T) -> None:
        """Pass ``item`` on if demand is open; else drop it (``on_drop``) or fail (strict).

        Raises:
            TypeError: if ``item`` is ``None`` (rule 2.13).
        """
        if item is None:
            raise none_error("item", "2.13")
        if self.done:
            return
        if self._emitted < self._requested:
            self._emitted += 1
            self._downstream.on_next(item)
            return
        if self._strict:
            self._fail(
                MissingBackpressureError(
                    f"on_backpressure_error: the source emitted more than the {self._emitted} items requested"
                )
            )
            return
        self._dropped += 1
        if self._on_drop is not None:
            _dropped(self._on_drop, item, self._fail)

    def _fail(self, error: BaseException) -> None:
        """Cancel the source and signal ``error``."""
        self.cancel()
        self._downstream.on_error(error)

    def reading(self) -> SubscriberSnapshot | None:
        """This stage's demand and counters (nothing is buffered), or ``None`` once it ended (racy)."""
        if self.done:
            return None
        emitted = self._emitted
        return SubscriberSnapshot(
            self._downstream, 0, 0, unfilled_demand(self._requested, emitted), emitted, self._dropped
        )

    def request(self, n: int) -> None:
        """Add ``n`` to the demand; an invalid ``n`` goes upstream, which signals the error (rule 3.9)."""
        if self._upstream_for(n) is None:
            return
        with self._lock:
            self._requested = add_demand(self._requested, n)


def _gate(name: str, source: Publisher[T], on_drop: DropHandler[T] | None, *, strict: bool) -> Publisher[T]:
    def connect(subscriber: Subscriber[T], track: Callable[[Stage], None]) -> None:
        stage: _DemandGate[T] = _DemandGate(subscriber, on_drop, strict=strict)
        track(stage)
        source.subscribe(stage)

    return TrackedStagePublisher(name, connect, 0)  # capacity 0: no queue


def on_backpressure_drop(source: Publisher[T], on_drop: DropHandler[T] | None = None) -> Publisher[T]:
    """Request everything from ``source``; drop the items the subscriber has not asked for::

        source:   --1--2--3--4--|     (request(1) at the start and after 3 arrived)
        on_backpressure_drop()
        result:   --1--------4--|

    ``on_drop(item)`` is called, on the source's thread, for each dropped
    item; if it raises, ``source`` is cancelled and the error signalled.
    Nothing is queued: an item goes on only if the subscriber's demand is
    open when it arrives.

    Raises:
        TypeError: if ``source`` is not a publisher or ``on_drop`` is not callable.
    """
    require_publisher(source, "source")
    require_callable_or_none(on_drop, "on_drop")
    return _gate("on_backpressure_drop", source, on_drop, strict=False)


def on_backpressure_error(source: Publisher[T]) -> Publisher[T]:
    """Request everything from ``source``; fail if an item arrives that the subscriber has not asked for::

        source:   --1--2--3--|        (request(1) at the start)
        on_backpressure_error()
        result:   --1--X              (MissingBackpressureError)

    The failing item cancels ``source`` and signals
    :class:`~flowpy.errors.MissingBackpressureError` on the source's thread.
    Nothing is queued: for a source that should follow demand, and must say
    so loudly when it does not.

    Raises:
        TypeError: if ``source`` is not a publisher.
    """
    require_publisher(source, "source")
    return _gate("on_backpressure_error", source, None, strict=True)


def on_backpressure(
    source: Publisher[T],
    strategy: BackpressureStrategy = "buffer",
    *,
    capacity: int = 256,
    on_drop: DropHandler[T] | None = None,
) -> Publisher[T]:
    """Apply the backpressure operator named by ``strategy``: ``on_backpressure_<strategy>``.

    ======== ==========================================================================
    strategy operator
    ======== ==========================================================================
    buffer   ``on_backpressure_buffer(source, capacity, on_overflow="error")``
    drop     ``on_backpressure_drop(source, on_drop)``
    latest   ``on_backpressure_latest(source, on_drop)``
    error    ``on_backpressure_error(source)``
    ======== ==========================================================================

    ``capacity`` applies to ``"buffer"`` only; ``on_drop`` to the strategies that drop.

    Raises:
        TypeError: if ``source`` is not a publisher, ``capacity`` is not an
            int or ``on_drop`` is not callable.
        ValueError: if ``strategy`` is unknown, ``capacity`` is not positive,
            or ``on_drop`` is given with ``"buffer"`` or ``"error"``.
    """
    require_publisher(source, "source")
    if strategy not in _STRATEGIES:
        raise ValueError(f"strategy must be one of {', '.join(map(repr, _STRATEGIES))}, got {strategy!r}")
    require_positive_int(capacity, "capacity")
    _check_on_drop(on_drop, strategy in ("drop", "latest"), f"strategy={strategy!r}", "strategy='drop' or 'latest'")
    if strategy == "buffer":
        return on_backpressure_buffer(source, capacity)
    if strategy == "drop":
        return on_backpressure_drop(source, on_drop)
    if strategy == "latest":
        return on_backpressure_latest(source, on_drop)
    return on_backpressure_error(source)
