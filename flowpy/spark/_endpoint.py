"""The app side of the streaming bridge: one socket server per stream, and the data source's registration.

:class:`Endpoint` listens (on 127.0.0.1 unless told otherwise) for the
Spark side of one stream (:mod:`flowpy.spark._bridge`): every connection
must open with a hello that presents the stream's random token; one that
does not is refused, with a warning on the ``flowpy.spark`` logger, before
anything else is read. Each accepted connection is served on its own
thread by the stream's handler.

Threads: one acceptor per endpoint, plus one per open connection, all
daemon threads named ``flowpy-<kind>-<stream>``. :meth:`Endpoint.close`
ends them all and closes every socket; the owners call it when the stream
ends, and :func:`close_at_exit` closes what is still open when the process
exits, so that Spark's side fails at once instead of waiting for an app
that is gone.
"""

from __future__ import annotations

import atexit
import contextlib
import hmac
import logging
import secrets
import selectors
import socket
import threading
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from flowpy._fork import at_fork_in_child
from flowpy.spark._bridge import MAX_HELLO_BYTES, FlowpyDataSource, recv_json, send_json

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "HELLO_SECONDS",
    "Endpoint",
    "Handler",
    "advertised_host",
    "close_at_exit",
    "register",
    "reply_error",
]

HELLO_SECONDS = 10.0
"""How long a new connection may take to present its hello before it is dropped."""

_JOIN_SECONDS = 30.0  # how long close() waits for a connection's thread before giving up on it, with a warning

_log = logging.getLogger("flowpy.spark")

Handler = Callable[[socket.socket, dict[str, Any]], None]
"""Serves one accepted connection, given its hello; runs on the connection's thread."""

_ANY_ADDRESS = ("", "0.0.0.0", "::")


def advertised_host(host: str) -> str:
    """The address Spark is given for an endpoint listening on ``host``: this machine's name for an any-address."""
    return socket.gethostname() if host in _ANY_ADDRESS else host


def reply_error(sock: socket.socket, message: str) -> None:
    """Send ``{"error": message}``, unless the peer is gone already."""
    with contextlib.suppress(OSError):
        send_json(sock, {"error": message})


class Endpoint:
    """A TCP listener that serves the Spark side of one stream.

    Args:
        kind: what the stream is (``"stream_source"``, ``"stream_publisher"``), for names and messages.
        serve: the handler of an accepted connection.
        host: the address to listen on and that Spark connects to; an
            any-address (``"0.0.0.0"``) listens everywhere and gives Spark this
            machine's host name.
        port: the port; 0 takes a free one.

    Raises:
        OSError: if the address cannot be bound.
    """

    def __init__(self, kind: str, serve: Handler, *, host: str, port: int) -> None:
        self.kind = kind
        self.stream = secrets.token_hex(8)
        self.token = secrets.token_urlsafe(32)
        self._serve = serve
        self._listener = socket.create_server((host, port), backlog=64)
        self.port: int = self._listener.getsockname()[1]
        self.host = advertised_host(host)
        self._wake_reader, self._wake_writer = socket.socketpair()  # close() wakes the acceptor through it
        self._lock = threading.Lock()
        # --- Guarded by self._lock ----------------------------------------
        self._connections: set[socket.socket] = set()  # accepted and not yet closed
        self._threads: set[threading.Thread] = set()  # one per accepted connection, until it ends
        self._closed = False  # set once by close(); no connection is accepted after
        self._acceptor = threading.Thread(target=self._accept, name=f"{self.name}-accept", daemon=True)
        self._acceptor.start()

    @property
    def name(self) -> str:
        """The prefix of the endpoint's thread names: ``flowpy-<kind>-<stream>``."""
        return f"flowpy-{self.kind}-{self.stream}"

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        with self._lock:
            return self._closed

    def options(self) -> dict[str, str]:
        """The data source options that let the Spark side reach this endpoint."""
        return {
            "host": self.host,
            "port": str(self.port),
            "token": self.token,
            "stream": self.stream,
            "kind": self.kind,
        }

    def close(self) -> None:
        """Stop accepting, cut every open connection, wait for their threads; idempotent.

        May be called from one of the endpoint's own connection threads,
        which is then left to finish by itself.
        """
        with self._lock:
            self._closed = True
            connections = list(self._connections)
            threads = list(self._threads)
        with contextlib.suppress(OSError):
            self._wake_writer.send(b"\0")
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
        current = threading.current_thread()
        for thread in [self._acceptor, *threads]:
            if thread is not current:
                thread.join(_JOIN_SECONDS)
                if thread.is_alive():
                    _log.warning("%s: %s did not end within %.0f s of close()", self.name, thread.name, _JOIN_SECONDS)
        if current is not self._acceptor:
            self._listener.close()
            self._wake_reader.close()
            self._wake_writer.close()

    def _accept(self) -> None:
        with selectors.DefaultSelector() as selector:
            selector.register(self._listener, selectors.EVENT_READ)
            selector.register(self._wake_reader, selectors.EVENT_READ)
            while True:
                ready = {key.fileobj for key, _ in selector.select()}
                if self._wake_reader in ready:
                    return
                try:
                    connection, peer = self._listener.accept()
                    connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # replies go out at once
                except OSError:
                    continue  # the peer gave up between readiness and accept
                thread = threading.Thread(
                    target=self._serve_connection, args=(connection, peer), name=f"{self.name}-conn", daemon=True
                )
                with self._lock:
                    if self._closed:
                        connection.close()
                        return
                    self._connections.add(connection)
                    self._threads.add(thread)
                thread.start()

    def _serve_connection(self, connection: socket.socket, peer: Any) -> None:
        try:
            hello = self._hello(connection, peer)
            if hello is not None:
                connection.settimeout(None)
                self._serve(connection, hello)
        except Exception:
            _log.exception("%s: serving a connection from %s failed", self.name, _address(peer))
        finally:
            with self._lock:
                self._connections.discard(connection)
                self._threads.discard(threading.current_thread())
            connection.close()

    def _hello(self, connection: socket.socket, peer: Any) -> dict[str, Any] | None:
        """Read and check the hello; return it, or refuse the connection and return ``None``."""
        connection.settimeout(HELLO_SECONDS)
        try:
            hello = recv_json(connection, MAX_HELLO_BYTES)
        except (EOFError, OSError, ValueError) as exc:
            reason = f"no valid hello ({exc})"
        else:
            token = hello.get("token")
            if isinstance(token, str) and hmac.compare_digest(token.encode(), self.token.encode()):
                return hello
            reason = "no token" if token is None else "a wrong token"
        _log.warning("refused a connection from %s to flowpy %s %s: %s", _address(peer), self.kind, self.stream, reason)
        reply_error(connection, f"flowpy {self.kind} {self.stream} refused the connection: it presented {reason}")
        return None


def _address(peer: Any) -> str:
    if isinstance(peer, tuple) and len(peer) >= 2:
        return f"{peer[0]}:{peer[1]}"
    return str(peer)


# -- Registration and process exit -----------------------------------------------------


def register(spark: SparkSession) -> None:
    """Register the ``flowpy`` data source with ``spark``, shipped by value so that workers need no flowpy."""
    import sys

    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[FlowpyDataSource.__module__])  # type: ignore[no-untyped-call]
    spark.dataSource.register(FlowpyDataSource)


class _Closable(Protocol):
    def close(self) -> None: ...


_open: weakref.WeakSet[_Closable] = weakref.WeakSet()  # streams to close at exit
_open_lock = threading.Lock()
_hooked = False  # guarded by _open_lock: the exit hook is registered


def close_at_exit(stream: _Closable) -> None:
    """Have ``stream.close()`` called when the process exits, if the stream is still alive then."""
    global _hooked
    with _open_lock:
        _open.add(stream)
        if not _hooked:
            atexit.register(_close_open_streams)
            _hooked = True


@at_fork_in_child
def _forget_open_in_child() -> None:
    """After ``os.fork()``, in the child: the parent's streams are the parent's to close."""
    global _open, _open_lock
    _open = weakref.WeakSet()
    _open_lock = threading.Lock()


def _close_open_streams() -> None:
    with _open_lock:
        streams = list(_open)
    for stream in streams:
        try:
            stream.close()
        except Exception:
            _log.exception("closing %r at exit failed", stream)
