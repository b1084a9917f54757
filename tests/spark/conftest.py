"""Spark sessions for the tests: classic local, a standalone cluster and a Spark Connect server.

One session per kind for the whole run. The cluster processes (a standalone
master and worker, a Spark Connect server) are started here, on 127.0.0.1
with free ports, from the PySpark install's own launchers, and stopped at
the end of the run with everything they started.

A process can hold one classic SparkContext at a time, and a Connect session
switches PySpark's functions to their Connect variants for the whole
process; so the tests are ordered by the kind of session they need (local,
then standalone, then Connect) and each kind starts once. Tests that need a
cluster carry the ``spark_cluster`` marker; they run in the default test
command like every other test.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

_MISSING = [name for name in ("pyspark", "pyarrow", "pandas") if importlib.util.find_spec(name) is None]
_REASON = f"flowpy.spark tests need the spark extra (pip install -e '.[spark]'); missing: {', '.join(_MISSING)}"
_HERE = Path(__file__).parent
_LOOPBACK = "127.0.0.1"
_START_SECONDS = 120  # how long a cluster process may take to come up on a loaded machine

KINDS = ("local", "standalone", "connect")
"""The kinds of session a ``any_spark`` test runs against, in the order the run visits them."""


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "spark: needs PySpark and a Java runtime (select with -m spark)")
    config.addinivalue_line(
        "markers", "spark_cluster(kind): runs against a standalone cluster or a Spark Connect server started by the tests"
    )


def _kind_order(item: pytest.Item) -> int:
    marker = item.get_closest_marker("spark_cluster")
    return 0 if marker is None else KINDS.index(marker.args[0])


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if _HERE in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.spark)
            if _MISSING:
                item.add_marker(pytest.mark.skip(reason=_REASON))
    # Stable: within a kind the collection order stays; cluster tests move to the end, Connect last.
    items.sort(key=_kind_order)


def free_port() -> int:
    """A TCP port that is free on 127.0.0.1 now."""
    with socket.socket() as probe:
        probe.bind((_LOOPBACK, 0))
        port: int = probe.getsockname()[1]
        return port


def _spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def _environment() -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        SPARK_HOME=str(_spark_home()),
        SPARK_LOCAL_IP=_LOOPBACK,  # every listener of the cluster, web UIs included, binds here
        PYSPARK_PYTHON=sys.executable,
        SPARK_NO_DAEMONIZE="1",
    )
    env.pop("SPARK_CONNECT_MODE_ENABLED", None)
    return env


class _Process:
    """A cluster process started in its own process group, so that stopping it stops what it started."""

    def __init__(self, name: str, command: list[str], log: Path) -> None:
        self.name = name
        self.log = log
        with log.open("wb") as sink:
            self.popen = subprocess.Popen(
                command, stdout=sink, stderr=subprocess.STDOUT, env=_environment(), start_new_session=True
            )

    def wait_until(self, ready: Any, what: str) -> None:
        """Poll ``ready()`` until it is true; fail with the process's log if it exits or takes too long."""
        deadline = time.monotonic() + _START_SECONDS
        while not ready():
            if self.popen.poll() is not None:
                pytest.fail(f"{self.name} exited with {self.popen.returncode}:\n{self.log.read_text()[-3000:]}")
            if time.monotonic() > deadline:
                pytest.fail(f"{self.name}: {what} within {_START_SECONDS} s:\n{self.log.read_text()[-3000:]}")
            time.sleep(0.2)  # polling a process that has no readiness notification

    def stop(self) -> None:
        """Stop the process group: SIGTERM, then SIGKILL after 30 s."""
        if self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, signal.SIGTERM)
            try:
                self.popen.wait(30)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.popen.pid, signal.SIGKILL)
                self.popen.wait(30)
        with contextlib.suppress(ProcessLookupError):  # children that outlived the leader
            os.killpg(self.popen.pid, signal.SIGKILL)


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection((_LOOPBACK, port), timeout=1):
            return True
    except OSError:
        return False


def _alive_workers(ui_port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://{_LOOPBACK}:{ui_port}/json/", timeout=2) as answer:
            state = json.load(answer)
    except OSError:
        return 0
    return sum(1 for worker in state.get("workers", []) if worker.get("state") == "ALIVE")


class _Sessions:
    """The run's sessions, one per kind, started on first use; a classic kind replaces the previous one."""

    def __init__(self, scratch: Path) -> None:
        self._scratch = scratch
        self._processes: list[_Process] = []
        self._classic: tuple[str, Any] | None = None
        self._connect: Any = None
        self.master_url: str | None = None
        self.connect_url: str | None = None

    def get(self, kind: str) -> Any:
        if kind == "connect":
            return self._connect_session()
        master = "local[2]" if kind == "local" else self._standalone()
        if self._classic is not None and self._classic[0] == master:
            return self._classic[1]
        self._stop_classic()
        from flowpy.spark import local_session

        session = local_session("flowpy-tests", master=master)
        session.conf.set("spark.sql.shuffle.partitions", "2")
        self._classic = (master, session)
        return session

    def _standalone(self) -> str:
        if self.master_url is None:
            launcher = str(_spark_home() / "bin" / "spark-class")
            port, ui = free_port(), free_port()
            master = _Process(
                "standalone master",
                [launcher, "org.apache.spark.deploy.master.Master", "--host", _LOOPBACK, "--port", str(port),
                 "--webui-port", str(ui)],
                self._scratch / "master.log",
            )
            self._processes.append(master)
            url = f"spark://{_LOOPBACK}:{port}"
            worker = _Process(
                "standalone worker",
                [launcher, "org.apache.spark.deploy.worker.Worker", "--host", _LOOPBACK,
                 "--port", str(free_port()), "--webui-port", str(free_port()), "--cores", "2", "--memory", "2g",
                 "--work-dir", str(self._scratch / "work"), url],
                self._scratch / "worker.log",
            )
            self._processes.append(worker)
            master.wait_until(lambda: _accepts(port), "the master did not listen")
            worker.wait_until(lambda: _alive_workers(ui) >= 1, "the worker did not register")
            self.master_url = url
        return self.master_url

    def _connect_session(self) -> Any:
        if self._connect is None:
            self._stop_classic()  # one classic context per process; the Connect client needs none
            port = free_port()
            server = _Process(
                "Spark Connect server",
                [str(_spark_home() / "bin" / "spark-submit"),
                 "--class", "org.apache.spark.sql.connect.service.SparkConnectServer",
                 "--name", "flowpy-tests-connect", "--master", "local[2]",
                 "--conf", f"spark.connect.grpc.binding.address={_LOOPBACK}",
                 "--conf", f"spark.connect.grpc.binding.port={port}",
                 "--conf", f"spark.driver.host={_LOOPBACK}",
                 "--conf", f"spark.driver.bindAddress={_LOOPBACK}",
                 "--conf", "spark.ui.enabled=false",
                 "--conf", "spark.sql.shuffle.partitions=2",
                 "--conf", f"spark.executorEnv.PYSPARK_PYTHON={sys.executable}"],
                self._scratch / "connect.log",
            )
            self._processes.append(server)
            server.wait_until(lambda: _accepts(port), "the server did not listen")
            from flowpy.spark import local_session

            self.connect_url = f"sc://{_LOOPBACK}:{port}"
            self._connect = local_session("flowpy-tests", remote=self.connect_url)
        return self._connect

    def _stop_classic(self) -> None:
        if self._classic is not None:
            self._classic[1].stop()
            self._classic = None

    def close(self) -> None:
        if self._connect is not None:
            with contextlib.suppress(Exception):
                self._connect.stop()
            os.environ.pop("SPARK_CONNECT_MODE_ENABLED", None)  # set by the Connect client for the process
        self._stop_classic()
        for process in reversed(self._processes):
            process.stop()


@pytest.fixture(scope="session")
def spark_sessions(tmp_path_factory: pytest.TempPathFactory) -> Iterator[_Sessions]:
    """The run's sessions and cluster processes; everything is stopped at the end of the run."""
    sessions = _Sessions(tmp_path_factory.mktemp("spark-cluster"))
    try:
        yield sessions
    finally:
        sessions.close()


@pytest.fixture
def spark(spark_sessions: _Sessions) -> Any:
    """The run's classic SparkSession: local, two cores, bound to 127.0.0.1."""
    return spark_sessions.get("local")


@pytest.fixture(
    params=[
        "local",
        pytest.param("standalone", marks=pytest.mark.spark_cluster("standalone")),
        pytest.param("connect", marks=pytest.mark.spark_cluster("connect")),
    ]
)
def any_spark(request: pytest.FixtureRequest, spark_sessions: _Sessions) -> Any:
    """A session of each kind in turn: classic local, a standalone cluster, Spark Connect."""
    return spark_sessions.get(request.param)
