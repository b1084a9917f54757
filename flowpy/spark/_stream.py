"""publish_stream: a Structured Streaming query feeding a SubmissionPublisher."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from flowpy.errors import ClosedPublisherError
from flowpy.executors import DEFAULT, resolve_execute
from flowpy.flow import Subscriber, default_buffer_size
from flowpy.spark._arrow import row_to_dict
from flowpy.spark._session import is_connect
from flowpy.submission import SubmissionPublisher

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming.query import StreamingQuery

__all__ = ["StreamPublisher", "publish_stream"]

T = TypeVar("T")

_CONNECT_REFUSAL = (
    "publish_stream needs a classic SparkSession: Spark Connect runs foreachBatch on the server, "
    "so the query cannot wait for this process's subscribers; use stream_publisher, which works on both"
)

_CLOSE_CHECK_SECONDS = 0.1  # how often a micro-batch waiting for a subscriber checks for close()


def publish_stream(
    streaming_df: DataFrame,
    *,
    max_buffer_capacity: int = default_buffer_size(),
    trigger: Mapping[str, Any] | None = None,
    checkpoint_location: str | None = None,
    query_name: str | None = None,
) -> tuple[SubmissionPublisher[dict[str, Any]], StreamingQuery]:
    """Start ``streaming_df`` and publish each of its rows, as a dict, to the returned publisher.

    Every micro-batch is handed over in ``foreachBatch``: its rows are read
    one partition at a time and passed to ``submit``, which blocks while a
    subscriber's buffer is full. The query's next micro-batch starts only
    when the current one has been accepted, so slow subscribers slow the
    query instead of filling memory. The first micro-batch waits for the
    first subscriber; a subscriber that comes later gets the rows submitted
    after it subscribed.

    When the query ends (``query.stop()``, an ``availableNow`` trigger
    running out of input, or a failure) the publisher is closed: subscribers
    get every row already accepted, then ``on_complete``, or ``on_error``
    with the query's exception (see :meth:`StreamPublisher.fail`: the error
    waits for the rows a subscriber's demand lets it take, not for new
    requests). ``query.stop()`` waits until the micro-batch
    under way has been accepted; to stop at once, close the publisher first:
    the blocked ``submit`` raises, and the query fails with that error.

    Args:
        streaming_df: a streaming DataFrame (``spark.readStream...``).
        max_buffer_capacity: each subscriber's buffer, in rows.
        trigger: keyword arguments for ``DataStreamWriter.trigger``, e.g.
            ``{"processingTime": "1 second"}`` or ``{"availableNow": True}``.
        checkpoint_location: the query's checkpoint directory; ``None`` lets Spark use a temporary one.
        query_name: the query's name, shown by ``spark.streams``.

    Returns:
        The publisher and the running query.

    Spark Connect runs ``foreachBatch`` on the server, not in this process,
    so no ``submit`` of this process could hold the query: on a Connect
    session the call is refused at once. There, use
    :func:`~flowpy.spark.stream_publisher`, whose write tasks send the rows
    to this process and block while its buffer is full.

    Raises:
        ValueError: if ``streaming_df`` is not streaming, or ``max_buffer_capacity`` is not positive.
        NotImplementedError: if ``streaming_df`` belongs to a Spark Connect session.
    """
    if is_connect(streaming_df.sparkSession):
        raise NotImplementedError(_CONNECT_REFUSAL)
    if not streaming_df.isStreaming:
        raise ValueError(f"streaming_df must be a streaming DataFrame (spark.readStream), got {streaming_df!r}")
    publisher: StreamPublisher[dict[str, Any]] = StreamPublisher(max_buffer_capacity)

    def hand_over(batch: DataFrame, batch_id: int) -> None:
        publisher.await_subscriber()
        submit = publisher.submit
        for row in batch.toLocalIterator():
            submit(row_to_dict(row))

    writer = streaming_df.writeStream.foreachBatch(hand_over)
    if trigger:
        writer = writer.trigger(**trigger)
    if checkpoint_location is not None:
        writer = writer.option("checkpointLocation", checkpoint_location)
    if query_name is not None:
        writer = writer.queryName(query_name)
    query = writer.start()

    def close_when_terminated() -> None:
        try:
            query.awaitTermination()
        except BaseException as exc:
            publisher.fail(exc)
        else:
            publisher.close()

    threading.Thread(target=close_when_terminated, name=f"flowpy-stream-{query.id}", daemon=True).start()
    return publisher, query


class StreamPublisher(SubmissionPublisher[T]):
    """A SubmissionPublisher that lets a streaming query wait for its first subscriber, and fail after its rows.

    Its subscribers are called on the shared pool, through a
    :class:`_TaskCount`.
    """

    def __init__(self, max_buffer_capacity: int) -> None:
        tasks = _TaskCount(resolve_execute(DEFAULT))
        super().__init__(tasks, max_buffer_capacity=max_buffer_capacity)
        self._tasks = tasks
        self._first_subscriber = threading.Event()  # set by the first subscribe()

    def subscribe(self, subscriber: Subscriber[T]) -> None:
        super().subscribe(subscriber)
        self._first_subscriber.set()

    def await_subscriber(self) -> None:
        """Block until a subscriber came.

        Raises:
            ClosedPublisherError: if the publisher is closed meanwhile.
        """
        while not self._first_subscriber.wait(_CLOSE_CHECK_SECONDS):
            if self.is_closed:
                raise ClosedPublisherError("cannot hand over a micro-batch: the stream's publisher was closed")

    def fail(self, error: BaseException) -> None:
        """``close_exceptionally(error)`` once every subscriber took the items its demand lets it take.

        ``close_exceptionally`` drops buffered items; a stream's rows, once
        accepted, are promised before its error. So the error waits until no
        subscriber's consumer task is queued or running and no subscriber has
        both buffered items and demand (a request whose task is still on its
        way to the executor): at once if that holds, else when the last
        consumer task that makes it hold ends (on the pool thread, after it).
        A subscriber whose demand is spent then gets ``on_error`` without the
        items still buffered for it: the error waits for the demand there
        is, never for a request, so a subscriber that stops requesting does
        not hold it back. Returns at once.
        """
        self._tasks.call_when_idle(lambda: self.close_exceptionally(error), self._taken)

    def _taken(self) -> bool:
        """Whether no subscriber has buffered items it requested (racy read, made while no task is counted)."""
        return all(not (s.buffered and s.demand) for s in self.snapshot().subscribers)


class _TaskCount:
    """An executor that counts the tasks it was given and that have not ended, and calls back when none is left.

    The publisher's consumer tasks run here. A subscription with buffered
    items and outstanding demand has its task queued or running, or is
    about to hand one over (a ``request`` that raised the demand and has not
    called :meth:`execute` yet); an item it took from its buffer is
    delivered before that task ends. So once the count is 0 and no
    subscription has buffered items and demand, every subscriber has taken
    every item its demand allowed; and while a subscription has both, a
    task of it is counted or will be, whose end looks again.
    """

    def __init__(self, execute: Callable[[Callable[[], object]], object]) -> None:
        self._execute = execute
        self._lock = threading.Lock()
        # --- Guarded by self._lock ----------------------------------------
        self._active = 0  # tasks given to execute() that have neither ended nor been refused
        self._ends = 0  # how many times _active came down to 0: a look that raced one looks again
        # Callbacks waiting for the count to be 0 and their condition to hold, each with that condition;
        # looked at, outside the lock, by whoever brings _active to 0 (or finds it there).
        self._when_idle: list[tuple[Callable[[], object], Callable[[], bool]]] = []

    def execute(self, task: Callable[[], object]) -> None:
        """Run ``task`` on the underlying executor, counted until it ends.

        Raises:
            BaseException: what the underlying executor raised; the task is then not counted.
        """
        counted = _Counted(self, task)
        with self._lock:
            self._active += 1
        try:
            self._execute(counted)
        except BaseException:
            counted.end()
            raise

    def call_when_idle(self, fn: Callable[[], object], ready: Callable[[], bool]) -> None:
        """Call ``fn`` once no task is counted and ``ready()`` is true: now, or on the thread of a task that ends.

        ``ready`` must become true by itself only through the end of a
        counted task (it is looked at again only then).
        """
        with self._lock:
            self._when_idle.append((fn, ready))
            if self._active:
                return
        self._call_due()

    def _ended(self) -> None:
        with self._lock:
            self._active -= 1
            if self._active:
                return
            self._ends += 1
        self._call_due()

    def _call_due(self) -> None:
        """Call the waiting callbacks whose condition holds, while no task is counted; keep the others."""
        while True:
            with self._lock:
                if self._active or not self._when_idle:
                    return
                waiting, self._when_idle = self._when_idle, []
                ends = self._ends
            due: list[Callable[[], object]] = []
            later: list[tuple[Callable[[], object], Callable[[], bool]]] = []
            for fn, ready in waiting:
                if ready():
                    due.append(fn)
                else:
                    later.append((fn, ready))
            if later:
                with self._lock:
                    self._when_idle.extend(later)
                    # A task that ended while we looked found no callback: look again for it.
                    again = not self._active and self._ends != ends
            else:
                again = False
            for fn in due:
                fn()
            if not again:
                return


class _Counted:
    """One task of a :class:`_TaskCount`: runs it, then ends its count, once."""

    __slots__ = ("_count", "_ended", "_task")

    def __init__(self, count: _TaskCount, task: Callable[[], object]) -> None:
        self._count = count
        self._task = task
        self._ended = False  # guarded by count._lock: the count was taken back

    def __call__(self) -> None:
        try:
            self._task()
        finally:
            self.end()

    def end(self) -> None:
        """Take this task off the count, unless it was already."""
        count = self._count
        with count._lock:
            if self._ended:
                return
            self._ended = True
        count._ended()
