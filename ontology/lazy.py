"""Names a package imports on first use (PEP 562), so that importing the package stays cheap: the
shipped ``perfonto`` package and its ``perfonto.ontology`` layer use it."""

from __future__ import annotations

import importlib
from typing import Any, Callable


def lazy_getattr(package: str, where: dict[str, str]) -> Callable[[str], Any]:
    """The module ``__getattr__`` of ``package``: a name of ``where`` (name → the package's module that
    defines it) is imported from that module when first asked for; any other name is an AttributeError."""

    def __getattr__(name: str) -> Any:
        if name in where:
            return getattr(importlib.import_module(f"{package}.{where[name]}"), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__
