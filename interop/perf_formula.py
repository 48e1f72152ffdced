"""The formulas of a perf metrics file (``MetricExpr``) as ``interop.ir`` trees: the part of the perf
importer's reader (``interop.perf``) that translates perf's expression language; its semantics are
listed in ``interop.perf``'s docstring."""

from __future__ import annotations

from abc import ABC, abstractmethod

from . import ir
from .catalog import SourceCatalog, SourceConstant
from .exprparse import SBin, SCall, SId, SIf, SLit, SNeg, SNum, perf_symbol
from .names import ident
from .perf_tables import LITERAL_DEFAULTS


class Formulas(ABC):
    """perf's expression language, for ``interop.perf``'s reader (which gives ``cat``, ``overrides``,
    ``const_metrics``, ``lower``, and implements the hooks ``_event`` and ``_instances``)."""

    cat: SourceCatalog
    overrides: dict[str, float]
    const_metrics: dict[str, str]  # lower-case name -> constant key
    lower: dict[str, str]  # lower-case name -> metric key

    @abstractmethod
    def _event(self, raw: str, default_pmu: str) -> ir.Node:
        """An event of a formula as an input node (the reader's: it knows the file's events)."""

    @abstractmethod
    def _instances(self, key: str) -> int | None:
        """How many instances a metric's events have, None where unknown (the reader's)."""

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
            return self._source_count(t, pmu)
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

    def _source_count(self, t: SCall, pmu: str) -> ir.Num:
        """``source_count(ev)``: the number of PMU instances perf aggregated into ``ev`` — known for the
        events of a generation and of perfonto's own export (their instance axes); an event of any other
        perf file has no instance count in the file, and the metric is rejected rather than read with 1."""
        if len(t.args) != 1:
            raise ir.Unsupported("perf `source_count` takes one event")
        arg = t.args[0].name if isinstance(t.args[0], SId) else "…"
        keys = sorted(ir.leaves(self._expr(t.args[0], pmu), ir.Event))
        if not keys:
            raise ir.Unsupported(f"perf `source_count({arg})` names no event")
        n = self._instances(keys[0])
        if n is None:
            raise ir.Unsupported(
                f"perf `source_count({arg})` is the number of PMU instances (uncore PMUs, or CPUs under "
                "`perf stat -a`) counted into the event, which the file does not give (its events have no instance "
                "axis): not translated, rather than read as 1"
            )
        return ir.Num(float(n))

    def _per_source(self, t: SBin, pmu: str, num) -> ir.Node:
        """``x / source_count(x)``: the mean over the PMU instances summed into ``x``."""
        left = num(t.left)
        inner = _unsum(left)
        keys = ir.leaves(inner, ir.Event) if inner is not None else set()
        by_data = any(n == "from_data" for k in keys if k in self.cat.events for n in self.cat.events[k].axes.values())
        single = inner is not None and len({self.cat.events[k].block for k in keys}) == 1
        if inner is not None and single and by_data:  # as many packages as the capture has
            return ir.Rollup("avg", inner)
        assert isinstance(t.right, SCall)  # the caller's test
        count = self._source_count(t.right, pmu)
        if inner is not None and single and count.value > 1:
            return ir.Rollup("avg", inner)
        return ir.Bin("/", left, count)


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
