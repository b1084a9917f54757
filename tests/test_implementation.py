"""Which core runs: the compiled one when it was built, pure Python on request or without a compiler."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import threading
from pathlib import Path
from typing import Any

import pytest

import flowpy
import flowpy.submission
from flowpy import _impl
from tests.support import ManualExecutor, Recorder

ROOT = Path(__file__).resolve().parent.parent


def run_python(code: str, **env: str) -> str:
    """Run ``code`` in a fresh interpreter from the project root; return its stripped output."""
    environment = {k: v for k, v in os.environ.items() if k != "FLOWPY_NO_EXTENSIONS"}
    environment.update(env)
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=environment, capture_output=True, text=True, timeout=60, check=True
    )
    return done.stdout.strip()


def compiler_and_headers() -> bool:
    compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
    return shutil.which(compiler) is not None and (Path(sysconfig.get_paths()["include"]) / "Python.h").exists()


def test_implementation_names_the_active_core() -> None:
    assert flowpy.implementation in ("c", "python")
    assert flowpy.implementation == ("python" if _impl.CBufferedSubscription is None else "c")


@pytest.mark.skipif(_impl.extensions_disabled(), reason="FLOWPY_NO_EXTENSIONS is set")
def test_compiled_core_is_built_wherever_a_compiler_and_headers_exist() -> None:
    if not compiler_and_headers():
        pytest.skip("no C compiler or Python headers here: the pure-Python core is expected")
    assert _impl.CBufferedSubscription is not None, "pip install -e . should have built flowpy._cbuffered"


@pytest.mark.skipif(_impl.CBufferedSubscription is None, reason="compiled core not built")
def test_compiled_core_is_the_default_when_built() -> None:
    assert flowpy.implementation == "c"
    publisher = flowpy.submission.SubmissionPublisher(ManualExecutor())
    recorder = Recorder()
    publisher.subscribe(recorder)
    (subscription,) = publisher._subscriptions
    assert type(subscription) is _impl.CBufferedSubscription
    assert isinstance(subscription, flowpy.Subscription)


@pytest.mark.parametrize("value", ["1", "yes"])
def test_flowpy_no_extensions_forces_pure_python_at_import(value: str) -> None:
    code = (
        "import sys, flowpy, flowpy.submission as s; "
        "print(flowpy.implementation, s.SubmissionPublisher._subscription_type.__module__, "
        "sorted(s.TWINS), 'flowpy._cbuffered' in sys.modules)"
    )
    assert run_python(code, FLOWPY_NO_EXTENSIONS=value) == "python flowpy._buffered ['python'] False"


def test_without_the_compiled_core_the_publisher_is_all_python() -> None:
    code = (
        "import threading, flowpy._impl as i, flowpy.submission as s; "
        "p = s.SubmissionPublisher(lambda task: None); "
        "print(s.SubmissionPublisher is s._PySubmissionPublisher, s.SubmissionPublisher.submit.__module__, "
        "type(p._lock) is type(threading.RLock()), "
        "[i.CBufferedSubscription, i.CPublisherCore, i.CProducerLock, i.c_first_none])"
    )
    assert run_python(code, FLOWPY_NO_EXTENSIONS="1") == "True flowpy.submission True [None, None, None, None]"


@pytest.mark.skipif(_impl.CBufferedSubscription is None, reason="compiled core not built")
def test_both_twins_work_side_by_side_each_on_its_own_core() -> None:
    twins: dict[str, Any] = dict(flowpy.submission.TWINS)
    assert flowpy.submission.SubmissionPublisher is twins["c"]
    assert twins["c"].submit is _impl.CPublisherCore.__dict__["submit"]
    assert twins["c"]._first_none is _impl.c_first_none
    assert twins["python"].submit.__module__ == "flowpy.submission"
    executor = ManualExecutor()
    recorders = {name: Recorder(initial=10) for name in ("c", "python", "c again")}
    publishers = {name: twins[name.split()[0]](executor) for name in recorders}  # the C twin again after the Python one
    for name, publisher in publishers.items():
        publisher.subscribe(recorders[name])
    executor.run_all()
    expected = {
        "c": (_impl.CBufferedSubscription, _impl.CProducerLock),
        "python": (_impl.PythonBufferedSubscription, type(threading.RLock())),
    }
    for name, publisher in publishers.items():
        (subscription,) = publisher._subscriptions
        assert (type(subscription), type(publisher._lock)) == expected[name.split()[0]], name
        assert publisher.submit(1) == 1
        assert publisher.submit_many([2, 3]) == 2
    executor.run_all()
    for recorder in recorders.values():
        assert recorder.items == [1, 2, 3]


@pytest.mark.skipif(_impl.CBufferedSubscription is None, reason="compiled core not built")
@pytest.mark.parametrize("value", ["", "0"])
def test_flowpy_no_extensions_empty_or_zero_keeps_the_compiled_core(value: str) -> None:
    assert run_python("import flowpy; print(flowpy.implementation)", FLOWPY_NO_EXTENSIONS=value) == "c"


def build_ext(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """``setup.py build_ext`` into ``tmp_path`` with ``env``, never an inherited FLOWPY_NO_EXTENSIONS."""
    pytest.importorskip("setuptools", minversion="61")  # venvs of Python 3.12+ come without it
    return subprocess.run(
        [sys.executable, "setup.py", "build_ext", "--build-lib", str(tmp_path / "lib"), "--build-temp", str(tmp_path)],
        cwd=ROOT,
        env={**{k: v for k, v in os.environ.items() if k != "FLOWPY_NO_EXTENSIONS"}, **env},
        capture_output=True,
        text=True,
        timeout=110,
    )


@pytest.mark.timeout(120)
def test_build_without_a_compiler_succeeds_without_the_extension(tmp_path: Path) -> None:
    done = build_ext(tmp_path, CC="/bin/false")
    assert done.returncode == 0, done.stderr
    assert 'building extension "flowpy._cbuffered" failed' in done.stderr + done.stdout
    assert not list((tmp_path / "lib").rglob("*.so"))


@pytest.mark.timeout(120)
def test_build_with_flowpy_no_extensions_builds_nothing(tmp_path: Path) -> None:
    done = build_ext(tmp_path, FLOWPY_NO_EXTENSIONS="1")
    assert done.returncode == 0, done.stderr
    assert not list(tmp_path.rglob("*.so")) and not list(tmp_path.rglob("*.o"))
