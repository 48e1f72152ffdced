"""Pieces of the JSON records the layers write (``to_json`` of their results)."""

from __future__ import annotations

from typing import Any


def attributes(obj: object, *names: str) -> dict[str, Any]:
    """``{name: obj.name}`` for each of ``names``, in that order: the fields a record passes on as they
    are, under their own names."""
    return {name: getattr(obj, name) for name in names}
