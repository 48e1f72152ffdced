"""perfonto.ontology: the signal model of each silicon generation (lowest layer; imports nothing of perfonto)."""
from .diagnostics import CatalogError, Diagnostic, Span
from .generation import Generation, ResolvedConstant, ResolvedSignal
from .loader import load_generation, load_generation_files, shipped_generations

__all__ = ["CatalogError", "Diagnostic", "Span", "Generation", "ResolvedConstant", "ResolvedSignal",
           "load_generation", "load_generation_files", "shipped_generations"]
