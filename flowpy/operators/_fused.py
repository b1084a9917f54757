"""Fusion: a chain of synchronous operators that runs as one stage.

``map``, ``filter``, ``take``, ``skip``, ``take_while`` and ``scan`` do not
need a queue or a thread of their own: each turns one upstream item into at
most one downstream item, at once. Applied to a publisher that is already such
a chain, they add a :class:`Step` to it instead of a new subscriber, so
``source.map(f).filter(g).take(5)`` subscribes *one* :class:`FusedSubscriber`
to ``source``. That subscriber applies the steps in line, on the thread that
delivers the upstream's signals, as Akka Streams' fused stages do.

Demand crosses the stage step by step, from the last step to the first
(rule 3.8 stays exact):

* ``map``, ``scan``, ``take_while``: pass demand through;
* ``take(n)``: caps the total requested upstream at ``n``;
* ``skip(n)``: adds ``n`` to the first request;
* ``filter``: passes demand through and asks again for what it drops.

Threading: items are handled on the upstream's delivering thread, serially
(rule 1.3). ``request`` may come from any thread; the demand arithmetic is
done under a lock that is released before ``request`` goes upstream.
"""

from __future__ import annotations

import functools
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from flowpy._checks import require_subscriber
from flowpy._core.serial import defer, trampoline
from flowpy._demand import add_demand
from flowpy._signals import EXHAUSTED, report, reraise_fatal
from flowpy.flow import Publisher, Subscriber
from flowpy.operators._base import Relay, signal_deep

__all__ = ["Demand", "FusedPublisher", "FusedSubscriber", "Step", "fuse", "indent"]

T_co = TypeVar("T_co", covariant=True)

Demand = Callable[[int], int]
"""Turns the demand arriving at a step from below into the demand it passes up."""

_CREDIT_CAP = 2**30 - 1  # the largest int CPython stores in one 30-bit digit

OnNext = Callable[[Any], None]
Factory = Callable[..., tuple[OnNext, Callable[[], None]]]
"""Makes the compiled ``on_next`` of one subscription, and its ``stop``."""


# Implementation overview
#
# Speed is the point of fusion, and in CPython the cost of an item is the
# number of Python calls and variable accesses spent on it. So a chain is
# compiled, on its first subscribe and once per shape of chain (the source
# text is the cache key), into one on_next function: each Step
# contributes a few lines of source (Step.code) operating on the local
# `item`, and its per-subscription state (the count left to take, the
# running accumulator) lives in closure variables of that function. An item
# then costs one call of on_next plus the calls of the user's functions,
# and no objects besides the counters' ints. Only names of the form <name><index> and fixed text
# are ever put into the source; the user's functions and values are passed
# to the compiled factory as arguments.
#
# The steps' lines follow one another at one indentation level, inside a
# `while True:` that a step leaves with `break` to drop an item or end the
# stream: nothing nests per step, so a chain of any length compiles (CPython
# refuses 100 levels of indentation). Step.after() lines (take's end) follow
# the loop.
#
# Step.demand() is the request side: a cap (take), a one-time addition
# (skip), or None when demand passes through.
#
# Filter drops are asked for again in batches: the compiled code counts them
# per filter (dropped<index>), and counts down `credit`, the items still to
# come of those requested upstream as last seen. When it reaches 0 with
# drops counted, FusedSubscriber.settle() looks at the demand again
# (`requested`, read without the lock, can only look smaller, which only
# makes the replenishment come sooner): if everything requested has arrived,
# it sends the drops back up, through the demand functions of the steps
# above each filter, in one request.
#
# The compiled code checks its own `live` flag rather than the stage's
# `done`: stop() clears it whenever the stage ends (FusedSubscriber._end).


def indent(lines: list[str]) -> list[str]:
    """Indent source ``lines`` by one level."""
    return ["    " + line for line in lines]


class Step(ABC):
    """One synchronous operator inside a fused stage."""

    __slots__ = ()

    @abstractmethod
    def code(self, index: int) -> list[str]:
        """Return source lines that apply this step to ``item``, at the level of the chain's other steps.

        The lines run one after the other for every step, never nested in
        one another. ``break`` ends the item's way through the chain (the
        step dropped it or ended the stream), so the lines hold no loop of
        their own. They may call ``complete()`` (end the stream early),
        ``stage.finish(error)`` (end it with ``error``), count a drop
        (``filter``: ``dropped<index> += 1``), and use the names returned by
        :meth:`arguments` and :meth:`state`.
        """

    def after(self, index: int) -> list[str]:
        """Return source lines run once every item has left the chain, passed on or not (``take``'s end).

        They run for every item that raised nowhere in the chain, whichever
        step it reached, the later steps' lines first.
        """
        return []

    def arguments(self, index: int) -> dict[str, object]:
        """Return the constants the code uses (functions, messages), by name."""
        return {}

    def state(self, index: int) -> dict[str, str]:
        """Return per-subscription variables: name -> its initial value (an argument name or a literal)."""
        return {}

    def demand(self) -> Demand | None:
        """Return this step's demand function for one subscription, or ``None`` to pass demand through."""
        return None

    @property
    def is_empty(self) -> bool:
        """Whether no item ever passes this step (``take(0)``)."""
        return False

    @property
    def drops(self) -> bool:
        """Whether this step may drop items and must ask for them again (``filter``)."""
        return False


def _compile(steps: tuple[Step, ...]) -> tuple[Factory, dict[str, object]]:
    """Compile ``steps`` into a factory of ``on_next`` functions, and the constants it takes."""
    arguments: dict[str, object] = {}
    state: dict[str, str] = {}
    body: list[str] = []
    after: list[str] = []
    for index, step in enumerate(steps):
        body += step.code(index)
        after[:0] = step.after(index)
        arguments.update(step.arguments(index))
        state.update(step.state(index))
    drops = [f"dropped{index}" for index, step in enumerate(steps) if step.drops]
    counts = ", ".join(f"({name[len('dropped') :]}, {name})" for name in drops)
    variables = ", ".join(["credit", *state])
    source = [
        f"def make({', '.join(['stage', 'emit', 'complete', 'fail', *arguments])}):",
        *[f"    {name} = {initial}" for name, initial in state.items()],
        "    live = True",
        "    credit = 0",
        "    def on_next(item):",
        f"        nonlocal {variables}",
        "        if item is None:",
        "            raise TypeError('item must not be None (rule 2.13)')",
        "        if not live:",
        "            return",
        *(["        credit -= 1"] if drops else []),
        "        try:",
        "            while True:",  # left by `break` where a step ends the item's way
        *indent(indent(indent(indent([*body, "emit(item)", "break"])))),
        *indent(indent(indent(after))),
        "        except BaseException as error:",
        "            fail(error)",
        "            return",
        *(
            [
                f"        if credit <= 0 and ({' or '.join(drops)}):",
                f"            credit, settled = stage.settle(credit, ({counts},))",
                "            if settled:",
                f"                {' = '.join(drops)} = 0",
            ]
            if drops
            else []
        ),
        "    def stop():",
        "        nonlocal live",
        "        live = False",
        "    return on_next, stop",
    ]
    return _factory("\n".join(source)), arguments


@functools.lru_cache(maxsize=256)
def _factory(source: str) -> Factory:
    """Compile the factory ``source``; chains of the same shape share one compiled factory."""
    namespace: dict[str, Any] = {}
    exec(compile(source, "<fused chain>", "exec"), namespace)
    return namespace["make"]  # type: ignore[no-any-return]


# The two walks of the demand functions below run under FusedSubscriber._lock,
# each in a frame of its own: a loop in a lock's with block could lose the lock
# to a Ctrl-C on CPython 3.12+ (docs/internals.md, "Loops and locks").


def _pass_up(adjusters: tuple[Demand | None, ...], n: int) -> int | None:
    """``n`` as the first step asks it of the upstream, through every step's demand function.

    ``None`` when a step asks for nothing more.
    """
    for adjust in reversed(adjusters):
        if adjust is not None:
            n = adjust(n)
            if not n:
                return None
    return n


def _carry_up(adjusters: tuple[Demand | None, ...], counts: dict[int, int]) -> int:
    """The upstream request that replaces ``counts[i]`` items dropped by step ``i``, through the steps above it."""
    carry = 0
    for index in range(len(adjusters) - 1, -1, -1):
        carry += counts.get(index, 0)
        if carry and index:
            adjust = adjusters[index - 1]
            if adjust is not None:
                carry = adjust(carry)
    return carry


class FusedPublisher(Publisher[T_co]):
    """A publisher that applies a chain of steps to a source, in one subscriber."""

    __slots__ = ("_compiled", "_source", "_steps")

    def __init__(self, source: Publisher[Any], steps: tuple[Step, ...]) -> None:
        self._source = source
        self._steps = steps
        # Compiled on the first subscribe: the intermediate publishers of a
        # chain built step by step are never subscribed. Two threads may
        # both compile; they get equal results.
        self._compiled: tuple[Factory, dict[str, object]] | None = None

    @property
    def steps(self) -> tuple[Step, ...]:
        """The fused steps, first applied first."""
        return self._steps

    def subscribe(self, subscriber: Subscriber[T_co]) -> None:
        """Subscribe one :class:`FusedSubscriber` for ``subscriber`` to the source.

        Raises:
            TypeError: if ``subscriber`` is ``None`` (rule 1.9).
        """
        require_subscriber(subscriber)
        compiled = self._compiled
        if compiled is None:
            compiled = self._compiled = _compile(self._steps)
        factory, arguments = compiled
        # Through the trampoline, as StagePublisher.subscribe: a deep pipeline's subscribe does not recurse.
        stage: FusedSubscriber[T_co] = FusedSubscriber(subscriber, self._steps, factory, arguments)
        trampoline(functools.partial(self._source.subscribe, stage))

    def __repr__(self) -> str:
        return f"<FusedPublisher {' -> '.join(type(s).__name__ for s in self._steps)} over {self._source!r}>"


def fuse(source: Publisher[Any], step: Step) -> Publisher[Any]:
    """Return ``source`` with ``step`` appended: the same stage if ``source`` is fused, else a new one."""
    if isinstance(source, FusedPublisher):
        return FusedPublisher(source._source, (*source._steps, step))
    return FusedPublisher(source, (step,))


class FusedSubscriber(Relay, Generic[T_co]):
    """Subscribes to the source of a fused chain and runs its steps in line.

    It is the downstream's subscription as well: ``request`` and ``cancel``
    go through the steps' demand functions to the upstream subscription.
    ``on_next`` is the compiled chain (see the implementation overview).
    """

    __slots__ = ("_adjusters", "_empty", "_lock", "_stop", "_synced", "on_next", "requested")

    on_next: OnNext  # type: ignore[assignment]  # the compiled chain, per instance

    def __init__(
        self,
        downstream: Subscriber[Any],
        steps: tuple[Step, ...],
        factory: Factory,
        arguments: dict[str, object],
    ) -> None:
        super().__init__(downstream)
        self._empty = any(step.is_empty for step in steps)
        # --- Guarded by self._lock: the request-side state -----------------
        self._lock = threading.Lock()
        self._adjusters = tuple(step.demand() for step in steps)
        self.requested = 0  # total requested upstream; read racily by on_next
        # --- Touched only on the delivering thread ------------------------
        self._synced = 0  # the value of `requested` the compiled code's credit counts down from
        self.on_next, self._stop = factory(self, downstream.on_next, self.complete, self._fail, **arguments)

    def _started(self) -> None:
        """The downstream has its subscription: a chain with ``take(0)`` completes at once."""
        if self._empty:
            self.complete()

    # --- Called by the compiled chain, on the delivering thread -----------

    def _end(self) -> bool:
        if not super()._end():
            return False
        self._stop()
        return True

    def complete(self) -> None:
        """End the stage early (``take``, ``take_while``): cancel upstream, then ``on_complete``."""
        if not self._end():
            return
        assert self.upstream is not None
        signal_deep(self.upstream.cancel)
        signal_deep(self._downstream.on_complete)

    def _fail(self, error: BaseException) -> None:
        """A step raised: cancel upstream, then ``on_error``; then :func:`~flowpy._signals.reraise_fatal`.

        Out of stack or memory (:data:`~flowpy._signals.EXHAUSTED`), the chain
        stops taking items at once and the rest is done from the bottom of
        this thread's trampoline (:func:`~flowpy._core.serial.defer`), where
        there is room for it; if even that raises, nothing has changed here
        and the error goes on up to the stage above.
        """
        if isinstance(error, EXHAUSTED):
            defer(functools.partial(self._fail_now, error))
            self._stop()
            return
        self._fail_now(error)

    def _fail_now(self, error: BaseException) -> None:
        if not self.finish(error):  # cancelled meanwhile, or the downstream's on_complete raised
            report(error, f"{type(self).__name__} could not signal an error after its end")
        reraise_fatal(error)

    def finish(self, error: BaseException) -> bool:
        """End the stage early with ``error`` (``dematerialize``): cancel upstream, then ``on_error``.

        Returns whether the stage was still open; ``error`` is never re-raised here.
        """
        if not self._end():
            return False
        assert self.upstream is not None
        signal_deep(self.upstream.cancel)
        signal_deep(functools.partial(self._downstream.on_error, error))
        return True

    def settle(self, credit: int, dropped: tuple[tuple[int, int], ...]) -> tuple[int, bool]:
        """See whether the drops are due; called by the compiled chain when ``credit <= 0``.

        Args:
            credit: items still to come of the demand last seen (0 or less).
            dropped: (step index, items dropped there and not yet asked for again).

        Returns:
            The new credit, and whether the drops were asked for again (or
            need not be), so that the chain resets its counts.
        """
        received = self._synced - credit
        requested = self.requested
        settled = requested <= received  # everything requested has arrived
        if settled:
            self._replenish(dropped)
            requested = self.requested
        # The credit is capped so that counting it down stays on one-digit ints
        # (no multi-digit arithmetic per item under unbounded demand); the cap
        # only makes the chain come back here sooner.
        credit = min(requested - received, _CREDIT_CAP)
        self._synced = received + credit
        return credit, settled

    def _replenish(self, dropped: tuple[tuple[int, int], ...]) -> None:
        """Ask again, in one request, for the dropped items, through the demand functions above each filter."""
        with self._lock:
            if self.done:
                return
            carry = _carry_up(self._adjusters, dict(dropped))
            if not carry:  # a take above the filters has asked for all it needs
                return
            self.requested = add_demand(self.requested, carry)
        assert self.upstream is not None
        self.upstream.request(carry)

    # --- Subscription side (called by the downstream) ---------------------

    def request(self, n: int) -> None:
        """Pass ``n`` up through the steps' demand functions (rules 3.8, 3.17).

        An invalid ``n`` is passed up unchanged, so that the upstream signals
        ``on_error`` in order with its other signals (rule 3.9).
        """
        upstream = self._upstream_for(n)
        if upstream is None:
            return
        with self._lock:
            passed = _pass_up(self._adjusters, n)
            if passed is None:
                return
            self.requested = add_demand(self.requested, passed)
        upstream.request(passed)
