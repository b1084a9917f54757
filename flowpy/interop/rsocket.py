"""rsocket-py interop: flowpy publishers and subscribers on either end of an RSocket stream.

rsocket-py speaks its own ``reactivestreams`` package (installed with the
``rsocket`` distribution): synchronous ``Publisher``, ``Subscriber`` and
``Subscription`` classes driven from an asyncio event loop. The adapters here
join them to flowpy, in both directions, so that the ``request(n)`` of a
flowpy subscriber becomes an RSocket ``REQUEST_N`` frame and a remote
``REQUEST_N`` becomes demand on a flowpy publisher: backpressure crosses the
network.

=========================== ============================== ==============================
function                    takes                          returns
=========================== ============================== ==============================
:func:`to_rsocket_publisher` a flowpy publisher             an rsocket ``Publisher``
:func:`from_rsocket_publisher` an rsocket ``Publisher``     a flowpy publisher
:func:`to_rsocket_subscriber` a flowpy subscriber           an rsocket ``Subscriber``
:func:`from_rsocket_subscriber` an rsocket ``Subscriber``   a flowpy subscriber
=========================== ============================== ==============================

Subscriptions are adapted on the way through ``on_subscribe``. The flowpy
side of every adapter implements both :mod:`flowpy.flow` and
:mod:`flowpy.reactivestreams`, so :mod:`flowpy.adapters` returns it as is.

Protocol:   rsocket's ``on_next(value, is_complete=True)`` becomes
            ``on_next(value)`` then ``on_complete()``. Demand sent to rsocket
            is clamped to :data:`MAX_REQUEST_N` (``2**31 - 1``), which RSocket
            treats as unbounded. What rsocket does not check is checked here:
            ``request(n <= 0)`` ends the stream with ``on_error(ValueError)``
            (rule 3.9) and ``None`` items raise :class:`TypeError` (rule 2.13).
            A remote that sends more than was requested gets the stream
            cancelled and the subscriber gets
            :class:`~flowpy.errors.MissingBackpressureError` (rule 1.1).
Threading:  rsocket objects are touched only on rsocket's event loop thread.
            Signals from flowpy publishers, which may come from any thread,
            reach it in batches, one ``call_soon_threadsafe`` per batch;
            ``request`` and ``cancel`` from any thread are marshalled the same
            way. Flowpy subscribers fed by rsocket are called on the loop's
            thread and must not block it.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import Callable
from typing import Any, Final, Generic, TypeVar

from flowpy._extras import missing_extra

try:
    from reactivestreams.publisher import Publisher as RSocketPublisher
    from reactivestreams.subscriber import Subscriber as RSocketSubscriber
    from reactivestreams.subscription import Subscription as RSocketSubscription
except ImportError as _error:
    raise missing_extra(__name__, "rsocket", "rsocket") from _error

from flowpy import flow
from flowpy import reactivestreams as frs
from flowpy._checks import none_error, require, require_publisher, require_subscriber
from flowpy._context import ConfinedContext
from flowpy._demand import add_demand, check_request
from flowpy._signals import reraise_fatal, signal_subscribe, signal_terminal
from flowpy.errors import MissingBackpressureError
from flowpy.interop._common import SingleSubscriber, post_to_loop, run_on_loop

__all__ = [
    "MAX_REQUEST_N",
    "from_rsocket_publisher",
    "from_rsocket_subscriber",
    "to_rsocket_publisher",
    "to_rsocket_subscriber",
]

T = TypeVar("T")

MAX_REQUEST_N: Final = 2**31 - 1
"""The largest demand an RSocket ``REQUEST_N`` frame carries; it means unbounded."""

# Implementation overview
#
# _Outbound is a flowpy subscriber feeding an rsocket subscriber. Its signals
# arrive on the publisher's threads and go into an outbox; the first one after
# a drain schedules _drain on the loop (call_soon_threadsafe), which empties
# the outbox into the rsocket subscriber. _drain clears the "scheduled" flag
# before it pops, and producers set it after they append, so an item is never
# left behind. Requests from rsocket go straight to the flowpy subscription,
# or wait in _pending until it arrives.
#
# _Inbound is an rsocket subscriber feeding a flowpy subscriber. Everything it
# holds is touched on the loop's thread only: rsocket calls it there, and the
# flowpy subscription's request/cancel move there with run_on_loop. It tracks
# how much demand the remote end holds (_outstanding) so that the total never
# exceeds MAX_REQUEST_N, after which the stream is unbounded.


def _resolve_loop(loop: asyncio.AbstractEventLoop | None) -> asyncio.AbstractEventLoop:
    if loop is None:
        try:
            return asyncio.get_running_loop()
        except RuntimeError:
            raise RuntimeError(
                "loop must be given when no event loop is running in this thread; pass the loop rsocket runs on"
            ) from None
    if not isinstance(loop, asyncio.AbstractEventLoop):
        raise TypeError(f"loop must be an asyncio event loop, got {loop!r}")
    return loop


def _as_flow(subscriber: flow.Subscriber[T] | frs.Subscriber[T]) -> flow.Subscriber[T]:
    """The same object, typed for the helpers of :mod:`flowpy._signals` (the methods are the same)."""
    return subscriber  # type: ignore[return-value]


def _report(loop: asyncio.AbstractEventLoop, who: object, exc: BaseException) -> None:
    """Tell the loop's exception handler that rsocket code raised where it must not (rules 2.13, 3.15)."""
    loop.call_exception_handler({"message": f"{who!r} raised where it must return normally", "exception": exc})


# --- flowpy publisher -> rsocket subscriber -------------------------------------------


class _Failure:
    """An ``on_error`` waiting in the outbox."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error


_SUBSCRIBE: Final[Any] = object()  # outbox marker: call the rsocket subscriber's on_subscribe
_COMPLETE: Final[Any] = object()  # outbox marker: on_complete


class _OutboundSubscription(RSocketSubscription):  # type: ignore[misc]
    """What the rsocket subscriber holds: forwards to :class:`_Outbound`."""

    __slots__ = ("_outbound",)

    def __init__(self, outbound: _Outbound[Any]) -> None:
        self._outbound = outbound

    def request(self, n: int) -> None:
        self._outbound.request(n)

    def cancel(self) -> None:
        self._outbound.cancel()


class _Outbound(flow.Subscriber[T], frs.Subscriber[T]):
    """A flowpy subscriber that feeds an rsocket subscriber on its event loop."""

    __slots__ = (
        "_cancelled",
        "_done",
        "_lock",
        "_loop",
        "_outbox",
        "_pending",
        "_rsocket_subscriber",
        "_scheduled",
        "_subscribed",
        "_upstream",
    )

    def __init__(self, subscriber: Any, loop: asyncio.AbstractEventLoop) -> None:
        self._rsocket_subscriber = subscriber
        self._loop = loop
        # Signals for the rsocket subscriber: items, _SUBSCRIBE, _COMPLETE or a
        # _Failure. Appended on any thread; popped only by _drain on the loop.
        self._outbox: deque[Any] = deque()
        self._scheduled = False  # a _drain is scheduled and has not started popping
        self._subscribed = False  # the rsocket subscriber got on_subscribe, or it is in the outbox
        self._done = False  # loop thread only: a terminal signal was passed on
        self._cancelled = False  # set once by cancel(); never cleared
        # --- Guarded by self._lock: the hand-over of early requests ----------
        self._lock = threading.Lock()
        # The flowpy subscription, once it arrived.
        self._upstream: flow.Subscription | frs.Subscription | None = None
        self._pending: int | BaseException = 0  # demand (or a rule 3.9 error) from before it arrived

    # --- rsocket side ----------------------------------------------------------

    def open_now(self) -> None:
        """Give the rsocket subscriber its subscription synchronously; call on the loop's thread."""
        self._subscribed = True
        self._rsocket_subscriber.on_subscribe(_OutboundSubscription(self))

    def request(self, n: int) -> None:
        """Pass rsocket's demand to the flowpy subscription; ``n <= 0`` ends with ``on_error`` (rule 3.9)."""
        error = check_request(n)
        with self._lock:
            upstream = self._upstream
            if upstream is None:
                if not isinstance(self._pending, BaseException):
                    self._pending = error if error is not None else add_demand(self._pending, n)
                return
        if error is not None:
            self._refuse(upstream, error)
        else:
            upstream.request(n)

    def cancel(self) -> None:
        self._cancelled = True
        self._outbox.clear()
        with self._lock:
            upstream = self._upstream
        if upstream is not None:
            upstream.cancel()

    def _refuse(self, upstream: flow.Subscription | frs.Subscription, error: BaseException) -> None:
        upstream.cancel()
        self._post(_Failure(error))

    # --- flowpy side (the publisher's threads) -----------------------------------

    def on_subscribe(self, subscription: flow.Subscription | frs.Subscription) -> None:
        require(subscription, "subscription", "2.13")
        with self._lock:
            if self._upstream is not None:
                duplicate = True
            else:
                duplicate = False
                self._upstream = subscription
                pending, self._pending = self._pending, 0
        if duplicate:
            subscription.cancel()  # rule 2.5
            return
        if not self._subscribed:
            self._subscribed = True
            self._post(_SUBSCRIBE)
        if self._cancelled:
            subscription.cancel()
        elif isinstance(pending, BaseException):
            self._refuse(subscription, pending)
        elif pending:
            subscription.request(pending)

    def on_next(self, item: T) -> None:
        if item is None:
            raise none_error("item", "2.13")
        self._outbox.append(item)
        if not self._scheduled:
            self._schedule()

    def on_error(self, error: BaseException) -> None:
        require(error, "error", "2.13")
        self._post(_Failure(error))

    def on_complete(self) -> None:
        self._post(_COMPLETE)

    def _post(self, signal: Any) -> None:
        self._outbox.append(signal)
        if not self._scheduled:
            self._schedule()

    def _schedule(self) -> None:
        self._scheduled = True
        try:
            self._loop.call_soon_threadsafe(self._drain)
        except RuntimeError:  # rsocket's loop is closed: nobody is listening
            self.cancel()

    # --- the loop's thread ------------------------------------------------------------

    def _drain(self) -> None:
        self._scheduled = False  # before popping: a later append schedules again
        outbox = self._outbox
        subscriber = self._rsocket_subscriber
        try:
            while outbox:
                signal = outbox.popleft()
                if self._cancelled or self._done:
                    outbox.clear()
                    return
                if signal is _SUBSCRIBE:
                    subscriber.on_subscribe(_OutboundSubscription(self))
                elif signal is _COMPLETE:
                    self._done = True
                    subscriber.on_complete()
                elif isinstance(signal, _Failure):
                    self._done = True
                    subscriber.on_error(signal.error)
                else:
                    subscriber.on_next(signal)
        except BaseException as exc:  # the rsocket subscriber failed: stop the stream
            self._done = True
            self.cancel()
            _report(self._loop, subscriber, exc)
            reraise_fatal(exc)


class _FlowpyPublisherAsRSocket(RSocketPublisher):  # type: ignore[misc]
    """The rsocket publisher returned by :func:`to_rsocket_publisher`."""

    __slots__ = ("_loop", "_publisher")

    def __init__(
        self, publisher: flow.Publisher[Any] | frs.Publisher[Any], loop: asyncio.AbstractEventLoop | None
    ) -> None:
        self._publisher = publisher
        self._loop = loop

    def subscribe(self, subscriber: Any) -> None:
        """Subscribe an rsocket subscriber; on the loop, it gets ``on_subscribe`` before this returns.

        Raises:
            TypeError: if ``subscriber`` is ``None``.
            RuntimeError: if no loop was given and none is running here.
        """
        require_subscriber(subscriber)
        loop = _resolve_loop(self._loop)
        outbound: _Outbound[Any] = _Outbound(subscriber, loop)
        if asyncio._get_running_loop() is loop:
            outbound.open_now()  # rsocket reads subscriber.subscription right after subscribe()
        self._publisher.subscribe(outbound)

    def __repr__(self) -> str:
        return f"<to_rsocket_publisher {self._publisher!r}>"


def to_rsocket_publisher(
    publisher: flow.Publisher[T] | frs.Publisher[T], *, loop: asyncio.AbstractEventLoop | None = None
) -> Any:
    """Return an rsocket ``Publisher`` that serves ``publisher``'s items.

    Return it from a ``RequestHandler.request_stream`` or ``request_channel``
    handler, or pass it to ``RSocket.request_channel``. Each rsocket
    subscriber subscribes to ``publisher`` through a flowpy subscriber that
    forwards rsocket's ``request(n)`` (the remote ``REQUEST_N``) as demand and
    hands the items to rsocket on its loop.

    Args:
        publisher: a flowpy Flow or Reactive Streams publisher.
        loop: rsocket's event loop; by default the loop running when rsocket
            subscribes.

    Raises:
        TypeError: if ``publisher`` is not a publisher or ``loop`` is not an event loop.
    """
    require_publisher(publisher)
    if loop is not None and not isinstance(loop, asyncio.AbstractEventLoop):
        raise TypeError(f"loop must be an asyncio event loop, got {loop!r}")
    return _FlowpyPublisherAsRSocket(publisher, loop)


def from_rsocket_subscriber(subscriber: Any, *, loop: asyncio.AbstractEventLoop | None = None) -> flow.Subscriber[Any]:
    """Return a flowpy subscriber that feeds the rsocket ``subscriber`` on ``loop``.

    The rsocket subscriber gets ``on_subscribe`` (on the loop) once the
    flowpy subscription arrives; its ``request(n)`` and ``cancel()`` act on
    that subscription.

    Args:
        subscriber: an rsocket ``reactivestreams`` subscriber.
        loop: rsocket's event loop; by default the one running here.

    Raises:
        TypeError: if ``subscriber`` is ``None`` or ``loop`` is not an event loop.
        RuntimeError: if no loop is given and none is running here.
    """
    require(subscriber, "subscriber")
    return _Outbound(subscriber, _resolve_loop(loop))


# --- rsocket publisher -> flowpy subscriber ---------------------------------------------


class _InboundSubscription(flow.Subscription, frs.Subscription):
    """What the flowpy subscriber holds: moves its calls onto the loop."""

    __slots__ = ("_inbound",)

    def __init__(self, inbound: _Inbound[Any]) -> None:
        self._inbound = inbound

    def request(self, n: int) -> None:
        """Add ``n`` to the demand; ``n <= 0`` ends with ``on_error`` (rules 3.9, 3.17)."""
        inbound = self._inbound
        error = check_request(n)
        if error is None:
            inbound.on_loop(lambda: inbound.add_demand(n))
        else:
            inbound.on_loop(lambda: inbound.halt(error))

    def cancel(self) -> None:
        """Cancel the rsocket stream (a ``CANCEL`` frame for a remote one); idempotent."""
        inbound = self._inbound
        inbound.on_loop(lambda: inbound.halt(None))


class _Inbound(RSocketSubscriber, Generic[T]):  # type: ignore[misc]
    """An rsocket subscriber that feeds a flowpy subscriber; lives on the loop's thread."""

    __slots__ = (
        "_announced",
        "_connect",
        "_loop",
        "_outstanding",
        "_pending",
        "_rsocket",
        "_subscriber",
        "context",
        "subscription",
    )

    def __init__(
        self,
        subscriber: flow.Subscriber[T] | frs.Subscriber[T],
        loop: asyncio.AbstractEventLoop,
        connect: Callable[[_Inbound[T]], None] | None,
    ) -> None:
        self._loop = loop
        # The subscriber's context at subscribe() (flowpy/_context.py): every signal runs in it.
        self.context = ConfinedContext()
        # --- Touched only on the loop's thread --------------------------------
        self._subscriber: flow.Subscriber[T] | frs.Subscriber[T] | None = subscriber  # None once ended
        # Subscribes to the rsocket publisher on the first request; None after,
        # or when rsocket subscribed us itself.
        self._connect = connect
        # The flowpy subscriber has its subscription: from the start when we
        # connect on request, else once rsocket's on_subscribe arrives.
        self._announced = connect is not None
        self._rsocket: Any = None  # the rsocket subscription, once on_subscribe arrived
        self._pending = 0  # demand not yet sent to rsocket (saturating)
        self._outstanding = 0  # demand rsocket holds: sent minus received; MAX_REQUEST_N is unbounded
        self.subscription: Any = None  # rsocket's DefaultSubscriber convention; the same as _rsocket

    def on_loop(self, fn: Callable[[], None]) -> None:
        post_to_loop(self._loop, fn)  # a closed loop took the stream with it: nothing to tell

    # --- rsocket calls these, on the loop --------------------------------------------

    def on_subscribe(self, subscription: Any) -> None:
        require(subscription, "subscription", "2.13")
        if self._rsocket is not None:
            subscription.cancel()  # rule 2.5
            return
        self._rsocket = self.subscription = subscription
        subscriber = self._subscriber
        if subscriber is None:  # cancelled before rsocket got here
            subscription.cancel()
        elif not self._announced:
            self._announced = True
            # rule 2.13: cancels, then on_error; both APIs have the same methods
            self.context.run(signal_subscribe, _as_flow(subscriber), _InboundSubscription(self))
        else:
            self._flush()

    def on_next(self, value: T, is_complete: bool = False) -> None:
        if value is None:
            raise none_error("value", "2.13")
        subscriber = self._subscriber
        if subscriber is None:
            return  # cancelled; late items are dropped (rule 2.8)
        if self._outstanding < MAX_REQUEST_N:
            if self._outstanding == 0:
                self.halt(
                    MissingBackpressureError(
                        "rsocket publisher must not send more than was requested (rule 1.1), got an extra item"
                    )
                )
                return
            self._outstanding -= 1
        self.context.run(subscriber.on_next, value)
        if is_complete:
            self.on_complete()

    def on_error(self, exception: BaseException) -> None:
        require(exception, "exception", "2.13")
        subscriber = self._end()
        if subscriber is not None:
            self.context.run(subscriber.on_error, exception)

    def on_complete(self) -> None:
        subscriber = self._end()
        if subscriber is not None:
            self.context.run(subscriber.on_complete)

    # --- the flowpy subscription's calls, moved onto the loop ---------------------------

    def add_demand(self, n: int) -> None:
        if self._subscriber is None:
            return  # rule 3.6
        self._pending = add_demand(self._pending, n)
        connect, self._connect = self._connect, None
        try:
            if connect is not None:
                connect(self)
            elif self._rsocket is not None:
                self._flush()
        except Exception as exc:  # rsocket refused: the stream ends with its error
            self.halt(exc)

    def halt(self, error: BaseException | None) -> None:
        subscriber = self._end()
        if subscriber is None:
            return  # rule 3.7
        self._connect = None
        if self._rsocket is not None:
            try:
                self._rsocket.cancel()
            except Exception as exc:  # cancel must not fail the caller (rule 3.15)
                _report(self._loop, self._rsocket, exc)
        if error is not None:
            self.context.run(subscriber.on_error, error)

    def take_demand(self) -> int:
        """Move pending demand to rsocket's account, clamped to MAX_REQUEST_N in total."""
        send = min(self._pending, MAX_REQUEST_N - self._outstanding)
        self._pending = 0  # what exceeds the clamp is covered by unbounded demand
        self._outstanding += send
        return send

    def _flush(self) -> None:
        send = self.take_demand()
        if send:
            self._rsocket.request(send)

    def _end(self) -> flow.Subscriber[T] | frs.Subscriber[T] | None:
        subscriber, self._subscriber = self._subscriber, None
        return subscriber


def _connect_on_first_request(publisher: Any) -> Callable[[_Inbound[Any]], None]:
    """Subscribe ``inbound`` to the rsocket ``publisher``, passing the first demand with the request.

    An rsocket requester (``rsocket.request_stream(...)``) sends its initial
    ``REQUEST_N`` in the request frame and unbounded by default, so it is set
    from the subscriber's first ``request(n)`` before subscribing.
    """

    def connect(inbound: _Inbound[Any]) -> None:
        initial_request_n = getattr(publisher, "initial_request_n", None)
        if callable(initial_request_n):
            initial_request_n(inbound.take_demand())
        publisher.subscribe(inbound)

    return connect


class _RSocketPublisherAsFlowpy(flow.Publisher[T], frs.Publisher[T]):
    """The flowpy publisher returned by :func:`from_rsocket_publisher`."""

    __slots__ = ("_loop", "_publisher", "_single")

    def __init__(self, publisher: Any, loop: asyncio.AbstractEventLoop) -> None:
        self._publisher = publisher
        self._loop = loop
        self._single = SingleSubscriber()  # an rsocket stream serves one subscriber

    def subscribe(self, subscriber: flow.Subscriber[T] | frs.Subscriber[T]) -> None:
        """Signal ``on_subscribe`` on the loop; the rsocket stream starts with the first request.

        An rsocket publisher serves one subscriber: a second one gets
        ``on_subscribe`` then ``on_error(RuntimeError)``.

        Raises:
            TypeError: if ``subscriber`` is ``None`` (rule 1.9).
        """
        require_subscriber(subscriber)
        taken = not self._single.claim()
        inbound: _Inbound[T] = _Inbound(subscriber, self._loop, _connect_on_first_request(self._publisher))
        subscription = _InboundSubscription(inbound)

        target = _as_flow(subscriber)  # both APIs have the same methods

        def start() -> None:
            if not inbound.context.run(signal_subscribe, target, subscription):  # rule 2.13: cancelled, on_error sent
                return
            if taken:
                inbound.halt(
                    RuntimeError(f"rsocket publisher {self._publisher!r} serves one subscriber; request a new stream")
                )

        try:
            run_on_loop(self._loop, start)
        except RuntimeError as exc:  # the loop is closed: say so through the subscriber
            if inbound.context.run(signal_subscribe, target, subscription):
                inbound.context.run(signal_terminal, target, exc)

    def __repr__(self) -> str:
        return f"<from_rsocket_publisher {self._publisher!r}>"


def from_rsocket_publisher(
    publisher: Any, *, loop: asyncio.AbstractEventLoop | None = None
) -> _RSocketPublisherAsFlowpy[Any]:
    """Return a flowpy publisher of an rsocket ``publisher``'s items, with real backpressure.

    Typically ``publisher`` is ``rsocket.request_stream(payload)`` or
    ``rsocket.request_channel(...)``: the stream is requested when the
    subscriber first calls ``request(n)``, with ``n`` (clamped to
    :data:`MAX_REQUEST_N`) as its initial demand, and each later
    ``request(n)`` becomes a ``REQUEST_N`` frame. ``cancel()`` sends
    ``CANCEL``. The subscriber is called on the loop's thread.

    Args:
        publisher: an rsocket ``reactivestreams`` publisher, serving one subscriber.
        loop: rsocket's event loop; by default the one running here.

    Raises:
        TypeError: if ``publisher`` is not a publisher or ``loop`` is not an event loop.
        RuntimeError: if no loop is given and none is running here.
    """
    require_publisher(publisher)
    return _RSocketPublisherAsFlowpy(publisher, _resolve_loop(loop))


def to_rsocket_subscriber(
    subscriber: flow.Subscriber[T] | frs.Subscriber[T], *, loop: asyncio.AbstractEventLoop | None = None
) -> Any:
    """Return an rsocket ``Subscriber`` that feeds the flowpy ``subscriber``.

    Return it from a ``RequestHandler.request_channel`` handler to consume
    the requester's stream: the flowpy subscriber gets ``on_subscribe`` when
    rsocket subscribes, and its ``request(n)`` becomes a ``REQUEST_N`` frame.
    It is called on the loop's thread.

    Args:
        subscriber: a flowpy Flow or Reactive Streams subscriber.
        loop: rsocket's event loop; by default the one running here.

    Raises:
        TypeError: if ``subscriber`` is ``None`` or ``loop`` is not an event loop.
        RuntimeError: if no loop is given and none is running here.
    """
    require(subscriber, "subscriber")
    return _Inbound(subscriber, _resolve_loop(loop), None)
