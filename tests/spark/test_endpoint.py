"""The app side's socket server: the token on every connection, 127.0.0.1 by default, nothing left after close."""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterator
from typing import Any

import pytest

from flowpy.spark._bridge import _Options, recv_json, send_json
from flowpy.spark._endpoint import Endpoint, advertised_host
from tests.spark.helpers import assert_threads_end


class _Echo:
    """A handler that answers every hello with the op it named, and records the hellos."""

    def __init__(self) -> None:
        self.hellos: list[dict[str, Any]] = []

    def __call__(self, connection: socket.socket, hello: dict[str, Any]) -> None:
        self.hellos.append(hello)
        send_json(connection, {"ok": True, "op": hello["op"]})


@pytest.fixture
def echo_endpoint() -> Iterator[tuple[Endpoint, _Echo]]:
    echo = _Echo()
    endpoint = Endpoint("stream_source", echo, host="127.0.0.1", port=0)
    try:
        yield endpoint, echo
    finally:
        endpoint.close()


def test_endpoint_binds_loopback_and_names_itself_in_its_options(echo_endpoint: tuple[Endpoint, _Echo]) -> None:
    endpoint, _ = echo_endpoint
    assert endpoint._listener.getsockname()[0] == "127.0.0.1"
    options = endpoint.options()
    assert options == {
        "host": "127.0.0.1",
        "port": str(endpoint.port),
        "token": endpoint.token,
        "stream": endpoint.stream,
        "kind": "stream_source",
    }
    assert len(endpoint.token) >= 40 and Endpoint("stream_source", _Echo(), host="127.0.0.1", port=0).token != (
        endpoint.token
    )


@pytest.mark.parametrize(
    ("hello", "reason"),
    [({"op": "read"}, "no token"), ({"op": "read", "token": "guess"}, "a wrong token")],
)
def test_endpoint_connection_without_the_token_is_refused_and_logged(
    echo_endpoint: tuple[Endpoint, _Echo], caplog: pytest.LogCaptureFixture, hello: dict[str, Any], reason: str
) -> None:
    endpoint, echo = echo_endpoint
    with (
        caplog.at_level(logging.WARNING, logger="flowpy.spark"),
        socket.create_connection(("127.0.0.1", endpoint.port)) as sock,
    ):
        send_json(sock, hello)
        answer = recv_json(sock)
        port = sock.getsockname()[1]
        assert sock.recv(1) == b""  # and the connection is closed
    assert answer == {"error": f"flowpy stream_source {endpoint.stream} refused the connection: it presented {reason}"}
    assert echo.hellos == []  # the handler never saw it
    assert [record.getMessage() for record in caplog.records] == [
        f"refused a connection from 127.0.0.1:{port} to flowpy stream_source {endpoint.stream}: {reason}"
    ]
    # The stream still serves connections that present its token.
    assert _Options(endpoint.options()).call_once("read") == {"ok": True, "op": "read"}


def test_endpoint_refusal_reaches_the_spark_side_as_its_one_line(echo_endpoint: tuple[Endpoint, _Echo]) -> None:
    endpoint, _ = echo_endpoint
    forged = _Options({**endpoint.options(), "token": "x" * 43})
    message = rf"^flowpy stream_source {endpoint.stream} refused the connection: it presented a wrong token$"
    with pytest.raises(RuntimeError, match=message):
        forged.call_once("read")


def test_endpoint_hello_that_is_not_json_is_refused(
    echo_endpoint: tuple[Endpoint, _Echo], caplog: pytest.LogCaptureFixture
) -> None:
    endpoint, echo = echo_endpoint
    with (
        caplog.at_level(logging.WARNING, logger="flowpy.spark"),
        socket.create_connection(("127.0.0.1", endpoint.port)) as sock,
    ):
        sock.sendall((1 << 40).to_bytes(8, "big"))  # a frame far over the hello's limit
        answer = recv_json(sock)
    assert answer["error"].startswith(f"flowpy stream_source {endpoint.stream} refused the connection: it presented ")
    assert "over the limit" in answer["error"] and echo.hellos == []
    assert "over the limit" in caplog.records[0].getMessage()


def test_endpoint_close_cuts_connections_ends_threads_and_refuses_new_ones(
    echo_endpoint: tuple[Endpoint, _Echo],
) -> None:
    endpoint, _ = echo_endpoint
    idle = socket.create_connection(("127.0.0.1", endpoint.port))  # never says hello: its thread waits
    try:
        assert _Options(endpoint.options()).call_once("control")["ok"]
        endpoint.close()
        assert idle.recv(1) == b""
    finally:
        idle.close()
    assert_threads_end(endpoint.name, timeout=0)
    message = (
        rf"^cannot reach flowpy stream_source {endpoint.stream} at 127\.0\.0\.1:{endpoint.port}: "
        r"connection refused; the app serving it is gone or stopped serving it "
        r"\(its query ended, the stream was closed, or the app exited\)$"
    )
    with pytest.raises(ConnectionError, match=message):
        _Options(endpoint.options()).call_once("read")
    endpoint.close()  # idempotent


@pytest.mark.parametrize("host", ["0.0.0.0", "", "::"])
def test_endpoint_any_address_gives_spark_the_host_name(host: str) -> None:
    assert advertised_host(host) == socket.gethostname()


def test_endpoint_named_address_is_given_to_spark_as_it_is() -> None:
    assert advertised_host("10.1.2.3") == "10.1.2.3"


_APP_THAT_DIES = """
import sys
from flowpy.spark import local_session, stream_publisher, stream_source
from flowpy.submission import SubmissionPublisher

spark = local_session("dying-app", remote=sys.argv[1])
publisher = SubmissionPublisher()
source = stream_source(publisher, "id BIGINT", spark=spark).writeStream.format("noop").start()
out, sink = stream_publisher(spark.readStream.format("rate-micro-batch").option("rowsPerBatch", 5).load())
first = out.consume(lambda row: None)
publisher.submit({"id": 1})
source.processAllAvailable()
print(source.id, sink.id, flush=True)
sys.stdin.read()  # until the test kills this process
"""


@pytest.mark.spark_cluster("connect")
@pytest.mark.timeout(300)
def test_endpoint_app_killed_ends_its_queries_on_a_connect_server(spark_sessions: Any, tmp_path: Any) -> None:
    """The server outlives the app: the queries reading from and writing to its streams fail, and say why."""
    import subprocess
    import sys
    import time
    import uuid

    from pyspark.sql import SparkSession

    spark_sessions.get("connect")
    url = f"{spark_sessions.connect_url}/;session_id={uuid.uuid4()}"
    app = subprocess.Popen(
        [sys.executable, "-c", _APP_THAT_DIES, url],
        cwd=tmp_path,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    same_session = SparkSession.builder.remote(url).create()  # another client of the app's server session
    try:
        assert app.stdout is not None
        source_id, sink_id = app.stdout.readline().split()
        source, sink = same_session.streams.get(source_id), same_session.streams.get(sink_id)
        assert source.isActive and sink.isActive
        app.kill()  # no exit hook runs: the sockets just close with the process
        app.wait(60)
        deadline = time.monotonic() + 120
        while source.isActive or sink.isActive:
            assert time.monotonic() < deadline, "a query of the app that died still runs"
            time.sleep(0.5)  # polling the server, which notifies no client of another client's queries
        assert "flowpy stream_source" in str(source.exception())
        assert "flowpy stream_publisher" in str(sink.exception())
    finally:
        if app.poll() is None:
            app.kill()
            app.wait(60)
        same_session.client.close()
