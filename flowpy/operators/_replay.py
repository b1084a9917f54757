"""``replay`` and ``cache``: one upstream subscription whose items every subscriber receives from the start.

Both put a :class:`ReplayProcessor` between the source and the subscribers.
Unlike ``publish``, where a subscriber receives the items from the moment
it joins, each subscriber here has its own position in a buffer of the
items received so far: one that joins late is replayed the buffered items
first, at the pace of its own demand, then goes on with the live ones.

``replay()`` keeps every item; ``replay(buffer_size)`` keeps the last
``buffer_size``; ``cache()`` is ``replay()`` that connects with its first
subscriber and consumes the source without waiting for demand (RxJava's
``cache``).

Threading:  as for :class:`~flowpy.processors.MulticastProcessor`, the
            processor has no executor: every signal runs on the thread that
            made progress possible (the upstream's ``on_next``, or a
            subscriber's ``request``, ``cancel`` or ``subscribe``), from one
            drain loop at a time, each subscriber's in its own copy of the
            context it subscribed in.
"""

from __future__ import annotations

import threading
from typing import Generic, TypeVar

from flowpy._checks import none_error, require, require_positive_int, require_publisher, require_subscriber
from flowpy._context import bind, capture
from flowpy._core.serial import SerialDrain
from flowpy._core.upstream import UpstreamSlot
from flowpy._demand import MAX_DEMAND, add_demand, check_request, replenish_limit
from flowpy._signals import call_subscription, chain_fatal, report, signal_subscribe, signal_terminal
from flowpy.errors import MissingBackpressureError
from flowpy.flow import Processor, Publisher, Subscriber, Subscription
from flowpy.operators._share import ConnectablePublisher

__all__ = ["ReplayProcessor", "cache", "replay"]

T = TypeVar("T")

# Implementation overview
#
# Items are numbered from 0 in the order they arrive. The buffer is a list
# whose first element is item number `_base`; on_next appends to it and
# counts `_arrived`, and only the drain removes items, from the front, under
# the lock. Each subscription has a `position` (the number of the next item
# it is to receive; written by the drain, and under the lock when it joins)
# and `requested`, the number of the first item it has not asked for
# (position + unfilled demand, saturating at MAX_DEMAND). A drain pass
# delivers items[position - base : min(requested, arrived) - base] to each
# subscriber, in turn, then trims the buffer and asks the upstream for more.
#
# What is asked upstream: the furthest item any subscriber has asked for
# (RxJava's replay: the largest demand drives the source); with a
# buffer_size, never beyond the slowest subscriber's position plus
# buffer_size, so the buffer never has to drop an item that a subscriber
# has not received: a fast subscriber runs at most buffer_size items ahead
# of the slowest. Bounded requests go out in batches of three quarters of
# buffer_size, or whenever nothing is outstanding, so a slow pace costs no
# request per item. cache() asks for everything at once. A pass only
# decides what to request (_to_request); the thread that ran the drain sends
# it once the drain has returned (_signal), so that a synchronous source,
# emitting inside request(), finds the drain idle and each item is
# delivered as it comes.
#
# Trimming keeps the last buffer_size items and every item a subscriber
# still needs, and removes a prefix only once it is buffer_size long, so
# the list is compacted in amortised O(1) per item.


class _ReplaySubscription(Subscription, Generic[T]):
    """One subscriber's link to a :class:`ReplayProcessor`: its own position in the buffer."""

    __slots__ = ("cancelled", "context", "deliver", "error", "parent", "position", "requested", "subscriber")

    def __init__(self, parent: ReplayProcessor[T], subscriber: Subscriber[T]) -> None:
        self.parent = parent
        self.subscriber = subscriber
        # The subscriber's copy of the context current at subscribe(): its
        # signals run there, whichever thread drives the drain.
        self.context = context = capture()
        self.deliver = bind(context, subscriber.on_next)  # looked up once, called per item
        # --- Guarded by parent._lock ---------------------------------------
        # Before it joins: the demand made inside on_subscribe. From then on:
        # the number of the first item not asked for, saturating at MAX_DEMAND.
        self.requested = 0
        self.cancelled = False  # set once, by cancel() or by its terminal signal
        self.error: BaseException | None = None  # its first invalid request (rule 3.9)
        # --- Written by the drain (and under parent._lock as it joins) -----
        self.position = 0  # the number of the next item to deliver

    def signal_terminal(self, error: BaseException | None) -> None:
        """:func:`~flowpy._signals.signal_terminal` in the subscriber's context."""
        context = self.context
        if context is None:
            signal_terminal(self.subscriber, error)
        else:
            context.run(signal_terminal, self.subscriber, error)

    def request(self, n: int) -> None:
        """Add ``n`` to this subscriber's demand (rules 3.8, 3.9, 3.17)."""
        self.parent._request(self, n)

    def cancel(self) -> None:
        """Leave the processor; the upstream stays connected for later subscribers (rules 3.5, 3.7)."""
        self.parent._cancel(self)


class _View(Generic[T]):
    """What one drain pass works on, read under the processor's lock by ``_prepare``."""

    __slots__ = ("base", "done", "error", "failed", "subscribers")

    def __init__(self) -> None:
        self.subscribers: tuple[_ReplaySubscription[T], ...] = ()
        self.failed: list[_ReplaySubscription[T]] = []  # detached for invalid requests: to signal
        self.base = 0
        self.done = False
        self.error: BaseException | None = None


class ReplayProcessor(Processor[T, T]):
    """Buffers its upstream's items and replays them to every subscriber, each at its own pace.

    With ``buffer_size=None`` every item is kept for as long as the
    processor lives; with a ``buffer_size``, the last ``buffer_size`` items
    are replayed to a subscriber that joins late, and the upstream is asked
    for no item that would make the slowest subscriber fall more than
    ``buffer_size`` behind, so memory holds at most twice ``buffer_size``
    items plus what was outstanding when a late subscriber joined. ``eager``
    requests everything from the upstream as soon as it arrives
    (``cache``); otherwise the upstream is asked for what the most demanding
    subscriber wants.

    A subscriber that arrives after the upstream ended is replayed the
    buffer, then receives the terminal signal. A subscriber that cancels
    leaves the others alone and the upstream connected. One whose
    ``on_next`` raises is cancelled and the failure reported (rule 2.13); a
    raised ``BaseException`` that is not an ``Exception`` ends every
    subscriber with ``on_error`` and cancels the upstream before it is
    re-raised (docs/java-mapping.md).
    """

    def __init__(self, buffer_size: int | None = None, *, eager: bool = False) -> None:
        """Args:
            buffer_size: how many of the latest items to keep; ``None`` keeps all.
            eager: request everything from the upstream at once.

        Raises:
            TypeError: if ``buffer_size`` is neither ``None`` nor an ``int``.
            ValueError: if ``buffer_size`` is not positive.
        """
        self._capacity = None if buffer_size is None else require_positive_int(buffer_size, "buffer_size")
        self._batch = 1 if buffer_size is None else replenish_limit(buffer_size)  # bounded requests go in batches
        self._eager = eager
        self._items: list[T] = []  # appended by on_next; a prefix removed by the drain under self._lock
        self._arrived = 0  # written by on_next only: items received in all
        self._lock = threading.Lock()
        # --- Guarded by self._lock -------------------------------------------
        self._base = 0  # the number of self._items[0]
        self._subscribers: tuple[_ReplaySubscription[T], ...] = ()  # copy on write
        self._done = False  # the upstream signalled its terminal; set once
        self._error: BaseException | None = None  # the upstream's failure, if any
        self._failures = False  # some subscription holds an invalid-request error
        self._aborted = False  # a subscriber raised a BaseException: everyone was ended
        self._to_request = 0  # guarded by self._lock: decided by a pass, requested by _flush()
        # --- Written only by the drain loop (read by on_next for rule 1.1) ---
        self._asked = 0  # items requested upstream in all
        self._view: _View[T] = _View()
        self._drain = SerialDrain.inline(self._pass, lock=self._lock, prepare=self._prepare).signal
        self._upstream = UpstreamSlot()

    @property
    def buffer_size(self) -> int | None:
        """How many of the latest items are replayed; ``None``: all of them."""
        return self._capacity

    @property
    def number_of_subscribers(self) -> int:
        """How many subscribers are attached (racy: for monitoring)."""
        return len(self._subscribers)

    # --- Publisher side ---------------------------------------------------------

    def subscribe(self, subscriber: Subscriber[T]) -> None:
        """Attach ``subscriber`` at the start of the buffer: it is replayed what is kept, then the live items.

        Raises:
            TypeError: if ``subscriber`` is ``None`` (rule 1.9).
        """
        require_subscriber(subscriber)
        subscription = _ReplaySubscription(self, subscriber)
        context = subscription.context
        subscribed = (
            signal_subscribe(subscriber, subscription)
            if context is None
            else context.run(signal_subscribe, subscriber, subscription)
        )
        if not subscribed:
            return
        with self._lock:
            if subscription.cancelled:
                return
            aborted = self._aborted
            if aborted:
                subscription.cancelled = True
            else:
                start = self._base
                if self._capacity is not None:
                    start = max(start, self._arrived - self._capacity)
                subscription.position = start
                subscription.requested = add_demand(start, subscription.requested)
                self._subscribers = (*self._subscribers, subscription)
            error = self._error
        if aborted:
            subscription.signal_terminal(error)
        else:
            self._signal()

    def _request(self, subscription: _ReplaySubscription[T], n: int) -> None:
        error = check_request(n)
        with self._lock:
            if subscription.cancelled:
                return
            if error is None:
                subscription.requested = add_demand(subscription.requested, n)
            elif subscription.error is None:
                subscription.error = error
                self._failures = True
        self._signal()

    def _cancel(self, subscription: _ReplaySubscription[T]) -> None:
        with self._lock:
            if subscription.cancelled:
                return
            self._detach(subscription)
        self._signal()  # the leaver may have held the buffer back

    def _detach(self, subscription: _ReplaySubscription[T]) -> None:
        # Caller holds self._lock.
        subscription.cancelled = True
        self._subscribers = tuple(s for s in self._subscribers if s is not subscription)

    # --- Subscriber side --------------------------------------------------------

    def on_subscribe(self, subscription: Subscription) -> None:
        """Accept the first upstream and request what the subscribers want; cancel any later one (rule 2.5).

        Raises:
            TypeError: if ``subscription`` is ``None`` (rule 2.13).
        """
        if self._upstream.accept(subscription):  # refused once ended: _end() and _abort() end the slot
            self._signal()

    def on_next(self, item: T) -> None:
        """Buffer ``item`` and deliver it to every subscriber that asked for it.

        Raises:
            TypeError: if ``item`` is ``None`` (rule 2.13).
        """
        if item is None:
            raise none_error("item", "2.13")
        if self._done:
            return  # after our terminal, an overflow or an abort (rule 2.8)
        if self._arrived >= self._asked:
            self._upstream.cancel()
            self._end(MissingBackpressureError(f"upstream sent more than the {self._asked} items requested (rule 1.1)"))
            return
        self._items.append(item)
        self._arrived += 1  # after the append: the drain reads the count, then the item
        self._signal()

    def on_error(self, error: BaseException) -> None:
        """Replay ``error`` to every subscriber after its items, and to every later subscriber.

        Raises:
            TypeError: if ``error`` is ``None`` (rule 2.13).
        """
        require(error, "error", "2.13")
        self._end(error)

    def on_complete(self) -> None:
        """Complete every subscriber after its items, and every later subscriber after the replay."""
        self._end(None)

    def _end(self, error: BaseException | None) -> None:
        with self._lock:
            if self._done:
                return
            self._done = True
            self._error = error
        self._upstream.detach()
        self._signal()

    # --- The drain loop ---------------------------------------------------------

    def _signal(self) -> None:
        """Run the drain (or have the thread running it go round again), then send the requests it decided.

        The requests go out after the drain has returned on this thread, so
        that a synchronous source, which emits inside ``request``, has its
        items delivered as they come rather than buffered until it returns.
        Every pass runs inside some thread's ``_signal``, which flushes after
        it, so no decided request is left behind.
        """
        self._drain()
        if self._to_request:  # racy read: a pass that decided more is followed by its own flush
            self._flush()

    def _flush(self) -> None:
        with self._lock:
            need, self._to_request = self._to_request, 0
        upstream = self._upstream.current
        if need and upstream is not None:
            call_subscription(upstream, need)

    def _prepare(self) -> None:
        """Read the state for the next pass into ``self._view``; detach subscriptions with invalid requests.

        Caller holds self._lock (the SerialDrain calls it as it claims a pass).
        """
        view = self._view
        if self._failures:
            self._failures = False
            failed = [s for s in self._subscribers if s.error is not None]
            for subscription in failed:
                self._detach(subscription)
            view.failed = failed
        view.subscribers = self._subscribers
        view.base = self._base
        view.done = self._done
        view.error = self._error

    def _pass(self, first: bool) -> bool:
        """Deliver to each subscriber what it asked for and the buffer holds, then trim and request.

        ``done`` was read (under the lock) before ``_arrived``: every item
        precedes the terminal signal, so a subscriber at ``_arrived`` after
        ``done`` has received everything.
        """
        view = self._view
        if view.failed:
            failed, view.failed = view.failed, []
            for subscription in failed:
                subscription.signal_terminal(subscription.error)
        if self._aborted:
            return False
        done = view.done
        arrived = self._arrived
        items = self._items
        base = view.base
        fatal: BaseException | None = None
        for subscription in view.subscribers:
            if subscription.cancelled:
                continue
            position = subscription.position
            end = min(subscription.requested, arrived)  # racy read: requested only grows, and a request signals
            deliver = subscription.deliver
            while position < end and not subscription.cancelled:
                item = items[position - base]
                position += 1
                try:
                    deliver(item)
                except BaseException as exc:
                    subscription.cancel()
                    report(exc, f"on_next of {subscription.subscriber!r} raised (rule 2.13)")
                    if not isinstance(exc, Exception):
                        fatal = chain_fatal(fatal, exc)
            subscription.position = position
            if done and position == arrived and not subscription.cancelled:
                with self._lock:
                    self._detach(subscription)
                try:
                    subscription.signal_terminal(view.error)
                except BaseException as exc:  # not an Exception: the others still get theirs
                    fatal = chain_fatal(fatal, exc)
        if fatal is not None:
            self._abort(fatal)
            raise fatal
        self._trim_and_request(arrived, done)
        return False

    def _trim_and_request(self, arrived: int, done: bool) -> None:
        """Drop the items nobody needs any more and ask the upstream for what is wanted; drain only."""
        capacity = self._capacity
        with self._lock:
            subscribers = self._subscribers  # including any that joined during the pass, at their start
            slowest = min((s.position for s in subscribers), default=arrived)
            if capacity is not None:
                keep_from = min(slowest, arrived - capacity)
                dead = keep_from - self._base
                if dead >= capacity:
                    del self._items[:dead]
                    self._base = keep_from
            if not done and self._upstream.current is not None:
                if self._eager:
                    target = MAX_DEMAND
                else:
                    target = max((s.requested for s in subscribers), default=self._asked)
                    if capacity is not None:
                        target = min(target, slowest + capacity)
                wanted = target - self._asked
                if wanted > 0 and (wanted >= self._batch or self._asked == arrived):
                    self._asked += wanted  # before the request: on_next checks against it
                    self._to_request += wanted  # sent by _flush() once the drain has returned

    def _abort(self, error: BaseException) -> None:
        """End everything before ``error`` (no ``Exception``) is re-raised from a subscriber's ``on_next``."""
        self._upstream.cancel()
        with self._lock:
            subscribers, self._subscribers = self._subscribers, ()
            self._aborted = True
            self._done = True
            self._error = error
            for subscription in subscribers:
                subscription.cancelled = True
            self._items.clear()
        fatal: BaseException | None = None
        for subscription in subscribers:
            try:
                subscription.signal_terminal(error)
            except BaseException as exc:
                fatal = chain_fatal(fatal, exc)
        if fatal is not None:
            raise chain_fatal(error, fatal)

    def __repr__(self) -> str:
        size = "all" if self._capacity is None else self._capacity
        state = "done" if self._done else "connected" if self._upstream.connected else "unconnected"
        return f"<ReplayProcessor buffer_size={size} {state} subscribers={len(self._subscribers)}>"


def replay(source: Publisher[T], buffer_size: int | None = None) -> ConnectablePublisher[T]:
    """Return a multicast view of ``source`` that starts on ``connect()`` and replays to late subscribers::

        source:        --1--2--3--4--|
        replay(2), connect(), A subscribes at once, B after 3:
        subscriber A:  --1--2--3--4--|
        subscriber B:           (2,3)-4--|      (the last 2 items, replayed at B's own pace)

    Demand: each subscriber gets items at its own pace, from its own
    position in the buffer. The source is asked for as many items as the
    most demanding subscriber wants (RxJava's ``replay``), but with a
    ``buffer_size`` never for an item that would put the slowest subscriber
    more than ``buffer_size`` behind: a subscriber that joined stays
    lossless, and fast subscribers wait for slow ones only that far. Bounded
    requests go out in batches of 75 % of ``buffer_size`` (or when nothing is
    outstanding).

    Buffer: every item when ``buffer_size`` is ``None`` (memory grows with
    the stream: use it for finite streams); otherwise the last
    ``buffer_size`` items are what a late subscriber is replayed, and at
    most twice ``buffer_size`` items (plus those outstanding when a late
    subscriber joined) are in memory. Subscribers that cancel leave the
    source connected; a subscriber after the end is replayed the buffer,
    then the terminal signal.

    Raises:
        TypeError: if ``source`` is not a publisher, or ``buffer_size`` is not an int.
        ValueError: if ``buffer_size`` is not positive.
    """
    require_publisher(source, "source")
    return ConnectablePublisher(source, ReplayProcessor(buffer_size))


def cache(source: Publisher[T]) -> Publisher[T]:
    """Subscribe to ``source`` once, with the first subscriber, keep every item, and replay them to everyone::

        source:       --1--2--3--|
        subscriber A: --1--2--3--|
        subscriber B (later):      (1,2,3)|

    Demand: the source is asked for everything at once (RxJava's
    ``cache``: it consumes its source in an unbounded manner); each
    subscriber receives the items at its own pace. Buffer: unbounded by
    nature, every item for as long as the publisher lives, so use it for
    finite streams whose items fit in memory; for a bound, use
    ``replay(buffer_size)``. The source is never cancelled, not even when
    every subscriber has left.

    Raises:
        TypeError: if ``source`` is not a publisher.
    """
    require_publisher(source, "source")
    return ConnectablePublisher(source, ReplayProcessor(eager=True), auto_connect=True)
