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
from fractions import Fraction
from importlib import resources
from typing import cast

import pint
from .errors import PerfontoError

_CYCLE_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


class UnitError(PerfontoError, ValueError):
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
    reg: pint.UnitRegistry = pint.UnitRegistry(None, autoconvert_offset_to_baseunit=False, cache_folder=None)
    text = resources.files("perfonto.ontology").joinpath("units.txt").read_text(encoding="utf-8")
    reg.load_definitions(text.splitlines())
    for domain in clock_domains:
        if not _CYCLE_NAME.match(domain):
            raise UnitError(f"clock domain {domain!r} is not a lower-case identifier")
        name = cycle_unit(domain)
        reg.define(f"{name} = [{name}] = _ = {domain}_cycles")
    _DOMAINS[id(reg)] = clock_domains
    return reg


_DOMAINS: dict[int, tuple[str, ...]] = {}  # id of each registry made by ``registry_for`` -> its clock domains


def _unit_of(domains: tuple[str, ...], text: str):
    return registry_for(domains).Unit(text)


def _quantity_of(domains: tuple[str, ...], magnitude, text: str):
    return registry_for(domains).Quantity(magnitude, text)


def pickle_reducer(obj):
    """How a pickler (``reducer_override``) stores pint objects of a registry of ``registry_for``: the
    registry as its clock domains, units and quantities as text in it, rebuilt in the same registry
    on load (pint's own pickling needs one application-wide registry). ``NotImplemented`` for other
    objects, and for pint objects of registries not made here."""
    if isinstance(obj, pint.UnitRegistry):
        if id(obj) in _DOMAINS:
            return (registry_for, (_DOMAINS[id(obj)],))
        return NotImplemented
    reg = getattr(obj, "_REGISTRY", None)
    if reg is None or id(reg) not in _DOMAINS:
        return NotImplemented
    if isinstance(obj, reg.Unit):
        return (_unit_of, (_DOMAINS[id(reg)], str(obj)))
    if isinstance(obj, reg.Quantity):
        return (_quantity_of, (_DOMAINS[id(reg)], obj.magnitude, str(obj.units)))
    return NotImplemented


# A unit expression: names, `%`, numbers, `*`, `/`, brackets, and `**` with a small integer exponent
# after a name or a bracket. pint evaluates unit strings as expressions, so anything else (e.g.
# `9 ** 9 ** 9`, which would never finish) is refused before it reaches pint.
_UNIT_TOKENS = re.compile(
    r"""\s*(?:
    (?P<name>[A-Za-zµ_][A-Za-z0-9µ_]*)
  | (?P<pct>%)
  | (?P<num>\d+(?:\.\d+)?(?:[eE][+-]?\d{1,3})?)
  | (?P<pow>\*\*\s*-?\d{1,2}(?!\d))
  | (?P<op>\*(?!\*)|/)
  | (?P<paren>[()])
)""",
    re.X,
)
_MAX_UNIT_LEN = 200


def _check_unit_text(text: str) -> None:
    if len(text) > _MAX_UNIT_LEN:
        raise UnitError(f"unit {text[:40]!r}… is longer than {_MAX_UNIT_LEN} characters")
    pos, prev = 0, None
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        m = _UNIT_TOKENS.match(text, pos)
        if not m or m.end() == pos:
            raise UnitError(
                f"unit {text!r}: unexpected {text[pos : pos + 10].strip()!r} (units are names, numbers, `*`, `/`, "
                "brackets, and `**` with an integer exponent after a name)"
            )
        kind = m.lastgroup
        if kind == "pow" and prev not in ("name", "paren", "pct"):
            raise UnitError(
                f"unit {text!r}: a power applies to a unit name or a bracket, not to a number or another power"
            )
        prev = kind
        pos = m.end()


def parse_unit(reg: pint.UnitRegistry, text: str) -> pint.Unit:
    """Parse ``text`` (``"GB/s"``, ``"%"``, ``"1"``) into a unit of ``reg``.

    An empty string or ``"1"`` means dimensionless. Cached per registry and text: pint parses each
    distinct unit expression once, however many metrics write it.

    Raises:
        UnitError: the text is not a unit of this registry (message names the text).
    """
    cache = _cache(reg, "parse")
    hit = cache.get(text)
    if hit is None:
        try:
            hit = cache[text] = _parse_unit(reg, text)
        except UnitError as exc:
            hit = cache[text] = exc
    if isinstance(hit, UnitError):
        raise UnitError(str(hit))
    return hit


def _cache(reg: pint.UnitRegistry, what: str) -> dict:
    """A memo table kept on the registry itself (so it lives and dies with the generation's registry)."""
    caches = reg.__dict__.setdefault("_perfonto_caches", {})
    return caches.setdefault(what, {})


def dimensionality(reg: pint.UnitRegistry, u: pint.Unit):
    """The dimensionality of ``u`` (cached per registry and unit)."""
    cache = _cache(reg, "dim")
    d = cache.get(u)
    if d is None:
        d = cache[u] = reg.Quantity(1, u).dimensionality
    return d


def is_rate(reg: pint.UnitRegistry, u: pint.Unit) -> bool:
    """True when ``u`` has time to a negative power (``B/s``, ``1/s``): a rate."""
    # pint types a dimension's exponent as any scalar, complex included; a unit's exponents are int or float
    return cast(float, reg.Quantity(1, u).dimensionality.get("[time]", 0)) < 0


def _parse_unit(reg: pint.UnitRegistry, text: str) -> pint.Unit:
    t = text.strip()
    if t in ("", "1"):
        return reg.dimensionless
    _check_unit_text(t)
    try:
        q = reg.parse_units(t)
    except Exception as exc:  # pint raises several exception types for bad input
        raise UnitError(f"unknown unit {text!r}: {exc}{_did_you_mean(reg, t)}") from None
    return q


def _did_you_mean(reg: pint.UnitRegistry, text: str) -> str:
    """ "; did you mean `cpu_cycle`?" for the first name of ``text`` that ``reg`` does not define: a cycle
    (``cycle``, ``cycles``, ``core_cycles``) is counted in a clock domain's ``<domain>_cycle``, so those are
    offered first; else the registry's closest unit names. "" when none is close."""
    import difflib

    cycles = [cycle_unit(d) for d in _DOMAINS.get(id(reg), ())]
    for name in re.findall(r"[A-Za-zµ_][A-Za-z0-9µ_]*", text):
        if _defined(reg, name):
            continue
        if re.search(r"cycles?$", name, re.I) and cycles:
            close = difflib.get_close_matches(name, cycles, n=3, cutoff=0.0)
        else:
            close = difflib.get_close_matches(name, list(reg), n=3, cutoff=0.75)  # the unit names, cycles included
        if close:
            return "; did you mean " + " or ".join(f"`{c}`" for c in close) + "?"
        return ""
    return ""


def _defined(reg: pint.UnitRegistry, name: str) -> bool:
    """Whether ``reg`` defines the unit ``name``; pint's own test parses it and raises on some names (``nan``:
    "cannot have a scaling factor"), which count as not defined."""
    try:
        return name in reg
    except Exception:  # pint raises several exception types for names it cannot parse
        return False


_NUMBER = re.compile(r"^\s*([+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)\s*(.*?)\s*$")


def parse_quantity(reg: pint.UnitRegistry, text, unit: pint.Unit | None = None) -> float:
    """A magnitude from ``"2 TB/s"``, ``"500 ms"``, ``"1e9"`` or a number, converted to ``unit`` when given.

    Only a number followed by a unit expression is accepted (pint alone would evaluate arbitrary
    arithmetic such as ``9 ** 9 ** 9``). The result is finite.

    Raises:
        UnitError: not a number with a unit, an unknown unit, a unit of another dimension, or not finite.
    """
    import math

    if isinstance(text, bool):
        raise UnitError(f"{text!r} is not a quantity")
    if isinstance(text, (int, float)):
        value, unit_text = float(text), ""
    else:
        m = _NUMBER.match(str(text))
        if not m:
            raise UnitError(f"{text!r} is not a number followed by a unit (e.g. `2 TB/s`, `500 ms`)")
        value, unit_text = float(m.group(1)), m.group(2)
    if not math.isfinite(value):
        raise UnitError(f"{text!r} is not finite")
    src = parse_unit(reg, unit_text)
    if unit is None:
        return value
    if not unit_text:
        return value  # a bare number is taken in the target unit
    out = value * conversion_factor(reg, src, unit)
    if not math.isfinite(out):
        raise UnitError(f"{text!r} overflows in {fmt_unit(unit)}")
    return out


def parse_quantity_exact(reg: pint.UnitRegistry, text, unit: pint.Unit) -> Fraction:
    """``parse_quantity`` as an exact fraction: the number as written (``"4611686018427400249 B"``
    keeps every digit; a float would round it past 2^53), times the conversion factor read as the
    decimal it prints as (1 for the same unit). For integer quantities such as a counter's wrap range.

    Raises:
        UnitError: as ``parse_quantity``.
    """
    parse_quantity(reg, text, unit)  # every check of the float path (syntax, unit, dimension, finite)
    if isinstance(text, (int, float)):
        return Fraction(repr(text)) if isinstance(text, float) else Fraction(text)
    m = _NUMBER.match(str(text))
    assert m is not None, "parse_quantity has checked the syntax"
    value = Fraction(m.group(1))
    if not m.group(2):
        return value
    factor = conversion_factor(reg, parse_unit(reg, m.group(2)), unit)
    return value if factor == 1.0 else value * Fraction(repr(factor))


def conversion_factor(reg: pint.UnitRegistry, src: pint.Unit, dst: pint.Unit) -> float:
    """Multiplier that converts a magnitude in ``src`` into ``dst``.

    Raises:
        UnitError: the units have different dimensions.
    """
    if src == dst:
        return 1.0
    cache = _cache(reg, "factor")
    key = (src, dst)
    hit = cache.get(key)
    if hit is None:
        try:
            hit = cache[key] = _conversion_factor(reg, src, dst)
        except UnitError as exc:
            hit = cache[key] = exc
    if isinstance(hit, UnitError):
        raise UnitError(str(hit))
    return hit


def _conversion_factor(reg: pint.UnitRegistry, src: pint.Unit, dst: pint.Unit) -> float:
    if not (reg.Quantity(1.0, src)._is_multiplicative and reg.Quantity(1.0, dst)._is_multiplicative):
        raise UnitError(
            f"cannot convert {fmt_unit(src)} to {fmt_unit(dst)}: an offset unit (°C) is not a scale of another "
            "unit; keep the signal's own unit"
        )
    try:
        return float(reg.Quantity(1.0, src).to(dst).magnitude)
    except pint.DimensionalityError:
        raise UnitError(f"cannot convert {fmt_unit(src)} to {fmt_unit(dst)}") from None
    except pint.errors.OffsetUnitCalculusError as exc:
        raise UnitError(str(exc)) from None


def is_interval_scale(u: pint.Unit) -> bool:
    """Whether ``u``'s zero is not its base unit's zero (degC, degF): differences of such readings have a
    meaning, ratios and percents of them do not."""
    reg = getattr(u, "_REGISTRY", None)
    return reg is not None and reg.Quantity(0.0, u).to_base_units().magnitude != 0


def fmt_number(x: float) -> str:
    """``x`` as the shortest text that reads back as the same float: plain (``repr``, a whole number
    without ``.0``) or in exponent form, whichever is shorter — ``1048576`` (``:g`` wrote 1.04858e+06,
    another number), ``1e+09``, ``1e-09``, ``3.35``."""
    x = float(x)
    text = repr(x)
    text = text[:-2] if text.endswith(".0") else text
    for k in range(17):
        exp = f"{x:.{k}e}"
        if float(exp) == x:
            return exp if len(exp) < len(text) else text
    return text


def fmt_unit(u: pint.Unit) -> str:
    """Short human form of a unit (``GB/s``, ``%``, ``1`` for dimensionless)."""
    cache = _cache(u._REGISTRY, "fmt")  # pint's formatter is slow, and a catalog has few distinct units
    hit = cache.get(u)
    if hit is None:
        if u.dimensionless and str(u) in ("dimensionless", ""):
            hit = "1"
        else:
            hit = f"{u:~}".replace(" ", "") or "1"
        cache[u] = hit
    return hit
