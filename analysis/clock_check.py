"""A run's time base checked against its clocks: the cycles the counters counted over the run's time.

A capture whose time stamps are read in the wrong unit (nanoseconds given as microseconds: every window
1,000 × too long) gives every rate 1,000 × too low and every utilisation still plausible-looking, with no
other sign. The clocks tell: no counter of a clock domain's cycles (``<domain>_cycle``) can advance faster
than the domain's frequency, and a free-running one (``seq.elapsed_cycles``) advances at it. So, per
domain with a declared frequency ``f`` (``clock_domains``), the fastest counter of its cycles over the
run — per chip and instance, run-level delta over the chip's time — is compared with ``f``:

- above ``HIGH × f``: impossible — the windows are shorter than the time that passed (time stamps in a
  coarser unit than they were written in, e.g. ns read as ms, or a wrong sample period);
- below ``LOW × f`` (and above 0): every cycle counter of the domain idle for 99 % or more of the run,
  or the windows longer than the time that passed (ns read as µs) — the note names both.

Either is a report note that names the domain, the counter, the rate against the clock and the unit
the time stamps were read in; never an error (a throttled clock or an idle block can be real).
"""

from __future__ import annotations

import numpy as np

from perfonto.ontology import kinds
from perfonto.ontology.units import cycle_unit

HIGH = 1.5  # a cycle counter may run this far above its declared clock (boost, rounding) before it is impossible
LOW = 0.01  # the fastest cycle counter of a domain below this share of the clock: idle, or the time base is off


def domain_counters(gen) -> dict[str, list[str]]:
    """{clock domain: the counters whose unit is its cycle unit}, for domains with a declared frequency."""
    out: dict[str, list[str]] = {}
    for d in gen.clock_domains:
        unit = cycle_unit(d)
        names = [
            n
            for n, s in gen.signals.items()
            if kinds.row_of(gen, n).run == "sum" and str(getattr(s, "unit", "")) == unit
        ]
        if names:
            out[d] = names
    return out


def top_rates(sums: list, wanted: set[str]) -> dict[str, float]:
    """{counter: its highest run-level rate over chips and instances, per second} for the counters of
    ``wanted`` in ``sums`` (``analysis.level_sums.ChipSums``, one per group of chips: each counter's delta
    over the windows where it is valid, over those windows' time); a counter with no finite rate is left out."""
    out: dict[str, float] = {}
    for cs in sums:
        seen: set[str] = set()  # a counter's first class of sums in this group is its own
        for entry in cs.sums.values():
            if entry is None:
                continue
            total, dt = entry
            for n in wanted & set(total) - seen:
                seen.add(n)
                v = np.asarray(total[n], dtype=np.float64)
                t = np.asarray(dt, dtype=np.float64).reshape(np.shape(dt) + (1,) * (v.ndim - 1))
                with np.errstate(invalid="ignore", divide="ignore"):
                    r = np.where(t > 0, v / t, np.nan)
                if np.isfinite(r).any():
                    out[n] = max(out.get(n, -np.inf), float(np.nanmax(r)))
    return out


def fastest(rate: dict[str, float], names: list[str]) -> tuple[str, float] | None:
    """(counter, its rate) of the fastest of ``names`` in ``rate`` (``top_rates``); None when none has one."""
    have = [(rate[n], n) for n in names if n in rate]
    if not have:
        return None
    r, n = max(have)
    return n, r


def _hertz(gen, domain: str) -> float | None:
    """The domain's declared frequency in cycles per second (declared as ``<domain>_cycle/s`` or in Hz)."""
    c = gen.clock_domains[domain]
    q = c.value * c.unit
    reg = gen.registry
    for target in (reg.Unit(cycle_unit(domain)) / reg.second, reg.hertz):
        try:
            return float(q.to(target).magnitude)
        except Exception:  # noqa: BLE001 - pint's DimensionalityError: the other form
            continue
    return None


def clock_notes(gen, sums: list, time_unit: str | None) -> list[str]:
    """The note of the module docstring, or none: ``sums`` the run's ``ChipSums`` (one per group of
    chips), ``time_unit`` the unit the time stamps were read in (None: nanoseconds, the collector
    format's). Of the domains, the one whose fastest cycle counter runs farthest above its clock is
    named when one does (impossible); else, when every domain's runs below ``LOW`` of its clock, the
    one nearest its clock (a free-running counter, if the catalog has one, tells the factor)."""
    read = time_unit or "ns"
    domains = domain_counters(gen)
    per = top_rates(sums, {n for names in domains.values() for n in names})
    seen = []  # (rate / clock, domain, counter, rate, clock)
    for d, names in domains.items():
        top, f = fastest(per, names), _hertz(gen, d)
        if top is not None and top[1] > 0 and f:
            seen.append((top[1] / f, d, top[0], top[1], f))
    if not seen:
        return []
    ratio, d, name, rate, f = max(seen)
    cyc = cycle_unit(d)
    if ratio > HIGH:
        return [
            f"`{name}` counted {rate:.4g} {cyc}/s, {ratio:.3g} × the {d} clock of {f / 1e9:.4g} GHz, which no "
            f"counter of that clock can: the windows are shorter than the time that passed — were the time "
            f"stamps, read as `{read}`, written in a coarser unit (--timestamp-unit, timestamp_unit=), or is the "
            f"sample period wrong? If so every rate of this run is {ratio:.3g} × too high"
        ]
    if ratio < LOW:
        return [
            f"the fastest cycle counter, `{name}`, counted {rate:.4g} {cyc}/s, {ratio:.3g} × the {d} clock of "
            f"{f / 1e9:.4g} GHz (every other clock's counters slower still): either the chip was idle "
            f"{(1 - ratio) * 100:.4g} % of the run, or the windows are longer than the time that passed — time "
            f"stamps read as `{read}` but written in a finer unit (--timestamp-unit, timestamp_unit=) make every "
            f"rate up to {1 / ratio:.3g} × too low"
        ]
    return []


__all__ = ["HIGH", "LOW", "clock_notes", "domain_counters", "fastest", "top_rates"]
