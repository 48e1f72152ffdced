"""The one base of the errors perfonto raises for bad input (a catalog, a capture, an option, an output path).

Every public error class derives from ``PerfontoError`` as well as from the built-in class it always had
(``ValueError`` mostly), so ``except PerfontoError`` catches any of them and nothing that caught
``ValueError`` before changes. An error that is not a ``PerfontoError`` is a bug in perfonto.
"""

from __future__ import annotations

__all__ = ["PerfontoError"]


class PerfontoError(Exception):
    """Bad input perfonto refused; the message says what and what to do. Public name: ``perfonto.Error``
    (this class: ``help()`` and tracebacks show ``PerfontoError``)."""
