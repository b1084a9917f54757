"""Machinery shared by the operators: argument checks, the serial drain loop.

Every asynchronous operator (``observe_on``, ``merge``, ``zip``, the
backpressure operators, ...) delivers to its subscriber from a *drain loop*
that at most one thread runs at a time. :class:`SerialDrain` implements the
"work in progress" counter that guarantees it: a thread that signals while
another drains only bumps the counter, and the draining thread loops once more
before it leaves, so no signal is ever lost and subscriber methods are always
called serially (rule 1.3).
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

from flowpy._demand import MAX_DEMAND, add_demand, check_request
from flowpy.executors import Executor, Task, as_execute, default_executor
from flowpy.flow import Subscriber, Subscription

__all__ = [
    "DEFAULT_EXECUTOR",
    "CancelledSubscription",
    "DemandDrain",
    "SerialDrain",
    "reject_subscriber",
    "report_dropped",
    "require_callable",
    "require_non_negative",
    "require_positive",
    "require_publisher",
    "require_subscriber",
    "resolve_executor",
]


class _DefaultExecutor:
    """The default value of ``executor`` parameters: the shared pool."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "default_executor()"


DEFAULT_EXECUTOR: Any = _DefaultExecutor()
"""Leave ``executor`` out to get :func:`flowpy.executors.default_executor`; ``None`` is refused."""


def resolve_executor(executor: Executor) -> Callable[[Task], object]:
    """Return the ``execute(fn)`` of ``executor``, or of the shared pool for :data:`DEFAULT_EXECUTOR`.

    Raises:
        TypeError: if ``executor`` is ``None`` or not an executor.
    """
    if executor is DEFAULT_EXECUTOR:
        executor = default_executor()
    return as_execute(executor, name="executor")


def require_subscriber(subscriber: object) -> None:
    """Raise ``TypeError`` if ``subscriber`` is ``None`` (rule 1.9)."""
    if subscriber is None:
        raise TypeError("subscriber must not be None (rule 1.9)")


def require_publisher(publisher: object, name: str = "publisher") -> None:
    """Raise ``TypeError`` unless ``publisher`` has a ``subscribe`` method."""
    if not callable(getattr(publisher, "subscribe", None)):
        raise TypeError(f"{name} must be a Publisher, got {publisher!r}")


def require_callable(fn: object, name: str) -> None:
    """Raise ``TypeError`` unless ``fn`` is callable."""
    if not callable(fn):
        raise TypeError(f"{name} must be callable, got {fn!r}")


def _require_int(value: object, name: str) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} must be an int, got {value!r}")


def require_positive(value: object, name: str) -> None:
    """Raise unless ``value`` is an ``int`` greater than zero.

    Raises:
        TypeError: if ``value`` is not an ``int`` (``bool`` is not one here).
        ValueError: if ``value <= 0``.
    """
    _require_int(value, name)
    if value <= 0:  # type: ignore[operator]
        raise ValueError(f"{name} must be positive, got {value!r}")


def require_non_negative(value: object, name: str) -> None:
    """Raise unless ``value`` is an ``int`` of at least zero.

    Raises:
        TypeError: if ``value`` is not an ``int`` (``bool`` is not one here).
        ValueError: if ``value < 0``.
    """
    _require_int(value, name)
    if value < 0:  # type: ignore[operator]
        raise ValueError(f"{name} must be non-negative, got {value!r}")


class CancelledSubscription(Subscription):
    """A subscription that is over before it starts: both methods do nothing."""

    __slots__ = ()

    def request(self, n: int) -> None:
        """Do nothing (rule 3.6)."""

    def cancel(self) -> None:
        """Do nothing (rule 3.7)."""


def report_dropped(error: BaseException) -> None:
    """Report an error that has nowhere to go (the stream has ended) to :func:`threading.excepthook`."""
    threading.excepthook(
        threading.ExceptHookArgs((type(error), error, error.__traceback__, threading.current_thread()))
    )


def reject_subscriber(subscriber: Subscriber[Any], error: BaseException) -> None:
    """Refuse ``subscriber``: ``on_subscribe`` with a dead subscription, then ``on_error`` (rule 1.9)."""
    subscriber.on_subscribe(CancelledSubscription())
    subscriber.on_error(error)


class SerialDrain(ABC):
    """A drain loop that runs on one thread at a time and never misses a signal.

    Subclasses implement :meth:`_drain`, which delivers whatever it can and
    returns; :meth:`_signal` is called after every change of state that may
    let it deliver more (an item arrived, demand grew, a terminal signal, a
    cancel). :meth:`_start` runs the loop; it runs it inline, and
    ``observe_on`` overrides it to hand the loop to an executor.
    """

    __slots__ = ("_wip", "_wip_lock")

    def __init__(self, *, held: bool = False) -> None:
        # Guards _wip only; no subscriber code runs while it is held.
        self._wip_lock = threading.Lock()
        # Number of signals not yet seen by a drain pass; the thread that
        # moves it from 0 to 1 owns the loop until it brings it back to 0.
        # ``held``: the creating thread owns the loop until _release(), so
        # nothing is delivered before, say, on_subscribe has returned.
        self._wip = 1 if held else 0

    def _release(self) -> None:
        """Give up the loop held since ``__init__``; run a pass if a signal came meanwhile."""
        with self._wip_lock:
            self._wip -= 1
            if self._wip == 0:
                return
        self._start()

    def _signal(self) -> None:
        """Make a drain pass happen after this call: run one, or tell the running one."""
        with self._wip_lock:
            self._wip += 1
            if self._wip != 1:
                return
        self._start()

    def _start(self) -> None:
        """Run the loop; called by the thread that now owns it."""
        self._run_drain()

    def _run_drain(self) -> None:
        """Drain until no signal arrived during the last pass."""
        missed = 1
        drain = self._drain
        lock = self._wip_lock
        while True:
            drain()
            with lock:
                self._wip -= missed
                missed = self._wip
                if missed == 0:
                    return

    @abstractmethod
    def _drain(self) -> None:
        """Deliver what can be delivered now; runs on one thread at a time."""


class DemandDrain(SerialDrain, Subscription):
    """A :class:`SerialDrain` that is also the downstream's subscription.

    It keeps the downstream's demand, its cancellation and the first failure;
    the subclass's :meth:`_drain` delivers within ``_requested``, reports what
    it delivered with :meth:`_produced`, and acts on ``cancelled`` and
    ``_failure`` (signalled at once, ahead of queued items).
    """

    __slots__ = ("_failure", "_lock", "_requested", "cancelled")

    def __init__(self, *, held: bool = False) -> None:
        super().__init__(held=held)
        self.cancelled = False  # set by cancel() or a terminal signal; never cleared
        # --- Guarded by self._lock -----------------------------------------
        self._lock = threading.Lock()
        self._requested = 0  # unfilled downstream demand; MAX_DEMAND is unbounded
        self._failure: BaseException | None = None  # the first failure; never replaced

    def fail(self, error: BaseException) -> None:
        """Record ``error`` unless a failure is already recorded, and let the drain signal it."""
        with self._lock:
            if self._failure is None:
                self._failure = error
        self._signal()

    def request(self, n: int) -> None:
        """Add ``n`` to the demand and let the drain deliver (rules 3.8, 3.17).

        ``n <= 0`` fails the stream with ``ValueError`` (rule 3.9), a non-int
        ``n`` with ``TypeError``; the call itself returns normally (rule 3.16).
        """
        error = check_request(n)
        if error is not None:
            self.fail(error)
            return
        with self._lock:
            self._requested = add_demand(self._requested, n)
        self._signal()

    def cancel(self) -> None:
        """Stop delivering and let the drain release what it holds; idempotent (rules 3.5, 3.7)."""
        if not self.cancelled:
            self.cancelled = True
            self._signal()

    def _produced(self, emitted: int, requested: int) -> None:
        """Subtract ``emitted`` from the demand, which was ``requested`` when the pass began."""
        if emitted and requested != MAX_DEMAND:
            with self._lock:
                self._requested -= emitted
