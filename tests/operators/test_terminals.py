"""Terminals: to_list, reduce, blocking_iter, subscribe."""

from __future__ import annotations

import operator

import pytest

from flowpy import operators
from flowpy.sources import RangePublisher, error, just
from tests.operators.conftest import WAIT, Spy


def test_to_list_collects_all_items() -> None:
    assert operators.to_list(just(1, 2, 3)).result(WAIT) == [1, 2, 3]


def test_reduce_folds_with_initial() -> None:
    assert operators.reduce(RangePublisher(1, 4), operator.mul, 1).result(WAIT) == 24


def test_reduce_empty_stream_gives_initial() -> None:
    assert operators.reduce(just(), operator.add, 7).result(WAIT) == 7


def test_reduce_function_raises_fails_future_and_cancels() -> None:
    spy = Spy(RangePublisher(0, 10))
    future = operators.reduce(spy, lambda a, b: a / 0, 1)
    with pytest.raises(ZeroDivisionError):
        future.result(WAIT)
    assert spy.subscription.cancelled.is_set()


def test_reduce_stream_error_fails_future() -> None:
    with pytest.raises(KeyError):
        operators.reduce(error(KeyError("k")), operator.add, 0).result(WAIT)


def test_blocking_iter_keeps_at_most_prefetch_ahead_and_cancels_on_close() -> None:
    spy = Spy(RangePublisher(0, 1000))
    iterator = operators.blocking_iter(spy, 8)
    assert spy.subscription.requests == [8]
    assert [next(iterator) for _ in range(3)] == [0, 1, 2]
    iterator.close()
    assert spy.subscription.cancelled.is_set()


def test_subscribe_callbacks_receive_items_and_completion() -> None:
    seen: list[int] = []
    done: list[bool] = []
    subscriber = operators.subscribe(just(1, 2), seen.append, on_complete=lambda: done.append(True))
    assert seen == [1, 2]
    assert done == [True]
    assert subscriber.is_done
