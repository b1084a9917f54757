"""A hot asynchronous stream: producer threads -> SubmissionPublisher -> TransformProcessor -> 2 subscribers.

    python examples/hot_async_stream.py

Two sensor threads submit Celsius readings into a SubmissionPublisher as
fast as they can. A TransformProcessor (itself a SubmissionPublisher)
converts them to Fahrenheit and publishes them to a fast dashboard and a slow
archiver, each with its own buffer of 8 readings. The processor requests one
reading at a time and blocks in submit() while the archiver's buffer is
full, so the pressure travels back: the sensors end up blocked in their own
submit(), at the archiver's pace, and no buffer grows past its capacity.
"""

from __future__ import annotations

import argparse
import threading
import time

from flowpy import SubmissionPublisher
from flowpy.processors import TransformProcessor
from flowpy.subscribers import LambdaSubscriber

READINGS_PER_SENSOR = 200
BUFFER = 8


def to_fahrenheit(reading: tuple[str, float]) -> tuple[str, float]:
    sensor, celsius = reading
    return sensor, celsius * 9 / 5 + 32


def main() -> None:
    sensors: SubmissionPublisher[tuple[str, float]] = SubmissionPublisher(max_buffer_capacity=BUFFER)
    converter: TransformProcessor[tuple[str, float], tuple[str, float]] = TransformProcessor(
        to_fahrenheit, max_buffer_capacity=BUFFER
    )
    sensors.subscribe(converter)

    dashboard_seen: list[tuple[str, float]] = []
    archive: list[tuple[str, float]] = []
    dashboard_done, archive_done = threading.Event(), threading.Event()
    max_lag = 0

    def archive_one(reading: tuple[str, float]) -> None:
        nonlocal max_lag
        max_lag = max(max_lag, converter.estimate_maximum_lag())
        time.sleep(0.002)  # stands for a slow write
        archive.append(reading)

    converter.subscribe(LambdaSubscriber(dashboard_seen.append, None, dashboard_done.set, prefetch=64))
    converter.subscribe(LambdaSubscriber(archive_one, None, archive_done.set, prefetch=4))

    blocked = {"sensor-a": 0.0, "sensor-b": 0.0}

    def sensor(name: str, base: float) -> None:
        for i in range(READINGS_PER_SENSOR):
            started = time.perf_counter()
            sensors.submit((name, base + i / 10))
            blocked[name] += time.perf_counter() - started

    started = time.perf_counter()
    threads = [
        threading.Thread(target=sensor, args=(name, base), name=name)
        for name, base in (("sensor-a", 20.0), ("sensor-b", -5.0))
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    sensors.close()  # completes the converter, which then completes its subscribers
    if not (dashboard_done.wait(30) and archive_done.wait(30)):
        raise SystemExit("the stream did not finish within 30 s")
    elapsed = time.perf_counter() - started

    total = 2 * READINGS_PER_SENSOR
    print(f"2 sensors submitted {total} readings in {elapsed:.2f} s")
    print(f"dashboard (fast) received {len(dashboard_seen)}, archiver (slow) received {len(archive)}")
    print(f"first archived reading: {archive[0][0]} {archive[0][1]:.1f} F")
    in_order = all(
        [r for r in archive if r[0] == name] == [r for r in dashboard_seen if r[0] == name] for name in blocked
    )
    print(f"both subscribers saw each sensor's readings in the same order: {in_order}")
    print(f"largest backlog in the converter's buffers: {max_lag} (capacity {converter.max_buffer_capacity})")
    print(f"sensors spent {sum(blocked.values()):.2f} s blocked in submit(): the archiver set the pace")


if __name__ == "__main__":
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    main()
