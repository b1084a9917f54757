"""concurrent.futures interop: from_future, consume and collect."""

from __future__ import annotations

import threading
from concurrent.futures import CancelledError, Future
from typing import Any

import pytest

from flowpy import direct_executor
from flowpy.interop.futures import collect, consume, from_future
from flowpy.submission import SubmissionPublisher
from tests.interop.helpers import ManualPublisher, ManualSubscription
from tests.support import Recorder

pytestmark = pytest.mark.timeout(30)


def settled(value: Any) -> Future[Any]:
    future: Future[Any] = Future()
    future.set_result(value)
    return future


# --- from_future -----------------------------------------------------------------


def test_from_future_settled_value_waits_for_request_then_completes() -> None:
    recorder = Recorder()
    from_future(settled("v")).subscribe(recorder)
    assert recorder.kinds() == ["on_subscribe"]  # rule 1.1: nothing before a request
    recorder.request(1)
    assert recorder.signals == [("on_subscribe", None), ("on_next", "v"), ("on_complete", None)]
    assert recorder.violations == []


def test_from_future_pending_future_signals_on_the_settling_thread() -> None:
    future: Future[int] = Future()
    recorder = Recorder(initial=5)
    from_future(future).subscribe(recorder)
    assert recorder.kinds() == ["on_subscribe"]
    thread = threading.Thread(target=future.set_result, args=(7,))
    thread.start()
    thread.join()
    assert recorder.done.wait(5)
    assert recorder.kinds() == ["on_subscribe", "on_next", "on_complete"]
    assert recorder.items == [7]
    assert recorder.threads == {threading.get_ident(), thread.ident}


def test_from_future_failed_future_signals_the_same_exception_without_request() -> None:
    future: Future[int] = Future()
    error = OSError("disk gone")
    future.set_exception(error)
    recorder = Recorder()
    from_future(future).subscribe(recorder)
    assert recorder.kinds() == ["on_subscribe", "on_error"]
    assert recorder.error is error


def test_from_future_cancelled_future_signals_cancelled_error_without_request() -> None:
    future: Future[int] = Future()
    assert future.cancel()
    recorder = Recorder()
    from_future(future).subscribe(recorder)
    assert recorder.kinds() == ["on_subscribe", "on_error"]
    assert isinstance(recorder.error, CancelledError)


def test_from_future_none_result_completes_without_item_or_request() -> None:
    recorder = Recorder()
    from_future(settled(None)).subscribe(recorder)
    assert recorder.kinds() == ["on_subscribe", "on_complete"]


@pytest.mark.parametrize(
    ("n", "kind", "message"),
    [
        (0, ValueError, r"^non-positive subscription request: n must be > 0 \(rule 3\.9\), got 0$"),
        (-3, ValueError, r"^non-positive subscription request: n must be > 0 \(rule 3\.9\), got -3$"),
        (True, TypeError, r"^subscription request must be an int \(rule 3\.9\), got True$"),
        (1.0, TypeError, r"^subscription request must be an int \(rule 3\.9\), got 1\.0$"),
    ],
)
def test_from_future_bad_request_signals_error_not_item(n: Any, kind: type, message: str) -> None:
    recorder = Recorder()
    from_future(settled(1)).subscribe(recorder)
    recorder.subscription.request(n)  # type: ignore[union-attr]
    assert recorder.kinds() == ["on_subscribe", "on_error"]
    assert isinstance(recorder.error, kind)
    with pytest.raises(kind, match=message):
        raise recorder.error  # type: ignore[misc]


def test_from_future_failure_while_subscribed_signals_at_once() -> None:
    future: Future[int] = Future()
    recorder = Recorder()
    from_future(future).subscribe(recorder)
    future.set_exception(EOFError())
    assert recorder.kinds() == ["on_subscribe", "on_error"]


def test_from_future_cancel_before_settling_signals_nothing() -> None:
    future: Future[int] = Future()
    recorder = Recorder(initial=1)
    from_future(future).subscribe(recorder)
    recorder.cancel()
    future.set_result(1)
    recorder.request(1)  # rule 3.6: no-op after cancel
    assert recorder.kinds() == ["on_subscribe"]
    assert not future.cancelled()  # the future is not the subscription's to cancel


def test_from_future_every_subscriber_gets_the_value() -> None:
    future: Future[str] = Future()
    publisher = from_future(future)
    recorders = [Recorder(initial=1) for _ in range(3)]
    for recorder in recorders:
        publisher.subscribe(recorder)
    future.set_result("x")
    assert [r.items for r in recorders] == [["x"], ["x"], ["x"]]
    assert all(r.completed and not r.violations for r in recorders)


def test_from_future_concurrent_request_and_settle_signal_exactly_once(tiny_switch_interval: None) -> None:
    for _ in range(200):
        future: Future[int] = Future()
        recorder = Recorder()
        from_future(future).subscribe(recorder)
        start = threading.Barrier(2)

        def settle(future: Future[int] = future, start: threading.Barrier = start) -> None:
            start.wait()
            future.set_result(3)

        thread = threading.Thread(target=settle)
        thread.start()
        start.wait()
        recorder.request(1)
        thread.join()
        assert recorder.done.wait(5)
        assert recorder.kinds() == ["on_subscribe", "on_next", "on_complete"]
        assert recorder.violations == []


def test_from_future_rejects_non_future() -> None:
    with pytest.raises(TypeError, match=r"^future must be a concurrent.futures.Future, got 3$"):
        from_future(3)  # type: ignore[arg-type]


def test_from_future_subscribe_none_is_type_error() -> None:
    with pytest.raises(TypeError, match=r"^subscriber must not be None \(rule 1\.9\)$"):
        from_future(settled(1)).subscribe(None)  # type: ignore[arg-type]


# --- consume / collect -------------------------------------------------------------


def test_collect_returns_future_of_items_in_order() -> None:
    with SubmissionPublisher[int](direct_executor) as publisher:
        future = collect(publisher)
        assert isinstance(future, Future) and not future.done()
        for i in range(100):
            publisher.submit(i)
    assert future.result(timeout=5) == list(range(100))


def test_collect_error_fails_the_future_with_that_error() -> None:
    publisher = SubmissionPublisher[int](direct_executor)
    future = collect(publisher)
    publisher.submit(1)
    error = KeyError("boom")
    publisher.close_exceptionally(error)
    with pytest.raises(KeyError) as raised:
        future.result(timeout=5)
    assert raised.value is error


def test_consume_calls_fn_for_each_item_and_settles_with_none() -> None:
    seen: list[int] = []
    with SubmissionPublisher[int]() as publisher:
        future = consume(publisher, seen.append)
        for i in range(1000):
            publisher.submit(i)
    assert future.result(timeout=10) is None
    assert seen == list(range(1000))


def test_consume_fn_raising_cancels_and_fails_the_future() -> None:
    publisher = ManualPublisher()
    error = ValueError("bad item")

    def fn(item: int) -> None:
        if item == 2:
            raise error

    future = consume(publisher, fn)
    assert publisher.subscription.requests == [2**63 - 1]
    for i in range(4):
        publisher.subscriber.on_next(i)
    assert publisher.subscription.cancelled.is_set()
    assert future.exception(timeout=0) is error


def test_consume_future_cancel_cancels_the_subscription() -> None:
    publisher = ManualPublisher()
    future = consume(publisher, print)
    assert future.cancel()
    assert publisher.subscription.cancelled.is_set()
    publisher.subscriber.on_complete()  # a late terminal signal is ignored
    assert future.cancelled()


def test_consume_future_cancelled_before_on_subscribe_cancels_on_arrival() -> None:
    class LatePublisher(ManualPublisher):
        def subscribe(self, subscriber: Any) -> None:
            self.subscribers.append(subscriber)

    publisher = LatePublisher()
    future = consume(publisher, print)
    future.cancel()
    subscription = ManualSubscription()
    publisher.subscriber.on_subscribe(subscription)
    assert subscription.cancelled.is_set()
    assert subscription.requests == []


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: consume(None, print), r"^publisher must be a Publisher, got None$"),  # type: ignore[arg-type]
        (lambda: consume(5, print), r"^publisher must be a Publisher, got 5$"),  # type: ignore[arg-type]
        (lambda: consume(ManualPublisher(), 3), r"^fn must be callable, got 3$"),  # type: ignore[arg-type]
        (lambda: collect(None), r"^publisher must be a Publisher, got None$"),  # type: ignore[arg-type]
        (lambda: collect(5), r"^publisher must be a Publisher, got 5$"),  # type: ignore[arg-type]
    ],
)
def test_consume_and_collect_reject_bad_arguments(call: Any, message: str) -> None:
    with pytest.raises(TypeError, match=message):
        call()
