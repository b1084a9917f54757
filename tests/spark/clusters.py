"""Spark cluster processes on 127.0.0.1 for tests and benchmarks: a standalone master and worker, a Connect server.

They are started from the PySpark install's own launchers (``bin/spark-class``,
``bin/spark-submit``) with free ports, each in its own process group, so that
stopping one stops everything it started (a worker's executors, their Python
workers).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

__all__ = ["LOOPBACK", "ClusterProcess", "free_port", "start_connect_server", "start_standalone"]

LOOPBACK = "127.0.0.1"
_START_SECONDS = 120  # how long a cluster process may take to come up on a loaded machine


def free_port() -> int:
    """A TCP port that is free on 127.0.0.1 now."""
    with socket.socket() as probe:
        probe.bind((LOOPBACK, 0))
        port: int = probe.getsockname()[1]
        return port


def _spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def _environment() -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        SPARK_HOME=str(_spark_home()),
        SPARK_LOCAL_IP=LOOPBACK,  # every listener of the cluster, web UIs included, binds here
        PYSPARK_PYTHON=sys.executable,
        SPARK_NO_DAEMONIZE="1",
    )
    env.pop("SPARK_CONNECT_MODE_ENABLED", None)
    return env


class ClusterProcess:
    """A cluster process started in its own process group, so that stopping it stops what it started."""

    def __init__(self, name: str, command: list[str], log: Path) -> None:
        self.name = name
        self.log = log
        with log.open("wb") as sink:
            self.popen = subprocess.Popen(
                command, stdout=sink, stderr=subprocess.STDOUT, env=_environment(), start_new_session=True
            )

    def wait_until(self, ready: Callable[[], bool], what: str) -> None:
        """Poll ``ready()`` until it is true.

        Raises:
            RuntimeError: with the end of the process's log, if it exits or takes too long.
        """
        deadline = time.monotonic() + _START_SECONDS
        while not ready():
            if self.popen.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.popen.returncode}:\n{self.log.read_text()[-3000:]}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.name}: {what} within {_START_SECONDS} s:\n{self.log.read_text()[-3000:]}")
            time.sleep(0.2)  # polling a process that has no readiness notification

    def stop(self) -> None:
        """Stop the process group: SIGTERM, then SIGKILL after 30 s."""
        if self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, signal.SIGTERM)
            try:
                self.popen.wait(30)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.popen.pid, signal.SIGKILL)
                self.popen.wait(30)
        with contextlib.suppress(ProcessLookupError):  # children that outlived the leader
            os.killpg(self.popen.pid, signal.SIGKILL)


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection((LOOPBACK, port), timeout=1):
            return True
    except OSError:
        return False


def _alive_workers(ui_port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://{LOOPBACK}:{ui_port}/json/", timeout=2) as answer:
            state = json.load(answer)
    except OSError:
        return 0
    return sum(1 for worker in state.get("workers", []) if worker.get("state") == "ALIVE")


def start_standalone(scratch: Path, processes: list[ClusterProcess], cores: int = 2) -> str:
    """Start a standalone master and one worker; append them to ``processes``; return the master URL.

    Raises:
        RuntimeError: if either does not come up.
    """
    launcher = str(_spark_home() / "bin" / "spark-class")
    port, ui = free_port(), free_port()
    master = ClusterProcess(
        "standalone master",
        [
            launcher,
            "org.apache.spark.deploy.master.Master",
            "--host",
            LOOPBACK,
            "--port",
            str(port),
            "--webui-port",
            str(ui),
        ],
        scratch / "master.log",
    )
    processes.append(master)
    url = f"spark://{LOOPBACK}:{port}"
    worker = ClusterProcess(
        "standalone worker",
        [
            launcher,
            "org.apache.spark.deploy.worker.Worker",
            "--host",
            LOOPBACK,
            "--port",
            str(free_port()),
            "--webui-port",
            str(free_port()),
            "--cores",
            str(cores),
            "--memory",
            "2g",
            "--work-dir",
            str(scratch / "work"),
            url,
        ],
        scratch / "worker.log",
    )
    processes.append(worker)
    master.wait_until(lambda: _accepts(port), "the master did not listen")
    worker.wait_until(lambda: _alive_workers(ui) >= 1, "the worker did not register")
    return url


def start_connect_server(scratch: Path, processes: list[ClusterProcess], master: str) -> str:
    """Start a Spark Connect server whose Spark runs on ``master``; append it to ``processes``; return its URL.

    Raises:
        RuntimeError: if it does not come up.
    """
    port = free_port()
    server = ClusterProcess(
        "Spark Connect server",
        [
            str(_spark_home() / "bin" / "spark-submit"),
            "--class",
            "org.apache.spark.sql.connect.service.SparkConnectServer",
            "--name",
            "flowpy-connect",
            "--master",
            master,
            "--conf",
            f"spark.connect.grpc.binding.address={LOOPBACK}",
            "--conf",
            f"spark.connect.grpc.binding.port={port}",
            "--conf",
            f"spark.driver.host={LOOPBACK}",
            "--conf",
            f"spark.driver.bindAddress={LOOPBACK}",
            "--conf",
            "spark.ui.enabled=false",
            "--conf",
            "spark.sql.shuffle.partitions=2",
            "--conf",
            f"spark.executorEnv.PYSPARK_PYTHON={sys.executable}",
        ],
        scratch / "connect.log",
    )
    processes.append(server)
    server.wait_until(lambda: _accepts(port), "the server did not listen")
    return f"sc://{LOOPBACK}:{port}"
