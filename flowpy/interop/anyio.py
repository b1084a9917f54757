"""anyio interop: flowpy streams into and out of anyio memory object streams, on asyncio or trio.

anyio's memory object streams are the channels of structured-concurrency
code, on either of anyio's backends (asyncio and trio). The bridges here keep
backpressure in both directions:

======================= ======================================= ===========================================
function                takes                                   returns
======================= ======================================= ===========================================
:func:`to_receive_stream` a flowpy publisher and a task group     a ``MemoryObjectReceiveStream``
:func:`to_send_stream`    a ``MemoryObjectSendStream``, a group   a flowpy subscriber that sends into it
:func:`from_receive_stream` a ``MemoryObjectReceiveStream``, a group a flowpy publisher that receives from it
======================= ======================================= ===========================================

Into anyio, a task in the group sends the items; the flowpy side requests
only ``prefetch`` items ahead of what that task has sent, and a full stream
blocks the task in ``send()``, so the publisher sees no demand (a
:class:`~flowpy.SubmissionPublisher`'s ``submit`` blocks): backpressure by not
requesting, never by blocking the event loop's thread. Out of anyio, a task
in the group awaits ``receive()`` only while the subscriber has outstanding
demand, so a full stream blocks its senders.

Protocol:   a publisher's ``on_error`` is raised by the sending task into the
            task group, which cancels the group's other tasks (the receiver
            among them) and raises it from the ``async with`` (anyio wraps it
            in an exception group); ``on_complete`` closes the send stream,
            so the receiver sees ``EndOfStream``, after every item. Closing
            the receive stream cancels the subscription; cancelling the
            subscription of :func:`from_receive_stream` closes its receive
            stream. ``request(n <= 0)`` signals ``on_error(ValueError)``
            (rule 3.9) and a ``None`` item ``on_error(TypeError)`` (rule 2.13).
Threading:  call the three functions on the event loop's thread, from async
            code. Flowpy signals, ``request`` and ``cancel`` may come from any
            thread: they reach the loop through its own non-blocking,
            thread-safe entry (``run_sync_soon`` of the loop's
            :func:`anyio.lowlevel.current_token`), once per wake-up of a waiting task,
            never once per item, and never wait for the loop.
            :func:`from_receive_stream` signals its subscriber on the loop's
            thread.

.. versionadded:: 0.1
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

from flowpy._extras import missing_extra

try:
    import anyio
    import anyio.lowlevel
    from anyio.abc import TaskGroup
    from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
except ImportError as _error:
    raise missing_extra(__name__, "anyio", "anyio") from _error

from flowpy import flow
from flowpy._checks import require, require_positive_int, require_publisher, require_subscriber
from flowpy._context import ConfinedContext
from flowpy._demand import MAX_DEMAND, add_demand, check_request, replenish_limit
from flowpy.flow import default_buffer_size
from flowpy.interop._common import Inbox, SingleSubscriber

__all__ = ["from_receive_stream", "to_receive_stream", "to_send_stream"]

T = TypeVar("T")

# Implementation overview
#
# Every bridge has one task in the caller's task group, and state that only
# that task and the loop's thread touch, except for a deque (thread-safe for
# append/popleft) and a parked flag guarded by a lock. A flowpy thread that
# must wake the task claims the parked event under the lock and sets it
# through _Loop.call (inline on the loop's thread, else the loop's own
# thread-safe entry), so a burst of items costs one wake-up; the task
# re-checks its condition after publishing the event, so no wake-up is lost.
#
# Flowpy threads reach the loop through the backend's run_sync_soon (what
# anyio's BlockingPortal uses inside), which schedules a call and returns;
# anyio.from_thread.run_sync is not used: it waits for the loop, and a flowpy
# thread waiting for the loop deadlocks against a loop thread that waits in
# a synchronous subscriber for that flowpy thread (a submit into a full
# processor whose consumer is the waiting thread).


class _Loop:
    """The running event loop's thread and token; made on that thread."""

    __slots__ = ("_thread", "_token")

    def __init__(self) -> None:
        self._thread = threading.get_ident()
        self._token = anyio.lowlevel.current_token()

    def call(self, fn: Callable[[], object]) -> bool:
        """Run ``fn`` on the loop's thread: now if this is that thread, else soon, without waiting.

        Returns ``False`` if the loop has finished (``fn`` will never run).
        """
        if threading.get_ident() == self._thread:
            fn()
            return True
        token = self._token
        try:
            token.backend_class.run_sync_soon(fn, (), token.native_token)
        except RuntimeError:  # anyio.RunFinishedError, or a loop closed under its token
            return False
        return True


class _Parking:
    """A task's wait for a condition that other threads make true; see the overview."""

    __slots__ = ("_event", "_lock", "_loop")

    def __init__(self, loop: _Loop) -> None:
        self._loop = loop
        self._lock = threading.Lock()
        self._event: anyio.Event | None = None  # guarded by _lock: the event the task waits on, if parked

    async def wait(self, ready: Callable[[], bool]) -> None:
        """Return once ``ready()`` is true; call :meth:`wake` after making it true."""
        while not ready():
            event = anyio.Event()
            with self._lock:
                self._event = event
            try:
                if not ready():  # re-check after publishing the event
                    await event.wait()
            finally:
                with self._lock:
                    if self._event is event:  # not claimed by wake()
                        self._event = None

    def wake(self) -> bool:
        """Wake the task if it waits; from any thread. Returns ``False`` if the loop has finished."""
        if self._event is None:  # racy read: a task parking now re-checks its condition after publishing
            return True
        with self._lock:
            event, self._event = self._event, None
        if event is None:
            return True
        return self._loop.call(event.set)


# --- into anyio ----------------------------------------------------------------


class _StreamSender(Inbox[T]):
    """The subscriber of :func:`to_send_stream`; signals may come from any thread."""

    __slots__ = ("_parking", "_stream")

    def __init__(self, stream: MemoryObjectSendStream[T], prefetch: int, loop: _Loop) -> None:
        super().__init__(prefetch)
        self._stream = stream
        self._parking = _Parking(loop)

    def _wake(self) -> None:
        if not self._parking.wake():  # the loop has finished: nobody will send again
            self.cancel()

    def _ready(self) -> bool:
        return bool(self._items) or self._done

    async def run(self, limit: int, task_group: TaskGroup) -> None:
        """Send the items, requesting ``limit`` more each time ``limit`` were sent; close the stream at the end.

        Raises:
            BaseException: the publisher's ``on_error`` exception, after the
                items before it, once ``task_group`` is cancelled.
        """
        items = self._items
        stream = self._stream
        sent = 0  # items sent since the last request; < limit
        try:
            with stream:
                while True:
                    await self._parking.wait(self._ready)
                    if items:
                        try:
                            await stream.send(items.popleft())
                        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                            return  # the receivers are gone (or the stream was closed here): cancel
                        sent += 1
                        if sent == limit:
                            sent = 0
                            self.request(limit)
                    else:  # done: every append came before _done was set
                        error, self._error = self._error, None
                        if error is not None:
                            # Cancel the group before the stream closes, so that a
                            # waiting receiver is cancelled rather than ended.
                            task_group.cancel_scope.cancel()
                            raise error
                        return
        finally:
            if not self._done:
                self.cancel()
            items.clear()


def to_send_stream(
    send_stream: MemoryObjectSendStream[T], task_group: TaskGroup, *, prefetch: int = default_buffer_size()
) -> flow.Subscriber[T]:
    """Return a flowpy subscriber whose items a task in ``task_group`` sends into ``send_stream``.

    The subscriber requests ``prefetch`` items, then three quarters of
    ``prefetch`` each time as many were sent, so at most ``prefetch`` items
    wait outside the stream; while the stream is full the task waits in
    ``send()`` and nothing more is requested. ``on_complete`` closes
    ``send_stream`` (this clone); ``on_error`` cancels ``task_group``, closes
    the stream and raises the error into the group: items still in the
    stream's buffer are not received by the cancelled receivers. If the receivers close their end, the subscription
    is cancelled when the next item is sent; cancelling ``task_group``
    cancels it too.

    Call it on the event loop's thread; the subscriber may be subscribed,
    and signalled, from any thread.

    Args:
        send_stream: where the items go; owned by the subscriber from now on.
        task_group: the group that runs the sending task.
        prefetch: the most items requested and not yet sent.

    Raises:
        TypeError: if an argument is ``None`` or ``prefetch`` is not an int.
        ValueError: if ``prefetch`` is not positive.
        anyio.NoEventLoopError: (a RuntimeError) if not called from async code on the loop's thread.
    """
    require(send_stream, "send_stream")
    require(task_group, "task_group")
    prefetch = require_positive_int(prefetch, "prefetch")
    sender: _StreamSender[T] = _StreamSender(send_stream, prefetch, _Loop())
    task_group.start_soon(sender.run, replenish_limit(prefetch), task_group, name=f"flowpy sender to {send_stream!r}")
    return sender


def to_receive_stream(
    publisher: flow.Publisher[T], task_group: TaskGroup, *, prefetch: int = default_buffer_size()
) -> MemoryObjectReceiveStream[T]:
    """Subscribe to ``publisher`` now and return an anyio receive stream of its items.

    The stream has no buffer of its own: the :func:`to_send_stream`
    subscriber that a task in ``task_group`` runs hands each item to a
    receiver, so at most ``prefetch`` items are requested and not yet
    received, and a slow receiver slows the publisher. (A buffer would save
    task switches, but items in it would be lost when ``on_error`` cancels
    the receiver.) ``on_complete`` ends
    the stream (``EndOfStream``, which ends an ``async for``); ``on_error``
    raises its exception into ``task_group``, which cancels the receiver.
    Closing the receive stream cancels the subscription: at once if the task
    waits in ``send()`` (the stream is full), else when the next item
    arrives; cancelling ``task_group`` cancels it too.

    Call it on the event loop's thread, from async code.

    Args:
        publisher: any Flow publisher; it may deliver on any thread.
        task_group: the group that runs the sending task.
        prefetch: the most items requested ahead of the receiver.

    Raises:
        TypeError: if ``publisher`` is not a publisher, ``task_group`` is ``None`` or ``prefetch`` is not an int.
        ValueError: if ``prefetch`` is not positive.
        anyio.NoEventLoopError: (a RuntimeError) if not called from async code on the loop's thread.
    """
    require_publisher(publisher)
    streams: tuple[MemoryObjectSendStream[T], MemoryObjectReceiveStream[T]] = anyio.create_memory_object_stream(0)
    send_stream, receive_stream = streams
    try:
        subscriber: flow.Subscriber[T] = to_send_stream(send_stream, task_group, prefetch=prefetch)
    except BaseException:
        send_stream.close()
        receive_stream.close()
        raise
    publisher.subscribe(subscriber)
    return receive_stream


# --- out of anyio --------------------------------------------------------------


class _StreamPull(flow.Subscription, Generic[T]):
    """One subscriber receiving from one receive stream, in one task on the loop."""

    __slots__ = (
        "_context",
        "_demand",
        "_error",
        "_loop",
        "_parking",
        "_scope",
        "_stopping",
        "_stream",
        "_subscriber",
    )

    def __init__(self, subscriber: flow.Subscriber[T], stream: MemoryObjectReceiveStream[T], loop: _Loop) -> None:
        self._loop = loop
        # The subscriber's context at subscribe() (flowpy/_context.py): every signal
        # runs in it. Not the task's: anyio keeps its own state in the task's context.
        self._context = ConfinedContext()
        self._parking = _Parking(loop)
        # --- Touched only on the loop's thread ----------------------------
        self._stream = stream
        self._subscriber: flow.Subscriber[T] | None = subscriber  # None once finished (rule 3.13)
        self._demand = 0  # requested and not yet delivered; MAX_DEMAND is unbounded
        self._stopping = False  # set once by cancel() or a bad request(); never cleared
        self._error: BaseException | None = None  # the rule 3.9 error to signal, if any
        self._scope: anyio.CancelScope | None = None  # the task's scope while it receives

    def request(self, n: int) -> None:
        """Add ``n`` to the demand on the loop; ``n <= 0`` stops with ``on_error`` (rule 3.9)."""
        error = check_request(n)
        if error is not None:
            self._loop.call(lambda: self._halt(error))
        else:
            self._loop.call(lambda: self._add_demand(n))

    def cancel(self) -> None:
        """Stop receiving and close the receive stream; no signal follows (rules 3.5, 3.12)."""
        self._loop.call(lambda: self._halt(None))

    # On the loop's thread

    def _add_demand(self, n: int) -> None:
        if self._subscriber is None or self._stopping:
            return  # rule 3.6
        self._demand = add_demand(self._demand, n)
        self._parking.wake()

    def _halt(self, error: BaseException | None) -> None:
        if self._subscriber is None or self._stopping:
            return  # rule 3.7
        self._stopping = True
        self._error = error
        self._stream.close()  # a receive() in progress raises ClosedResourceError
        self._parking.wake()
        if self._scope is not None:
            self._scope.cancel()

    def _ready(self) -> bool:
        return self._demand > 0 or self._stopping

    async def run(self) -> None:
        """Signal ``on_subscribe``, then receive while there is demand; every signal comes from here (rule 1.3)."""
        subscriber = self._subscriber
        if subscriber is None:
            return
        stream = self._stream
        signal = self._context.run
        try:
            signal(subscriber.on_subscribe, self)
            while not self._stopping:
                await self._parking.wait(self._ready)
                if self._stopping:
                    break
                with anyio.CancelScope() as scope:
                    self._scope = scope
                    try:
                        item = await stream.receive()
                    except anyio.EndOfStream:
                        self._finish()
                        signal(subscriber.on_complete)
                        return
                    except Exception as exc:
                        if self._stopping:
                            break
                        self._finish()
                        signal(subscriber.on_error, exc)
                        return
                    finally:
                        self._scope = None
                if scope.cancelled_caught or self._stopping:
                    break
                if item is None:
                    self._finish()
                    signal(subscriber.on_error, TypeError("receive stream must not yield None (rule 2.13)"))
                    return
                if self._demand != MAX_DEMAND:
                    self._demand -= 1
                signal(subscriber.on_next, item)
            error = self._error
            self._finish()
            if error is not None:
                signal(subscriber.on_error, error)
        except anyio.get_cancelled_exc_class():
            if self._subscriber is not None:  # the task group was cancelled under a live subscription
                self._finish()
                signal(subscriber.on_error, RuntimeError("from_receive_stream: its task group was cancelled"))
            raise
        finally:
            self._finish()

    def _finish(self) -> None:
        self._subscriber = None
        self._stream.close()


class _ReceiveStreamPublisher(flow.Publisher[T]):
    """The publisher returned by :func:`from_receive_stream`."""

    __slots__ = ("_loop", "_single", "_stream", "_task_group")

    def __init__(self, stream: MemoryObjectReceiveStream[T], task_group: TaskGroup, loop: _Loop) -> None:
        self._stream = stream
        self._task_group = task_group
        self._loop = loop
        self._single = SingleSubscriber()  # the stream is handed to one subscriber

    def subscribe(self, subscriber: flow.Subscriber[T]) -> None:
        """Start receiving for ``subscriber`` in the task group; it gets ``on_subscribe`` on the loop's thread.

        A receive stream serves one subscriber: a second one gets
        ``on_subscribe`` then ``on_error(RuntimeError)``, as does a subscriber
        arriving after the loop has finished.

        Raises:
            TypeError: if ``subscriber`` is ``None`` (rule 1.9).
        """
        require_subscriber(subscriber)
        if not self._single.claim():
            _reject(subscriber, RuntimeError("from_receive_stream serves one subscriber; clone() the stream for more"))
            return
        pull: _StreamPull[T] = _StreamPull(subscriber, self._stream, self._loop)
        if not self._loop.call(lambda: self._task_group.start_soon(pull.run, name="flowpy receiver")):
            _reject(subscriber, RuntimeError("from_receive_stream: its event loop has finished"))

    def __repr__(self) -> str:
        return f"<from_receive_stream {self._stream!r}>"


class _NoSubscription(flow.Subscription):
    """The subscription of a rejected subscriber: nothing to request or cancel."""

    __slots__ = ()

    def request(self, n: int) -> None:
        return None

    def cancel(self) -> None:
        return None


def _reject(subscriber: flow.Subscriber[T], error: BaseException) -> None:
    subscriber.on_subscribe(_NoSubscription())
    subscriber.on_error(error)


def from_receive_stream(receive_stream: MemoryObjectReceiveStream[T], task_group: TaskGroup) -> flow.Publisher[T]:
    """Return a publisher whose subscriber receives from ``receive_stream`` in a task of ``task_group``.

    The task awaits ``receive()`` only while the subscriber has outstanding
    demand, so a slow subscriber leaves the items in the stream and a full
    stream blocks its senders. ``EndOfStream`` becomes ``on_complete``; an
    exception from ``receive()`` (``ClosedResourceError`` if the stream was
    closed by other code) becomes ``on_error``; cancelling the subscription
    closes ``receive_stream``. If ``task_group`` is cancelled under a live
    subscription, the subscriber gets ``on_error(RuntimeError)``. An exception
    raised by the subscriber (rule 2.13) ends the stream and propagates into
    ``task_group``.

    Call it on the event loop's thread; subscribe from any thread. Signals
    run on the loop's thread: a subscriber that blocks there blocks the loop.

    Args:
        receive_stream: the stream to receive from; owned by the publisher
            from now on. It serves one subscriber (``clone()`` it for more).
        task_group: the group that runs the receiving task.

    Raises:
        TypeError: if an argument is ``None``.
        anyio.NoEventLoopError: (a RuntimeError) if not called from async code on the loop's thread.
    """
    require(receive_stream, "receive_stream")
    require(task_group, "task_group")
    return _ReceiveStreamPublisher(receive_stream, task_group, _Loop())
