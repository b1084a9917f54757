"""SubmissionPublisher: a Flow publisher that buffers per subscriber and delivers on an executor.

Producer threads hand items to :meth:`SubmissionPublisher.submit` (or
:meth:`~SubmissionPublisher.offer`); each current subscriber has its own
bounded buffer, drained by one task at a time on the executor, as far as the
subscriber's demand allows. Compared with :class:`queue.Queue`, every
subscriber gets every item, and the consumer sets the pace with
``request(n)`` instead of polling.

Protocol:   rules 1.1 (no more ``on_next`` than requested), 1.3 (signals
            serial per subscriber), 1.9 (``on_subscribe`` first, ``None``
            subscriber is a ``TypeError``), 2.13 (no ``None`` items), 3.9
            (``request(n <= 0)`` is ``on_error(ValueError)``), 3.17 (demand
            saturates at ``2**63 - 1``).
Threading:  every method is thread-safe. Producers are serialised, so all
            subscribers see items in one order. Subscriber methods run on the
            executor (or, to break a deadlock, on a producer blocked in
            ``submit``), never under a lock of the subscription; ``on_drop``
            runs on the producer's thread.
Differences from the JDK: Java names in snake_case, getters as properties,
``IllegalStateException`` as :class:`~flowpy.errors.ClosedPublisherError` and
:class:`~flowpy.errors.DuplicateSubscriptionError`. ``close()`` does not wait
for a producer blocked in ``submit`` (JDK-8254060): it returns at once and
that ``submit`` raises :class:`~flowpy.errors.ClosedPublisherError`.
``request`` and ``cancel`` never raise, even when the executor refuses a task.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from itertools import compress, count, islice, repeat
from operator import is_
from threading import get_ident
from time import monotonic as _monotonic
from time import sleep as _sleep
from types import TracebackType
from typing import TYPE_CHECKING, Any, ClassVar, Final, Generic, TypeVar, cast

from flowpy import _impl
from flowpy._buffered import FREE_THREADED, GIL_ON, NOT_RUNNING, Handler
from flowpy._buffered import BufferedSubscription as _PyBufferedSubscription
from flowpy._checks import (
    check_timeout,
    none_error,
    require,
    require_callable,
    require_callable_or_none,
    require_positive_int,
    require_subscriber,
)
from flowpy._consumer import no_result, subscribe_future
from flowpy._context import capture
from flowpy._exit import track
from flowpy.errors import ClosedPublisherError, DuplicateSubscriptionError, ReentrantSubmitError
from flowpy.executors import DEFAULT, Default, Executor, default_executor, resolve_execute
from flowpy.flow import Publisher, Subscriber, default_buffer_size
from flowpy.snapshots import PublisherSnapshot, SubscriberSnapshot

__all__ = ["BUFFER_CAPACITY_LIMIT", "TWINS", "DropHandler", "SubmissionPublisher"]

T = TypeVar("T")
_P = TypeVar("_P", bound="_SubmissionPublisherBase[Any]")

BUFFER_CAPACITY_LIMIT: Final = 1 << 30
"""The largest buffer capacity; larger requests are rounded down to it."""

DropHandler = Callable[[Subscriber[T], T], bool]
"""``on_drop(subscriber, item) -> bool``: return ``True`` to retry the offer once."""

# Implementation overview
# -----------------------
# Most mechanics are in BufferedSubscription (flowpy/_buffered.py, or its
# compiled twin flowpy/_cbuffered.c, chosen by flowpy/_impl.py): one per
# subscriber, with its buffer, demand and consumer task. This class tracks the
# subscriptions and keeps producers sequential with one re-entrant lock,
# held for a whole submit/offer, so every subscriber sees the same order.
#
# A producer that must wait for space waits on self._space, which releases
# the lock. While it waits, self._blocked names its thread and other
# producers wait their turn on self._turn, so the order is kept; close(),
# subscribe() and the queries can take the lock meanwhile, which is how
# close() returns at once and wakes the blocked producer.
#
# A producer never waits for what only its own thread could do: space in a
# buffer whose subscriber it is inside of (direct_executor, or a task it runs
# while blocked), or the turn of its own blocked outer submit. Those raise
# ReentrantSubmitError instead; the checks are on the slow path only.
#
# Twins. _SubmissionPublisherBase holds what both cores share: construction,
# subscribing, closing, the queries and submit_many's loop. Two complete
# classes are built on it, once, at import (docs/internals.md):
#
#   - _PySubmissionPublisher: the reference producer path in Python, over
#     flowpy._buffered.BufferedSubscription and a threading.RLock;
#   - _CSubmissionPublisher: the same path in C, from PublisherCore of
#     flowpy/_cbuffered.c (which holds _lock, _subscriptions, _turn,
#     _turn_waiters, _blocked and _closed in slots), over the compiled
#     BufferedSubscription and ProducerLock; None when not built or disabled.
#
# SubmissionPublisher is the one flowpy._impl chose. Both stay importable side
# by side (TWINS), so one program can run on each.


_CONTENDED_YIELDS: Final = 16 if GIL_ON else 0
"""How often a producer yields the GIL for a held producer lock before it blocks on it.

Zero where the GIL was off when flowpy was imported: the convoy these yields
avoid is one of threads taking turns at the GIL.
"""

_INLINE_OFFER: Final[type | None] = None if FREE_THREADED else _PyBufferedSubscription
"""The subscriptions whose offer submit writes out inline: none on a free-threaded build, whose offer takes a lock."""


def _round_capacity(capacity: int) -> int:
    """Round up to a power of two, at least 1 and at most BUFFER_CAPACITY_LIMIT."""
    if capacity >= BUFFER_CAPACITY_LIMIT:
        return BUFFER_CAPACITY_LIMIT
    return 1 << (capacity - 1).bit_length() if capacity > 1 else 1


class _SubmissionPublisherBase(Publisher[T], Generic[T]):
    """A publisher that buffers each subscriber's items and delivers them on an executor.

    The part both twins share; each twin adds the producer path
    (``submit``, ``offer``, ``_publish_chunk``, ``_recover``) and names its
    core's classes below.

    Args:
        executor: where subscribers are called: a ``concurrent.futures``
            executor, an object with ``execute(fn)``, or a callable. Left out,
            the shared :func:`~flowpy.executors.default_executor`.
        max_buffer_capacity: the most items buffered per subscriber, rounded
            up to a power of two (at most ``2**30``).
        handler: called as ``handler(subscriber, exception)`` when that
            subscriber's ``on_next`` raises, before the subscription closes
            with ``on_error(exception)``.

    Raises:
        TypeError: if ``executor`` is ``None`` or not an executor, or
            ``max_buffer_capacity`` is not an ``int``, or ``handler`` is not
            callable.
        ValueError: if ``max_buffer_capacity`` is not positive.
    """

    if TYPE_CHECKING:  # what each twin provides, from its core (declared here for the shared methods)
        _subscription_type: ClassVar[type[_PyBufferedSubscription[Any]]]
        """The core's BufferedSubscription: one per subscriber."""

        @staticmethod
        def _lock_type() -> threading.RLock:
            """A new producer lock of the core (``threading.RLock``'s interface)."""

        @staticmethod
        def _first_none(items: list[Any]) -> int:
            """The index of the first ``None`` in ``items`` (by identity), or its length."""

        def _publish_chunk(self, chunk: list[T], end: int, /) -> None:
            """Publish ``chunk[:end]`` (no ``None`` in it) as ``submit`` would each. Caller holds self._lock."""

        def _recover(self, lock: Any, /) -> None:
            """Make the publisher consistent after an exception cut a producer call short."""

    def __init__(
        self,
        executor: Executor | Default = DEFAULT,
        max_buffer_capacity: int = default_buffer_size(),
        handler: Handler[T] | None = None,
    ) -> None:
        self._execute = resolve_execute(executor)
        require_positive_int(max_buffer_capacity, "max_buffer_capacity")
        require_callable_or_none(handler, "handler")
        self._executor: Executor = default_executor() if executor is DEFAULT else executor
        self._capacity = _round_capacity(max_buffer_capacity)
        self._handler = handler

        # --- Guarded by self._lock ----------------------------------------
        # Held by a producer for its whole submit/offer; re-entrant, because
        # with a direct executor on_next runs inside submit and may submit.
        # A threading.RLock with the pure-Python core, the compiled
        # ProducerLock (the same interface) with the compiled one.
        self._lock = self._lock_type()
        # Notified when a producer waiting for space in some subscription
        # may go on: a slot was freed, it closed, a task became claimable,
        # or this publisher closed.
        self._space = threading.Condition(self._lock)
        # Notified when a blocked producer finishes, so the next may start.
        self._turn = threading.Condition(self._lock)
        self._turn_waiters = 0  # producers inside self._turn.wait(); notified only if there are any
        self._blocked = 0  # ident of the producer waiting on self._space, holding the turn; 0 if none
        # Replaced, never mutated: snapshot() reads it without the lock, and
        # gets a tuple that was stored whole (a lone attribute read is never torn).
        self._subscriptions: tuple[_PyBufferedSubscription[T], ...] = ()
        # Set once; read without the lock by is_closed, is_subscribed and
        # snapshot, which report a state that was true at some point.
        self._closed = False
        self._closed_exception: BaseException | None = None  # set with _closed, if exceptional

    # --- Publisher -----------------------------------------------------------

    def subscribe(self, subscriber: Subscriber[T]) -> None:
        """Add ``subscriber``; ``on_subscribe`` follows on the executor (rule 1.9).

        After ``close()`` the subscriber gets ``on_subscribe`` then
        ``on_complete``; after ``close_exceptionally(e)``, ``on_subscribe`` then
        ``on_error(e)``. A subscriber that is already subscribed gets
        ``on_error(DuplicateSubscriptionError)`` on its existing subscription,
        and no second ``on_subscribe`` (rule 2.12).

        Raises:
            TypeError: if ``subscriber`` is ``None`` (rule 1.9).
            Exception: what the executor raised; the subscriber is then not added.
        """
        require_subscriber(subscriber)
        self._subscribe(subscriber)

    def _subscribe(self, subscriber: Subscriber[T]) -> bool:
        """Do :meth:`subscribe`; return whether a new subscription was made (not a duplicate)."""
        subscription: _PyBufferedSubscription[T] = self._subscription_type(
            subscriber, self._execute, self._capacity, self._handler, self._space, capture()
        )
        with self._lock:  # no loop in here (see _subscription_of)
            live = self._live()
            existing = _subscription_of(live, subscriber)
            if existing is not None:
                existing.signal_error(
                    DuplicateSubscriptionError(f"{subscriber!r} is already subscribed to this publisher (rule 2.12)")
                )
                return False
            try:
                subscription.signal_subscribe()
                if self._closed_exception is not None:
                    subscription.signal_error(self._closed_exception)
                elif self._closed:
                    subscription.signal_complete()
                else:
                    track(subscription)
                    self._subscriptions = (*live, subscription)
            except BaseException as exc:
                # Refused (closed already, without a signal) or interrupted:
                # whatever was started ends with on_error(exc).
                subscription.signal_error(exc)
                raise
        return True

    # --- Producing ------------------------------------------------------------

    def submit_many(self, items: Iterable[T]) -> int:
        """Publish each of ``items`` in order, exactly as calling :meth:`submit` on each would.

        The iterable is read lazily, at most ``max_buffer_capacity`` items at
        a time, and the producer lock is held for one such chunk at a time:
        other producers' items may come between chunks, never inside one. A
        chunk that fits in every subscriber's buffer is appended in one step;
        otherwise items go one by one, blocking as ``submit`` does.

        Returns:
            The number of items submitted.

        Raises:
            TypeError: if an item is ``None`` (rule 2.13); the items before it
                were submitted.
            ClosedPublisherError, ReentrantSubmitError: as :meth:`submit`.
        """
        iterator = iter(items)
        size = self._capacity
        lock = self._lock
        submitted = 0
        while True:
            chunk = list(islice(iterator, size))  # read outside the lock: the iterable is user code
            if not chunk:
                return submitted
            end = self._first_none(chunk)  # up to it; it then raises as submit(None) would
            try:
                if not lock.acquire(False):
                    self._acquire_contended()
            except BaseException:
                _release_if_taken(lock)
                raise
            try:
                self._publish_chunk(chunk, end)
            except BaseException:
                self._recover(lock)
                raise
            finally:
                lock.release()
            submitted += end
            if end < len(chunk):
                raise none_error("item", "2.13")

    def _acquire_contended(self) -> None:
        """Take the producer lock, which another thread holds, without a lock convoy.

        With the GIL, a thread blocked in ``acquire`` is handed the lock by
        ``release`` while it does not hold the GIL; the releasing producer,
        still running, then blocks on its next item, and every item costs a
        thread switch. So a producer first yields the GIL a few times, letting
        the holder run on, and takes the lock only when it finds it free while
        holding the GIL; after that it blocks as usual. Without the GIL it
        blocks at once (``_CONTENDED_YIELDS`` is 0).
        """
        lock = self._lock
        for _ in range(_CONTENDED_YIELDS):
            _sleep(0)
            if lock.acquire(False):
                return
        lock.acquire()

    # --- Closing ----------------------------------------------------------------

    def close(self) -> None:
        """Complete every subscriber after its buffered items, as far as its demand allows.

        Returns at once; it does not wait for subscribers, nor for a producer
        blocked in :meth:`submit`, which raises :class:`ClosedPublisherError`.
        Does nothing if already closed.
        """
        self._close(None)

    def close_exceptionally(self, error: BaseException) -> None:
        """Send ``on_error(error)`` to every subscriber; buffered items may be dropped.

        Later subscribers get ``on_subscribe`` then ``on_error(error)``. Does
        nothing if already closed.

        Raises:
            TypeError: if ``error`` is ``None`` or not an exception.
        """
        if not isinstance(error, BaseException):
            raise TypeError(f"error must be an exception, got {error!r}")
        self._close(error)

    def _close(self, error: BaseException | None) -> None:
        """Close with ``error`` (``None``: complete), unless closed already; then end every subscription."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._closed_exception = error
            subscriptions = self._subscriptions
            self._subscriptions = ()
            try:
                self._end_all(subscriptions, error)
            except BaseException:
                self._end_all(subscriptions, error)  # an interrupt cut it short: every step again
                raise

    def _end_all(self, subscriptions: tuple[_PyBufferedSubscription[T], ...], error: BaseException | None) -> None:
        """Wake blocked producers, then end each of ``subscriptions`` (``on_error(error)``, or ``on_complete``).

        Each step may be repeated. Caller holds self._lock and has set ``_closed``.
        """
        self._space.notify_all()
        for subscription in subscriptions:
            if error is None:
                subscription.signal_complete()
            else:
                subscription.signal_error(error)

    def __enter__(self: _P) -> _P:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # --- Queries ------------------------------------------------------------------

    @property
    def is_closed(self) -> bool:
        """Whether ``close`` or ``close_exceptionally`` was called."""
        return self._closed

    @property
    def closed_exception(self) -> BaseException | None:
        """The error given to ``close_exceptionally``, or ``None``."""
        return self._closed_exception

    @property
    def executor(self) -> Executor:
        """The executor given to the constructor, or the default one."""
        return self._executor

    @property
    def max_buffer_capacity(self) -> int:
        """The per-subscriber buffer capacity, after rounding."""
        return self._capacity

    @property
    def has_subscribers(self) -> bool:
        """Whether any subscription is open."""
        with self._lock:
            return bool(self._prune())

    @property
    def number_of_subscribers(self) -> int:
        """How many subscriptions are open; 0 after close."""
        with self._lock:
            return len(self._prune())

    @property
    def subscribers(self) -> list[Subscriber[T]]:
        """A new list of the subscribers of open subscriptions (for monitoring)."""
        with self._lock:
            live = self._prune()
        # Outside the lock (see _subscription_of); a subscription closed since drops out.
        return [s for s in (sub.subscriber for sub in live) if s is not None]

    def is_subscribed(self, subscriber: Subscriber[T]) -> bool:
        """Whether ``subscriber`` has an open subscription here.

        A cancelled subscription counts until its task has processed the cancel.

        Raises:
            TypeError: if ``subscriber`` is ``None``.
        """
        require(subscriber, "subscriber")
        if self._closed:
            return False
        with self._lock:
            return _subscription_of(self._prune(), subscriber) is not None

    def estimate_minimum_demand(self) -> int:
        """The least (demand - buffered items) over subscribers; 0 with none. For monitoring only."""
        with self._lock:
            live = self._prune()
            return min((s.estimate_demand() for s in live), default=0)

    def estimate_maximum_lag(self) -> int:
        """The most items buffered for one subscriber; 0 with none. For monitoring only."""
        with self._lock:
            return max((s.lag() for s in self._prune()), default=0)

    def snapshot(self) -> PublisherSnapshot:
        """Read the state and the per-subscriber buffers and counters, for monitoring.

        Takes no lock that producers hold, so it never waits for a blocked
        ``submit``: each subscriber's fields are read together, the
        subscribers one after another (approximate across them, like
        :meth:`estimate_maximum_lag`). Costs one call per subscriber; see
        :mod:`flowpy.snapshots` for what each field means.
        """
        capacity = self._capacity
        subscribers = []
        for subscription in self._subscriptions:  # a tuple, replaced, never mutated
            subscriber = subscription.subscriber
            if subscriber is None or subscription.is_closed:  # closed, not yet pruned
                continue
            buffered, demand, delivered, dropped = subscription.readings()
            subscribers.append(SubscriberSnapshot(subscriber, buffered, capacity, demand, delivered, dropped))
        return PublisherSnapshot(self._closed, capacity, tuple(subscribers))

    def _live(self) -> tuple[_PyBufferedSubscription[T], ...]:
        """The open subscriptions. Caller holds self._lock."""
        return tuple(s for s in self._subscriptions if not s.is_closed)

    def _prune(self) -> tuple[_PyBufferedSubscription[T], ...]:
        """Drop closed subscriptions and return the rest. Caller holds self._lock."""
        live = self._subscriptions = self._live()
        return live

    # --- consume --------------------------------------------------------------------

    def consume(self, fn: Callable[[T], object]) -> Future[None]:
        """Call ``fn`` on every item, on the executor, with unbounded demand.

        Returns:
            A future that completes when the stream completes, fails with the
            stream's error or with what ``fn`` raised (which cancels the
            subscription), and whose ``cancel()`` cancels the subscription.

        Raises:
            TypeError: if ``fn`` is not callable.
        """
        require_callable(fn, "fn")
        return subscribe_future(self, fn, no_result)

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"subscribers={len(self._subscriptions)}"
        return f"<SubmissionPublisher {state} capacity={self._capacity} executor={self._executor!r}>"

    def __del__(self, _warn: Callable[..., None] = warnings.warn) -> None:
        # warnings.warn bound at definition: at interpreter exit the module's
        # globals may already be gone when this runs.
        if not getattr(self, "_closed", True) and self._subscriptions:
            _warn(
                f"unclosed {self!r}: its subscribers never get on_complete; call close()",
                ResourceWarning,
                source=self,
                stacklevel=1,
            )


def _release_if_taken(lock: Any) -> None:
    """Release ``lock`` if an interrupt came after ``acquire`` took it, before the caller's ``try``.

    For the ``except BaseException`` around a producer's ``acquire(False)``
    and :meth:`SubmissionPublisher._acquire_contended`: the first fails
    only when another thread holds the lock, the second is called only then,
    so this thread owns the lock exactly when that call took it.
    """
    if lock._is_owned():
        lock.release()


def _subscription_of(subscriptions: Iterable[Any], subscriber: object) -> Any:
    """The subscription of ``subscriber`` (by identity or ``==``) among ``subscriptions``, or ``None``.

    A function of its own, so that a section of the publisher's lock calls it
    instead of looping: a loop in the section could lose the lock to a Ctrl-C
    on CPython 3.12+ (docs/internals.md, "Loops and locks").
    """
    for existing in subscriptions:
        if existing.subscriber is subscriber or existing.subscriber == subscriber:
            return existing
    return None


def _operation(timeout: float | None) -> str:
    """The public method behind a ``_publish`` call: ``submit`` waits without limit, ``offer`` does not."""
    return "submit" if timeout is None else "offer"


def _first_none_python(items: list[T]) -> int:
    """The index of the first ``None`` in ``items`` (by identity, calling no ``__eq__``), or its length."""
    return next(compress(count(), map(is_, items, repeat(None))), len(items))


class _PySubmissionPublisher(_SubmissionPublisherBase[T]):
    """SubmissionPublisher on the pure-Python core: the reference producer path.

    Its subscriptions are :class:`flowpy._buffered.BufferedSubscription`, its
    producer lock a :class:`threading.RLock`.
    """

    _subscription_type = _PyBufferedSubscription
    _lock_type = staticmethod(threading.RLock)
    _first_none = staticmethod(_first_none_python)

    # --- Producing (caller of the _ methods holds self._lock) ----------------

    def submit(self, item: T, /) -> int:
        """Publish ``item`` to every current subscriber, blocking while a buffer is full.

        Returns:
            An estimate of the largest number of items buffered for one
            subscriber, at least 1; 0 if there are no subscribers.

        Raises:
            TypeError: if ``item`` is ``None`` (rule 2.13).
            ClosedPublisherError: if the publisher is closed, or was closed
                while this call waited.
            ReentrantSubmitError: if waiting for space could never end, because
                this thread is inside the methods of the subscriber whose
                buffer is full (say, ``on_next`` on ``direct_executor``).

        An executor that refuses a delivery task does not make ``submit``
        fail: that subscriber gets ``on_error`` with the executor's exception,
        and the others get the item.
        """
        if item is None:  # inline, not require(): once per item on the hot path; only a failure calls
            raise none_error("item", "2.13")
        lock = self._lock
        try:  # explicit calls cost half of a with-statement on this path
            if not lock.acquire(False):
                self._acquire_contended()
        except BaseException:
            _release_if_taken(lock)
            raise
        try:
            subscriptions = self._subscriptions
            if len(subscriptions) == 1 and not self._blocked:
                # The common case inline: one subscriber, room in its buffer.
                # This is _buffered.BufferedSubscription.offer, written out
                # here to save a call per item; a full or closed buffer takes
                # nothing, and the general path below handles it.
                subscription = subscriptions[0]
                if type(subscription) is _INLINE_OFFER:  # not a subscription of the other core, nor a stand-in
                    buffer = subscription._buffer
                    n = len(buffer)
                    if n < subscription._capacity:
                        buffer.append(item)
                        if NOT_RUNNING[subscription._ctl] and subscription._demand:
                            subscription._start_on_offer()
                        return n + 1
            if subscriptions and not self._blocked:  # _publish_locked, less its checks made here
                return self._publish_to(item, subscriptions, None, None)
            return self._publish_locked(item, None, None)
        except BaseException:
            self._recover(lock)
            raise
        finally:
            lock.release()

    def _publish_chunk(self, chunk: list[T], end: int, /) -> None:
        """Publish ``chunk[:end]`` (no ``None`` in it) as ``submit`` would each. Caller holds self._lock."""
        done = 0
        while done < end:
            if self._blocked:
                self._wait_turn(None)
            subscriptions = self._subscriptions
            if not subscriptions:
                if self._closed:
                    raise self._closed_error("submit")
                return  # as submit() with no subscribers: the items go nowhere
            if len(subscriptions) == 1:
                room = subscriptions[0].free_slots()
            else:
                room = min(subscription.free_slots() for subscription in subscriptions)
            if room > 0:
                stop = done + room
                if stop >= end:
                    stop = end
                # The whole chunk, not a copy of it, when it all fits at once.
                part = chunk if done == 0 and stop == len(chunk) else chunk[done:stop]
                for subscription in subscriptions:
                    status = subscription.extend(part)
                    if status == 0:
                        self._offer_each(subscription, part)
                    elif status < 0:
                        self._subscriptions = self._live()
                done = stop
            else:  # a buffer is full or closed: one item the general way, which may wait
                self._publish_locked(chunk[done], None, None)
                done += 1

    def _offer_each(self, subscription: _PyBufferedSubscription[T], items: list[T]) -> None:
        """Offer ``items`` to ``subscription`` one by one, waiting for space as submit does. Caller holds self._lock.

        For a part of a chunk that no longer fits whole, because a task that
        an earlier ``extend`` started published into this buffer meanwhile
        (a subscriber that publishes from ``on_next`` on an executor that
        runs tasks at once).
        """
        for item in items:
            status = subscription.offer(item)
            if status == 0:
                self._retry(item, [subscription], 0, None, None)
            elif status < 0:  # closed: the rest of the part goes nowhere, as each submit's would
                self._subscriptions = self._live()
                return

    def offer(
        self,
        item: T,
        on_drop: DropHandler[T] | None = None,
        *,
        timeout: float | None = None,
    ) -> int:
        """Publish ``item`` if possible, without blocking or for at most ``timeout`` seconds.

        A subscriber whose buffer is full is retried at once (after waiting up
        to ``timeout`` seconds for it, each full subscriber separately). If it
        is still full and ``on_drop(subscriber, item)`` returns ``True``, it is
        retried exactly once more; otherwise the item is dropped for it.

        Returns:
            If any subscriber dropped the item, minus the number that did;
            otherwise the lag estimate of :meth:`submit`. (New flowpy APIs
            do not multiplex signs like this; it is kept for fidelity.)

        Raises:
            TypeError: if ``item`` is ``None`` (rule 2.13), ``on_drop`` is not
                callable, or ``timeout`` is not a number.
            ValueError: if ``timeout`` is NaN. (A negative one waits not at
                all; one above ``threading.TIMEOUT_MAX``, ``inf`` included,
                waits that long, about 292 years.)
            ClosedPublisherError: if the publisher is closed.
            Exception: what ``on_drop`` raised.
        """
        if on_drop is not None and not callable(on_drop):  # inline: offer() is a per-item path
            raise TypeError(f"on_drop must be callable or None, got {on_drop!r}")
        return self._publish(item, 0.0 if timeout is None else check_timeout(timeout, negative_is_zero=True), on_drop)

    def _publish(self, item: T, timeout: float | None, on_drop: DropHandler[T] | None) -> int:
        """Offer ``item`` to each subscription; ``timeout=None`` (``submit``) waits without limit."""
        if item is None:
            raise none_error("item", "2.13")
        lock = self._lock
        try:
            if not lock.acquire(False):
                self._acquire_contended()
        except BaseException:
            _release_if_taken(lock)
            raise
        try:
            return self._publish_locked(item, timeout, on_drop)
        except BaseException:
            self._recover(lock)
            raise
        finally:
            lock.release()

    def _wait_turn(self, timeout: float | None) -> None:
        """Wait while another producer is blocked for space holding the turn. Caller holds self._lock."""
        while self._blocked:
            if self._blocked == get_ident():
                raise ReentrantSubmitError(
                    f"cannot {_operation(timeout)}(): this thread's own submit() is waiting for buffer "
                    f"space, and a subscriber it delivers to meanwhile must not publish to the same publisher"
                )
            self._turn_waiters += 1
            try:
                self._turn.wait()
            finally:
                self._turn_waiters -= 1

    def _publish_locked(self, item: T, timeout: float | None, on_drop: DropHandler[T] | None) -> int:
        """The body of :meth:`_publish`, for an ``item`` that is not ``None``. Caller holds self._lock."""
        if self._blocked:
            self._wait_turn(timeout)
        subscriptions = self._subscriptions
        if not subscriptions:
            if self._closed:
                raise self._closed_error(_operation(timeout))
            return 0
        return self._publish_to(item, subscriptions, timeout, on_drop)

    def _publish_to(
        self,
        item: T,
        subscriptions: tuple[_PyBufferedSubscription[T], ...],
        timeout: float | None,
        on_drop: DropHandler[T] | None,
    ) -> int:
        """Offer ``item`` to each of ``subscriptions``; wait, retry and drop for the full ones.

        The rest of :meth:`_publish_locked`, once no producer holds the turn
        and there are subscriptions. Caller holds self._lock.
        """
        lag = 0
        saturated: list[_PyBufferedSubscription[T]] | None = None
        for subscription in subscriptions:
            status = subscription.offer(item)
            if status > lag:
                lag = status
            elif status == 0:
                if saturated is None:
                    saturated = [subscription]
                else:
                    saturated.append(subscription)
            elif status < 0:
                self._subscriptions = self._live()
        if saturated is not None:
            lag = self._retry(item, saturated, lag, timeout, on_drop)
        return lag

    def _retry(
        self,
        item: T,
        saturated: list[_PyBufferedSubscription[T]],
        lag: int,
        timeout: float | None,
        on_drop: DropHandler[T] | None,
    ) -> int:
        """Wait, retry and drop for the subscriptions that were full. Caller holds self._lock."""
        drops = 0
        for subscription in saturated:
            if timeout != 0:
                self._await_space(subscription, timeout)
            status = subscription.offer(item)
            if status == 0 and on_drop is not None:
                subscriber = subscription.subscriber
                if subscriber is not None and on_drop(subscriber, item):
                    status = subscription.offer(item)
            if status == 0:
                drops += 1
                subscription.count_drop()
            elif status > lag and not drops:
                lag = status
            elif status < 0:
                self._subscriptions = self._live()
        return -drops if drops else lag

    def _await_space(self, subscription: _PyBufferedSubscription[T], timeout: float | None) -> None:
        """Block until ``subscription`` has space, closes, or ``timeout`` passes. Caller holds self._lock.

        Raises:
            ClosedPublisherError: if the publisher closes meanwhile.
            ReentrantSubmitError: if ``timeout`` is ``None`` and only this
                thread could free the space (an ``offer`` does not wait then).
        """
        if subscription.delivering_here():
            if timeout is None:
                raise ReentrantSubmitError(
                    f"cannot submit(): the buffer of {subscription.subscriber!r} is full and this thread is "
                    f"inside one of its methods, so it could never drain; submit from another thread, "
                    f"use offer(), or deliver on a pool executor"
                )
            return
        deadline = None if timeout is None else _monotonic() + timeout
        self._blocked = get_ident()
        try:
            while not subscription.has_space():
                if self._closed:
                    raise self._closed_error(_operation(timeout))
                remaining = None
                if deadline is not None:
                    remaining = deadline - _monotonic()
                    if remaining <= 0:
                        return
                subscription.wait_for_space(remaining)
            if self._closed:
                raise self._closed_error(_operation(timeout))
        finally:
            self._blocked = 0
            # Unless an interrupt came inside Condition.wait after it released
            # the lock: then _recover takes it back and hands the turn on.
            if self._turn_waiters and self._lock._is_owned():  # type: ignore[attr-defined]
                try:
                    self._turn.notify_all()
                except BaseException:  # an interrupt before the waiters were woken: wake them
                    self._turn.notify_all()
                    raise
            subscription.stop_waiting()

    def _closed_error(self, operation: str) -> ClosedPublisherError:
        if self._closed_exception is not None:
            return ClosedPublisherError(
                f"cannot {operation}(): publisher was closed by close_exceptionally(); check closed_exception"
            )
        return ClosedPublisherError(f"cannot {operation}(): publisher was closed by close()")

    def _recover(self, lock: Any, /) -> None:
        """Make the publisher consistent after an exception cut a producer call short; before it releases ``lock``.

        An interrupt (``KeyboardInterrupt``) may come between two steps of
        ``offer``: each subscription starts the task for items left waiting.
        Caller holds self._lock, unless ``threading.Condition.wait`` was
        interrupted between releasing it and taking it back (a window in
        CPython's own code): then it is taken again here, for the caller's
        ``release``, and the producers waiting for the turn that wait held
        are woken (``_await_space`` could not notify them without the lock).
        """
        if not lock._is_owned():
            lock.acquire()
        if getattr(self, "_turn_waiters", 0) and not self._blocked:  # the turn, if that wait held it
            self._turn.notify_all()
        for subscription in getattr(self, "_subscriptions", ()):  # unset only if __init__ did not run
            subscription.resume()


TWINS: Final[dict[str, type[_PySubmissionPublisher[Any]]]] = {"python": _PySubmissionPublisher}
"""The SubmissionPublisher class of each core available here, by core name (``"python"``, ``"c"``)."""

if TYPE_CHECKING:
    from flowpy._cbuffered import PublisherCore as _CPublisherCore
else:
    _CPublisherCore = _impl.CPublisherCore

if _CPublisherCore is not None:

    class _CSubmissionPublisher(_CPublisherCore, _SubmissionPublisherBase[T]):
        """SubmissionPublisher on the compiled core: the producer path of ``PublisherCore`` in C.

        Its subscriptions are the compiled ``BufferedSubscription``, its
        producer lock the compiled ``ProducerLock``.
        """

        _subscription_type = cast(Any, _impl.CBufferedSubscription)  # the same interface as the reference
        _lock_type = staticmethod(cast(Any, _impl.CProducerLock))
        _first_none = staticmethod(cast(Any, _impl.c_first_none))

    TWINS["c"] = cast(Any, _CSubmissionPublisher)  # the same interface as the reference (tests/test_core_parity.py)

if TYPE_CHECKING:
    SubmissionPublisher = _PySubmissionPublisher
else:
    SubmissionPublisher = TWINS[_impl.implementation]
