"""The two cores expose one interface: the compiled types, their stub (``_cbuffered.pyi``) and the Python classes.

For each pair (the subscription, the producer lock, the publisher's producer
path) the names a caller may use are compared, and for each method its
parameters: names, kinds and which have defaults. The compiled methods carry
their signatures in their docstrings (``__text_signature__``), which is what
:func:`inspect.signature` reads. Annotations are compared only in the stub
against the Python class, where both have them.
"""

from __future__ import annotations

import ast
import functools
import inspect
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

import flowpy
from flowpy import _buffered, submission
from tests.core_impl import CORES, not_built_reason

pytestmark = pytest.mark.skipif(not_built_reason() is not None, reason=str(not_built_reason()))

STUB = Path(flowpy.__file__).parent / "_cbuffered.pyi"

Shape = tuple[tuple[str, str, bool], ...] | str
"""A method's parameters but ``self`` as (name, kind, has a default), or ``"attribute"`` for data."""

# Private names that are part of the interface between the cores' parts: the
# executor runs a subscription's task as `_run()`; the state word is read by tests.
SUBSCRIPTION_PROTOCOL = frozenset({"_run", "_ctl"})
LOCK_PROTOCOL = frozenset({"_is_owned", "_release_save", "_acquire_restore", "_at_fork_reinit"})
# What each twin implements itself (the rest is their shared base class).
PRODUCER_PATH = frozenset({"submit", "offer", "_publish_chunk", "_recover"})

_KINDS = {
    "posonlyargs": inspect.Parameter.POSITIONAL_ONLY.name,
    "args": inspect.Parameter.POSITIONAL_OR_KEYWORD.name,
    "vararg": inspect.Parameter.VAR_POSITIONAL.name,
    "kwonlyargs": inspect.Parameter.KEYWORD_ONLY.name,
    "kwarg": inspect.Parameter.VAR_KEYWORD.name,
}


def _stub_shape(node: ast.AST) -> Shape:
    if isinstance(node, ast.AnnAssign):
        return "attribute"
    assert isinstance(node, ast.FunctionDef)
    if any(isinstance(d, ast.Name) and d.id == "property" for d in node.decorator_list):
        return "attribute"
    args = node.args
    positional = [*args.posonlyargs, *args.args]
    defaults = len(positional) - len(args.defaults)
    shape = [(a.arg, _KINDS["posonlyargs"], i >= defaults) for i, a in enumerate(args.posonlyargs)]
    shape += [(a.arg, _KINDS["args"], i + len(args.posonlyargs) >= defaults) for i, a in enumerate(args.args)]
    if args.vararg is not None:
        shape.append((args.vararg.arg, _KINDS["vararg"], False))
    shape += [
        (a.arg, _KINDS["kwonlyargs"], d is not None) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True)
    ]
    if args.kwarg is not None:
        shape.append((args.kwarg.arg, _KINDS["kwarg"], False))
    return tuple(shape[1:])  # without self: how it is passed is not the caller's concern


def stub() -> tuple[dict[str, dict[str, Shape]], set[str]]:
    """The stub's classes (name -> member -> shape) and its module-level names."""
    tree = ast.parse(STUB.read_text())
    classes: dict[str, dict[str, Shape]] = {}
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            members = classes.setdefault(node.name, {})
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AnnAssign):
                    name = item.name if isinstance(item, ast.FunctionDef) else ast.unparse(item.target)
                    members[name] = _stub_shape(item)
            names.add(node.name)
        elif isinstance(node, ast.FunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.AnnAssign):
            names.add(ast.unparse(node.target))
    return classes, names


def shape_of(owner: type, name: str) -> Shape:
    """The shape of ``owner.name`` at run time."""
    member = inspect.getattr_static(owner, name)
    if isinstance(member, functools.partialmethod):
        member = getattr(owner, name)
    if isinstance(member, staticmethod | classmethod):
        member = member.__func__
    if not callable(member) or isinstance(member, property):
        return "attribute"
    try:
        signature = inspect.signature(member)
    except ValueError:
        pytest.fail(f"{owner.__qualname__}.{name} has no signature (a C method needs one in its docstring)")
    parameters = list(signature.parameters.values())
    if parameters and parameters[0].name == "self":
        del parameters[0]  # as in _stub_shape
    return tuple((p.name, p.kind.name, p.default is not inspect.Parameter.empty) for p in parameters)


def interface(cls: type, protocol: frozenset[str], skip: frozenset[str] = frozenset()) -> set[str]:
    """The names a caller may use: the public ones and ``protocol``."""
    return {n for n in dir(cls) if (not n.startswith("_") or n in protocol) and n not in skip}


def members(cls: type, names: set[str]) -> dict[str, Shape]:
    return {name: shape_of(cls, name) for name in sorted(names)}


def test_the_state_word_has_the_same_named_bits_in_both_cores_and_the_stub() -> None:
    compiled = CORES["c"].BufferedSubscription.__module__
    bits = __import__(compiled, fromlist=["CTL_BITS"]).CTL_BITS
    assert bits == _buffered.CTL_BITS
    assert len(set(bits.values())) == len(bits)
    assert all(value > 0 and value & (value - 1) == 0 for value in bits.values())
    _, names = stub()
    assert {"CTL_BITS", *bits} <= names


def test_both_cores_leave_a_pending_task_to_the_executor_for_the_same_time() -> None:
    compiled = __import__(CORES["c"].BufferedSubscription.__module__, fromlist=["CLAIM_DELAY"])
    assert compiled.CLAIM_DELAY == _buffered.CLAIM_DELAY
    gil = getattr(sys, "_is_gil_enabled", lambda: True)()
    expected = 0.0 if gil else 0.001
    assert expected == _buffered.CLAIM_DELAY
    _, names = stub()
    assert "CLAIM_DELAY" in names


def test_the_subscriptions_have_one_interface() -> None:
    python, compiled = CORES["python"].BufferedSubscription, CORES["c"].BufferedSubscription
    classes, _ = stub()
    expected = members(python, interface(python, SUBSCRIPTION_PROTOCOL))
    assert members(compiled, interface(compiled, SUBSCRIPTION_PROTOCOL)) == expected
    stubbed = dict(classes["BufferedSubscription"])
    # The constructor: the compiled type's takes *args, **kwargs at the C level; the stub states the reference's.
    assert stubbed.pop("__init__") == shape_of(python, "__init__")
    assert stubbed == expected


def test_the_producer_locks_have_one_interface_that_of_threading_rlock() -> None:
    compiled = CORES["c"].ProducerLock
    assert isinstance(compiled, type)
    classes, _ = stub()
    names = interface(compiled, LOCK_PROTOCOL) | {"__enter__", "__exit__"}
    rlock = type(threading.RLock())
    assert names <= set(dir(rlock))
    assert set(classes["ProducerLock"]) == names
    assert members(compiled, names) == classes["ProducerLock"]


def test_the_publisher_twins_have_one_interface() -> None:
    python, compiled = CORES["python"].SubmissionPublisher, CORES["c"].SubmissionPublisher
    assert interface(python, PRODUCER_PATH) == interface(compiled, PRODUCER_PATH)
    assert members(compiled, set(PRODUCER_PATH)) == members(python, set(PRODUCER_PATH))


def test_the_compiled_core_provides_the_producer_path_itself() -> None:
    core = CORES["c"].SubmissionPublisher.__mro__[1]
    classes, _ = stub()
    assert set(vars(core)) >= PRODUCER_PATH, "PublisherCore implements the whole producer path"
    assert set(classes["PublisherCore"]) >= PRODUCER_PATH
    assert members(core, set(PRODUCER_PATH)) == {n: classes["PublisherCore"][n] for n in sorted(PRODUCER_PATH)}


def test_both_twins_are_bound_once_and_differ_only_in_their_core() -> None:
    python, compiled = CORES["python"].SubmissionPublisher, CORES["c"].SubmissionPublisher
    assert {"python": python, "c": compiled} == submission.TWINS
    assert submission.SubmissionPublisher is submission.TWINS[flowpy.implementation]
    base: Any = submission._SubmissionPublisherBase
    assert issubclass(python, base) and issubclass(compiled, base)
    assert not issubclass(compiled, python)
