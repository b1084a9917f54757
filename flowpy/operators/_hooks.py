"""Side effects at each signal: ``do_on_next``, ``do_on_error``, ``do_on_complete``,
``do_on_subscribe``, ``do_on_request``, ``do_on_cancel`` and ``do_finally``.

Each calls a function of yours and passes the signal on unchanged, on the
thread the signal came on, with demand passed through and nothing buffered. ``do_on_next`` is a
step of the fused stage (:mod:`flowpy.operators._fused`); the others watch
the subscription's life, so each is a thin relay with no queue.

What a raising function does follows RxJava's ``doOnEach``/``doOnLifecycle``
/``doFinally``: ``do_on_next`` and ``do_on_complete`` end the stream with
the exception; ``do_on_error`` signals the exception with the original
error as its ``__context__`` (RxJava's ``CompositeException``);
``do_on_subscribe`` cancels the upstream and fails the subscriber;
``do_on_request``, ``do_on_cancel`` and ``do_finally`` report it on the
``flowpy`` logger (nobody else could receive it) and the request or cancel
still goes up. A ``BaseException`` that is not an ``Exception`` is re-raised
after that (docs/java-mapping.md).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar, cast

from flowpy._checks import none_error, require_callable, require_publisher
from flowpy._signals import call_subscription, chain_fatal, report, reraise_fatal
from flowpy.flow import Publisher, Subscriber, Subscription
from flowpy.operators._base import Relay, StagePublisher, reject_subscriber, signal_deep
from flowpy.operators._fused import Step, fuse

__all__ = [
    "do_finally",
    "do_on_cancel",
    "do_on_complete",
    "do_on_error",
    "do_on_next",
    "do_on_request",
    "do_on_subscribe",
]

T = TypeVar("T")

Action = Callable[[], object]


class _DoOnNext(Step):
    __slots__ = ("_fn",)

    def __init__(self, fn: Callable[[Any], object]) -> None:
        self._fn = fn

    def code(self, index: int) -> list[str]:
        return [f"fn{index}(item)"]

    def arguments(self, index: int) -> dict[str, object]:
        return {f"fn{index}": self._fn}


class _Peek(Relay):
    """Calls one lifecycle function of the user's, then passes the signal on.

    Only one of the functions is set per stage. The end of the stream (a
    terminal signal passed on, or a cancel) is claimed once, under a lock,
    so ``do_finally`` runs once and ``do_on_cancel`` never after the end.
    """

    __slots__ = ("_lock", "_on_cancel", "_on_complete", "_on_error", "_on_finally", "_on_request", "_on_subscribe")

    def __init__(self, downstream: Subscriber[Any], **hooks: Any) -> None:
        super().__init__(downstream)
        self._lock = threading.Lock()  # guards self.done: the end is claimed once
        self._on_subscribe: Callable[[Subscription], object] | None = hooks.get("on_subscribe")
        self._on_error: Callable[[BaseException], object] | None = hooks.get("on_error")
        self._on_complete: Action | None = hooks.get("on_complete")
        self._on_request: Callable[[int], object] | None = hooks.get("on_request")
        self._on_cancel: Action | None = hooks.get("on_cancel")
        self._on_finally: Action | None = hooks.get("on_finally")

    def _end(self) -> bool:
        with self._lock:
            if self.done:
                return False
            self.done = True
            return True

    def on_subscribe(self, subscription: Subscription) -> None:
        """Call ``do_on_subscribe``'s function with the upstream subscription, then hand this stage down.

        Raises:
            TypeError: if ``subscription`` is ``None`` (rule 2.13).
        """
        if not self._upstream.accept(subscription):
            return
        hook = self._on_subscribe
        if hook is not None:
            try:
                hook(subscription)
            except BaseException as error:
                self._end()
                call_subscription(subscription, None)
                reject_subscriber(self._downstream, error)
                reraise_fatal(error)
                return
        self._hand_off()

    def on_next(self, item: Any) -> None:
        """Pass ``item`` on.

        Raises:
            TypeError: if ``item`` is ``None`` (rule 2.13).
        """
        if item is None:
            raise none_error("item", "2.13")
        if not self.done:
            self._downstream.on_next(item)

    def _pass_error(self, error: BaseException) -> None:
        """Call ``do_on_error``'s function, pass the error on, then ``do_finally``'s."""
        if not self._end():
            return
        failure: BaseException | None = None
        if self._on_error is not None:
            try:
                self._on_error(error)
            except BaseException as raised:
                failure = raised
                error = chain_fatal(error, raised)
        try:
            signal_deep(partial(self._downstream.on_error, error))
        finally:
            self._finally()
        if failure is not None:
            reraise_fatal(failure)

    def _pass_complete(self) -> None:
        """Call ``do_on_complete``'s function and complete (or fail with what it raised), then ``do_finally``'s."""
        if not self._end():
            return
        failure: BaseException | None = None
        if self._on_complete is not None:
            try:
                self._on_complete()
            except BaseException as raised:
                failure = raised
        try:
            if failure is None:
                signal_deep(self._downstream.on_complete)
            else:
                signal_deep(partial(self._downstream.on_error, failure))
        finally:
            self._finally()
        if failure is not None:
            reraise_fatal(failure)

    def request(self, n: int) -> None:
        """Call ``do_on_request``'s function with ``n``, then pass ``n`` up (an invalid one too, rule 3.9)."""
        failure = self._call("do_on_request", self._on_request, n)
        upstream = self._upstream_for(n)
        if upstream is not None:
            upstream.request(n)
        if failure is not None:
            reraise_fatal(failure)

    def cancel(self) -> None:
        """Call ``do_on_cancel``'s function, cancel upstream, then ``do_finally``'s; once, and not after the end."""
        if not self._end():
            return
        failure = self._call("do_on_cancel", self._on_cancel)
        upstream = self.upstream
        try:
            if upstream is not None:
                signal_deep(upstream.cancel)
        finally:
            self._finally()
        if failure is not None:
            reraise_fatal(failure)

    def _finally(self) -> None:
        failure = self._call("do_finally", self._on_finally)
        if failure is not None:
            reraise_fatal(failure)

    @staticmethod
    def _call(name: str, hook: Callable[..., object] | None, *args: object) -> BaseException | None:
        """Call ``hook(*args)`` if it is set; report what it raised and return it."""
        if hook is None:
            return None
        try:
            hook(*args)
        except BaseException as error:
            report(error, f"{name}'s function {hook!r} raised")
            return error
        return None


def _peek(name: str, source: Publisher[T], fn: object, hook: str) -> Publisher[T]:
    require_publisher(source, "source")
    require_callable(fn, "fn")
    return StagePublisher(name, lambda subscriber: source.subscribe(_Peek(subscriber, **{hook: fn})))


def do_on_next(source: Publisher[T], fn: Callable[[T], object]) -> Publisher[T]:
    """Call ``fn(item)`` for each item, then pass it on::

        source:  --1--2--|
        do_on_next(print)          (prints 1, then 2)
        result:  --1--2--|

    Fused with its synchronous neighbours. Demand: passed through. If ``fn``
    raises, the source is cancelled and the stream fails with the exception.

    Raises:
        TypeError: if ``source`` is not a publisher or ``fn`` is not callable.
    """
    require_publisher(source, "source")
    require_callable(fn, "fn")
    return cast("Publisher[T]", fuse(source, _DoOnNext(fn)))


def do_on_error(source: Publisher[T], fn: Callable[[BaseException], object]) -> Publisher[T]:
    """Call ``fn(error)`` when the source fails, then pass the error on::

        source:  --1--#
        do_on_error(log)           (log(error), then on_error)
        result:  --1--#

    Demand: passed through. If ``fn`` raises, its exception is signalled
    instead, with the source's error as its ``__context__``.

    Raises:
        TypeError: if ``source`` is not a publisher or ``fn`` is not callable.
    """
    return _peek("do_on_error", source, fn, "on_error")


def do_on_complete(source: Publisher[T], fn: Callable[[], object]) -> Publisher[T]:
    """Call ``fn()`` when the source completes, then complete::

        source:  --1--|
        do_on_complete(log)        (log(), then on_complete)
        result:  --1--|

    Demand: passed through. If ``fn`` raises, the stream fails with its
    exception instead of completing.

    Raises:
        TypeError: if ``source`` is not a publisher or ``fn`` is not callable.
    """
    return _peek("do_on_complete", source, fn, "on_complete")


def do_on_subscribe(source: Publisher[T], fn: Callable[[Subscription], object]) -> Publisher[T]:
    """Call ``fn(subscription)`` with the upstream subscription before the subscriber gets its own.

    Demand: passed through. If ``fn`` raises, the upstream subscription is
    cancelled and the subscriber gets ``on_subscribe`` with a dead
    subscription, then ``on_error`` with the exception.

    Raises:
        TypeError: if ``source`` is not a publisher or ``fn`` is not callable.
    """
    return _peek("do_on_subscribe", source, fn, "on_subscribe")


def do_on_request(source: Publisher[T], fn: Callable[[int], object]) -> Publisher[T]:
    """Call ``fn(n)`` with each ``request(n)`` of the subscriber, before it goes upstream.

    Demand: passed through, an invalid ``n`` too (the source signals rule
    3.9). If ``fn`` raises, the exception is reported and the request still
    goes up.

    Raises:
        TypeError: if ``source`` is not a publisher or ``fn`` is not callable.
    """
    return _peek("do_on_request", source, fn, "on_request")


def do_on_cancel(source: Publisher[T], fn: Callable[[], object]) -> Publisher[T]:
    """Call ``fn()`` when the subscriber cancels, before the cancel goes upstream.

    Once, and not after the stream ended: a cancel after the terminal
    signal does not call it (it cancels nothing). If ``fn`` raises, the
    exception is reported and the upstream still cancelled.

    Raises:
        TypeError: if ``source`` is not a publisher or ``fn`` is not callable.
    """
    return _peek("do_on_cancel", source, fn, "on_cancel")


def do_finally(source: Publisher[T], fn: Callable[[], object]) -> Publisher[T]:
    """Call ``fn()`` once the stream is over: after the terminal signal was passed on, or after a cancel.

    ::

        source:  --1--2--|
        do_finally(close)
        result:  --1--2--|  close()

    Exactly once per subscription, whichever comes first (a cancel racing the
    terminal signal included). If ``fn`` raises, the exception is reported.

    Raises:
        TypeError: if ``source`` is not a publisher or ``fn`` is not callable.
    """
    return _peek("do_finally", source, fn, "on_finally")
