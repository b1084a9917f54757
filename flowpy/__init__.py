"""flowpy: ``java.util.concurrent.Flow`` for Python.

The Flow and Reactive Streams interfaces, :class:`FlowAdapters` between them,
:class:`SubmissionPublisher` (a bounded buffer per subscriber, delivered on an
executor), sources, subscribers and processors, and the fluent
:class:`Flowable` over the backpressure-aware operators of
:mod:`flowpy.operators`. :data:`implementation` is ``"c"`` when
SubmissionPublisher runs on its compiled core, ``"python"`` otherwise. The TCK (:mod:`flowpy.tck`), the interop adapters
(:mod:`flowpy.interop`) and Spark (:mod:`flowpy.spark`) are imported on their own.
"""

from flowpy._impl import implementation
from flowpy.adapters import (
    FlowAdapters,
    to_flow_processor,
    to_flow_publisher,
    to_flow_subscriber,
    to_processor,
    to_publisher,
    to_subscriber,
)
from flowpy.errors import (
    ClosedPublisherError,
    DuplicateSubscriptionError,
    MissingBackpressureError,
    ReentrantSubmitError,
    StreamTimeoutError,
    UndeliveredItemsWarning,
)
from flowpy.executors import default_executor, direct_executor
from flowpy.flow import Processor, Publisher, Subscriber, Subscription, default_buffer_size
from flowpy.flowable import ConnectableFlowable, Flowable, GroupedFlowable
from flowpy.parallel import ParallelFlowable
from flowpy.processors import MulticastProcessor, TransformProcessor
from flowpy.schedulers import Scheduler, TimerScheduler, default_scheduler
from flowpy.sources import IterablePublisher, RangePublisher
from flowpy.submission import SubmissionPublisher
from flowpy.subscribers import AsyncSubscriber, LambdaSubscriber, SyncSubscriber, collect, consume, iterate

__all__ = [
    "AsyncSubscriber",
    "ClosedPublisherError",
    "ConnectableFlowable",
    "DuplicateSubscriptionError",
    "FlowAdapters",
    "Flowable",
    "GroupedFlowable",
    "IterablePublisher",
    "LambdaSubscriber",
    "MissingBackpressureError",
    "MulticastProcessor",
    "ParallelFlowable",
    "Processor",
    "Publisher",
    "RangePublisher",
    "ReentrantSubmitError",
    "Scheduler",
    "StreamTimeoutError",
    "SubmissionPublisher",
    "Subscriber",
    "Subscription",
    "SyncSubscriber",
    "TimerScheduler",
    "TransformProcessor",
    "UndeliveredItemsWarning",
    "collect",
    "consume",
    "default_buffer_size",
    "default_executor",
    "default_scheduler",
    "direct_executor",
    "implementation",
    "iterate",
    "to_flow_processor",
    "to_flow_publisher",
    "to_flow_subscriber",
    "to_processor",
    "to_publisher",
    "to_subscriber",
]
