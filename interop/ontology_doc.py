"""The generation file an import writes, as a plain mapping (``yaml.safe_dump`` escapes every string):
one block per PMU block with its events as signals, the spec constants, and the clock domains (a
generation that extends a shipped one inherits its clocks and writes only what the parent lacks).

``interop.build`` dumps it next to the metrics file.
"""

from __future__ import annotations

from perfonto.ontology.generation import Generation

from .catalog import GIVEN, SourceCatalog


def ontology_doc(cat: SourceCatalog, parent: Generation | None) -> dict:
    """The generation file as a plain mapping (``yaml.safe_dump`` escapes every string)."""
    blocks: dict[str, dict] = {}
    clock = cat.clock if parent is None else sorted(parent.clock_domains)[0]
    domains = {clock} | set(cat.clocks)
    for ev in cat.events.values():
        if parent is not None and f"{ev.block}.{ev.name}" in parent.signals:
            continue
        _add_event(blocks, domains, cat, ev, clock, parent)
    spec = _spec_doc(cat, parent, domains)
    doc: dict = {"generation": cat.generation, "description": cat.description}
    if parent is not None:
        doc["extends"] = parent.name
        doc["clock_domains"] = _given_clocks(cat, parent)
    else:
        doc["clock_domains"] = _clock_domains_doc(cat, domains)
    doc["spec"] = spec
    doc["blocks"] = blocks
    return doc


def _add_event(blocks: dict, domains: set, cat: SourceCatalog, ev, clock: str, parent: Generation | None) -> None:
    """One event as a signal of its block (the block made on first use); a new file's cycle counter
    names its block's clock domain, which joins `domains`."""
    cyc = ev.unit[: -len("_cycle")] if ev.unit.endswith("_cycle") else None
    if cyc and parent is None:
        domains.add(cyc)
    b = blocks.setdefault(
        ev.block,
        {
            "description": cat.block_descriptions.get(ev.block) or f"{cat.format} PMU `{ev.block}` (imported)",
            "clock": clock,
            "signals": {},
        },
    )
    if cyc and parent is None:
        b["clock"] = cyc  # a block's cycle counters name its clock domain
    if ev.axes:
        b["instances"] = {str(a): (n if n == "from_data" else int(n)) for a, n in ev.axes.items()}
    elif cat.block_instances.get(ev.block):
        b["instances"] = {"instance": int(cat.block_instances[ev.block])}
    b["signals"][ev.name] = _signal_doc(cat, ev)


def _signal_doc(cat: SourceCatalog, ev) -> dict:
    """An event's signal entry: kind, unit, description, and the fields that differ from the defaults."""
    sig = {"kind": ev.kind, "unit": ev.unit, "description": ev.description or f"{cat.format} event {ev.key}"}
    if ev.kind != "gauge":
        sig["width"] = ev.width
    if ev.scale != 1.0:
        sig["scale"] = float(ev.scale)
    if ev.kind == "gauge" and ev.across_chips:
        sig["across_chips"] = ev.across_chips
    if ev.counted_by != "chip":
        sig["counted_by"] = ev.counted_by
    if ev.effective_width is not None and ev.kind == "counter":
        sig["effective_width"] = ev.effective_width
    if ev.max_rate is not None and ev.kind == "counter":
        sig["max_rate"] = f"{ev.max_rate!r} {ev.unit}/s"
    if ev.sources:
        sig["sources"] = dict(ev.sources)
    return sig


def _spec_doc(cat: SourceCatalog, parent: Generation | None, domains: set) -> dict:
    """The constants the parent lacks, except clock frequencies of the file's clock domains."""
    return {
        c.name: {
            "value": float(c.value),
            "unit": c.unit,
            "provenance": c.provenance,
            "source": c.source,
            "description": c.description or c.key,
            "scope": c.scope,
        }
        for c in cat.constants.values()
        if (parent is None or f"spec.{c.name}" not in parent.spec or c.given)
        and not (c.name.startswith("clock.") and c.name[6:] in domains)
    }


def _given_clocks(cat: SourceCatalog, parent: Generation) -> dict:
    """The parent's clock domains whose frequency was given on the command line (``--constant
    clock.core=…``, in Hz): only the frequency, merged onto the parent's domain."""
    return {
        d: {"frequency": {"value": hz / 1e9, "unit": "GHz", "provenance": prov, "source": src}}
        for d, (hz, prov, src) in sorted(cat.clocks.items())
        if src == GIVEN and d in parent.clock_domains
    }


def _clock_domains_doc(cat: SourceCatalog, domains: set) -> dict:
    """Each clock domain with its frequency in GHz (1 GHz, assumed, when the source gives none)."""
    out = {}
    for d in sorted(domains):
        hz, prov, src = cat.clocks.get(
            d, (1e9, "assumed", "not given by the source file; no imported metric depends on it")
        )
        out[d] = {
            "description": cat.clock_description
            if d == cat.clock and d not in cat.clocks
            else f"clock domain `{d}` (imported)",
            "frequency": {"value": hz / 1e9, "unit": "GHz", "provenance": prov, "source": src},
        }
    return out
