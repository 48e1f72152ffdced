"""The emulator's named quantities (``emulator/data/quantities.yaml``) and the check of a generation's
emulator bindings against them.

A signal's ``emulator:`` binding in the ontology (``ontology.binding``) names quantities; this module
is the one list of what those names mean: each quantity's kind (``amount`` — grows during the run,
for ``linear`` bindings of counters; ``impulse`` — a whole count added when a step ends;
``level`` — held during each step, for gauges), unit and meaning. ``perfonto emulator-quantities``
prints it. The timeline's quantity axis and the op table's keys are built from it, so a quantity
cannot be listed without being computed, or computed without being listed (a test checks both).

``check_bindings(gen)`` returns every problem of ``gen``'s bindings as located diagnostics
(file:line:col of the name in the YAML, with a did-you-mean): a name the emulator does not know, a
name of the wrong kind (a level in a ``linear`` binding), or a unit that does not convert to the
signal's (seconds convert to cycles of the signal's clock domain).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path

import yaml
from perfonto.ontology import Diagnostic, Generation, ResolvedSignal
from perfonto.ontology.diagnostics import did_you_mean, with_source
from perfonto.ontology.errors import PerfontoError

DATA = Path(__file__).parent / "data"
KINDS = ("amount", "impulse", "level")


@dataclass(frozen=True)
class Quantity:
    """One named quantity of the emulator (see the module docstring)."""

    name: str
    kind: str
    unit: str
    meaning: str
    leader_only: bool = False
    per_link: bool = False

    def to_json(self) -> dict:
        return asdict(self)  # every field, in declaration order


@lru_cache(maxsize=None)
def registry() -> dict[str, Quantity]:
    """Every quantity of ``data/quantities.yaml`` by name, in file order.

    Raises:
        ValueError: a malformed entry (unknown kind, missing unit or meaning).
    """
    doc = yaml.safe_load((DATA / "quantities.yaml").read_text(encoding="utf-8"))
    out = {}
    for name, q in (doc.get("quantities") or {}).items():
        if not isinstance(q, dict) or q.get("kind") not in KINDS or not q.get("unit") or not q.get("meaning"):
            raise ValueError(
                f"emulator/data/quantities.yaml: `{name}` needs kind ({', '.join(KINDS)}), unit and meaning"
            )
        out[str(name)] = Quantity(
            str(name),
            q["kind"],
            str(q["unit"]),
            str(q["meaning"]),
            bool(q.get("leader_only", False)),
            bool(q.get("per_link", False)),
        )
    return out


def of_kind(kind: str) -> dict[str, Quantity]:
    """The quantities of one kind (``amount``, ``impulse`` or ``level``), in file order."""
    return {n: q for n, q in registry().items() if q.kind == kind}


_BINDING_KIND = {"linear": "amount", "impulse": "impulse", "gauge": "level"}
_A = {"amount": "an", "impulse": "an", "level": "a"}
_HOW = {"amount": "a `linear` binding", "impulse": "an `impulse` binding", "level": "a `gauge` binding"}


def unit_factor(gen: Generation, q_unit: str, sig: ResolvedSignal) -> float:
    """Multiplier from an amount in ``q_unit`` to ``sig``'s unit (seconds become cycles of the
    signal's clock domain).

    Raises:
        ValueError: the dimensions do not match.
    """
    reg = gen.registry
    q = reg.Quantity(1.0, q_unit)
    target = reg.Quantity(1.0, sig.unit)
    if q.dimensionality == reg.Quantity(1.0, "s").dimensionality and target.dimensionality != q.dimensionality:
        clock = gen.clock_domains[sig.clock]
        q = q * reg.Quantity(clock.value, clock.unit)
    try:
        return float(q.to(sig.unit).magnitude)
    except Exception:
        raise ValueError(f"signal `{sig.name}` is in {sig.unit_text}, but `{q_unit}` does not convert to it") from None


def check_bindings(gen: Generation) -> list[Diagnostic]:
    """Every problem of ``gen``'s emulator bindings with the quantities the emulator knows (see the
    module docstring), each a located error with the source line."""
    reg = registry()
    diags: list[Diagnostic] = []
    texts: dict[str, str | None] = {}

    def err(code, msg, span, hint=""):
        if span.file not in texts:
            try:
                texts[span.file] = Path(span.file).read_text(encoding="utf-8")
            except OSError:
                texts[span.file] = None
        diags.append(with_source(Diagnostic("error", code, msg, span, hint), texts[span.file]))

    def check(sig, qname, want, span):
        q = reg.get(qname)
        if q is None or q.kind != want:
            close = did_you_mean(qname, of_kind(want))
            if q is not None:
                msg = f"signal `{sig.name}`: `{qname}` is {_A[q.kind]} emulator {q.kind}, not {_A[want]} {want}"
                hint = f"name `{qname}` in {_HOW[q.kind]}" + (f"; {close}" if close else "")
            else:
                msg = f"signal `{sig.name}`: the emulator has no quantity `{qname}`"
                hint = close or "`perfonto emulator-quantities` lists the quantities"
            err("unknown-quantity", msg, span, hint)
            return
        try:
            unit_factor(gen, q.unit, sig)
        except ValueError:
            err(
                "unit-mismatch",
                f"signal `{sig.name}` is in {sig.unit_text}, but emulator quantity `{qname}` is in {q.unit}",
                span,
                f"bind a quantity in a unit that converts to {sig.unit_text}, or change the signal's unit",
            )

    for sig in gen.signals.values():
        b = sig.emulator
        if b is None:
            continue
        if b.kind == "linear":
            for (qname, _), span in zip(b.terms, b.term_spans):
                check(sig, qname, "amount", span)
        elif b.kind in ("impulse", "gauge"):
            check(sig, b.name, _BINDING_KIND[b.kind], b.name_span or b.span)
        elif b.kind == "events":
            try:
                unit_factor(gen, "event", sig)
            except ValueError:
                err(
                    "unit-mismatch",
                    f"signal `{sig.name}` counts random events but is in {sig.unit_text}",
                    b.span,
                    "give the signal `unit: event`",
                )
    return diags


class BindingError(PerfontoError, ValueError):
    """A generation's emulator bindings name quantities the emulator does not know (``diagnostics``)."""

    def __init__(self, diagnostics: list[Diagnostic]):
        self.diagnostics = list(diagnostics)
        super().__init__(
            "the generation's emulator bindings do not match the emulator's quantities:\n"
            + "\n".join(d.render() for d in self.diagnostics)
        )


__all__ = ["BindingError", "KINDS", "Quantity", "check_bindings", "of_kind", "registry", "unit_factor"]
