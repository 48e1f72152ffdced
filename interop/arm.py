"""Import an Arm Telemetry Solution CPU specification (``data/pmu/cpu/<family>/<cpu>.json``).

The file holds ``events`` (name → code, title, description), ``metrics`` (name → title, formula,
units as free text, events), ``groups.metrics`` (group → metrics), ``groups.function`` (event
groups) and ``methodologies.topdown_methodology`` whose ``decision_tree`` has root metrics and, for
each, the metric groups to look at next.

Translation:
- formulas are plain arithmetic over event names (``+ - * /``, brackets, numbers); division by zero is
  not defined by the format and is read as NaN (Arm's topdown-tool computes in floating point), i.e.
  perfonto's null;
- ``units`` text → pint: ``percent of cycles/operations`` → percent (the formula's trailing ``* 100``
  is removed, value kept), ``MPKI`` → ``event/kevent`` (the ``* 1000`` removed), ``per cycle``,
  ``per branch``, ``per TLB access``, ``per cache access`` → ``event/event``;
- metric groups → ``groups``; the decision tree: every metric of a group listed under a root's
  ``next_items`` gets that root as ``parent`` (the first root that lists it; a metric under two roots
  keeps the first and the other is reported). The roots are perfonto's top-down level 1 (group
  ``topdown``: shares that add up to 100 %, with a dominant bottleneck and a sum check) only where they
  partition the slots: all in ``percent of slots`` (Arm's Topdown L1 on Neoverse V1 and N2: frontend
  bound, bad speculation, retiring, backend bound). Neoverse N1's roots, frontend- and backend-stalled
  cycles in ``percent of cycles``, are two stall counts whose rest is the cycles not stalled: they stay
  out of group ``topdown``, with a note;
- ``product_configuration.num_slots`` / ``num_bus_slots`` → spec constants (as given, ``claimed``).
"""

from __future__ import annotations

import re

from pathlib import Path

from . import ir
from .catalog import Finding, SourceCatalog, SourceConstant, SourceMetric
from .exprparse import ParseError, SBin, SId, SNeg, SNum, parse
from .names import NameTable, ident, metric_name
from .perf_topdown import mark_level1
from .source_io import load_json

TRANSLATIONS = [
    "Arm `units` text is mapped to pint (percent, MPKI → event/kevent, `per <x>` → event/event) and the formula's "
    "own ×100 / ×1000 removed, value kept",
    "Arm formulas are plain arithmetic; division by zero is read as NaN, i.e. perfonto's null",
    "the top-down decision tree: metrics of a root's next groups get it as `parent`; the roots get group `topdown` "
    "(perfonto's top-down level 1, summed to 100 %) only when all are in `percent of slots` (a partition of the "
    "slots)",
    "events are counters with unit `event` and width 64 (the specification gives no width)",
]


def read(path: str | Path, generation: str, constants: dict[str, float] | None = None) -> SourceCatalog:
    """Read an Arm telemetry CPU specification into a ``SourceCatalog``."""
    path = Path(path)
    data = load_json(path, "Arm telemetry file")
    if not isinstance(data, dict) or not isinstance(data.get("metrics"), dict):
        raise ValueError(f"{path}: an Arm telemetry specification is an object with `events` and `metrics`")
    prod = data.get("product_configuration") or {}
    cat = SourceCatalog(
        "arm",
        str(path),
        generation,
        f"Imported from the Arm telemetry specification {path.name}"
        + (f" ({prod.get('product_name')})" if prod.get("product_name") else "")
        + ".",
    )
    cat.translations = list(TRANSLATIONS)
    _read_events(cat, data.get("events") or {})
    _read_constants(cat, prod, constants)
    groups = _metric_groups(data)
    tree = ((data.get("methodologies") or {}).get("topdown_methodology") or {}).get("decision_tree") or {}
    roots = _level1(cat, list(tree.get("root_nodes") or []), data["metrics"])
    parent = _tree_parents(path, data, tree, cat)
    names = NameTable()
    for key, body in data["metrics"].items():
        body = body if isinstance(body, dict) else {}
        gs = list(groups.get(key, [])) + (["topdown"] if key in roots else [])
        _read_metric(cat, data["metrics"], key, body, names.get(key, metric_name(key.lower())), gs, parent.get(key))
    for key in list(parent):
        if key not in cat.metrics:
            cat.findings.append(
                Finding("unknown-metric", key, "the decision tree names a metric the file does not define")
            )
    mark_level1(cat)  # Retiring is useful work; a partial level 1 is not summed (interop.perf_topdown)
    return cat


def perf_name(event: str) -> str | None:
    """The name ``perf stat -e`` takes (and prints) for an Arm PMU event: its architecture name in lower
    case (``INST_RETIRED`` → ``inst_retired``, perf's pmu-events spelling), so that a perf capture reads
    against the imported catalog; None for a name perf could not take as an event."""
    return event.lower() if re.fullmatch(r"[A-Za-z][A-Za-z0-9_.]*", event) else None


def _read_events(cat: SourceCatalog, events: dict) -> None:
    """Every event as a CPU counter, described by its title, description and event code."""
    table = NameTable()
    for name, ev in events.items():
        ev = ev if isinstance(ev, dict) else {}
        desc = ": ".join(x for x in (str(ev.get("title") or ""), str(ev.get("description") or "")) if x)
        code = f" (event code {ev['code']})" if ev.get("code") else ""
        ev_ = cat.event(name, "cpu", table.get(name, ident(name)), (desc or f"Arm event {name}") + code)
        if perf_name(name):
            ev_.sources.setdefault("perf", perf_name(name))


def _read_constants(cat: SourceCatalog, prod: dict, constants: dict[str, float] | None) -> None:
    """The product configuration's slot counts as spec constants (a value in `constants` overrides)."""
    for field in ("num_slots", "num_bus_slots"):
        if isinstance(prod.get(field), (int, float)):
            value, why = float(prod[field]), "given by the specification's product_configuration"
            if field in (constants or {}):  # the command line's value, and the note says so
                value = float(constants[field])
                why = f"given on the command line (--constant), over the specification's {prod[field]:g}"
            cat.constants[field] = SourceConstant(
                field, field, value, f"Arm product configuration `{field}`", why, "claimed"
            )


def _level1(cat: SourceCatalog, roots: list, metrics: dict) -> list:
    """The decision tree's roots that are perfonto's top-down level 1: all of them where every one is a
    share of the slots (``percent of slots``, so that they add up to 100 %), else none, with a note."""
    units = {r: str(metrics[r].get("units") or "") if isinstance(metrics.get(r), dict) else "" for r in roots}
    if all(u.strip().lower() == "percent of slots" for u in units.values()):
        return roots
    listed = ", ".join(f"{r} in {u or 'no unit'}" for r, u in units.items())
    cat.findings.append(
        Finding(
            "topdown-not-partition",
            "",
            f"the decision tree's roots ({listed}) are not shares of the slots that add up to 100 %: they are not "
            "made perfonto's top-down level 1 (group `topdown`, summed and ranked as a partition); their next "
            "metrics keep them as `parent`",
            "info",
        )
    )
    return []


def _metric_groups(data: dict) -> dict[str, list[str]]:
    """Metric name → the metric groups that list it, in file order."""
    groups: dict[str, list[str]] = {}
    for g, body in ((data.get("groups") or {}).get("metrics") or {}).items():
        for mname in (body or {}).get("metrics") or []:
            groups.setdefault(mname, []).append(g)
    return groups


def _tree_parents(path: Path, data: dict, tree: dict, cat: SourceCatalog) -> dict[str, str]:
    """Metric name → its parent in the decision tree: the first root whose next groups list it."""
    parent: dict[str, str] = {}
    for node in tree.get("metrics") or []:
        if not isinstance(node, dict):
            raise ValueError(
                f"{path}: methodologies.topdown_methodology.decision_tree.metrics holds {type(node).__name__} "
                "entries; each is an object with `name` and `next_items`"
            )
        root = node.get("name")
        for g in node.get("next_items") or []:
            for body_name, body in ((data.get("groups") or {}).get("metrics") or {}).items():
                if body_name == g:
                    _adopt(cat, parent, root, body.get("metrics") or [])
    return parent


def _adopt(cat: SourceCatalog, parent: dict[str, str], root, members: list) -> None:
    """Give `root` as parent to the group's members that have none yet; a second parent is reported."""
    for mname in members:
        if mname == root:
            continue
        if mname in parent and parent[mname] != root:
            cat.findings.append(
                Finding(
                    "second-parent",
                    mname,
                    f"also next to `{root}` in the decision tree: perfonto keeps one parent (`{parent[mname]}`)",
                    "info",
                )
            )
        else:
            parent.setdefault(mname, root)


def _read_metric(
    cat: SourceCatalog, metrics: dict, key: str, body: dict, name: str, groups: list[str], parent: str | None
) -> None:
    """One metric into the catalog: its formula translated (or the problem noted) and its `events` list checked."""
    formula = str(body.get("formula") or "").strip()
    desc = str(body.get("description") or body.get("title") or "")
    m = SourceMetric(
        key,
        name,
        formula,
        None,
        unit_text=body.get("units") or None,
        description=desc,
        groups=groups,
        parent=parent,
        origin=f"metric {key}",
    )
    cat.metrics[key] = m
    listed = set(body.get("events") or [])
    try:
        m.expr = _expr(parse(formula, "arm"), cat, metrics)
    except ParseError as exc:
        m.problem = f"syntax: {exc}"
        return
    except ir.Unsupported as exc:
        m.problem = str(exc)
        return
    used = ir.leaves(m.expr, ir.Event)
    if listed and listed != used:
        cat.findings.append(
            Finding(
                "event-list",
                key,
                f"the metric's `events` list {sorted(listed)} differs from the events its formula uses {sorted(used)}",
                "info",
            )
        )


def _expr(t, cat: SourceCatalog, metrics: dict) -> ir.Node:
    if isinstance(t, SNum):
        return ir.Num(t.value)
    if isinstance(t, SId):
        if t.name in metrics:
            return ir.Ref(t.name)
        if t.name not in cat.events:
            ev = cat.event(
                t.name, "cpu", ident(t.name), f"Arm event {t.name} (not defined in the specification)", defined=False
            )
            if perf_name(t.name):
                ev.sources.setdefault("perf", perf_name(t.name))
        return ir.Event(t.name)
    if isinstance(t, SNeg):
        return ir.Neg(_expr(t.operand, cat, metrics))
    if isinstance(t, SBin) and t.op in ("+", "-", "*", "/"):
        return ir.Bin(t.op, _expr(t.left, cat, metrics), _expr(t.right, cat, metrics))
    raise ir.Unsupported(f"Arm formulas are plain arithmetic; `{t}` is not")
