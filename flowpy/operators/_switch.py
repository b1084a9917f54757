"""``switch_map``: follow the publisher of the latest source item only.

Each source item is mapped to a publisher, which replaces (cancels) the one
before; the subscriber's demand is served from the current publisher's
bounded queue.

Threading:  items go downstream from a drain loop that runs on whichever
            thread made progress possible (an inner's ``on_next``, a
            ``request``), one thread at a time (rule 1.3).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

from flowpy._checks import none_error, require, require_callable, require_positive_int, require_publisher
from flowpy._core.upstream import UpstreamSlot
from flowpy._demand import MAX_DEMAND
from flowpy._signals import reraise_fatal, signal_subscribe
from flowpy.flow import Publisher, Subscriber, Subscription
from flowpy.operators._base import DemandDrain, StagePublisher
from flowpy.operators._queue import QueueSubscriber

__all__ = ["switch_map"]

T = TypeVar("T")
R = TypeVar("R")


# Implementation overview
#
# The outer (source) subscription requests everything: every item replaces
# the inner before it, so nothing piles up. The current inner is in
# _Switch._inner (guarded by the lock): the source's thread replaces it,
# the drain clears it when it is exhausted, and each checks, under the lock,
# that it is still the one it means. A replaced inner is stopped (its
# subscription cancelled) from the source's thread without touching its
# queue, which the drain may be reading; its later signals are ignored: its
# items (it is done), its completion (the drain only looks at the current
# inner) and its error (see _Inner.on_error).


class _Inner(QueueSubscriber):
    """An inner publisher's queue; its error counts only while it is the current inner."""

    __slots__ = ()

    parent: _Switch[Any]

    def on_error(self, error: BaseException) -> None:
        """Fail the stream, unless this inner was replaced.

        Raises:
            TypeError: if ``error`` is ``None`` (rule 2.13).
        """
        require(error, "error", "2.13")
        if not self.done and self.parent.current is self:
            self.parent.fail(error)  # before done, as QueueSubscriber.on_error
        self.done = True


class _Switch(DemandDrain, Generic[T]):
    """The downstream's subscription: delivers from the current inner's queue."""

    __slots__ = ("_downstream", "_fn", "_inner", "_prefetch", "_terminated", "outer", "outer_done")

    def __init__(self, downstream: Subscriber[T], fn: Callable[[Any], Publisher[T]], prefetch: int) -> None:
        super().__init__()
        self._downstream = downstream
        self._fn = fn
        self._prefetch = prefetch
        self.outer = UpstreamSlot()  # the source's subscription (rule 2.5)
        self.outer_done = False  # no inner will be added any more; set after a failure is recorded
        self._terminated = False  # drain only
        self._inner: _Inner | None = None  # guarded by self._lock; see the overview

    @property
    def current(self) -> _Inner | None:
        """The inner publisher's subscriber being followed (racy read)."""
        return self._inner

    def switch(self, item: Any) -> None:
        """Map ``item`` and follow the publisher it maps to, instead of the current one; source's thread."""
        try:
            publisher = self._fn(item)
            require_publisher(publisher, "switch_map function result")
        except BaseException as error:
            self.fail(error)  # before outer_done, as for the source's error
            self.outer_done = True
            self.outer.cancel()
            reraise_fatal(error)
            return
        inner = _Inner(self, self._prefetch, "switch_map inner publisher")
        with self._lock:
            late = self.cancelled  # set before _cancel_upstream takes this lock
            replaced = None
            if not late:
                replaced, self._inner = self._inner, inner
        if late:
            inner.stop()  # its subscription is cancelled as it arrives
        if replaced is not None:
            replaced.stop()
        publisher.subscribe(inner)

    def _has_work(self) -> bool:
        inner = self._inner
        return self._requested > 0 and inner is not None and bool(inner.queue)

    def _cancel_upstream(self) -> None:
        self.cancelled = True
        self.outer.cancel()
        with self._lock:
            inner, self._inner = self._inner, None
        if inner is not None:
            inner.stop()

    def _signal_downstream_error(self, error: BaseException) -> None:
        if not self._terminated:
            self._terminated = True
            self._downstream.on_error(error)

    def _end(self, error: BaseException | None) -> None:
        self._terminated = True
        self._cancel_upstream()
        if error is None:
            self._downstream.on_complete()
        else:
            self._downstream.on_error(error)

    def _drain(self) -> None:
        if self._terminated:
            return
        if self.cancelled:
            self._cancel_upstream()
            return
        if self._failure is not None:
            self._end(self._failure)
            return
        on_next = self._downstream.on_next
        requested = self._requested
        emitted = 0
        while True:
            outer_done = self.outer_done  # read before the inner: no inner follows it
            inner = self._inner
            if inner is None:
                if outer_done:
                    self._end(None)
                    return
                break
            done = inner.done  # read before its queue: no item follows it
            if inner.queue:
                if emitted == requested:
                    break
                item = inner.poll()
                if self._inner is not inner:
                    continue  # replaced meanwhile: its items are dropped
                on_next(item)
                emitted += 1
                if self.cancelled or self._failure is not None:
                    break
            elif done:
                with self._lock:
                    if self._inner is inner:
                        self._inner = None  # exhausted: retire it
            else:
                break
        self._produced(emitted, requested)


class _Outer(Subscriber[Any]):
    """switch_map's subscriber to the source: each item switches to a new inner."""

    __slots__ = ("_stage",)

    def __init__(self, stage: _Switch[Any]) -> None:
        self._stage = stage

    def on_subscribe(self, subscription: Subscription) -> None:
        """Hand the stage to the downstream, then request everything from the source.

        Raises:
            TypeError: if ``subscription`` is ``None`` (rule 2.13).
        """
        stage = self._stage
        if not stage.outer.accept(subscription):
            return
        if not signal_subscribe(stage._downstream, stage):
            return  # it cancelled the stage, whose pass cancelled the source
        stage._release()
        if not stage.cancelled:
            subscription.request(MAX_DEMAND)

    def on_next(self, item: Any) -> None:
        """Switch to the publisher ``item`` maps to.

        Raises:
            TypeError: if ``item`` is ``None`` (rule 2.13).
        """
        if item is None:
            raise none_error("item", "2.13")
        stage = self._stage
        if not (stage.cancelled or stage.outer_done):
            stage.switch(item)

    def on_error(self, error: BaseException) -> None:
        """Fail the stream at once.

        Raises:
            TypeError: if ``error`` is ``None`` (rule 2.13).
        """
        require(error, "error", "2.13")
        self._stage.fail(error)  # before outer_done: a drain that finds it done must find the failure
        self._stage.outer_done = True

    def on_complete(self) -> None:
        """No more inners: the stream completes when the current one is exhausted."""
        self._stage.outer_done = True
        self._stage._signal()


def switch_map(source: Publisher[T], fn: Callable[[T], Publisher[R]], *, prefetch: int = 256) -> Publisher[R]:
    """Map each item to a publisher and emit the items of the latest one only::

        source:   --a--------b--------|
        inner a:    --1--2--3--4       (cancelled when b comes)
        inner b:             --5--6|
        result:   ----1--2----5--6----|

    Each source item cancels the publisher of the item before (its queued
    items are dropped) and subscribes to its own, as RxJava's
    ``switchMap``. Completes when the source has completed and the last
    publisher is exhausted; the first error of the source, of the current
    publisher or of ``fn`` cancels the rest and is signalled at once (a
    replaced publisher's error is ignored).

    Demand: requests everything from ``source`` (each item only replaces the
    last, so nothing accumulates); asks the current publisher for
    ``prefetch`` items and for 75 % of that again as they are delivered, so
    at most ``prefetch`` items are queued. The subscriber's demand carries
    over from one publisher to the next.

    Raises:
        TypeError: if ``source`` is not a publisher or ``fn`` is not callable.
        ValueError: if ``prefetch`` is not positive.
    """
    require_publisher(source, "source")
    require_callable(fn, "fn")
    require_positive_int(prefetch, "prefetch")
    return StagePublisher("switch_map", lambda subscriber: source.subscribe(_Outer(_Switch(subscriber, fn, prefetch))))
