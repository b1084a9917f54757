"""One source shared by several subscribers through a MulticastProcessor, in lock step.

    python examples/multicast.py

A generator of "expensive" readings must run once, however many consumers
want its items. A MulticastProcessor subscribes to it once (prefetching 8)
and hands every item to every subscriber, in the same order: the slowest
subscriber's demand paces the others and the source. Subscribers join late
(from the next item on) and leave early; when the last one leaves, the
processor cancels the source.
"""

from __future__ import annotations

import argparse
import threading
from collections.abc import Iterator

from flowpy.processors import MulticastProcessor
from flowpy.sources import IterablePublisher
from flowpy.subscribers import LambdaSubscriber, iterate


def main() -> None:
    produced: list[int] = []
    source_closed = threading.Event()

    def readings() -> Iterator[int]:
        try:
            for reading in range(1_000_000):
                produced.append(reading)
                yield reading
        finally:
            source_closed.set()

    processor: MulticastProcessor[int] = MulticastProcessor(prefetch=8)

    eager: list[int] = []
    eager_subscriber = LambdaSubscriber(eager.append, prefetch=1024)
    processor.subscribe(eager_subscriber)
    paced = iterate(processor, prefetch=2)  # a consumer that pulls 2 at a time

    # Only the subscription holds the generator: cancelling it closes the generator.
    IterablePublisher(readings(), batch_size=16).subscribe(processor)

    pulled = [next(paced) for _ in range(5)]
    print(f"paced consumer pulled {pulled}")
    print(f"eager subscriber asked for 1024 but got only {len(eager)} so far: the paced one sets the pace")
    print(
        f"the source produced {len(produced)} items, {len(produced) - len(eager)} ahead of the slowest "
        "consumer: at most the prefetch of 8 plus one item of look-ahead"
    )

    late: list[int] = []
    late_subscriber = LambdaSubscriber(late.append, prefetch=1024)
    processor.subscribe(late_subscriber)
    pulled += [next(paced) for _ in range(5)]
    print(f"a late subscriber joined and got {late} (from the next item on, nothing skipped after)")

    paced.close()  # leave: the eager ones are now limited only by their own demand
    late_subscriber.cancel()
    print(f"paced consumer left after {pulled}")

    eager_subscriber.cancel()  # the last one out: the processor cancels the source
    if not source_closed.wait(10):
        raise SystemExit("the source was not cancelled within 10 s")
    print(f"eager subscriber got {len(eager)} items, the same as the paced one first: {eager[: len(pulled)] == pulled}")
    print(f"last subscriber left: the source was cancelled after producing {len(produced)} of 1,000,000")


if __name__ == "__main__":
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    main()
