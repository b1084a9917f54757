"""The public face of the package: __all__, typing marker, variance; and its source as this CPython compiles it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import flowpy
from flowpy import flow
from tests.interrupts import unhandled_back_jumps

SOURCES = sorted(Path(flowpy.__file__).parent.rglob("*.py"))


def test_all_lists_exactly_the_public_names() -> None:
    public = {name for name in vars(flowpy) if not name.startswith("_")}
    modules = {name for name in public if type(getattr(flowpy, name)).__name__ == "module"}
    assert set(flowpy.__all__) == public - modules
    assert flowpy.__all__ == sorted(flowpy.__all__)


def test_package_is_typed() -> None:
    assert (Path(flowpy.__file__).parent / "py.typed").is_file()


def test_type_variance() -> None:
    """For the type checker: a Publisher[bool] is a Publisher[int]; a Subscriber[int] a Subscriber[bool]."""

    def takes_int_publisher(publisher: flow.Publisher[int]) -> None:
        return None

    def takes_bool_subscriber(subscriber: flow.Subscriber[bool]) -> None:
        return None

    bools: flowpy.SubmissionPublisher[bool] = flowpy.SubmissionPublisher(flowpy.direct_executor)
    takes_int_publisher(bools)
    ints: flow.Subscriber[int] | None = None
    if ints is not None:
        takes_bool_subscriber(ints)
    bools.close()


@pytest.mark.parametrize("path", SOURCES, ids=lambda path: str(path.relative_to(Path(flowpy.__file__).parent)))
def test_no_with_block_has_a_loop_an_interrupt_could_leave_without_its_exit(path: Path) -> None:
    # A Ctrl-C there would leave the block's lock held: every later caller hangs.
    # On 3.11 every such jump is covered; the free-threaded job (3.13t) is where
    # such a loop shows.
    assert unhandled_back_jumps(str(path)) == []


def test_no_class_is_made_at_run_time() -> None:
    # CPython 3.13t makes classes immortal once a thread has started: one made
    # per call (a class statement in a function) is never freed, nor what its
    # methods keep, such as a subscriber (docs/internals.md).
    nested = [
        f"{path.relative_to(Path(flowpy.__file__).parent)}:{node.lineno} {node.name} in {function.name}()"
        for path in SOURCES
        for function in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef))
        for node in ast.walk(function)
        if isinstance(node, ast.ClassDef)
    ]
    assert nested == []
