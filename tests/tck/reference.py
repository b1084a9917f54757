"""Correct reference implementations the TCK must pass: a range publisher, two subscribers, a processor.

They exist to show that the verifications accept what the rules allow; the
broken variants in ``broken.py`` derive from them with one defect each.
"""

from __future__ import annotations

import threading
from typing import TypeVar

from flowpy import flow
from flowpy._demand import MAX_DEMAND, add_demand, check_request

T = TypeVar("T")


# --- A synchronous, trampolined range publisher --------------------------------


class RangePublisher(flow.Publisher[int]):
    """Publishes ``start .. start + count - 1`` on the thread that calls ``request``.

    Emission is trampolined: only the ``request`` that raises the demand from
    zero emits, so ``on_next -> request`` never recurses (rule 3.3).
    """

    def __init__(self, start: int, count: int) -> None:
        self.start = start
        self.count = count

    def subscribe(self, subscriber: flow.Subscriber[int]) -> None:
        if subscriber is None:
            raise TypeError("subscriber must not be None (rule 1.9)")
        subscriber.on_subscribe(RangeSubscription(subscriber, self.start, self.start + self.count))

    def __repr__(self) -> str:
        return f"RangePublisher({self.start}, {self.count})"


class RangeSubscription(flow.Subscription):
    def __init__(self, subscriber: flow.Subscriber[int], index: int, end: int) -> None:
        self.subscriber: flow.Subscriber[int] | None = subscriber
        self.index = index
        self.end = end
        # --- Guarded by self.lock ------------------------------------------
        self.lock = threading.Lock()
        self.requested = 0  # outstanding demand; > 0 means an emit loop runs
        self.error: BaseException | None = None  # a rule 3.9 violation to signal
        self.cancelled = False

    def request(self, n: int) -> None:
        with self.lock:
            if self.cancelled:
                return
            error = check_request(n)
            if error is not None:
                self.error = error
                n = 1  # start the loop, which signals the error
            running = self.requested > 0
            self.requested = add_demand(self.requested, n)
            if running:
                return
        self.emit()

    def emit(self) -> None:
        while True:
            with self.lock:
                subscriber = self.subscriber
                if self.cancelled or subscriber is None:
                    return
                error, self.error = self.error, None
                if error is not None or self.index == self.end:
                    self._cancel_locked()
                else:
                    item = self.index
                    self.index += 1
            if error is not None:
                subscriber.on_error(error)
                return
            if self.subscriber is None:
                subscriber.on_complete()
                return
            subscriber.on_next(item)
            with self.lock:
                # Decremented only after on_next returned, so that a request
                # made inside on_next sees a running loop and does not recurse.
                if self.requested != MAX_DEMAND:
                    self.requested -= 1
                if self.requested == 0:
                    return

    def _cancel_locked(self) -> None:
        self.cancelled = True
        self.subscriber = None  # rule 3.13

    def cancel(self) -> None:
        with self.lock:
            self._cancel_locked()
