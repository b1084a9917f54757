"""The TCK's dependency rule, checked on the source: flowpy.tck imports only the stdlib, itself and the API layer.

The rule is stated in ``flowpy/tck/__init__.py`` and docs/tck.md. Every
import statement counts, wherever it is (module level, inside a function,
under ``if TYPE_CHECKING:``).
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

FLOWPY = Path(__file__).resolve().parents[2] / "flowpy"

API_LAYER = frozenset(
    {
        "flowpy.flow",
        "flowpy.reactivestreams",
        "flowpy.adapters",
        "flowpy.errors",
        "flowpy._demand",
        "flowpy._checks",
        "flowpy._pool",
        "flowpy._fork",
    }
)
"""What flowpy.tck may import from flowpy besides itself."""


def module_name(path: Path) -> str:
    parts = path.relative_to(FLOWPY.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_package(name: str) -> bool:
    return (FLOWPY.parent / name.replace(".", "/") / "__init__.py").is_file()


def is_module(name: str) -> bool:
    return is_package(name) or (FLOWPY.parent / (name.replace(".", "/") + ".py")).is_file()


def imports(source: str, importer: str) -> Iterator[str]:
    """Yield every module that ``source`` (the text of module ``importer``) imports.

    ``from package import name`` yields ``package.name`` when that is a
    module of flowpy, else ``package``.
    """
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolve against the importer's package
                package = importer if is_package(importer) else importer.rpartition(".")[0]
                for _ in range(node.level - 1):
                    package = package.rpartition(".")[0]
                base = f"{package}.{base}" if base else package
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                yield candidate if base.startswith("flowpy") and is_module(candidate) else base


def is_allowed(imported: str) -> bool:
    top = imported.partition(".")[0]
    if top == "__future__" or (top in sys.stdlib_module_names and top != "flowpy"):
        return True
    return imported == "flowpy.tck" or imported.startswith("flowpy.tck.") or imported in API_LAYER


def violations(source: str, importer: str) -> list[str]:
    return [name for name in imports(source, importer) if not is_allowed(name)]


def tck_modules() -> list[Path]:
    return sorted((FLOWPY / "tck").rglob("*.py"))


@pytest.mark.parametrize("path", tck_modules(), ids=lambda path: path.name)
def test_tck_module_imports_only_the_stdlib_itself_and_the_api_layer(path: Path) -> None:
    assert violations(path.read_text(encoding="utf-8"), module_name(path)) == []


@pytest.mark.parametrize("name", sorted(API_LAYER))
def test_api_layer_imports_only_the_stdlib_and_itself(name: str) -> None:
    path = FLOWPY.parent / (name.replace(".", "/") + ".py")
    outside = [
        imported
        for imported in imports(path.read_text(encoding="utf-8"), name)
        if imported.startswith("flowpy") and imported not in API_LAYER
    ]
    assert outside == []


def test_tck_modules_import_no_cycle() -> None:
    graph: dict[str, set[str]] = {}
    for path in tck_modules():
        name = module_name(path)
        graph[name] = {
            imported
            for imported in imports(path.read_text(encoding="utf-8"), name)
            if imported.startswith("flowpy.tck") and imported != name
        }
    # The package imports every module for its re-exports; a module importing
    # the package (``from flowpy.tck import X``) closes a cycle through it.
    visiting: list[str] = []
    done: set[str] = set()

    def visit(name: str) -> None:
        if name in done:
            return
        assert name not in visiting, f"import cycle: {' -> '.join([*visiting[visiting.index(name) :], name])}"
        visiting.append(name)
        for imported in sorted(graph.get(name, ())):
            visit(imported)
        visiting.pop()
        done.add(name)

    for name in sorted(graph):
        visit(name)


# --- The checks can fail ----------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from flowpy.executors import DaemonThreadPool\n", ["flowpy.executors"]),
        ("from flowpy import submission, flow\n", ["flowpy.submission"]),
        ("import flowpy\n", ["flowpy"]),
        (
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from flowpy.sources import RangePublisher\n",
            ["flowpy.sources"],
        ),
        ("def f() -> None:\n    from flowpy._buffered import X\n", ["flowpy._buffered"]),
        ("from .. import processors\n", ["flowpy.processors"]),
        ("import pytest\n", ["pytest"]),
        (
            "import threading\nfrom flowpy import adapters\nfrom flowpy._demand import add_demand\n"
            "from . import signals\n",
            [],
        ),
    ],
)
def test_violations_are_found_wherever_the_import_is(source: str, expected: list[str]) -> None:
    assert violations(source, "flowpy.tck.environment") == expected


def test_rule_is_stated_with_the_same_modules_in_the_package_and_the_docs() -> None:
    import flowpy.tck

    docs = (FLOWPY.parent / "docs" / "tck.md").read_text(encoding="utf-8")
    rule = docs[docs.index("## What the kit depends on") : docs.index("## Where it departs")]
    for name in API_LAYER:
        assert name in (flowpy.tck.__doc__ or ""), name
        assert f"`{name}`" in rule, name


def test_names_of_the_environment_module_stay_importable_from_it() -> None:
    import flowpy.tck
    import flowpy.tck.environment as environment

    before_the_split = [
        "DEFAULT_TIMEOUT_MILLIS",
        "TEST_BUFFER_SIZE",
        "BlackholeSubscriberWithSubscriptionSupport",
        "Latch",
        "ManualPublisher",
        "ManualSubscriber",
        "ManualSubscriberWithSubscriptionSupport",
        "Promise",
        "Receptacle",
        "SkipTest",
        "SubscriberBufferOverflowError",
        "TestEnvironment",
        "TestException",
        "TestSubscriber",
        "skip",
    ]
    assert sorted(environment.__all__) == sorted(before_the_split)
    for name in before_the_split:
        value = getattr(environment, name)
        assert getattr(flowpy.tck, name, value) is value  # one object, wherever it is imported from
