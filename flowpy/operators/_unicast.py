"""A publisher that its owner feeds, for one subscriber: the windows of ``window_with_*``.

An operator that splits a stream into inner streams (a window per count or
time span; a group per key) emits each inner stream as an item, before
anyone has subscribed to it, and keeps feeding it as the source's items
come. :class:`UnicastPublisher` is that inner stream (RxJava's
``UnicastProcessor``): the owner pushes items and the end into it on the
source's thread; it keeps them until its one subscriber comes and delivers
them as that subscriber requests, then the end (an error after the items,
as RxJava's windows do). How many items it may hold is the owner's bound.
It tells the owner, through ``on_cancel``, when its subscriber cancels, so
the owner stops feeding it and can cancel the source once no inner stream
and no outer subscriber wants more.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

from flowpy._checks import require_subscriber
from flowpy._context import capture
from flowpy._signals import signal_subscribe
from flowpy.flow import Publisher, Subscriber
from flowpy.operators._base import reject_subscriber
from flowpy.operators._timed import Emitter

__all__ = ["UnicastPublisher"]

T = TypeVar("T")


class _Inner(Emitter[T]):
    """The inner stream's queue and its subscriber's subscription; made before the subscriber comes."""

    __slots__ = ("_end_error", "_on_cancel", "_told")

    def __init__(self, name: str, on_cancel: Callable[[], object]) -> None:
        super().__init__(None, name)  # type: ignore[arg-type]  # the subscriber is set by UnicastPublisher.subscribe
        self._on_cancel = on_cancel
        self._told = False  # drain only: on_cancel was called
        self._end_error: BaseException | None = None  # guarded by self._lock: the error to signal after the items

    def _terminate(self, error: BaseException | None) -> None:
        owners_end = error is None  # the owner's complete() or fail(); anything else ends it from this side
        super()._terminate(self._end_error if owners_end else error)
        if not owners_end:
            self._tell()

    def _cancel_upstream(self) -> None:
        super()._cancel_upstream()
        if not self._terminated:  # cancelled by its subscriber (or its subscriber raised)
            self._tell()

    def _tell(self) -> None:
        if not self._told:
            self._told = True
            self._on_cancel()

    def signal_if_subscribed(self) -> None:
        """Run the drain if the subscriber is there; else the first pass after ``_release`` will."""
        if self._ready:
            self._signal()


class UnicastPublisher(Publisher[T], Generic[T]):
    """An inner stream: fed with :meth:`push` and ended with :meth:`complete` or :meth:`fail` by its owner.

    The owner calls those three serially (from its source's thread) and
    bounds how many items it pushes; they never call subscriber code while
    anyone else does (rule 1.3): delivery runs in the inner stream's drain.
    ``subscribe`` takes the first subscriber; a second one gets
    ``on_error(RuntimeError)``. ``on_cancel()`` is called once, from the
    drain, if the subscriber cancels before the end.
    """

    __slots__ = ("_claim_lock", "_claimed", "_inner")

    def __init__(self, name: str, on_cancel: Callable[[], object]) -> None:
        self._inner: _Inner[T] = _Inner(name, on_cancel)
        self._claim_lock = threading.Lock()
        self._claimed = False  # guarded by _claim_lock: the one subscriber came

    # --- The owner's side --------------------------------------------------------

    def push(self, item: T) -> None:
        """Queue ``item`` for the subscriber and let it be delivered (dropped if the subscriber ended it)."""
        self.push_nowait(item)
        self.flush()

    def push_nowait(self, item: T) -> None:
        """Queue ``item`` without delivering it yet; the owner calls :meth:`flush` after (outside its locks)."""
        inner = self._inner
        if not inner._stopped:  # a racy read: an item queued as it stops is dropped with the queue
            inner._items.append(item)

    def flush(self) -> None:
        """Deliver what is queued, as far as the subscriber's demand allows (on this thread, if it is idle)."""
        self._inner.signal_if_subscribed()

    def complete(self) -> None:
        """End the stream once the queued items are delivered."""
        inner = self._inner
        with inner._lock:
            inner.complete_locked()
        inner.signal_if_subscribed()

    def fail(self, error: BaseException) -> None:
        """End the stream with ``error`` once the queued items are delivered."""
        inner = self._inner
        with inner._lock:
            if inner._end_error is None:
                inner._end_error = error
            inner.complete_locked()
        inner.signal_if_subscribed()

    @property
    def queued(self) -> int:
        """Items pushed and not yet delivered (racy, for monitoring and tests)."""
        return len(self._inner._items)

    # --- The subscriber's side ------------------------------------------------------

    def subscribe(self, subscriber: Subscriber[T]) -> None:
        """Deliver the stream to ``subscriber``, the first only; a second gets ``on_error(RuntimeError)``.

        Raises:
            TypeError: if ``subscriber`` is ``None`` (rule 1.9).
        """
        require_subscriber(subscriber)
        with self._claim_lock:
            taken, self._claimed = self._claimed, True
        if taken:
            name = self._inner._name
            reject_subscriber(subscriber, RuntimeError(f"a {name} serves one subscriber; share() it to have more"))
            return
        inner = self._inner
        inner.downstream = subscriber
        inner._serial.context = capture()  # the subscriber's context, not the owner's
        if signal_subscribe(subscriber, inner):
            inner._release()

    def __repr__(self) -> str:
        return f"<{self._inner._name} publisher>"
