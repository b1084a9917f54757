"""Memory of a publisher whose subscriber never requests: the buffer stays bounded.

    python benchmarks/memory.py [--offers N]

Makes ``N`` (default 10 million) ``offer`` calls at capacity 256 to a
subscriber that never requests, and prints how much resident memory grew;
the budget is 5 MB. For scale it also prints the growth of a plain list
holding the same items, the unbounded alternative.
"""

from __future__ import annotations

import argparse
import gc
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import machine
from flowpy.executors import direct_executor
from flowpy.flow import Subscriber, Subscription
from flowpy.submission import SubmissionPublisher


def resident_mb() -> float:
    """Current resident set size in MB (Linux /proc)."""
    with open("/proc/self/statm") as statm:
        pages = int(statm.read().split()[1])
    import os

    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


class NeverRequests(Subscriber[int]):
    def on_subscribe(self, subscription: Subscription) -> None:
        self.subscription = subscription

    def on_next(self, item: int) -> None:
        raise AssertionError("nothing was requested")

    def on_error(self, error: BaseException) -> None:
        raise AssertionError(error)

    def on_complete(self) -> None:
        return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--offers", type=int, default=10_000_000)
    args = parser.parse_args()
    publisher: SubmissionPublisher[int] = SubmissionPublisher(direct_executor, 256)
    publisher.subscribe(NeverRequests())
    offer = publisher.offer
    for i in range(1_000):  # fill the buffer and warm up
        offer(i)
    gc.collect()
    before = resident_mb()
    dropped = 0
    for i in range(args.offers):
        if offer(i) < 0:
            dropped += 1
    gc.collect()
    growth = resident_mb() - before
    publisher.close()

    before_list = resident_mb()
    kept = list(range(min(args.offers, 1_000_000)))
    list_growth = (resident_mb() - before_list) * args.offers / len(kept)
    del kept

    print(f"\nmemory ({machine()})")
    print(f"offers: {args.offers:,}, dropped: {dropped:,} (the buffer holds 256)")
    print(f"resident growth, flowpy bounded buffer: {growth:8.2f} MB (budget 5 MB)")
    print(f"resident growth, a list of the same items: {list_growth:8.1f} MB (estimated from 1,000,000)")
    print(f"ratio flowpy / list: {growth / list_growth:.5f}")
    if growth >= 5:
        raise SystemExit(f"resident memory grew by {growth:.2f} MB, over the 5 MB budget")


if __name__ == "__main__":
    main()
