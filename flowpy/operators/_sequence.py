"""Publishers subscribed one after another, the subscriber's demand carried across.

:class:`SequenceStage` is the machinery of every operator that subscribes
to one publisher at a time and decides, when one ends, what comes next:
``retry``, ``repeat`` and ``retry_when`` subscribe to the source again,
``on_error_resume`` and ``on_error_return`` go on with another publisher,
``start_with``, ``default_if_empty`` and ``materialize`` append one, and
``concat_map`` subscribes to the publisher of the next source item. Each
subscription is an *attempt*: a fresh :class:`Attempt` subscriber, so a
late signal of an earlier attempt is recognised and ignored (rule 2.8).
``take_until`` and ``with_latest_from`` are single-attempt stages that
also listen to a second publisher (a :class:`Companion`).

Demand:     the subscriber's demand goes to the attempt that is subscribed;
            what an attempt did not deliver is requested from the next one
            as soon as it subscribes (RxJava's ``SubscriptionArbiter``).
            Nothing is queued here: items go straight downstream.
Threading:  items go downstream on the attempt's delivering thread. The
            next attempt is subscribed from a loop (an inline
            :class:`~flowpy._core.serial.SerialDrain`): an attempt that ends
            inside ``subscribe`` (a synchronous source that fails or
            completes at once) only counts a signal, and the loop that is
            already running subscribes the next one, so a million quick
            resubscriptions use constant stack; loops nested in other
            stages' loops go through the shared trampoline, so nesting
            these operators hundreds deep does too.
            Each subscription is made in a copy of the context current when
            the subscriber subscribed (flowpy/_context.py), whichever thread
            ended the previous attempt.
"""

from __future__ import annotations

import threading
from abc import ABC
from collections.abc import Callable
from typing import Any

from flowpy._checks import none_error, require
from flowpy._core.serial import SerialDrain
from flowpy._core.upstream import UpstreamSlot
from flowpy._demand import MAX_DEMAND, add_demand, check_request
from flowpy._signals import call_subscription, chain_fatal, reraise_fatal, signal_subscribe
from flowpy.flow import Publisher, Subscriber, Subscription
from flowpy.operators._base import HalfSerial

__all__ = ["Attempt", "Companion", "SequenceStage"]


# Implementation overview
#
# The stage is the downstream's subscription. Its lock guards the demand
# not yet met (_requested), the attempt in progress (_attempt) and its
# upstream subscription (_current), so that a request() and the
# subscription of the next attempt never both miss, nor both send, the
# same demand: request() adds and reads _current in one critical section,
# _attach() sets _current and reads _requested in another.
#
# An attempt counts what it delivers (Attempt.produced, its delivering
# thread only); when it ends, that count is taken off _requested, then the
# subclass decides (_ended): end the stream (_terminate) or go on (set
# _pending and _resume()). The loop (_pass) subscribes _pending, or asks
# _next_publisher() for the next publisher, whenever no attempt is active.
#
# Every signal to the downstream goes through one HalfSerial: items from the
# attempt's thread, the terminal from whichever thread ends the stream (an
# attempt's end, a companion publisher, an invalid request, a function that
# raised). _terminate() claims the end under the lock (cancelled), so the
# stream ends once, and nothing is sent after the downstream cancelled.


class Attempt(Subscriber[Any]):
    """The subscriber of one attempt: passes its items on while it is the stage's current attempt."""

    __slots__ = ("_stage", "produced")

    def __init__(self, stage: SequenceStage) -> None:
        self._stage = stage
        self.produced = 0  # delivering thread only: items passed downstream

    def on_subscribe(self, subscription: Subscription) -> None:
        """Keep ``subscription`` as the stage's current one and request the demand not yet met.

        Raises:
            TypeError: if ``subscription`` is ``None`` (rule 2.13).
        """
        require(subscription, "subscription", "2.13")
        self._stage._attach(self, subscription)

    def on_next(self, item: Any) -> None:
        """Pass ``item`` downstream, unless this attempt is over.

        Raises:
            TypeError: if ``item`` is ``None`` (rule 2.13).
        """
        if item is None:
            raise none_error("item", "2.13")
        stage = self._stage
        if stage._attempt is self:
            self.produced += 1
            try:
                stage._serial.on_next(item)
            except BaseException:
                stage.cancel()  # the downstream broke rule 2.13: it counts as cancelled
                raise

    def on_error(self, error: BaseException) -> None:
        """End this attempt with ``error``; the stage decides what follows.

        Raises:
            TypeError: if ``error`` is ``None`` (rule 2.13).
        """
        require(error, "error", "2.13")
        self._stage._end_attempt(self, error)

    def on_complete(self) -> None:
        """End this attempt; the stage decides what follows."""
        self._stage._end_attempt(self, None)


class SequenceStage(Subscription, ABC):
    """The downstream's subscription: subscribes one publisher at a time, carrying the demand over.

    Subclasses set :attr:`_pending` to the first publisher (or override
    :meth:`_next_publisher`), decide in :meth:`_ended` what follows an
    attempt, and cancel what else they subscribed to in :meth:`_release`.
    :meth:`start` gives the downstream its subscription and subscribes the
    first attempt.
    """

    __slots__ = (
        "__weakref__",
        "_attempt",
        "_current",
        "_lock",
        "_loop",
        "_pending",
        "_requested",
        "_serial",
        "cancelled",
    )

    def __init__(self, downstream: Subscriber[Any]) -> None:
        self._serial = HalfSerial(downstream)
        # Runs _pass one at a time, on the signalling thread, in a copy of the
        # subscribe-time context; nested in other stages' loops, through the
        # trampoline (flowpy._core.serial.trampoline).
        self._loop = SerialDrain.inline(self._pass, context="capture")
        self._pending: Publisher[Any] | None = None  # the next publisher to subscribe; set before _resume()
        self._lock = threading.Lock()
        # --- Guarded by self._lock ----------------------------------------
        self._requested = 0  # demand not met by the attempts that ended; MAX_DEMAND is unbounded
        self._attempt: Attempt | None = None  # the attempt in progress; read racily by Attempt.on_next
        self._current: Subscription | None = None  # its upstream subscription, once it arrived
        self.cancelled = False  # the downstream cancelled, or the stream ended; set once

    @property
    def downstream(self) -> Subscriber[Any]:
        """The subscriber this stage signals."""
        return self._serial._downstream

    def start(self) -> None:
        """Hand this stage to the downstream, then subscribe what it listens to and the first attempt."""
        if signal_subscribe(self.downstream, self) and not self.cancelled:
            self._started()
            self._resume()

    def _started(self) -> None:
        """Subscribe the companion publishers; called after the downstream's ``on_subscribe``."""

    # --- Subclass hooks ---------------------------------------------------

    def _next_publisher(self) -> Publisher[Any] | None:
        """The publisher of the next attempt, or ``None`` to wait for a :meth:`_resume`; loop only.

        By default :attr:`_pending`, taken. May call :meth:`_terminate` (the sequence is over).
        """
        publisher, self._pending = self._pending, None
        return publisher

    def _ended(self, error: BaseException | None, produced: int) -> None:
        """An attempt ended with ``error`` (``None``: completed) after delivering ``produced`` items.

        Either :meth:`_terminate` or set up the next attempt and :meth:`_resume`.
        By default the stream ends as the attempt did. A user function called
        here is guarded by the subclass (:meth:`_guard`).
        """
        self._terminate(error)

    def _release(self) -> None:
        """Cancel the subscriptions besides the attempt's; the stream has ended or was cancelled."""

    def _guard(self, fn: Callable[..., Any], *args: Any, cause: BaseException | None = None) -> tuple[bool, Any]:
        """Call a user function: ``(True, result)``, or ``(False, None)`` once its failure ended the stream.

        The failure is signalled with ``cause`` (the error being handled) as
        the end of its ``__context__`` chain, as an ``except`` block would
        (RxJava signals both in a ``CompositeException``); a ``BaseException``
        that is not an ``Exception`` is then re-raised (docs/java-mapping.md).
        """
        try:
            return True, fn(*args)
        except BaseException as failure:
            self._terminate(failure if cause is None else chain_fatal(cause, failure))
            reraise_fatal(failure)
            return False, None

    # --- Driving the sequence ---------------------------------------------

    def _resume(self) -> None:
        """Let the loop subscribe the next attempt if none is active."""
        self._loop.signal()

    def _pass(self, first: bool) -> bool:
        if self.cancelled or self._attempt is not None:
            return False
        publisher = self._next_publisher()
        if publisher is None:
            return False
        attempt = Attempt(self)
        with self._lock:
            if self.cancelled:
                return False
            self._attempt = attempt
        try:
            publisher.subscribe(attempt)
        except BaseException as error:  # a subscribe that broke rule 1.9, or a fatal one from downstream
            self._terminate(error)  # nothing if the downstream raised it: the stage is cancelled
            reraise_fatal(error)
        return False

    def _attach(self, attempt: Attempt, subscription: Subscription) -> None:
        with self._lock:
            accepted = self._attempt is attempt and self._current is None and not self.cancelled
            if accepted:
                self._current = subscription
                requested = self._requested
        if not accepted:  # a late or second subscription (rules 2.5, 2.6)
            call_subscription(subscription, None)
        elif requested:
            subscription.request(requested)

    def _end_attempt(self, attempt: Attempt, error: BaseException | None) -> None:
        with self._lock:
            if self._attempt is not attempt:
                return  # a signal of an earlier attempt, or after the end (rule 2.8)
            self._attempt = None
            self._current = None
            if self._requested != MAX_DEMAND:
                self._requested -= attempt.produced
        self._ended(error, attempt.produced)

    def _terminate(self, error: BaseException | None) -> None:
        """End the stream: cancel what is subscribed, then ``on_error(error)`` (``on_complete`` if ``None``), once.

        Does nothing after the downstream cancelled or the stream ended.
        """
        with self._lock:
            if self.cancelled:
                return
            self.cancelled = True
            current, self._current = self._current, None
            self._attempt = None
        if current is not None:
            call_subscription(current, None)
        self._release()
        self._serial.terminate(error)

    # --- Subscription -------------------------------------------------------

    def request(self, n: int) -> None:
        """Add ``n`` to the demand and pass it to the current attempt (rules 3.8, 3.17).

        An invalid ``n`` cancels the attempt and ends the stream with
        ``ValueError``/``TypeError`` at once (rule 3.9); it is not passed up,
        so ``retry`` never takes it for a failure of the source.
        """
        error = check_request(n)
        if error is not None:
            self._terminate(error)
            return
        with self._lock:
            if self.cancelled:
                return
            self._requested = add_demand(self._requested, n)
            current = self._current
        if current is not None:
            current.request(n)

    def cancel(self) -> None:
        """Cancel the current attempt and everything else subscribed; nothing follows (rules 3.5, 3.7)."""
        with self._lock:
            if self.cancelled:
                return
            self.cancelled = True
            current, self._current = self._current, None
            self._attempt = None
        if current is not None:
            call_subscription(current, None)
        self._release()


class Companion(Subscriber[Any]):
    """A second publisher a :class:`SequenceStage` listens to (``take_until``'s ``other``, ``retry_when``'s handler).

    Its signals go to the three callbacks; its upstream subscription is kept
    once (rule 2.5), and :meth:`request` made before it arrives is passed on
    when it does. :meth:`cancel` may come at any time (rule 2.6).
    """

    __slots__ = ("_deferred", "_lock", "_on_complete", "_on_error", "_on_next", "_slot")

    def __init__(
        self,
        on_next: Callable[[Any], None],
        on_error: Callable[[BaseException], None],
        on_complete: Callable[[], None],
    ) -> None:
        self._on_next = on_next
        self._on_error = on_error
        self._on_complete = on_complete
        self._slot = UpstreamSlot()
        self._lock = threading.Lock()
        self._deferred = 0  # guarded by self._lock: requested before the subscription arrived

    def on_subscribe(self, subscription: Subscription) -> None:
        """Keep ``subscription`` and request what was asked for before it came.

        Raises:
            TypeError: if ``subscription`` is ``None`` (rule 2.13).
        """
        if not self._slot.accept(subscription):
            return
        with self._lock:
            deferred, self._deferred = self._deferred, 0
        if deferred:
            subscription.request(deferred)

    def request(self, n: int) -> None:
        """Request ``n`` more items, now or once the subscription arrives."""
        with self._lock:
            subscription = self._slot.current
            if subscription is None:
                self._deferred = add_demand(self._deferred, n)
        if subscription is not None:
            subscription.request(n)

    def on_next(self, item: Any) -> None:
        """Hand ``item`` to the stage.

        Raises:
            TypeError: if ``item`` is ``None`` (rule 2.13).
        """
        if item is None:
            raise none_error("item", "2.13")
        self._on_next(item)

    def on_error(self, error: BaseException) -> None:
        """Hand ``error`` to the stage.

        Raises:
            TypeError: if ``error`` is ``None`` (rule 2.13).
        """
        require(error, "error", "2.13")
        self._on_error(error)

    def on_complete(self) -> None:
        """Tell the stage that the companion publisher completed."""
        self._on_complete()

    def cancel(self) -> None:
        """Cancel the companion subscription, now or as soon as it arrives."""
        self._slot.cancel()
