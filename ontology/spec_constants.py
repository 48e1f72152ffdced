"""The chip's constants of a generation: one ``spec.clock.<domain>`` per clock domain (its frequency in
``<domain>_cycle/s``) and the ``spec.<name>`` constants as written, each with its unit parsed and its
value and scope checked.

``ontology.generation.resolve`` calls ``resolve_constants`` first; the errors are located diagnostics.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import pint

from .diagnostics import Diagnostic
from .resolved import ResolvedConstant, Scope
from .units import UnitError, conversion_factor, cycle_unit, dimensionality, parse_unit

if TYPE_CHECKING:  # annotations only: a report's constant_record does not import pydantic's models
    from .model import GenerationFile
    from .yaml_source import YamlSource

# unit(text, location, what): the parsed unit, or None after reporting an unknown-unit error
UnitParser = Callable[[str, tuple, str], "pint.Unit | None"]


def resolve_constants(
    gf: GenerationFile,
    src: YamlSource,
    reg,
    diags: list[Diagnostic],
    unit: UnitParser,
    parent_units: dict[str, str] | None = None,
) -> tuple[dict[str, ResolvedConstant], dict[str, ResolvedConstant]]:
    """Every spec constant by full name (clock frequencies first), and the clock constants by domain.
    ``parent_units``: the unit each constant had in the parent chain (key without ``spec.``); an override
    in a unit of another dimension is an error at the override's unit (file:line:col), not at every
    metric that reads the constant."""
    spec: dict[str, ResolvedConstant] = {}
    clocks: dict[str, ResolvedConstant] = {}
    for dname, dom in gf.clock_domains.items():
        c = _clock_constant(dname, dom, src, reg, diags, unit)
        if c is not None:
            clocks[dname] = c
            spec[c.name] = c
    for cname, const in gf.spec.items():
        c = _spec_constant(gf, cname, const, spec, src, diags, unit)
        if c is not None and not _same_dimension(c, (parent_units or {}).get(cname), reg, src, diags):
            c = None
        if c is not None:
            spec[c.name] = c
    return spec, clocks


def _same_dimension(c: ResolvedConstant, parent_unit: str | None, reg, src: YamlSource, diags) -> bool:
    """Whether an override keeps the dimension of the constant it overrides (True for a new constant)."""
    if not parent_unit or parent_unit == c.unit_text:
        return True
    try:
        pu = parse_unit(reg, parent_unit)
    except UnitError:  # the parent's own unit error is reported where the parent declares it
        return True
    if dimensionality(reg, pu) == dimensionality(reg, c.unit):
        return True
    _error(
        diags,
        "unit-mismatch",
        f"spec constant `{c.name}` overrides the parent's, which is in {parent_unit}, with {c.unit_text}: "
        "another dimension, which every metric reading it would inherit",
        src.span(("spec", c.name.removeprefix("spec."), "unit")),
        f"give the value in a unit convertible to {parent_unit}, or name a new constant for the new quantity",
    )
    return False


def _clock_constant(dname: str, dom, src: YamlSource, reg, diags: list[Diagnostic], unit: UnitParser):
    """`spec.clock.<domain>`: the domain's frequency in cycles per second, or None after an error."""
    loc = ("clock_domains", dname, "frequency")
    u = unit(dom.frequency.unit, loc + ("unit",), f"clock domain `{dname}`")
    if u is None:
        return None
    if not (dom.frequency.value > 0):
        _error(
            diags,
            "spec-value",
            f"clock domain `{dname}` frequency must be positive, got {dom.frequency.value}",
            src.span(loc + ("value",)),
            "give the clock frequency, e.g. `value: 1.5, unit: GHz`",
        )
        return None
    try:
        hz = dom.frequency.value * conversion_factor(reg, u, reg.hertz)
    except UnitError as exc:
        _error(
            diags,
            "unit-mismatch",
            f"clock domain `{dname}` frequency: {exc}",
            src.span(loc + ("unit",)),
            "give the frequency in Hz, MHz or GHz",
        )
        return None
    cu = reg.parse_units(f"{cycle_unit(dname)}/s")
    return ResolvedConstant(
        f"spec.clock.{dname}",
        hz,
        cu,
        f"{cycle_unit(dname)}/s",
        dom.frequency.provenance.value,
        dom.frequency.source,
        dom.description or f"{dname} clock frequency",
        Scope.chip,
        src.span(loc),
    )


def _spec_constant(
    gf: GenerationFile, cname: str, const, spec: dict, src: YamlSource, diags: list[Diagnostic], unit: UnitParser
):
    """`spec.<cname>` as written, or None after an error (name taken, unit, value, scope)."""
    loc = ("spec", cname)
    full = f"spec.{cname}"
    if full in spec:
        _error(
            diags,
            "duplicate-name",
            f"spec constant `{full}` is also defined by a clock domain",
            src.span(loc + ("<key>",)),
            "clock frequencies are spec.clock.<domain>; rename this constant",
        )
        return None
    u = unit(const.unit, loc + ("unit",), f"spec constant `{full}`")
    if u is None:
        return None
    if not u.dimensionless and not (const.value > 0):
        _error(
            diags,
            "spec-value",
            f"spec constant `{full}` must be positive, got {const.value} {const.unit}",
            src.span(loc + ("value",)),
            "peaks, bandwidths, capacities and powers are positive figures",
        )
        return None
    if const.scope is Scope.instance and not _instance_scope_ok(gf, cname, full, loc, src, diags):
        return None
    return ResolvedConstant(
        full,
        const.value,
        u,
        const.unit,
        const.provenance.value,
        const.source,
        const.description,
        const.scope,
        src.span(loc),
        const.precision,
        const.sparsity.value if const.sparsity else None,
    )


def constant_record(c: ResolvedConstant) -> dict:
    """What a report records of a spec constant a value used (``report.json``'s ``constants``):
    ``value`` in ``unit`` (as the catalog writes it), ``provenance`` (measured, claimed, estimated or
    assumed), ``source``, ``scope`` and ``where`` (the catalog file's name and line that set it: a child
    generation's override names the child)."""
    from pathlib import Path

    return {
        "value": c.value,
        "unit": c.unit_text,
        "provenance": c.provenance,
        "source": c.source,
        "scope": c.scope.value,
        "where": f"{Path(c.span.file).name}:{c.span.line}" if c.span.file else "",
    }


def _error(diags: list[Diagnostic], code: str, message: str, span, hint: str) -> None:
    """Report an error diagnostic (``code``, located at ``span``, with a ``hint``)."""
    diags.append(Diagnostic("error", code, message, span, hint=hint))


def _instance_scope_ok(gf: GenerationFile, cname: str, full: str, loc: tuple, src: YamlSource, diags) -> bool:
    """A per-instance constant is named after a block with instances; False after reporting it is not."""
    blk = gf.blocks.get(cname.split(".")[0])
    if blk is not None and blk.instances:
        return True
    _error(
        diags,
        "scope",
        f"spec constant `{full}` has scope `instance` but `{cname.split('.')[0]}` is not a block with instances",
        src.span(loc + ("scope",)),
        "name per-instance constants after their block, e.g. `hbm.stack_peak_bandwidth`",
    )
    return False
