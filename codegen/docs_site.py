"""The docs site: Markdown pages per generation and per metric group, and an index.

``generate_site(graphs, primary)`` takes one compiled catalog per generation (``{name: MetricGraph}``,
as ``metrics.compiler.compile_files`` gives) and returns ``{relative path: Markdown text}``:

- ``index.md`` — the generations, the metric groups, and every metric with its unit, groups and
  availability on each generation;
- ``generations/<name>.md`` — spec constants (value, unit, provenance, source), signals by block
  (kind, unit, width, scale, description, availability across generations, metrics that read it), and
  which metrics are unavailable there and why;
- ``groups/<group>.md`` — every metric of the group: unit, formula, description, source, bounds,
  threshold, parent, server-level meaning, availability across generations, dependencies, dependents,
  and a Mermaid graph of its dependencies (transitively, down to signals and spec constants).

Metric details come from the ``primary`` generation's catalog (its declared units and formulas);
availability comes from every catalog. Output is deterministic: sorted, no timestamps, no hashes of
anything but the inputs. Text from catalogs is escaped for Markdown (``codegen.docs._esc``) and
Mermaid labels are quoted and entity-escaped.
"""

from __future__ import annotations

import re
from pathlib import Path

from perfonto.metrics.across_chips import chip_extreme, field_deps
from perfonto.metrics.graph import MetricGraph
from perfonto.ontology.units import fmt_number, fmt_unit

from .docs import _anchor, _axis_size, _code, _esc, _n, signal_notes, spec_table, width_text
from .docs_mermaid import mermaid

YES, NO = "✓", "—"


def _file(name: str) -> str:
    """A file name for a group or generation name (they are identifiers; anything else is replaced)."""
    return "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in name).lstrip(".") or "_"


def _all(g: MetricGraph) -> dict:
    """Window metrics and, where the compiler has them, metrics over request records."""
    return getattr(g, "all_metrics", g.metrics)


def _where(gen: str) -> str:
    """The generation that removed a signal, as ``Generation.removed`` names it (an identifier, or a derived
    generation's "name (why)")."""
    return f"`{gen}`" if re.fullmatch(r"[A-Za-z0-9_.]+", gen) else _esc(gen)


def _groups_of(decl) -> tuple[str, ...]:
    return tuple(decl.groups) or ("ungrouped",)


def _spec_table(gen) -> list[str]:
    """The generation's spec constants: value, unit, provenance, scope, source, description."""
    return spec_table(gen, "constant", NO, description=True)


def _instances(b: dict) -> str:
    """A block's instances: its axes (or one per chip), and the slots present when only some are."""
    axes = ", ".join(f"{a}: {_axis_size(b, a, n)}" for a, n in b["axes"]) or "one per chip"
    if b.get("slots"):
        axes += (
            " present (slots "
            + "; ".join(f"{a}: {', '.join(map(str, p))} of {n}" for (a, n), p in zip(b["full_axes"], b["slots"]))
            + ")"
        )
    return axes


def _fields_table(gen, block: str) -> list[str]:
    """The packed fields of a block (register, bits, unit, scale, description); none: no table."""
    fields = sorted(f for f in gen.fields if gen.fields[f].block == block)
    if not fields:
        return []
    out = [
        "",
        "| packed field | register | bits | unit | scale | description |",
        "|---|---|---|---|---|---|",
    ]
    for fname in fields:
        f = gen.fields[fname]
        out.append(
            f'| <a id="{_anchor(fname)}"></a>`{_n(fname)}` | `{_n(f.register)}` | {f.lo}..{f.hi} | '
            f"{_esc(f.unit_text)} | {fmt_number(f.scale)} | {_esc(f.description)} |"
        )
    return out


def _bounds(d, m) -> str:
    """A metric's bounds: the compiled ones (in its unit), else the declared ones, else none."""
    if m is not None and m.bounds:
        unit = "" if d.unit.strip() in ("", "1") else f" {_esc(d.unit)}"  # a plain ratio: "0 .. 3", not "0 .. 3 1"
        return f"- **bounds**: {fmt_number(m.bounds[0])} .. {fmt_number(m.bounds[1])}{unit}"
    if d.bounds:
        return f"- **bounds**: {fmt_number(d.bounds[0].value)} .. {fmt_number(d.bounds[1].value)}"
    return f"- **bounds**: {NO}"


def _level(m, extreme: str | None = None) -> str:
    """What a compiled metric is at server level: per record of a population, the ``extreme`` over chips
    (``metrics.across_chips.chip_extreme``), a total or a ratio of totals (per instance of its axes)."""
    if getattr(m, "population", None):
        return f"- **per record of**: `{_n(m.population)}` (computed from records, at run level)"
    rule = f"the {extreme} over chips" if extreme else "the sum over chips (a total)" if m.degree == 1 else None
    return f"- **server level**: {rule or 'a ratio of server totals'}" + (
        f"; per instance of {', '.join(f'`{_n(a)}`' for a, _ in m.axes)}" if m.axes else ""
    )


class _Site:
    def __init__(self, graphs: dict[str, MetricGraph], primary: str):
        self.graphs = dict(sorted(graphs.items(), key=lambda kv: (kv[0] != primary, kv[0])))
        self.primary = primary
        self.g = graphs[primary]
        self.names = sorted({n for g in graphs.values() for n in g.declarations})
        self.decl = {}
        for n in self.names:  # the primary generation's declaration, else the first that has one
            for g in self.graphs.values():
                if n in g.declarations:
                    self.decl[n] = g.declarations[n]
                    break
        self.groups: dict[str, list[str]] = {}
        for n in self.names:
            for grp in _groups_of(self.decl[n]):
                self.groups.setdefault(grp, []).append(n)

    # -- shared pieces -------------------------------------------------------------------------------
    def status(self, gen: str, metric: str) -> tuple[bool, str]:
        g = self.graphs[gen]
        if metric in _all(g):
            return True, ""
        if metric in g.unavailable:
            return False, g.unavailable[metric]
        if metric not in g.declarations:
            return False, "not declared for this generation"
        errs = [
            d
            for d in g.errors
            if d.span.line == g.declarations[metric].span.line and d.span.file == g.declarations[metric].span.file
        ]
        return False, "does not compile: " + (
            errs[0].message if errs else "it depends on a metric that does not compile"
        )

    def metric_link(self, name: str, from_root: bool = False) -> str:
        """A link to the metric's entry on its first group's page (from the index, or from a page in a
        sub-folder)."""
        grp = _groups_of(self.decl[name])[0]
        prefix = "groups/" if from_root else "../groups/"
        return f"[`{_n(name)}`]({prefix}{_file(grp)}.md#{_anchor(name)})"

    def signal_link(self, name: str, gen: str | None = None, from_root: bool = False) -> str:
        gen = gen or self.primary
        prefix = "generations/" if from_root else "../generations/"
        return f"[`{_n(name)}`]({prefix}{_file(gen)}.md#{_anchor(name)})"

    def availability_row(self, metric: str) -> str:
        return " | ".join(YES if self.status(gen, metric)[0] else NO for gen in self.graphs)

    # -- pages --------------------------------------------------------------------------------------
    def index(self) -> str:
        out = [
            "# perfonto metric reference",
            "",
            f"Metric details as compiled for `{_n(self.primary)}`; availability on every generation "
            f"({', '.join(f'`{_n(g)}`' for g in self.graphs)}). {len(self.names)} metrics in {len(self.groups)} "
            "groups.",
            "",
            "## Generations",
            "",
            "| generation | lineage | signals | spec constants | metrics available | unavailable | description |",
            "|---|---|---|---|---|---|---|",
        ]
        for name, g in self.graphs.items():
            gen = g.generation
            lineage = " → ".join(_esc(x) for x in gen.lineage) or _esc(name)
            n_ok = sum(self.status(name, n)[0] for n in self.names)
            out.append(
                f"| [`{_n(name)}`](generations/{_file(name)}.md) | {lineage} | {len(gen.signals)} | {len(gen.spec)} "
                f"| {n_ok} | {len(self.names) - n_ok} | {_esc(gen.description)} |"
            )
        out += ["", "## Metric groups", "", "| group | metrics |", "|---|---|"]
        for grp, names in sorted(self.groups.items()):
            out.append(f"| [{_esc(grp)}](groups/{_file(grp)}.md) | {len(names)} |")
        out += [
            "",
            "## All metrics",
            "",
            f"{YES} available, {NO} unavailable (the generation page says why).",
            "",
            "| metric | unit | groups | " + " | ".join(f"`{_n(g)}`" for g in self.graphs) + " |",
            "|---|---|---|" + "---|" * len(self.graphs),
        ]
        for n in self.names:
            d = self.decl[n]
            out.append(
                f"| {self.metric_link(n, True)} | {_esc(d.unit)} | {', '.join(_esc(x) for x in _groups_of(d))} | "
                f"{self.availability_row(n)} |"
            )
        return "\n".join(out) + "\n"

    def generation_page(self, name: str) -> str:
        """The page of generation ``name``: its summary, spec constants, signals by block and the
        metrics unavailable there (module docstring)."""
        g = self.graphs[name]
        gen = g.generation
        out = [
            f"# Generation `{_n(name)}`",
            "",
            _esc(gen.description),
            "",
            f"Lineage: {' → '.join(f'`{_n(x)}`' for x in gen.lineage) or f'`{_n(name)}`'}. {len(gen.signals)} signals, "
            f"{len(gen.fields)} packed fields, {len(gen.spec)} spec constants; "
            f"{sum(self.status(name, n)[0] for n in self.names)} of {len(self.names)} metrics available. "
            "[Index](../index.md).",
            "",
        ]
        out += _spec_table(gen)
        out += ["", "## Signals", ""]
        for block in sorted(gen.blocks):
            out += self._block_section(g, block)
        out += self._unavailable_section(name)
        return "\n".join(out).rstrip() + "\n"

    def _block_section(self, g: MetricGraph, block: str) -> list[str]:
        """A block's heading (description, clock domain, instances), its signals' table (availability on
        every generation, the metrics that read each) and its packed fields' table."""
        gen = g.generation
        b = gen.blocks[block]
        gens = list(self.graphs)
        out = [
            f"### Block `{_n(block)}`",
            "",
            f"{_esc(b['description'])} Clock domain `{_n(b['clock'])}`; instances: {_esc(_instances(b))}.",
            "",
            "| signal | kind | unit | width | scale | description | "
            + " | ".join(f"`{_n(x)}`" for x in gens)
            + " | read by |",
            "|---|---|---|---|---|---|" + "---|" * len(gens) + "---|",
        ]
        for sname in sorted(s for s in gen.signals if gen.signals[s].block == block):
            s = gen.signals[sname]
            avail = " | ".join(self._signal_status(x, sname) for x in gens)
            users = sorted(u for u in g.graph.successors(sname) if u in _all(g)) if sname in g.graph else []
            used = ", ".join(self.metric_link(u) for u in users) or NO
            out.append(
                f'| <a id="{_anchor(sname)}"></a>`{_n(sname)}` | {s.kind} | {_esc(s.unit_text) or "1"} | '
                f"{width_text(s, NO)} | {fmt_number(s.scale)} | {_esc(s.description)}{signal_notes(s)} | "
                f"{avail} | {used} |"
            )
        out += _fields_table(gen, block)
        out.append("")
        return out

    def _unavailable_section(self, name: str) -> list[str]:
        """The metrics unavailable on generation ``name`` and why."""
        missing = [n for n in self.names if not self.status(name, n)[0]]
        out = ["## Unavailable metrics", ""]
        if not missing:
            out.append("Every metric is available on this generation.")
        else:
            out += ["| metric | why |", "|---|---|"]
            out += [f"| {self.metric_link(n)} | {_esc(self.status(name, n)[1])} |" for n in missing]
        return out

    def _signal_status(self, gen: str, signal: str) -> str:
        """A signal's cell for generation ``gen``: ✓, "as `new`" (renamed there), "removed in `g`" (that
        generation or an ancestor removed it, under this name or under the name a rename gave it), or —."""
        g = self.graphs[gen].generation
        if signal in g.signals and not g.signals[signal].broken:
            return YES
        now = g.aliases.get(signal, signal)
        if now in g.removed:  # never "as `new`" for a new name this generation or an ancestor removed
            return f"removed in {_where(g.removed[now])}" + (
                f" (renamed to `{_n(now)}` before)" if now != signal else ""
            )
        if now != signal:
            return f"as `{_n(now)}`"
        return NO

    def group_page(self, group: str) -> str:
        names = sorted(self.groups[group])
        out = [
            f"# Metric group `{_n(group)}`",
            "",
            f"{len(names)} metrics. Details as compiled for `{_n(self.primary)}`. [Index](../index.md).",
            "",
        ]
        for n in names:
            out += self.metric_entry(n)
        return "\n".join(out).rstrip() + "\n"

    def metric_entry(self, name: str) -> list[str]:
        """A metric's entry on its group's page: description, facts, availability on every generation
        and the Mermaid graph of its dependencies (module docstring)."""
        d = self.decl[name]
        g = next((gr for gr in self.graphs.values() if name in _all(gr)), self.g)
        m = _all(g).get(name)
        out = [
            f'<a id="{_anchor(name)}"></a>',
            "",
            f"## `{_n(name)}`",
            "",
            _esc(d.description) or "(no description)",
            "",
        ]
        out += self._facts(d, m, chip_extreme(g, name) if m is not None else None)
        if m is not None:
            out += self._dependencies(name, m, g)
        out += ["", "| generation | available |", "|---|---|"]
        for gen in self.graphs:
            ok, why = self.status(gen, name)
            out.append(f"| `{_n(gen)}` | {YES if ok else NO + ' ' + _esc(why)} |")
        if m is not None:
            out += ["", "```mermaid", *mermaid(name, _all(g), g.generation.spec), "```"]
        out.append("")
        return out

    def _facts(self, d, m, extreme: str | None = None) -> list[str]:
        """A metric's unit, formula, source, bounds, threshold, parent, groups and level (from its
        declaration ``d`` and, when it compiled, the metric ``m``; ``extreme``: its server value is the max
        or min over chips)."""
        unit = _esc(d.unit) + (f" ({_esc(fmt_unit(m.unit))})" if m is not None else "")
        out = [
            f"- **unit**: {unit}",
            f"- **formula**: {_code(d.formula)}",
            f"- **source**: {_esc(d.source) if d.source else NO}",
            _bounds(d, m),
        ]
        if m is not None and m.threshold:
            op, v, msg = m.threshold
            out.append(f"- **threshold**: {_esc(op)} {fmt_number(v)} {_esc(d.unit)}: {_esc(msg)}")
        if d.parent:
            out.append(f"- **parent**: {self.metric_link(d.parent) if d.parent in self.decl else _esc(d.parent)}")
        out.append(f"- **groups**: {', '.join(f'[{_esc(x)}]({_file(x)}.md)' for x in _groups_of(d))}")
        if m is not None:
            out.append(_level(m, extreme))
        return out

    def _dependencies(self, name: str, m, g: MetricGraph) -> list[str]:
        """What a compiled metric depends on (signals, spec constants, metrics) and the metrics using it."""
        reads = m.signal_deps + tuple(field_deps(g, name)) + m.spec_deps  # a packed field is in no signal_deps
        deps = [self._dep_link(x, g) for x in reads] + [self.metric_link(x) for x in m.metric_deps]
        users = sorted(n for n in g.graph.successors(name) if n in _all(g)) if name in g.graph else []
        return [
            f"- **depends on**: {', '.join(deps) or NO}",
            f"- **used by**: {', '.join(self.metric_link(u) for u in users) or NO}",
        ]

    def _dep_link(self, name: str, g: MetricGraph) -> str:
        if name in g.generation.spec:
            return f"`{_n(name)}`"
        return self.signal_link(name, g.generation.name)


def generate_site(graphs: dict[str, MetricGraph], primary: str) -> dict[str, str]:
    """``{relative path: Markdown}`` of the docs site (see the module docstring). ``graphs`` holds one
    compiled catalog per generation; ``primary`` (a key of ``graphs``) supplies the metric details."""
    site = _Site(graphs, primary)
    pages = {"index.md": site.index()}
    for name in site.graphs:
        pages[f"generations/{_file(name)}.md"] = site.generation_page(name)
    for grp in sorted(site.groups):
        pages[f"groups/{_file(grp)}.md"] = site.group_page(grp)
    return dict(sorted(pages.items()))


def write_site(pages: dict[str, str], out: Path) -> list[Path]:
    """Write the pages under ``out`` (creating folders); returns the paths written."""
    written = []
    for rel, text in pages.items():
        p = Path(out) / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
        written.append(p)
    return written
