"""flowpy.sources under PublisherVerification: every publisher of the module."""

from __future__ import annotations

from collections.abc import Iterator

from flowpy import flow
from flowpy.sources import IterablePublisher, RangePublisher, empty, error, just
from flowpy.tck import PublisherVerification, TestEnvironment


class _Fast:
    def create_test_environment(self) -> TestEnvironment:
        return TestEnvironment(1000, 30, 10)


class _FailingIterable:
    def __iter__(self) -> Iterator[int]:
        raise RuntimeError("Error state signal!")


class TestRangePublisher(_Fast, PublisherVerification[int]):
    def create_publisher(self, elements: int) -> flow.Publisher[int]:
        return RangePublisher(0, elements)

    def create_failed_publisher(self) -> flow.Publisher[int] | None:
        return error(RuntimeError("Error state signal!"))


class TestIterablePublisher(_Fast, PublisherVerification[int]):
    def create_publisher(self, elements: int) -> flow.Publisher[int]:
        return IterablePublisher(range(elements), batch_size=16)

    def create_failed_publisher(self) -> flow.Publisher[int] | None:
        return IterablePublisher(_FailingIterable())


class TestJust(_Fast, PublisherVerification[int]):
    def create_publisher(self, elements: int) -> flow.Publisher[int]:
        return just(*range(elements))

    def max_elements_from_publisher(self) -> int:
        return 1024


class TestEmpty(_Fast, PublisherVerification[int]):
    def create_publisher(self, elements: int) -> flow.Publisher[int]:
        assert elements == 0, elements
        return empty()

    def max_elements_from_publisher(self) -> int:
        return 0
