"""Starting Spark: a SparkSession for flowpy pipelines, local or on a cluster.

The master URL is the only switch between an embedded Spark and a cluster:
``local[*]`` (the default) runs Spark inside this machine, bound to the
loopback interface; ``spark://host:7077``, ``yarn`` or ``k8s://...`` run the
same pipeline on a cluster.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["MASTER_ENV", "SparkUnavailableError", "local_session"]

MASTER_ENV = "FLOWPY_SPARK_MASTER"
"""The environment variable that names the master URL when none is passed."""

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
"""

_INSTALL_PYSPARK = "install it with: pip install 'flowpy[spark]'"
_INSTALL_JAVA = (
    "install a Java runtime (17 or 21, e.g. apt-get install openjdk-17-jre-headless) "
    "and put java on PATH or set JAVA_HOME"
)


class SparkUnavailableError(RuntimeError):
    """Spark cannot start on this machine: PySpark or Java is missing.

    The message says what to install.
    """


def require_pyspark() -> None:
    """Import PySpark, or explain how to install it.

    Raises:
        SparkUnavailableError: if ``pyspark``, ``pyarrow`` or ``pandas`` is not importable.
    """
    for module in ("pyspark", "pyarrow", "pandas"):
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
            f"flowpy.spark needs Java, but JAVA_HOME={java_home!r} has no bin/java: "
            f"fix JAVA_HOME or {_INSTALL_JAVA}"
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


def local_session(app_name: str = "flowpy", master: str | None = None) -> SparkSession:
    """Return a SparkSession configured for flowpy pipelines.

    The session has Arrow transfers on, the UI and the console progress bar
    off, and logs errors only. Executors run the interpreter running this
    call (``PYSPARK_PYTHON``), so they import what the driver imports. With a
    ``local`` master the driver binds to 127.0.0.1 (``spark.driver.host``,
    ``spark.driver.bindAddress`` and ``SPARK_LOCAL_IP``) and nothing listens
    on another interface; with a cluster master the driver's address is left
    to Spark's configuration, since executors must reach it.

    If a session is already running in this process it is returned, as
    ``SparkSession.builder.getOrCreate()`` does; its master stays the one it
    was started with.

    Args:
        app_name: the application name shown by the cluster manager.
        master: the master URL; ``None`` means ``$FLOWPY_SPARK_MASTER``, else ``local[*]``.

    Returns:
        The active SparkSession.

    Raises:
        SparkUnavailableError: if PySpark or Java is missing, or the JVM did not start.
    """
    require_pyspark()
    java_executable()
    from pyspark.errors import PySparkRuntimeError
    from pyspark.sql import SparkSession

    url = resolve_master(master)
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
    if url.startswith("local"):
        os.environ["SPARK_LOCAL_IP"] = _LOOPBACK
        builder = builder.config("spark.driver.host", _LOOPBACK).config("spark.driver.bindAddress", _LOOPBACK)
    try:
        session = builder.getOrCreate()
    except PySparkRuntimeError as exc:
        if exc.getCondition() == "JAVA_GATEWAY_EXITED":
            raise SparkUnavailableError(
                f"Spark's JVM exited before it started (master {url!r}); "
                f"see the lines above for its error, or {_INSTALL_JAVA}"
            ) from exc
        raise
    session.sparkContext.setLogLevel("ERROR")
    return session
