"""Calls across the publisher/subscriber boundary that must not raise.

Rule 2.13: when a subscriber method raises, the publisher considers the
subscription cancelled and reports the error "in a way suited to the
runtime": here, the ``flowpy`` logger, with the traceback. Rules 3.15 and
3.16 give subscription methods the same duty towards subscribers.

Exceptions that are not :class:`Exception` (``KeyboardInterrupt``,
``SystemExit``, ...) raised by user code end the stream exactly as an
``Exception`` would at that point, and are then re-raised on the thread
where they happened (:func:`reraise_fatal`), so that Ctrl-C still
interrupts and ``SystemExit`` still exits; on a pool thread they reach
:func:`threading.excepthook`. See "Exceptions raised by user code" in
``docs/java-mapping.md``.
"""

from __future__ import annotations

import logging
from functools import partial
from typing import TypeVar

from flowpy.flow import Subscriber, Subscription

__all__ = [
    "EXHAUSTED",
    "call_subscription",
    "chain_fatal",
    "on_next_raised",
    "report",
    "reraise_fatal",
    "signal_subscribe",
    "signal_terminal",
]

T = TypeVar("T")

EXHAUSTED = (RecursionError, MemoryError)
"""What a pipeline raises when it runs out of stack or memory: it ends the stream with ``on_error``.

Out of a subscriber method, these are not taken for a broken subscriber
(rule 2.13) but for a stage that could not be run: the stage that catches
one sends it downstream as ``on_error`` (flowpy._core.serial.defer).
"""

_logger = logging.getLogger("flowpy")


def report(error: BaseException, context: str) -> None:
    """Log ``error`` with its traceback at ERROR level on the ``flowpy`` logger.

    Args:
        error: the exception that could not be signalled.
        context: what was being done, e.g. ``"on_next of <subscriber> raised (rule 2.13)"``.
    """
    _logger.error("%s: %r", context, error, exc_info=error)


def reraise_fatal(error: BaseException) -> None:
    """Re-raise ``error`` if it is not an :class:`Exception` (``KeyboardInterrupt``, ``SystemExit``, ...).

    Call it last, once the stream has been ended as it would be for an
    ``Exception`` (upstream cancelled, ``on_error`` sent, counters and flags
    left consistent): an ``Exception`` is then settled, a ``BaseException``
    goes on up the thread where it was raised.
    """
    if not isinstance(error, Exception):
        raise error


def chain_fatal(earlier: BaseException | None, later: BaseException) -> BaseException:
    """What to re-raise when ``later`` is raised while ``earlier`` waits to be: ``later``, chained to ``earlier``.

    As in a ``finally:`` block, the later exception propagates and the
    earlier one becomes the end of its ``__context__`` chain, so a second
    ``KeyboardInterrupt`` in one delivery pass is neither lost nor hides the
    first: both show in the traceback. Nothing is chained twice, and no
    cycle is made.
    """
    if earlier is None or earlier is later:
        return later
    seen: BaseException | None = earlier
    while seen is not None:  # later already in earlier's chain: keep that chain
        if seen is later:
            return earlier
        seen = seen.__context__
    tail = later
    while tail.__context__ is not None:
        if tail.__context__ is earlier:
            return later
        tail = tail.__context__
    tail.__context__ = earlier
    return later


def on_next_raised(subscriber: Subscriber[T], error: BaseException) -> None:
    """Settle ``error`` raised by ``subscriber.on_next``, once the publisher has stopped signalling it.

    Rule 2.13: the subscription counts as cancelled and ``error`` is
    reported. An :data:`EXHAUSTED` error is the pipeline's (out of stack or
    memory), not a broken subscriber's: the subscriber gets ``on_error(error)``
    instead, from the bottom of this thread's trampoline
    (:func:`flowpy._core.serial.defer`), where there is room for it.
    """
    if isinstance(error, EXHAUSTED):
        from flowpy._core.serial import defer  # here: flowpy._core.serial imports this module

        defer(partial(signal_terminal, subscriber, error))
        return
    report(error, f"on_next of {subscriber!r} raised (rule 2.13)")


def signal_subscribe(subscriber: Subscriber[T], subscription: Subscription) -> bool:
    """Call ``on_subscribe``; return whether it returned normally (rules 2.13, 1.9).

    If it raised, ``subscription`` is cancelled (which must release what it
    holds and stop every further signal) and the subscriber gets
    ``on_error`` with the raised exception, once; the exception does not
    propagate, as with the JDK's ``SubmissionPublisher``. A raising
    ``on_error`` is reported with :func:`report`. A ``BaseException`` that is
    not an ``Exception`` is re-raised after that (:func:`reraise_fatal`).
    """
    try:
        subscriber.on_subscribe(subscription)
    except BaseException as exc:
        try:
            call_subscription(subscription, None)
            signal_terminal(subscriber, exc)
        finally:
            reraise_fatal(exc)
        return False
    return True


def signal_terminal(subscriber: Subscriber[T], error: BaseException | None) -> None:
    """Call ``on_error(error)``, or ``on_complete()`` if ``error`` is ``None``; report a raise (rule 2.13).

    A raised ``BaseException`` that is not an ``Exception`` is re-raised after the report.
    """
    try:
        if error is None:
            subscriber.on_complete()
        else:
            subscriber.on_error(error)
    except BaseException as exc:
        name = "on_complete" if error is None else "on_error"
        report(exc, f"{name} of {subscriber!r} raised (rule 2.13)")
        reraise_fatal(exc)


def call_subscription(subscription: Subscription, n: int | None) -> None:
    """Call ``request(n)``, or ``cancel()`` if ``n`` is ``None``; report a raise (rules 3.15, 3.16).

    A raised ``BaseException`` that is not an ``Exception`` is re-raised after the report.
    A ``cancel`` that runs out of stack or memory (:data:`EXHAUSTED`) is not
    reported but made again from the bottom of this thread's trampoline
    (:func:`flowpy._core.serial.defer`), where there is room for it: cancel
    is idempotent (rule 3.7), and a chain of relays cancels through a call
    per stage.
    """
    try:
        if n is None:
            subscription.cancel()
        else:
            subscription.request(n)
    except BaseException as exc:
        if n is None and isinstance(exc, EXHAUSTED):
            from flowpy._core.serial import defer  # here: flowpy._core.serial imports this module

            defer(subscription.cancel)
            return
        name = "cancel" if n is None else "request"
        report(exc, f"{name} of {subscription!r} raised (rules 3.15, 3.16)")
        reraise_fatal(exc)
