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
* :func:`publish_stream` feeds a Structured Streaming query into a
  ``SubmissionPublisher``, whose blocking ``submit`` slows the query.

PySpark, pyarrow and pandas come with the ``spark`` extra
(``pip install 'flowpy[spark]'``) and a Java runtime is needed to run Spark;
this package imports without them and says what is missing when used.
"""

from flowpy.spark._processor import SparkProcessor, Transform
from flowpy.spark._publisher import DataFramePublisher
from flowpy.spark._session import MASTER_ENV, REMOTE_ENV, SparkUnavailableError, is_connect, local_session
from flowpy.spark._sink import ParquetSink, ParquetSinkError, SinkStats, WriteMode
from flowpy.spark._stream import publish_stream

__all__ = [
    "MASTER_ENV",
    "REMOTE_ENV",
    "DataFramePublisher",
    "ParquetSink",
    "ParquetSinkError",
    "SinkStats",
    "SparkProcessor",
    "SparkUnavailableError",
    "Transform",
    "WriteMode",
    "is_connect",
    "local_session",
    "publish_stream",
]
