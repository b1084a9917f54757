"""Shared benchmark plumbing: repeated timing, medians, and the results table."""

from __future__ import annotations

import platform
import statistics
import time
from collections.abc import Callable


def median_rate(run: Callable[[], int], repetitions: int) -> float:
    """Run ``run`` (which returns the number of items it moved) and return the median items/s."""
    rates = []
    for _ in range(repetitions):
        start = time.perf_counter()
        items = run()
        rates.append(items / (time.perf_counter() - start))
    return statistics.median(rates)


def machine() -> str:
    """A one-line description of this machine."""
    import os

    python = f"{platform.python_implementation()} {platform.python_version()}"
    return f"{python} on {platform.machine()}, {os.cpu_count()} CPUs"


def print_table(title: str, rows: list[tuple[str, float]], baselines: dict[str, str]) -> None:
    """Print ``rows`` of (name, items/s) with the ratio of each row to the rows named in ``baselines``."""
    rates = dict(rows)
    print(f"\n{title} ({machine()})")
    header = f"{'case':<44} {'items/s':>14}" + "".join(f" {'x ' + label:>16}" for label in baselines)
    print(header)
    print("-" * len(header))
    for name, rate in rows:
        ratios = "".join(
            f" {rate / rates[base]:>16.2f}" if base in rates else f" {'':>16}" for base in baselines.values()
        )
        print(f"{name:<44} {rate:>14,.0f}{ratios}")
