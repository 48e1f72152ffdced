"""The import report: what was imported, with or without a unit, what was rejected and why, and the
lint findings — as text for stderr or as one JSON document."""

from __future__ import annotations

from dataclasses import dataclass, field

from perfonto.ontology.records import attributes

from .build import BuiltGeneration
from .catalog import Finding, SourceCatalog

PASS_RATIO = 0.95


@dataclass
class ImportReport:
    format: str
    source: str
    generations: list[BuiltGeneration] = field(default_factory=list)
    catalogs: list[SourceCatalog] = field(default_factory=list)
    error: str = ""
    unused_constants: list[str] = field(default_factory=list)  # --constant names the file has no constant of

    # -- counts (weighted: a rocprofiler counter defined for 4 architectures counts 4 times) --------
    def _outcomes(self):
        for g in self.generations:
            for o in g.outcomes.values():
                yield g, o

    @property
    def total(self) -> int:
        return sum(o.weight for _, o in self._outcomes())

    @property
    def imported(self) -> int:
        return sum(o.weight for _, o in self._outcomes() if o.status != "rejected")

    @property
    def with_unit(self) -> int:
        return sum(o.weight for _, o in self._outcomes() if o.status == "with_unit")

    @property
    def without_unit(self) -> int:
        return sum(o.weight for _, o in self._outcomes() if o.status == "without_unit")

    @property
    def ratio(self) -> float:
        return self.imported / self.total if self.total else 0.0

    @property
    def ok(self) -> bool:
        """The file was read and at least 95 % of its metrics compile."""
        return not self.error and self.total > 0 and self.ratio >= PASS_RATIO

    def renamed(self) -> list[tuple[str, str, str]]:
        """(source name, perfonto name, why) for each metric whose name had to change beyond case and
        separators (CamelCase words split included): characters a name cannot hold (``héllo wörld``,
        ``../x``, ``..``), an empty name, or a suffix that keeps it apart from another (``ok1_3``,
        rocprof's ``FetchSize`` beside ``FETCH_SIZE``) — a migrator found these in the JSON only."""
        import re

        from .names import metric_name

        out = []
        for g in self.generations:
            for src, name in g.names.items():
                o = g.outcomes.get(src)
                if o is not None and o.status == "rejected":  # listed with the rejected, under its reason
                    continue
                key = src.split("#")[0]
                plain = re.fullmatch(r"[A-Za-z0-9_. -]*[A-Za-z0-9][A-Za-z0-9_. -]*", key) is not None
                if key and plain and name in (metric_name(key.lower()), metric_name(key, camel=True)):
                    continue  # case and separators only (`MfmaFlops` → mfma_flops)
                why = (
                    " (an empty name)"
                    if not key
                    else " (to keep it apart from another metric of that name)"
                    if plain
                    else " (characters a metric name cannot hold)"
                )
                out.append((key, name, why))
        return out

    def from_library(self) -> list[dict]:
        """The metrics left out of the written file because the shipped metric library, which commands
        compile with a folder extending a shipped generation, defines them with the same values."""
        return [
            {"metric": o.key, "name": o.name, "generation": g.generation}
            for g, o in self._outcomes()
            if o.library and o.status != "rejected"
        ]

    def rejected(self) -> list[dict]:
        return [
            {"metric": o.key, "name": o.name, "generation": g.generation, "definitions": o.weight, "reason": o.reason}
            for g, o in self._outcomes()
            if o.status == "rejected"
        ]

    def units_not_applied(self) -> list[dict]:
        return [
            {"metric": o.key, "generation": g.generation, "note": o.unit_note}
            for g, o in self._outcomes()
            if o.unit_note and o.status != "rejected"
        ]

    def findings(self) -> list[tuple[str, Finding]]:
        seen, out = set(), []
        for g in self.generations:
            for f in g.findings:
                k = (f.code, f.metric, f.message)
                if k not in seen:
                    seen.add(k)
                    out.append((g.generation, f))
        return out

    def thresholds_not_translated(self) -> list[dict]:
        return [
            {"metric": m.key, "generation": c.generation, "reason": m.threshold_problem}
            for c in self.catalogs
            for m in c.metrics.values()
            if m.threshold_problem
        ]

    def constants(self, given: bool) -> list[dict]:
        """The machine constants that decide the numbers but that the file does not give: those given on the
        command line (``given``), or else the importer's assumed values (override with ``--constant``)."""
        rows: dict[tuple, dict] = {}
        for cat in self.catalogs:
            for c in cat.constants.values():
                if (c.given if given else c.importer_default and not c.given) and (c.name, c.value) not in rows:
                    rows[(c.name, c.value)] = {"name": c.name, "value": c.value, "unit": c.unit, "why": c.source}
        return list(rows.values())

    def translations(self) -> list[str]:
        return self.catalogs[0].translations if self.catalogs else []

    def to_json(self) -> dict:
        return {
            **attributes(self, "ok", "format", "source", "error"),
            "metrics": self.total,
            **attributes(self, "imported", "with_unit", "without_unit"),
            "rejected_count": self.total - self.imported,
            "compiled_ratio": round(self.ratio, 6),
            "generations": [
                {
                    "generation": g.generation,
                    "ontology": str(g.yaml_path) if g.yaml_path else None,
                    "metrics_file": str(g.metrics_path),
                    "metrics": len(g.graph.metrics),
                    "archs": g.archs,
                    "signals": len(g.gen.signals),
                }
                for g in self.generations
            ],
            "rejected": self.rejected(),
            "from_library": self.from_library(),
            "units_not_applied": self.units_not_applied(),
            "thresholds_not_translated": self.thresholds_not_translated(),
            "findings": [{"generation": gname, **f.to_json()} for gname, f in self.findings()],
            "translations": self.translations(),
            "names": {g.generation: g.names for g in self.generations},
            "unused_constants": list(self.unused_constants),
            "given_constants": self.constants(given=True),
            "assumed_constants": self.constants(given=False),
        }

    def _name_lines(self) -> list[str]:
        """The report's lines on names: the metrics renamed, and --constant names the file does not have."""
        lines = []
        renamed = self.renamed()
        if renamed:
            lines.append(f"  renamed ({len(renamed)}; every name is in report.json's `names`):")
            lines += [f"    - {src!r} → {name}{why}" for src, name, why in renamed[:12]]
            if len(renamed) > 12:
                lines.append(f"    … {len(renamed) - 12} more")
        for given, head in (
            (True, "constants given (--constant)"),
            (
                False,
                "constants assumed (the file does not "
                "give them; they decide the values: override with --constant NAME=VALUE)",
            ),
        ):
            rows = self.constants(given)
            if rows:
                lines.append(f"  {head}:")
                lines += [
                    f"    - {r['name']} = {r['value']:g}{_unit(r['unit'])}" + ("" if given else f": {r['why']}")
                    for r in rows
                ]
        if self.unused_constants:
            known = sorted({c.name for cat in self.catalogs for c in cat.constants.values()})
            lines.append(
                f"  warning: --constant {', '.join(self.unused_constants)}: the file has no constant of that name "
                f"(its constants: {', '.join(known[:12]) if known else 'none'}{' …' if len(known) > 12 else ''}); "
                "not used"
            )
        return lines

    def _finding_lines(self) -> list[str]:
        """The lint findings, by code (the first few of a code that has many: all are in the JSON)."""
        fs = [f for _, f in self.findings() if f.code not in ("unit-not-applied", "threshold-not-translated")]
        if not fs:
            return []
        lines = [f"  lint findings ({len(fs)}):"]
        by_code: dict[str, list[Finding]] = {}
        for f in fs:
            by_code.setdefault(f.code, []).append(f)
        for code, items in by_code.items():
            shown = items if len(items) <= 6 else items[:4]
            lines += [f"    - {f.severity}[{code}] {f.metric + ': ' if f.metric else ''}{f.message}" for f in shown]
            if len(items) > len(shown):
                lines.append(f"    - … and {len(items) - len(shown)} more [{code}] (all in the JSON report)")
        return lines

    def render(self) -> str:
        lines = [f"perfonto import {self.format}: {self.source}"]
        if self.error:
            lines.append(f"error: {self.error}")
            return "\n".join(lines)
        for g in self.generations:
            archs = f" ({', '.join(g.archs)})" if g.archs else ""
            lines.append(
                f"  generation {g.generation}{archs}: {g.yaml_path} + {g.metrics_path} "
                f"({len(g.gen.signals)} signals, {len(g.graph.metrics)} metrics)"
            )
        lines.append(
            f"  metrics: {self.total} in the file, {self.imported} imported ({100 * self.ratio:.1f} %): "
            f"{self.with_unit} with a unit, {self.without_unit} without; {self.total - self.imported} rejected"
            f" — {'OK' if self.ok else 'below the 95 % needed (exit 1; the files are written for inspection)'}"
        )
        lines += self._name_lines()
        lib = self.from_library()
        if lib:
            names = ", ".join(r["name"] for r in lib[:8]) + (" …" if len(lib) > 8 else "")
            lines.append(
                f"  {len(lib)} metric(s) the shipped metric library defines with the same values are left out of the "
                f"metrics file (commands compile a folder extending {self.catalogs[0].extends} with the library, and a "
                f"metric is defined once): {names}"
            )
        multi = len(self.generations) > 1
        rej = _grouped(self.rejected(), "reason")
        if rej:
            lines.append(f"  rejected ({len(rej)}):")
            lines += [f"    - {key}{_gens(gens, multi)}: {why}" for (key, why), gens in rej.items()]
        una = _grouped(self.units_not_applied(), "note")
        if una:
            lines.append(f"  units given but not applied ({len(una)}):")
            lines += [f"    - {key}{_gens(gens, multi)}: {why}" for (key, why), gens in una.items()]
        thr = self.thresholds_not_translated()
        if thr:
            lines.append(f"  thresholds not translated ({len(thr)}):")
            lines += [f"    - {t['metric']}: {t['reason']}" for t in thr]
        lines += self._finding_lines()
        if self.translations():
            lines.append("  translations:")
            lines += [f"    - {t}" for t in self.translations()]
        return "\n".join(lines)


def _grouped(rows: list[dict], field: str) -> dict[tuple[str, str], list[str]]:
    """Rows with the same metric and reason, across generations (rocprofiler architectures)."""
    out: dict[tuple[str, str], list[str]] = {}
    for r in rows:
        out.setdefault((r["metric"], r[field]), []).append(r["generation"])
    return out


def _unit(unit: str) -> str:
    return "" if unit in ("1", "") else f" {unit}"


def _gens(gens: list[str], multi: bool) -> str:
    return f" [{', '.join(gens)}]" if multi else ""
