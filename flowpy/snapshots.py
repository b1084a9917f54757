"""Snapshots: cheap, frozen readings of a stream's buffers and counters, for monitoring.

``publisher.snapshot()`` (on :class:`~flowpy.SubmissionPublisher`, the
processors and the buffering operators' publishers) returns a
:class:`PublisherSnapshot` holding one :class:`SubscriberSnapshot` per open
subscription. Nothing is collected until a snapshot is asked for, apart from
two counters per subscription (items delivered, counted once per drained
batch; items dropped, counted on the drop path), so polling costs only the
polling.

Consistency: a snapshot is taken without the lock that serialises producers,
so it never blocks ``submit``. The fields of one subscriber are read in one
step (the compiled core reads them under the GIL in one call; the pure-Python
one under the subscription's own lock, which delivery takes once per batch),
so ``demand`` and ``delivered`` agree with each other; ``buffered`` may already
count items that a producer appended meanwhile. Across subscribers a snapshot
is approximate, like the JDK's ``estimateMaximumLag``: each subscriber is read
at a slightly different moment. Use snapshots for monitoring, never to decide
what to submit.

Cost: one call per subscriber and two small objects; no lock a producer holds
is taken, and nothing on the per-item path changes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

__all__ = ["PublisherSnapshot", "SubscriberSnapshot", "SupportsSnapshot"]


@dataclass(frozen=True, slots=True)
class SubscriberSnapshot:
    """One subscriber's buffer and counters, read together.

    Attributes:
        subscriber: the subscriber (for a stage: the stage's downstream subscriber).
        buffered: items queued for this subscriber and not yet handed to its
            ``on_next``: the JDK's lag. For a :class:`~flowpy.MulticastProcessor`
            the queue is shared, so every subscriber shows its length.
        capacity: the most items that may be buffered for it (the publisher's
            ``max_buffer_capacity``, a processor's ``prefetch``, an operator's
            queue size).
        demand: items requested by ``request(n)`` and not yet delivered;
            ``2**63 - 1`` means unbounded (rule 3.17). ``demand - buffered``
            is the JDK's ``estimateMinimumDemand`` for this subscriber.
        delivered: ``on_next`` calls that returned normally. Counted once per
            drained batch, so while a batch is being delivered its items are
            in neither ``buffered`` nor ``delivered``.
        dropped: items not buffered for this subscriber because its buffer
            was full: ``offer`` drops, ``on_backpressure_drop`` and the
            ``drop_*`` overflow policies. Items discarded by ``cancel`` or an
            error are not drops.
    """

    subscriber: Any
    buffered: int
    capacity: int
    demand: int
    delivered: int
    dropped: int


@dataclass(frozen=True, slots=True)
class PublisherSnapshot:
    """A publisher's (or a stage's) state and one :class:`SubscriberSnapshot` per open subscription.

    Attributes:
        closed: whether the publisher was closed (a processor: terminated; an
            operator stage publisher: always ``False``, it has no end of its own).
        capacity: the per-subscriber buffer capacity.
        subscribers: the open subscriptions when the snapshot was taken, each
            read together; approximate across subscribers.
    """

    closed: bool
    capacity: int
    subscribers: tuple[SubscriberSnapshot, ...]

    @property
    def number_of_subscribers(self) -> int:
        """How many subscriptions the snapshot holds."""
        return len(self.subscribers)

    @property
    def maximum_lag(self) -> int:
        """The most items buffered for one subscriber; 0 with none (the JDK's ``estimateMaximumLag``)."""
        return max((s.buffered for s in self.subscribers), default=0)

    @property
    def minimum_demand(self) -> int:
        """The least ``demand - buffered`` over subscribers; 0 with none (the JDK's ``estimateMinimumDemand``)."""
        return min((s.demand - s.buffered for s in self.subscribers), default=0)


@runtime_checkable
class SupportsSnapshot(Protocol):
    """A publisher with a ``snapshot()`` method.

    :class:`~flowpy.SubmissionPublisher` and the processors have one; so have
    the publishers of ``observe_on``, ``on_backpressure_buffer``/``_latest``/``_drop``,
    ``merge``, ``concat`` and ``flat_map``, which are typed as plain publishers:
    check with ``isinstance(publisher, SupportsSnapshot)``.
    """

    def snapshot(self) -> PublisherSnapshot:
        """Read the publisher's state and per-subscriber buffers and counters."""
