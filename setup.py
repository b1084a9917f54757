"""Build the optional compiled core; the metadata is in pyproject.toml.

The C extension ``flowpy._cbuffered`` is built when a C compiler and the
Python headers are present. Without them the build still succeeds and flowpy
runs its pure-Python implementation. ``FLOWPY_NO_EXTENSIONS=1`` skips the
extension at build time (and, at import time, ignores one that was built).
"""

from __future__ import annotations

import os

from setuptools import Extension, setup

ext_modules = []
if os.environ.get("FLOWPY_NO_EXTENSIONS", "") in ("", "0"):
    ext_modules.append(
        Extension(
            "flowpy._cbuffered",
            sources=["flowpy/_cbuffered.c"],
            optional=True,  # a failed compile is a warning: the pure-Python core is used
        )
    )

setup(ext_modules=ext_modules)
