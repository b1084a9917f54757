"""Backpressure-aware operators on flowpy publishers.

Each function takes publisher(s) and returns a new :class:`~flowpy.flow.Publisher`
that applies the operation to every subscription, with the demand of its
subscriber translated upstream as its docstring says (see
``docs/operators.md`` for the marble diagrams and the demand contract of
each). :class:`flowpy.flowable.Flowable` offers the same operations as
chained methods.

Fusion: ``map``, ``filter``, ``take``, ``skip``, ``take_while``, ``scan``,
``skip_while``, ``distinct``, ``distinct_until_changed``, ``do_on_next``,
``dematerialize`` (and ``first``, ``element_at``, made of ``take`` and ``skip``),
and the time steps ``throttle_first``, ``timestamp`` and ``time_interval``,
applied to one another run as one stage, on the thread that delivers the
upstream's signals, with no queue between them. ``observe_on``,
``subscribe_on``, ``merge``, ``concat``, ``zip``, ``flat_map``, ``buffer`` and
the backpressure operators are stages of their own.

Grouping, sharing, parallel: ``group_by`` splits a stream into one
:class:`GroupedPublisher` per key; ``replay`` and ``cache`` share one
upstream and replay its items to late subscribers; ``parallel`` deals a
stream out to the rails of a :class:`ParallelPublisher` and ``sequential``
merges them back (:class:`flowpy.parallel.ParallelFlowable` is the fluent
form).
"""

from flowpy.operators._backpressure import (
    BackpressureStrategy,
    DropHandler,
    OverflowPolicy,
    on_backpressure,
    on_backpressure_buffer,
    on_backpressure_drop,
    on_backpressure_error,
    on_backpressure_latest,
)
from flowpy.operators._buffer import buffer, buffer_with_time
from flowpy.operators._delay import delay, delay_subscription
from flowpy.operators._filter import filter_ as filter
from flowpy.operators._group_by import GroupedPublisher, group_by
from flowpy.operators._interval import interval, timer
from flowpy.operators._map import map_ as map
from flowpy.operators._map import scan
from flowpy.operators._merge import concat, flat_map, merge
from flowpy.operators._observe_on import observe_on
from flowpy.operators._parallel import ParallelPublisher, parallel, sequential
from flowpy.operators._replay import cache, replay
from flowpy.operators._share import ConnectablePublisher, publish, share
from flowpy.operators._subscribe_on import subscribe_on
from flowpy.operators._take import skip, take, take_while
from flowpy.operators._terminals import blocking_iter, reduce, subscribe, to_list
from flowpy.operators._throttle import debounce, sample, throttle_first
from flowpy.operators._timeout import timeout
from flowpy.operators._timestamp import TimeInterval, Timestamped, time_interval, timestamp
from flowpy.operators._unicast import UnicastPublisher
from flowpy.operators._window import window_with_count, window_with_time
from flowpy.operators._zip import zip_ as zip

# --- Rx vocabulary: sources, error recovery, transforms, filters, hooks ---
# isort: split
from flowpy.operators._amb import amb
from flowpy.operators._combine import combine_latest, with_latest_from
from flowpy.operators._defer import defer, using
from flowpy.operators._distinct import distinct, distinct_until_changed
from flowpy.operators._hooks import (
    do_finally,
    do_on_cancel,
    do_on_complete,
    do_on_error,
    do_on_next,
    do_on_request,
    do_on_subscribe,
)
from flowpy.operators._notification import Notification, NotificationKind, dematerialize, materialize
from flowpy.operators._recover import on_error_resume, on_error_return, retry, retry_when
from flowpy.operators._select import element_at, first, ignore_elements, last, take_last, take_until
from flowpy.operators._sequential import concat_map, default_if_empty, repeat, start_with
from flowpy.operators._switch import switch_map
from flowpy.operators._take import skip_while

__all__ = [
    "BackpressureStrategy",
    "ConnectablePublisher",
    "DropHandler",
    "GroupedPublisher",
    "OverflowPolicy",
    "ParallelPublisher",
    "TimeInterval",
    "Timestamped",
    "UnicastPublisher",
    "blocking_iter",
    "buffer",
    "buffer_with_time",
    "cache",
    "concat",
    "debounce",
    "delay",
    "delay_subscription",
    "filter",
    "flat_map",
    "group_by",
    "interval",
    "map",
    "merge",
    "observe_on",
    "on_backpressure",
    "on_backpressure_buffer",
    "on_backpressure_drop",
    "on_backpressure_error",
    "on_backpressure_latest",
    "parallel",
    "publish",
    "reduce",
    "replay",
    "sample",
    "scan",
    "sequential",
    "share",
    "skip",
    "subscribe",
    "subscribe_on",
    "take",
    "take_while",
    "throttle_first",
    "time_interval",
    "timeout",
    "timer",
    "timestamp",
    "to_list",
    "window_with_count",
    "window_with_time",
    "zip",
]

# --- Rx vocabulary: sources, error recovery, transforms, filters, hooks ---
__all__ += [
    "Notification",
    "NotificationKind",
    "amb",
    "combine_latest",
    "concat_map",
    "default_if_empty",
    "defer",
    "dematerialize",
    "distinct",
    "distinct_until_changed",
    "do_finally",
    "do_on_cancel",
    "do_on_complete",
    "do_on_error",
    "do_on_next",
    "do_on_request",
    "do_on_subscribe",
    "element_at",
    "first",
    "ignore_elements",
    "last",
    "materialize",
    "on_error_resume",
    "on_error_return",
    "repeat",
    "retry",
    "retry_when",
    "skip_while",
    "start_with",
    "switch_map",
    "take_last",
    "take_until",
    "using",
    "with_latest_from",
]
