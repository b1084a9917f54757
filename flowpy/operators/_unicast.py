"""A publisher that its owner feeds, for one subscriber: the windows of ``window_with_*``, the groups of ``group_by``.

An operator that splits a stream into inner streams (a window per count or
time span; a group per key) emits each inner stream as an item, before
anyone has subscribed to it, and keeps feeding it as the source's items
come. :class:`UnicastPublisher` is that inner stream (RxJava's
``UnicastProcessor``): the owner pushes items and the end into it on the
source's thread; it keeps them until its one subscriber comes and delivers
them as that subscriber requests, then the end. How many items it may hold
is the owner's bound. It tells the owner:

* through ``on_cancel``, once, when its subscriber ends it before the
  owner's end (a cancel, an invalid request, a raising subscriber), so the
  owner stops feeding it and can cancel the source once no inner stream and
  no outer subscriber wants more;
* through ``on_consumed(count)``, how many pushed items were delivered or
  dropped, as they are, for an owner that replenishes its source by what
  its inner streams consume (``group_by``).

An inner stream nobody subscribed to by a moment the owner chooses can be
*abandoned* (:meth:`UnicastPublisher.try_abandon`, RxJava 3's groups and
windows): it stops reporting consumption (the owner counts its items as
consumed at once) and keeps what it holds for a subscriber that may still
come.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Generic, TypeVar

from flowpy._checks import require_subscriber
from flowpy._context import capture
from flowpy._signals import signal_subscribe
from flowpy.flow import Publisher, Subscriber
from flowpy.operators._base import DemandDrain, reject_subscriber

__all__ = ["UnicastPublisher"]

T = TypeVar("T")


def _nothing(count: int) -> None:
    """The default ``on_consumed``: the owner does not count consumption."""


class _Inner(DemandDrain, Generic[T]):
    """The inner stream's queue and its subscriber's subscription; made before the subscriber comes.

    The owner appends to :attr:`items` and ends it (``done``, ``end_error``)
    from one thread at a time; only the drain pops. Passes run inline on the
    thread that signals (a push, or the subscriber's request), in the
    subscriber's context once it has subscribed.
    """

    __slots__ = (
        "_abandoned",
        "_delay_error",
        "_name",
        "_on_cancel",
        "_on_consumed",
        "_terminated",
        "_told",
        "done",
        "downstream",
        "end_error",
        "items",
    )

    def __init__(
        self, name: str, on_cancel: Callable[[], object], on_consumed: Callable[[int], object], delay_error: bool
    ) -> None:
        super().__init__()
        self._name = name
        self._on_cancel = on_cancel
        self._on_consumed = on_consumed
        self._delay_error = delay_error  # the owner's error waits for the queued items, or goes ahead of them
        self.items: deque[T] = deque()  # appended by the owner, popped by the drain alone
        self.done = False  # the owner ended the stream: no item follows
        self.end_error: BaseException | None = None  # the owner's error, written before `done`
        # --- Guarded by self._lock, with the demand ------------------------------
        self.downstream: Subscriber[T] | None = None  # the one subscriber; set once
        self._abandoned = False  # the owner gave up on it before anyone subscribed
        # --- Drain only ----------------------------------------------------------
        self._terminated = False  # its terminal signal went out
        self._told = False  # on_cancel was called

    def claim(self, subscriber: Subscriber[T]) -> bool:
        """Make ``subscriber`` the one subscriber; return ``False`` if there is one already."""
        with self._lock:
            if self.downstream is not None:
                return False
            self.downstream = subscriber
        return True

    def try_abandon(self) -> bool:
        with self._lock:
            if self.downstream is not None or self._abandoned:
                return False
            self._abandoned = True
        return True

    def wake(self) -> None:
        """Let the drain run after the owner appended, unless a running pass will see the item anyway.

        Before the subscriber came no pass delivers, so none runs; once the
        stream ended, a pass drops (and counts) what comes after. The owner
        writes first and reads ``_ready``/``draining`` second; ``_release``
        and a pass write those first and read the queue second: one side
        sees the other.
        """
        if (self._ready and not self.draining) or self.cancelled:
            self._signal()

    def wake_for_end(self) -> None:
        """Let the drain run after the owner ended the stream (a running pass may have read ``done`` already)."""
        if self._ready or self.cancelled:
            self._signal()

    # --- DemandDrain -----------------------------------------------------------

    def _has_work(self) -> bool:
        return bool(self.items) and self._requested > 0

    def _drain(self) -> None:
        if self._terminated:
            self._consumed(self._drop())  # pushed after the end: dropped, and counted
            return
        if self.cancelled:
            self._cancel_upstream()
            return
        if self._failure is not None:  # an invalid request (rule 3.9): ended from the subscriber's side
            self._terminate(self._failure, owners=False)
            return
        if self.done and self.end_error is not None and not self._delay_error:
            self._terminate(self.end_error, owners=True)
            return
        downstream = self.downstream
        assert downstream is not None  # no pass delivers before subscribe() released it
        on_next = downstream.on_next
        items = self.items
        requested = self._requested
        emitted = 0
        ended = False
        try:
            while True:
                done = self.done  # read before the queue: no item follows it
                if not items:
                    ended = done
                    break
                if emitted == requested or self.cancelled or self._failure is not None:
                    break
                item = items.popleft()
                emitted += 1  # counted before the call: an item whose on_next raised is consumed too
                on_next(item)
        finally:
            self._produced(emitted, requested)
            self._consumed(emitted)
        if ended:
            self._terminate(self.end_error, owners=True)

    def _cancel_upstream(self) -> None:
        # Its subscriber cancelled, or raised in a pass: drop the queue and tell the owner.
        dropped = self._drop()
        self._tell()  # first: an owner left with nothing to feed need not replenish
        self._consumed(dropped)

    def _signal_downstream_error(self, error: BaseException) -> None:
        if not self._terminated:
            self._terminate(error, owners=False)

    # --- Helpers (drain only) ------------------------------------------------------

    def _terminate(self, error: BaseException | None, *, owners: bool) -> None:
        self._terminated = True
        self.cancelled = True
        dropped = self._drop()
        if not owners:
            self._tell()
        self._consumed(dropped)
        downstream = self.downstream
        assert downstream is not None  # as in _drain
        if error is None:
            downstream.on_complete()
        else:
            downstream.on_error(error)

    def _drop(self) -> int:
        """Empty the queue; return how many items it held."""
        dropped = 0
        items = self.items
        while items:  # popleft one by one: an append meanwhile is counted, not lost
            items.popleft()
            dropped += 1
        return dropped

    def _consumed(self, count: int) -> None:
        if count and not self._abandoned:
            self._on_consumed(count)

    def _tell(self) -> None:
        if not self._told:
            self._told = True
            self._on_cancel()


class UnicastPublisher(Publisher[T], Generic[T]):
    """An inner stream: fed with :meth:`push` and ended with :meth:`complete` or :meth:`fail` by its owner.

    The owner calls those serially (from its source's thread) and bounds
    how many items it pushes; they never call subscriber code while anyone
    else does (rule 1.3): delivery runs in the inner stream's drain, on the
    thread that made progress possible, one pass at a time. ``subscribe``
    takes the first subscriber; a second one gets
    ``on_error(RuntimeError)``. Its signals run in the context it
    subscribed in.

    Args:
        name: what the stream is called in messages (``"window"``, ``"group"``).
        on_cancel: called once, from the drain, if the subscriber ends the
            stream before the owner does.
        on_consumed: called with the number of pushed items delivered or
            dropped, as they are, from the drain (not after
            :meth:`try_abandon` succeeded).
        delay_error: whether the error of :meth:`fail` comes after the
            queued items (RxJava's windows) or ahead of them (its groups).
    """

    __slots__ = ("_inner",)

    def __init__(
        self,
        name: str,
        on_cancel: Callable[[], object],
        *,
        on_consumed: Callable[[int], object] = _nothing,
        delay_error: bool = True,
    ) -> None:
        self._inner: _Inner[T] = _Inner(name, on_cancel, on_consumed, delay_error)

    # --- The owner's side --------------------------------------------------------

    def push(self, item: T) -> None:
        """Queue ``item`` for the subscriber and let it be delivered (dropped if the subscriber ended it)."""
        self._inner.items.append(item)
        self._inner.wake()

    def push_nowait(self, item: T) -> None:
        """Queue ``item`` without delivering it yet; the owner calls :meth:`flush` after (outside its locks)."""
        self._inner.items.append(item)

    def flush(self) -> None:
        """Deliver what is queued, as far as the subscriber's demand allows (on this thread, if it is idle)."""
        self._inner.wake()

    def complete(self) -> None:
        """End the stream once the queued items are delivered."""
        inner = self._inner
        inner.done = True
        inner.wake_for_end()

    def fail(self, error: BaseException) -> None:
        """End the stream with ``error``: after the queued items, or ahead of them (``delay_error=False``)."""
        inner = self._inner
        if not inner.done:
            inner.end_error = error  # before `done`: the drain reads `done` first
            inner.done = True
        inner.wake_for_end()

    def try_abandon(self) -> bool:
        """Give up on this stream if nobody has subscribed yet; return whether it was abandoned.

        An abandoned stream no longer calls ``on_consumed``: the owner counts
        its items as consumed when it abandons it. A subscriber may still
        come and receive what it holds.
        """
        return self._inner.try_abandon()

    @property
    def queued(self) -> int:
        """Items pushed and not yet delivered (racy, for monitoring and tests)."""
        return len(self._inner.items)

    @property
    def is_ended(self) -> bool:
        """Whether its subscriber ended it or it delivered its end: it takes no more items (racy)."""
        return self._inner.cancelled

    # --- The subscriber's side ------------------------------------------------------

    def subscribe(self, subscriber: Subscriber[T]) -> None:
        """Deliver the stream to ``subscriber``, the first only; a second gets ``on_error(RuntimeError)``.

        Raises:
            TypeError: if ``subscriber`` is ``None`` (rule 1.9).
        """
        require_subscriber(subscriber)
        inner = self._inner
        if not inner.claim(subscriber):
            reject_subscriber(
                subscriber, RuntimeError(f"a {inner._name} serves one subscriber; share() it to have more")
            )
            return
        inner._serial.context = capture()  # the subscriber's context, not the owner's
        if signal_subscribe(subscriber, inner):
            inner._release()

    def __repr__(self) -> str:
        return f"<{self._inner._name} publisher: {len(self._inner.items)} queued>"
