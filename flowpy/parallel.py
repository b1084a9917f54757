"""ParallelFlowable: a stream split into rails that run side by side, as RxJava's ``ParallelFlowable``.

``Flowable.parallel(rails)`` deals the items of one source out to ``rails``
rails by demand; ``run_on(executor)`` gives each rail its own task on the
executor; ``map`` and ``filter`` work on every rail, where the rail runs;
``sequential()`` merges the rails back into a :class:`~flowpy.flowable.Flowable`
with backpressure, ``reduce(fn)`` folds them into one item and
``sorted(key)`` into one sorted stream::

    >>> from flowpy.flowable import Flowable
    >>> from flowpy.executors import DaemonThreadPool
    >>> pool = DaemonThreadPool(2)
    >>> squares = Flowable.range(1, 6).parallel(2).run_on(pool).map(lambda x: x * x)
    >>> squares.sorted().to_list().result(timeout=10)
    [1, 4, 9, 16, 25, 36]
    >>> squares.reduce(lambda a, b: a + b).to_list().result(timeout=10)
    [91]
    >>> pool.shutdown()

Under the GIL, rails running Python code take turns on one core: use them to
overlap waiting (I/O, C code that releases the GIL), or on a free-threaded
interpreter, where they run at once (docs/performance.md).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

from flowpy import operators
from flowpy._checks import require_callable, require_positive_int
from flowpy.executors import DEFAULT, Default, Executor, resolve_execute
from flowpy.flow import Subscriber
from flowpy.flowable import Flowable
from flowpy.operators import ParallelPublisher
from flowpy.operators._parallel_join import reduce_rails, sorted_rails

__all__ = ["ParallelFlowable"]

T_co = TypeVar("T_co", covariant=True)
R = TypeVar("R")


class ParallelFlowable(Generic[T_co]):
    """Items on :attr:`rails` parallel rails, with the rail operators as methods.

    Nothing runs until the rails are subscribed, by :meth:`sequential`,
    :meth:`reduce` or :meth:`sorted` (each subscription of their
    :class:`~flowpy.flowable.Flowable` runs the chain afresh), or directly
    with :meth:`subscribe` and one subscriber per rail.
    """

    __slots__ = ("_rails",)

    def __init__(self, rails: ParallelPublisher[T_co]) -> None:
        """Wrap ``rails`` (see :func:`flowpy.operators.parallel`).

        Raises:
            TypeError: if ``rails`` is not a :class:`~flowpy.operators.ParallelPublisher`.
        """
        if not isinstance(rails, ParallelPublisher):
            raise TypeError(f"rails must be a ParallelPublisher, got {rails!r}")
        self._rails = rails

    @property
    def rails(self) -> int:
        """How many rails there are."""
        return self._rails.rails

    @property
    def publisher(self) -> ParallelPublisher[T_co]:
        """The wrapped :class:`~flowpy.operators.ParallelPublisher`."""
        return self._rails

    def subscribe(self, subscribers: Sequence[Subscriber[T_co]]) -> None:
        """Subscribe ``subscribers[i]`` to rail ``i`` (see :meth:`~flowpy.operators.ParallelPublisher.subscribe`).

        Raises:
            TypeError: if a subscriber is ``None`` (rule 1.9).
        """
        self._rails.subscribe(subscribers)

    def run_on(self, executor: Executor | Default = DEFAULT, *, prefetch: int = 256) -> ParallelFlowable[T_co]:
        """Run each rail on its own task on ``executor``: ``observe_on(executor, prefetch=prefetch)`` per rail.

        Each rail's signals (and the ``map``/``filter`` functions after it)
        then run one at a time on the executor, and different rails at the
        same time on different threads (RxJava's ``runOn``, with an executor
        task per rail for a scheduler's worker). Demand per rail: as
        :func:`~flowpy.operators.observe_on`: ``prefetch`` items, then 75 % of
        it again as they are delivered; at most ``prefetch`` queued per rail.

        Raises:
            TypeError: if ``executor`` is ``None`` or not an executor.
            ValueError: if ``prefetch`` is not positive.
        """
        if executor is not DEFAULT:
            resolve_execute(executor)  # refuse a bad executor now, not at subscribe
        require_positive_int(prefetch, "prefetch")
        return ParallelFlowable(
            self._rails.through(lambda rail: operators.observe_on(rail, executor, prefetch=prefetch))
        )

    def map(self, fn: Callable[[T_co], R]) -> ParallelFlowable[R]:
        """Emit ``fn(item)`` on each rail, where the rail runs (fused; see :func:`flowpy.operators.map`).

        Raises:
            TypeError: if ``fn`` is not callable.
        """
        require_callable(fn, "fn")
        return ParallelFlowable(self._rails.through(lambda rail: operators.map(rail, fn)))

    def filter(self, predicate: Callable[[T_co], object]) -> ParallelFlowable[T_co]:
        """Keep the items that pass ``predicate`` on each rail (fused; see :func:`flowpy.operators.filter`).

        Raises:
            TypeError: if ``predicate`` is not callable.
        """
        require_callable(predicate, "predicate")
        return ParallelFlowable(self._rails.through(lambda rail: operators.filter(rail, predicate)))

    def sequential(self, prefetch: int = 256) -> Flowable[T_co]:
        """Merge the rails back into one flowable, with backpressure (see :func:`flowpy.operators.sequential`)."""
        return Flowable(operators.sequential(self._rails, prefetch))

    def reduce(self, fn: Callable[[T_co, T_co], T_co]) -> Flowable[T_co]:
        """Fold each rail with ``fn``, then the rails' values: a flowable of one item, or none if there were none.

        See :func:`flowpy.operators._parallel_join.reduce_rails` and docs/operators.md.

        Raises:
            TypeError: if ``fn`` is not callable.
        """
        return Flowable(reduce_rails(self._rails, fn))

    def sorted(self, key: Callable[[T_co], Any] | None = None, *, reverse: bool = False) -> Flowable[T_co]:
        """Sort each rail where it runs, then merge the sorted rails into one flowable.

        ``key`` and ``reverse`` as for :func:`sorted`. Keeps every item. See
        :func:`flowpy.operators._parallel_join.sorted_rails` and docs/operators.md.

        Raises:
            TypeError: if ``key`` is neither ``None`` nor callable.
        """
        return Flowable(sorted_rails(self._rails, key, reverse=reverse))

    def __repr__(self) -> str:
        return f"ParallelFlowable({self._rails!r})"
