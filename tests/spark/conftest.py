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
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.spark.clusters import ClusterProcess, start_connect_server, start_standalone


def _missing(*names: str) -> list[str]:
    return [name for name in names if importlib.util.find_spec(name.split(".")[0]) is None]


_MISSING = _missing("pyspark", "pyarrow", "pandas")
_REASON = f"flowpy.spark tests need the spark extra (pip install -e '.[spark]'); missing: {', '.join(_MISSING)}"
_MISSING_CONNECT = _missing("grpc", "google.protobuf", "zstandard")
_REASON_CONNECT = (
    "Spark Connect tests need the spark extra's Connect client (pip install -e '.[spark]'); "
    f"missing: {', '.join(_MISSING_CONNECT)}"
)
_HERE = Path(__file__).parent

KINDS = ("local", "standalone", "connect")
"""The kinds of session a ``any_spark`` test runs against, in the order the run visits them."""


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "spark: needs PySpark and a Java runtime (select with -m spark)")
    config.addinivalue_line(
        "markers", "spark_cluster(kind): needs the standalone cluster or the Spark Connect server the tests start"
    )


def _kind_order(item: pytest.Item) -> int:
    marker = item.get_closest_marker("spark_cluster")
    return 0 if marker is None else KINDS.index(marker.args[0])


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if _HERE in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.spark)
            kind = getattr(item, "callspec", None) and item.callspec.params.get("any_spark")
            if kind in ("standalone", "connect"):
                item.add_marker(pytest.mark.spark_cluster(kind))
            if _MISSING:
                item.add_marker(pytest.mark.skip(reason=_REASON))
            elif _MISSING_CONNECT and _kind_order(item) == KINDS.index("connect"):
                item.add_marker(pytest.mark.skip(reason=_REASON_CONNECT))
    # Stable: within a kind the collection order stays; cluster tests move to the end, Connect last.
    items.sort(key=_kind_order)


class _Sessions:
    """The run's sessions, one per kind, started on first use; a classic kind replaces the previous one."""

    def __init__(self, scratch: Path) -> None:
        self._scratch = scratch
        self._processes: list[ClusterProcess] = []
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
            try:
                self.master_url = start_standalone(self._scratch, self._processes)
            except RuntimeError as exc:
                pytest.fail(str(exc))
        return self.master_url

    def _connect_session(self) -> Any:
        if self._connect is None:
            self._stop_classic()  # one classic context per process; the Connect client needs none
            try:
                # On the standalone cluster, whose worker the classic session just left:
                # Connect clients of a real cluster, executors in their own JVMs.
                master = self._standalone()
                self.connect_url = start_connect_server(self._scratch, self._processes, master=master)
            except RuntimeError as exc:
                pytest.fail(str(exc))
            from flowpy.spark import local_session

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


@pytest.fixture(params=KINDS)  # the cluster kinds get their spark_cluster marker at collection
def any_spark(request: pytest.FixtureRequest, spark_sessions: _Sessions) -> Any:
    """A session of each kind in turn: classic local, a standalone cluster, Spark Connect."""
    return spark_sessions.get(request.param)
