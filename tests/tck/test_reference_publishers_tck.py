"""The reference publishers pass PublisherVerification."""

from __future__ import annotations

from flowpy import flow
from flowpy.tck import PublisherVerification, TestEnvironment
from tests.tck.reference import RangePublisher


class TestRangePublisher(PublisherVerification[int]):
    def create_test_environment(self) -> TestEnvironment:
        return TestEnvironment(100, 20)

    def create_publisher(self, elements: int) -> flow.Publisher[int]:
        return RangePublisher(0, elements)
