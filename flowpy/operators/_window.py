"""``window_with_count`` and ``window_with_time``: split a stream into windows, each a publisher of its items.

Each window is a :class:`~flowpy.operators._unicast.UnicastPublisher`
(a :class:`~flowpy.flowable.Flowable` from the ``Flowable`` methods): it
serves one subscriber, keeps the items that arrive before that subscriber
does or asks for them, and ends when the window closes. Cancelling the
outer stream stops new windows; the source is cancelled once no window
that is still open wants items (RxJava 3's rule).

Threading:  windows are emitted from the outer stream's drain, and their items
            from each window's own drain, on the source's thread, the
            scheduler's executor (``window_with_time``) or the thread of a
            ``request``, one signal at a time per subscriber, each in its own
            subscriber's ``contextvars`` context.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from flowpy._checks import none_error, require, require_positive_int, require_publisher, require_seconds
from flowpy._demand import MAX_DEMAND, check_request
from flowpy.flow import Publisher, Subscriber, Subscription
from flowpy.operators._base import TrackedStagePublisher
from flowpy.operators._timed import TimedStage
from flowpy.operators._tracking import Stage
from flowpy.operators._unicast import UnicastPublisher
from flowpy.schedulers import Scheduler, resolve_scheduler

__all__ = ["window_with_count", "window_with_time"]

T = TypeVar("T")


def _cap(n: int) -> int:
    return min(n, MAX_DEMAND)


class _Windows(TimedStage[UnicastPublisher[T]], Generic[T]):
    """The outer stream: opens windows, emits them, and keeps the source while a window wants items.

    ``TimedStage``'s cancel means here "the outer subscriber is gone": the
    windows it already has go on, and the source is cancelled only when the
    last open one is done.
    """

    __slots__ = ("_gone", "_live")

    def __init__(self, downstream: Subscriber[UnicastPublisher[T]], name: str) -> None:
        super().__init__(downstream, name)
        # --- Guarded by self._lock ---------------------------------------------
        self._live: set[UnicastPublisher[T]] = set()  # windows made and not closed, nor cancelled by their subscriber
        self._gone = False  # the outer subscriber cancelled (or raised): open no new window

    def open_window(self) -> UnicastPublisher[T] | None:
        """Make a window and queue it for the outer subscriber (no demand check); ``None`` if it is gone.

        The caller keeps the window, then calls :meth:`_signal` to emit it
        (the outer subscriber may raise there: the window is kept by then).
        """
        window: UnicastPublisher[T] = UnicastPublisher("window", lambda: self._window_done(window))
        with self._lock:
            if self._gone or self._stopped:
                return None
            self._live.add(window)
            self.queue_locked(window)
        return window

    def admit_window(self) -> UnicastPublisher[T] | None:
        """Make a window due now (time-driven): the outer subscriber must have demand for it, else the stream fails.

        As for :meth:`open_window`, the caller signals after keeping it.
        """
        window: UnicastPublisher[T] = UnicastPublisher("window", lambda: self._window_done(window))
        with self._lock:
            if self._gone or self._stopped:
                return None
            admitted = self.admit_locked(window, "a window")
            if admitted:
                self._live.add(window)
        return window if admitted else None

    def close_window(self, window: UnicastPublisher[T], error: BaseException | None = None) -> None:
        """End ``window`` (after its queued items); the source may go if nothing else wants it."""
        if error is None:
            window.complete()
        else:
            window.fail(error)
        self._window_done(window)

    def _window_done(self, window: UnicastPublisher[T]) -> None:
        with self._lock:
            self._live.discard(window)
            release = self._gone and not self._live
        if release:
            self._release_source()

    def _cancel_upstream(self) -> None:
        # The outer subscriber is gone: the windows it never received are dropped, the others go on;
        # if it raised (rule 2.13), the stream is broken: the open windows complete and the source goes.
        with self._lock:
            self._gone = True
            for window in self._items:
                self._live.discard(window)
            self._items.clear()
            broken = self._broken
            windows = list(self._live) if broken else []
            release = broken or not self._live
        for window in windows:
            self.close_window(window)
        if release:
            self._release_source()

    def _terminate(self, error: BaseException | None) -> None:
        # The source's end has closed the windows already; a failure of the
        # outer stream (rule 3.9, no demand for a window) ends the open ones with it.
        with self._lock:
            windows = list(self._live)
            self._live.clear()
        for window in windows:
            if error is None:
                window.complete()
            else:
                window.fail(error)
        super()._terminate(error)

    def _release_source(self) -> None:
        self._stop()
        self.upstream.cancel()


# --- By count ------------------------------------------------------------------------------


class _CountWindows(_Windows[T]):
    """Windows of ``count`` items, one opening every ``skip`` items; everything runs on the source's thread."""

    __slots__ = ("_count", "_first", "_index", "_skip", "_windows")

    def __init__(self, downstream: Subscriber[UnicastPublisher[T]], count: int, skip: int) -> None:
        super().__init__(downstream, "window_with_count")
        self._count = count
        self._skip = skip
        self._first = True  # guarded by self._lock: the next request is the first
        # --- The source's thread only ---------------------------------------------
        self._index = 0  # items seen
        self._windows: deque[list[Any]] = deque()  # [window, items still to take], oldest first

    def _start(self, subscription: Subscription) -> None:
        """Nothing to request yet: the outer subscriber's demand for windows decides."""

    def request(self, n: int) -> None:
        """Ask the source for the items that ``n`` more windows need (RxJava's arithmetic; capped at ``2**63 - 1``)."""
        if check_request(n) is not None:
            super().request(n)  # signals the rule 3.9 error
            return
        count, skip = self._count, self._skip
        with self._lock:
            first, self._first = self._first, False
        if n == MAX_DEMAND:
            wanted = MAX_DEMAND
        elif skip == count:
            wanted = _cap(count * n)
        elif skip > count:  # gaps: the items between windows are skipped
            wanted = _cap(count * n + (skip - count) * (n - 1)) if first else _cap(skip * n)
        else:  # overlap: count items for the first window, then skip more for each next one
            wanted = _cap(count + skip * (n - 1)) if first else _cap(skip * n)
        super().request(n)
        subscription = self.upstream.current
        if subscription is not None:
            subscription.request(wanted)

    def on_next(self, item: T) -> None:
        """Open a window every ``skip`` items; put ``item`` in every open window; close the full ones.

        Raises:
            TypeError: if ``item`` is ``None`` (rule 2.13).
        """
        if item is None:
            raise none_error("item", "2.13")
        if self._stopped:
            return
        windows = self._windows
        opened = self._index % self._skip == 0
        if opened:
            window = self.open_window()
            if window is not None:
                windows.append([window, self._count])
        self._index += 1
        for entry in windows:
            entry[0].push(item)
            entry[1] -= 1
        while windows and windows[0][1] == 0:
            self.close_window(windows.popleft()[0])
        if opened:
            self._signal()  # emit the new window, with its first item in it

    def on_error(self, error: BaseException) -> None:
        """Fail every open window, then the outer stream.

        Raises:
            TypeError: if ``error`` is ``None`` (rule 2.13).
        """
        require(error, "error", "2.13")
        while self._windows:
            self.close_window(self._windows.popleft()[0], error)
        super().on_error(error)

    def _upstream_completed_locked(self) -> None:
        pass  # the open windows are completed before the lock is taken: see on_complete

    def on_complete(self) -> None:
        """Complete every open window, then the outer stream."""
        while self._windows:
            self.close_window(self._windows.popleft()[0])
        super().on_complete()


def window_with_count(source: Publisher[T], count: int, skip: int | None = None) -> Publisher[UnicastPublisher[T]]:
    """Emit windows of ``count`` items of ``source``, a new one every ``skip`` items (default ``count``)::

        source:  --1--2--3--4--5--|
        window_with_count(2)
        result:  --W1----W2----W3-|     W1: 1,2|  W2: 3,4|  W3: 5|

    ``skip < count`` makes overlapping windows (``window_with_count(3, 1)``:
    1,2,3 / 2,3,4 / ...); ``skip > count`` leaves out the items between
    windows. A window completes when it has ``count`` items, or when
    ``source`` ends (it then fails with the source's error after its items).

    Demand: windows follow the outer subscriber's demand: ``request(n)``
    asks ``source`` for the items of ``n`` more windows (``n * count`` for
    exact windows; RxJava's arithmetic for the others). Each window holds
    at most ``count`` items until its subscriber requests them; with
    overlapping windows, at most ``ceil(count / skip)`` windows are open and
    as many may wait for the outer subscriber's demand. Nobody has to
    subscribe to a window: its items are dropped when it closes.

    Raises:
        TypeError: if ``source`` is not a publisher or ``count``/``skip`` is not an int.
        ValueError: if ``count`` or ``skip`` is not positive.
    """
    require_publisher(source, "source")
    size = require_positive_int(count, "count")
    step = size if skip is None else require_positive_int(skip, "skip")

    def connect(subscriber: Subscriber[UnicastPublisher[T]], track: Callable[[Stage], None]) -> None:
        stage: _CountWindows[T] = _CountWindows(subscriber, size, step)
        track(stage)
        source.subscribe(stage)

    return TrackedStagePublisher("window_with_count", connect, 0)


# --- By time -----------------------------------------------------------------------------------


class _TimeWindows(_Windows[T]):
    """A window every ``timespan`` (and every ``max_count`` items), emitted when due.

    The source's thread and the timer meet at ``_swap_lock``: it guards which
    window is open, so an item goes into the window open when it arrived and
    a window is completed only after the next took its place. No lock is
    held while a window or the outer stream delivers (each delivers from its
    own drain), and nothing queues between the source and the windows.
    """

    __slots__ = ("_current", "_filled", "_max_count", "_scheduler", "_swap_lock", "_timespan")

    def __init__(
        self, downstream: Subscriber[UnicastPublisher[T]], timespan: float, max_count: int | None, scheduler: Scheduler
    ) -> None:
        super().__init__(downstream, "window_with_time")
        self._scheduler = scheduler
        self._timespan = timespan
        self._max_count = max_count
        self._swap_lock = threading.Lock()  # taken before self._lock, never after
        # --- Guarded by self._swap_lock ----------------------------------------------
        self._current: UnicastPublisher[T] | None = None  # the open window; None once none opens any more
        self._filled = 0  # items in it

    def _start(self, subscription: Subscription) -> None:
        """Emit the first window (the outer subscriber must have asked for one), start the clock, request everything."""
        with self._swap_lock:
            self._current = first = self.admit_window()
        self._signal()
        if first is None:
            return  # no demand: the stream failed with MissingBackpressureError
        with self._lock:
            self.set_timer_locked(
                lambda: self._scheduler.schedule_periodic(self._boundary, self._timespan, self._timespan)
            )
        super()._start(subscription)

    def _swap_locked(self) -> UnicastPublisher[T] | None:
        """Open the next window in place of the current one; return the one to close. Caller holds _swap_lock."""
        old = self._current
        self._current = self.admit_window() if old is not None else None
        self._filled = 0
        return old

    def _boundary(self) -> None:
        with self._swap_lock:
            old = self._swap_locked()
        if old is not None:
            self.close_window(old)
        self._signal()

    def on_next(self, item: T) -> None:
        """Put ``item`` in the open window; a window with ``max_count`` items closes and the next opens.

        Raises:
            TypeError: if ``item`` is ``None`` (rule 2.13).
        """
        if item is None:
            raise none_error("item", "2.13")
        with self._swap_lock:
            current = self._current
            if current is None:
                return  # no window opens any more: the stream is ending
            current.push_nowait(item)
            self._filled += 1
            full = self._swap_locked() if self._filled == self._max_count else None
        current.flush()
        if full is not None:
            self.close_window(full)
            self._signal()

    def _end(self, error: BaseException | None) -> None:
        self._stop()
        with self._swap_lock:
            current, self._current = self._current, None
        if current is not None:
            self.close_window(current, error)
        if error is not None:
            self.fail(error)
            return
        with self._lock:
            self.complete_locked()
        self._signal()

    def on_error(self, error: BaseException) -> None:
        """Fail the open window, then the outer stream.

        Raises:
            TypeError: if ``error`` is ``None`` (rule 2.13).
        """
        require(error, "error", "2.13")
        self._end(error)

    def on_complete(self) -> None:
        """Complete the open window, then the outer stream."""
        self._end(None)


def window_with_time(
    source: Publisher[T], timespan: float, max_count: int | None = None, *, scheduler: Scheduler | None = None
) -> Publisher[UnicastPublisher[T]]:
    """Emit a window at once and a new one every ``timespan`` seconds (and after every ``max_count`` items)::

        source:  -1-2-3----4-5----|
        window_with_time(5 dashes)
        result:  W1---W2----W3----|    W1: 1,2,3|  W2: 4|  W3: 5|

    The first window opens at the subscription, and each tick of a
    ``timespan`` period closes the open window and opens the next; with
    ``max_count``, a window that has ``max_count`` items closes at once and
    the next opens (the ticks keep their pace, as RxJava's default). When
    ``source`` ends, the open window ends the same way.

    Demand: time does not wait for demand. The first window must be
    requested in ``on_subscribe``, and each window is due when its
    boundary comes: a window due with no demand ends the stream with
    :class:`~flowpy.errors.MissingBackpressureError` (RxJava's rule).
    Requests everything from ``source``. A window holds the items that
    arrive before its subscriber asks for them: at most ``max_count``, or
    what ``source`` sends in one ``timespan`` when ``max_count`` is ``None``.

    Raises:
        TypeError: if ``source`` is not a publisher, ``timespan`` is not a
            number, ``max_count`` is not an int or ``scheduler`` not a Scheduler.
        ValueError: if ``timespan`` is not positive or not finite, or ``max_count`` is not positive.
    """
    require_publisher(source, "source")
    every = require_seconds(timespan, "timespan", positive=True)
    limit = None if max_count is None else require_positive_int(max_count, "max_count")
    clock = resolve_scheduler(scheduler)

    def connect(subscriber: Subscriber[UnicastPublisher[T]], track: Callable[[Stage], None]) -> None:
        stage: _TimeWindows[T] = _TimeWindows(subscriber, every, limit, clock)
        track(stage)
        source.subscribe(stage)

    return TrackedStagePublisher("window_with_time", connect, 0)
