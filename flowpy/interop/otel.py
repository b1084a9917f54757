"""OpenTelemetry metrics for flowpy streams (extra ``otel``).

:func:`instrument` registers a publisher, a processor or a buffering
operator's publisher (anything with a ``snapshot()`` method, see
:mod:`flowpy.snapshots`) under a stage name. The instruments are observable:
nothing is recorded while the stream runs; each time the
``MeterProvider``'s reader collects, every instrument's callback takes a
snapshot of each registered stage and reports one observation per subscriber.

Metrics (unit ``{item}`` unless stated; attributes ``flowpy.stage`` and,
per subscriber, ``flowpy.subscriber``):

==================================  =====================  ===============================================
name                                instrument             value
==================================  =====================  ===============================================
``flowpy.subscriber.buffered``      observable up-down     items buffered, not yet delivered (the lag)
``flowpy.subscriber.capacity``      observable up-down     the most items that may be buffered
``flowpy.subscriber.demand``        observable gauge       requested, not yet delivered (``2**63 - 1``: unbounded)
``flowpy.subscriber.delivered``     observable counter     ``on_next`` calls that returned
``flowpy.subscriber.dropped``       observable counter     items dropped because the buffer was full
``flowpy.publisher.subscribers``    observable up-down     open subscriptions, unit ``{subscriber}``
==================================  =====================  ===============================================

Registrations hold their stage weakly: instrumenting never keeps a publisher
alive, and a collected one simply stops reporting. Close the handle that
:func:`instrument` returns to stop reporting earlier.

Threading: :func:`instrument` and :meth:`Instrumentation.close` may be called
from any thread; callbacks run on the reader's thread and never block
producers (snapshots take no producer lock).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Iterable, Iterator
from operator import attrgetter
from types import TracebackType
from typing import Any, Final

from flowpy._extras import missing_extra
from flowpy._fork import at_fork_in_child

try:
    from opentelemetry import metrics
    from opentelemetry.metrics import CallbackOptions, Meter, MeterProvider, Observation
except ImportError as _error:
    raise missing_extra(__name__, "opentelemetry-api", "otel") from _error

from flowpy.flow import Publisher
from flowpy.snapshots import PublisherSnapshot, SubscriberSnapshot, SupportsSnapshot

__all__ = ["METER_NAME", "Instrumentation", "StreamMetrics", "instrument", "subscriber_label"]

METER_NAME: Final = "flowpy"
"""The instrumentation scope (meter) name the instruments are created under."""

SubscriberName = Callable[[Any], str]
"""Turns a subscriber into the value of the ``flowpy.subscriber`` attribute."""


def subscriber_label(subscriber: Any) -> str:
    """The default ``flowpy.subscriber`` value: ``"<class name>@<id in hex>"``, unique while it lives.

    One value per subscriber object: a stream whose subscribers come and go
    creates a new time series for each; pass ``subscriber_name`` to
    :func:`instrument` to group them instead.
    """
    return f"{type(subscriber).__qualname__}@{id(subscriber):x}"


class Instrumentation:
    """One stage registered with a :class:`StreamMetrics`; :meth:`close` stops its reporting.

    A context manager: leaving the ``with`` block closes it.
    """

    __slots__ = ("_metrics", "_publisher", "name", "subscriber_name")

    def __init__(
        self, metrics: StreamMetrics, publisher: SupportsSnapshot, name: str, subscriber_name: SubscriberName
    ) -> None:
        self._metrics = metrics
        try:
            self._publisher = weakref.ref(publisher)  # weak: instrumenting never keeps a stream alive
        except TypeError:
            raise TypeError(f"publisher must support weak references, got {publisher!r}") from None
        self.name = name
        """The ``flowpy.stage`` attribute of every observation."""
        self.subscriber_name = subscriber_name

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called or the stage was garbage-collected."""
        return not self.alive or not self._metrics._has(self)

    @property
    def alive(self) -> bool:
        """Whether the stage has not been garbage-collected."""
        return self._publisher() is not None

    def snapshot(self) -> PublisherSnapshot | None:
        """A snapshot of the stage, or ``None`` if it was collected."""
        publisher = self._publisher()
        return None if publisher is None else publisher.snapshot()

    def close(self) -> None:
        """Stop reporting this stage; idempotent."""
        self._metrics._remove(self)

    def __enter__(self) -> Instrumentation:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Instrumentation {self.name!r} {'closed' if self.closed else 'open'}>"


_SUBSCRIBER_INSTRUMENTS = (
    (
        "flowpy.subscriber.buffered",
        "up_down_counter",
        "buffered",
        "Items buffered for a subscriber and not yet delivered.",
    ),
    (
        "flowpy.subscriber.capacity",
        "up_down_counter",
        "capacity",
        "The most items that may be buffered for a subscriber.",
    ),
    (
        "flowpy.subscriber.demand",
        "gauge",
        "demand",
        "Items a subscriber requested and has not received; 2**63 - 1 is unbounded.",
    ),
    (
        "flowpy.subscriber.delivered",
        "counter",
        "delivered",
        "Items delivered to a subscriber (on_next calls that returned).",
    ),
    ("flowpy.subscriber.dropped", "counter", "dropped", "Items dropped for a subscriber because its buffer was full."),
)
"""The per-subscriber instruments: (name, kind, SubscriberSnapshot field, description); unit ``{item}``."""


class StreamMetrics:
    """The flowpy instruments on one meter, reporting every registered stage.

    Most code calls :func:`instrument`, which keeps one of these per
    ``MeterProvider``. Create one directly to choose the meter.

    Args:
        meter: where the instruments are created; default: the meter named
            :data:`METER_NAME` of the global ``MeterProvider``.
    """

    def __init__(self, meter: Meter | None = None) -> None:
        self._meter = meter if meter is not None else metrics.get_meter(METER_NAME)
        self._lock = threading.Lock()  # a leaf lock: guards replacing self._registrations
        # --- Replaced under self._lock, never mutated; read without it by callbacks ---
        self._registrations: tuple[Instrumentation, ...] = ()
        meter = self._meter
        create = {
            "counter": meter.create_observable_counter,
            "up_down_counter": meter.create_observable_up_down_counter,
            "gauge": meter.create_observable_gauge,
        }
        for name, kind, field, description in _SUBSCRIBER_INSTRUMENTS:
            create[kind](name, [self._reader(attrgetter(field))], unit="{item}", description=description)
        meter.create_observable_up_down_counter(
            "flowpy.publisher.subscribers",
            [self._count_subscribers],
            unit="{subscriber}",
            description="Open subscriptions of a publisher or stage.",
        )

    def register(
        self,
        publisher: SupportsSnapshot | Publisher[Any],
        name: str,
        *,
        subscriber_name: SubscriberName = subscriber_label,
    ) -> Instrumentation:
        """Report ``publisher`` under the stage ``name`` from the next collection on.

        Raises:
            TypeError: if ``publisher`` has no ``snapshot()`` method, cannot be
                weakly referenced, or ``name`` is not a ``str``.
        """
        if not isinstance(publisher, SupportsSnapshot):
            raise TypeError(f"publisher must have a snapshot() method, got {publisher!r}")
        if not isinstance(name, str):
            raise TypeError(f"name must be a str, got {name!r}")
        instrumentation = Instrumentation(self, publisher, name, subscriber_name)
        with self._lock:
            self._registrations = (*self._registrations, instrumentation)
        return instrumentation

    @property
    def registrations(self) -> tuple[Instrumentation, ...]:
        """The open registrations (collected stages are dropped at the next collection)."""
        return self._registrations

    def _has(self, instrumentation: Instrumentation) -> bool:
        return instrumentation in self._registrations

    def _remove(self, instrumentation: Instrumentation) -> None:
        with self._lock:
            self._registrations = tuple(r for r in self._registrations if r is not instrumentation)

    def _snapshots(self) -> Iterator[tuple[Instrumentation, PublisherSnapshot]]:
        """Each live registration with a fresh snapshot; forgets the collected ones."""
        collected = False
        for registration in self._registrations:
            snapshot = registration.snapshot()
            if snapshot is None:
                collected = True
            else:
                yield registration, snapshot
        if collected:
            with self._lock:
                self._registrations = tuple(r for r in self._registrations if r.alive)

    def _reader(self, field: Callable[[SubscriberSnapshot], int]) -> Callable[[CallbackOptions], Iterable[Observation]]:
        def observe(options: CallbackOptions) -> Iterable[Observation]:
            observations = []
            for registration, snapshot in self._snapshots():
                label = registration.subscriber_name
                for reading in snapshot.subscribers:
                    attributes = {"flowpy.stage": registration.name, "flowpy.subscriber": label(reading.subscriber)}
                    observations.append(Observation(field(reading), attributes))
            return observations

        return observe

    def _count_subscribers(self, options: CallbackOptions) -> Iterable[Observation]:
        return [
            Observation(snapshot.number_of_subscribers, {"flowpy.stage": registration.name})
            for registration, snapshot in self._snapshots()
        ]


_lock = threading.Lock()  # guards _per_provider
_per_provider: weakref.WeakKeyDictionary[MeterProvider, StreamMetrics] = weakref.WeakKeyDictionary()


@at_fork_in_child
def _reset_locks_in_child() -> None:
    """After ``os.fork()``, in the child: the locks another thread held at the fork are replaced."""
    global _lock
    _lock = threading.Lock()
    for stream_metrics in list(_per_provider.values()):
        stream_metrics._lock = threading.Lock()


def instrument(
    publisher: SupportsSnapshot | Publisher[Any],
    name: str,
    *,
    meter_provider: MeterProvider | None = None,
    subscriber_name: SubscriberName = subscriber_label,
) -> Instrumentation:
    """Report the buffers and counters of ``publisher`` as OpenTelemetry metrics, under the stage ``name``.

    The instruments are created once per ``MeterProvider`` (on its meter
    :data:`METER_NAME`) and shared by every stage registered with it.

    Args:
        publisher: a :class:`~flowpy.SubmissionPublisher`, a processor, or an
            operator's publisher with ``snapshot()`` (operators are typed as
            plain publishers, hence the wider type; checked at run time); held weakly.
        name: the value of the ``flowpy.stage`` attribute.
        meter_provider: default: the global one (``metrics.get_meter_provider()``).
        subscriber_name: the value of the ``flowpy.subscriber`` attribute for
            a subscriber; default: :func:`subscriber_label`.

    Returns:
        The handle whose ``close()`` stops the reporting.

    Raises:
        TypeError: if ``publisher`` has no ``snapshot()`` method or cannot be
            weakly referenced, or ``name`` is not a ``str``.
    """
    provider = meter_provider if meter_provider is not None else metrics.get_meter_provider()
    with _lock:
        stream_metrics = _per_provider.get(provider)
        if stream_metrics is None:
            stream_metrics = _per_provider[provider] = StreamMetrics(provider.get_meter(METER_NAME))
    return stream_metrics.register(publisher, name, subscriber_name=subscriber_name)
