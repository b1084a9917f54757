"""At interpreter exit: what subscribers asked for is delivered, within a bound; the rest is reported.

The scripts run once per core (the ``core`` fixture, tests/core_impl.py): the
interpreter each starts gets the core through ``FLOWPY_NO_EXTENSIONS`` and
checks it is the one it runs on. Reading ``FLOWPY_EXIT_TIMEOUT`` does not
involve a core: those tests run once.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import pytest

from flowpy._exit import DEFAULT_EXIT_TIMEOUT, exit_timeout
from tests.core_impl import Core

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_script(core: Core, body: str, **env: str) -> subprocess.CompletedProcess[str]:
    """Run ``body``, after the ``Printer`` subscriber, in an interpreter that checks it runs on ``core``."""
    script = textwrap.dedent(
        """
        import sys, threading, time
        import flowpy
        from flowpy import SubmissionPublisher
        from flowpy.flow import Subscriber

        if flowpy.implementation != sys.argv[1]:
            sys.exit(f"runs on the {flowpy.implementation} core, not the {sys.argv[1]} one")

        class Printer(Subscriber):
            def __init__(self, initial, pause=0.0):
                self.initial, self.pause = initial, pause
            def on_subscribe(self, subscription):
                if self.initial:
                    subscription.request(self.initial)
            def on_next(self, item):
                time.sleep(self.pause)  # a slow subscriber: the workload, not synchronisation
                print("item", item, flush=True)
            def on_error(self, error):
                print("error", error, flush=True)
            def on_complete(self):
                print("complete", flush=True)
            def __repr__(self):
                return "<Printer>"
        """
    ) + textwrap.dedent(body)
    return subprocess.run(
        [sys.executable, "-c", script, core.name],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": ROOT, **env},
    )


def test_items_a_subscriber_requested_are_delivered_before_exit(core: Core) -> None:
    result = run_script(
        core,
        """
        publisher = SubmissionPublisher(max_buffer_capacity=64)
        publisher.subscribe(Printer(2**63 - 1, pause=0.002))
        for i in range(50):
            publisher.submit(i)
        publisher.close()
        """,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [f"item {i}" for i in range(50)] + ["complete"]
    assert result.stderr == ""


def test_items_nobody_requested_are_reported_at_exit_without_waiting(core: Core) -> None:
    started = time.monotonic()
    result = run_script(
        core,
        """
        class Three(Printer):
            seen = threading.Event()
            def on_next(self, item):
                super().on_next(item)
                if item == 2:
                    self.seen.set()
        publisher = SubmissionPublisher(max_buffer_capacity=64)
        publisher.subscribe(Three(3))
        for i in range(10):
            publisher.submit(i)
        Three.seen.wait()
        """,
        FLOWPY_EXIT_TIMEOUT="30",
    )
    assert time.monotonic() - started < 25  # it did not wait out the timeout for items nobody asked for
    assert result.returncode == 0
    assert result.stdout.splitlines() == ["item 0", "item 1", "item 2"]
    assert (
        "UndeliveredItemsWarning: 7 items accepted by SubmissionPublisher were never delivered at "
        "interpreter exit (waited up to 30 s, FLOWPY_EXIT_TIMEOUT): 7 to <Printer> (it had not requested "
        "them); close the publisher and wait for its subscribers before exiting" in result.stderr
    )


def test_a_stuck_subscriber_delays_exit_only_by_the_timeout_and_is_reported(core: Core) -> None:
    result = run_script(
        core,
        """
        class Stuck(Printer):
            inside = threading.Event()
            def on_next(self, item):
                self.inside.set()
                threading.Event().wait()
        publisher = SubmissionPublisher(max_buffer_capacity=64)
        publisher.subscribe(Stuck(2**63 - 1))
        for i in range(5):
            publisher.submit(i)
        Stuck.inside.wait()
        """,
        FLOWPY_EXIT_TIMEOUT="0.5",
    )
    assert result.returncode == 0
    assert (
        "(waited up to 0.5 s, FLOWPY_EXIT_TIMEOUT): 4 to <Printer> (delivery did not finish in time)" in result.stderr
    )


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("", DEFAULT_EXIT_TIMEOUT),
        ("2.5", 2.5),
        ("0", 0.0),
        ("-1", DEFAULT_EXIT_TIMEOUT),
        ("soon", DEFAULT_EXIT_TIMEOUT),
    ],
)
def test_exit_timeout_reads_the_environment(monkeypatch: pytest.MonkeyPatch, value: str, expected: float) -> None:
    monkeypatch.setenv("FLOWPY_EXIT_TIMEOUT", value)
    assert exit_timeout() == expected
