"""The Reactive Streams TCK against DataFramePublisher and an identity SparkProcessor."""

from __future__ import annotations

from typing import Any

import pytest

from flowpy import flow
from flowpy.spark import DataFramePublisher, SparkProcessor
from flowpy.tck import IdentityProcessorVerification, PublisherVerification, TestEnvironment


def _environment() -> TestEnvironment:
    # A Spark job takes tens of milliseconds where the TCK's default waits 100 ms.
    return TestEnvironment(default_timeout_millis=10_000, default_no_signals_timeout_millis=100)


# The stochastic tests repeat a stream many times, a Spark job per element:
# minutes here. The concurrency they probe is PullSubscription's, which
# tests/_core/test_pull.py verifies with the whole TCK, stochastic tests
# included, over a source that needs no Spark.


class TestDataFramePublisher(PublisherVerification[dict[str, Any]]):
    """Small n: every element is a row of ``spark.range(n)``."""

    @pytest.fixture(autouse=True)
    def _session(self, spark: Any) -> None:
        self.spark = spark

    def create_test_environment(self) -> TestEnvironment:
        return _environment()

    def create_publisher(self, elements: int) -> flow.Publisher[dict[str, Any]]:
        return DataFramePublisher(self.spark.range(0, elements, 1, 2))

    def max_elements_from_publisher(self) -> int:
        return 64

    def skip_stochastic_tests(self) -> bool:
        return True


class TestSparkProcessor(IdentityProcessorVerification[dict[str, Any]]):
    """The identity transform, one row per micro-batch, so that every element comes out at once."""

    @pytest.fixture(autouse=True)
    def _session(self, spark: Any) -> None:
        self.spark = spark

    def create_test_environment(self) -> TestEnvironment:
        return _environment()

    def create_identity_processor(self, buffer_size: int) -> flow.Processor[dict[str, Any], dict[str, Any]]:
        return SparkProcessor(self.spark, lambda df: df, batch_size=1, schema="id BIGINT")

    def create_element(self, element: int) -> dict[str, Any]:
        return {"id": element}

    def max_supported_subscribers(self) -> int:
        return 1

    def max_elements_from_publisher(self) -> int:
        return 16

    def skip_stochastic_tests(self) -> bool:
        return True
