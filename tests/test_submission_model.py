"""A model-based test of SubmissionPublisher: random operations against a simple model.

The executor is manual, so every interleaving of producers, requests, cancels
and delivery tasks that the operations describe is reproduced exactly. One
machine per core: each builds its publisher from the SubmissionPublisher of
the core it names (tests/core_impl.py); the compiled one is skipped where
that core is not available.
"""

from __future__ import annotations

import unittest
from dataclasses import dataclass, field
from typing import ClassVar

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from flowpy import ClosedPublisherError
from flowpy.submission import SubmissionPublisher
from tests.core_impl import CORES, not_built_reason
from tests.support import ManualExecutor, Recorder


@dataclass
class Model:
    """What the model expects of one subscriber."""

    recorder: Recorder
    accepted: list[int] = field(default_factory=list)
    live: bool = True  # in the publisher's list: not closed by cancel, an error or close
    stopping: bool = False  # cancelled or sent a bad request; closes at the next run

    def buffered(self) -> int:
        return len(self.accepted) - len(self.recorder.items)


class SubmissionPublisherMachine(RuleBasedStateMachine):
    core: ClassVar[str] = "python"
    """The name of the core under test (tests/core_impl.py)."""

    def __init__(self) -> None:
        super().__init__()
        self.executor = ManualExecutor()
        self.models: list[Model] = []
        self.next_item = 0
        self.closed = False
        self.error: BaseException | None = None

    @initialize(capacity=st.sampled_from([1, 2, 4]))
    def build(self, capacity: int) -> None:
        self.capacity = capacity
        self.publisher: SubmissionPublisher[int] = CORES[self.core].SubmissionPublisher(self.executor, capacity)

    def live_models(self) -> list[Model]:
        return [m for m in self.models if m.live]

    def subscribed(self) -> list[Model]:
        return [m for m in self.models if m.recorder.subscription is not None and not m.recorder.terminated]

    @rule()
    def subscribe(self) -> None:
        model = Model(Recorder())
        self.publisher.subscribe(model.recorder)
        model.live = not self.closed
        self.models.append(model)

    @precondition(lambda self: self.subscribed())
    @rule(data=st.data(), n=st.integers(1, 5))
    def request(self, data: st.DataObject, n: int) -> None:
        data.draw(st.sampled_from(self.subscribed())).recorder.request(n)

    @precondition(lambda self: self.subscribed())
    @rule(data=st.data())
    def cancel(self, data: st.DataObject) -> None:
        model = data.draw(st.sampled_from(self.subscribed()))
        model.recorder.cancel()
        model.stopping = True

    @precondition(lambda self: self.subscribed())
    @rule(data=st.data(), n=st.sampled_from([0, -1]))
    def bad_request(self, data: st.DataObject, n: int) -> None:
        model = data.draw(st.sampled_from(self.subscribed()))
        assert model.recorder.subscription is not None
        model.recorder.subscription.request(n)
        model.stopping = True

    def expected_status(self) -> tuple[int, list[Model]]:
        live = self.live_models()
        full = [m for m in live if m.buffered() >= self.capacity]
        accepting = [m for m in live if m not in full]
        if full:
            return -len(full), accepting
        return max((m.buffered() + 1 for m in accepting), default=0), accepting

    @rule()
    def offer(self) -> None:
        item = self.next_item
        if self.closed:
            try:
                self.publisher.offer(item)
            except ClosedPublisherError:
                return
            raise AssertionError("offer after close did not raise")
        self.next_item += 1
        status, accepting = self.expected_status()
        assert self.publisher.offer(item) == status
        for model in accepting:
            model.accepted.append(item)

    @precondition(lambda self: not self.closed and all(m.buffered() < self.capacity for m in self.live_models()))
    @rule()
    def submit(self) -> None:
        item = self.next_item
        self.next_item += 1
        status, accepting = self.expected_status()
        assert self.publisher.submit(item) == status
        for model in accepting:
            model.accepted.append(item)

    @rule()
    def close(self) -> None:
        self.publisher.close()
        if not self.closed:
            self.closed = True
            for model in self.models:
                model.live = False

    @rule()
    def close_exceptionally(self) -> None:
        error = OSError("closed exceptionally")
        self.publisher.close_exceptionally(error)
        if not self.closed:
            self.closed = True
            self.error = error
            for model in self.models:
                model.live = False

    @rule()
    def run_tasks(self) -> None:
        self.executor.run_all()
        for model in self.models:
            recorder = model.recorder
            if model.stopping:
                model.live = False
                continue
            if recorder.error is not None:
                model.live = False
                assert recorder.error is self.error
                continue
            delivered = min(len(model.accepted), recorder.requested)
            if self.error is None:
                assert recorder.items == model.accepted[:delivered]
            if self.closed:
                if self.error is not None:
                    assert recorder.error is self.error
                else:
                    assert recorder.completed == (delivered == len(model.accepted))

    @invariant()
    def signals_obey_the_protocol(self) -> None:
        for model in self.models:
            recorder = model.recorder
            assert recorder.violations == []
            kinds = recorder.kinds()
            if kinds:
                assert kinds[0] == "on_subscribe"
                assert all(k == "on_next" for k in kinds[1:-1])
            assert recorder.items == model.accepted[: len(recorder.items)]
            assert len(recorder.items) <= recorder.requested

    @invariant()
    def publisher_counts_live_subscribers(self) -> None:
        if hasattr(self, "publisher"):
            real = self.publisher.number_of_subscribers
            assert sum(m.live and not m.stopping for m in self.models) <= real <= len(self.live_models())


class CompiledSubmissionPublisherMachine(SubmissionPublisherMachine):
    core = "c"


SubmissionPublisherMachine.TestCase.settings = settings(max_examples=400, stateful_step_count=40, deadline=None)
CompiledSubmissionPublisherMachine.TestCase.settings = SubmissionPublisherMachine.TestCase.settings
TestSubmissionPublisherModel = SubmissionPublisherMachine.TestCase
TestCompiledSubmissionPublisherModel = unittest.skipIf(not_built_reason() is not None, str(not_built_reason()))(
    CompiledSubmissionPublisherMachine.TestCase
)
