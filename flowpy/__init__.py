"""flowpy: ``java.util.concurrent.Flow`` for Python.

The Flow and Reactive Streams interfaces, :class:`FlowAdapters` between them,
and :class:`SubmissionPublisher`, a publisher with a bounded buffer per
subscriber that delivers on an executor.
"""

from flowpy.adapters import (
    FlowAdapters,
    to_flow_processor,
    to_flow_publisher,
    to_flow_subscriber,
    to_processor,
    to_publisher,
    to_subscriber,
)
from flowpy.errors import ClosedPublisherError, DuplicateSubscriptionError, MissingBackpressureError
from flowpy.executors import default_executor, direct_executor
from flowpy.flow import Processor, Publisher, Subscriber, Subscription, default_buffer_size
from flowpy.submission import SubmissionPublisher

__all__ = [
    "ClosedPublisherError",
    "DuplicateSubscriptionError",
    "FlowAdapters",
    "MissingBackpressureError",
    "Processor",
    "Publisher",
    "SubmissionPublisher",
    "Subscriber",
    "Subscription",
    "default_buffer_size",
    "default_executor",
    "direct_executor",
    "to_flow_processor",
    "to_flow_publisher",
    "to_flow_subscriber",
    "to_processor",
    "to_publisher",
    "to_subscriber",
]
