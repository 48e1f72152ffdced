"""Markdown reference of a compiled catalog: every signal and every metric.

For each signal: kind, unit, width (and where it wraps), scale, description, stability and notes.
For each metric: unit, formula, description, groups, bounds, threshold, parent, server-level rule, source,
what it depends on (signals, packed fields, spec constants, metrics) and what depends on it. Output is
deterministic (sorted, no timestamps) so it can be checked into a repository and diffed. Text from
catalogs is escaped for Markdown tables.
"""

from __future__ import annotations

from pathlib import Path

from perfonto.metrics.across_chips import chip_extreme, field_deps
from perfonto.metrics.explain import limits
from perfonto.metrics.graph import MetricGraph
from perfonto.ontology.units import fmt_number, fmt_unit


_PUNCT = set("\\`*_{}[]()#!|<>~&")


def _esc(text: str) -> str:
    """Escape catalog text for Markdown (CommonMark): every ASCII punctuation character is
    backslash-escaped, so no heading, link, image, table cell or HTML can be injected; line breaks
    (CR and LF) become spaces, and leading and trailing white space is dropped (four leading spaces
    would make the line an indented code block)."""
    out = []
    for ch in str(text).strip():
        if ch in "\r\n\t\x0b\x0c\x85\u2028\u2029":
            out.append(" ")
        elif ch in _PUNCT:
            out.append("\\" + ch)
        elif ord(ch) < 32 or 0xD800 <= ord(ch) <= 0xDFFF:
            out.append("\ufffd")
        else:
            out.append(ch)
    return "".join(out)


def _code(text: str) -> str:
    """Inline code that survives any backticks inside ``text``."""
    t = " ".join(str(text).split())
    fence = "``" if "`" in t else "`"
    return f"{fence} {t} {fence}" if fence == "``" else f"`{t}`"


def _n(name: str) -> str:
    """A catalog identifier for an inline code span (identifiers are validated: letters, digits, `_`, `.`)."""
    import re

    return name if re.fullmatch(r"[A-Za-z0-9_.]+", name) else _esc(name)


def _anchor(name: str) -> str:
    return name.replace(".", "").replace("_", "-").lower()


def spec_table(gen, name_header: str = "name", empty: str = "", description: bool = False) -> list[str]:
    """The spec constants as a table: value, unit, provenance, scope, source (``empty`` where it has none)
    and, with ``description``, their descriptions; the first column headed ``name_header``."""
    cols = [name_header, "value", "unit", "provenance", "scope", "source"] + (["description"] if description else [])
    out = ["## Spec constants", "", "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for name in sorted(gen.spec):
        c = gen.spec[name]
        cells = [f"`{_n(name)}`", f"{fmt_number(c.value)}", _esc(c.unit_text), _esc(c.provenance), _esc(c.scope.value)]
        cells += [_esc(c.source) or empty] + ([_esc(c.description) or empty] if description else [])
        out.append("| " + " | ".join(cells) + " |")
    return out


def _axis_size(b: dict, axis: str, n: int) -> str:
    """An axis' size as the docs print it: a size sized by the data (``from_data``) says so, with the
    placeholder size 1 the catalog is compiled with, or the capture's count and instances once sized."""
    if axis in b.get("from_data", ()):
        return "from the data (`from_data`; 1 here, a placeholder: a capture gives the size)"
    if axis in b.get("labels", {}):
        return f"{n} from the data ({', '.join(b['labels'][axis][:16])})"
    return str(n)


def width_text(s, none: str = "—") -> str:
    """A signal's register width, and where it wraps when not at that width: at its effective width
    (``64 (wraps at 40)``) or at a declared ``wrap_range`` (``32 (wraps at 1000000000 counts)``)."""
    width = "unknown" if s.wrap_width is None and s.width == "unknown" else (str(s.width) if s.width else none)
    if s.modulus is not None:
        width += f" (wraps at {s.modulus} counts)"
    elif s.wrap_width and s.width and s.wrap_width != s.width:
        width += f" (wraps at {s.wrap_width})"
    return width


def signal_notes(s) -> str:
    """What a signal's description cell adds in parentheses: sentinels, reset indicator, unit field, max
    rate, stability (``deprecated``, ``experimental``, a rename), known not to count, emulator binding."""
    notes = []
    if s.sentinel:
        notes.append("sentinel " + ", ".join(str(v) for v in s.sentinel))
    if s.reset_indicator:
        notes.append(
            f"reset indicator `{_n(s.reset_indicator)}`"
            + (" (an uptime: reset when it decreases)" if s.reset_kind == "decrease" else "")
        )
    if s.scale_field is not None:
        notes.append(f"unit × {fmt_number(s.scale_field[1])}^`{_n(s.scale_field[0])}` per sample")
    if s.max_rate is not None:
        notes.append(f"max rate {fmt_number(s.max_rate)} {_esc(s.unit_text)}/s")
    if s.stability != "stable":
        notes.append(_esc(s.stability) + (f", renamed to `{_n(s.renamed_to)}`" if s.renamed_to else ""))
    if s.broken:
        notes.append("known not to count here")
    if getattr(s, "emulator", None) is not None:
        notes.append(f"emulator {_esc(s.emulator.describe())}")
    return f" ({'; '.join(notes)})" if notes else ""


def _block_section(graph: MetricGraph, block: str) -> list[str]:
    """A block's heading (description, clock domain, instances) and its signals' table (kind, unit,
    width and where it wraps, scale, description with stability and notes, the metrics that read each)."""
    gen = graph.generation
    b = gen.blocks[block]
    axes = ", ".join(f"{a}: {_axis_size(b, a, n)}" for a, n in b["axes"]) or "one per chip"
    out = [
        f"### Block `{_n(block)}`",
        "",
        f"{_esc(b['description'])} Clock domain `{_n(b['clock'])}`; instances: {_esc(axes)}.",
        "",
        "| signal | kind | unit | width | scale | description | used by |",
        "|---|---|---|---|---|---|---|",
    ]
    for name in sorted(s for s in gen.signals if gen.signals[s].block == block):
        s = gen.signals[name]
        fields = sorted((f for f in gen.fields.values() if f.register == name), key=lambda f: f.lo)
        users = _users(graph, [name, *(f.name for f in fields)])  # a packed register is read through its fields
        out.append(
            f"| `{_n(name)}` | {s.kind} | {_esc(s.unit_text)} | {width_text(s)} | {fmt_number(s.scale)} | "
            f"{_esc(s.description)}{signal_notes(s)} | {users} |"
        )
        for f in fields:  # each field under its register: its bits, unit and the metrics that read it
            out.append(
                f"| `{_n(f.name)}` | field, bits {f.lo}..{f.hi} | {_esc(f.unit_text)} | {f.hi - f.lo + 1} | "
                f"{fmt_number(f.scale)} | {_esc(f.description)} | {_users(graph, [f.name])} |"
            )
    out.append("")
    return out


def _users(graph: MetricGraph, names: list[str]) -> str:
    """The metrics that read any of ``names`` (signals or packed fields), as links, or —."""
    users = sorted(
        {n for name in names if name in graph.graph for n in graph.graph.successors(name) if n in graph.all_metrics}
    )
    return ", ".join(f"[`{_n(u)}`](#{_anchor(u)})" for u in users) or "—"


def _population(m, extreme: str | None = None) -> str:
    """What a metric is computed over: records (per record, or per run), or windows (a total, a ratio
    of totals, or with ``extreme`` the max or min over chips at server level:
    ``metrics.across_chips.chip_extreme``)."""
    if m.from_records:
        pop = (
            f"one value per `{_n(m.population)}` record"
            if m.population
            else "one value per run, over the records of its argument's population"
        )
        return f"- **population**: {pop}"
    return "- **population**: windows (counter increases and gauge means); at server level " + (
        f"the {extreme} over chips"
        if extreme
        else "a sum over chips (a total)"
        if m.degree == 1
        else "a ratio of server totals"
    )


def _optional_facts(m) -> list[str]:
    """A metric's description, groups, bounds, threshold and parent, those it has."""
    out = []
    if m.description:
        out.append(f"- **description**: {_esc(m.description)}")
    if m.groups:
        out.append(f"- **groups**: {', '.join(_esc(g) for g in m.groups)}")
    out += [f"- **{fact}**: {text}" for fact, text in limits(m, _esc)]
    if m.parent:
        out.append(f"- **parent**: [`{_n(m.parent)}`](#{_anchor(m.parent)})")
    return out


def _metric_entry(graph: MetricGraph, name: str) -> list[str]:
    """A metric's entry: unit, formula, its facts, population, source, dependencies, dependents and
    where it is defined."""
    m = graph.all_metrics[name]
    out = [
        f"### `{_n(name)}`",
        "",
        f"- **unit**: {_esc(m.unit_text)} ({_esc(fmt_unit(m.unit))})",
        f"- **formula**: {_code(m.formula)}",
    ]
    out += _optional_facts(m)
    out.append(_population(m, None if m.from_records else chip_extreme(graph, name)))
    if m.source:
        out.append(f"- **source**: {_esc(m.source)}")
    record_deps = tuple(sorted(p for p in graph.graph.predecessors(name) if p in graph.generation.record_fields))
    reads = m.signal_deps + tuple(field_deps(graph, name)) + m.spec_deps + record_deps  # a field is no signal_dep
    deps = [f"`{_n(d)}`" for d in reads] + [f"[`{_n(d)}`](#{_anchor(d)})" for d in m.metric_deps]
    out.append(f"- **depends on**: {', '.join(deps) or '—'}")
    users = graph.dependents(name)
    out.append(f"- **used by**: {', '.join(f'[`{_n(u)}`](#{_anchor(u)})' for u in users) or '—'}")
    out.append(f"- **defined at**: {_esc(Path(m.span.file).name)}:{m.span.line}")
    out.append("")
    return out


def generate_markdown(graph: MetricGraph) -> str:
    """The whole reference as one Markdown document."""
    gen = graph.generation
    out: list[str] = []
    out.append(f"# {_esc(gen.name)}: signals and metrics")
    out.append("")
    out.append("Generation description: " + _esc(gen.description))
    out.append("")
    out.append(
        f"Generated by perfonto from ontology hash `{gen.content_hash}`, catalog hash `{graph.content_hash}`. "
        f"{len(gen.signals)} signals, {len(gen.spec)} spec constants, {len(graph.all_metrics)} metrics."
    )
    out.append("")
    out += spec_table(gen) + [""]
    out.append("## Signals")
    out.append("")
    for block in sorted(gen.blocks):
        out += _block_section(graph, block)
    out.append("## Metrics")
    out.append("")
    groups: dict[str, list[str]] = {}
    metrics = graph.all_metrics
    for name, m in metrics.items():
        for g in m.groups or ("ungrouped",):
            groups.setdefault(g, []).append(name)
    out.append("Groups: " + ", ".join(f"{_esc(g)} ({len(v)})" for g, v in sorted(groups.items())))
    out.append("")
    for name in sorted(metrics):
        out += _metric_entry(graph, name)
    return "\n".join(out).rstrip() + "\n"
