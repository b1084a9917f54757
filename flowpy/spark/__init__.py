"""flowpy on Apache Spark: reactive pipelines whose heavy stages run on PySpark.

* :func:`local_session` starts (or joins) a SparkSession: embedded
  ``local[*]`` by default, any cluster by its master URL, or a Spark
  Connect server with ``remote="sc://host:port"``.
* :class:`DataFramePublisher` publishes a DataFrame's rows, or Arrow record
  batches of bounded size, on demand.
* :class:`ParquetSink` writes a stream of rows or columnar batches
  (``pyarrow.RecordBatch``/``Table``, ``pandas.DataFrame``) to Parquet, one
  atomic file at a time.
* :class:`SparkProcessor` runs a DataFrame function on micro-batches of a stream.
* :func:`stream_source` makes a publisher a streaming DataFrame, Spark's
  read limit its demand; :func:`stream_publisher` makes a streaming query a
  publisher, delivering each micro-batch once Spark commits it, on classic
  and Spark Connect sessions alike.
* :func:`publish_stream` feeds a Structured Streaming query into a
  ``SubmissionPublisher`` through ``foreachBatch`` (classic sessions).

PySpark, pyarrow and pandas come with the ``spark`` extra
(``pip install 'flowpy[spark]'``) and a Java runtime is needed to run Spark;
this package imports without them and says what is missing when used.
"""

from typing import TYPE_CHECKING

from flowpy.spark._processor import SparkProcessor, Transform
from flowpy.spark._publisher import DataFramePublisher
from flowpy.spark._session import MASTER_ENV, REMOTE_ENV, SparkUnavailableError, is_connect, local_session
from flowpy.spark._sink import ParquetSink, ParquetSinkError, SinkStats, WriteMode
from flowpy.spark._stream import publish_stream

if TYPE_CHECKING:
    from flowpy.spark._stream_publisher import QueryPublisher, StreamMode, stream_publisher
    from flowpy.spark._stream_source import HELD_BATCHES, stream_source

_STREAMING = {
    "HELD_BATCHES": "_stream_source",
    "stream_source": "_stream_source",
    "QueryPublisher": "_stream_publisher",
    "StreamMode": "_stream_publisher",
    "stream_publisher": "_stream_publisher",
}


def __getattr__(name: str) -> object:
    # The streaming bridge subclasses PySpark's data source classes, so it is
    # loaded on first use: the package imports without PySpark.
    module = _STREAMING.get(name)
    if module is None:
        raise AttributeError(f"module 'flowpy.spark' has no attribute {name!r}")
    from importlib import import_module

    from flowpy.spark._session import require_pyspark

    require_pyspark()
    return getattr(import_module(f"flowpy.spark.{module}"), name)


__all__ = [
    "HELD_BATCHES",
    "MASTER_ENV",
    "REMOTE_ENV",
    "DataFramePublisher",
    "ParquetSink",
    "ParquetSinkError",
    "QueryPublisher",
    "SinkStats",
    "SparkProcessor",
    "SparkUnavailableError",
    "StreamMode",
    "Transform",
    "WriteMode",
    "is_connect",
    "local_session",
    "publish_stream",
    "stream_publisher",
    "stream_source",
]
