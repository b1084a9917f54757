"""One SparkSession for the whole run; the directory is skipped without PySpark."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

_MISSING = [name for name in ("pyspark", "pyarrow", "pandas") if importlib.util.find_spec(name) is None]
_REASON = f"flowpy.spark tests need the spark extra (pip install -e '.[spark]'); missing: {', '.join(_MISSING)}"
_HERE = Path(__file__).parent


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "spark: needs PySpark and a Java runtime (select with -m spark)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if _HERE in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.spark)
            if _MISSING:
                item.add_marker(pytest.mark.skip(reason=_REASON))


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """The run's SparkSession: local, two cores, bound to 127.0.0.1."""
    from flowpy.spark import local_session

    session = local_session("flowpy-tests", master="local[2]")
    session.conf.set("spark.sql.shuffle.partitions", "2")
    yield session
    session.stop()
