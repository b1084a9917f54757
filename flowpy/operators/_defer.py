"""Sources made per subscription: ``defer`` and ``using``.

Both call a function of yours inside ``subscribe``, on the subscribing
thread, so each subscriber gets its own publisher (and, for ``using``, its
own resource). A function that raises fails that subscriber: it gets
``on_subscribe`` with a dead subscription, then ``on_error`` (rule 1.9);
``subscribe`` itself returns normally.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import partial
from typing import Any, Generic, TypeVar

from flowpy._checks import none_error, require_callable, require_publisher
from flowpy._signals import chain_fatal, report, reraise_fatal
from flowpy.flow import Publisher, Subscriber
from flowpy.operators._base import Relay, StagePublisher, reject_subscriber, signal_deep

__all__ = ["defer", "using"]

T = TypeVar("T")
S = TypeVar("S")


def defer(factory: Callable[[], Publisher[T]]) -> Publisher[T]:
    """Call ``factory()`` for each subscriber and subscribe it to the publisher it returns::

        defer(lambda: just(time.time()))     (each subscriber sees its own time)

    RxJava's ``defer``: nothing is made until someone subscribes. If
    ``factory`` raises, or returns something that is not a publisher
    (``TypeError``), the subscriber gets ``on_subscribe`` then ``on_error``
    with that exception. Demand: that of the publisher made.

    Raises:
        TypeError: if ``factory`` is not callable.
    """
    require_callable(factory, "factory")

    def connect(subscriber: Subscriber[T]) -> None:
        try:
            publisher = factory()
            require_publisher(publisher, "defer factory result")
        except BaseException as error:
            reject_subscriber(subscriber, error)
            reraise_fatal(error)
            return
        publisher.subscribe(subscriber)

    return StagePublisher("defer", connect)


class _Using(Relay, Generic[S]):
    """Passes the stream on and disposes of the resource once, before the terminal signal or at cancel."""

    __slots__ = ("_disposer", "_lock", "_resource")

    def __init__(self, downstream: Subscriber[Any], resource: S, disposer: Callable[[S], object]) -> None:
        super().__init__(downstream)
        self._resource = resource
        self._disposer = disposer
        self._lock = threading.Lock()  # guards self.done: the end is claimed once (terminal or cancel)

    def _end(self) -> bool:
        with self._lock:
            if self.done:
                return False
            self.done = True
            return True

    def _dispose(self) -> BaseException | None:
        """Call the disposer; return what it raised."""
        try:
            self._disposer(self._resource)
        except BaseException as error:
            return error
        finally:
            self._resource = None  # type: ignore[assignment]  # released with the stage
        return None

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
        """Dispose of the resource, then pass ``error`` on (the disposer's failure chained to it)."""
        if not self._end():
            return
        failure = self._dispose()
        signal_deep(partial(self._downstream.on_error, error if failure is None else chain_fatal(error, failure)))
        if failure is not None:
            reraise_fatal(failure)

    def _pass_complete(self) -> None:
        """Dispose of the resource, then complete (or fail with what the disposer raised)."""
        if not self._end():
            return
        failure = self._dispose()
        if failure is None:
            signal_deep(self._downstream.on_complete)
        else:
            signal_deep(partial(self._downstream.on_error, failure))
            reraise_fatal(failure)

    def request(self, n: int) -> None:
        """Pass ``n`` up (an invalid ``n`` too, rule 3.9)."""
        upstream = self._upstream_for(n)
        if upstream is not None:
            upstream.request(n)

    def cancel(self) -> None:
        """Dispose of the resource, then cancel upstream; the disposer's failure is reported."""
        if not self._end():
            return
        failure = self._dispose()
        upstream = self.upstream
        if upstream is not None:
            signal_deep(upstream.cancel)
        if failure is not None:
            report(failure, f"using's disposer {self._disposer!r} raised at cancel")
            reraise_fatal(failure)


def using(
    resource_factory: Callable[[], S],
    flowable_factory: Callable[[S], Publisher[T]],
    disposer: Callable[[S], object],
) -> Publisher[T]:
    """Make a resource per subscriber, stream from it, and dispose of it when the stream is over::

        using(lambda: open(path), lambda f: from_iterable(f), lambda f: f.close())

    For each subscriber: ``resource = resource_factory()``, then the
    publisher ``flowable_factory(resource)``, whose signals are passed on;
    ``disposer(resource)`` is called exactly once, as RxJava's eager
    ``using``: before the terminal signal is passed on, or before the
    cancel goes upstream. A raising ``resource_factory`` fails the
    subscriber at once; a raising ``flowable_factory`` (or one returning
    something that is not a publisher) disposes of the resource first. If
    the disposer raises at the completion, the stream fails with that
    exception instead; at an error, it is signalled with the error as its
    ``__context__``; at a cancel, it is reported.

    Demand: that of the publisher made. Nothing is buffered.

    Raises:
        TypeError: if an argument is not callable.
    """
    require_callable(resource_factory, "resource_factory")
    require_callable(flowable_factory, "flowable_factory")
    require_callable(disposer, "disposer")

    def connect(subscriber: Subscriber[T]) -> None:
        try:
            resource = resource_factory()
        except BaseException as error:
            reject_subscriber(subscriber, error)
            reraise_fatal(error)
            return
        try:
            publisher = flowable_factory(resource)
            require_publisher(publisher, "using flowable_factory result")
        except BaseException as error:
            disposal: BaseException | None = None
            try:
                disposer(resource)
            except BaseException as raised:
                disposal = raised
            reject_subscriber(subscriber, error if disposal is None else chain_fatal(error, disposal))
            if disposal is not None:
                reraise_fatal(disposal)
            reraise_fatal(error)
            return
        publisher.subscribe(_Using(subscriber, resource, disposer))

    return StagePublisher("using", connect)
