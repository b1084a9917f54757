"""Test doubles for the Spark tests: an upstream driven by hand, arrival counting."""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any

from flowpy.flow import Publisher, Subscriber, Subscription


class Arrivals:
    """An ``on_next`` hook that counts items and lets a test wait for a count."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self.count = 0

    def __call__(self, item: object) -> None:
        with self._changed:
            self.count += 1
            self._changed.notify_all()

    def wait_for(self, n: int, timeout: float = 60) -> None:
        with self._changed:
            assert self._changed.wait_for(lambda: self.count >= n, timeout), f"{self.count} of {n} arrived"


class Gate:
    """An ``on_next`` hook that holds the first item's delivery until the test opens the gate."""

    def __init__(self) -> None:
        self.entered = threading.Event()  # the first on_next is under way, held here
        self._open = threading.Event()

    def __call__(self, item: object) -> None:
        self.entered.set()
        assert self._open.wait(60), "the gate was never opened"

    def open(self) -> None:
        self._open.set()


class HandUpstream(Publisher[Any], Subscription):
    """A publisher for one subscriber whose items the test emits by hand.

    It records every ``request`` and ``cancel``; ``emit`` refuses to send
    more than was requested, so a test sees exactly what the subscriber asked.
    """

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self.requests: list[int] = []
        self.cancelled = False
        self.subscriber: Subscriber[Any] | None = None
        self.sent = 0

    def subscribe(self, subscriber: Subscriber[Any]) -> None:
        self.subscriber = subscriber
        subscriber.on_subscribe(self)

    def request(self, n: int) -> None:
        with self._changed:
            self.requests.append(n)
            self._changed.notify_all()

    def cancel(self) -> None:
        with self._changed:
            self.cancelled = True
            self._changed.notify_all()

    @property
    def outstanding(self) -> int:
        with self._changed:
            return sum(self.requests) - self.sent

    def wait_for_requests(self, count: int, timeout: float = 60) -> None:
        """Wait until ``count`` requests were made (or the subscription was cancelled)."""
        with self._changed:
            assert self._changed.wait_for(lambda: len(self.requests) >= count or self.cancelled, timeout)

    def wait_for_cancel(self, timeout: float = 60) -> None:
        with self._changed:
            assert self._changed.wait_for(lambda: self.cancelled, timeout), "upstream was not cancelled"

    def emit(self, items: Iterable[Any]) -> None:
        assert self.subscriber is not None
        for item in items:
            assert self.outstanding > 0, f"subscriber requested {sum(self.requests)}, emitting #{self.sent + 1}"
            with self._changed:
                self.sent += 1
            self.subscriber.on_next(item)

    def complete(self) -> None:
        assert self.subscriber is not None
        self.subscriber.on_complete()

    def fail(self, error: BaseException) -> None:
        assert self.subscriber is not None
        self.subscriber.on_error(error)


class TasksStarted:
    """A listening socket on 127.0.0.1 that Spark tasks connect to when they start: a test waits on real events.

    :meth:`slow_ids` gives a DataFrame of ``partitions`` partitions whose
    task connects here at its first row, then takes 10 ms a row, so that a
    partition of the half-billion rows runs for days unless interrupted.
    """

    def __init__(self) -> None:
        import socket

        self._server = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._server.getsockname()[1]

    def slow_ids(self, spark: Any, partitions: int = 2) -> Any:
        from pyspark.sql.functions import udf

        rows = 10**9
        firsts = {rows * p // partitions for p in range(partitions)}  # the first id of each partition
        port = self.port

        @udf("long")
        def slow(value):  # type: ignore[no-untyped-def]  # unannotated: Spark infers UDF kinds from hints
            import socket
            import time

            if value in firsts:
                socket.create_connection(("127.0.0.1", port), timeout=30).close()
            time.sleep(0.01)
            return value

        return spark.range(0, rows, 1, partitions).select(slow("id").alias("id"))

    def wait_for(self, count: int, timeout: float = 60) -> None:
        """Wait until ``count`` tasks have started."""
        self._server.settimeout(timeout)
        for _ in range(count):
            connection, _ = self._server.accept()
            connection.close()

    def close(self) -> None:
        self._server.close()


class WorkerKiller:
    """Kills the Spark Python worker behind one connection to a stream's app side: a worker dying mid-batch.

    Wraps the ``serve`` method of ``kind`` (``_SourceStream`` or
    ``_QueryBridge``; patch before the stream is made): the first
    connection whose hello has ``op`` and satisfies ``when`` gets its
    worker (``hello["pid"]``, a process on this machine) killed with
    SIGKILL before it is served. Every hello is recorded.
    """

    def __init__(self, monkeypatch: Any, kind: type, op: str, when: Any = None) -> None:
        self.hellos: list[dict[str, Any]] = []
        self.killed: list[dict[str, Any]] = []
        original = kind.serve  # type: ignore[attr-defined]
        killer = self

        def serve(stream: Any, connection: Any, hello: dict[str, Any]) -> None:
            killer.hellos.append(hello)
            if not killer.killed and hello.get("op") == op and (when is None or when(hello)):
                import os
                import signal

                killer.killed.append(hello)
                os.kill(int(hello["pid"]), signal.SIGKILL)
                return
            original(stream, connection, hello)

        monkeypatch.setattr(kind, "serve", serve)

    def of(self, op: str) -> list[dict[str, Any]]:
        """The hellos of ``op`` connections, in arrival order."""
        return [hello for hello in self.hellos if hello.get("op") == op]


def assert_threads_end(prefix: str, timeout: float = 30) -> None:
    """Every thread whose name starts with ``prefix`` ends within ``timeout`` seconds (a stream's own threads)."""
    import threading

    for thread in [t for t in threading.enumerate() if t.name.startswith(prefix)]:
        thread.join(timeout)
        assert not thread.is_alive(), f"{thread.name} is still running"
