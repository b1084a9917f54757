"""The private primitives every flowpy publisher, subscriber and operator is built on.

One home per concept, each with its own tests under ``tests/_core/``:

* :mod:`~flowpy._core.serial`: :class:`~flowpy._core.serial.SerialDrain`,
  the one drain loop: one pass at a time, no lost wake-up (rules 1.3, 2.7).
* :mod:`~flowpy._core.upstream`: :class:`~flowpy._core.upstream.UpstreamSlot`,
  a subscriber's one upstream subscription (rule 2.5).
* :mod:`~flowpy._core.pull`: the demand-driven subscription that pulls
  items from a source on a serial drain.
* :mod:`~flowpy._core.sentinels`: shared marker objects.

The demand arithmetic (rules 3.9, 3.17) lives beside this package in
:mod:`flowpy._demand`, a leaf of the API layer that the TCK may import too.

Dependencies point one way: these modules import only the API layer
(``flow``, ``errors``, :mod:`flowpy._demand`, :mod:`flowpy._checks`),
:mod:`flowpy._signals` and each other, never an implementation module;
implementations (and :mod:`flowpy.executors`) import them. See
``docs/internals.md``.
"""
