"""flowpy.processors under IdentityProcessorVerification and PublisherVerification.

Each runs once. MulticastProcessor is the same code whichever core runs.
TransformProcessor is a SubmissionPublisher on the core this process chose
(``flowpy.implementation``): run this module with ``FLOWPY_NO_EXTENSIONS=1``
to verify it on the pure-Python core. SubmissionPublisher itself is verified
on both cores in every run, by tests/tck/test_submission_publisher_tck.py.
"""

from __future__ import annotations

from flowpy import flow
from flowpy.processors import MulticastProcessor, TransformProcessor
from flowpy.sources import RangePublisher
from flowpy.tck import IdentityProcessorVerification, PublisherVerification, TestEnvironment


class _Fast:
    def create_test_environment(self) -> TestEnvironment:
        return TestEnvironment(1000, 30, 10)


def _failed_multicast() -> MulticastProcessor[int]:
    processor: MulticastProcessor[int] = MulticastProcessor(128)
    processor.on_error(OSError("failed upstream"))
    return processor


class TestMulticastProcessor(_Fast, IdentityProcessorVerification[int]):
    def create_identity_processor(self, buffer_size: int) -> flow.Processor[int, int]:
        return MulticastProcessor(buffer_size)

    def create_failed_publisher(self) -> flow.Publisher[int] | None:
        return _failed_multicast()

    def does_coordinated_emission(self) -> bool:
        return True


class TestMulticastProcessorOverRange(_Fast, PublisherVerification[int]):
    def create_publisher(self, elements: int) -> flow.Publisher[int]:
        processor: MulticastProcessor[int] = MulticastProcessor(16)
        RangePublisher(0, elements).subscribe(processor)
        return processor

    def create_failed_publisher(self) -> flow.Publisher[int] | None:
        return _failed_multicast()


def _identity(item: int) -> int:
    return item


def _failed_transform() -> TransformProcessor[int, int]:
    processor: TransformProcessor[int, int] = TransformProcessor(_identity)
    processor.on_error(OSError("failed upstream"))
    return processor


class TestTransformProcessor(_Fast, IdentityProcessorVerification[int]):
    def create_identity_processor(self, buffer_size: int) -> flow.Processor[int, int]:
        return TransformProcessor(_identity, max_buffer_capacity=buffer_size)

    def create_failed_publisher(self) -> flow.Publisher[int] | None:
        return _failed_transform()


class TestTransformProcessorOverRange(_Fast, PublisherVerification[int]):
    def create_publisher(self, elements: int) -> flow.Publisher[int]:
        processor: TransformProcessor[int, int] = TransformProcessor(lambda item: item * 2)
        RangePublisher(0, elements).subscribe(processor)
        return processor

    def create_failed_publisher(self) -> flow.Publisher[int] | None:
        return _failed_transform()

    def max_elements_from_publisher(self) -> int:
        return 100
