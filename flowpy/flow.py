"""The Flow API: the four interfaces of ``java.util.concurrent.Flow``.

A :class:`Publisher` produces items for one or more :class:`Subscriber`
objects, each of which receives them through its own :class:`Subscription`.
Demand is the backpressure: a publisher never signals more ``on_next`` calls
than the subscriber asked for with ``Subscription.request(n)`` (rule 1.1).

Protocol:   ``on_subscribe on_next* (on_error | on_complete)?``, signalled
            serially (rule 1.3). Items and arguments are never ``None``
            (rule 2.13, where Java forbids ``null``).
Threading:  the interfaces say nothing about threads; implementations
            document where their signals run.

The Reactive Streams API (:mod:`flowpy.reactivestreams`) declares the same
four interfaces as distinct types; :mod:`flowpy.adapters` converts between
the two.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Generic, TypeVar

__all__ = [
    "Processor",
    "Publisher",
    "Subscriber",
    "Subscription",
    "default_buffer_size",
]

T_co = TypeVar("T_co", covariant=True)
T_contra = TypeVar("T_contra", contravariant=True)
R_co = TypeVar("R_co", covariant=True)

_DEFAULT_BUFFER_SIZE = 256


def default_buffer_size() -> int:
    """Return the default buffer capacity of publishers and subscribers: 256.

    Like ``Flow.defaultBufferSize()``, it is a starting point; choose a size
    that fits the expected rates and the cost of an item.
    """
    return _DEFAULT_BUFFER_SIZE


class Subscription(ABC):
    """The link between one publisher and one subscriber.

    Both methods are called only by the subscriber (rule 3.1), serially
    (rule 2.7), and always return normally (rules 3.15, 3.16).
    """

    __slots__ = ()

    @abstractmethod
    def request(self, n: int) -> None:
        """Add ``n`` to the number of items the subscriber may receive.

        Demand is additive (rule 3.8) and saturates at ``2**63 - 1``, which
        means unbounded (rule 3.17). ``n <= 0`` ends the subscription with
        ``on_error(ValueError)`` (rule 3.9); after ``cancel`` it does nothing
        (rule 3.6).
        """

    @abstractmethod
    def cancel(self) -> None:
        """Ask the publisher to stop signalling and to drop the subscriber.

        Idempotent and thread-safe (rules 3.5, 3.7); signals already under
        way may still arrive (rule 2.8).
        """


class Subscriber(ABC, Generic[T_contra]):
    """A receiver of items, and of one terminal signal at most."""

    __slots__ = ()

    @abstractmethod
    def on_subscribe(self, subscription: Subscription) -> None:
        """Receive the subscription; called once, before any other signal (rule 1.9).

        Raises:
            TypeError: if ``subscription`` is ``None`` (rule 2.13).
        """

    @abstractmethod
    def on_next(self, item: T_contra) -> None:
        """Receive the next item; never more often than requested (rule 1.1).

        Raises:
            TypeError: if ``item`` is ``None`` (rule 2.13).
        """

    @abstractmethod
    def on_error(self, error: BaseException) -> None:
        """Receive the terminal failure; no signal follows (rule 1.7).

        Raises:
            TypeError: if ``error`` is ``None`` (rule 2.13).
        """

    @abstractmethod
    def on_complete(self) -> None:
        """Receive the terminal success; no signal follows (rule 1.7)."""


class Publisher(ABC, Generic[T_co]):
    """A source of items for subscribers that ask for them."""

    __slots__ = ()

    @abstractmethod
    def subscribe(self, subscriber: Subscriber[T_co]) -> None:
        """Attach ``subscriber``; it is then sent ``on_subscribe`` (rule 1.9).

        A publisher that cannot serve the subscriber says so with
        ``on_error`` after ``on_subscribe``, never by raising.

        Raises:
            TypeError: if ``subscriber`` is ``None`` (rule 1.9).
        """


class Processor(Subscriber[T_contra], Publisher[R_co]):
    """A stage that is both a subscriber and a publisher (rule 4.1)."""

    __slots__ = ()
