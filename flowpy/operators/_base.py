"""Machinery shared by the operators: the demand drain, the relay, and the stage publishers.

Every operator with a queue (``observe_on``, ``merge``, ``zip``, the
backpressure operators) delivers to its subscriber from a *drain loop* that
at most one thread runs at a time: :class:`DemandDrain`.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Callable
from functools import partial
from typing import Any, Generic, TypeVar

from flowpy._checks import (
    require,
    require_subscriber,
)
from flowpy._core.sentinels import Sentinel
from flowpy._core.serial import SerialDrain, defer, trampoline
from flowpy._core.upstream import UpstreamSlot
from flowpy._demand import MAX_DEMAND, add_demand, check_request
from flowpy._signals import EXHAUSTED, report, reraise_fatal, signal_subscribe
from flowpy.executors import Task
from flowpy.flow import Publisher, Subscriber, Subscription
from flowpy.operators._tracking import Stage, StageTracker
from flowpy.snapshots import PublisherSnapshot

__all__ = [
    "CancelledSubscription",
    "DemandDrain",
    "HalfSerial",
    "HandOff",
    "Relay",
    "StagePublisher",
    "TrackedStagePublisher",
    "reject_subscriber",
    "signal_deep",
]


T_co = TypeVar("T_co", covariant=True)


class StagePublisher(Publisher[T_co], Generic[T_co]):
    """The publisher every operator returns: ``subscribe`` checks rule 1.9, then runs ``connect``.

    ``connect(subscriber)`` builds the operator's stage for that subscriber
    and subscribes it upstream (for most operators,
    ``source.subscribe(Stage(subscriber, ...))``): one stage per
    subscriber, so an operator's publisher is cold exactly as its source is.
    """

    __slots__ = ("_connect", "_name")

    def __init__(self, name: str, connect: Callable[[Subscriber[Any]], object]) -> None:
        self._name = name
        self._connect = connect

    def subscribe(self, subscriber: Subscriber[T_co]) -> None:
        """Build the stage for ``subscriber`` and connect it, through the trampoline.

        The connect runs now, unless this subscribe is nested in
        :data:`~flowpy._core.serial.NESTING` other trampolined calls (the
        subscribe of a deep pipeline, stage after stage): then it runs when
        the outermost of them has returned, so subscribing does not recurse
        through every stage (:func:`~flowpy._core.serial.trampoline`).

        Raises:
            TypeError: if ``subscriber`` is ``None`` (rule 1.9).
        """
        require_subscriber(subscriber)
        trampoline(partial(self._connect, subscriber))

    def __repr__(self) -> str:
        return f"<{self._name} publisher>"


class TrackedStagePublisher(StagePublisher[T_co]):
    """A :class:`StagePublisher` that keeps its open stages for :meth:`snapshot` (monitoring).

    ``connect(subscriber, track)`` builds the stage, calls ``track(stage)``
    before it subscribes anything upstream, then connects it. Stages are
    held weakly (:class:`~flowpy.operators._tracking.StageTracker`).
    """

    __slots__ = ("__weakref__", "_capacity", "_stages")

    def __init__(
        self,
        name: str,
        connect: Callable[[Subscriber[Any], Callable[[Stage], None]], object],
        capacity: int,
    ) -> None:
        self._stages = StageTracker()
        self._capacity = capacity  # the queue size each snapshot reports
        super().__init__(name, lambda subscriber: connect(subscriber, self._stages.track))

    def snapshot(self) -> PublisherSnapshot:
        """One reading per open subscription: its queue, demand, delivered and dropped items (for monitoring)."""
        return self._stages.snapshot(self._capacity)


class CancelledSubscription(Subscription):
    """A subscription that is over before it starts: both methods do nothing."""

    __slots__ = ()

    def request(self, n: int) -> None:
        """Do nothing (rule 3.6)."""

    def cancel(self) -> None:
        """Do nothing (rule 3.7)."""


def reject_subscriber(subscriber: Subscriber[Any], error: BaseException) -> None:
    """Refuse ``subscriber``: ``on_subscribe`` with a dead subscription, then ``on_error`` (rule 1.9).

    If ``on_subscribe`` raises, the subscriber gets ``on_error`` of that instead (rule 2.13).
    """
    if signal_subscribe(subscriber, CancelledSubscription()):
        subscriber.on_error(error)


class DemandDrain(Subscription, ABC):
    """The downstream's subscription of an operator that delivers from a drain loop.

    It keeps the downstream's demand, its cancellation and the first failure;
    the subclass's :meth:`_drain` delivers within ``_requested``, reports what
    it delivered with :meth:`_produced`, and acts on ``cancelled`` and
    ``_failure`` (signalled at once, ahead of queued items). :meth:`_signal`
    is called after every change that may let it deliver more; the loop
    (:class:`flowpy._core.serial.SerialDrain`) then runs :meth:`_drain` on one
    thread at a time, once more for every signal that came while it ran, so
    subscriber methods are always called serially (rule 1.3).

    The loop runs inline on the signalling thread, or on ``execute`` when
    one is given. Nothing is delivered before :meth:`_release`, which the
    subclass calls when the downstream's ``on_subscribe`` has returned.

    An upstream that queues an item need not signal while :attr:`draining`
    is set: the pass clears the flag and then looks again
    (:meth:`_has_work`), so an item queued meanwhile is still delivered.
    Each side writes first and reads the other side's write second (the
    queue, the flag), so at least one of them sees the other; this keeps
    a lock off the per-item path while a drain is running.
    """

    __slots__ = (
        "__weakref__",
        "_broken",
        "_deferred",
        "_failure",
        "_lock",
        "_ready",
        "_requested",
        "_serial",
        "_signal",
        "cancelled",
        "delivered",
        "draining",
        "dropped",
    )

    def __init__(self, execute: Callable[[Task], object] | None = None) -> None:
        self._serial = (
            SerialDrain.inline(self._pass, context="capture")
            if execute is None
            else SerialDrain(execute, self._pass, self._rejected)
        )
        self._signal: Callable[[], None] = self._serial.signal
        self._ready = False  # set by _release(); no pass delivers before
        self._broken = False  # a subscriber method raised in a pass; no pass runs after
        self.draining = False  # a pass is under way and will look at the queues again
        self.cancelled = False  # set by cancel() or a terminal signal; never cleared
        # --- Counters for snapshots; each has one writer ---------------------
        self.delivered = 0  # drain only: items delivered, added once per pass by _produced()
        self.dropped = 0  # upstream's thread only: items an overflow policy dropped
        # --- Guarded by self._lock -----------------------------------------
        self._lock = threading.Lock()
        self._requested = 0  # unfilled downstream demand; MAX_DEMAND is unbounded
        self._failure: BaseException | None = None  # the first failure; never replaced
        # The executor's refusal while the downstream's on_subscribe ran; _release() signals it.
        self._deferred: BaseException | None = None

    def fail(self, error: BaseException) -> None:
        """Record ``error`` unless a failure is already recorded, and let the drain signal it."""
        with self._lock:
            if self._failure is None:
                self._failure = error
        self._signal()

    def request(self, n: int) -> None:
        """Add ``n`` to the demand and let the drain deliver (rules 3.8, 3.17).

        ``n <= 0`` fails the stream with ``ValueError`` (rule 3.9), a non-int
        ``n`` with ``TypeError``; the call itself returns normally (rule 3.16).
        """
        error = check_request(n)
        if error is not None:
            self.fail(error)
            return
        with self._lock:
            self._requested = add_demand(self._requested, n)
        self._signal()

    def cancel(self) -> None:
        """Stop delivering and let the drain release what it holds; idempotent (rules 3.5, 3.7)."""
        if not self.cancelled:
            self.cancelled = True
            self._signal()

    def _release(self) -> None:
        """Allow delivery (the downstream's ``on_subscribe`` has returned) and run a pass.

        If the executor refused a task meanwhile, signal its exception now instead.
        """
        with self._lock:
            self._ready = True
            deferred, self._deferred = self._deferred, None
        if deferred is not None:
            self._signal_downstream_error(deferred)
            return
        self._signal()

    def _pass(self, first: bool) -> bool:
        # Before _release() only a cancelled drain runs a pass: it releases
        # the upstream (a raising on_subscribe cancels before any delivery).
        if self._broken or not (self._ready or self.cancelled):
            return False
        try:
            while True:
                self.draining = True
                self._drain()
                self.draining = False
                if self.cancelled or self._failure is not None or not self._has_work():
                    return False
        except BaseException as error:  # a subscriber method broke rule 2.13: the stream ends here
            self.draining = False
            if isinstance(error, EXHAUSTED):
                # Not the subscriber's fault but the pipeline's: out of stack or
                # memory. The stream ends with on_error (unless the downstream
                # cancelled or had its terminal signal), sent from the bottom of
                # this thread's trampoline, where there is room for it. If even
                # handing it down raises, nothing has changed here: the error
                # goes on up to the stage above, which ends the stream the same way.
                if not self.cancelled:
                    defer(partial(self._exhausted, error))
                self._broken = True
                self.cancelled = True
                return False
            self._broken = True
            self.cancelled = True
            self._cancel_upstream()
            report(error, f"a subscriber method raised inside {type(self).__name__}'s drain (rule 2.13)")
            reraise_fatal(error)
        return False

    def _exhausted(self, error: BaseException) -> None:
        """End the stream after a pass ran out of stack or memory: cancel upstream, then ``on_error(error)``."""
        self._cancel_upstream()
        self._signal_downstream_error(error)

    @abstractmethod
    def _has_work(self) -> bool:
        """Whether a pass could deliver now (items queued and demand open); read after a pass."""

    @abstractmethod
    def _drain(self) -> None:
        """Deliver what can be delivered now; runs on one thread at a time."""

    @abstractmethod
    def _cancel_upstream(self) -> None:
        """Cancel every upstream subscription and drop what is queued."""

    @abstractmethod
    def _signal_downstream_error(self, error: BaseException) -> None:
        """Signal ``error`` to the downstream unless it already had its terminal signal."""

    def _rejected(self, error: BaseException) -> None:
        # The executor refused the drain task: this thread owns the loop for
        # good, so no pass runs again. The downstream is told, unless it has
        # cancelled or had its terminal signal (rule 1.8); if its on_subscribe
        # has not returned yet (a request from inside it, or an upstream
        # item on another thread), _release() tells it then (rule 1.3).
        ended = self.cancelled
        self.cancelled = True
        self._cancel_upstream()
        if ended:
            return
        with self._lock:
            if not self._ready:
                self._deferred = error
                return
        self._signal_downstream_error(error)

    def _produced(self, emitted: int, requested: int) -> None:
        """Count ``emitted`` as delivered; subtract it from the demand, which was ``requested`` when the pass began."""
        self.delivered += emitted
        if emitted and requested != MAX_DEMAND:
            with self._lock:
                self._requested -= emitted


def signal_deep(signal: Callable[[], object]) -> None:
    """Call ``signal`` (a downstream's terminal method, an upstream's ``cancel``); if it runs out of stack, again later.

    A relay passes each signal straight on, so a terminal signal or a
    ``cancel`` made on a deep stack (inside an item that crossed many
    relays) can hit the recursion limit in a stage further on. Out of stack
    or memory (:data:`~flowpy._signals.EXHAUSTED`), the call is made again
    from the bottom of this thread's trampoline (:func:`~flowpy._core.serial.defer`),
    where there is room for it, so the stream still ends. Each relay calls
    its neighbour through this, so the stage that ran out of stack is the
    one called again, before it has claimed the signal. Other exceptions
    propagate.
    """
    try:
        signal()
    except EXHAUSTED:
        defer(signal)


_HAND_OFF_LOCK = threading.Lock()
"""Guards every :class:`HandOff`'s ``_held`` while it is not ``None``: taken on the subscribe path only."""

_OPENING = Sentinel("OPENING")


class HandOff(ABC):
    """How a stage with no queue (a relay) hands itself to its downstream, and passes the terminal signal on.

    Both go through the thread's trampoline (:func:`~flowpy._core.serial.trampoline`),
    so that subscribing, completing or failing a pipeline of thousands of
    such stages does not recurse through all of them: past
    :data:`~flowpy._core.serial.NESTING` nested calls, the downstream's
    ``on_subscribe`` (or terminal signal) runs once the outermost
    trampolined call on this thread has returned.

    A terminal signal that arrives before the downstream's ``on_subscribe``
    has returned (the upstream ended while the hand-off waited, or ended
    from inside that ``on_subscribe``) is held and passed on right after it
    returned, so the downstream's signals stay serial (rules 1.3, 1.9).
    Items need no such check, so the per-item path is unchanged: none can
    come before the downstream has requested through this stage.

    The stage calls :meth:`_hand_off` from ``on_subscribe`` once it has
    accepted the upstream subscription, and :meth:`_terminal` for each
    terminal signal; it implements :meth:`_subscribe_downstream`.
    """

    __slots__ = ("_held",)

    def __init__(self) -> None:
        # None: the downstream's on_subscribe has returned (or was never handed off
        # here); _OPENING: the hand-off is under way, no terminal yet; else the
        # terminal held until it returns. Leaves None once, under _HAND_OFF_LOCK.
        # Set to _OPENING inside on_subscribe, which the upstream calls before
        # any terminal signal (rule 1.3): a terminal never reads None too early.
        self._held: object = None

    def _hand_off(self) -> None:
        """Run :meth:`_subscribe_downstream` through the trampoline, holding terminal signals until it returned."""
        self._held = _OPENING
        trampoline(self._handed_off)

    def _handed_off(self) -> None:
        """Run by the trampoline: :meth:`_subscribe_downstream`, then pass on the terminal signal held meanwhile."""
        try:
            self._subscribe_downstream()
        finally:
            with _HAND_OFF_LOCK:
                held, self._held = self._held, None
            if held is not _OPENING:
                held()  # type: ignore[operator]  # a terminal signal: see _terminal()

    @abstractmethod
    def _subscribe_downstream(self) -> None:
        """Signal the downstream's ``on_subscribe`` (:func:`~flowpy._signals.signal_subscribe`), then the rest."""

    def _terminal(self, signal: Callable[[], object]) -> None:
        """Run ``signal`` (passes a terminal signal on) through the trampoline, or hold it until the hand-off returned.

        A second terminal signal while one is held is dropped: the stream ends once (rule 1.7).
        """
        if self._held is not None:
            with _HAND_OFF_LOCK:
                held = self._held
                if held is not None:
                    if held is _OPENING:
                        self._held = signal
                    return
        trampoline(signal)


class Relay(HandOff, Subscriber[Any], Subscription):
    """A stage that signals its subscriber on the upstream's thread, and is that subscriber's subscription.

    It keeps the first upstream subscription and cancels any later one
    (rule 2.5), passes one terminal signal on, and sends ``cancel`` upstream.
    Subclasses implement ``on_next`` and ``request``, and end the stream
    themselves with :meth:`_end` before they signal. The hand-off to the
    downstream and the terminal signals go through the trampoline
    (:class:`HandOff`): subclasses change what follows the downstream's
    ``on_subscribe`` in :meth:`_started`, and the terminal signals in
    :meth:`_pass_error` and :meth:`_pass_complete`.
    """

    __slots__ = ("_downstream", "_upstream", "done")

    def __init__(self, downstream: Subscriber[Any]) -> None:
        super().__init__()
        self._downstream = downstream
        # Keeps the first subscription, before the downstream can call request().
        self._upstream = UpstreamSlot()
        # Set when the stream has ended here (terminal passed on, cancelled,
        # failed); signals still in flight from upstream are ignored (rule 2.8).
        self.done = False

    def on_subscribe(self, subscription: Subscription) -> None:
        """Keep ``subscription`` and hand this stage to the downstream as its subscription, through the trampoline.

        If the downstream's ``on_subscribe`` raises, this stage cancels
        upstream and signals it ``on_error`` (rule 2.13,
        :func:`flowpy._signals.signal_subscribe`).

        Raises:
            TypeError: if ``subscription`` is ``None`` (rule 2.13).
        """
        if self._upstream.accept(subscription):
            self._hand_off()

    def _subscribe_downstream(self) -> None:
        if signal_subscribe(self._downstream, self) and not self.done:
            self._started()

    def _started(self) -> None:
        """Called once the downstream's ``on_subscribe`` has returned normally, unless the stream ended meanwhile."""

    @property
    def upstream(self) -> Subscription | None:
        """The upstream subscription; ``None`` until ``on_subscribe``."""
        return self._upstream.current

    def on_error(self, error: BaseException) -> None:
        """Pass the upstream's failure on (:meth:`_pass_error`), through the trampoline.

        Raises:
            TypeError: if ``error`` is ``None`` (rule 2.13).
        """
        require(error, "error", "2.13")
        self._terminal(partial(self._pass_error, error))

    def on_complete(self) -> None:
        """Pass the upstream's completion on (:meth:`_pass_complete`), through the trampoline."""
        self._terminal(self._pass_complete)

    def _pass_error(self, error: BaseException) -> None:
        """Pass ``error`` on, unless the stream has already ended here."""
        if self._end():
            signal_deep(partial(self._downstream.on_error, error))

    def _pass_complete(self) -> None:
        """Pass the completion on, unless the stream has already ended here."""
        if self._end():
            signal_deep(self._downstream.on_complete)

    def cancel(self) -> None:
        """Stop and cancel upstream; idempotent (rules 3.5, 3.7)."""
        if self._end():
            upstream = self.upstream
            if upstream is not None:
                signal_deep(upstream.cancel)

    def _end(self) -> bool:
        """Mark the stream ended here; return whether this call ended it."""
        if self.done:
            return False
        self.done = True
        return True

    def _upstream_for(self, n: int) -> Subscription | None:
        """Return the upstream if ``request(n)`` is to be acted on here, else ``None``.

        An invalid ``n`` is passed up unchanged, so that the upstream signals
        the rule 3.9 error in order with its other signals; after the end of
        the stream a request does nothing (rule 3.6).
        """
        upstream = self.upstream
        if self.done or upstream is None:
            return None
        if check_request(n) is not None:
            upstream.request(n)
            return None
        return upstream


_NO_TERMINAL = Sentinel("NO_TERMINAL")
_COMPLETE = Sentinel("COMPLETE")


class HalfSerial:
    """Keeps a stage's signals serial when its terminal signal may come from a second thread (rule 1.3).

    Items come from one delivering thread at a time (the stage's upstream
    keeps rule 1.3 itself), through :meth:`on_next`. The terminal signal may
    come from that thread or from any other (a second publisher the stage
    listens to, an invalid ``request``), through :meth:`terminate`, which
    claims it: the first claim wins, later ones do nothing. If an
    :meth:`on_next` is under way on another thread, that thread sends the
    terminal signal when its call returns, so the downstream never has two
    of its methods running at once and nothing follows the terminal signal
    (RxJava's ``HalfSerializer``).

    This keeps a lock off the per-item path: each side writes its own field
    first and reads the other side's second (``_emitting`` in
    :meth:`on_next`, ``_pending`` in :meth:`terminate`), and CPython orders
    these plain reads and writes, so at least one of the two sees the other.
    """

    __slots__ = ("_downstream", "_emitting", "_lock", "_pending", "terminated")

    def __init__(self, downstream: Subscriber[Any]) -> None:
        self._downstream = downstream
        self._emitting = 0  # written by the delivering thread only: on_next calls under way
        self._lock = threading.Lock()
        # --- Written under self._lock ---------------------------------------
        self._pending: object = _NO_TERMINAL  # the claimed terminal: an exception or _COMPLETE; set once
        # The terminal signal went (or is going) downstream, or the downstream
        # raised in on_next (then written by the delivering thread); set once.
        self.terminated = False

    def on_next(self, item: Any) -> None:
        """Pass ``item`` downstream unless a terminal signal was claimed; delivering thread only."""
        self._emitting += 1
        try:
            if self._pending is _NO_TERMINAL:
                self._downstream.on_next(item)
        except BaseException:
            self.terminated = True  # the downstream broke rule 2.13: nothing more goes to it
            raise
        finally:
            self._emitting -= 1
        if self._pending is not _NO_TERMINAL:
            self._flush()

    def terminate(self, error: BaseException | None) -> bool:
        """Claim the terminal signal: ``on_error(error)``, or ``on_complete()`` if ``error`` is ``None``.

        It goes downstream now, unless an :meth:`on_next` is under way on
        another thread, which then sends it. Returns whether this call
        claimed it.
        """
        with self._lock:
            if self._pending is not _NO_TERMINAL:
                return False
            self._pending = _COMPLETE if error is None else error
        if not self._emitting:
            self._flush()
        return True

    def _flush(self) -> None:
        with self._lock:
            if self.terminated:
                return
            self.terminated = True
        pending = self._pending
        if pending is _COMPLETE:
            self._downstream.on_complete()
        else:
            self._downstream.on_error(pending)  # type: ignore[arg-type]  # an exception: see terminate()
