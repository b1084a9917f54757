"""A cold synchronous stream: RangePublisher -> SyncSubscriber, on one thread.

    python examples/cold_sync_stream.py

A cold publisher produces nothing until asked, and produces the whole
sequence again for every subscriber. RangePublisher emits on the thread that
calls request(); SyncSubscriber requests one item at a time from inside
on_next. The program shows the pull pace (one request per item), that the
stream is repeatable, that the stack does not grow over 200,000 one-by-one
requests (rule 3.3), and the same stream consumed as a plain iterator.
"""

from __future__ import annotations

import argparse
import sys
import threading

from flowpy.sources import RangePublisher
from flowpy.subscribers import SyncSubscriber, iterate


class Printer(SyncSubscriber[int]):
    """Prints each item and stops after ``limit`` items by returning False."""

    def __init__(self, name: str, limit: int) -> None:
        super().__init__()
        self.name, self.limit = name, limit
        self.received: list[int] = []

    def when_next(self, item: int) -> bool:
        self.received.append(item)
        return len(self.received) < self.limit

    def when_complete(self) -> None:
        print(f"{self.name}: completed after {self.received}")


class DepthProbe(SyncSubscriber[int]):
    """Records the deepest stack seen in when_next."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0
        self.depths: set[int] = set()

    def when_next(self, item: int) -> bool:
        self.count += 1
        if item % 50_000 == 0:
            frame, depth = sys._getframe(), 0
            while frame is not None:
                depth, frame = depth + 1, frame.f_back  # type: ignore[assignment]
            self.depths.add(depth)
        return True


def main() -> None:
    numbers = RangePublisher(1, 5)
    print(f"publisher: {numbers!r}, on thread {threading.current_thread().name}")

    whole = Printer("first subscriber", limit=10)
    numbers.subscribe(whole)  # everything happens inside this call: one thread, no executor
    again = Printer("second subscriber", limit=10)
    numbers.subscribe(again)
    print(f"cold: both subscribers got the same sequence: {whole.received == again.received}")

    partial = Printer("third subscriber", limit=2)
    numbers.subscribe(partial)
    print(f"third subscriber: cancelled after {partial.received} by returning False")

    probe = DepthProbe()
    RangePublisher(0, 200_000).subscribe(probe)
    print(f"{probe.count:,} items requested one by one; stack depths seen in on_next: {sorted(probe.depths)}")

    squares = [n * n for n in iterate(RangePublisher(1, 5), prefetch=2)]
    print(f"pulled through iterate(prefetch=2): {squares}")


if __name__ == "__main__":
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    main()
