"""IdentityProcessorVerification skips or fails as the upstream TCK 1.0.4 self-tests require.

A port of ``IdentityProcessorVerificationTest``: its own rule 1.4 test
skips for a processor with a single subscriber, and fails, naming the
missing ``on_error``, for a processor that swallows upstream errors.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from flowpy.executors import DaemonThreadPool
from flowpy.tck import SKIPPING_TOO_FEW_SUBSCRIBERS
from tests.tck import broken
from tests.tck.conformance import TIMEOUT_MILLIS, processor_verification, require_failure, require_skip, run

SPEC104 = "test_required_spec104_must_call_on_error_on_all_its_subscribers_if_it_encounters_a_non_recoverable_error"


@pytest.fixture(scope="module")
def pool() -> Iterator[DaemonThreadPool]:
    """The helper publisher's executor, shared by every test of the module (as upstream's ``ex``)."""
    executor = DaemonThreadPool(4, thread_name_prefix="processor-conformance")
    try:
        yield executor
    finally:
        executor.shutdown(wait=True)


def test_required_spec104_must_call_on_error_on_all_its_subscribers_if_it_encounters_a_non_recoverable_error_should_be_ignored(
    pool: DaemonThreadPool,
) -> None:
    result = require_skip(
        run(processor_verification(broken.NoopProcessor, pool, max_supported_subscribers=lambda self: 1), SPEC104),
        SKIPPING_TOO_FEW_SUBSCRIBERS,
    )
    assert result.message == f"{SKIPPING_TOO_FEW_SUBSCRIBERS}2 subscribers and max_supported_subscribers() is 1"


def test_required_spec104_must_call_on_error_on_all_its_subscribers_if_it_encounters_a_non_recoverable_error_should_fail_while_waiting_for_on_error(
    pool: DaemonThreadPool,
) -> None:
    verification = processor_verification(
        broken.ErrorIgnoringProcessor,
        pool,
        create_helper_publisher=lambda self, elements: broken.ten_per_request_publisher(),
    )
    require_failure(
        run(verification, SPEC104),
        f"Subscriber did not receive the expected on_error(RuntimeError('Test exception')) within {TIMEOUT_MILLIS} ms",
    )
