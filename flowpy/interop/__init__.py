"""Adapters between flowpy and the libraries applications already use.

Each adapter carries backpressure across the border instead of losing it:

* :mod:`flowpy.interop.asyncio`: ``async for`` over a publisher, and a
  publisher over an async iterable (standard library);
* :mod:`flowpy.interop.futures`: ``concurrent.futures`` futures in and out
  (standard library);
* :mod:`flowpy.interop.reactivex`: Observables, which have no backpressure, with
  an explicit overflow strategy (extra ``rx``);
* :mod:`flowpy.interop.rsocket`: rsocket-py's ``reactivestreams`` types, whose
  demand crosses the network (extra ``rsocket``);
* :mod:`flowpy.interop.otel`: snapshots of streams as OpenTelemetry metrics
  (extra ``otel``).

Import the submodule you need; this package imports none of them, so the
optional libraries are loaded only by the adapters that use them.
"""
