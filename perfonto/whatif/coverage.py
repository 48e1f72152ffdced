"""Instrumentation coverage: does the catalog tell the scenarios apart, and what does each counter buy?

From the runs of ``runs.run_all`` (the nominal run and every scenario, several seeds each):

- **moves**: metric ``m`` moves in scenario S when ``|mean_S − mean_N| > k·sqrt(sd_S² + sd_N²)``
  (``k = 3``, sd over the seeds: run-to-run noise) and more than ``rel`` (1 %) of the larger mean —
  the floor keeps a deterministic metric from "moving" by a rounding;
- **diagnosis** of S: its headlines over the seeds and its *findings* — the thresholds crossed in
  every seed of S and in no seed of the nominal run (what S adds to the report);
- **told apart**: S and T are told apart by the headline when no seed of one has a headline of the
  other, else by a finding of one that no seed of the other crosses; the confusion table counts the
  headlines of each scenario's seeds;
- **unread counters** (no metric reads them), **unmoved metrics** (no scenario moves them, or never
  evaluated);
- **without a counter**: the catalog recompiled without it (``catalogs.compiled``) and every run
  judged again (``runs.diagnose``); a diagnosis is lost when a scenario's headline or one of its
  findings changes, and a pair is lost when it is no longer told apart. *Evidence* lost: the metrics
  that moved in a scenario and need the counter. A counter that neither a top-down metric nor a
  thresholded one reads cannot change a diagnosis; it is judged by its evidence only, unless named.
  A counter that could change one but was not judged (``all_counters=False``) says so: its
  ``lost_diagnoses`` is None (unknown), never an empty list (nothing lost).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import networkx as nx
import numpy as np

from .points import Target
from .runs import diagnose, spec_of


NO_HEADLINE = "(no headline)"  # a catalog without a top-down tree gives none


def _stats(xs: list) -> tuple[float, float, int]:
    a = np.array([x for x in xs if x is not None and math.isfinite(x)], np.float64)
    if not a.size:
        return math.nan, math.nan, 0
    return float(a.mean()), float(a.std(ddof=1)) if a.size > 1 else 0.0, int(a.size)


def moved_metrics(runs_s: list[dict], runs_n: list[dict], *, k: float = 3.0, rel: float = 0.01) -> dict[str, dict]:
    """Metrics that move between two sets of runs: ``{metric: {"nominal", "scenario", "noise"}}``."""
    names = set().union(*(r["values"] for r in runs_s + runs_n)) if runs_s + runs_n else set()
    out = {}
    for n in sorted(names):
        ms, ss, cs = _stats([r["values"].get(n) for r in runs_s])
        mn, sn, cn = _stats([r["values"].get(n) for r in runs_n])
        if not cs or not cn:
            continue
        d, noise = abs(ms - mn), k * math.hypot(ss, sn)
        if d > noise and d > rel * max(abs(ms), abs(mn)):
            out[n] = {"nominal": mn, "scenario": ms, "noise": noise}
    return out


def diagnoses(by: dict[str, list[dict]]) -> dict[str, dict]:
    """``{scenario: {"headlines": {metric: seeds}, "findings": [...]}}`` (findings: crossed in every
    seed of the scenario and in no seed of the nominal run)."""
    nominal_f = set().union(*(set(r["findings"]) for r in by.get("nominal", [])))
    out = {}
    for name, runs in by.items():
        heads: dict[str, int] = {}
        for r in runs:
            h = r["headline"] or NO_HEADLINE
            heads[h] = heads.get(h, 0) + 1
        always = set.intersection(*(set(r["findings"]) for r in runs)) if runs else set()
        out[name] = {
            "headlines": heads,
            "findings": sorted(always - nominal_f) if name != "nominal" else sorted(always),
        }
    return out


def told_apart(a: str, b: str, by: dict[str, list[dict]], diag: dict[str, dict]) -> dict | None:
    """How the catalog tells ``a`` from ``b``: ``{"by": "headline"}`` or ``{"by": "finding", "metric",
    "of"}``, None when it does not."""
    ha, hb = set(diag[a]["headlines"]), set(diag[b]["headlines"])
    if not ha & hb:
        return {"by": "headline"}
    for x, y in ((a, b), (b, a)):
        seen = set().union(*(set(r["findings"]) for r in by[y]))
        for f in diag[x]["findings"]:
            if f not in seen:
                return {"by": "finding", "metric": f, "of": x}
    return None


def _rejudge(by_runs: dict[str, list[dict]], graphs: dict[str, object]) -> dict[str, list[dict]]:
    out = {}
    for name, runs in by_runs.items():
        out[name] = [
            dict(r, **diagnose(graphs[name], r["values"], r.get("per_chip"), r.get("chips", ()))) for r in runs
        ]
    return out


@dataclass
class Coverage:
    """The judgement (``to_json`` documents each part)."""

    scenarios: list[str]
    runs: list[dict]
    moves: dict[str, dict]
    diagnosis: dict[str, dict]
    pairs: dict[str, dict | None]
    unread: list[str]
    unmoved: list[str]
    never_evaluated: list[str]
    expected: dict[str, dict]
    without: dict[str, dict] = field(default_factory=dict)
    proposed: dict[str, dict] = field(default_factory=dict)

    @property
    def all_told_apart(self) -> bool:
        return all(v is not None for v in self.pairs.values())

    def to_json(self) -> dict:
        return {
            "scenarios": self.scenarios,
            "seeds": sorted({r["seed"] for r in self.runs}),
            "diagnosis": self.diagnosis,
            "expected": self.expected,
            "confusion": {s: self.diagnosis[s]["headlines"] for s in self.scenarios},
            "pairs": self.pairs,
            "all_told_apart": self.all_told_apart,
            "moves": {s: sorted(m) for s, m in self.moves.items()},
            "moves_detail": self.moves,
            "unread_counters": self.unread,
            "unmoved_metrics": self.unmoved,
            "never_evaluated": self.never_evaluated,
            "without": self.without,
            "proposed": self.proposed,
            "errors": {f"{r['scenario']}/seed{r['seed']}": r["error"] for r in self.runs if r.get("error")},
        }


def _pairs(names, by, diag) -> dict[str, dict | None]:
    return {f"{a} | {b}": told_apart(a, b, by, diag) for a, b in itertools.combinations(names, 2)}


def _check_without(gen, without) -> None:
    """Refuse a name in ``without`` that is not a signal of ``gen`` (with a did-you-mean)."""
    from .knobs import KnobError
    from perfonto.ontology.diagnostics import did_you_mean

    for s in without:
        if s not in gen.signals:
            raise KnobError(
                f"--without {s}: `{gen.name}` has no signal `{s}`; "
                + (did_you_mean(s, gen.signals) or "see perfonto explain")
            )


def _runs_by_scenario(runs: list[dict], names: list[str]) -> dict[str, list[dict]]:
    """The runs without an error, by scenario (the nominal run first, then ``names``' order); a scenario
    without such a run is left out."""
    by: dict[str, list[dict]] = {n: [] for n in ["nominal", *names]}
    for r in runs:
        if not r.get("error"):
            by[r["scenario"]].append(r)
    return {n: rs for n, rs in by.items() if rs}


def _read_signals(graph, gen) -> set[str]:
    """The signals some metric reads: an ancestor of a metric, directly or through a field they fill."""
    read = set()
    for m in list(graph.metrics) + list(graph.record_metrics):
        read |= set(nx.ancestors(graph.graph, m))
    return {s for s in gen.signals if s in read or any(f in read for f, fd in gen.fields.items() if fd.register == s)}


def _unmoved(graph, by: dict[str, list[dict]], moves: dict[str, dict]) -> tuple[list[str], list[str]]:
    """The metrics (not per record) never evaluated in any run, and those evaluated that no scenario moves."""
    metrics = list(graph.metrics) + [
        m for m, x in graph.record_metrics.items() if x.population is None
    ]  # not per record
    moved_any = set().union(*(set(m) for m in moves.values())) if moves else set()
    evaluated = {n for rs in by.values() for r in rs for n, v in r["values"].items() if v is not None}
    never = sorted(m for m in metrics if m not in evaluated)
    unmoved = sorted(m for m in metrics if m in evaluated and m not in moved_any)
    return never, unmoved


def _expected(scenarios, diag: dict[str, dict]) -> dict[str, dict]:
    """For each scenario that names the headline it expects: that headline, the ones got, whether met."""
    return {
        sc.name: {
            "expect": sc.expect,
            "got": diag[sc.name]["headlines"] if sc.name in diag else {},
            "met": bool(sc.expect and sc.name in diag and set(diag[sc.name]["headlines"]) == {sc.expect}),
        }
        for sc in scenarios
        if sc.expect
    }


def _diagnosing(graph, gen) -> tuple[set[str], set[str]]:
    """The metrics that can change a diagnosis (top-down or thresholded) and the signals they read."""
    diagnosing = {m for m, x in graph.metrics.items() if "topdown" in x.groups or x.threshold}
    feeders = set()
    for m in diagnosing:
        feeders |= {a for a in nx.ancestors(graph.graph, m) if a in gen.signals}
    return diagnosing, feeders


def _not_judged(graph, sig: str, diagnosing: set[str], feeders: set[str]) -> dict:
    """The entry of a counter not judged by a recompiled catalog: unknown losses when it feeds a
    diagnosing metric (``all_counters=False``), else none possible."""
    if sig in feeders:  # it could change a diagnosis, but was not asked for (all_counters=False)
        reads = sorted(m for m in diagnosing if sig in nx.ancestors(graph.graph, m))
        return {
            "rejudged": False,
            "can_change": True,
            "lost_diagnoses": None,
            "lost_pairs": None,
            "note": f"not judged (only the --without counters were): {', '.join(reads)} read it, "
            "so a diagnosis may change",
        }
    return {
        "rejudged": False,
        "can_change": False,
        "lost_diagnoses": [],
        "lost_pairs": [],
        "note": "no top-down or thresholded metric reads it: no diagnosis can change",
    }


def judge(
    target: Target, scenarios, runs: list[dict], *, without=(), all_counters: bool = True, proposed=()
) -> Coverage:
    """The coverage judgement of ``runs`` (module docstring). ``without``: counters judged by a
    recompiled catalog whatever they feed; ``all_counters``: also every counter a diagnosing metric
    reads; ``proposed``: new counters (of a catalog folder) judged by what they add.

    Raises:
        KnobError: a name in ``without`` that is not a signal (with a did-you-mean).
    """
    from .catalogs import compiled, parts

    base = parts(target)[0]
    gen, graph = base.generation, base.graph
    _check_without(gen, without)
    names = [sc.name for sc in scenarios]
    specs = {"nominal": {}, **{sc.name: spec_of(sc) for sc in scenarios}}
    by = _runs_by_scenario(runs, names)
    by = _rejudge(by, {n: compiled(target, specs[n]) for n in by})  # one judge for before and after
    ok = [n for n in names if n in by]
    moves = {n: moved_metrics(by[n], by.get("nominal", [])) for n in ok}
    diag = diagnoses(by)
    pairs = _pairs(ok, by, diag)
    read_sig = _read_signals(graph, gen)
    unread = sorted(set(gen.signals) - read_sig)
    never, unmoved = _unmoved(graph, by, moves)
    expected = _expected(scenarios, diag)
    diagnosing, feeders = _diagnosing(graph, gen)
    judged = list(dict.fromkeys([*without, *proposed, *(sorted(feeders) if all_counters else [])]))
    cov = Coverage(ok, runs, moves, diag, pairs, unread, unmoved, never, expected)
    for sig in sorted(read_sig | set(without) | set(proposed)):
        entry = _evidence(graph, sig, moves)
        if sig in judged:
            entry |= _without(target, sig, by, specs, diag, pairs, ok)
        else:
            entry |= _not_judged(graph, sig, diagnosing, feeders)
        cov.without[sig] = entry
    for sig in proposed:
        cov.proposed[sig] = cov.without[sig]
    return cov


def _evidence(graph, sig: str, moves: dict[str, dict]) -> dict:
    need = (
        sorted(m for m in nx.descendants(graph.graph, sig) if m in graph.metrics or m in graph.record_metrics)
        if sig in graph.graph
        else []
    )
    lost = {s: sorted(set(need) & set(m)) for s, m in moves.items() if set(need) & set(m)}
    return {"metrics": need, "lost_evidence": lost}


def _without(target, sig, by, specs, diag, pairs, names) -> dict:
    from .catalogs import compiled

    graphs = {n: compiled(target, specs[n], without=(sig,)) for n in by}
    again = _rejudge(by, graphs)
    d2 = diagnoses(again)
    lost = []
    for n in names:
        before, after = diag[n], d2[n]
        if set(before["headlines"]) != set(after["headlines"]):
            lost.append(
                {
                    "scenario": n,
                    "what": "headline",
                    "before": sorted(before["headlines"]),
                    "after": sorted(after["headlines"]),
                    "message": _message(by[n], again[n]),
                }
            )
        for f in sorted(set(before["findings"]) - set(after["findings"])):
            lost.append(
                {"scenario": n, "what": "finding", "before": [f], "after": [], "message": f"{f} no longer flags"}
            )
    p2 = _pairs(names, again, d2)
    lost_pairs = [k for k, v in pairs.items() if v is not None and p2.get(k) is None]
    unavailable = (
        sorted(set(graphs[names[0]].unavailable) - set(compiled(target, specs[names[0]]).unavailable)) if names else []
    )
    return {
        "rejudged": True,
        "lost_diagnoses": lost,
        "lost_pairs": lost_pairs,
        "pairs_after": p2,
        "unavailable": unavailable,
    }


def _message(before: list[dict], after: list[dict]) -> str:
    b = before[0].get("message") or before[0].get("headline")
    a = after[0].get("message") or after[0].get("headline")
    return f"was “{b}”, now “{a}”"


__all__ = ["Coverage", "diagnoses", "judge", "moved_metrics", "told_apart"]
