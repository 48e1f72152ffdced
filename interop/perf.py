"""Import Linux perf pmu-events metric JSON (``tools/perf/pmu-events/arch/*/*/metrics.json``).

Semantics, from perf's own sources (``tools/perf/util/expr.y``, ``expr.l``, ``pmu-events/jevents.py``,
``pmu-events/metric.py``), and how each is translated:

- ``a / b``: perf gives NaN when ``b`` is zero; perfonto gives null. Same meaning, written ``a / b``.
- ``d_ratio(a, b)``: 0 when ``b`` is zero → ``a / b if b != 0 else 0`` (zero in ``a/b``'s unit).
- ``a if c else b``: the else branch only when ``c`` is exactly zero → ``a if c != 0 else b`` (a
  NaN condition takes the then-branch in perf but is null in perfonto; such conditions are flagged).
- ``<`` ``>`` give 1/0, ``&`` ``|`` ``^`` are logical on non-zero → comparisons and ``and``/``or``,
  turned back into 1/0 (``1 if c else 0``) where used as numbers.
- ``min``/``max`` of two values → perfonto's element-wise ``min``/``max``.
- ``#literal`` (``#slots``, ``#smt_on``, ``#num_cpus``, ``#system_tsc_freq`` …) are machine values read
  at run time → dimensionless spec constants ``spec.<literal>`` with an assumed value (override with
  ``--constant NAME=VALUE``).
- ``duration_time`` (seconds) → ``interval``.
- an identifier naming a metric of the file (case-insensitive, as perf's metricgroup.c resolves it) is a
  metric reference; perf uses the referenced metric's value *before* its ScaleUnit, so a reference
  to a metric whose value was rescaled is divided back;
- ``ScaleUnit`` ``<scale><unit>``: displayed value = expression × scale → declared unit, value kept;
- ``MetricThreshold`` (compares unscaled values): the metric's own comparison becomes a ``threshold``
  clause (bound × scale); conjuncts that repeat an ancestor's threshold are carried by ``parent``;
  anything else is reported as not expressible;
- ``MetricGroup`` (``;``-separated) → ``groups``; a group ``<metric>_group`` (perf's convention for
  the TMA tree) → ``parent <metric>``;
- ``ArchStdEvent`` entries take the architecture-standard metric (jevents.py: fields of the entry
  override those of the standard one, looked up by lower-case name). The arm64 standard top-down
  metrics (``arch/arm64/sbsa.json``) are built in; ``--arch-std FILE`` adds others;
- ``source_count(ev)`` is the number of PMU instances aggregated into ``ev`` (1 for imported events;
  the block's instance count when importing against a generation, where ``x / source_count(x)`` is
  ``avg(x)`` and a bare instanced event is ``sum(x)``, perf aggregating uncore PMUs by summing);
- ``PerPkg`` (on a metric or an event definition): perf counts the event once per package (socket or
  die) and, system-wide, sums it over the packages. Its events are signals of a block of their own,
  ``<pmu>_package``, with an instance axis ``package`` sized by the capture (``from_data``: ``perf stat
  --per-socket`` gives one instance per socket, aggregated output one), read in formulas as ``sum(x)``;
  their perf names are kept as ``sources: {perf: …}`` like every event's;
- ``%`` (integer remainder) and ``strcmp_cpuid_str`` have no counterpart: those metrics are rejected.
"""

from __future__ import annotations

import re
from pathlib import Path

from perfonto.ontology.generation import Generation
from perfonto.ontology.loader import load_generation

from . import ir
from .catalog import Finding, SourceCatalog, SourceConstant, SourceMetric, Threshold
from .exprparse import ParseError, SBin, SCall, SId, SIf, SLit, SNeg, SNum, parse, perf_symbol
from .names import NameTable, ident, metric_name
from .perf_tags import tag as _tag, tagged_event
from .source_io import load_json
from .thresholds import ancestors, split
from .units import split_scale_unit

# arm64 architecture-standard top-down metrics: tools/perf/pmu-events/arch/arm64/sbsa.json at
# torvalds/linux 602bf18307981f3bfd9ebf19921791a4256d3fd1 (formulas and fields; descriptions ours).
ARM64_SBSA = {
    "frontend_bound": {
        "MetricName": "frontend_bound",
        "MetricExpr": "stall_slot_frontend / (#slots * cpu_cycles)",
        "MetricGroup": "Default;TopdownL1",
        "ScaleUnit": "100%",
        "BriefDescription": "Share of issue slots stalled by the frontend (top-down level 1)",
    },
    "bad_speculation": {
        "MetricName": "bad_speculation",
        "MetricExpr": "(1 - op_retired / op_spec) * (1 - stall_slot / (#slots * cpu_cycles))",
        "MetricGroup": "Default;TopdownL1",
        "ScaleUnit": "100%",
        "BriefDescription": "Share of issue slots spent on operations that did not retire (top-down level 1)",
    },
    "retiring": {
        "MetricName": "retiring",
        "MetricExpr": "(op_retired / op_spec) * (1 - stall_slot / (#slots * cpu_cycles))",
        "MetricGroup": "Default;TopdownL1",
        "ScaleUnit": "100%",
        "BriefDescription": "Share of issue slots that retired operations (top-down level 1)",
    },
    "backend_bound": {
        "MetricName": "backend_bound",
        "MetricExpr": "stall_slot_backend / (#slots * cpu_cycles)",
        "MetricGroup": "Default;TopdownL1",
        "ScaleUnit": "100%",
        "BriefDescription": "Share of issue slots stalled by the backend (top-down level 1)",
    },
}

LITERAL_DEFAULTS = {
    "slots": (
        5.0,
        "issue slots per cycle; perf reads the PMU's caps/slots. 5 as on Neoverse N2, which this file's formulas "
        "special-case",
    ),
    "smt_on": (1.0, "1 when SMT is on; perf reads it from sysfs"),
    "core_wide": (1.0, "1 when events count for the whole core"),
    "num_cpus": (8.0, "CPUs of the machine"),
    "num_cpus_online": (8.0, "online CPUs"),
    "num_cores": (8.0, "cores"),
    "num_dies": (1.0, "dies"),
    "num_packages": (1.0, "packages (sockets)"),
    "system_tsc_freq": (2.5e9, "TSC frequency in Hz"),
}

TRANSLATIONS = [
    "perf `/` by zero gives NaN; perfonto's `/` gives null: same meaning, kept as `/`",
    "perf `d_ratio(a, b)` is 0 when b is 0: written `a / b if b != 0 else 0`",
    "perf `a if c else b` takes b only when c is exactly 0: written `a if c != 0 else b` (a NaN condition takes a in "
    "perf, null in perfonto)",
    "perf `<`, `>` give 1/0 and `&`, `|`, `^` are logical: written as comparisons and `and`/`or`, `1 if … else 0` "
    "where used as numbers",
    "perf `#literal`s are machine values: dimensionless `spec.*` constants with assumed values (see the generated "
    "YAML)",
    "perf `duration_time` (seconds) is `interval`",
    "perf metric references use the referenced metric's unscaled value: a reference to a rescaled metric is divided "
    "back",
    "ScaleUnit `<scale><unit>`: the declared unit is the label's pint unit and the value stays expression × scale",
    "MetricThreshold compares unscaled values: the bound is multiplied by the scale; ancestor conjuncts are carried "
    "by `parent`",
    "events are counters with unit `event` and width 64 (the metrics file defines neither), unless the file defines "
    "them with perfonto's tag (its own export): then with their unit, scale, width, instances and kind",
    "a perf metric reads an event's raw count (perf reverses the event's ScaleUnit first): a defined event with a "
    "scale is read as its value / scale",
]


def _encoding(e: dict) -> str:
    """`` (EventCode 0x3c, UMask 0x2)``: a defined event's encoding for its signal's description, or ""."""
    parts = [f"{k} {e[k]}" for k in ("EventCode", "UMask", "Unit", "ConfigCode") if str(e.get(k) or "").strip()]
    return f" ({', '.join(parts)})" if parts else ""


def load_arch_std(path: str | Path) -> dict[str, dict]:
    """An architecture-standard JSON file (events or metrics) as ``{lower-case name: entry}``."""
    data = load_json(path, "architecture-standard file")
    out = {}
    for e in data if isinstance(data, list) else []:
        if isinstance(e, dict):
            for k in ("MetricName", "EventName"):
                if isinstance(e.get(k), str):
                    out[e[k].lower()] = e
    return out


def read(
    path: str | Path,
    generation: str,
    extends: str | None = None,
    constants: dict[str, float] | None = None,
    arch_std: list[str] | None = None,
) -> SourceCatalog:
    """Read a perf metrics JSON file into a ``SourceCatalog`` (see the module docstring)."""
    path = Path(path)
    data = load_json(path, "perf metrics file")
    if not isinstance(data, list):
        raise ValueError(f"{path}: a perf pmu-events file is a JSON list of objects")
    std = {k: dict(v) for k, v in ARM64_SBSA.items()}
    for extra in arch_std or []:
        std.update(load_arch_std(extra))
    parent_gen: Generation | None = None
    if extends:
        parent_gen, diags = load_generation(extends)
        if parent_gen is None:
            raise ValueError(f"no generation `{extends}`: " + "; ".join(d.message for d in diags))
    cat = SourceCatalog(
        "perf",
        str(path),
        generation,
        f"Imported from the Linux perf pmu-events metrics file {path.name}"
        + (f", against generation {extends}" if extends else "")
        + ".",
        extends=extends,
    )
    cat.translations = list(TRANSLATIONS)
    return _Reader(cat, data, std, parent_gen, constants or {}).run()


class _Reader:
    def __init__(self, cat: SourceCatalog, data: list, std: dict, gen: Generation | None, overrides: dict[str, float]):
        self.cat, self.data, self.std, self.gen, self.overrides = cat, data, std, gen, overrides
        self.entries: dict[str, dict] = {}  # metric key -> merged entry
        self.lower: dict[str, str] = {}  # lower-case name -> metric key
        self.const_metrics: dict[str, str] = {}  # lower-case name -> constant key
        self.event_names: dict[str, NameTable] = {}
        self.metric_names = NameTable()
        self.defined_events: dict[str, str] = {}
        self.event_defs: dict[str, tuple[dict, dict]] = {}  # lower-case name -> (entry, its [perfonto: …] tag)
        self.per_pkg = False  # the metric being read is PerPkg: its events count once per package

    def run(self) -> SourceCatalog:
        cat = self.cat
        duplicates: list[tuple[str, str, str]] = []  # rejected entries: named after the metrics kept
        for i, e in enumerate(self.data):
            if not isinstance(e, dict):
                cat.findings.append(Finding("malformed", "", f"entry {i} is not an object; skipped", "error"))
                continue
            if "EventName" in e and "MetricName" not in e:
                self._define_event(e)
                continue
            entry, origin = e, ""
            if "ArchStdEvent" in e and "MetricName" not in e:
                name = str(e["ArchStdEvent"])
                base = self.std.get(name.lower())
                origin = f"ArchStdEvent {name}"
                if base is None or "MetricName" not in base:
                    key = name.lower()
                    duplicates.append(
                        (
                            key,
                            f"ArchStdEvent `{name}`: the architecture-standard metric is not known (give it with "
                            "--arch-std)",
                            origin,
                        )
                    )
                    continue
                entry = {**base, **{k: v for k, v in e.items() if k != "ArchStdEvent"}}
            if "MetricName" not in entry:
                continue
            key = str(entry["MetricName"])
            origin = origin or f"MetricName {key}"
            if not key.strip():  # an empty name was imported as metric `x` without a word (a migrator's file)
                duplicates.append((f"#{i}", f"entry {i} has an empty MetricName", f"entry {i}"))
                continue
            if key.lower() in self.lower:  # named after the metrics kept, so that the kept one keeps its name
                duplicates.append((key + f"#{i}", f"duplicate metric name `{key}`", origin))
                continue
            if key.lower().startswith("spec.") and self._constant_metric(key, entry):
                continue
            self.entries[key] = {**entry, "_origin": origin}
            self.lower[key.lower()] = key
        for key, entry in self.entries.items():
            self._metric(key, entry)
        for args in duplicates:
            self._reject(*args)
        self._thresholds()
        self._note_unused_events()
        return cat

    def _define_event(self, e: dict) -> None:
        """An ``EventName`` entry: its description (with another tool's encoding, so that a collector can
        program it) and its perfonto tag (perfonto's own export)."""
        desc, tag = _tag(str(e.get("BriefDescription") or e.get("PublicDescription") or ""))
        if not tag:
            desc += _encoding(e)
        self.defined_events[str(e["EventName"]).lower()] = desc
        self.event_defs[str(e["EventName"]).lower()] = (e, tag)

    def _note_unused_events(self) -> None:
        """A warning naming the defined events no metric reads (a migrator's Zen 3 file: 21, dropped without
        a word)."""
        read = {k.split("/")[1] if k.count("/") >= 2 else k for k in self.cat.events}  # `pmu/event/` reads `event`
        unused = sorted(set(self.defined_events) - read)
        if unused:
            self.cat.findings.append(
                Finding(
                    "unused-events",
                    "",
                    f"{len(unused)} event definition(s) no metric reads are left out: {', '.join(unused[:8])}"
                    + (" …" if len(unused) > 8 else "")
                    + " (an event becomes a signal when a metric reads it; import the events' metrics too)",
                )
            )

    def _reject(self, key: str, why: str, origin: str) -> None:
        self.cat.metrics[key] = SourceMetric(
            key,
            self.metric_names.get(key, metric_name(key.split("#")[0].lower())),
            "",
            None,
            problem=why,
            origin=origin,
        )

    # -- constants -------------------------------------------------------------------------------
    def _constant_metric(self, key: str, entry: dict) -> bool:
        """perfonto's export writes spec constants as constant metrics `spec.*`: read them back as constants."""
        try:
            value = float(str(entry.get("MetricExpr", "")).strip())
        except ValueError:
            return False
        scale, label = split_scale_unit(str(entry.get("ScaleUnit", "") or "1"))
        name = ".".join(ident(p) for p in key.split(".")[1:])
        desc = str(entry.get("BriefDescription", ""))
        prov, source = "assumed", "perf metrics file (a constant metric)"
        m = re.match(r"^(.*)\[(measured|claimed|estimated|assumed): (.*)\]\s*$", desc, re.S)
        if m:
            desc, prov, source = m.group(1).strip(), m.group(2), m.group(3)
        desc, tag = _tag(desc)
        if name.startswith("clock.") and label and label.endswith("_cycle/s"):  # a clock domain's frequency
            self.cat.clocks[name[6:]] = (value * scale, prov, source)
        if self.gen is not None and f"spec.{name}" in self.gen.spec:
            c = self.gen.spec[f"spec.{name}"]
            if abs(c.value - value * scale) > 1e-9 * max(abs(c.value), 1e-300):
                self.cat.findings.append(
                    Finding(
                        "constant-mismatch",
                        key,
                        f"`{key}` is {value * scale:g} in the file but "
                        f"{c.value:g} in generation {self.gen.name}; the generation's value is used",
                    )
                )
            value, scale = c.value, 1.0
            label = c.unit_text
        self.cat.constants[key.lower()] = SourceConstant(
            key.lower(),
            name,
            value * scale,
            desc or key,
            source,
            prov,
            label or "1",
            scope=tag.get("scope", "system") if tag.get("scope") in ("instance", "chip", "system") else "system",
        )
        self.const_metrics[key.lower()] = key.lower()
        return True

    def _literal(self, lit: str) -> ir.Node:
        name = ident(lit)
        key = "#" + lit.lower()
        self.cat.assumed_constant(
            key,
            name,
            f"perf literal #{lit}",
            LITERAL_DEFAULTS.get(name, (1.0, "a perf literal this importer does not know; 1 assumed")),
            self.overrides,
            may_be_zero=name in ("smt_on", "core_wide") or name not in LITERAL_DEFAULTS,
        )
        return ir.Const(key)

    # -- events ------------------------------------------------------------------------------------
    def _event(self, raw: str, default_pmu: str) -> ir.Node:
        sym = perf_symbol(raw)
        low = sym.lower()
        if self.gen is not None:
            for cand in (sym, low):
                if cand in self.gen.signals:
                    s = self.gen.signals[cand]
                    self.cat.event(cand, s.block, cand.split(".", 1)[1], s.description)
                    node = ir.Event(cand)
                    node = ir.Rollup("sum", node) if s.axes else node
                    return node if s.scale == 1.0 else ir.Bin("/", node, ir.Num(s.scale))  # perf reads the raw count
                if cand in self.gen.spec:
                    c = self.gen.spec[cand]
                    self.cat.constants.setdefault(
                        cand,
                        SourceConstant(cand, cand[5:], c.value, c.description, c.source, c.provenance, c.unit_text),
                    )
                    return ir.Const(cand)
        if low in self.event_defs and self.event_defs[low][1]:  # perfonto's own export: the signal as it was
            return self._tagged_event(low)
        pmu, ev = default_pmu, sym
        m = re.match(r"^([^/]+)/([^/]*)/?(.*)$", sym)
        if m:
            pmu, ev = m.group(1), m.group(2) + ("_" + m.group(3) if m.group(3) else "")
        per_pkg = self.per_pkg or str(self.event_defs.get(low, ({}, {}))[0].get("PerPkg", "")).strip() == "1"
        block = ident(pmu) + ("_package" if per_pkg else "")  # PerPkg events: a block of their own, per package
        table = self.event_names.setdefault(block, NameTable())
        name = table.get(low, ident(ev))
        plain = low.split("/")[1] if low.count("/") >= 2 else low  # `cpu_core/inst_retired.any/`: its event
        defined = plain in self.defined_events
        desc = self.defined_events.get(plain) or f"perf event {sym} (not defined in {Path(self.cat.path).name})"
        event = self.cat.event(low, block, name, desc, defined)
        event.sources.setdefault("perf", sym)  # perf stat's column, kept as written
        if per_pkg and event.block == block:
            event.axes = {"package": "from_data"}  # as many packages as the capture has (--per-socket: S0, S1, …)
        elif per_pkg and not event.axes:
            self.cat.findings.append(
                Finding(
                    "per-package",
                    event.key,
                    f"`{sym}` is read by a PerPkg metric and by others that are not: kept as one count per chip",
                )
            )
        # perf sums a PerPkg event over the packages it was counted on (system-wide, aggregated)
        return ir.Rollup("sum", ir.Event(low)) if event.axes else ir.Event(low)

    def _tagged_event(self, low: str) -> ir.Node:
        entry, tag = self.event_defs[low]
        return tagged_event(self.cat, low, entry, tag, self.defined_events.get(low, ""))

    def _instances(self, key: str) -> int:
        if self.gen is not None and key in self.gen.signals:
            return self.gen.signals[key].instances
        ev = self.cat.events.get(key)
        if ev is not None and ev.axes:
            n = 1
            for size in ev.axes.values():
                n *= size if isinstance(size, int) else 1  # `from_data`: unknown until a capture is read
            return n
        return 1

    # -- formulas ----------------------------------------------------------------------------------
    def _metric(self, key: str, entry: dict) -> None:
        cat = self.cat
        name = self.metric_names.get(key, metric_name(key.lower()))
        formula = str(entry.get("MetricExpr", "")).strip()
        scale, label = split_scale_unit(str(entry["ScaleUnit"])) if entry.get("ScaleUnit") else (1.0, None)
        groups, parent = [], None
        for g in [x for x in str(entry.get("MetricGroup", "") or "").split(";") if x.strip()]:
            stem = g.strip().lower()
            if stem.endswith("_group") and stem[:-6] in self.lower and self.lower[stem[:-6]] != key:
                if parent is None:
                    parent = self.lower[stem[:-6]]
                else:
                    cat.findings.append(
                        Finding("second-parent", key, f"also in `{g}`: perfonto keeps one parent (`{parent}`)", "info")
                    )
                continue
            groups.append(g.strip())
        if entry.get("DefaultMetricgroupName"):
            groups.append(str(entry["DefaultMetricgroupName"]))
        m = SourceMetric(
            key,
            name,
            formula,
            None,
            unit_text=label,
            scale=scale,
            description=str(entry.get("BriefDescription") or entry.get("PublicDescription") or ""),
            groups=groups,
            parent=parent,
            origin=entry["_origin"],
        )
        cat.metrics[key] = m
        self.per_pkg = str(entry.get("PerPkg", "")).strip() == "1"
        if self.per_pkg:
            cat.findings.append(
                Finding(
                    "per-package",
                    key,
                    "PerPkg: perf counts its events once per package (socket or die): imported as signals with a "
                    "`package` instance axis sized by the capture (`from_data`: perf stat --per-socket gives one "
                    "instance per socket, -a one, `all`), summed over the packages as perf sums them",
                    "info",
                )
            )
        if not formula:
            m.problem = "no MetricExpr"
            return
        try:
            tree = parse(formula, "perf")
            m.expr = ir.as_number(self._expr(tree, str(entry.get("Unit") or "cpu")))
        except ParseError as exc:
            m.problem = f"syntax: {exc}"
        except ir.Unsupported as exc:
            m.problem = str(exc)
        finally:
            self.per_pkg = False

    def _expr(self, t, pmu: str) -> ir.Node:
        num = lambda x: ir.as_number(self._expr(x, pmu))  # noqa: E731
        cond = lambda x: ir.as_truth(self._expr(x, pmu))  # noqa: E731
        if isinstance(t, SNum):
            return ir.Num(t.value)
        if isinstance(t, SLit):
            return self._literal(t.name)
        if isinstance(t, SId):
            return self._name(t, pmu)
        if isinstance(t, SNeg):
            return ir.Neg(num(t.operand))
        if isinstance(t, SIf):
            return ir.If(num(t.then), cond(t.cond), num(t.other))
        if isinstance(t, SCall):
            return self._call(t, pmu, num)
        if isinstance(t, SBin):
            return self._bin(t, pmu, num, cond)
        raise ir.Unsupported(f"perf construct `{t}` is not supported")

    def _name(self, t: SId, pmu: str) -> ir.Node:
        """A name: the window length, a constant metric, another metric of the file, or else an event."""
        low = perf_symbol(t.name).lower()
        if low == "duration_time":
            return ir.Interval()
        if low in self.const_metrics:
            return ir.Const(self.const_metrics[low])
        if low in self.lower:
            return ir.Ref(self.lower[low])
        return self._event(t.name, pmu)

    def _bin(self, t: SBin, pmu: str, num, cond) -> ir.Node:
        """A binary operator: arithmetic, comparisons, and `&`, `|`, `^` over conditions (`%` unsupported)."""
        op = t.op
        if op == "%":
            raise ir.Unsupported("perf `%` (integer remainder) has no counterpart in perfonto's language")
        if op == "/" and isinstance(t.right, SCall) and t.right.fn == "source_count":
            return self._per_source(t, pmu, num)
        if op in "+-*/":
            a, b = num(t.left), num(t.right)
            if (
                op == "*"
                and isinstance(a, ir.Bin)
                and a.op == "/"
                and isinstance(a.right, ir.Num)
                and isinstance(b, ir.Num)
                and a.right.value == b.value
            ):
                return a.left  # (value / scale) * scale: perfonto's own export of a scaled event
            return ir.Bin(op, a, b)
        if op in ("<", ">"):
            return ir.Bin(op, num(t.left), num(t.right))
        if op == "&":
            return ir.Bin("and", cond(t.left), cond(t.right))
        if op == "|":
            return ir.Bin("or", cond(t.left), cond(t.right))
        if op == "^":
            a, b = cond(t.left), cond(t.right)
            return ir.Bin("and", ir.Bin("or", a, b), ir.Not(ir.Bin("and", a, b)))
        raise ir.Unsupported(f"perf construct `{t}` is not supported")

    def _call(self, t: SCall, pmu: str, num) -> ir.Node:
        fn, args = t.fn, t.args
        if fn in ("min", "max"):
            if len(args) != 2:
                raise ir.Unsupported(f"perf `{fn}` takes two arguments")
            return ir.Call(fn, (num(args[0]), num(args[1])))
        if fn == "d_ratio":
            if len(args) != 2:
                raise ir.Unsupported("perf `d_ratio` takes two arguments")
            return ir.SafeDiv(num(args[0]), num(args[1]))
        if fn == "source_count":
            node = self._expr(args[0], pmu)
            keys = ir.leaves(node, ir.Event)
            return ir.Num(float(self._instances(next(iter(keys))) if keys else 1))
        if fn == "has_event":
            sym = perf_symbol(args[0].name).lower() if isinstance(args[0], SId) else "event"
            key = "has_event:" + sym
            self.cat.constants.setdefault(
                key,
                SourceConstant(
                    key,
                    "has_" + ident(sym),
                    1.0,
                    f"perf has_event({sym}): 1 when the PMU has the event",
                    "depends on the machine; 1 assumed",
                    may_be_zero=True,
                ),
            )
            return ir.Const(key)
        raise ir.Unsupported(f"perf `{fn}()` has no counterpart in perfonto's language (it depends on the running CPU)")

    def _per_source(self, t: SBin, pmu: str, num) -> ir.Node:
        """``x / source_count(x)``: the mean over the PMU instances summed into ``x``."""
        left = num(t.left)
        count = self._call(t.right, pmu, num)
        inner = _unsum(left)
        keys = ir.leaves(inner, ir.Event) if inner is not None else set()
        by_data = any(n == "from_data" for k in keys if k in self.cat.events for n in self.cat.events[k].axes.values())
        if inner is not None and (count.value > 1 or by_data):  # by_data: as many packages as the capture has
            blocks = {self.cat.events[k].block for k in keys}
            if len(blocks) == 1:
                return ir.Rollup("avg", inner)
        return ir.Bin("/", left, count)

    # -- thresholds ---------------------------------------------------------------------------------
    def _thresholds(self) -> None:
        def resolve(name: str) -> str | None:
            return self.lower.get(perf_symbol(name).lower())

        metrics = self.cat.metrics
        for key in sorted(self.entries, key=lambda k: len(ancestors(metrics, k))):  # ancestors first
            m = metrics[key]
            text = str(self.entries[key].get("MetricThreshold", "") or "").strip()
            if not text or m.expr is None:
                continue
            try:
                tree = parse(text, "perf")
            except ParseError as exc:
                m.threshold_problem = f"MetricThreshold syntax: {exc}"
                continue
            own, implied, other = split(tree, key, metrics, resolve)
            if own is None or other:
                m.threshold_problem = (
                    f"MetricThreshold `{text}` is not `<metric> <op> <number>` (and ancestors'): "
                    f"perfonto's threshold clause compares the metric itself with one bound"
                )
                self.cat.findings.append(Finding("threshold-not-translated", key, m.threshold_problem, "warning"))
                continue
            m.threshold = Threshold(own[1], own[2], f"perf MetricThreshold: {text}", implied)


def _unsum(n: ir.Node) -> ir.Node | None:
    """``sum(a) + sum(b)`` → ``a + b`` (linear combinations of summed events), else None."""
    if isinstance(n, ir.Rollup) and n.fn == "sum":
        return n.arg
    if isinstance(n, ir.Bin) and n.op in "+-":
        a, b = _unsum(n.left), _unsum(n.right)
        return None if a is None or b is None else ir.Bin(n.op, a, b)
    if isinstance(n, ir.Bin) and n.op == "*" and isinstance(n.left, ir.Num):
        b = _unsum(n.right)
        return None if b is None else ir.Bin("*", n.left, b)
    return None
