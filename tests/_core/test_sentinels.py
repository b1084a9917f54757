"""The shared markers: unique, named, and the same object wherever they are used."""

from __future__ import annotations

from flowpy import flowable
from flowpy._core import pull, sentinels
from flowpy.operators import _map


def test_sentinels_are_named_and_distinct() -> None:
    assert repr(sentinels.NO_INITIAL) == "NO_INITIAL"
    assert repr(pull.END) == "END" and repr(pull.EMPTY) == "EMPTY"
    assert len({id(sentinels.NO_INITIAL), id(pull.END), id(pull.EMPTY)}) == 3


def test_scan_default_is_the_one_no_initial_marker() -> None:
    assert _map.scan.__defaults__ == (sentinels.NO_INITIAL,)
    assert flowable.Flowable.scan.__defaults__ == (sentinels.NO_INITIAL,)
