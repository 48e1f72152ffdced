"""How the terminal report writes a value: with its unit, bare, with an SI prefix, as a share or a time;
``null`` (or ``—``) where it is not computable, never ``nan``; a name from data as plain text."""

from __future__ import annotations

import numpy as np
from rich.text import Text

__all__ = ["NULL", "bare_text", "finite", "ms_text", "number_text", "pct", "plain", "si_text", "value_text"]


NULL = "null"  # how the text report shows a value that is not computable (JSON null), never "nan"


def plain(text: str) -> Text:
    """A name from data (host, chip, op, node) as terminal text: never read as rich markup, and its
    control characters (NUL, ESC, CR, U+2028 …) shown escaped (``\\x00``) rather than sent to the terminal."""
    from perfonto.ontology.diagnostics import escaped

    return Text(escaped(text))


def finite(v) -> float | None:
    """``v`` as a float, or None when it is None, NaN, infinite or not a number (a NumPy scalar of
    any width, or a 0-d array, included)."""
    if v is None:
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if np.isfinite(f) else None


def pct(v, digits: int = 1, scale: float = 100.0) -> str:
    """A share as ``12.3 %`` (``v × scale``); ``—`` when it is null or not finite."""
    f = finite(v)
    return "—" if f is None else f"{f * scale:.{digits}f} %"


def value_text(v, unit: str = "") -> str:
    """A value with its unit (``12.345 GB/s``, ``1.23e+09 B``); ``null`` when not computable: the one
    formatter of the terminal and HTML reports (``analysis.report_json.format_value``)."""
    from perfonto.analysis.report_json import format_value

    return format_value(finite(v), unit)


def bare_text(v, unit: str) -> str:
    """A value formatted by its unit's rule (``value_text``: a percent with two decimals) without the unit, which
    the column's header carries (a per-chip PCIe % printed 0.0009797 beside the server's 0.00 %)."""
    text = value_text(v, unit)
    shown = " %" if unit in ("percent", "%") else f" {unit}"  # the unit as _fmt writes it after the number
    return text[: -len(shown)] if unit and text.endswith(shown) else text


def number_text(v, spec: str = ".6g") -> str:
    """A bare number (``1.23457e+09``); ``null`` when not computable."""
    f = finite(v)
    return NULL if f is None else format(f, spec)


def si_text(v, unit: str) -> str:
    """A number with an SI prefix (``1.23 PFLOP/s``); ``—`` for None."""
    v = finite(v)
    if v is None:
        return "—"
    for factor, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= factor:
            return f"{v / factor:.3g} {prefix}{unit}"
    return f"{v:.3g} {unit}"


def ms_text(v: float) -> str:
    if finite(v) is None:
        return "—"
    return f"{v * 1e3:,.3f} ms" if abs(v) >= 1e-4 else f"{v * 1e6:,.2f} µs"
