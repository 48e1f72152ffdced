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
  clause (bound × scale); conjuncts that repeat an ancestor's threshold are carried by ``parent`` and
  the clause is written ``when parent``;
  anything else is reported as not expressible;
- ``MetricGroup`` (``;``-separated) → ``groups``; a group ``<metric>_group`` (perf's convention for
  the TMA tree) → ``parent <metric>``; a metric of a perf top-down level (``TopdownL1``, ``tma_L2_group``
  …) that is a share (``ScaleUnit`` ``100%``) also gets group ``topdown``, so that the analysis reads
  perf's TMA tree as Intel's; of its level 1, the retiring node gets group ``useful`` (useful work, not
  a bottleneck) and, where the file gives only some of the four categories, each node ``topdown_partial``
  (its sum is not checked): ``interop.perf_topdown``;
- ``ArchStdEvent`` entries take the architecture-standard metric (jevents.py: fields of the entry
  override those of the standard one, looked up by lower-case name). The arm64 standard top-down
  metrics (``arch/arm64/sbsa.json``) are built in; ``--arch-std FILE`` adds others;
- ``source_count(ev)`` is the number of PMU instances aggregated into ``ev``: the block's instance count
  for a generation's signal or perfonto's own tagged event (``x / source_count(x)`` is then ``avg(x)``
  and a bare instanced event is ``sum(x)``, perf aggregating uncore PMUs by summing); a plain perf
  file's event has no instance count (it depends on the machine and on ``perf stat -a``), so its
  metric is rejected with that reason (``x / source_count(x)`` over a PerPkg event is ``avg(x)``);
- ``PerPkg`` (on a metric or an event definition): perf counts the event once per package (socket or
  die) and, system-wide, sums it over the packages. Its events are signals of a block of their own,
  ``<pmu>_package``, with an instance axis ``package`` sized by the capture (``from_data``: ``perf stat
  --per-socket`` gives one instance per socket, aggregated output one), read in formulas as ``sum(x)``;
  their perf names are kept as ``sources: {perf: …}`` like every event's;
- ``%`` (integer remainder) and ``strcmp_cpuid_str`` have no counterpart: those metrics are rejected.

The expression language is translated in ``interop.perf_formula``; the built-in tables (arm64 standard
metrics, assumed ``#literal`` values, the report's translation notes) are in ``interop.perf_tables``.
"""

from __future__ import annotations

import re
from pathlib import Path

from perfonto.ontology.generation import Generation
from perfonto.ontology.loader import load_generation

from . import ir
from .catalog import GIVEN, Finding, SourceCatalog, SourceConstant, SourceMetric
from .exprparse import ParseError, parse, perf_symbol
from .names import NameTable, ident, metric_name
from .perf_formula import Formulas
from .perf_tables import ARM64_SBSA, TRANSLATIONS, encoding, load_arch_std
from .perf_tags import tag as _tag, tagged_event
from .perf_topdown import mark_level1
from .source_io import load_json
from .thresholds import perf_thresholds
from .units import split_scale_unit

TMA_LEVEL = re.compile(r"topdownl\d+|tma_l\d+_group")  # perf's groups of a top-down (TMA) level


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


class _Reader(Formulas):
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
        for m in cat.metrics.values():  # perf's TMA levels (TopdownL1, tma_L2_group …): shares of perfonto's tree
            if (
                any(TMA_LEVEL.fullmatch(g.lower()) for g in m.groups)
                and m.unit_text == "%"
                and "topdown" not in m.groups
            ):
                m.groups.append("topdown")
        mark_level1(cat)  # retiring is useful work; a partial level 1 is not summed (interop.perf_topdown)
        for args in duplicates:
            self._reject(*args)
        perf_thresholds(self.cat, self.entries, self.lower)
        self._note_unused_events()
        return cat

    def _define_event(self, e: dict) -> None:
        """An ``EventName`` entry: its description (with another tool's encoding, so that a collector can
        program it) and its perfonto tag (perfonto's own export)."""
        desc, tag = _tag(str(e.get("BriefDescription") or e.get("PublicDescription") or ""))
        if not tag:
            desc += encoding(e)
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
        given = name in self.overrides  # the command line's value, in the unit the constant is written in
        if given:
            value, scale, prov, source = self.overrides[name], 1.0, "claimed", GIVEN
        if name.startswith("clock.") and label and label.endswith("_cycle/s"):  # a clock domain's frequency
            self.cat.clocks[name[6:]] = (value * scale, prov, source)
        if self.gen is not None and f"spec.{name}" in self.gen.spec:
            c = self.gen.spec[f"spec.{name}"]
            if not given and abs(c.value - value * scale) > 1e-9 * max(abs(c.value), 1e-300):
                self.cat.findings.append(
                    Finding(
                        "constant-mismatch",
                        key,
                        f"`{key}` is {value * scale:g} in the file but "
                        f"{c.value:g} in generation {self.gen.name}; the generation's value is used",
                    )
                )
            # the generation's value and unit; a given value (in that unit) is written over the generation's
            value, scale, label = (self.overrides[name] if given else c.value), 1.0, c.unit_text
            tag = {"scope": c.scope.value}
        self.cat.constants[key.lower()] = SourceConstant(
            key.lower(),
            name,
            value * scale,
            desc or key,
            source,
            prov,
            label or "1",
            scope=tag.get("scope", "system") if tag.get("scope") in ("instance", "chip", "system") else "system",
            given=given,
        )
        self.const_metrics[key.lower()] = key.lower()
        return True

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
                    given = cand[5:] in self.overrides  # in the generation's unit, written over its value
                    self.cat.constants.setdefault(
                        cand,
                        SourceConstant(
                            cand,
                            cand[5:],
                            self.overrides[cand[5:]] if given else c.value,
                            c.description,
                            GIVEN if given else c.source,
                            "claimed" if given else c.provenance,
                            c.unit_text,
                            scope=c.scope.value,
                            given=given,
                        ),
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
        if "?" in sym:  # perf's runtime parameter (`hv_24x7@PM_PB_CYC\,chip\=?@`): one event per value at run time
            self.cat.findings.append(
                Finding(
                    "runtime-parameter",
                    event.key,
                    f"`{sym}` has perf's runtime parameter `?`, which perf expands to one event per value (chip=0, "
                    "chip=1 …): imported as one event named without it, which such per-value columns do not feed",
                )
            )
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

    def _instances(self, key: str) -> int | None:
        """The instances of event ``key`` (1 without an instance axis), or None when the file does not say:
        an event of a plain perf file, or an axis sized by the capture (``from_data``)."""
        if self.gen is not None and key in self.gen.signals:
            return self.gen.signals[key].instances
        ev = self.cat.events.get(key)
        if ev is None or not (ev.axes or key in self.event_defs and self.event_defs[key][1]):
            return None  # neither a generation's signal nor perfonto's own tagged event
        n = 1
        for size in ev.axes.values():
            if not isinstance(size, int):  # `from_data`: unknown until a capture is read
                return None
            n *= size
        return n

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
