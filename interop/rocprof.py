"""Import AMD rocprofiler-sdk counter definitions (``counters/yaml/counter_defs.yaml``).

Each counter has, per architecture (keys like ``gfx942/gfx941/gfx940``), either a base definition
(``block`` + ``event``) or an ``expression``. Semantics, from rocprofiler-sdk's
``counters/parser/parser.y`` and ``counters/evaluate_ast.cpp``:

- ``+ - * /`` between instance vectors element-wise, a one-value side broadcast; ``/`` gives **0** when
  the divisor is 0 → ``a / b if b != 0 else 0`` (explicit, as perfonto's ``/`` gives null);
- ``reduce(e, sum|avr|min|max)`` over all dimensions → ``sum/avg/min/max(e)``; reducing a value that
  has no dimensions left is the value itself; ``reduce(e, op, [DIMS])`` over some dimensions only,
  and ``select(e, [DIM=[i]])`` (one instance), have no counterpart (perfonto rolls up all instance
  axes and cannot pick one instance) and are rejected with that reason;
- ``accumulate(C, HIGH_RES|LOW_RES)`` reads counter C in the SQ's accumulate mode (the level summed
  every cycle): imported as its own counter ``<c>_accum_<mode>`` of C's block;
- lower-case names (``simd_count``, ``simd_per_cu``, ``wave_front_size`` …) are agent properties read
  at run time (0 when unknown) → dimensionless spec constants with assumed values;
- dimensions: the file does not give them (rocprofiler reads them from the agent); every block gets
  one instance axis ``instance`` of an assumed size, so that ``reduce`` keeps its meaning.
Architectures whose definitions are identical are imported as one generation that lists them.
Units come from descriptions: ``Unit: percent`` (or "percentage" in the text) → percent with the
formula's ``100*`` removed, ``Unit: cycles`` → ``event``; others as pint reads them.
"""

from __future__ import annotations

import functools
import re
from importlib import resources
from pathlib import Path

from lark import Lark, UnexpectedCharacters, UnexpectedInput, UnexpectedToken
from lark.visitors import Transformer_NonRecursive


from . import ir
from .catalog import Finding, SourceCatalog, SourceConstant, SourceMetric
from .names import NameTable, ident, metric_name
from .source_io import load_yaml

INSTANCES = 4
AGENT_DEFAULTS = {
    "simd_count": 416.0,
    "simd_per_cu": 4.0,
    "wave_front_size": 64.0,
    "array_count": 16.0,
    "simd_arrays_per_engine": 2.0,
    "cu_per_simd_array": 8.0,
    "max_waves_per_simd": 8.0,
    "cpu_cores_count": 0.0,
    "mem_banks_count": 1.0,
    "lds_size_in_kb": 64.0,
    "num_xcc": 1.0,
}
TRANSLATIONS = [
    "rocprofiler `/` gives 0 when the divisor is 0: written `a / b if b != 0 else 0`",
    "rocprofiler `reduce(e, sum|avr|min|max)` over all dimensions is `sum/avg/min/max(e)`; reducing a dimensionless "
    "value is the value",
    "rocprofiler `accumulate(C, MODE)` is its own counter `<c>_accum_<mode>` (C read in accumulate mode)",
    "rocprofiler dimensions come from the agent at run time: each block has one axis `instance` of assumed size "
    f"{INSTANCES}",
    "agent properties (simd_count, …) are dimensionless `spec.*` constants with assumed values",
    "identical architectures are imported as one generation listing them",
    "counters have unit `event` and width 64 (the file gives neither)",
]


MAX_DEPTH = 100  # nesting levels of one expression; the shipped definitions nest a few


@functools.lru_cache(maxsize=1)
def _parser() -> Lark:
    grammar = resources.files("perfonto.interop").joinpath("rocprof.lark").read_text(encoding="utf-8")
    return Lark(grammar, parser="lalr", maybe_placeholders=True)


class _ToTuples(Transformer_NonRecursive):
    def num(self, items):
        return ("num", float(items[0]))

    def name(self, items):
        return ("name", str(items[0]))

    def bin(self, items):
        a, op, b = items
        return ("bin", str(op), a, b)

    def reduce(self, items):
        e, op, dims = items
        return ("reduce", e, str(op), dims)

    def select(self, items):
        return ("select", items[0], items[1])

    def accumulate(self, items):
        return ("accumulate", str(items[0]), str(items[1]))

    def dims(self, items):
        return [d for d in items if d is not None]

    def dim(self, items):
        name, *idx = items
        return str(name) if not idx or idx == [None] else f"{name}={''.join(i for i in idx if i is not None)}"

    def idx(self, items):
        return str(items[0]) if items else ":"


def parse(text: str):
    """rocprofiler expression → nested tuples: ("num", v) ("name", n) ("bin", op, a, b)
    ("reduce", e, op, dims|None) ("select", e, dims) ("accumulate", name, mode).

    Parsed with lark (``rocprof.lark``, LALR) and converted without recursion; an expression nested
    more than ``MAX_DEPTH`` levels is refused.

    Raises:
        SyntaxError: the offending token or character, and the expression (shortened).
    """
    shown = text if len(text) <= 120 else text[:117] + "..."
    try:
        tree = _parser().parse(text)
    except UnexpectedCharacters as exc:
        raise SyntaxError(f"unexpected `{text[exc.pos_in_stream]}` in `{shown}`") from None
    except UnexpectedToken as exc:
        tok = "end" if exc.token.type == "$END" else str(exc.token)
        raise SyntaxError(f"unexpected `{tok}` in `{shown}`") from None
    except UnexpectedInput:
        raise SyntaxError(f"unexpected `end` in `{shown}`") from None
    depth, stack = 0, [(tree, 1)]
    while stack:
        node, d = stack.pop()
        depth = max(depth, d)
        stack.extend((c, d + 1) for c in getattr(node, "children", ()) if hasattr(c, "children"))
    if depth > MAX_DEPTH:
        raise SyntaxError(f"the expression is nested more than {MAX_DEPTH} levels deep: `{shown}`")
    return _ToTuples().transform(tree)


def _unit_of(description: str) -> str | None:
    m = re.search(r"Unit:\s*([^\n.]+)", description)
    if m:
        return m.group(1).strip()
    if re.search(r"\bpercent(age)?\b", description, re.I):
        return "percent"
    return None


def read(
    path: str | Path, generation: str, archs: list[str] | None = None, constants: dict[str, float] | None = None
) -> list[SourceCatalog]:
    """Read the counter definitions: one ``SourceCatalog`` per group of identical architectures."""
    path = Path(path)
    data = load_yaml(path, "rocprofiler counter definitions")
    if not isinstance(data, dict):
        raise ValueError(f"{path}: rocprofiler counter definitions are a mapping of counter names")
    per: dict[str, dict[str, dict]] = {}
    descriptions: dict[str, str] = {}
    for name, body in data.items():
        if not isinstance(body, dict):
            continue
        descriptions[name] = str(body.get("description") or "")
        arch_defs = body.get("architectures") or {}
        if not isinstance(arch_defs, dict):
            raise ValueError(f"{path}: counter `{name}`: `architectures` must map architecture names to definitions")
        for key, d in arch_defs.items():
            for arch in str(key).split("/"):
                per.setdefault(arch.strip(), {})[str(name)] = d if isinstance(d, dict) else {}
    if archs:
        missing = [a for a in archs if a not in per]
        if missing:
            raise ValueError(f"{path}: no architecture {', '.join(missing)} (the file has {', '.join(sorted(per))})")
        per = {a: per[a] for a in archs}
    groups: dict[str, list[str]] = {}
    for arch in sorted(per):
        groups.setdefault(repr(sorted(per[arch].items())), []).append(arch)
    out = []
    for arch_list in sorted(groups.values(), key=lambda a: a[0]):
        out.append(
            _catalog(
                path, f"{generation}_{ident(arch_list[0])}", arch_list, per[arch_list[0]], descriptions, constants or {}
            )
        )
    return out


def _catalog(
    path: Path,
    gen_name: str,
    archs: list[str],
    defs: dict[str, dict],
    descriptions: dict[str, str],
    overrides: dict[str, float],
) -> SourceCatalog:
    cat = SourceCatalog(
        "rocprof",
        str(path),
        gen_name,
        f"Imported from rocprofiler-sdk counter definitions {path.name} for {', '.join(archs)}.",
        clock="gpu",
        clock_description="GPU shader clock (its frequency is not in the counter definitions).",
        archs=archs,
    )
    cat.translations = list(TRANSLATIONS)
    tables: dict[str, NameTable] = {}
    base = {n: d for n, d in defs.items() if "block" in d and "expression" not in d}
    derived = {n: d for n, d in defs.items() if "expression" in d}
    for name, d in sorted(base.items()):
        block = ident(str(d["block"]))
        table = tables.setdefault(block, NameTable())
        desc = descriptions.get(name) or f"rocprofiler counter {name}"
        cat.event(name, block, table.get(name, ident(name)), f"{desc} (block {d['block']}, event {d.get('event')})")
        cat.block_instances[block] = INSTANCES
        cat.block_descriptions[block] = (
            f"rocprofiler block {d['block']}; its dimensions come from the agent at run time, "
            f"{INSTANCES} instances assumed"
        )
    names = NameTable()
    axes: dict[str, bool] = {}
    reader = _Translate(cat, base, derived, overrides, axes)
    for name in sorted(derived):
        d = derived[name]
        desc = descriptions.get(name, "")
        m = SourceMetric(
            name,
            names.get(name, metric_name(name, camel="_" not in name)),
            str(d["expression"]),
            None,
            unit_text=_unit_of(desc),
            description=desc,
            weight=len(archs),
            origin=f"{name} ({'/'.join(archs)})",
        )
        cat.metrics[name] = m
    for name in sorted(derived):
        m = cat.metrics[name]
        try:
            m.expr = reader.metric(name)
        except SyntaxError as exc:
            m.problem = f"syntax: {exc}"
        except ir.Unsupported as exc:
            m.problem = str(exc)
    return cat


class _Translate:
    def __init__(self, cat, base, derived, overrides, axes):
        self.cat, self.base, self.derived, self.overrides, self.axes = cat, base, derived, overrides, axes
        self.trees: dict[str, tuple] = {}
        self.busy: set[str] = set()

    def metric(self, name: str) -> ir.Node:
        if name not in self.trees:
            self.trees[name] = parse(str(self.derived[name]["expression"]))
        return self._expr(self.trees[name])

    def has_axes(self, n: ir.Node) -> bool:
        """Does ``n`` vary over instances (base counters not rolled up, or such metrics)?"""
        if isinstance(n, ir.Event):
            return True
        if isinstance(n, ir.Rollup):
            return False
        if isinstance(n, ir.Ref):
            if n.key not in self.axes:
                if n.key in self.busy:
                    raise ir.Unsupported(f"dependency cycle through `{n.key}`")
                self.busy.add(n.key)
                try:
                    self.axes[n.key] = self.has_axes(self.metric(n.key))
                finally:
                    self.busy.discard(n.key)
            return self.axes[n.key]
        return any(self.has_axes(c) for c in ir.children(n))

    def _expr(self, t) -> ir.Node:
        kind = t[0]
        if kind == "num":
            return ir.Num(t[1])
        if kind == "name":
            n = t[1]
            if n in self.derived:
                return ir.Ref(n)
            if n in self.base:
                return ir.Event(n)
            if n.islower() and re.match(r"^[a-z_]+$", n):
                return self._constant(n)
            raise ir.Unsupported(f"counter `{n}` is not defined for {'/'.join(self.cat.archs)}")
        if kind == "bin":
            a, b = self._expr(t[2]), self._expr(t[3])
            if t[1] in "-/" and not self.has_axes(a) and self.has_axes(b):
                # evaluate_ast.cpp swaps the operands so that the longer vector comes first, also for - and /
                self.cat.findings.append(
                    Finding(
                        "swapped-operands",
                        "",
                        f"`{t[1]}` of a single value and a vector: "
                        f"rocprofiler computes it with the operands swapped; kept so",
                    )
                )
                a, b = b, a
            if t[1] == "/":  # 0 when the divisor is 0 (evaluate_ast.cpp); a non-zero literal needs no guard
                return ir.Bin("/", a, b) if isinstance(b, ir.Num) and b.value != 0 else ir.SafeDiv(a, b)
            return ir.Bin(t[1], a, b)
        if kind == "reduce":
            e, op, dims = self._expr(t[1]), t[2], t[3]
            fn = {"sum": "sum", "avr": "avg", "min": "min", "max": "max"}.get(op)
            if fn is None:
                raise ir.Unsupported(f"reduce operation `{op}` is not sum, avr, min or max")
            if dims:
                raise ir.Unsupported(f"reduce over dimensions {dims} only: perfonto rolls up all instance axes at once")
            return ir.Rollup(fn, e) if self.has_axes(e) else e
        if kind == "select":
            raise ir.Unsupported(f"select({', '.join(t[2])}): perfonto's language cannot pick one instance")
        if kind == "accumulate":
            cname, mode = t[1], t[2]
            if cname not in self.base:
                raise ir.Unsupported(
                    f"accumulate of `{cname}`, which is not a base counter of {'/'.join(self.cat.archs)}"
                )
            ev = self.cat.events[cname]
            key = f"accumulate({cname},{mode})"
            self.cat.event(
                key,
                ev.block,
                f"{ev.name}_accum_{ident(mode)}",
                f"{cname} in accumulate mode {mode}: its level summed every cycle",
            )
            return ir.Event(key)
        raise ir.Unsupported(f"rocprofiler construct `{kind}` is not supported")  # pragma: no cover

    def _constant(self, name: str) -> ir.Node:
        if name not in self.cat.constants:
            value, why, prov = (
                AGENT_DEFAULTS.get(name, 0.0),
                "agent property read at run time; value assumed",
                "assumed",
            )
            if name not in AGENT_DEFAULTS:
                self.cat.findings.append(
                    Finding(
                        "unknown-property",
                        "",
                        f"agent property `{name}` is not known; 0 assumed "
                        f"(rocprofiler returns 0 for unknown properties)",
                    )
                )
            if name in self.overrides:
                value, why, prov = self.overrides[name], "given on the command line (--constant)", "claimed"
            self.cat.constants[name] = SourceConstant(
                name, ident(name), value, f"rocprofiler agent property {name}", why, prov, may_be_zero=True
            )  # get_agent_property returns 0 when unknown
        return ir.Const(name)
