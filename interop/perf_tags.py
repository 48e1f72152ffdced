"""perfonto's own perf JSON: the ``[perfonto: k=v; …]`` tag of an event's or constant's description,
and the signal an exported event stands for (``perfonto export perf-json`` writes both, so that
``perfonto import perf`` rebuilds the same signals without ``--generation``)."""

from __future__ import annotations

import re

from . import ir
from .catalog import SourceCatalog
from .names import ident
from .units import split_scale_unit


def tag(desc: str) -> tuple[str, dict]:
    """A description without its ``[perfonto: k=v; …]`` tag, and the tag as a mapping."""
    m = re.search(r"\s*\[perfonto: ([^\]]*)\]", desc)
    if not m:
        return desc, {}
    out = {}
    for part in m.group(1).split(";"):
        k, _, v = part.partition("=")
        if k.strip():
            out[k.strip()] = v.strip()
    return (desc[: m.start()] + desc[m.end() :]).strip(), out


def tagged_event(cat: SourceCatalog, low: str, entry: dict, tg: dict, description: str) -> ir.Node:
    """An event perfonto exported: its block (``Unit``), unit and scale (``ScaleUnit``), kind, width,
    instances and chip rule (the tag) come back from its definition. A perf metric reads the raw count
    (perf reverses an event's scale), i.e. the signal's value / scale, summed over its instances."""
    block = ident(str(entry.get("Unit") or low.split(".")[0]))
    name = ident(low.split(".", 1)[1]) if "." in low else ident(low)
    scale, label = split_scale_unit(str(entry.get("ScaleUnit") or "1"))
    axes = {}
    for part in str(tg.get("instances", "")).split(","):
        a, _, n = part.partition(":")
        if a.strip() and n.strip().isdigit() and len(n.strip()) <= 7:
            axes[ident(a.strip())] = int(n)
    width = tg.get("width", 64)
    ev = cat.event(low, block, name, description, True)
    ev.unit = label or "event"
    ev.scale = scale if scale > 0 and scale == scale and scale != float("inf") else 1.0
    ev.kind = tg.get("kind") if tg.get("kind") in ("counter", "gauge") else "counter"
    ev.width = (
        int(width) if str(width).isdigit() and 1 <= int(width) <= 64 else ("unknown" if width == "unknown" else 64)
    )
    ev.axes = axes
    ev.across_chips = tg.get("across_chips") if tg.get("across_chips") in ("sum", "avg", "max") else None
    ev.counted_by = "leader" if tg.get("counted_by") == "leader" else "chip"
    ew = str(tg.get("effective_width", ""))
    ev.effective_width = int(ew) if ew.isdigit() and 1 <= int(ew) <= 64 else None
    try:
        rate = float(tg.get("max_rate", "nan"))
    except ValueError:
        rate = float("nan")
    ev.max_rate = rate if 0 < rate < float("inf") else None
    node: ir.Node = ir.Event(low)
    if axes:
        node = ir.Rollup("sum", node)
    return node if ev.scale == 1.0 else ir.Bin("/", node, ir.Num(ev.scale))
