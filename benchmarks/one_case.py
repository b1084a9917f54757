"""Run one throughput case once, for instruction counting with valgrind.

    valgrind --tool=callgrind --callgrind-out-file=/dev/null \\
        python benchmarks/one_case.py {c,python} {submit,submit_many,direct,observe_on,limit,floor} ITEMS [nocontext]

Instructions per item are the difference between two sizes divided by the
difference in items, which cancels interpreter start-up; docs/performance.md
quotes the figures. The case is benchmarks/throughput.py's 1 -> 1 run on the
default executor (``direct``: 1 -> 1 ``submit`` on ``direct_executor``;
``observe_on``: benchmarks/operators.py's hand-off between two pools;
``floor``: the pure-Python floor, throughput.py's ``python_floor``).
``nocontext`` switches context propagation off (flowpy/_context.py), to
count what it costs.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.operators import iterable_hand_off
from benchmarks.throughput import append_then_drain, flowpy_run, python_floor
from flowpy import _context
from flowpy.executors import direct_executor
from flowpy.submission import TWINS


def main() -> None:
    implementation, mode, items = sys.argv[1], sys.argv[2], int(sys.argv[3])
    _context.enabled = sys.argv[4:] != ["nocontext"]
    if mode == "limit":
        append_then_drain(items)
        return
    if mode == "floor":
        python_floor(items)
        return
    if mode == "observe_on":
        iterable_hand_off(items)
        return
    if implementation not in TWINS:
        raise SystemExit(f"core {implementation!r} is not available here: {sorted(TWINS)}")
    publisher_class = TWINS[implementation]
    if mode == "direct":
        flowpy_run(1, 1, items, executor=direct_executor, publisher_class=publisher_class)
    else:
        flowpy_run(1, 1, items, many=mode == "submit_many", publisher_class=publisher_class)


if __name__ == "__main__":
    main()
