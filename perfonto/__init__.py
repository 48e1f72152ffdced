"""perfonto: one place where every hardware signal of an AI accelerator is defined, every derived
metric is derived from those signals, checked and documented, and every capture becomes the same
report. This module is the public Python API (see the guide ``api.md``: ``load_catalog``,
``evaluate``, ``emulate``); the CLI calls only it and the layers' public functions. The names are
imported on first use, so ``import perfonto`` stays cheap.

``perfonto.Error``, the base of every error perfonto raises for bad input, is the class
``perfonto.ontology.errors.PerfontoError`` under its public name: ``help(perfonto.Error)`` and tracebacks
show it as ``PerfontoError``; ``except perfonto.Error`` catches it and all its subclasses."""

from __future__ import annotations

from importlib import metadata as _metadata
from typing import TYPE_CHECKING

from .ontology.lazy import lazy_getattr as _lazy_getattr

try:
    __version__ = _metadata.version("perfonto")
except _metadata.PackageNotFoundError:  # a checkout that is not installed
    __version__ = "0.0.0+unknown"

__all__ = [
    "Catalog",
    "CatalogError",
    "Diagnostic",
    "DumpError",
    "Emulation",
    "Error",
    "Result",
    "UnknownMetric",
    "__version__",
    "emulate",
    "evaluate",
    "load_catalog",
]

if TYPE_CHECKING:  # pragma: no cover
    from .api import (
        Catalog,
        CatalogError,
        Diagnostic,
        DumpError,
        Emulation,
        Error,
        Result,
        UnknownMetric,
        emulate,
        evaluate,
        load_catalog,
    )

__getattr__ = _lazy_getattr(__name__, {name: "api" for name in __all__ if name != "__version__"})


def __dir__():
    return sorted(set(globals()) | set(__all__))
