"""Import Intel perfmon native metric files (``<PLATFORM>/metrics/<platform>_metrics.json``).

The format, as intel/perfmon's README describes it: each metric has a ``Formula`` over short aliases
bound by its ``Events`` (``{"Name", "Alias"}``) and ``Constants`` lists, a ``UnitOfMeasure``, a
``Level`` and ``ParentCategory`` (the TMA tree; roots have level 1), a ``Threshold`` whose formula
is over the aliases of ``ThresholdMetrics`` (metrics by ``LegacyName``; ``&`` and, ``|`` or; the
parent's own condition repeated for "the parent must pass"), ``MetricGroup`` (``;``-separated) and
``ThresholdIssues`` (``$issueXX`` tags that relate nodes across the tree).

Translation:
- percent: Intel formulas compute percent values (``100 * (...)``) and thresholds compare percent
  values (``a > 15``). The metric is declared ``[percent]`` and the leading ``100 *`` is removed, so
  perfonto holds the fraction and shows the same number in percent; a formula without that factor
  is divided by 100 explicitly (and flagged). Threshold bounds stay the same numbers, in percent.
- the formula language is C-like (``a if c else b``, ``min``/``max``); a condition is true when non-zero
  (``smt_on`` → ``spec.hyperthreading_on != 0``); division by zero is not defined by the README and is
  read as IEEE NaN (as perf, which runs these formulas after Intel's ``create_perf_json.py``), i.e. null;
- constants are machine values: ``spec`` constants with assumed values (``SYSTEM_TSC_FREQ`` in Hz, the others
  dimensionless), except
  ``DURATIONTIMEINMILLISECONDS`` and ``DURATIONTIMEINSECONDS``, which are the window's duration as a
  number (``interval / 1 ms``, ``interval / 1 s``), and ``SYSTEM_TSC_FREQ`` where the metric's
  ``BaseFormula`` reads it as ``tsc`` — the TSC's ticks in the window (Linux perf's version of the same
  metrics reads ``msr@tsc@``, a count over the interval), counted as events as ``CPU_CLK_UNHALTED.REF_TSC``
  counts them: ``spec.system_tsc_freq × interval × 1 event``, so that ``REF_TSC / ticks`` is a number of
  CPUs; elsewhere (EMON-style ``a / b * c / 1e9`` frequencies) it is the frequency as a number of Hz
  (``spec.system_tsc_freq / 1 Hz``: the formulas convert units by literal factors, as with durations);
- ``UnitOfMeasure`` ``percent`` → percent, ``per instruction`` → ``event/event``; empty → the unit the
  description ends with where it is a quantity (``[GB / sec]``, ``[GHz]``, ``in Watts``, ``(in core
  cycles)``: declared as the source states it, ``interop.units.as_given``), else no unit;
- the threshold's own comparison → ``threshold``; conjuncts that repeat an ancestor's condition are
  carried by ``parent``; disjunctions and conditions on other metrics are reported, not translated;
- TMA tree nodes get the group ``topdown`` (level-1 nodes are perfonto's top-down level 1); ``$issue``
  tags become groups ``issue_<tag>``.
"""

from __future__ import annotations

import re
from pathlib import Path

from perfonto.ontology.units import parse_unit, registry_for

from . import ir
from .catalog import Finding, SourceCatalog, SourceMetric, Threshold
from .exprparse import ParseError, SBin, SCall, SId, SIf, SNeg, SNum, parse
from .names import NameTable, ident, metric_name
from .perf_topdown import mark_level1
from .source_io import load_json
from .thresholds import comparison, split
from .units import as_given, map_label

CONSTANT_DEFAULTS = {
    "HYPERTHREADING_ON": (1.0, "1 when Hyper-Threading is on (the collecting tool supplies it)"),
    "THREADS_PER_CORE": (2.0, "hardware threads per core"),
    "SYSTEM_TSC_FREQ": (2.5e9, "TSC frequency in Hz, as the collecting tool supplies it (read × the window)"),
    "SOCKET_COUNT": (1.0, "sockets"),
    "CORES_PER_SOCKET": (8.0, "cores per socket"),
    "CHAS_PER_SOCKET": (8.0, "CHA units per socket"),
}
CONSTANT_UNITS = {"SYSTEM_TSC_FREQ": "Hz"}  # the others are counts and flags
DURATIONS = {"DURATIONTIMEINMILLISECONDS": "ms", "DURATIONTIMEINSECONDS": "s"}
#: A unit a description states at its end (``… [GB / sec]``, ``… in Watts``, ``… (in core cycles)``).
_DESCRIBED_UNIT = re.compile(r"(?:\[([^\[\]]+)\]|\(?\bin ([A-Za-z][A-Za-z ]{0,20}?)\)?)\s*\.?\s*$")

TRANSLATIONS = [
    "Intel formulas give percent values: declared [percent], the leading `100 *` removed (perfonto stores the "
    "fraction, shows the same number)",
    "Intel thresholds compare percent values: bounds are kept as numbers in the metric's unit (percent)",
    "Intel `a if c else b` takes b when c is 0: written `a if c != 0 else b`",
    "Intel division by zero (undefined in the README) is read as NaN, i.e. perfonto's null",
    "DURATIONTIMEINMILLISECONDS is the window duration as a number of ms: `interval / 1 ms`",
    "SYSTEM_TSC_FREQ (Hz) is the TSC's ticks in the window where the BaseFormula reads `tsc` (perf's msr@tsc@), "
    "counted as events as CPU_CLK_UNHALTED.REF_TSC counts them: `spec.system_tsc_freq * interval * 1 [event]`; "
    "elsewhere the frequency as a number of Hz (`spec.system_tsc_freq / 1 [Hz]`, as durations are numbers)",
    "other Intel constants are machine values: dimensionless `spec.*` constants with assumed values",
    "a metric without UnitOfMeasure takes the unit its description ends with (`[GB / sec]`, `in Watts`, "
    "`(in core cycles)`), where that is a quantity: declared in it as the source states it (durations are "
    "numbers in Intel formulas and events are counts, so the formula cannot give it)",
    "the TMA tree (Level, ParentCategory) is `parent`; a threshold with its ancestors' conjuncts is written "
    "`threshold … when parent` (crossed only where its parents' are crossed too)",
    "events are counters with unit `event` and width 64 (the metrics file gives neither)",
]


def read(path: str | Path, generation: str, constants: dict[str, float] | None = None) -> SourceCatalog:
    """Read an Intel perfmon metrics JSON file into a ``SourceCatalog``."""
    path = Path(path)
    data = load_json(path, "Intel perfmon metrics file")
    metrics = data.get("Metrics") if isinstance(data, dict) else data
    if not isinstance(metrics, list):
        raise ValueError(f"{path}: an Intel perfmon metrics file has a `Metrics` list")
    keys = {k for e in metrics if isinstance(e, dict) for k in e}
    if "MetricExpr" in keys and "Formula" not in keys:
        raise ValueError(
            f"{path}: a Linux perf pmu-events file (its metrics have perf's `MetricExpr`, not Intel's `Formula`): "
            "import it with `perfonto import perf`"
        )
    info = data.get("Header", {}).get("Info", "") if isinstance(data, dict) else ""
    cat = SourceCatalog(
        "intel",
        str(path),
        generation,
        f"Imported from the Intel perfmon metrics file {path.name}" + (f" ({info})" if info else "") + ".",
    )
    cat.translations = list(TRANSLATIONS)
    return _Reader(cat, metrics, constants or {}).run()


class _Reader:
    def __init__(self, cat: SourceCatalog, metrics: list, overrides: dict[str, float]):
        self.cat, self.raw, self.overrides = cat, metrics, overrides
        self.names = NameTable()
        self.events: dict[str, NameTable] = {}
        self.by_legacy: dict[str, str] = {}
        self.by_name: dict[str, str] = {}
        self.entries: dict[str, dict] = {}  # MetricName in lower case -> its entry
        self.registry = registry_for((cat.clock,))  # to read units the descriptions state

    def run(self) -> SourceCatalog:
        entries = []
        for i, e in enumerate(self.raw):
            if not isinstance(e, dict) or not isinstance(e.get("MetricName"), str):
                self.cat.findings.append(
                    Finding("malformed", "", f"metric entry {i} has no MetricName; skipped", "error")
                )
                continue
            key = e["MetricName"]
            if key in self.by_name:
                self.cat.metrics[key + f"#{i}"] = SourceMetric(
                    key + f"#{i}",
                    self.names.get(key + f"#{i}", metric_name(key.lower())),
                    str(e.get("Formula", "")),
                    None,
                    problem=f"duplicate metric `{key}`",
                )
                continue
            self.by_name[key] = key
            if e.get("LegacyName"):
                self.by_legacy[str(e["LegacyName"])] = key
            entries.append(e)
        self.entries = {str(e["MetricName"]).lower(): e for e in entries}
        children = {str(e.get("ParentCategory")) for e in entries if e.get("ParentCategory")}
        for e in entries:
            self._metric(e, children)
        for e in sorted(entries, key=_level):
            self._threshold(e)
        self._note_no_perf_name()
        mark_level1(self.cat)  # Retiring is useful work; a partial level 1 is not summed (interop.perf_topdown)
        return self.cat

    def _note_no_perf_name(self) -> None:
        """A warning naming the events that get no perf name (a modifier: ``:c1``, ``:i1:c1``, ``:USER`` …,
        which perf spells ``…/cmask=1/``, ``:u``): a perf stat capture cannot feed them, nor the metrics that
        read them, directly or through another metric (a migrator lost Memory_Bound and Core_Bound so)."""
        bare = {k for k, ev in self.cat.events.items() if "perf" not in ev.sources}
        if not bare:
            return
        lost: set[str] = set()
        grew = True
        while grew:
            grew = False
            for m in self.cat.metrics.values():
                if m.expr is not None and m.key not in lost:
                    if ir.leaves(m.expr, ir.Event) & bare or ir.leaves(m.expr, ir.Ref) & lost:
                        lost.add(m.key)
                        grew = True
        names = sorted(self.cat.metrics[k].name for k in lost)
        self.cat.findings.append(
            Finding(
                "no-perf-name",
                "",
                f"{len(bare)} event(s) with a modifier get no perf name (this importer does not derive perf's "
                f"`event/cmask=1/`, `:u`, `:k` spellings): {', '.join(sorted(bare))}; a perf stat capture cannot feed "
                f"them, nor the {len(names)} metric(s) that read them: {', '.join(names[:12])}"
                + (" …" if len(names) > 12 else "")
                + " (a generation that extends the imported one can give those signals `sources: {perf: …}`)",
            )
        )

    def _metric(self, e: dict, children: set[str]) -> None:
        """One metric entry into the catalog: its groups, its tree parent (checked), its formula translated."""
        key = e["MetricName"]
        formula = str(e.get("Formula", "")).strip()
        unit = str(e.get("UnitOfMeasure", "") or "").strip() or self._described_unit(e)
        parent = e.get("ParentCategory")
        m = SourceMetric(
            key,
            self.names.get(key, metric_name(key.lower())),
            formula,
            None,
            unit_text=unit,
            scale=1.0,
            description=str(e.get("BriefDescription", "") or ""),
            groups=_groups(e, key, children),
            parent=str(parent) if parent else None,
            origin=f"MetricName {key} (level {e.get('Level', '?')})",
        )
        self.cat.metrics[key] = m
        if parent and parent not in self.by_name:
            self.cat.findings.append(
                Finding("unknown-parent", key, f"ParentCategory `{parent}` is not a metric of the file")
            )
            m.parent = None
        aliases = self._aliases(e)
        if not formula:
            m.problem = "no Formula"
            return
        try:
            m.expr = ir.as_number(self._expr(parse(formula, "intel"), aliases))
        except ParseError as exc:
            m.problem = f"syntax: {exc}"
        except ir.Unsupported as exc:
            m.problem = str(exc)

    def _described_unit(self, e: dict) -> str | None:
        """The unit a metric's description ends with (``[GB / sec]``, ``in Watts``), where it names a
        quantity other than a count or a share (``Average CPU Utilization (percentage)`` is a fraction); else
        None."""
        m = _DESCRIBED_UNIT.search(str(e.get("BriefDescription", "") or ""))
        text = m and (m.group(1) or m.group(2) or "").strip()
        if not text:
            return None
        reg = self.registry
        label, _ = map_label(reg, text, self.cat.clock)
        if label is None or as_given(reg, reg.event, parse_unit(reg, label)) is None:
            return None
        return text

    def _aliases(self, e: dict) -> dict[str, ir.Node]:
        """The formula's aliases: each listed event and constant (registered in the catalog) by its alias."""
        aliases: dict[str, ir.Node] = {}
        for ev in e.get("Events") or []:
            if isinstance(ev, dict) and ev.get("Alias") and ev.get("Name"):
                aliases[str(ev["Alias"])] = self._event(str(ev["Name"]))
        ticks = self._reads_tsc_ticks(e, set())
        for c in e.get("Constants") or []:
            if isinstance(c, dict) and c.get("Alias") and c.get("Name"):
                aliases[str(c["Alias"])] = self._constant(str(c["Name"]), ticks)
        return aliases

    def _reads_tsc_ticks(self, e: dict, seen: set[str]) -> bool:
        """Whether the metric's ``BaseFormula`` reads the TSC as ticks: it names ``tsc``, or a metric that
        does (``tma_info_system_cpus_utilized / num_cpus``: its Formula inlines that metric's TSC)."""
        base = str(e.get("BaseFormula") or "")
        if re.search(r"(?<![\w.])tsc(?![\w.])", base, re.IGNORECASE):
            return True
        for token in re.findall(r"(?<![\w.])tma_(\w+)", base.lower()):
            ref = self.entries.get(token)
            if ref is not None and token not in seen and self._reads_tsc_ticks(ref, seen | {token}):
                return True
        return False

    def _event(self, name: str) -> ir.Node:
        key = name.upper()
        block = "uncore" if key.startswith("UNC_") else "cpu"
        table = self.events.setdefault(block, NameTable())
        ev = self.cat.event(key, block, table.get(key, ident(name)), f"Intel event {name}")
        if re.fullmatch(r"[A-Za-z][A-Za-z0-9_.]*", name):  # perf's pmu-events alias: the name in lower case
            ev.sources.setdefault("perf", name.lower())
        return ir.Event(key)

    def _constant(self, name: str, tsc_ticks: bool = False) -> ir.Node:
        """A constant's node: a duration as a number, ``SYSTEM_TSC_FREQ`` as the window's TSC ticks where
        the metric's ``BaseFormula`` reads ``tsc`` (``tsc_ticks``) else in Hz, any other as a spec constant."""
        if name.upper() in DURATIONS:
            return ir.Bin("/", ir.Interval(), ir.Num(1.0, DURATIONS[name.upper()]))
        c = self.cat.assumed_constant(
            name,
            ident(name),
            f"Intel constant {name}",
            CONSTANT_DEFAULTS.get(name.upper(), (1.0, "an Intel constant this importer does not know; 1 assumed")),
            self.overrides,
            may_be_zero=name.upper() == "HYPERTHREADING_ON" or name.upper() not in CONSTANT_DEFAULTS,
        )
        c.unit = CONSTANT_UNITS.get(name.upper(), c.unit)
        if name.upper() == "SYSTEM_TSC_FREQ" and tsc_ticks:  # ticks in the window: CPUs_Utilized = REF_TSC / it
            # counted as events, as CPU_CLK_UNHALTED.REF_TSC counts them: REF_TSC / ticks is a number of CPUs
            return ir.Bin("*", ir.Bin("*", ir.Const(name), ir.Interval()), ir.Num(1.0, "event"))
        if c.unit != "1":  # a number of its unit, as Intel formulas read durations (`a / b * c / 1e9` GHz)
            return ir.Bin("/", ir.Const(name), ir.Num(1.0, c.unit))
        return ir.Const(name)

    def _expr(self, t, aliases: dict[str, ir.Node]) -> ir.Node:
        num = lambda x: ir.as_number(self._expr(x, aliases))  # noqa: E731
        cond = lambda x: ir.as_truth(self._expr(x, aliases))  # noqa: E731
        if isinstance(t, SNum):
            return ir.Num(t.value)
        if isinstance(t, SId):
            if t.name not in aliases:
                raise ir.Unsupported(f"alias `{t.name}` is bound neither in Events nor in Constants")
            return aliases[t.name]
        if isinstance(t, SNeg):
            return ir.Neg(num(t.operand))
        if isinstance(t, SIf):
            return ir.If(num(t.then), cond(t.cond), num(t.other))
        if isinstance(t, SCall) and t.fn in ("min", "max") and len(t.args) == 2:
            return ir.Call(t.fn, (num(t.args[0]), num(t.args[1])))
        if isinstance(t, SCall) and t.fn == "not":
            return ir.Not(cond(t.args[0]))
        if isinstance(t, SBin):
            if t.op in ("+", "-", "*", "/"):
                return ir.Bin(t.op, num(t.left), num(t.right))
            if t.op in ir.CMP_OPS:
                return ir.Bin(t.op, num(t.left), num(t.right))
            if t.op in ("&", "and"):
                return ir.Bin("and", cond(t.left), cond(t.right))
            if t.op in ("|", "or"):
                return ir.Bin("or", cond(t.left), cond(t.right))
        raise ir.Unsupported(f"Intel formula construct `{t}` is not supported")

    # -- thresholds ---------------------------------------------------------------------------------
    def _threshold(self, e: dict) -> None:
        key = e["MetricName"]
        m = self.cat.metrics[key]
        thr = e.get("Threshold") or {}
        text = str(thr.get("Formula", "") or "").strip()
        if not text or m.expr is None:
            return
        alias = {
            str(a.get("Alias")): self.by_legacy.get(str(a.get("Value")))
            for a in thr.get("ThresholdMetrics") or []
            if isinstance(a, dict)
        }
        try:
            tree = parse(text, "intel")
        except ParseError as exc:
            m.threshold_problem = f"Threshold syntax: {exc}"
            return
        own, implied, other = split(tree, key, self.cat.metrics, alias.get)
        issues = str(thr.get("ThresholdIssues", "") or "").strip()
        msg = f"Intel threshold: {thr.get('BaseFormula') or text}" + (f" ({issues})" if issues else "")
        if own is None or other:
            m.threshold_problem = (
                f"Threshold `{text}` is not the metric's own comparison (and its ancestors'): "
                f"perfonto's threshold clause compares the metric itself with one bound"
            )
            self.cat.findings.append(Finding("threshold-not-translated", key, m.threshold_problem, "warning"))
            for c in other:
                cmp = comparison(c, alias.get)
                if (
                    cmp
                    and cmp[0] in self.cat.metrics
                    and (self.cat.metrics[cmp[0]].unit_text or "") == "percent"
                    and 0 < abs(cmp[2]) < 1
                ):
                    self.cat.findings.append(
                        Finding(
                            "percent-vs-fraction",
                            key,
                            f"threshold compares percent metric `{cmp[0]}` with {cmp[2]:g}, a fraction",
                        )
                    )
            return
        m.threshold = Threshold(own[1], own[2], msg, implied)


def _groups(e: dict, key: str, children: set[str]) -> list[str]:
    """A metric's groups: its MetricGroup list, `topdown` when it is in the tree (has a parent or
    children), and `issue_<name>` for each issue its threshold raises."""
    groups = [g for g in str(e.get("MetricGroup", "") or "").split(";") if g.strip()]
    if bool(e.get("ParentCategory")) or key in children:
        groups.append("topdown")
    issues = str((e.get("Threshold") or {}).get("ThresholdIssues", "") or "")
    groups += [f"issue_{t}" for t in re.findall(r"\$issue(\w+)", issues)]
    return groups


def _level(entry: dict) -> float:
    """A metric's TMA ``Level`` for ordering (ancestors first); anything that is not a small number
    sorts last instead of failing the import."""
    try:
        v = float(entry.get("Level") or 1)
    except (TypeError, ValueError):
        return float("inf")
    return v if v == v else float("inf")
