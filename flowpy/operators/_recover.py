"""Error recovery: ``retry``, ``retry_when``, ``on_error_resume`` and ``on_error_return``.

Each is a :class:`~flowpy.operators._sequence.SequenceStage`: when the
current attempt fails, it subscribes again (to the source, to a fallback, to
one last item) with the subscriber's unmet demand, or passes the error on.
Items already delivered are not delivered again by the operator: a source
subscribed again starts afresh, as it would for a new subscriber.

Resubscription is trampolined, so a synchronous source that fails at once
can be retried a million times in constant stack. An invalid ``request``
from the subscriber ends the stream (rule 3.9) and is never retried.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from flowpy._checks import require_callable, require_callable_or_none, require_non_negative_int, require_publisher
from flowpy.errors import ClosedPublisherError, MissingBackpressureError
from flowpy.executors import direct_executor
from flowpy.flow import Publisher, Subscriber, default_buffer_size
from flowpy.operators._base import StagePublisher
from flowpy.operators._sequence import Companion, SequenceStage
from flowpy.sources import just
from flowpy.submission import SubmissionPublisher

__all__ = ["on_error_resume", "on_error_return", "retry", "retry_when"]

T = TypeVar("T")
R = TypeVar("R")


def _check_times(times: object) -> None:
    if times is not None:
        require_non_negative_int(times, "times")


# --- retry ---------------------------------------------------------------------


class _Retry(SequenceStage):
    __slots__ = ("_predicate", "_remaining", "_source")

    def __init__(
        self,
        downstream: Subscriber[Any],
        source: Publisher[Any],
        times: int | None,
        predicate: Callable[[BaseException], object] | None,
    ) -> None:
        super().__init__(downstream)
        self._source = source
        self._remaining = times  # resubscriptions left; None: no limit. Touched by one attempt's thread at a time
        self._predicate = predicate
        self._pending = source

    def _ended(self, error: BaseException | None, produced: int) -> None:
        remaining = self._remaining
        if error is None or remaining == 0:
            self._terminate(error)
            return
        if self._predicate is not None:
            ok, again = self._guard(self._predicate, error, cause=error)
            if not ok:
                return
            if not again:
                self._terminate(error)
                return
        if remaining is not None:
            self._remaining = remaining - 1
        self._pending = self._source
        self._resume()


def retry(
    source: Publisher[T],
    times: int | None = None,
    *,
    predicate: Callable[[BaseException], object] | None = None,
) -> Publisher[T]:
    """Subscribe to ``source`` again when it fails, at most ``times`` times (``None``: no limit)::

        source:  --1--2--#            (fails the first time, then succeeds)
        retry(1)
        result:  --1--2----1--2--3--|

    ``retry(0)`` never resubscribes; ``retry(n)`` subscribes at most
    ``n + 1`` times in all, as RxJava's ``retry(n)``. With ``predicate``,
    an error is retried only if ``predicate(error)`` is true (and times
    remain); otherwise it is passed on. A ``predicate`` that raises ends the
    stream with its exception, the source's error as its ``__context__``.

    Demand: the subscriber's requests go to the current subscription; what
    it did not deliver before failing is requested from the next one at
    once. Nothing is buffered. Items delivered before a failure are not
    taken back: a cold source starts again from its first item.

    Raises:
        TypeError: if ``source`` is not a publisher, ``times`` is not an
            int or ``None``, or ``predicate`` is not callable.
        ValueError: if ``times`` is negative.
    """
    require_publisher(source, "source")
    _check_times(times)
    require_callable_or_none(predicate, "predicate")
    return StagePublisher("retry", lambda subscriber: _Retry(subscriber, source, times, predicate).start())


# --- retry_when ---------------------------------------------------------------------


class _RetryWhen(SequenceStage):
    """Fails go to the handler's publisher through ``errors``; its items resubscribe."""

    __slots__ = ("_errors", "_source", "_waiting", "_when", "_when_publisher")

    def __init__(self, downstream: Subscriber[Any], source: Publisher[Any], handler: Callable[..., Any]) -> None:
        super().__init__(downstream)
        self._source = source
        self._pending = source
        self._waiting = False  # guarded by self._lock: a failure was handed to the handler, no item came yet
        # A hot publisher of the failures, for the handler's pipeline. Delivered
        # inline (direct executor); at most default_buffer_size() failures
        # wait for that pipeline's demand.
        self._errors: SubmissionPublisher[BaseException] = SubmissionPublisher(
            executor=direct_executor, max_buffer_capacity=default_buffer_size()
        )
        self._when = Companion(self._again, self._terminate, lambda: self._terminate(None))
        self._when_publisher = handler

    def _started(self) -> None:
        # Imported here: flowable sits above the operators in the module layering.
        from flowpy.flowable import Flowable

        ok, when = self._guard(self._when_publisher, Flowable(self._errors))
        if not ok:
            return
        try:
            require_publisher(when, "retry_when handler result")
        except TypeError as error:
            self._terminate(error)
            return
        when.subscribe(self._when)

    def _ended(self, error: BaseException | None, produced: int) -> None:
        if error is None:
            self._terminate(None)
            return
        with self._lock:
            self._waiting = True
        self._when.request(1)
        try:
            lag = self._errors.offer(error)
        except ClosedPublisherError:
            return  # the stream was cancelled meanwhile (_release closed it)
        if lag < 0:
            self._terminate(
                MissingBackpressureError(
                    f"retry_when's handler pipeline did not request the failures: {default_buffer_size()} are waiting"
                )
            )

    def _again(self, item: object) -> None:
        """An item of the handler's publisher: subscribe again, if a failure is waiting for it."""
        with self._lock:
            waiting, self._waiting = self._waiting, False
        if waiting:
            self._pending = self._source
            self._resume()

    def _release(self) -> None:
        self._when.cancel()
        self._errors.close()


def retry_when(source: Publisher[T], handler: Callable[[Any], Publisher[Any]]) -> Publisher[T]:
    """Let ``handler`` decide when to subscribe to ``source`` again after a failure::

        source:  --1--#     (fails twice, then completes)
        retry_when(lambda errors: errors.take(2))
        result:  --1-----1-----1--|

    ``handler`` is called once per subscription with a
    :class:`~flowpy.flowable.Flowable` of the source's failures and returns a
    publisher: each item it emits after a failure subscribes to the source
    again; its completion completes the stream, its error fails it (for a
    delay between attempts, pass the errors through a time operator). As
    RxJava's ``retryWhen``, an item that comes while the source is
    subscribed is ignored. A failure is offered to the handler's pipeline
    once that pipeline has subscribed to the errors (otherwise it is
    dropped: a handler that ignores them only counts attempts); at most
    256 (``default_buffer_size()``) failures may wait for its demand, then
    the stream fails with :class:`~flowpy.errors.MissingBackpressureError`.

    Demand: as :func:`retry`; the handler's publisher is asked for one item
    per failure.

    Raises:
        TypeError: if ``source`` is not a publisher or ``handler`` is not callable.
    """
    require_publisher(source, "source")
    require_callable(handler, "handler")
    return StagePublisher("retry_when", lambda subscriber: _RetryWhen(subscriber, source, handler).start())


# --- on_error_resume / on_error_return -------------------------------------------


class _Resume(SequenceStage):
    """Goes on with ``fallback(error)`` after the source's failure; the fallback's failure is passed on."""

    __slots__ = ("_fallback", "_resumed")

    def __init__(
        self,
        downstream: Subscriber[Any],
        source: Publisher[Any],
        fallback: Callable[[BaseException], Publisher[Any]],
    ) -> None:
        super().__init__(downstream)
        self._pending = source
        self._fallback = fallback
        self._resumed = False  # the fallback is subscribed; its end is the stream's

    def _ended(self, error: BaseException | None, produced: int) -> None:
        if error is None or self._resumed:
            self._terminate(error)
            return
        self._resumed = True
        ok, publisher = self._guard(self._fallback, error, cause=error)
        if ok:
            self._pending = publisher
            self._resume()


def on_error_resume(source: Publisher[T], fn: Callable[[BaseException], Publisher[T]]) -> Publisher[T]:
    """When ``source`` fails, go on with the publisher ``fn(error)`` returns::

        source:    --1--2--#
        fallback:           --8--9--|
        on_error_resume(lambda e: fallback)
        result:    --1--2----8--9--|

    RxJava's ``onErrorResumeNext``. Only the source's failure is handled; the
    fallback's failure is passed on. If ``fn`` raises, or returns something
    that is not a publisher (``TypeError``), the stream fails with that
    exception, the source's error as its ``__context__``.

    Demand: what the subscriber requested and the source did not deliver is
    requested from the fallback as soon as it subscribes. Nothing is buffered.

    Raises:
        TypeError: if ``source`` is not a publisher or ``fn`` is not callable.
    """
    require_publisher(source, "source")
    require_callable(fn, "fn")

    def fallback(error: BaseException) -> Publisher[T]:
        publisher = fn(error)
        require_publisher(publisher, "on_error_resume function result")
        return publisher

    return StagePublisher("on_error_resume", lambda subscriber: _Resume(subscriber, source, fallback).start())


def on_error_return(source: Publisher[T], fn: Callable[[BaseException], T]) -> Publisher[T]:
    """When ``source`` fails, emit ``fn(error)`` as one last item and complete::

        source:  --1--2--#
        on_error_return(lambda e: -1)
        result:  --1--2--(-1)|

    RxJava's ``onErrorReturn``. If ``fn`` raises, or returns ``None``
    (``TypeError``, rule 2.13), the stream fails with that exception, the
    source's error as its ``__context__``.

    Demand: the last item waits for the subscriber's demand (it is held, one
    item at most, until requested); everything else is passed through.

    Raises:
        TypeError: if ``source`` is not a publisher or ``fn`` is not callable.
    """
    require_publisher(source, "source")
    require_callable(fn, "fn")

    def last_item(error: BaseException) -> Publisher[T]:
        item = fn(error)
        if item is None:
            raise TypeError(f"on_error_return function must not return None (rule 2.13), got None from {fn!r}")
        return just(item)

    return StagePublisher("on_error_return", lambda subscriber: _Resume(subscriber, source, last_item).start())
