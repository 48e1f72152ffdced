"""perfonto.ontology: the signal model of each silicon generation (lowest layer; imports nothing of perfonto).

The names below are imported on first use, so that importing one module of the layer (the resolved
model a cached catalog is made of, the kinds table) does not load the YAML model and the resolver."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .lazy import lazy_getattr

_WHERE = {
    "CatalogError": "diagnostics",
    "Diagnostic": "diagnostics",
    "Span": "diagnostics",
    "Generation": "resolved",
    "ResolvedConstant": "resolved",
    "ResolvedSignal": "resolved",
    "load_generation": "loader",
    "load_generation_files": "loader",
    "shipped_generations": "loader",
}

__all__ = [
    "CatalogError",
    "Diagnostic",
    "Span",
    "Generation",
    "ResolvedConstant",
    "ResolvedSignal",
    "load_generation",
    "load_generation_files",
    "shipped_generations",
]

if TYPE_CHECKING:  # pragma: no cover
    from .diagnostics import CatalogError, Diagnostic, Span
    from .loader import load_generation, load_generation_files, shipped_generations
    from .resolved import Generation, ResolvedConstant, ResolvedSignal

__getattr__ = lazy_getattr(__name__, _WHERE)
