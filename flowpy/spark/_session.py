"""Starting Spark: a SparkSession for flowpy pipelines, local, on a cluster or through Spark Connect.

The master URL is the only switch between an embedded Spark and a cluster:
``local[*]`` (the default) runs Spark inside this machine, bound to the
loopback interface; ``spark://host:7077``, ``yarn`` or ``k8s://...`` run the
same pipeline on a cluster. A remote URL (``sc://host:15002``) opens a Spark
Connect session instead; every flowpy.spark piece takes either kind.
"""

from __future__ import annotations

import os
import shutil
import socket
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "MASTER_ENV",
    "REMOTE_ENV",
    "SparkUnavailableError",
    "check_reachable",
    "is_connect",
    "local_session",
    "session_url",
]

MASTER_ENV = "FLOWPY_SPARK_MASTER"
"""The environment variable that names the master URL when none is passed."""

REMOTE_ENV = "FLOWPY_SPARK_REMOTE"
"""The environment variable that names a Spark Connect URL (``sc://host:port``) when none is passed."""

CONNECT_TIMEOUT = 10.0
"""Seconds to wait for a cluster's master or Connect endpoint to accept a connection."""

_DEFAULT_PORTS = {"spark": 7077, "sc": 15002}

_LOOPBACK = "127.0.0.1"

# Spark prints INFO and WARN lines from the JVM before the session exists;
# this configuration keeps only errors. Written once to the temporary directory.
_LOG4J2 = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = stderr
appender.console.type = Console
appender.console.name = stderr
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n%ex
# PySpark runs Spark as a shell, which announces a WARN level of its own
# unless Spark's loggers are configured, at the root's level.
logger.spark.name = org.apache.spark
logger.spark.level = error
# A task that ends early (a cancelled read, a failed write) logs "Aborting task"
# with the exception; the same exception reaches the caller, which reports it
# (or, for a cancel the subscriber asked for, rightly does not).
logger.utils.name = org.apache.spark.util.Utils
logger.utils.level = error
logger.utils.filter.aborting.type = RegexFilter
logger.utils.filter.aborting.regex = Aborting task.*
logger.utils.filter.aborting.onMatch = DENY
logger.utils.filter.aborting.onMismatch = NEUTRAL
"""

_INSTALL_PYSPARK = "install it with: pip install 'flowpy[spark]'"
_INSTALL_JAVA = (
    "install a Java runtime (17 or 21, e.g. apt-get install openjdk-17-jre-headless) "
    "and put java on PATH or set JAVA_HOME"
)


class SparkUnavailableError(RuntimeError):
    """Spark cannot start: PySpark or Java is missing, or the cluster cannot be reached.

    The message is one line saying what to install, or which URL did not answer.
    """


def require_pyspark(*, connect: bool = False) -> None:
    """Import PySpark (and, with ``connect``, the Spark Connect client), or explain how to install it.

    Raises:
        SparkUnavailableError: if ``pyspark``, ``pyarrow`` or ``pandas`` (or, for
            Spark Connect, ``grpc``, ``google.protobuf`` or ``zstandard``) is not importable.
    """
    modules = ("pyspark", "pyarrow", "pandas") + (("grpc", "google.protobuf", "zstandard") if connect else ())
    for module in modules:
        try:
            __import__(module)
        except ImportError as exc:
            raise SparkUnavailableError(f"flowpy.spark needs {module}: {_INSTALL_PYSPARK}") from exc


def java_executable() -> str:
    """Return the ``java`` that Spark will run: ``$JAVA_HOME/bin/java``, else the one on PATH.

    Raises:
        SparkUnavailableError: if there is no Java runtime to run.
    """
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        java = Path(java_home, "bin", "java")
        if os.access(java, os.X_OK):
            return str(java)
        raise SparkUnavailableError(
            f"flowpy.spark needs Java, but JAVA_HOME={java_home!r} has no bin/java: fix JAVA_HOME or {_INSTALL_JAVA}"
        )
    found = shutil.which("java")
    if found is None:
        raise SparkUnavailableError(f"flowpy.spark needs Java to run Spark and found none: {_INSTALL_JAVA}")
    return found


def _log_config() -> str:
    path = Path(tempfile.gettempdir(), "flowpy-spark-log4j2.properties")
    if not path.exists() or path.read_text() != _LOG4J2:
        staging = path.with_suffix(f".{os.getpid()}.tmp")
        staging.write_text(_LOG4J2)
        staging.replace(path)
    return path.as_uri()


def resolve_master(master: str | None) -> str:
    """Return the master URL: ``master``, else ``$FLOWPY_SPARK_MASTER``, else ``local[*]``."""
    if master is not None:
        return master
    return os.environ.get(MASTER_ENV) or "local[*]"


def resolve_remote(master: str | None, remote: str | None) -> str | None:
    """Return the Spark Connect URL to use: ``remote``, else ``$FLOWPY_SPARK_REMOTE`` unless a master was given.

    Raises:
        ValueError: if both ``master`` and ``remote`` are given.
    """
    if master is not None and remote is not None:
        raise ValueError(f"give master or remote, not both, got master={master!r} and remote={remote!r}")
    if remote is not None or master is not None:
        return remote
    return os.environ.get(REMOTE_ENV) or None


def _endpoint(url: str) -> tuple[str, int] | None:
    """Return the host and port a ``spark://`` or ``sc://`` URL connects to; ``None`` for other URLs."""
    parts = urlsplit(url)
    if parts.scheme not in _DEFAULT_PORTS or not parts.hostname:
        return None
    host = parts.netloc.split("/")[0].split(",")[0]  # the first master of an HA list
    first = urlsplit(f"{parts.scheme}://{host}")
    return first.hostname or parts.hostname, first.port or _DEFAULT_PORTS[parts.scheme]


def check_reachable(url: str, timeout: float = CONNECT_TIMEOUT) -> None:
    """Fail fast, with one line naming ``url``, if a ``spark://`` master or ``sc://`` endpoint does not answer.

    Spark itself retries an unreachable master for about a minute and then
    fails with a stopped context; a TCP connection attempt settles it in
    ``timeout`` seconds at most. Other URLs (``local``, ``yarn``, ``k8s://``) pass.

    Raises:
        SparkUnavailableError: if nothing accepts a connection at the URL's host and port.
    """
    endpoint = _endpoint(url)
    if endpoint is None:
        return
    try:
        with socket.create_connection(endpoint, timeout=timeout):
            pass
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise SparkUnavailableError(f"cannot reach Spark at {url!r}: {reason.lower()}") from exc


def is_connect(spark: SparkSession) -> bool:
    """Whether ``spark`` is a Spark Connect session (a client of a remote server)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def session_url(spark: SparkSession) -> str:
    """Return where ``spark`` runs: its master URL, prefixed by ``connect`` for a Spark Connect session."""
    master = spark.conf.get("spark.master", None) or "?"
    return f"connect {master}" if is_connect(spark) else master


def _is_loopback(url: str) -> bool:
    if url.startswith("local"):
        return True
    endpoint = _endpoint(url)
    return endpoint is not None and endpoint[0] in ("127.0.0.1", "localhost")


def local_session(app_name: str = "flowpy", master: str | None = None, *, remote: str | None = None) -> SparkSession:
    """Return a SparkSession configured for flowpy pipelines: classic, or Spark Connect with ``remote``.

    A classic session has Arrow transfers on, the UI and the console
    progress bar off, and logs errors only. Executors run the interpreter
    running this call (``PYSPARK_PYTHON``), so they import what the driver
    imports. With a ``local`` master, or a master on 127.0.0.1, the driver
    binds to 127.0.0.1 (``spark.driver.host``, ``spark.driver.bindAddress``
    and ``SPARK_LOCAL_IP``) and nothing listens on another interface; with
    another cluster master the driver's address is left to Spark's
    configuration, since executors must reach it.

    With ``remote`` (or ``$FLOWPY_SPARK_REMOTE``), the session is a Spark
    Connect client of the server at that URL (``sc://host:port``); a
    ``local[...]`` remote starts a Connect server in a child JVM of this
    process, as ``SparkSession.builder.remote`` does.

    A ``spark://`` master or ``sc://`` endpoint that accepts no connection
    fails within :data:`CONNECT_TIMEOUT` seconds, before Spark starts.

    If a session is already running in this process it is returned, as
    ``SparkSession.builder.getOrCreate()`` does; its master stays the one it
    was started with.

    Args:
        app_name: the application name shown by the cluster manager.
        master: the master URL; ``None`` means ``$FLOWPY_SPARK_MASTER``, else ``local[*]``.
        remote: a Spark Connect URL; ``None`` means ``$FLOWPY_SPARK_REMOTE`` when no master is given.

    Returns:
        The active SparkSession.

    Raises:
        ValueError: if both ``master`` and ``remote`` are given.
        SparkUnavailableError: if PySpark or Java is missing, the cluster does not
            answer, or the JVM did not start.
    """
    connect_url = resolve_remote(master, remote)
    if connect_url is not None:
        return _connect_session(app_name, connect_url)
    require_pyspark()
    java_executable()
    url = resolve_master(master)
    check_reachable(url)
    from pyspark.sql import SparkSession

    os.environ["PYSPARK_PYTHON"] = sys.executable
    builder = (
        SparkSession.builder.appName(app_name)
        .master(url)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile={_log_config()}")
        .config("spark.executorEnv.PYSPARK_PYTHON", sys.executable)
    )
    if _is_loopback(url):
        os.environ["SPARK_LOCAL_IP"] = _LOOPBACK
        builder = builder.config("spark.driver.host", _LOOPBACK).config("spark.driver.bindAddress", _LOOPBACK)
    return _started(builder, url)


def _connect_session(app_name: str, url: str) -> SparkSession:
    require_pyspark(connect=True)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name).remote(url)
    if url.startswith("local"):
        # A Connect server in a child JVM: the same loopback, quiet settings as a classic local session.
        java_executable()
        os.environ["PYSPARK_PYTHON"] = sys.executable
        os.environ["SPARK_LOCAL_IP"] = _LOOPBACK
        builder = (
            builder.config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.driver.host", _LOOPBACK)
            .config("spark.driver.bindAddress", _LOOPBACK)
            .config("spark.connect.grpc.binding.address", _LOOPBACK)
            .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile={_log_config()}")
        )
    else:
        check_reachable(url)
    return _started(builder, url)


def _started(builder: SparkSession.Builder, url: str) -> SparkSession:
    from pyspark.errors import PySparkRuntimeError

    try:
        return builder.getOrCreate()
    except PySparkRuntimeError as exc:
        if exc.getCondition() == "JAVA_GATEWAY_EXITED":
            raise SparkUnavailableError(
                f"Spark's JVM exited before it started (master {url!r}); "
                f"see the lines above for its error, or {_INSTALL_JAVA}"
            ) from exc
        raise
