"""asyncio interop: ``async for`` over a publisher, and a publisher over an async iterable.

:func:`to_async_iterator` lets a coroutine consume any publisher with
``async for``; it keeps at most ``prefetch`` items requested or buffered, so a
slow consumer slows the publisher instead of filling memory.
:func:`from_async_iterable` is the other direction: a publisher whose
subscribers pull from an async iterable, never further than they requested.
:func:`collect_async` awaits the whole stream as a list.

Protocol:   the iterator cancels its subscription when the ``async for``
            loop is left by ``break`` (once the iterator is garbage), when
            the consuming task is cancelled, and on ``aclose()``;
            ``on_error``'s exception is raised from the loop after the items
            that preceded it.
            :func:`from_async_iterable` signals ``on_error(ValueError)`` for
            ``request(n <= 0)`` (rule 3.9) and ``on_error(TypeError)`` for a
            ``None`` item (rule 2.13).
Threading:  publishers deliver on their own threads; items reach the event
            loop in batches, with one ``call_soon_threadsafe`` per wake-up of
            a waiting consumer, never one per item. :func:`from_async_iterable`
            signals its subscribers on the event loop's thread; ``request`` and
            ``cancel`` may be called from any thread.
"""

from __future__ import annotations

import asyncio
import collections.abc
import threading
import weakref
from collections.abc import AsyncGenerator, AsyncIterable, AsyncIterator, Awaitable
from typing import Generic, TypeVar

from flowpy import flow
from flowpy._checks import none_error, require_positive_int, require_publisher, require_subscriber
from flowpy._demand import MAX_DEMAND, add_demand, check_request, replenish_limit
from flowpy._fork import at_fork_in_child
from flowpy._signals import reraise_fatal, signal_subscribe, signal_terminal
from flowpy.flow import default_buffer_size
from flowpy.interop._common import (
    Inbox,
    post_to_loop,
    run_on_loop,
)
from flowpy.interop.futures import collect

__all__ = ["PublisherAsyncIterator", "collect_async", "from_async_iterable", "to_async_iterator"]

T = TypeVar("T")


# Implementation overview
#
# to_async_iterator: an _Inbox subscriber receives signals on the publisher's
# threads and appends items to a deque; the consuming task, running the async
# generator _iterate, pops them without any lock. When the deque is empty the
# task first lets the loop run once, then parks on a future, which it
# publishes in _Inbox._waiter; a signal that finds a waiter claims it under
# the lock and resolves it with one call_soon_threadsafe, so a burst of items
# costs one wake-up. The task re-checks the deque after publishing its waiter,
# so no wake-up is lost (the producer appends before it looks for a waiter).
#
# from_async_iterable: each subscription runs one task on the loop (_pump)
# that awaits the iterator only while demand is positive. request() and
# cancel() move to the loop with run_on_loop, so the demand and the stop
# reason are touched by the loop's thread alone; a stop interrupts the task
# with Task.cancel(), and the task itself signals on_error, so every signal
# comes from the one task (rule 1.3).


# --- to_async_iterator --------------------------------------------------------


def _resolve(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


class _Inbox(Inbox[T]):
    """The subscriber behind :class:`PublisherAsyncIterator`; signals may come from any thread."""

    __slots__ = ("_lock", "_loop", "_waiter")

    def __init__(self, prefetch: int) -> None:
        super().__init__(prefetch)
        # --- Guarded by self._lock: the parked consumer ------------------
        self._lock = threading.Lock()
        self._waiter: asyncio.Future[None] | None = None  # the future the task awaits, if parked
        self._loop: asyncio.AbstractEventLoop | None = None  # the loop of the last waiter

    # Subscriber side (the publisher's threads)

    def on_next(self, item: T) -> None:
        if item is None:
            raise none_error("item", "2.13")
        self._items.append(item)
        if self._waiter is not None:  # the hot path: no call while the consumer is busy
            self._wake()

    def _wake(self) -> None:
        with self._lock:
            waiter, self._waiter = self._waiter, None
            loop = self._loop
        if waiter is not None and loop is not None:
            try:
                loop.call_soon_threadsafe(_resolve, waiter)
            except RuntimeError:  # the loop was closed under its consumer
                self.cancel()

    # Consumer side (the task that iterates)

    async def park(self) -> None:
        """Wait until a signal arrives; return at once if one already has."""
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        with self._lock:
            self._waiter = waiter
            self._loop = loop
        try:
            if not (self._items or self._done):  # re-check after publishing the waiter
                await waiter
        finally:
            with self._lock:
                if self._waiter is waiter:  # not claimed by a signal
                    self._waiter = None

    def cancel(self) -> None:
        """Cancel the subscription (rule 2.6) and drop buffered items.

        Does nothing after a terminal signal: the subscription is over (rule 2.4).
        """
        if self._done or self._cancelled:
            return
        super().cancel()
        self._items.clear()


async def _iterate(inbox: _Inbox[T], limit: int) -> AsyncGenerator[T, None]:
    """Yield the inbox's items, requesting ``limit`` more each time ``limit`` were taken."""
    items = inbox._items
    popleft = items.popleft
    taken = 0  # items taken since the last request; < limit
    try:
        while True:
            if items:
                item = popleft()
                taken += 1
                if taken == limit:
                    taken = 0
                    inbox.request(limit)
                yield item
            elif inbox._done:
                if items:  # appended just before _done was set
                    continue
                error, inbox._error = inbox._error, None
                if error is not None:
                    raise error
                return
            else:
                # Run the loop once before parking: under the GIL this lets the
                # publisher's threads deliver, and a batch on its way arrives
                # without the cost of a future and a cross-thread wake-up.
                await asyncio.sleep(0)
                if not items and not inbox._done:
                    await inbox.park()
    finally:  # break (once the generator is garbage), aclose(), task cancellation, or the end
        inbox.cancel()


class PublisherAsyncIterator(Generic[T]):
    """An async iterator over a publisher's items; see :func:`to_async_iterator`.

    ``async for`` runs on an async generator (what :meth:`__aiter__`
    returns), which costs about half as much per item as a Python
    ``__anext__`` method; :meth:`__anext__` and :meth:`aclose` act on the
    same generator, so the object behaves as one iterator.
    """

    __slots__ = ("_generator", "_inbox")

    def __init__(self, publisher: flow.Publisher[T], prefetch: int) -> None:
        inbox: _Inbox[T] = _Inbox(prefetch)
        self._inbox = inbox
        self._generator = _iterate(inbox, replenish_limit(prefetch))
        # A generator that never started has no finally to run: cancel when it is garbage.
        weakref.finalize(self._generator, inbox.cancel)
        publisher.subscribe(inbox)

    def __aiter__(self) -> AsyncIterator[T]:
        return self._generator

    def __anext__(self) -> Awaitable[T]:
        """Return an awaitable of the next item.

        Raises:
            StopAsyncIteration: after ``on_complete``, or once closed.
            BaseException: the exception of ``on_error``, once, after the
                items delivered before it.
        """
        return self._generator.__anext__()

    async def aclose(self) -> None:
        """Cancel the subscription and discard buffered items; idempotent."""
        self._inbox.cancel()
        await self._generator.aclose()


def to_async_iterator(
    publisher: flow.Publisher[T], *, prefetch: int = default_buffer_size()
) -> PublisherAsyncIterator[T]:
    """Subscribe to ``publisher`` now and return an async iterator over its items.

    The iterator requests ``prefetch`` items, then requests again each time
    the consumer has taken three quarters of them, so no more than
    ``prefetch`` items are ever requested-but-unconsumed: a slow consumer
    slows the publisher (a :class:`~flowpy.SubmissionPublisher`'s ``submit``
    blocks) instead of growing a buffer.

    Leaving the loop with ``break`` cancels the subscription as soon as the
    iterator is garbage (at once in CPython); use ``aclose()`` (or
    :func:`contextlib.aclosing`) to cancel deterministically. Cancelling the
    consuming task cancels the subscription too.

    Args:
        publisher: any Flow publisher; it may deliver on any thread.
        prefetch: the most items requested ahead of the consumer.

    Raises:
        TypeError: if ``publisher`` is not a publisher or ``prefetch`` is not an int.
        ValueError: if ``prefetch`` is not positive.
    """
    require_publisher(publisher)
    return PublisherAsyncIterator(publisher, require_positive_int(prefetch, "prefetch"))


async def collect_async(publisher: flow.Publisher[T]) -> list[T]:
    """Return the list of ``publisher``'s items once it completes.

    Cancelling the awaiting task cancels the subscription.

    Raises:
        BaseException: the exception of ``on_error``.
    """
    return await asyncio.wrap_future(collect(publisher))


# --- from_async_iterable ------------------------------------------------------

_background_lock = threading.Lock()
_background: asyncio.AbstractEventLoop | None = None  # guarded by _background_lock


@at_fork_in_child
def _forget_background_in_child() -> None:
    """After ``os.fork()``, in the child: the loop's thread is not there; the child's first use starts its own."""
    global _background, _background_lock
    _background = None  # not closed: its selector's descriptors are shared with the parent
    _background_lock = threading.Lock()


def _background_loop() -> asyncio.AbstractEventLoop:
    """Return the shared event loop on its own daemon thread, starting it on first use."""
    global _background
    with _background_lock:
        if _background is None:
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="flowpy-asyncio", daemon=True).start()
            _background = loop
        return _background


class _Stop(BaseException):
    """Unwinds a pump whose subscription was stopped while it ran subscriber code."""


class _SourceError(Exception):
    """Carries what the async iterable raised, apart from what the subscriber raised."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(error)
        self.error = error


# Why _PullSubscription keeps its own demand and cancel state instead of
# building on flowpy._core.pull.DemandSubscription: all of its state lives on
# the event loop's thread. request() and cancel() post one call each to the
# loop (inline when made on the loop's thread, where signals run and most
# subscribers request again), and the loop's FIFO orders them: no lock and no
# SerialDrain. Built on DemandSubscription, with the loop as the drain's
# executor and a drain pass that wakes the parked pump or cancels its task,
# every request went through the demand lock and SerialDrain's
# signal/submit/run bookkeeping, and the state was split in two: the demand
# under a lock, the pump's future, task and stop flag on the loop. With the
# pump reading the demand once per batch an unbounded request ran as fast as
# this code, but request(1) from on_next, the one-at-a-time consumer, ran
# about three times slower. The arithmetic itself is shared: check_request
# (rule 3.9) and add_demand (rule 3.17) from flowpy._demand.
class _PullSubscription(flow.Subscription, Generic[T]):
    """One subscriber pulling from one async iterator, on one event loop.

    Its state is confined to the loop's thread (see the comment above): the
    loop, not a lock, serialises ``request``, ``cancel`` and the pump.
    """

    __slots__ = ("_demand", "_error", "_iterable", "_loop", "_parked", "_stopping", "_subscriber", "_task")

    def __init__(
        self,
        subscriber: flow.Subscriber[T],
        iterable: AsyncIterable[T] | BaseException,
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        self._loop = loop
        # --- Touched only on the loop's thread ----------------------------
        # The source, or the error to signal instead of pulling; None once finished.
        self._iterable: AsyncIterable[T] | BaseException | None = iterable
        self._subscriber: flow.Subscriber[T] | None = subscriber  # None once finished (rule 3.13)
        self._demand = 0  # requested and not yet delivered; MAX_DEMAND is unbounded
        self._parked: asyncio.Future[None] | None = None  # awaited by the pump while demand is 0
        self._stopping = False  # set once by cancel() or a bad request(); never cleared
        self._error: BaseException | None = None  # the rule 3.9 error to signal, if any
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Start the pump on the loop, which then signals ``on_subscribe``."""
        try:
            run_on_loop(self._loop, self._start_task)
        except RuntimeError as exc:  # the loop is closed: say so through the subscriber
            subscriber = self._subscriber
            self._finish()
            if subscriber is not None and signal_subscribe(subscriber, self):
                signal_terminal(subscriber, exc)

    def _start_task(self) -> None:
        self._task = self._loop.create_task(self._pump())

    def request(self, n: int) -> None:
        """Add ``n`` to the demand on the loop; ``n <= 0`` stops with ``on_error`` (rule 3.9)."""
        error = check_request(n)
        if error is not None:
            self._on_loop(lambda: self._halt(error))
        else:
            self._on_loop(lambda: self._add_demand(n))

    def cancel(self) -> None:
        """Stop pulling and close the iterator; no signal follows (rules 3.5, 3.12)."""
        self._on_loop(lambda: self._halt(None))

    def _on_loop(self, fn: collections.abc.Callable[[], None]) -> None:
        post_to_loop(self._loop, fn)  # a closed loop took the pump with it: nothing to tell

    # On the loop's thread

    def _add_demand(self, n: int) -> None:
        if self._subscriber is None or self._stopping:
            return  # rule 3.6
        self._demand = add_demand(self._demand, n)
        parked = self._parked
        if parked is not None and not parked.done():
            parked.set_result(None)

    def _halt(self, error: BaseException | None) -> None:
        if self._subscriber is None or self._stopping:
            return  # rule 3.7
        self._stopping = True
        self._error = error
        task = self._task
        if task is not None and task is not asyncio.current_task(self._loop):
            task.cancel()  # interrupt the pump where it waits; it signals the error
        # else the pump is running subscriber code, and checks _stopping next

    def _check_stop(self) -> None:
        if self._stopping:
            raise _Stop

    async def _next(self, iterator: AsyncIterator[T]) -> T:
        """Await the next item once there is demand.

        Raises:
            StopAsyncIteration: when the iterator is exhausted.
            _SourceError: if the iterator failed or yielded ``None``.
        """
        while self._demand == 0:
            self._parked = self._loop.create_future()
            await self._parked
            self._parked = None
        try:
            item = await iterator.__anext__()
        except (StopAsyncIteration, asyncio.CancelledError):
            raise
        except BaseException as exc:
            raise _SourceError(exc) from exc
        if item is None:
            raise _SourceError(TypeError("async iterable must not yield None (rule 2.13)"))
        return item

    async def _pump(self) -> None:
        subscriber = self._subscriber
        if subscriber is None:
            return
        iterator: AsyncIterator[T] | None = None
        try:
            if not signal_subscribe(subscriber, self):  # rule 2.13: cancelled, and on_error sent
                self._finish()
                return
            self._check_stop()
            source = self._iterable
            try:
                if isinstance(source, BaseException):
                    raise source
                assert source is not None
                iterator = source.__aiter__()
            except BaseException as exc:
                raise _SourceError(exc) from exc
            while True:
                try:
                    item = await self._next(iterator)
                except StopAsyncIteration:
                    iterator = None
                    self._finish()
                    subscriber.on_complete()
                    return
                self._check_stop()
                if self._demand != MAX_DEMAND:
                    self._demand -= 1
                subscriber.on_next(item)
                self._check_stop()
        except (asyncio.CancelledError, _Stop):
            if self._subscriber is not None:
                error = self._error if self._stopping else asyncio.CancelledError("event loop shutting down")
                self._finish()
                if error is not None:
                    subscriber.on_error(error)
        except _SourceError as failure:
            self._finish()
            subscriber.on_error(failure.error)
        except BaseException as exc:  # the subscriber broke rule 2.13: cancelled, and reported
            self._finish()
            self._loop.call_exception_handler(
                {"message": f"{subscriber!r} raised from a signal (rule 2.13)", "exception": exc}
            )
            reraise_fatal(exc)
        finally:
            self._finish()
            if iterator is not None:
                await _close_quietly(iterator)

    def _finish(self) -> None:
        self._subscriber = None
        self._iterable = None


async def _close_quietly(iterator: AsyncIterator[object]) -> None:
    aclose = getattr(iterator, "aclose", None)
    if aclose is not None:
        try:
            await aclose()
        except BaseException:  # closing after a stop; nobody is left to tell
            return


class _AsyncIterablePublisher(flow.Publisher[T]):
    """The publisher returned by :func:`from_async_iterable`."""

    __slots__ = ("_iterable", "_lock", "_loop", "_taken")

    def __init__(self, iterable: AsyncIterable[T], loop: asyncio.AbstractEventLoop | None) -> None:
        self._iterable = iterable
        self._loop = loop
        self._lock = threading.Lock()
        self._taken = False  # guarded by _lock: a one-shot iterator has been handed out

    def subscribe(self, subscriber: flow.Subscriber[T]) -> None:
        """Start a pull for ``subscriber`` on the loop; it gets ``on_subscribe`` there.

        Raises:
            TypeError: if ``subscriber`` is ``None`` (rule 1.9).
        """
        require_subscriber(subscriber)
        source: AsyncIterable[T] | BaseException = self._iterable
        if isinstance(source, collections.abc.AsyncIterator):
            with self._lock:
                taken, self._taken = self._taken, True
            if taken:
                source = RuntimeError(
                    f"async iterator {self._iterable!r} can be subscribed to once; "
                    "pass an async iterable to serve several subscribers"
                )
        loop = self._loop if self._loop is not None else _background_loop()
        _PullSubscription(subscriber, source, loop).start()

    def __repr__(self) -> str:
        return f"<from_async_iterable {self._iterable!r}>"


def from_async_iterable(
    aiterable: AsyncIterable[T], *, loop: asyncio.AbstractEventLoop | None = None
) -> flow.Publisher[T]:
    """Return a publisher whose subscribers pull from ``aiterable`` on an event loop.

    Each subscriber gets its own ``aiterable.__aiter__()`` and a task on
    ``loop`` that awaits the next item only while the subscriber has
    outstanding demand, so the iterable runs exactly as fast as it is
    consumed. An async iterator (an async generator, for one) can be iterated
    only once: a second subscriber gets ``on_error(RuntimeError)``.
    Cancelling closes the iterator (``aclose()``).

    Signals run on the loop's thread; a subscriber that blocks there blocks
    the loop.

    Args:
        aiterable: an async iterable or async iterator; items must not be ``None``.
        loop: the event loop to pull on; by default a shared loop running on
            its own daemon thread, started on first use.

    Raises:
        TypeError: if ``aiterable`` is not an async iterable, or ``loop`` is
            not an event loop.
    """
    if not isinstance(aiterable, collections.abc.AsyncIterable):
        raise TypeError(f"aiterable must be an async iterable, got {aiterable!r}")
    if loop is not None and not isinstance(loop, asyncio.AbstractEventLoop):
        raise TypeError(f"loop must be an asyncio event loop, got {loop!r}")
    return _AsyncIterablePublisher(aiterable, loop)
