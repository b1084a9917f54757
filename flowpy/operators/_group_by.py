"""``group_by``: one inner publisher per key, fed from one upstream subscription.

RxJava 3's ``groupBy``, with flowpy's demand contract:

* the upstream is asked for ``prefetch`` items at once and, as the groups'
  subscribers consume items, for 75 % of ``prefetch`` again each time that
  many were consumed across all groups; so at most ``prefetch`` items are
  queued in the groups together;
* a new key emits a :class:`GroupedPublisher` to the subscriber of groups
  at once, which must have asked for it: a group it has not asked for ends
  the stream with :class:`~flowpy.errors.MissingBackpressureError`;
* a group that is not subscribed to inside the ``on_next`` that emitted it
  is *abandoned*: it keeps its first item for a subscriber that may come
  later, and the next item with that key makes a new group. So groups
  nobody subscribes to never hold the others back;
* a group whose subscriber cancels is forgotten, and the key seen again
  makes a new group; the stream of groups may be cancelled while groups go
  on, and the upstream is cancelled when nothing is left to feed.

Threading:  groups are emitted on the upstream's thread, inside its
            ``on_next``; each group delivers from its own drain on the thread
            that made progress possible (the upstream's ``on_next``, or its
            subscriber's ``request``), one pass at a time (rule 1.3), in the
            context its subscriber subscribed in.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

from flowpy._checks import (
    none_error,
    require,
    require_callable,
    require_callable_or_none,
    require_positive_int,
    require_publisher,
)
from flowpy._demand import MAX_DEMAND, add_demand, replenish_limit
from flowpy._signals import reraise_fatal, signal_subscribe
from flowpy.errors import MissingBackpressureError
from flowpy.flow import Publisher, Subscriber, Subscription
from flowpy.operators._base import Relay, StagePublisher
from flowpy.operators._unicast import UnicastPublisher

__all__ = ["GroupedPublisher", "group_by"]

T = TypeVar("T")
K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


# Implementation overview
#
# _GroupBy is the upstream's subscriber and the subscription of the stream
# of groups (a Relay: it signals on the upstream's thread). The upstream's
# on_next looks the key up in self._groups (a dict: read without the lock,
# which dict operations do not need; written under it) and pushes the value
# into that group, a UnicastPublisher (operators/_unicast.py), or makes a
# new group, pushes, and emits it. Groups report consumed items back
# (consumed(), any thread), which replenishes the upstream in batches; and
# their subscriber's end (detached(), any thread), which forgets them. The
# upstream is cancelled once the stream of groups was cancelled and no
# group is left.


class GroupedPublisher(UnicastPublisher[V], Generic[K, V]):
    """One group of :func:`group_by`: the items whose key is :attr:`key`, for one subscriber.

    Subscribe inside the ``on_next`` that delivers the group (``flat_map``
    does); a group not subscribed to by then is abandoned: it still
    delivers the one item it holds, then completes. A second subscriber is
    refused with ``on_error(RuntimeError)``.
    """

    __slots__ = ("key",)

    def __init__(self, key: K, parent: _GroupBy[Any, K, Any]) -> None:
        super().__init__("group", lambda: parent.detached(self), on_consumed=parent.consumed, delay_error=False)
        self.key: K = key
        """The key that all the group's items share."""

    def __repr__(self) -> str:
        return f"<GroupedPublisher key={self.key!r}: {self.queued} queued>"


class _GroupBy(Relay, Generic[T, K, V]):
    """The upstream's subscriber, and the subscription of the stream of groups."""

    __slots__ = (
        "_consumed",
        "_emitted",
        "_finished",
        "_groups",
        "_key_fn",
        "_limit",
        "_lock",
        "_prefetch",
        "_requested",
        "_value_fn",
    )

    def __init__(
        self,
        downstream: Subscriber[GroupedPublisher[K, V]],
        key_fn: Callable[[T], K],
        value_fn: Callable[[T], V] | None,
        prefetch: int,
    ) -> None:
        super().__init__(downstream)  # `done`: the stream of groups ended (cancelled or terminal)
        self._key_fn = key_fn
        self._value_fn = value_fn
        self._prefetch = prefetch
        self._limit = replenish_limit(prefetch)
        self._lock = threading.Lock()  # a leaf: nothing is called while it is held
        # --- Written under self._lock; read without it by on_next ------------
        self._groups: dict[K, GroupedPublisher[K, V]] = {}  # the live groups by key
        self._finished = False  # no item is taken any more (upstream ended, failed or cancelled)
        # --- Guarded by self._lock --------------------------------------------
        self._requested = 0  # groups asked for; MAX_DEMAND is unbounded
        self._consumed = 0  # items consumed since the last request upstream
        # --- Upstream's thread only ---------------------------------------------
        self._emitted = 0  # groups emitted

    # --- The stream of groups ---------------------------------------------------

    def on_subscribe(self, subscription: Subscription) -> None:
        """Hand this stage to the subscriber of groups, then request ``prefetch`` items.

        Raises:
            TypeError: if ``subscription`` is ``None`` (rule 2.13).
        """
        if not self._upstream.accept(subscription):
            return
        if signal_subscribe(self._downstream, self) and not self._finished:
            subscription.request(self._prefetch)

    def request(self, n: int) -> None:
        """Ask for ``n`` more groups; an invalid ``n`` goes upstream, which signals the error (rule 3.9)."""
        if self._upstream_for(n) is None:
            return
        with self._lock:
            self._requested = add_demand(self._requested, n)

    def cancel(self) -> None:
        """Stop emitting groups; the groups already emitted go on (rules 3.5, 3.7)."""
        if self._end():
            self._release_if_unused()

    # --- Items ----------------------------------------------------------------

    def on_next(self, item: T) -> None:
        """Push ``item`` (or ``value_fn(item)``) into the group of its key, making and emitting a new one if needed.

        Raises:
            TypeError: if ``item`` is ``None`` (rule 2.13).
        """
        if item is None:
            raise none_error("item", "2.13")
        if self._finished:
            return
        try:
            key = self._key_fn(item)
            value: Any = item if self._value_fn is None else self._value_fn(item)
            if value is None:
                raise TypeError(
                    f"group_by's value_fn must not return None (rule 2.13), got None from {self._value_fn!r}"
                )
            group = self._groups.get(key)  # raises TypeError for an unhashable key
        except BaseException as error:
            self._abort(error)
            reraise_fatal(error)
            return
        try:
            if group is not None and not group.is_ended:
                group.push(value)
            else:
                self._open(key, value)
        except BaseException as error:
            # The subscriber of groups raised (rule 2.13), or a group's
            # subscriber raised what is no Exception (a group's drain
            # settles Exceptions itself): end every group and the stream of
            # groups here, then let it go on up to the upstream.
            self._abort(error)
            raise

    def _open(self, key: K, value: V) -> None:
        """Make the group of ``key`` with its first item and emit it; upstream's thread.

        After the stream of groups was cancelled no group is made: the item
        is dropped, and counted as consumed so that the live groups go on.
        """
        group: GroupedPublisher[K, V] = GroupedPublisher(key, self)
        with self._lock:
            # Checked with the insert, under the lock that _release_if_unused()
            # holds: a cancel of the stream of groups either sees this group
            # or makes this item be dropped.
            closed = self._finished or self.done
            if not closed:
                self._groups[key] = group  # replaces a cancelled group not yet detached
            requested = self._requested
        if closed:
            self.consumed(1)
            return
        group.push(value)
        if self._emitted == requested:
            self._abort(
                MissingBackpressureError(
                    f"group_by could not emit group #{self._emitted + 1} (key {key!r}): "
                    f"only {requested} groups were requested; the subscriber of groups must ask for every new key "
                    "(flat_map with max_concurrency at least the number of keys does)"
                )
            )
            return
        self._emitted += 1
        self._downstream.on_next(group)
        if group.try_abandon():  # nobody subscribed inside on_next
            self._forget(group)
            group.complete()
            self.consumed(1)  # its one item no longer holds the upstream back
            self._release_if_unused()

    # --- Reports from the groups (any thread) -------------------------------------

    def consumed(self, count: int) -> None:
        """Count ``count`` items taken out of the groups; ask the upstream again in batches of 75 % of ``prefetch``."""
        limit = self._limit
        with self._lock:
            total = self._consumed + count
            batch = total - total % limit
            self._consumed = total - batch
            finished = self._finished
        if batch and not finished:
            upstream = self.upstream
            if upstream is not None:
                upstream.request(batch)

    def detached(self, group: GroupedPublisher[K, Any]) -> None:
        """Forget a group its subscriber ended; cancel the upstream if nothing is left to feed."""
        self._forget(group)
        self._release_if_unused()

    def _forget(self, group: GroupedPublisher[K, Any]) -> None:
        with self._lock:
            if self._groups.get(group.key) is group:
                del self._groups[group.key]

    def _release_if_unused(self) -> None:
        with self._lock:
            unused = self.done and not self._groups and not self._finished
            if unused:
                self._finished = True
        if unused:
            self._upstream.cancel()

    # --- Terminal signals ---------------------------------------------------------

    def on_error(self, error: BaseException) -> None:
        """Fail every group and the stream of groups with ``error``, at once.

        Raises:
            TypeError: if ``error`` is ``None`` (rule 2.13).
        """
        require(error, "error", "2.13")
        self._upstream.detach()
        self._finish(error)

    def on_complete(self) -> None:
        """Complete every group after its queued items, and the stream of groups."""
        self._upstream.detach()
        self._finish(None)

    def _abort(self, error: BaseException) -> None:
        """Cancel the upstream and fail everything with ``error``; upstream's thread."""
        self._upstream.cancel()
        self._finish(error)

    def _finish(self, error: BaseException | None) -> None:
        with self._lock:
            if self._finished:
                return
            self._finished = True
            groups = list(self._groups.values())
            self._groups.clear()
        for group in groups:
            if error is None:
                group.complete()
            else:
                group.fail(error)
        if self._end():
            if error is None:
                self._downstream.on_complete()
            else:
                self._downstream.on_error(error)


def group_by(
    source: Publisher[T],
    key_fn: Callable[[T], K],
    value_fn: Callable[[T], V] | None = None,
    *,
    prefetch: int = 256,
) -> Publisher[GroupedPublisher[K, Any]]:
    """Split ``source`` into one :class:`GroupedPublisher` per key (RxJava 3's ``groupBy``)::

        source:   --a1--b1--a2--b2--|          key_fn: the letter
        groups:   --A-----B----------|
        group A:    a1--------a2------|
        group B:         b1--------b2--|

    Demand: ``prefetch`` items are requested upstream at once, then 75 % of
    ``prefetch`` again each time the groups' subscribers have consumed that
    many, counted across all groups; so the groups hold at most
    ``prefetch`` items between them, and a group whose subscriber does not
    request paces the source for all (consume every group you subscribe
    to). The subscriber of groups must have asked for a group when its
    first item arrives, or the stream ends with
    :class:`~flowpy.errors.MissingBackpressureError`: use
    ``flat_map(..., max_concurrency=n)`` with ``n`` at least the number of
    keys, or request unbounded.

    Groups: a group not subscribed to inside the ``on_next`` that emitted it
    is abandoned (RxJava 3): it keeps that one item for a subscriber that
    may come later, then completes, and the next item with its key makes a
    new group; so ignored groups never stall the others. A group whose
    subscriber cancels is dropped (its queued items count as consumed) and
    the key seen again makes a new group. Cancelling the stream of groups
    stops new groups (items with new keys are dropped and replaced upstream)
    while the live groups go on; the upstream is cancelled when no group is
    left. Memory: at most ``prefetch`` items, plus one small queue per live
    key (bounded by the number of distinct keys, as in RxJava).

    Errors: an upstream error, or ``key_fn``/``value_fn`` raising (or
    ``value_fn`` returning ``None``, or an unhashable key), cancels the
    upstream and is signalled at once to every live group and to the
    stream of groups, ahead of queued items. ``key_fn`` may return ``None``.

    Raises:
        TypeError: if ``key_fn`` is not callable, or ``value_fn`` is neither ``None`` nor callable.
        ValueError: if ``prefetch`` is not positive.
    """
    require_publisher(source, "source")
    require_callable(key_fn, "key_fn")
    require_callable_or_none(value_fn, "value_fn")
    require_positive_int(prefetch, "prefetch")
    capped = min(prefetch, MAX_DEMAND)

    def connect(subscriber: Subscriber[GroupedPublisher[K, Any]]) -> None:
        source.subscribe(_GroupBy(subscriber, key_fn, value_fn, capped))

    return StagePublisher("group_by", connect)
