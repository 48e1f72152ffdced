"""Collection planning (issue 29, point 1): which counters to read together, in how many passes, and
how often, so that a set of metrics can be measured with a block's limited counter slots.

A block's monitoring unit reads at most ``counter_slots.programmable`` of its counters at once, plus
its ``fixed`` counters, which always count (``ontology.counter_slots``); a block without
``counter_slots`` reads all its counters at once. Gauges and packed registers are read without a
slot. A *group* is the counters one block reads at once; a *pass* is one group per block, all
counting over the same time. A metric is **measured consistently** when every raw counter it reads
(transitively, through the metrics it uses) counts in one pass: a ratio's numerator and denominator
then cover the same time. Counters read in different passes are multiplexed (perf's time-sliced
groups) and a ratio of them mixes two windows.

``plan_groups`` packs the metrics' counter needs into the fewest passes (``metrics.plan_pack`` states
the rule: greedy with affinity, proven or searched exhaustively on small inputs), reports the
metrics that cannot be measured consistently (their counters do not fit one group) and, per counter,
its **read cap**: half the shortest time in which it can wrap, (R − 1) / (max_rate / scale) / 2 s,
with R = 2^effective width (or the raw modulus of a ``wrap_range``) and max_rate the declared one
(or a cycle counter's clock plus 1 %, ``metrics.windows.max_rate``; lacking both, the block's peak that
``check`` warns with: ``metrics.plan_caps``). Reading at least that often keeps every read pair inside half
a wrap, where an increase is unambiguous (``metrics.windows`` rule 4b).
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass

import networkx as nx

from perfonto.ontology.counter_slots import SLOTTED_KINDS
from perfonto.ontology.diagnostics import did_you_mean
from perfonto.ontology.errors import PerfontoError

from .graph import MetricGraph
from .plan_caps import ReadCap, read_cap, uncapped
from .plan_pack import Need, Rules, covers, pack, split, union


class PlanError(PerfontoError):
    """A plan that cannot be made: an unknown metric, or constraints no grouping can meet."""


@dataclass(frozen=True)
class Group:
    """What one block reads in one pass: ``counters`` in its programmable slots, ``fixed`` always."""

    block: str
    counters: tuple[str, ...]
    fixed: tuple[str, ...]
    slots: int | None  # programmable slots of the block (None: every counter counts at once)


@dataclass(frozen=True)
class Pass:
    """One pass (1-based ``index``): its groups, the metrics it measures consistently and its read
    interval (the smallest read cap of its counters, None when none is known)."""

    index: int
    groups: tuple[Group, ...]
    metrics: tuple[str, ...]
    read_interval_s: float | None


@dataclass(frozen=True)
class Inconsistent:
    """A metric whose counters cannot count in one pass: why, and the passes that read them."""

    metric: str
    reason: str
    passes: tuple[int, ...]


@dataclass(frozen=True)
class Plan:
    """A collection plan (``plan_groups``). ``inputs``: metric → the raw counters it reads;
    ``one_pass_slots``: block → programmable slots it needs to read every metric in one pass (None when
    ``apart`` constraints forbid one pass); ``optimal``: the pass count is proven the fewest."""

    generation: str
    metrics: tuple[str, ...]
    passes: tuple[Pass, ...]
    caps: dict[str, ReadCap]
    inconsistent: tuple[Inconsistent, ...]
    inputs: dict[str, tuple[str, ...]]
    one_pass_slots: dict[str, int | None]
    optimal: bool
    slots_override: int | None = None

    @property
    def read_interval_s(self) -> float | None:
        """The smallest read cap over every counter read (seconds), None when none is known."""
        caps = [c.cap_s for c in self.caps.values() if c.cap_s is not None]
        return min(caps) if caps else None

    @property
    def uncapped(self) -> tuple[str, ...]:
        """The counters read whose wrap time is unknown (``plan_caps.uncapped``): the read interval leaves
        them out."""
        return uncapped(self.caps)

    def to_json(self) -> dict:
        """The plan as JSON-ready data (the ``--json`` document and the collector config's body)."""
        return {
            "generation": self.generation,
            "slots_override": self.slots_override,
            "metrics": list(self.metrics),
            "optimal": self.optimal,
            "read_interval_s": self.read_interval_s,
            "uncapped": list(self.uncapped),
            "passes": [
                {
                    "pass": p.index,
                    "read_interval_s": p.read_interval_s,
                    "groups": [
                        {"block": g.block, "slots": g.slots, "counters": list(g.counters), "fixed": list(g.fixed)}
                        for g in p.groups
                    ],
                    "metrics": list(p.metrics),
                }
                for p in self.passes
            ],
            "inconsistent": [
                {"metric": i.metric, "reason": i.reason, "passes": list(i.passes)} for i in self.inconsistent
            ],
            "read_caps": {
                n: {
                    "range_raw": c.range_raw,
                    "max_rate": c.max_rate,
                    "unit": c.unit,
                    "cap_s": c.cap_s,
                    "note": c.note,
                    "peak": c.peak,
                }
                for n, c in sorted(self.caps.items())
            },
            "inputs": {m: list(v) for m, v in self.inputs.items()},
            "one_pass_slots": dict(self.one_pass_slots),
        }


def plan_groups(catalog, metrics, slots: int | None = None) -> Plan:
    """Plan the collection of ``metrics`` (names; ``*`` patterns expand over the catalog's metrics) on the
    compiled ``catalog`` (a ``metrics.catalog.Catalog`` or its ``MetricGraph``): the fewest passes in which
    each metric's raw counters share one pass, the read cap of every counter read, the metrics that cannot
    be measured consistently and the slots one pass would need. ``slots`` (≥ 1) replaces every block's
    programmable slot count (blocks without ``counter_slots`` then get it too; declared fixed counters
    stay fixed). Raises ``PlanError`` for an unknown or unavailable metric (naming a close match) and for
    constraints no grouping meets (naming the YAML place, file:line:col)."""
    graph = catalog if isinstance(catalog, MetricGraph) else catalog.graph
    gen = graph.generation
    names = _expand(graph, metrics)
    layout = _Layout(gen, slots)
    inputs = {m: _raw_counters(graph, m) for m in names}
    needs = {m: layout.need(inputs[m], m) for m in names}
    ok = {m: n for m, n in needs.items() if layout.rules.fits(n)}
    bad = {m: n for m, n in needs.items() if m not in ok}
    pieces = [p for n in bad.values() for p in split(n, layout.atoms, layout.rules)]
    fams = _families(graph, ok, layout.rules)
    passes, optimal, fams = _packed(list(ok.values()) + pieces, fams, layout.rules)
    read = sorted({c for v in inputs.values() for c in v})
    caps = {c: read_cap(gen, gen.signals[c]) for c in read}
    home = {m: next(i for i, p in enumerate(passes) if covers(p, fams.get(m, n))) for m, n in ok.items()}
    built = [_pass(i, p, layout, [m for m in ok if home[m] == i], inputs, caps) for i, p in enumerate(passes)]
    incons = tuple(Inconsistent(m, layout.why(n), _touching(passes, n)) for m, n in bad.items())
    return Plan(gen.name, tuple(names), tuple(built), caps, incons, inputs, layout.one_pass(needs), optimal, slots)


def _families(graph: MetricGraph, ok: dict[str, Need], rules: Rules) -> dict[str, Need]:
    """metric → the need of its family (the requested metrics that share its declared ``parent``, and the
    parent itself when requested), for families of two or more whose needs fit one pass together: siblings
    read in one pass add up to their parent in every window (``analysis.bottleneck``'s check)."""
    by_parent: dict[str, list[str]] = {}
    for m in ok:
        decl = graph.declarations.get(m)
        parent = getattr(decl, "parent", None)
        if parent:
            by_parent.setdefault(parent, []).append(m)
    out: dict[str, Need] = {}
    for parent, members in by_parent.items():
        group = members + ([parent] if parent in ok else [])
        need: Need = {}
        for m in group:
            need = union(need, ok[m])
        if len(members) > 1 and rules.fits(need):
            out.update({m: need for m in group})
    return out


def _packed(needs: list[Need], fams: dict[str, Need], rules: Rules) -> tuple[list[Need], bool, dict[str, Need]]:
    """The passes (at least one), whether their count is proven the fewest, and the families kept whole:
    with families as needs when that costs no pass over packing without them (``plan_pack`` rule 0)."""
    plain, proven = pack(needs, rules)
    if fams:
        whole, _ = pack(needs + list({id(n): n for n in fams.values()}.values()), rules)
        if len(whole) <= len(plain):
            return whole or [{}], proven, fams
    return plain or [{}], proven, {}


def tree_slots(catalog, group: str = "topdown") -> dict | None:
    """What reading a metric group (default: the top-down tree) costs on the catalog's declared slots:
    ``{"group", "metrics": count, "passes": count, "one_pass_slots": {block: slots or None},
    "inconsistent": [metric, ...]}``, or None when no metric is in ``group`` (``perfonto coverage``'s row)."""
    graph = catalog if isinstance(catalog, MetricGraph) else catalog.graph
    names = [m for m, x in graph.metrics.items() if group in x.groups]
    if not names:
        return None
    plan = plan_groups(graph, names)
    return {
        "group": group,
        "metrics": len(plan.metrics),
        "passes": len(plan.passes),
        "one_pass_slots": dict(plan.one_pass_slots),
        "inconsistent": [i.metric for i in plan.inconsistent],
    }


def _expand(graph: MetricGraph, metrics) -> list[str]:
    """The requested names, patterns expanded, in order, each once; unknown names raise PlanError."""
    known = graph.all_metrics
    out: list[str] = []
    for raw in metrics:
        name = raw.strip()
        if not name:
            continue
        if any(ch in name for ch in "*?["):
            hits = sorted(m for m in known if fnmatch.fnmatchcase(m, name))
            if not hits:
                raise PlanError(f"no metric matches `{name}`; `perfonto docs` or `perfonto explain` list the metrics")
            out += hits
        elif name in known:
            out.append(name)
        elif name in graph.unavailable:
            raise PlanError(f"metric `{name}` is unavailable on {graph.generation.name}: {graph.unavailable[name]}")
        else:
            hint = did_you_mean(name, known)
            raise PlanError(
                f"no metric named `{name}` in the {graph.generation.name} catalog" + (f"; {hint}" if hint else "")
            )
    if not out:
        raise PlanError("no metric to plan: give --metrics a,b,... (names or patterns such as `topdown.*`)")
    return list(dict.fromkeys(out))


def _raw_counters(graph: MetricGraph, metric: str) -> tuple[str, ...]:
    """The counters (and histograms) ``metric`` reads, through the metrics it uses (the DAG's ancestors)."""
    gen = graph.generation
    anc = nx.ancestors(graph.graph, metric) if metric in graph.graph else set()
    return tuple(sorted(n for n in anc if n in gen.signals and gen.signals[n].kind in SLOTTED_KINDS))


def _touching(passes: list[Need], n: Need) -> tuple[int, ...]:
    """The passes (1-based) that read some counter of ``n``."""
    return tuple(i + 1 for i, p in enumerate(passes) if any(p.get(b, frozenset()) & cs for b, cs in n.items()))


class _Layout:
    """The generation's slots and constraints as the planner reads them (with ``--slots`` applied)."""

    def __init__(self, gen, slots: int | None):
        if slots is not None and slots < 1:
            raise PlanError(f"--slots must be 1 or more, got {slots}")
        self.gen, self.override = gen, slots
        self.decl = {b: info.get("counter_slots") or {} for b, info in gen.blocks.items()}
        self.fixed = {c for d in self.decl.values() for c in d.get("fixed", ())}
        prog = {b: slots if slots is not None else d.get("programmable") for b, d in self.decl.items()}
        self.slots = {b: n for b, n in prog.items() if n is not None}  # blocks absent: every counter counts at once
        apart = {
            b: tuple(frozenset(c for c in names if c not in self.fixed) for names, _ in d.get("apart", ()))
            for b, d in self.decl.items()
        }
        self.rules = Rules(self.slots, apart)
        self.atoms = self._atoms()

    def _atoms(self) -> dict[str, frozenset[str]]:
        """counter → the counters that must share its group (``together`` rules joined transitively)."""
        atoms: dict[str, frozenset[str]] = {}
        for d in self.decl.values():
            for names, _ in d.get("together", ()):
                group = frozenset(c for c in names if c not in self.fixed)
                for c in list(group):
                    group |= atoms.get(c, frozenset())
                for c in group:
                    atoms[c] = group
        return atoms

    def need(self, counters: tuple[str, ...], metric: str) -> Need:
        """What ``counters`` read through programmable slots, per block, with their ``together`` partners;
        raises PlanError when a partner set itself cannot be read in one group."""
        out: dict[str, set[str]] = {}
        for c in counters:
            b = self.gen.signals[c].block
            if b not in self.slots or c in self.fixed:
                continue
            if self.slots[b] == 0:
                self._no_slots(b, counters, metric)
            atom = self.atoms.get(c, frozenset({c}))
            self._check_atom(b, atom, metric)
            out.setdefault(b, set()).update(atom)
        return {b: frozenset(v) for b, v in out.items()}

    def _no_slots(self, b: str, counters: tuple[str, ...], metric: str) -> None:
        """Raise PlanError: ``metric`` reads counters of ``b`` that are not fixed, and ``b`` has no slots."""
        names = [c for c in counters if self.gen.signals[c].block == b and c not in self.fixed]
        raise PlanError(
            f"{self.decl[b].get('span', b)}: `{metric}` reads {', '.join(names)}, which block `{b}` cannot count: it "
            "has no programmable slots and they are not fixed; make the counters fixed or give the block "
            "programmable slots"
        )

    def _check_atom(self, b: str, atom: frozenset[str], metric: str) -> None:
        d = self.decl.get(b, {})
        where = [str(sp) for names, sp in d.get("together", ()) if set(names) & atom]
        n = self.slots[b]
        if n == 0 or len(atom) > n:
            what = "has no programmable slots" if n == 0 else f"has {n} programmable slot{'s' * (n != 1)}"
            raise PlanError(
                f"{', '.join(where) or d.get('span', b)}: `{metric}` needs {', '.join(sorted(atom))}, which must share "
                f"a group, but block `{b}` {what}{' (--slots)' if self.override else ''}: no grouping meets this; "
                "raise the slots, make a counter fixed, or loosen the `together` rule"
            )
        for names, sp in d.get("apart", ()):
            both = sorted(atom & set(names))
            if len(both) > 1:
                raise PlanError(
                    f"{sp}: `{metric}` needs {', '.join(both)} in one group (`together` at {', '.join(where)}) but "
                    "this `apart` rule forbids it: the constraints contradict each other; drop one of the two rules"
                )

    def why(self, need: Need) -> str:
        """Why a need does not fit one pass, one clause per block that overflows."""
        out = []
        for b, cs in sorted(need.items()):
            n = self.slots[b]
            if len(cs) > n:
                out.append(
                    f"needs {len(cs)} programmable `{b}` counters at once, the block has {n} slot{'s' * (n != 1)}"
                )
            for a in self.rules.apart.get(b, ()):
                if len(cs & a) > 1:
                    out.append(f"needs {', '.join(sorted(cs & a))} at once, which must not share a group")
        return "; ".join(out)

    def one_pass(self, needs: dict[str, Need]) -> dict[str, int | None]:
        """Per block with programmable needs: slots to read them all in one pass (None: ``apart`` forbids)."""
        total: dict[str, set[str]] = {}
        for n in needs.values():
            for b, cs in n.items():
                total.setdefault(b, set()).update(cs)
        return {
            b: (None if any(len(cs & a) > 1 for a in self.rules.apart.get(b, ())) else len(cs))
            for b, cs in sorted(total.items())
        }


def _pass(i: int, p: Need, layout: _Layout, mine: list[str], inputs, caps) -> Pass:
    """Pass ``i`` (0-based) built: its groups (programmable and fixed counters per block), the metrics it
    measures consistently (``mine``: each metric in the first pass holding all its counters) and its read
    interval."""
    fixed_read: dict[str, set[str]] = {}
    for cs in inputs.values():
        for c in cs:
            sig = layout.gen.signals[c]
            if sig.block not in layout.slots or c in layout.fixed:
                fixed_read.setdefault(sig.block, set()).add(c)
    blocks = sorted(set(p) | set(fixed_read))
    groups = tuple(
        Group(b, tuple(sorted(p.get(b, ()))), tuple(sorted(fixed_read.get(b, ()))), layout.slots.get(b)) for b in blocks
    )
    read = [c for g in groups for c in g.counters + g.fixed]
    known = [caps[c].cap_s for c in read if caps[c].cap_s is not None]
    return Pass(i + 1, groups, tuple(mine), min(known) if known else None)


__all__ = ["Group", "Inconsistent", "Pass", "Plan", "PlanError", "ReadCap", "plan_groups", "read_cap", "tree_slots"]
