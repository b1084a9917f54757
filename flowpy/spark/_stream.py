"""publish_stream: a Structured Streaming query feeding a SubmissionPublisher."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from flowpy.flow import default_buffer_size
from flowpy.spark._arrow import row_to_dict
from flowpy.submission import SubmissionPublisher

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming import StreamingQuery

__all__ = ["publish_stream"]


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
    query instead of filling memory. Subscribe before data flows: a
    ``SubmissionPublisher`` does not replay rows to late subscribers, and
    rows submitted while it has none are dropped.

    When the query ends (``query.stop()``, an ``availableNow`` trigger
    running out of input, or a failure) the publisher is closed: subscribers
    get every row already accepted, then ``on_complete``, or ``on_error``
    with the query's exception. ``query.stop()`` waits until the micro-batch
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

    Raises:
        ValueError: if ``streaming_df`` is not streaming, or ``max_buffer_capacity`` is not positive.
    """
    if not streaming_df.isStreaming:
        raise ValueError(f"streaming_df must be a streaming DataFrame (spark.readStream), got {streaming_df!r}")
    publisher: SubmissionPublisher[dict[str, Any]] = SubmissionPublisher(max_buffer_capacity=max_buffer_capacity)

    def hand_over(batch: DataFrame, batch_id: int) -> None:
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
            publisher.close_exceptionally(exc)
        else:
            publisher.close()

    threading.Thread(target=close_when_terminated, name=f"flowpy-stream-{query.id}", daemon=True).start()
    return publisher, query
