"""Exception types of flowpy.

The JDK's exceptions map to Python's where one fits: ``NullPointerException``
is :class:`TypeError`, ``IllegalArgumentException`` is :class:`ValueError`.
``IllegalStateException`` becomes one of the classes below, each a
:class:`RuntimeError` that says whose action led to it.
"""

from __future__ import annotations

__all__ = [
    "ClosedPublisherError",
    "DuplicateSubscriptionError",
    "MissingBackpressureError",
    "ReentrantSubmitError",
    "StreamTimeoutError",
    "UndeliveredItemsWarning",
]


class ClosedPublisherError(RuntimeError):
    """Your code closed the publisher, and then submitted to it.

    Raised by ``submit`` and ``offer`` after ``close()`` or
    ``close_exceptionally()``, and by a ``submit`` that was blocked when the
    publisher was closed.
    """


class DuplicateSubscriptionError(RuntimeError):
    """A subscriber subscribed to a publisher it was already subscribed to (rule 2.12).

    Signalled through ``on_error`` of the existing subscription.
    """


class MissingBackpressureError(RuntimeError):
    """More items came than the subscriber requested, and nothing was there to hold them.

    A source produced more than was requested and a bounded buffer
    overflowed, or a source that cannot slow down (``interval``, a timer of
    ``debounce``, ``sample`` or a time window) had an item due while the
    subscriber had no demand; put an ``on_backpressure_*`` operator after it.
    """


class StreamTimeoutError(TimeoutError):
    """A source signalled nothing within the time given to ``timeout()``; it was cancelled.

    A subclass of the built-in :class:`TimeoutError`, as RxJava's ``timeout``
    fails with ``java.util.concurrent.TimeoutException``.
    """


class ReentrantSubmitError(RuntimeError):
    """Your code submitted, from inside a subscriber's method, to a wait that could never end.

    Raised by ``submit`` (and by ``offer``) when the calling thread is
    itself delivering to the subscriber whose buffer is full (its
    ``on_next`` runs here, say on ``direct_executor``), or when it is the
    thread of an outer ``submit`` that is waiting for space: only this
    thread could end the wait.
    """


class UndeliveredItemsWarning(RuntimeWarning):
    """Items accepted by a publisher were still undelivered when the interpreter exited.

    Shown by default (it is a :class:`RuntimeWarning`); see
    docs/submission-publisher.md, "At interpreter exit".
    """
