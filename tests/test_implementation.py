"""Which core runs: the compiled one when it was built, pure Python on request or without a compiler."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

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
        "print(flowpy.implementation, s.BufferedSubscription.__module__, 'flowpy._cbuffered' in sys.modules)"
    )
    assert run_python(code, FLOWPY_NO_EXTENSIONS=value) == "python flowpy._buffered False"


def test_without_the_compiled_core_the_publisher_is_all_python() -> None:
    code = (
        "import threading, flowpy.submission as s; "
        "p = s.SubmissionPublisher(lambda task: None); "
        "print(s.SubmissionPublisher.__mro__[1].__name__, s.SubmissionPublisher.submit.__module__, "
        "type(p._lock) is type(threading.RLock()), s.core_name())"
    )
    assert run_python(code, FLOWPY_NO_EXTENSIONS="1") == "PythonPublisherCore flowpy.submission True python"


@pytest.mark.skipif(_impl.CBufferedSubscription is None, reason="compiled core not built")
def test_using_switches_the_submit_the_lock_and_the_subscriptions_and_restores_them() -> None:
    assert flowpy.submission.core_name() == "c"
    with _impl.using("python"):
        assert flowpy.submission.core_name() == "python"
        assert flowpy.submission.SubmissionPublisher.submit.__module__ == "flowpy.submission"
        publisher = flowpy.submission.SubmissionPublisher(ManualExecutor())
        assert type(publisher._lock) is not _impl.CProducerLock
        assert flowpy.submission.BufferedSubscription is _impl.PythonBufferedSubscription
    assert flowpy.submission.core_name() == "c"
    assert flowpy.submission.SubmissionPublisher.submit is _impl.CPublisherCore.__dict__["submit"]  # type: ignore[union-attr]
    assert flowpy.submission.BufferedSubscription is _impl.CBufferedSubscription


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
