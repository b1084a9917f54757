"""The Reactive Streams API (``org.reactivestreams``), as Python types.

The four interfaces have the same methods and contracts as those of
:mod:`flowpy.flow` but are distinct nominal types, as ``org.reactivestreams``
and ``java.util.concurrent.Flow`` are in Java: an object is a Reactive
Streams publisher only if it says so by subclassing. Convert between the two
with :mod:`flowpy.adapters`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Generic, TypeVar

__all__ = ["Processor", "Publisher", "Subscriber", "Subscription"]

T_co = TypeVar("T_co", covariant=True)
T_contra = TypeVar("T_contra", contravariant=True)
R_co = TypeVar("R_co", covariant=True)


class Subscription(ABC):
    """Reactive Streams ``Subscription``; see :class:`flowpy.flow.Subscription`."""

    __slots__ = ()

    @abstractmethod
    def request(self, n: int) -> None:
        """Add ``n`` to the demand (rules 3.8, 3.9, 3.17)."""

    @abstractmethod
    def cancel(self) -> None:
        """Ask the publisher to stop signalling (rules 3.5, 3.7, 3.12)."""


class Subscriber(ABC, Generic[T_contra]):
    """Reactive Streams ``Subscriber``; see :class:`flowpy.flow.Subscriber`."""

    __slots__ = ()

    @abstractmethod
    def on_subscribe(self, subscription: Subscription) -> None:
        """Receive the subscription, before any other signal (rule 1.9)."""

    @abstractmethod
    def on_next(self, item: T_contra) -> None:
        """Receive the next item (rule 1.1)."""

    @abstractmethod
    def on_error(self, error: BaseException) -> None:
        """Receive the terminal failure (rule 1.7)."""

    @abstractmethod
    def on_complete(self) -> None:
        """Receive the terminal success (rule 1.7)."""


class Publisher(ABC, Generic[T_co]):
    """Reactive Streams ``Publisher``; see :class:`flowpy.flow.Publisher`."""

    __slots__ = ()

    @abstractmethod
    def subscribe(self, subscriber: Subscriber[T_co]) -> None:
        """Attach ``subscriber`` (rule 1.9)."""


class Processor(Subscriber[T_contra], Publisher[R_co]):
    """Reactive Streams ``Processor`` (rule 4.1)."""

    __slots__ = ()
