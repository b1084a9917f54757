"""``publish`` and ``share``: one upstream subscription for many subscribers.

Both put a :class:`~flowpy.processors.MulticastProcessor` between the source
and the subscribers: every subscriber receives the same items in the same
order, and the slowest one paces the source (the processor requests
``prefetch`` items ahead and never more). :class:`ConnectablePublisher`
holds any such processor: ``replay`` and ``cache``
(:mod:`flowpy.operators._replay`) put theirs in it too.

Threading:  see :class:`~flowpy.processors.MulticastProcessor`: signals run
            on the thread that made progress possible, one at a time.
"""

from __future__ import annotations

import threading
from typing import Generic, TypeVar

from flowpy._checks import require_positive_int, require_publisher, require_subscriber
from flowpy.flow import Processor, Publisher, Subscriber
from flowpy.processors import MulticastProcessor

__all__ = ["ConnectablePublisher", "publish", "share"]

T = TypeVar("T")


class ConnectablePublisher(Publisher[T], Generic[T]):
    """A multicast publisher that subscribes to its source only on :meth:`connect`.

    Subscribe everyone first, then connect: nobody misses an item. With
    ``auto_connect``, the first ``subscribe`` connects. Subscribers are
    attached to ``processor``, which :meth:`connect` subscribes to
    ``source``: a :class:`~flowpy.processors.MulticastProcessor` for
    :func:`publish` and :func:`share`, a replaying one for ``replay`` and
    ``cache``.
    """

    __slots__ = ("_auto_connect", "_connected", "_lock", "_processor", "_source")

    def __init__(self, source: Publisher[T], processor: Processor[T, T], *, auto_connect: bool = False) -> None:
        self._source = source
        self._processor = processor
        self._auto_connect = auto_connect
        self._lock = threading.Lock()
        self._connected = False  # guarded by self._lock; set once

    @property
    def is_connected(self) -> bool:
        """Whether :meth:`connect` has subscribed the source."""
        return self._connected

    def subscribe(self, subscriber: Subscriber[T]) -> None:
        """Attach ``subscriber`` to the shared stream (and connect, with ``auto_connect``).

        A subscriber that arrives after the stream ended receives its terminal
        signal at once; one that arrives while it runs receives the items
        from then on.

        Raises:
            TypeError: if ``subscriber`` is ``None`` (rule 1.9).
        """
        require_subscriber(subscriber)
        self._processor.subscribe(subscriber)
        if self._auto_connect:
            self.connect()

    def connect(self) -> None:
        """Subscribe the processor to the source; later calls do nothing. Thread-safe."""
        with self._lock:
            if self._connected:
                return
            self._connected = True
        self._source.subscribe(self._processor)

    def __repr__(self) -> str:
        state = "connected" if self._connected else "not connected"
        return f"<ConnectablePublisher {state} over {self._source!r}>"


def publish(source: Publisher[T], prefetch: int = 256) -> ConnectablePublisher[T]:
    """Return a multicast view of ``source`` that starts on ``connect()``::

        source:      --1--2--3--|
        subscriber A:   --1--2--3--|
        subscriber B:   --1--2--3--|   (both subscribed before connect())

    Demand: ``prefetch`` items are requested from ``source`` ahead of the
    subscribers and replenished as the slowest of them consumes; an item
    goes out only when every subscriber has demand for it. When the last
    subscriber cancels, ``source`` is cancelled.

    Raises:
        TypeError: if ``source`` is not a publisher or ``prefetch`` not an int.
        ValueError: if ``prefetch`` is not positive.
    """
    require_publisher(source, "source")
    require_positive_int(prefetch, "prefetch")
    return ConnectablePublisher(source, MulticastProcessor(prefetch))


def share(source: Publisher[T], prefetch: int = 256) -> ConnectablePublisher[T]:
    """Return a multicast view of ``source`` that connects when the first subscriber arrives.

    The same as :func:`publish` with an automatic ``connect()`` on the first
    ``subscribe``; later subscribers join the running stream.

    Raises:
        TypeError: if ``source`` is not a publisher or ``prefetch`` not an int.
        ValueError: if ``prefetch`` is not positive.
    """
    require_publisher(source, "source")
    require_positive_int(prefetch, "prefetch")
    return ConnectablePublisher(source, MulticastProcessor(prefetch), auto_connect=True)
