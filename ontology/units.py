"""The project's unit registry (pint), with the field's own base dimensions.

pint's stock registry treats bytes, FLOPs and cycles as plain counts, so it cannot tell cycles per
instruction from a ratio. perfonto loads ``units.txt`` into an *empty* registry with explicit base
dimensions ``[byte]``, ``[flop]``, ``[token]``, ``[request]``, ``[instruction]`` and adds one cycle unit
per clock domain (``core_cycle`` with dimension ``[core_cycle]``) so that mixing core cycles with HBM
cycles is a dimension error.
"""
from __future__ import annotations

import functools
import re
from importlib import resources

import pint

_CYCLE_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


class UnitError(ValueError):
    """A unit string that does not parse, or a clock domain name that is not a valid identifier."""


def cycle_unit(domain: str) -> str:
    """Name of the cycle unit of clock domain ``domain`` (``core`` → ``core_cycle``)."""
    return f"{domain}_cycle"


@functools.lru_cache(maxsize=64)
def registry_for(clock_domains: tuple[str, ...] = ()) -> pint.UnitRegistry:
    """A fresh registry with perfonto's units and one ``<domain>_cycle`` unit per clock domain.

    Registries are cached per tuple of clock domains; quantities from different registries must not
    be mixed, so callers obtain the registry once per compiled generation.

    Raises:
        UnitError: a clock domain name is not a lower-case identifier.
    """
    reg = pint.UnitRegistry(None, autoconvert_offset_to_baseunit=False, cache_folder=None)
    text = resources.files("ontology").joinpath("units.txt").read_text(encoding="utf-8")
    reg.load_definitions(text.splitlines())
    for domain in clock_domains:
        if not _CYCLE_NAME.match(domain):
            raise UnitError(f"clock domain {domain!r} is not a lower-case identifier")
        name = cycle_unit(domain)
        reg.define(f"{name} = [{name}] = _ = {domain}_cycles")
    return reg


def parse_unit(reg: pint.UnitRegistry, text: str) -> pint.Unit:
    """Parse ``text`` (``"GB/s"``, ``"%"``, ``"1"``) into a unit of ``reg``.

    An empty string or ``"1"`` means dimensionless.

    Raises:
        UnitError: the text is not a unit of this registry (message names the text).
    """
    t = text.strip()
    if t in ("", "1"):
        return reg.dimensionless
    try:
        q = reg.parse_units(t)
    except Exception as exc:  # pint raises several exception types for bad input
        raise UnitError(f"unknown unit {text!r}: {exc}") from None
    return q


def conversion_factor(reg: pint.UnitRegistry, src: pint.Unit, dst: pint.Unit) -> float:
    """Multiplier that converts a magnitude in ``src`` into ``dst``.

    Raises:
        UnitError: the units have different dimensions.
    """
    if src == dst:
        return 1.0
    try:
        return float(reg.Quantity(1.0, src).to(dst).magnitude)
    except pint.DimensionalityError:
        raise UnitError(f"cannot convert {fmt_unit(src)} to {fmt_unit(dst)}") from None
    except pint.errors.OffsetUnitCalculusError as exc:
        raise UnitError(str(exc)) from None


def fmt_unit(u: pint.Unit) -> str:
    """Short human form of a unit (``GB/s``, ``%``, ``1`` for dimensionless)."""
    if u.dimensionless and str(u) in ("dimensionless", ""):
        return "1"
    s = f"{u:~}"
    return s.replace(" ", "") or "1"
