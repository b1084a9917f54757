"""SubmissionPublisher.submit_many: submit for each item, in order, a buffer's worth per lock hold.

Every test runs once per core: it asks for the ``core`` fixture
(tests/conftest.py, tests/core_impl.py) and builds its publisher from it.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from flowpy import ClosedPublisherError, ReentrantSubmitError, direct_executor
from flowpy.executors import DaemonThreadPool
from flowpy.submission import SubmissionPublisher
from tests.core_impl import CORES, Core
from tests.support import ManualExecutor, Recorder

MAX = 2**63 - 1


def test_every_subscriber_gets_every_item_in_order_and_the_count_is_returned(core: Core) -> None:
    executor = ManualExecutor()
    publisher: SubmissionPublisher[int] = core.SubmissionPublisher(executor, 16)
    first, second = Recorder(initial=MAX), Recorder(initial=MAX)
    publisher.subscribe(first)
    publisher.subscribe(second)
    executor.run_all()
    assert publisher.submit_many(range(10)) == 10
    assert len(executor.tasks) == 2  # one delivery task per subscriber for the whole chunk
    assert publisher.estimate_maximum_lag() == 10
    executor.run_all()
    publisher.close()
    executor.run_all()
    assert first.items == second.items == list(range(10))
    assert first.completed and second.completed and first.violations == second.violations == []


def test_full_buffers_block_per_item_as_submit_does(core: Core) -> None:
    # A blocked producer runs the queued delivery task itself, so a manual
    # executor is enough: capacity 2, 25 items, every one delivered in order.
    executor = ManualExecutor()
    publisher: SubmissionPublisher[int] = core.SubmissionPublisher(executor, 2)
    recorders = [Recorder(initial=MAX), Recorder(initial=MAX)]
    for recorder in recorders:
        publisher.subscribe(recorder)
    executor.run_all()
    assert publisher.submit_many(iter(range(25))) == 25
    publisher.close()
    executor.run_all()
    for recorder in recorders:
        assert recorder.items == list(range(25)) and recorder.completed and recorder.violations == []


def test_a_none_item_raises_after_the_items_before_it_and_reads_no_further(core: Core) -> None:
    executor = ManualExecutor()
    publisher: SubmissionPublisher[Any] = core.SubmissionPublisher(executor, 8)
    recorder = Recorder(initial=MAX)
    publisher.subscribe(recorder)
    executor.run_all()
    pulled: list[Any] = []

    def items() -> Iterator[Any]:
        for item in [1, 2, None, 3, *range(10, 30)]:
            pulled.append(item)
            yield item

    with pytest.raises(TypeError, match=r"^item must not be None \(rule 2\.13\)$"):
        publisher.submit_many(items())
    executor.run_all()
    assert recorder.items == [1, 2]
    assert len(pulled) == 8  # one chunk of max_buffer_capacity items, not the whole iterable
    publisher.close()


def test_no_subscribers_and_closed_publisher_behave_as_submit(core: Core) -> None:
    publisher: SubmissionPublisher[int] = core.SubmissionPublisher(ManualExecutor(), 4)
    assert publisher.submit_many(range(10)) == 10  # nobody to deliver to, as submit() returning 0
    assert publisher.submit_many([]) == 0
    publisher.close()
    with pytest.raises(ClosedPublisherError, match=r"^cannot submit\(\): publisher was closed by close\(\)$"):
        publisher.submit_many(range(3))


def test_a_closed_subscription_is_dropped_and_the_others_go_on(core: Core) -> None:
    executor = ManualExecutor()
    publisher: SubmissionPublisher[int] = core.SubmissionPublisher(executor, 4)
    leaving, staying = Recorder(initial=MAX), Recorder(initial=MAX)
    publisher.subscribe(leaving)
    publisher.subscribe(staying)
    executor.run_all()
    publisher.submit_many(range(3))
    executor.run_all()
    leaving.cancel()
    executor.run_all()
    publisher.submit_many(range(3, 12))
    publisher.close()
    executor.run_all()
    assert leaving.items == [0, 1, 2] and not leaving.completed
    assert staying.items == list(range(12)) and staying.completed
    assert publisher.number_of_subscribers == 0


@pytest.mark.timeout(60)
def test_an_endless_iterable_is_read_lazily_until_the_publisher_closes(core: Core) -> None:
    pool = DaemonThreadPool(2)
    publisher: SubmissionPublisher[int] = core.SubmissionPublisher(pool, 8)
    seen: list[int] = []

    def on_next(item: int) -> None:
        seen.append(item)
        if item == 1_000:
            publisher.close()

    recorder = Recorder(initial=MAX, on_next_hook=on_next)
    publisher.subscribe(recorder)
    with pytest.raises(ClosedPublisherError):
        publisher.submit_many(itertools.count())
    assert recorder.done.wait(10)
    assert seen[:1_001] == list(range(1_001))
    pool.shutdown()


@pytest.mark.timeout(60)
def test_chunks_of_concurrent_producers_never_interleave(core: Core, tiny_switch_interval: None) -> None:
    pool = DaemonThreadPool(2)
    capacity = 4
    publisher: SubmissionPublisher[tuple[int, int]] = core.SubmissionPublisher(pool, capacity)
    recorders = [Recorder(initial=MAX), Recorder(initial=MAX)]
    for recorder in recorders:
        publisher.subscribe(recorder)

    def produce(producer: int) -> None:
        publisher.submit_many((producer, i) for i in range(200))

    threads = [threading.Thread(target=produce, args=(p,)) for p in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    publisher.close()
    for recorder in recorders:
        assert recorder.done.wait(20)
    assert recorders[0].items == recorders[1].items  # one order for every subscriber
    items = recorders[0].items
    assert sorted(items) == sorted((p, i) for p in range(3) for i in range(200))
    for producer in range(3):
        positions = {i: n for n, (p, i) in enumerate(items) if p == producer}
        for start in range(0, 200, capacity):  # a chunk's items are consecutive
            assert [positions[i] for i in range(start, start + capacity)] == list(
                range(positions[start], positions[start] + capacity)
            )
    pool.shutdown()


def test_reentrant_submit_many_into_a_full_buffer_raises(core: Core) -> None:
    publisher: SubmissionPublisher[int] = core.SubmissionPublisher(direct_executor, 2)
    failures: list[BaseException] = []

    def resubmit(item: int) -> None:
        if item == 0:
            try:
                publisher.submit_many(range(100, 110))
            except ReentrantSubmitError as exc:
                failures.append(exc)

    recorder = Recorder(initial=MAX, on_next_hook=resubmit)
    publisher.subscribe(recorder)
    publisher.submit(0)
    assert len(failures) == 1
    assert str(failures[0]).startswith("cannot submit(): the buffer of ")
    publisher.close()
    assert recorder.items == [0, 100, 101] and recorder.completed


def test_a_chunk_that_no_longer_fits_a_buffer_goes_in_item_by_item_and_nothing_is_lost(core: Core) -> None:
    # The first subscriber is delivered to at once (its tasks run inline), and
    # publishes -1 from on_next while the chunk is being appended: -1 lands in
    # the second buffer between the chunk's appends to the two buffers, so the
    # chunk no longer fits there whole. It must go in item by item, waiting
    # for space as submit would; the second's tasks wait in a manual executor,
    # which the blocked producer drains by running the queued task itself.
    queued = ManualExecutor()

    def execute(task: Any) -> None:
        if task.__self__.subscriber is first:
            task()
        else:
            queued.execute(task)

    publisher: SubmissionPublisher[int] = core.SubmissionPublisher(execute, 4)

    def resubmit(item: int) -> None:
        if item == 0:
            publisher.submit(-1)

    first, second = Recorder(initial=MAX, on_next_hook=resubmit), Recorder(initial=MAX)
    publisher.subscribe(first)
    publisher.subscribe(second)
    queued.run_all()
    assert publisher.submit_many(range(4)) == 4
    queued.run_all()
    publisher.close()
    queued.run_all()
    assert first.items == [0, 1, 2, 3, -1]  # the chunk was in its buffer before on_next(0) ran
    assert second.items == [-1, 0, 1, 2, 3]
    assert first.completed and second.completed and first.violations == second.violations == []


def test_offer_each_into_a_closed_subscription_prunes_it_and_drops_the_rest() -> None:
    """The pure twin's _offer_each (the compiled twin's is C, tested in tests/test_submission_compiled.py)."""
    executor = ManualExecutor()
    publisher: SubmissionPublisher[int] = CORES["python"].SubmissionPublisher(executor, 4)
    leaving, staying = Recorder(initial=MAX), Recorder(initial=MAX)
    publisher.subscribe(leaving)
    publisher.subscribe(staying)
    executor.run_all()
    closed = publisher._subscriptions[0]
    leaving.cancel()
    executor.run_all()
    assert closed.is_closed and closed in publisher._subscriptions  # closed, not yet pruned
    with publisher._lock:
        publisher._offer_each(closed, [1, 2, 3])
    assert len(publisher._subscriptions) == 1 and closed not in publisher._subscriptions
    assert leaving.items == []
    publisher.close()
