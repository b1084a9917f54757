"""local_session: loopback, quiet, Arrow on; a clear error when Java or PySpark is missing."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from flowpy.spark import MASTER_ENV
from flowpy.spark._session import resolve_master

ROOT = Path(__file__).resolve().parents[2]


def test_session_binds_loopback_and_turns_arrow_on(spark: Any) -> None:
    conf = spark.sparkContext.getConf()
    assert conf.get("spark.master") == "local[2]"
    assert conf.get("spark.driver.host") == "127.0.0.1"
    assert conf.get("spark.driver.bindAddress") == "127.0.0.1"
    assert conf.get("spark.ui.enabled") == "false"
    assert conf.get("spark.ui.showConsoleProgress") == "false"
    assert spark.conf.get("spark.sql.execution.arrow.pyspark.enabled") == "true"
    assert os.environ["SPARK_LOCAL_IP"] == "127.0.0.1"
    assert os.environ["PYSPARK_PYTHON"] == sys.executable
    assert spark.sparkContext.uiWebUrl is None


def test_session_master_comes_from_argument_then_environment_then_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(MASTER_ENV, raising=False)
    assert resolve_master(None) == "local[*]"
    monkeypatch.setenv(MASTER_ENV, "spark://127.0.0.1:7077")
    assert resolve_master(None) == "spark://127.0.0.1:7077"
    assert resolve_master("local[3]") == "local[3]"


def _run(code: str, env: dict[str, str]) -> str:
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


_TRY_SESSION = """
    from flowpy.spark import SparkUnavailableError, local_session
    try:
        local_session()
    except SparkUnavailableError as exc:
        print(exc)
    else:
        print("started")
"""


def test_session_without_java_says_what_to_install(tmp_path: Path) -> None:
    env = {key: value for key, value in os.environ.items() if key != "JAVA_HOME"}
    env["PATH"] = str(tmp_path)  # an empty directory: no java anywhere
    assert _run(_TRY_SESSION, env) == (
        "flowpy.spark needs Java to run Spark and found none: install a Java runtime "
        "(17 or 21, e.g. apt-get install openjdk-17-jre-headless) and put java on PATH or set JAVA_HOME"
    )


def test_session_with_a_wrong_java_home_names_it(tmp_path: Path) -> None:
    env = dict(os.environ, JAVA_HOME=str(tmp_path))
    assert _run(_TRY_SESSION, env) == (
        f"flowpy.spark needs Java, but JAVA_HOME={str(tmp_path)!r} has no bin/java: fix JAVA_HOME or "
        "install a Java runtime (17 or 21, e.g. apt-get install openjdk-17-jre-headless) "
        "and put java on PATH or set JAVA_HOME"
    )


def test_session_without_pyspark_says_what_to_install() -> None:
    code = "import sys\nsys.modules['pyspark'] = None\n" + textwrap.dedent(_TRY_SESSION)
    assert _run(code, dict(os.environ)) == "flowpy.spark needs pyspark: install it with: pip install 'flowpy[spark]'"


def test_session_remote_comes_from_argument_then_environment_unless_a_master_is_given(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from flowpy.spark import REMOTE_ENV
    from flowpy.spark._session import resolve_remote

    monkeypatch.delenv(REMOTE_ENV, raising=False)
    assert resolve_remote(None, None) is None
    monkeypatch.setenv(REMOTE_ENV, "sc://127.0.0.1:15002")
    assert resolve_remote(None, None) == "sc://127.0.0.1:15002"
    assert resolve_remote("local[2]", None) is None  # an explicit master wins over the environment
    assert resolve_remote(None, "sc://other:1") == "sc://other:1"
    with pytest.raises(ValueError, match=r"^give master or remote, not both, got master='local' and remote='sc://h'$"):
        resolve_remote("local", "sc://h")


@pytest.mark.parametrize("scheme", ["spark", "sc"])
def test_session_unreachable_endpoint_fails_fast_naming_the_url(scheme: str) -> None:
    import time

    from flowpy.spark import SparkUnavailableError
    from flowpy.spark._session import check_reachable
    from tests.spark.clusters import free_port

    url = f"{scheme}://127.0.0.1:{free_port()}"
    started = time.monotonic()
    with pytest.raises(SparkUnavailableError, match=rf"^cannot reach Spark at '{url}': connection refused$"):
        check_reachable(url)
    assert time.monotonic() - started < 5
    check_reachable("local[2]")  # nothing to reach
    check_reachable("yarn")


def test_session_classic_is_not_connect(spark: Any) -> None:
    from flowpy.spark import is_connect
    from flowpy.spark._session import session_url

    assert not is_connect(spark)
    assert session_url(spark) == "local[2]"
