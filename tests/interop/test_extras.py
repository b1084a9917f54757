"""An adapter imported without its optional library says which extra to install."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Imports the adapter with its library hidden (None in sys.modules halts the
# import), then prints the error, its name, and the error it was raised from.
PROBE = """
import sys
sys.modules[{blocked!r}] = None
try:
    import {module}
except ImportError as error:
    print(type(error).__name__, error.name, type(error.__cause__).__name__, sep="|")
    print(error)
else:
    print("imported")
"""


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("module", "blocked", "requirement", "extra"),
    [
        ("flowpy.interop.reactivex", "reactivex", "reactivex", "rx"),
        ("flowpy.interop.rsocket", "reactivestreams", "rsocket", "rsocket"),
        ("flowpy.interop.anyio", "anyio", "anyio", "anyio"),
        ("flowpy.interop.otel", "opentelemetry", "opentelemetry-api", "otel"),
    ],
)
def test_import_without_the_library_names_the_extra(module: str, blocked: str, requirement: str, extra: str) -> None:
    probe = PROBE.format(blocked=blocked, module=module)
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=50, check=True
    )
    assert result.stdout.splitlines() == [
        f"ModuleNotFoundError|{requirement}|ModuleNotFoundError",
        f"{module} needs {requirement}: install it with: pip install 'flowpy[{extra}]'",
    ]
