"""Draw docs/throughput.png from the figures of benchmarks/throughput.py.

    python benchmarks/throughput.py --json benchmarks/throughput.json
    python benchmarks/chart.py benchmarks/throughput.json docs/throughput.png

One horizontal bar per case: flowpy with the compiled core and with the
pure-Python one side by side, the baselines in grey. Needs matplotlib
(``pip install matplotlib``), which flowpy itself does not.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

COLOURS = {"[c]": "#1f77b4", "[python]": "#ff7f0e"}
BASELINE = "#9e9e9e"


def colour(case: str) -> str:
    for marker, value in COLOURS.items():
        if marker in case:
            return value
    return BASELINE


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("figures", type=Path, help="the JSON written by throughput.py --json")
    parser.add_argument("output", type=Path, help="the PNG to write")
    args = parser.parse_args()

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = json.loads(args.figures.read_text())
    rates: dict[str, float] = data["rates"]
    cases = list(rates)
    values = [rates[case] / 1e6 for case in cases]
    figure, axes = plt.subplots(figsize=(10, 0.42 * len(cases) + 1.6))
    positions = range(len(cases))[::-1]
    axes.barh(list(positions), values, color=[colour(case) for case in cases])
    axes.set_yticks(list(positions), cases, fontsize=8)
    for y, value in zip(positions, values, strict=True):
        axes.text(value, y, f" {value:.2f}", va="center", fontsize=7)
    axes.set_xlabel("million items (deliveries) per second; median of interleaved repetitions")
    axes.set_title(
        f"SubmissionPublisher throughput, capacity 256, {data['items']:,} items per run\n{data['machine']}",
        fontsize=9,
    )
    axes.margins(x=0.12)
    figure.tight_layout()
    figure.savefig(args.output, dpi=110)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
