"""Raise ``KeyboardInterrupt`` at one chosen point where CPython could deliver a signal.

CPython runs a Python-level signal handler (``SIGINT`` raises
``KeyboardInterrupt``) only where its evaluation loop checks for pending work:
when a Python function starts, at the jump back of a loop, and after a call
returns (CPython 3.11); a blocking call such as ``lock.acquire()`` or
``Condition.wait()`` may raise from inside. :class:`InterruptAt` models those
points in the code of chosen files, on the thread that installs it:

* a function that their code calls, as it starts (the callee raises before
  its first line: a signal at its start, or a callee that raised from
  inside, like an interrupted ``wait``);
* a call that their code makes, as it returns (raised from a profile
  function, which makes the call instruction itself fail, where CPython's
  own check raises; the call has had its effect);
* each backward jump in their code (on CPython 3.11; see ``_BACK_JUMPS``).

A function of those files called from elsewhere (an executor running a
task) is not interrupted as it starts: that is the caller's point.
Finalisers and weak reference callbacks, which CPython runs wherever an
object is freed and whose exceptions it drops, are not interrupted.
Counting the points of a run (``at=None``), then running it again once per
point with ``at=k`` (:func:`sweep`), tries an interrupt at every such point
in turn. After one interrupt the hook fires no more, as after one ``Ctrl-C``.
"""

from __future__ import annotations

import _weakrefset
import ast
import dis
import gc
import sys
import weakref
from collections.abc import Callable, Iterable, Iterator
from types import CodeType, FrameType
from typing import Any, TypeVar

__all__ = ["InjectedInterrupt", "InterruptAt", "sweep", "unhandled_back_jumps"]

R = TypeVar("R")

# Callbacks that run when an object is freed, in whatever frame freed it:
# CPython reports what they raise as unraisable and drops it.
_UNRAISABLE = frozenset({weakref.__file__, _weakrefset.__file__})
# On CPython 3.12 and later, an exception that a trace function raises at a
# JUMP_BACKWARD opcode event skips the handlers around the loop (the `finally`
# of a `try` that holds the loop does not run), which a real signal, checked
# by the evaluation loop at that jump, does not do: there back jumps are not
# modelled. The 3.11 runs cover them, and `benchmarks/stress.py --kind
# interrupt` delivers real asynchronous interrupts on every version.
_BACK_JUMPS = frozenset({"JUMP_BACKWARD"}) if sys.version_info < (3, 12) else frozenset()
_RETURNS = frozenset({"RETURN_VALUE", "RETURN_CONST"})

TraceFunction = Callable[[FrameType, str, Any], Any]


class InjectedInterrupt(KeyboardInterrupt):
    """The ``KeyboardInterrupt`` an :class:`InterruptAt` raises; ``where`` tells at which point."""

    def __init__(self, where: str, receiver: object) -> None:
        super().__init__(where)
        self.where = where
        self.receiver = receiver  # the ``self`` of the method it was raised in, if any


def _raisable(code: CodeType) -> bool:
    """Whether what ``code`` raises reaches its caller: not a finaliser or a weak reference's callback."""
    return code.co_name != "__del__" and code.co_filename not in _UNRAISABLE


_opnames: dict[CodeType, dict[int, str]] = {}


def _opname_at(code: CodeType, offset: int) -> str:
    names = _opnames.get(code)
    if names is None:
        names = _opnames[code] = {i.offset: i.opname for i in dis.get_instructions(code)}
    return names.get(offset, "")


class InterruptAt:
    """Raise :class:`InjectedInterrupt` at the ``at``-th interrupt point (counting from 1) of ``files``.

    Use as a context manager around the code under test, on the thread whose
    interrupts are modelled (the main thread, for ``SIGINT``). With
    ``at=None`` it only counts the points (:attr:`seen`). A trace function
    sees functions start and loops jump back; a profile function sees calls
    return, where raising makes the call instruction itself fail, exactly
    where CPython's own check would raise.
    """

    def __init__(self, files: Iterable[str], at: int | None) -> None:
        self.files = frozenset(files)
        self.at = at
        self.seen = 0
        self.fired: InjectedInterrupt | None = None

    def _inside(self, frame: FrameType | None) -> bool:
        return frame is not None and frame.f_code.co_filename in self.files

    def _point(self, frame: FrameType, what: str) -> None:
        if self.fired is not None:
            return
        self.seen += 1
        if self.seen == self.at:
            code = frame.f_code
            where = f"{what} {code.co_name} ({code.co_filename}:{frame.f_lineno})"
            self.fired = InjectedInterrupt(where, frame.f_locals.get("self"))
            sys.settrace(None)
            raise self.fired

    def _trace(self, frame: FrameType, event: str, arg: Any) -> TraceFunction | None:
        if event != "call":
            return None
        inside = self._inside(frame)
        if self._inside(frame.f_back) and _raisable(frame.f_code):
            self._point(frame, "entering")
        if not inside:
            return None
        frame.f_trace_opcodes = True
        return self._local

    def _local(self, frame: FrameType, event: str, arg: Any) -> TraceFunction | None:
        if event == "opcode" and _opname_at(frame.f_code, frame.f_lasti) in _BACK_JUMPS:
            self._point(frame, "looping in")
        return self._local

    def _profile(self, frame: FrameType, event: str, arg: Any) -> None:
        if event == "c_return" and self._inside(frame):
            self._point(frame, f"after {getattr(arg, '__name__', '?')}() in")
        elif event == "return" and self._inside(frame.f_back) and _raisable(frame.f_code):
            caller = frame.f_back
            # A return instruction: not a frame unwinding for an exception, nor a yield.
            if caller is not None and _opname_at(frame.f_code, frame.f_lasti) in _RETURNS:
                self._point(caller, f"after {frame.f_code.co_name}() in")

    def __enter__(self) -> InterruptAt:
        sys.settrace(self._trace)
        sys.setprofile(self._profile)
        return self

    def __exit__(self, *exc_info: object) -> None:
        sys.setprofile(None)
        sys.settrace(None)


def sweep(files: Iterable[str], run: Callable[[InterruptAt], R]) -> Iterator[tuple[InterruptAt, R]]:
    """Run ``run(hook)`` once with no interrupt, counting its points, then once per point with an interrupt there.

    Yields each hook with what ``run`` returned. ``run`` must install the
    hook (``with hook:``) around the code under test only, and behave the
    same on every run up to the interrupt.
    """
    files = frozenset(files)
    gc.collect()
    gc.disable()  # no collection, which runs finalisers, in the middle of a run: every run the same
    try:
        counter = InterruptAt(files, None)
        yield counter, run(counter)
        for at in range(1, counter.seen + 1):
            hook = InterruptAt(files, at)
            yield hook, run(hook)
    finally:
        gc.enable()


def unhandled_back_jumps(path: str) -> list[str]:
    """``function:line`` of each backward jump inside a ``with`` block of ``path`` that no handler covers.

    CPython 3.12 and later leave the backward jump of some loops (a
    ``while``, a loop that breaks or returns under an ``if``, a filtered
    list comprehension, which 3.12 inlines) out of the exception handler of
    the ``with`` around them. The evaluation loop raises a pending
    ``KeyboardInterrupt`` at that jump; the ``with`` then does not run
    ``__exit__``, and a lock it took stays held. The check compiles the
    file with the running interpreter: on 3.11 every such jump is covered.
    """
    with open(path, encoding="utf-8") as file:
        source = file.read()
    blocks: dict[tuple[str, int], list[tuple[int, int]]] = {}
    for function in ast.walk(ast.parse(source)):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        first = min([function.lineno, *(d.lineno for d in function.decorator_list)])
        spans = blocks.setdefault((function.name, first), [])
        stack: list[ast.AST] = list(function.body)
        while stack:  # this function's own statements: a nested function, lambda or class is a frame of its own
            node = stack.pop()
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                continue
            if isinstance(node, (ast.With, ast.AsyncWith)):
                spans.append((node.lineno, node.end_lineno or node.lineno))
            stack.extend(ast.iter_child_nodes(node))
    found: list[str] = []
    codes = [compile(source, path, "exec")]
    while codes:
        code = codes.pop()
        codes.extend(c for c in code.co_consts if isinstance(c, CodeType))
        spans = blocks.get((code.co_name, code.co_firstlineno), [])
        if not spans:
            continue
        listing = dis.Bytecode(code)
        for instruction in listing:
            line = instruction.positions.lineno if instruction.positions else None
            if "JUMP_BACKWARD" not in instruction.opname or "NO_INTERRUPT" in instruction.opname or line is None:
                continue
            inside = any(start < line <= end for start, end in spans)
            covered = any(e.start <= instruction.offset < e.end for e in listing.exception_entries)
            if inside and not covered:
                found.append(f"{code.co_name}:{line}")
    return found
