"""Signals as values: :class:`Notification`, ``materialize`` and ``dematerialize``.

``materialize`` turns every signal of a stream, its terminal one included,
into a :class:`Notification` item; ``dematerialize`` turns such items back
into signals. Between the two, errors and completion can be stored, sent,
counted or filtered like any item.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, cast

from flowpy._checks import require_publisher
from flowpy.flow import Publisher, Subscriber
from flowpy.operators._base import StagePublisher
from flowpy.operators._fused import Step, fuse
from flowpy.operators._map import map_
from flowpy.operators._sequence import SequenceStage
from flowpy.sources import just

__all__ = ["Notification", "NotificationKind", "dematerialize", "materialize"]

T = TypeVar("T")


class NotificationKind(enum.Enum):
    """Which signal a :class:`Notification` stands for."""

    ON_NEXT = "on_next"
    ON_ERROR = "on_error"
    ON_COMPLETE = "on_complete"


@dataclass(frozen=True)
class Notification(Generic[T]):
    """One signal as a value: an item (``value``), a failure (``error``) or the completion.

    Make them with :meth:`on_next`, :meth:`on_error` and :meth:`on_complete`.
    Two notifications are equal when their kind and value are equal and their
    errors are the same object, so tests can compare whole streams::

        >>> Notification.on_next(1) == Notification.on_next(1)
        True

    Raises:
        TypeError: if the fields do not fit the kind (an ``ON_NEXT`` without a
            value, an ``ON_ERROR`` without an exception, ...; rule 2.13).
    """

    __slots__ = ("error", "kind", "value")

    kind: NotificationKind
    value: T | None
    error: BaseException | None

    def __post_init__(self) -> None:
        kind = self.kind
        if not isinstance(kind, NotificationKind):
            raise TypeError(f"kind must be a NotificationKind, got {kind!r}")
        if (self.value is None) == (kind is NotificationKind.ON_NEXT):
            raise TypeError(f"value must {'not ' if self.value is None else ''}be None for {kind.name} (rule 2.13)")
        if (self.error is None) == (kind is NotificationKind.ON_ERROR):
            raise TypeError(f"error must {'not ' if self.error is None else ''}be None for {kind.name} (rule 2.13)")
        if self.error is not None and not isinstance(self.error, BaseException):
            raise TypeError(f"error must be an exception instance, got {self.error!r}")

    @classmethod
    def on_next(cls, value: T) -> Notification[T]:
        """A notification of the item ``value``."""
        return cls(NotificationKind.ON_NEXT, value, None)

    @classmethod
    def on_error(cls, error: BaseException) -> Notification[Any]:
        """A notification of the failure ``error``."""
        return cls(NotificationKind.ON_ERROR, None, error)

    @classmethod
    def on_complete(cls) -> Notification[Any]:
        """A notification of the completion."""
        return _ON_COMPLETE

    def accept(self, subscriber: Subscriber[T]) -> None:
        """Signal this notification to ``subscriber``: ``on_next(value)``, ``on_error(error)`` or ``on_complete()``."""
        if self.kind is NotificationKind.ON_NEXT:
            subscriber.on_next(cast("T", self.value))
        elif self.kind is NotificationKind.ON_ERROR:
            subscriber.on_error(cast("BaseException", self.error))
        else:
            subscriber.on_complete()

    def __repr__(self) -> str:
        if self.kind is NotificationKind.ON_NEXT:
            return f"Notification.on_next({self.value!r})"
        if self.kind is NotificationKind.ON_ERROR:
            return f"Notification.on_error({self.error!r})"
        return "Notification.on_complete()"


_ON_COMPLETE: Notification[Any] = Notification(NotificationKind.ON_COMPLETE, None, None)


# --- materialize ---------------------------------------------------------------


class _Materialize(SequenceStage):
    """The source's items as notifications, then one attempt of ``just(terminal notification)``."""

    __slots__ = ("_final",)

    def __init__(self, downstream: Subscriber[Any], items: Publisher[Any]) -> None:
        super().__init__(downstream)
        self._pending = items
        self._final = False  # the terminal notification is subscribed

    def _ended(self, error: BaseException | None, produced: int) -> None:
        if self._final:
            self._terminate(None)
            return
        self._final = True
        self._pending = just(Notification.on_complete() if error is None else Notification.on_error(error))
        self._resume()


def materialize(source: Publisher[T]) -> Publisher[Notification[T]]:
    """Emit every signal of ``source`` as a :class:`Notification`, then complete::

        source:  --1--2--#
        materialize()
        result:  --N(1)--N(2)--N(#)|

    Demand: passed through, one notification per item; the notification of
    the terminal signal waits for demand (one held at most), as RxJava's
    ``materialize``. The result never fails because the source did (an
    invalid ``request`` still fails it, rule 3.9).

    Raises:
        TypeError: if ``source`` is not a publisher.
    """
    require_publisher(source, "source")
    items = map_(source, Notification.on_next)
    return StagePublisher("materialize", lambda subscriber: _Materialize(subscriber, items).start())


# --- dematerialize ---------------------------------------------------------------


def _not_a_notification(item: object) -> TypeError:
    return TypeError(f"dematerialize expects Notification items, got {item!r}")


class _Dematerialize(Step):
    __slots__ = ()

    def code(self, index: int) -> list[str]:
        return [
            f"if not isinstance(item, notification{index}):",
            f"    raise not_notification{index}(item)",
            f"kind{index} = item.kind",
            f"if kind{index} is not on_next{index}:",
            f"    if kind{index} is on_complete{index}:",
            "        complete()",
            "    else:",
            "        stage.finish(item.error)",
            "    break",
            "item = item.value",
        ]

    def arguments(self, index: int) -> dict[str, object]:
        return {
            f"notification{index}": Notification,
            f"not_notification{index}": _not_a_notification,
            f"on_next{index}": NotificationKind.ON_NEXT,
            f"on_complete{index}": NotificationKind.ON_COMPLETE,
        }


def dematerialize(source: Publisher[Notification[T]]) -> Publisher[T]:
    """Turn :class:`Notification` items back into the signals they stand for::

        source:  --N(1)--N(2)--N(#)--...
        dematerialize()
        result:  --1-----2-----#

    A notification of an error or of the completion cancels ``source`` and
    ends the stream with it (RxJava's ``dematerialize``); if ``source``
    itself ends first, its terminal signal is passed on. An item that is not
    a :class:`Notification` fails the stream with ``TypeError``. Fused with
    its synchronous neighbours.

    Demand: passed through. Nothing is buffered.

    Raises:
        TypeError: if ``source`` is not a publisher.
    """
    require_publisher(source, "source")
    return cast("Publisher[T]", fuse(source, _Dematerialize()))
