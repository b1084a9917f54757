"""``parallel``: one source dealt out to several rails, the stages on the rails, and ``sequential``.

A :class:`ParallelPublisher` is RxJava's ``ParallelFlowable`` at the level of
publishers: it has :attr:`~ParallelPublisher.rails`, and its ``subscribe``
takes one subscriber per rail. :func:`parallel` subscribes once to a source
and deals its items out to the rails by demand; :meth:`ParallelPublisher.through`
applies an ordinary operator to every rail (``observe_on`` for ``run_on``,
``map``, ``filter``; fused where they can be); :func:`sequential` merges the
rails back into one publisher, with backpressure. ``reduce`` and ``sorted``
are in :mod:`flowpy.operators._parallel_join`.

Threading:  the dealer delivers on the thread that made progress possible
            (the source's ``on_next``, or a rail's ``request``), one pass at a
            time for all rails, so each rail's signals are serial (rule 1.3);
            ``run_on`` then moves each rail to its own task on the executor.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Generic, TypeVar

from flowpy._checks import require_positive_int, require_publisher, require_subscriber
from flowpy._demand import add_demand, check_request
from flowpy._signals import chain_fatal, report, signal_subscribe, signal_terminal
from flowpy.flow import Publisher, Subscriber, Subscription
from flowpy.operators._base import DemandDrain, TrackedStagePublisher, reject_subscriber
from flowpy.operators._merge import _Coordinator
from flowpy.operators._queue import QueueSubscriber
from flowpy.operators._tracking import Stage

__all__ = ["ParallelPublisher", "parallel", "sequential"]

T = TypeVar("T")
R = TypeVar("R")
T_co = TypeVar("T_co", covariant=True)

RailOperator = Callable[[Publisher[Any]], Publisher[Any]]
"""An operator applied to each rail: a publisher of the rail's items to a publisher of the results."""


class ParallelPublisher(ABC, Generic[T_co]):
    """Items on :attr:`rails` parallel rails; ``subscribe`` takes one subscriber per rail.

    Each rail is a Reactive Streams stream of its own: its subscriber gets
    ``on_subscribe``, then items as it requests them, then one terminal
    signal.
    """

    __slots__ = ()

    @property
    @abstractmethod
    def rails(self) -> int:
        """How many rails there are."""

    @abstractmethod
    def subscribe(self, subscribers: Sequence[Subscriber[T_co]]) -> None:
        """Subscribe ``subscribers[i]`` to rail ``i``.

        A list of the wrong length is refused: each subscriber gets
        ``on_subscribe`` with a dead subscription, then ``on_error(ValueError)``
        (as RxJava's ``ParallelFlowable.validate``).

        Raises:
            TypeError: if a subscriber is ``None`` (rule 1.9).
        """

    def through(self, operator: RailOperator) -> ParallelPublisher[Any]:
        """Apply ``operator`` to every rail: ``operator(rail)`` for a publisher ``rail`` of that rail's items.

        ``operator`` must subscribe to its argument within its own
        ``subscribe``, as every flowpy operator does. Operators applied in a
        row compose into one per rail, so fusable ones fuse.
        """
        return _Through(self, operator)

    def _accept(self, subscribers: Sequence[Subscriber[Any]]) -> bool:
        """Check ``subscribers`` (rule 1.9, then their count); refuse them all and return ``False`` if wrong."""
        for subscriber in subscribers:
            require_subscriber(subscriber)
        if len(subscribers) == self.rails:
            return True
        error = ValueError(
            f"a parallel publisher with {self.rails} rails needs {self.rails} subscribers, got {len(subscribers)}"
        )
        for subscriber in subscribers:
            reject_subscriber(subscriber, error)
        return False


class _Port(Publisher[Any]):
    """Stands for one rail's upstream while a rail operator is built: it keeps what subscribes to it."""

    __slots__ = ("subscriber",)

    def __init__(self) -> None:
        self.subscriber: Subscriber[Any] | None = None

    def subscribe(self, subscriber: Subscriber[Any]) -> None:
        require_subscriber(subscriber)
        if self.subscriber is not None:
            reject_subscriber(subscriber, RuntimeError("a rail operator subscribed twice to its rail"))
            return
        self.subscriber = subscriber


class _Through(ParallelPublisher[Any]):
    """A rail operator applied to every rail of ``parent``."""

    __slots__ = ("_operator", "_parent")

    def __init__(self, parent: ParallelPublisher[Any], operator: RailOperator) -> None:
        self._parent = parent
        self._operator = operator

    @property
    def rails(self) -> int:
        return self._parent.rails

    def through(self, operator: RailOperator) -> ParallelPublisher[Any]:
        first = self._operator
        return _Through(self._parent, lambda rail: operator(first(rail)))

    def subscribe(self, subscribers: Sequence[Subscriber[Any]]) -> None:
        if not self._accept(subscribers):
            return
        upstream: list[Subscriber[Any]] = []
        for subscriber in subscribers:
            port = _Port()
            self._operator(port).subscribe(subscriber)
            if port.subscriber is None:
                raise RuntimeError(f"rail operator {self._operator!r} did not subscribe to its rail in subscribe()")
            upstream.append(port.subscriber)
        self._parent.subscribe(upstream)


# --- Dealing a source out to the rails ---------------------------------------------------

# Implementation overview
#
# _Dealer owns the drain loop (DemandDrain, run inline on the signalling
# thread) and the source's queue (_DealerHead, a QueueSubscriber: prefetch
# items at most, replenished at 75 %). Each rail has a _Rail subscription
# with its own demand. A pass deals the queued items round-robin to the
# rails that have demand, one item per rail per round, starting where the
# last pass stopped. A cancelled rail is skipped; once every rail has
# cancelled, the source is cancelled. A rail whose on_next raises an
# Exception is cancelled and the failure reported (rule 2.13), and the
# other rails go on; any other BaseException ends every rail with on_error
# before the drain lets it out (docs/java-mapping.md).


class _Rail(Subscription):
    """One rail's subscription: its demand and cancellation."""

    __slots__ = ("cancelled", "dealer", "emitted", "error", "index", "requested", "subscriber")

    def __init__(self, dealer: _Dealer, index: int, subscriber: Subscriber[Any]) -> None:
        self.dealer = dealer
        self.index = index
        self.subscriber = subscriber
        # --- Guarded by dealer._lock ---------------------------------------
        self.requested = 0  # total requested, saturated at MAX_DEMAND; read racily by the drain
        self.cancelled = False  # set once: cancelled, failed or terminated
        self.error: BaseException | None = None  # its first invalid request, to signal (rule 3.9)
        # --- Drain only ------------------------------------------------------
        self.emitted = 0  # items delivered

    def request(self, n: int) -> None:
        """Add ``n`` to this rail's demand (rules 3.8, 3.9, 3.17)."""
        self.dealer.rail_request(self, n)

    def cancel(self) -> None:
        """Stop this rail; the last rail to cancel cancels the source (rules 3.5, 3.7)."""
        self.dealer.rail_cancel(self)

    def __repr__(self) -> str:
        return f"<rail {self.index} of {self.dealer!r}>"


class _DealerHead(QueueSubscriber):
    """The dealer's subscriber to the source: subscribes every rail, then requests ``prefetch``."""

    __slots__ = ()

    parent: _Dealer

    def on_subscribe(self, subscription: Subscription) -> None:
        """Give each rail its subscription, then let the dealer deal.

        Raises:
            TypeError: if ``subscription`` is ``None`` (rule 2.13).
        """
        if not self.attach(subscription):
            return
        dealer = self.parent
        for rail in dealer.rails:
            signal_subscribe(rail.subscriber, rail)  # one that raises is cancelled and told
        dealer._release()
        self.start()


class _Dealer(DemandDrain):
    """Deals the source's items to the rails by demand, round-robin."""

    __slots__ = ("_index", "_live", "_rail_failures", "_terminated", "rails", "upstream")

    def __init__(self, subscribers: Sequence[Subscriber[Any]], prefetch: int) -> None:
        super().__init__()
        self.rails = tuple(_Rail(self, index, subscriber) for index, subscriber in enumerate(subscribers))
        self.upstream = _DealerHead(self, prefetch, "parallel's source")
        # --- Guarded by self._lock -------------------------------------------
        self._live = len(self.rails)  # rails not cancelled
        self._rail_failures = False  # some rail holds an invalid-request error
        # --- Drain only --------------------------------------------------------
        self._index = 0  # the rail the next round starts with
        self._terminated = False  # the rails were given their terminal signals

    def rail_request(self, rail: _Rail, n: int) -> None:
        error = check_request(n)
        with self._lock:
            if rail.cancelled:
                return
            if error is None:
                rail.requested = add_demand(rail.requested, n)
            elif rail.error is None:
                rail.error = error
                self._rail_failures = True
        self._signal()

    def rail_cancel(self, rail: _Rail) -> None:
        with self._lock:
            if not self._retire(rail):
                return
            last = self._live == 0
        if last:
            self.cancel()
        else:
            self._signal()  # its share of the queue goes to the others

    def _retire(self, rail: _Rail) -> bool:
        # Caller holds self._lock. Returns whether the rail was live.
        if rail.cancelled:
            return False
        rail.cancelled = True
        self._live -= 1
        return True

    def _retire_each(self, rails: Iterable[_Rail]) -> list[_Rail]:
        # Caller holds self._lock. Returns the rails that were live. A loop in
        # a lock's with block could lose the lock to a Ctrl-C on CPython 3.12+
        # (docs/internals.md, "Loops and locks"): this one has a frame of its own.
        return [rail for rail in rails if self._retire(rail)]

    # --- DemandDrain ------------------------------------------------------------

    def _has_work(self) -> bool:
        return bool(self.upstream.queue) and any(not r.cancelled and r.requested != r.emitted for r in self.rails)

    def _cancel_upstream(self) -> None:
        self.upstream.cancel()

    def _signal_downstream_error(self, error: BaseException) -> None:
        if not self._terminated:
            self._terminate(error)

    def _drain(self) -> None:
        if self._terminated:
            return
        if self.cancelled:
            self.upstream.cancel()
            return
        if self._rail_failures:
            self._fail_rails()
        failure = self._failure
        if failure is not None:
            self._terminate(failure)
            return
        upstream = self.upstream
        queue = upstream.queue
        rails = self.rails
        count = len(rails)
        index = self._index
        idle = 0  # consecutive rails found without demand
        while True:
            done = upstream.done  # read before the queue: no item follows it
            if not queue:
                if done:
                    self._terminate(None)
                    return
                break
            rail = rails[index]
            index += 1
            if index == count:
                index = 0
            if rail.cancelled or rail.requested == rail.emitted:
                idle += 1
                if idle == count:
                    break
                continue
            idle = 0
            item = upstream.poll()
            rail.emitted += 1
            self._deliver(rail, item)
            if self.cancelled or self._failure is not None:
                break
        self._index = index

    def _deliver(self, rail: _Rail, item: Any) -> None:
        try:
            rail.subscriber.on_next(item)
        except Exception as error:  # rule 2.13: that rail is over, the others go on
            self.rail_cancel(rail)
            report(error, f"on_next of {rail.subscriber!r} raised (rule 2.13)")
        except BaseException as error:  # ends every rail, then DemandDrain reports and re-raises it
            self.rail_cancel(rail)
            try:
                self._terminate(error)
            except BaseException as later:  # another rail raised one too: keep both
                raise chain_fatal(error, later)  # noqa: B904 - later is the one being handled
            raise

    def _fail_rails(self) -> None:
        """Signal their rule 3.9 error to the rails that made an invalid request."""
        with self._lock:
            self._rail_failures = False
            failed = self._retire_each(rail for rail in self.rails if rail.error is not None)
            last = self._live == 0
        for rail in failed:
            signal_terminal(rail.subscriber, rail.error)
        if last:
            self.cancelled = True
            self.upstream.cancel()

    def _terminate(self, error: BaseException | None) -> None:
        """Give every live rail its terminal signal, then cancel the source; drain only."""
        self._terminated = True
        self.cancelled = True
        self.upstream.cancel()
        with self._lock:
            live = self._retire_each(self.rails)
        fatal: BaseException | None = None
        for rail in live:
            try:
                signal_terminal(rail.subscriber, error)
            except BaseException as exc:  # not an Exception (signal_terminal reports those): the others still go on
                fatal = chain_fatal(fatal, exc)
        if fatal is not None:
            raise fatal

    def __repr__(self) -> str:
        return f"<parallel dealer: {len(self.rails)} rails, {len(self.upstream.queue)} queued>"


class _FromSource(ParallelPublisher[T_co]):
    """:func:`parallel`'s publisher: one dealer per subscription."""

    __slots__ = ("_prefetch", "_rails", "_source")

    def __init__(self, source: Publisher[T_co], rails: int, prefetch: int) -> None:
        self._source = source
        self._rails = rails
        self._prefetch = prefetch

    @property
    def rails(self) -> int:
        return self._rails

    def subscribe(self, subscribers: Sequence[Subscriber[T_co]]) -> None:
        if not self._accept(subscribers):
            return
        self._source.subscribe(_Dealer(subscribers, self._prefetch).upstream)

    def __repr__(self) -> str:
        return f"<parallel publisher: {self._rails} rails over {self._source!r}>"


def default_rails() -> int:
    """The number of rails ``parallel(rails=None)`` makes: the CPUs this process may use."""
    count: int | None = getattr(os, "process_cpu_count", os.cpu_count)()  # process_cpu_count: 3.13+
    return count or 1


def parallel(source: Publisher[T], rails: int | None = None, prefetch: int = 256) -> ParallelPublisher[T]:
    """Deal the items of ``source`` out to ``rails`` parallel rails, by demand::

        source:  --1--2--3--4--5--|
        rail 0:  --1-----3-----5--|
        rail 1:  -----2-----4-----|     (round-robin among the rails that have demand)

    Demand: asks ``source`` for ``prefetch`` items at once, then 75 % of
    ``prefetch`` again each time that many were dealt, so at most
    ``prefetch`` items are queued; each item goes to the next rail, in turn,
    that has requested one (a rail without demand is skipped, so a slow
    rail never holds the others back). An upstream error goes to every rail
    at once, ahead of queued items; the source is cancelled when every rail
    has cancelled. ``rails=None`` means the number of CPUs.

    Raises:
        TypeError: if ``source`` is not a publisher, or ``rails``/``prefetch`` not an int.
        ValueError: if ``rails`` or ``prefetch`` is not positive.
    """
    require_publisher(source, "source")
    count = default_rails() if rails is None else require_positive_int(rails, "rails")
    require_positive_int(prefetch, "prefetch")
    return _FromSource(source, count, prefetch)


def sequential(rails: ParallelPublisher[T], prefetch: int = 256) -> Publisher[T]:
    """Merge the rails back into one publisher, with backpressure::

        rail 0:  --1-----3-----5--|
        rail 1:  -----2-----4-----|
        result:  --1--2--3--4--5--|     (round-robin over the rails; order across rails not kept)

    Demand: as :func:`~flowpy.operators.merge` with one source per rail:
    each rail is asked for ``prefetch`` items, then 75 % of that again as
    its items are consumed; the subscriber's demand is served round-robin.
    The first error from a rail cancels the others and is signalled at once.

    Raises:
        TypeError: if ``rails`` is not a :class:`ParallelPublisher`, or ``prefetch`` not an int.
        ValueError: if ``prefetch`` is not positive.
    """
    if not isinstance(rails, ParallelPublisher):
        raise TypeError(f"rails must be a ParallelPublisher, got {rails!r}")
    require_positive_int(prefetch, "prefetch")
    count = rails.rails

    def connect(subscriber: Subscriber[T], track: Callable[[Stage], None]) -> None:
        coordinator: _Coordinator[T] = _Coordinator(subscriber, count, prefetch, None)
        track(coordinator)
        inners: list[Subscriber[Any]] = [coordinator.inner(f"rail {index}") for index in range(count)]
        coordinator.outer_done = True  # the inners are all there: completes when they are
        if not signal_subscribe(subscriber, coordinator) or coordinator.cancelled:
            return  # cancelled in on_subscribe (or it raised): the rails are never subscribed
        coordinator._release()
        rails.subscribe(inners)

    return TrackedStagePublisher("sequential", connect, prefetch)
