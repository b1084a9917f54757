"""Draining one bounded queue into a subscriber: the core of ``observe_on`` and the backpressure operators.

:class:`QueueSubscriber` queues what one upstream sends; :class:`QueueDrain`
is the downstream's subscription and delivers from that queue as far as the
downstream's demand allows, then the upstream's terminal signal once the
queue is empty.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar

from flowpy._checks import none_error, require
from flowpy._core.serial import trampoline
from flowpy._core.upstream import UpstreamSlot
from flowpy._demand import replenish_limit
from flowpy._signals import signal_subscribe
from flowpy.errors import MissingBackpressureError
from flowpy.executors import Task
from flowpy.flow import Subscriber, Subscription
from flowpy.operators._base import DemandDrain
from flowpy.snapshots import SubscriberSnapshot

__all__ = ["HeadSubscriber", "QueueDrain", "QueueParent", "QueueSubscriber"]

T = TypeVar("T")


class QueueParent(Protocol):
    """What a :class:`QueueSubscriber` needs of the drain that polls it.

    A :class:`DemandDrain`, or the loop of ``concat_map``.
    """

    @property
    def cancelled(self) -> bool:
        """Whether the drain is over: nothing more is requested (it cancels its subscribers through their slots)."""

    @property
    def draining(self) -> bool:
        """Whether a pass is under way that will look at the queue again (no signal needed)."""

    def _signal(self) -> None:
        """Let the drain run a pass."""

    def fail(self, error: BaseException) -> None:
        """End the stream with ``error``, ahead of what is queued."""


class QueueSubscriber(Subscriber[Any]):
    """Subscribes to one upstream for a :class:`DemandDrain`, queueing at most ``prefetch`` items.

    It asks for ``prefetch`` items at once and, as the drain takes them with
    :meth:`poll`, for 75 % of ``prefetch`` again each time that many have
    been taken; so the upstream never has more than ``prefetch`` items queued
    or requested. An upstream that sends more fails the parent with
    :class:`~flowpy.errors.MissingBackpressureError`.
    """

    __slots__ = (
        "_consumed",
        "_delay_error",
        "_limit",
        "_name",
        "_slot",
        "done",
        "error",
        "parent",
        "prefetch",
        "queue",
    )

    def __init__(self, parent: QueueParent, prefetch: int, name: str, *, delay_error: bool = False) -> None:
        self.parent = parent
        self._name = name
        self.prefetch = prefetch  # the most items queued or requested at once
        self._limit = replenish_limit(prefetch)
        self._delay_error = delay_error  # keep the error for after the queue, or fail the parent now
        self._slot = UpstreamSlot()  # the one upstream subscription (rule 2.5)
        self.queue: deque[Any] = deque()  # appended here, popped by the drain
        self.done = False  # set after the upstream's last item; the queue may still hold items
        self.error: BaseException | None = None  # the upstream's error, if delay_error
        self._consumed = 0  # drain only: taken since the last request

    def attach(self, subscription: Subscription) -> bool:
        """Keep ``subscription`` unless one is already kept or this subscriber was cancelled (then cancel it).

        The parent ends this subscriber only through its slot (:meth:`stop`,
        :meth:`cancel`), and one it creates after it was cancelled is stopped
        at once; so a subscription arriving as the parent cancels is either
        kept before and cancelled by it, or refused.

        Raises:
            TypeError: if ``subscription`` is ``None`` (rule 2.13).
        """
        return self._slot.accept(subscription)

    @property
    def subscription(self) -> Subscription | None:
        """The upstream subscription; ``None`` until it arrived."""
        return self._slot.current

    def start(self) -> None:
        """Ask the upstream for the first ``prefetch`` items."""
        if self.subscription is not None and not self.parent.cancelled:
            self.subscription.request(self.prefetch)

    def on_subscribe(self, subscription: Subscription) -> None:
        """Keep ``subscription`` and request ``prefetch``."""
        if self.attach(subscription):
            self.start()

    def on_next(self, item: Any) -> None:
        """Queue ``item`` and signal the parent's drain.

        Raises:
            TypeError: if ``item`` is ``None`` (rule 2.13).
        """
        if item is None:
            raise none_error("item", "2.13")
        if self.done:
            return
        # Only this thread appends and the drain only pops, so the length
        # cannot grow between this check and the append.
        if len(self.queue) >= self.prefetch and not self._admit_over_capacity(item):
            return
        self.queue.append(item)
        parent = self.parent  # inline: the per-item path of queued()
        if not parent.draining:
            parent._signal()

    def queued(self) -> None:
        """Signal the parent's drain after an append to the queue; on the upstream's thread."""
        parent = self.parent
        if not parent.draining:  # a running pass looks at the queue again before it ends
            parent._signal()

    def on_error(self, error: BaseException) -> None:
        """Fail the parent, now or after the queued items (``delay_error``).

        Raises:
            TypeError: if ``error`` is ``None`` (rule 2.13).
        """
        require(error, "error", "2.13")
        if self.done:
            return
        if self._delay_error:
            self.error = error
            self.done = True
            self.parent._signal()
        else:
            # The failure is recorded before this inner counts as done: a drain
            # on another thread that finds it exhausted must also find the
            # failure, or it would complete the downstream in its place.
            self.parent.fail(error)
            self.done = True

    def on_complete(self) -> None:
        """Mark the upstream done and signal the parent's drain."""
        if self.done:
            return
        self.done = True
        self.parent._signal()

    @property
    def exhausted(self) -> bool:
        """Whether the upstream is done and its queue is empty."""
        return self.done and not self.queue

    def poll(self) -> Any:
        """Take the next queued item, replenishing upstream each 75 % of ``prefetch``; drain only.

        Raises:
            IndexError: if the queue is empty.
        """
        item = self.queue.popleft()
        self._consumed += 1
        if self._consumed == self._limit:
            self._consumed = 0
            subscription = self.subscription
            if subscription is not None and not self.done:
                subscription.request(self._limit)
        return item

    def _admit_over_capacity(self, item: Any) -> bool:
        """Decide about ``item``, which found the queue full; return whether to queue it anyway.

        Here the upstream broke rule 1.1: :meth:`overflow`.
        """
        self.overflow()
        return False

    def overflow(self) -> None:
        """The upstream sent more than it was asked for (rule 1.1): :meth:`abort` with the overflow error."""
        self.abort(MissingBackpressureError(self.overflow_message()))

    def abort(self, error: BaseException) -> None:
        """Cancel the upstream and fail the parent with ``error`` now, ahead of the queue.

        Called on the upstream's thread; the queue is left to the drain.
        """
        self.parent.fail(error)  # before done: see on_error
        self.done = True
        self._slot.cancel()

    def overflow_message(self) -> str:
        """What :class:`~flowpy.errors.MissingBackpressureError` says on overflow."""
        return f"{self._name} sent more than the {self.prefetch} items requested"

    def stop(self) -> None:
        """Cancel the upstream, now or as soon as its subscription arrives; from any thread.

        The queue is left as it is (the drain may be reading it): it goes with this subscriber.
        """
        self.done = True
        self._slot.cancel()

    def cancel(self) -> None:
        """Cancel the upstream, now or as soon as it arrives, and drop the queue; drain only (it reads the queue)."""
        self.done = True
        self._slot.cancel()
        self.queue.clear()


class HeadSubscriber(QueueSubscriber):
    """The single upstream of a :class:`QueueDrain`: hands the downstream its subscription first."""

    __slots__ = ()

    parent: QueueDrain[Any]

    def on_subscribe(self, subscription: Subscription) -> None:
        """Give the downstream its subscription, then request from upstream, through the trampoline.

        The parent delivers nothing before its downstream's ``on_subscribe``
        has returned, so that call may wait for the outermost trampolined
        call on this thread, like the subscribe of a deep pipeline
        (:func:`~flowpy._core.serial.trampoline`): the ``on_subscribe`` of
        the stages below does not recurse through every stage.

        Raises:
            TypeError: if ``subscription`` is ``None`` (rule 2.13).
        """
        if self.attach(subscription):
            trampoline(self._open)

    def _open(self) -> None:
        """Signal the downstream's ``on_subscribe``, then let the parent deliver and request from upstream."""
        parent = self.parent
        if not signal_subscribe(parent.downstream, parent):
            return  # it cancelled the parent, whose pass cancelled this upstream
        parent._release()  # the downstream may take items from now on, as they arrive
        self.start()


class QueueDrain(DemandDrain, Generic[T]):
    """The downstream's subscription: delivers the queue of :attr:`upstream`.

    The subclass creates :attr:`upstream` (a :class:`HeadSubscriber`) in its
    ``__init__``. The drain runs inline on the signalling thread, or on
    ``execute`` if given.
    """

    __slots__ = ("_terminated", "downstream", "upstream")

    upstream: HeadSubscriber

    def __init__(self, downstream: Subscriber[T], execute: Callable[[Task], object] | None = None) -> None:
        super().__init__(execute)
        self.downstream = downstream
        self._terminated = False  # drain only: a terminal signal went downstream

    def _cancel_upstream(self) -> None:
        self.upstream.cancel()

    def reading(self) -> SubscriberSnapshot | None:
        """The queue and counters of this stage for its downstream, or ``None`` once it ended (racy)."""
        if self.cancelled or self._terminated:
            return None
        upstream = self.upstream
        return SubscriberSnapshot(
            self.downstream, len(upstream.queue), upstream.prefetch, self._requested, self.delivered, self.dropped
        )

    def _has_work(self) -> bool:
        return bool(self.upstream.queue) and self._requested > 0

    def _signal_downstream_error(self, error: BaseException) -> None:
        if not self._terminated:
            self._terminated = True
            self.downstream.on_error(error)

    def _terminate(self, error: BaseException | None) -> None:
        self._terminated = True
        self.cancelled = True
        self.upstream.cancel()
        if error is None:
            self.downstream.on_complete()
        else:
            self.downstream.on_error(error)

    def _drain(self) -> None:
        upstream = self.upstream
        if self._terminated:
            return
        if self.cancelled:
            upstream.cancel()
            return
        if self._failure is not None:
            self._terminate(self._failure)
            return
        queue = upstream.queue
        poll = upstream.poll
        on_next = self.downstream.on_next
        requested = self._requested
        emitted = 0
        while True:
            done = upstream.done  # read before the queue: no item follows it
            if not queue:
                if done:
                    self._terminate(upstream.error)
                    return
                break
            if emitted == requested or self.cancelled or self._failure is not None:
                break
            on_next(poll())
            emitted += 1
        self._produced(emitted, requested)
