"""Optional dependencies: the message that says which extra to install.

The core uses the standard library alone; adapters that need another library
(``flowpy.interop.reactivex``, ``flowpy.interop.rsocket``,
``flowpy.interop.anyio``) import it at module level and turn a failed import
into :func:`missing_extra`'s error, so the user learns the ``pip`` command
rather than the name of a module they never asked for.
"""

from __future__ import annotations

__all__ = ["install_hint", "missing_extra"]


def install_hint(extra: str) -> str:
    """Return ``"install it with: pip install 'flowpy[<extra>]'"``."""
    return f"install it with: pip install 'flowpy[{extra}]'"


def missing_extra(module: str, requirement: str, extra: str) -> ModuleNotFoundError:
    """Return the error to raise from ``module`` when ``requirement`` cannot be imported.

    Raise it ``from`` the original :class:`ImportError`, which keeps the
    failing import in the traceback.

    Args:
        module: the flowpy module being imported, e.g. ``"flowpy.interop.reactivex"``.
        requirement: the distribution it needs, e.g. ``"reactivex"``.
        extra: the flowpy extra that installs it, e.g. ``"rx"``.
    """
    return ModuleNotFoundError(f"{module} needs {requirement}: {install_hint(extra)}", name=requirement)
