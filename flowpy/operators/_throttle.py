"""Rate limiting by time: ``debounce``, ``sample`` and ``throttle_first``.

``debounce`` and ``sample`` emit when a timer says so, RxJava 3's way: they
request everything from their source, keep only the latest item, and emit
it if the subscriber has demand then, else end the stream with
:class:`~flowpy.errors.MissingBackpressureError`. ``throttle_first`` needs
no timer: it is a fused step (it joins ``map``, ``filter`` and the other
synchronous operators in one stage), lets an item through when the
scheduler's clock says its window is over, and passes demand through,
asking again for what it drops, as ``filter`` does.

Threading:  ``debounce`` and ``sample`` deliver from their drain, on the
            source's thread or the scheduler's executor, one at a time, in
            the subscriber's ``contextvars`` context; ``throttle_first`` runs
            on the source's thread.
"""

from __future__ import annotations

from typing import Any, TypeVar, cast

from flowpy._checks import none_error, require_publisher, require_seconds
from flowpy.flow import Publisher, Subscriber, Subscription
from flowpy.operators._base import StagePublisher
from flowpy.operators._fused import Step, fuse
from flowpy.operators._timed import TOLERANCE, TimedStage
from flowpy.schedulers import Scheduler, resolve_scheduler

__all__ = ["debounce", "sample", "throttle_first"]

T = TypeVar("T")

# Implementation overview
#
# debounce and sample take no lock per item: the source's thread only
# stores the latest item, boxed in a fresh tuple, in one attribute (_held).
# The timer side, under self._lock, remembers the box it consumed last
# (_taken) and takes a box only if it is another one: a box is a new object
# per item, so an item that equals (or is) the one before is still new.
# debounce's box also carries its deadline; its one timer is armed by the
# first item after a quiet time and, when it fires early, moved to the
# deadline of the newest box. Arming does not lose a wake-up: the source
# stores the box and then reads _armed; the timer, done, clears _armed and
# then reads _held again (CPython orders these plain reads and writes), so
# at least one of them sees the other and arms the timer for the new box.


class _Debounce(TimedStage[T]):
    """Holds the latest item and its deadline; one timer, moved lazily to the latest deadline."""

    __slots__ = ("_armed", "_held", "_now", "_scheduler", "_seconds", "_taken")

    def __init__(self, downstream: Subscriber[T], seconds: float, scheduler: Scheduler) -> None:
        super().__init__(downstream, "debounce")
        self._scheduler = scheduler
        self._seconds = seconds
        self._now = scheduler.now
        # --- Written by the source's thread only; read by the timer --------------
        self._held: tuple[T, float] | None = None  # the latest item and its deadline
        # --- Guarded by self._lock -------------------------------------------------
        self._taken: tuple[T, float] | None = None  # the last box emitted (or dropped at the end)
        self._armed = False  # a timer is set, or about to be; read racily by on_next

    def on_next(self, item: T) -> None:
        """Hold ``item`` in place of the one before; it is emitted after ``seconds`` without a newer one.

        Raises:
            TypeError: if ``item`` is ``None`` (rule 2.13).
        """
        if item is None:
            raise none_error("item", "2.13")
        self._held = (item, self._now() + self._seconds)
        if not self._armed:
            self._arm(self._seconds)

    def _arm(self, delay: float) -> None:
        with self._lock:
            if self._armed or self._stopped:
                return
            self._armed = True
            self.set_timer_locked(lambda: self._scheduler.schedule(self._fire, delay))

    def _fire(self) -> None:
        with self._lock:
            self._timer = None
            held = self._held
            if held is not None and held is not self._taken:
                left = held[1] - self._now()
                if left > TOLERANCE:  # a newer item came meanwhile: wait for its deadline
                    self.set_timer_locked(lambda: self._scheduler.schedule(self._fire, left))
                    return
                self._taken = held
                self.admit_locked(held[0], "an item")
            self._armed = False
        newer = self._held
        if newer is not held and newer is not None:  # came after the read above, and saw _armed set
            self._arm(max(0.0, newer[1] - self._now()))
        self._signal()

    def _upstream_completed_locked(self) -> None:
        held = self._held
        if held is not None and held is not self._taken:
            self._taken = held
            self.admit_locked(held[0], "its last item")


class _Sample(TimedStage[T]):
    """Holds the latest item; a periodic timer emits it, if it is not the one emitted last."""

    __slots__ = ("_held", "_period", "_scheduler", "_taken")

    def __init__(self, downstream: Subscriber[T], period: float, scheduler: Scheduler) -> None:
        super().__init__(downstream, "sample")
        self._scheduler = scheduler
        self._period = period
        self._held: tuple[T] | None = None  # written by the source's thread only: the latest item, boxed
        self._taken: tuple[T] | None = None  # guarded by self._lock: the last box emitted

    def _start(self, subscription: Subscription) -> None:
        with self._lock:
            self.set_timer_locked(lambda: self._scheduler.schedule_periodic(self._tick, self._period, self._period))
        super()._start(subscription)

    def on_next(self, item: T) -> None:
        """Hold ``item`` in place of the one before, for the next tick.

        Raises:
            TypeError: if ``item`` is ``None`` (rule 2.13).
        """
        if item is None:
            raise none_error("item", "2.13")
        self._held = (item,)

    def _tick(self) -> None:
        with self._lock:
            held = self._held
            if held is None or held is self._taken:
                return
            self._taken = held
            self.admit_locked(held[0], "a sample")
        self._signal()


def debounce(source: Publisher[T], seconds: float, *, scheduler: Scheduler | None = None) -> Publisher[T]:
    """Emit an item of ``source`` only after ``seconds`` without a newer one::

        source:   -1-2-3--------4-5----|
        debounce(3 dashes)
        result:   ---------3--------5--|     (5 at completion)

    Each item replaces the one held; the one held is emitted when
    ``seconds`` pass with no newer item, and at once when ``source``
    completes. An error from ``source`` is signalled at once and the held
    item dropped (RxJava 3's ``debounce(timeout)``).

    Demand: requests everything from ``source`` (``2**63 - 1``) and holds at
    most one item. An item due with no demand ends the stream with
    :class:`~flowpy.errors.MissingBackpressureError`; put
    ``on_backpressure_latest()`` after ``debounce`` to keep the newest
    instead.

    Raises:
        TypeError: if ``source`` is not a publisher, ``seconds`` is not a
            number or ``scheduler`` is not a Scheduler.
        ValueError: if ``seconds`` is negative or not finite.
    """
    require_publisher(source, "source")
    wait = require_seconds(seconds, "seconds")
    clock = resolve_scheduler(scheduler)
    return StagePublisher("debounce", lambda subscriber: source.subscribe(_Debounce(subscriber, wait, clock)))


def sample(source: Publisher[T], period: float, *, scheduler: Scheduler | None = None) -> Publisher[T]:
    """Emit the latest item of ``source`` every ``period`` seconds, if a new one came::

        source:   -1-2-3-----4------5-|
        sample(5 dashes)
        result:   -----3-----4------|       (ticks at 5, 10, 15, 20)

    The first tick is ``period`` after the subscription. A tick with no new
    item since the last emits nothing. When ``source`` completes, the
    stream completes and an item not yet sampled is dropped (RxJava 3's
    ``sample(period)``, ``emitLast`` false); an error is signalled at once.

    Demand: requests everything from ``source`` and holds at most one item.
    A sample due with no demand ends the stream with
    :class:`~flowpy.errors.MissingBackpressureError`; put
    ``on_backpressure_latest()`` after ``sample`` to keep the newest instead.

    Raises:
        TypeError: if ``source`` is not a publisher, ``period`` is not a
            number or ``scheduler`` is not a Scheduler.
        ValueError: if ``period`` is not positive or not finite.
    """
    require_publisher(source, "source")
    every = require_seconds(period, "period", positive=True)
    clock = resolve_scheduler(scheduler)
    return StagePublisher("sample", lambda subscriber: source.subscribe(_Sample(subscriber, every, clock)))


class _ThrottleFirst(Step):
    """A fused step: an item passes if the clock is past the end of the last window; else it is dropped."""

    __slots__ = ("_now", "_window")

    def __init__(self, now: Any, seconds: float) -> None:
        self._now = now
        self._window = seconds - TOLERANCE  # a window's end counts as reached TOLERANCE early

    @property
    def drops(self) -> bool:
        return True

    def code(self, index: int) -> list[str]:
        return [
            f"now{index} = clock{index}()",
            f"if not now{index} >= opens{index}:",
            f"    dropped{index} += 1",
            "    break",
            f"opens{index} = now{index} + window{index}",
        ]

    def arguments(self, index: int) -> dict[str, object]:
        return {f"clock{index}": self._now, f"window{index}": self._window}

    def state(self, index: int) -> dict[str, str]:
        return {f"opens{index}": "float('-inf')", f"dropped{index}": "0"}


def throttle_first(source: Publisher[T], seconds: float, *, scheduler: Scheduler | None = None) -> Publisher[T]:
    """Emit an item of ``source``, then drop the items that come in the next ``seconds``::

        source:   -1-2-3-----4-5-6---|
        throttle_first(4 dashes)
        result:   -1---------4-------|

    A window opens at each item let through and lasts ``seconds`` by the
    scheduler's clock; the first item at or after its end passes and opens
    the next. No timer is involved: the step reads ``scheduler.now()`` per
    item, on the source's thread, fused with its neighbours.

    Demand: passed through, and each dropped item asked for again, as
    ``filter`` does; so the subscriber gets what it requested and nothing is
    buffered. Unlike RxJava, which requests everything and signals
    ``MissingBackpressureException`` to a subscriber without demand, it
    never fails for lack of demand: a source that cannot slow down needs an
    ``on_backpressure_*`` operator before it.

    Raises:
        TypeError: if ``source`` is not a publisher, ``seconds`` is not a
            number or ``scheduler`` is not a Scheduler.
        ValueError: if ``seconds`` is negative or not finite.
    """
    require_publisher(source, "source")
    window = require_seconds(seconds, "seconds")
    clock = resolve_scheduler(scheduler)
    return cast("Publisher[T]", fuse(source, _ThrottleFirst(clock.now, window)))
