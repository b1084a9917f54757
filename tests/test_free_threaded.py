"""flowpy on a free-threaded interpreter (3.13t and later): importing it leaves the GIL off.

The core suites themselves run without the GIL on such an interpreter, as
long as importing flowpy does not turn it back on, which is what this checks
(in a fresh interpreter, with no ``PYTHON_GIL`` forcing either way).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(
    not sysconfig.get_config_var("Py_GIL_DISABLED"),
    reason="needs a free-threaded build (Py_GIL_DISABLED): a regular build always runs with the GIL",
)

ROOT = Path(__file__).resolve().parents[1]

PROBE = """
import json, sys
import flowpy
print(json.dumps({"implementation": flowpy.implementation, "gil": sys._is_gil_enabled()}))
"""


def import_flowpy(no_extensions: bool) -> dict[str, object]:
    """Import flowpy in a fresh interpreter; return its implementation and whether the GIL is on."""
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHON_GIL", "FLOWPY_NO_EXTENSIONS")}
    if no_extensions:
        env["FLOWPY_NO_EXTENSIONS"] = "1"
    done = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60, check=True
    )
    result: dict[str, object] = json.loads(done.stdout)
    return result


def test_importing_the_compiled_core_leaves_the_gil_off() -> None:
    result = import_flowpy(no_extensions=False)
    if result["implementation"] != "c":
        pytest.skip("the compiled core is not built for this interpreter (setup.py build_ext --inplace)")
    assert result["gil"] is False


def test_importing_the_pure_python_core_leaves_the_gil_off() -> None:
    result = import_flowpy(no_extensions=True)
    assert result == {"implementation": "python", "gil": False}
