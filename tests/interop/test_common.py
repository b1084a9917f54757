"""The interop building blocks: Inbox (a buffering forwarding subscriber) and SingleSubscriber."""

from __future__ import annotations

import threading

import pytest

from flowpy.interop._common import Inbox, SingleSubscriber
from tests.support import Recorder


class _Probe(Inbox[int]):
    __slots__ = ("wakes",)

    def __init__(self, initial: int) -> None:
        super().__init__(initial)
        self.wakes = 0

    def _wake(self) -> None:
        self.wakes += 1


def test_inbox_buffers_items_then_the_terminal_and_wakes_after_each_signal() -> None:
    inbox = _Probe(4)
    upstream = Recorder()
    inbox.on_subscribe(_Subscription(upstream))
    inbox.on_next(1)
    inbox.on_next(2)
    failure = ValueError("boom")
    inbox.on_error(failure)
    assert list(inbox._items) == [1, 2] and inbox._done and inbox._error is failure
    assert inbox.wakes == 3
    assert upstream.requested == 4


@pytest.mark.parametrize(
    ("signal", "message"),
    [("on_next", r"^item must not be None \(rule 2\.13\)$"), ("on_error", r"^error must not be None \(rule 2\.13\)$")],
)
def test_inbox_none_signal_is_a_type_error(signal: str, message: str) -> None:
    inbox = _Probe(1)
    with pytest.raises(TypeError, match=message):
        getattr(inbox, signal)(None)
    assert inbox.wakes == 0


def test_single_subscriber_only_the_first_claim_wins_across_threads() -> None:
    single = SingleSubscriber()
    start = threading.Barrier(8)
    wins: list[bool] = []
    lock = threading.Lock()

    def claim() -> None:
        start.wait()
        won = single.claim()
        with lock:
            wins.append(won)

    threads = [threading.Thread(target=claim) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert sorted(wins) == [False] * 7 + [True]
    assert not single.claim()


class _Subscription:
    """Counts what the inbox requests."""

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder

    def request(self, n: int) -> None:
        self.recorder.requested += n

    def cancel(self) -> None:
        self.recorder.done.set()
