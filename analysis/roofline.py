"""The roofline of a generation and where each op class sits on it.

Roofline model (Williams, Waterman & Patterson, "Roofline: an insightful visual performance model
for multicore architectures", CACM 52(4), 2009): a kernel of arithmetic intensity ``I`` (FLOP per
byte of memory traffic) attains at most ``min(P, I × B)`` FLOP/s, with ``P`` the compute ceiling
and ``B`` the memory bandwidth ceiling; the *ridge point* ``P / B`` separates the memory-bound side
(``I < P/B``) from the compute-bound side.

Ceilings come from the generation's spec constants: one compute ceiling per dense peak FLOP rate
of the matrix engine (``spec.mxu.peak_flops_<precision>``, one per dtype) and the vector unit
(``spec.vpu.peak_flops``); memory ceilings from ``spec.hbm.peak_bandwidth`` and
``spec.sram.peak_bandwidth``. All per chip.

An op class's position (from the attributed counters, ``analysis.attribution``): its *work* is its
matrix FLOPs (the ``mxu`` block's FLOP counters, every precision) or, for an op without matrix work,
its vector FLOPs (``vpu``); intensity ``I`` = work ÷ HBM bytes (the ``hbm`` block's byte counters,
read + write); performance = work ÷ span time summed over chips (FLOP/s of one chip while the op
runs). Its compute ceiling is that of its dominant precision (the vector ceiling for vector work).
Work counts only where it is ``significant`` (above its attribution error estimate).
``efficiency`` = performance ÷ ``min(P, I × B_HBM)``. A collective (an all-reduce's reduction) is
placed against the link roof instead: intensity = work ÷ transmitted link bytes (the ``c2c`` block),
``B`` = ``spec.c2c.peak_bandwidth`` — its time is set by the links, and against HBM it would look
like an HBM-bound op far below its roof. Ops that do no floating-point work (host transfers, a pure
gather) have no position.

An op class whose figures the windows do not pin down (``determined`` false, ``undetermined`` naming what)
gets no work, FLOPs, position or top-down bound (its cycle counters are split by the same windows): an
amount is pinned when its attribution error estimate is at most ``PINNED`` of it, or when even the amount
plus its estimate is under ``PINNED`` of what an op of its time would carry at the run's mean rate (a
norm's stray matrix FLOPs). Where op classes' time shares move together in every window (steps all alike,
as under a closed loop) the estimate is several times the amount (``analysis.separability``) and a point
on the roofline would be a guess. Its ``side`` is left out too (``undetermined``: ``side``) where the
intensity's range within the estimates lies across the ridge point.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from perfonto.ontology import kinds

from .attribution import GroupTotals
from .spans import NO_SPAN

#: an attributed amount is pinned down when its error estimate is at most this share of it (module docstring)
PINNED = 0.5
#: memory ceilings: block -> (spec constant, label)
MEMORY = {"hbm": ("spec.hbm.peak_bandwidth", "HBM"), "sram": ("spec.sram.peak_bandwidth", "SRAM")}
#: the link roof: a collective's bytes go over the chip-to-chip links (the chip's total transmit peak)
LINK = ("c2c", "spec.c2c.peak_bandwidth", "C2C links")


def _dim(gen, unit_text: str, ref: str) -> bool:
    reg = gen.registry
    try:
        return reg.Quantity(1.0, unit_text).dimensionality == reg.Quantity(1.0, ref).dimensionality
    except Exception:
        return False


def signal_sets(gen) -> dict:
    """The counters behind the roofline: ``matrix_flops`` (block ``mxu``, FLOP), ``vector_flops``
    (``vpu``, FLOP), ``hbm_bytes`` and ``sram_bytes`` (bytes), and ``by_precision`` {dtype:
    [matrix FLOP counters]}."""
    out = {
        "matrix_flops": [],
        "vector_flops": [],
        "hbm_bytes": [],
        "sram_bytes": [],
        "link_bytes": [],
        "by_precision": {},
    }
    for name, s in gen.signals.items():
        if kinds.of(s).window != "increase":
            continue
        if s.block == "mxu" and _dim(gen, s.unit_text, "FLOP"):
            out["matrix_flops"].append(name)
            out["by_precision"].setdefault(s.precision or "", []).append(name)
        elif s.block == "vpu" and _dim(gen, s.unit_text, "FLOP"):
            out["vector_flops"].append(name)
        elif s.block in ("hbm", "sram") and _dim(gen, s.unit_text, "B"):
            out[f"{s.block}_bytes"].append(name)
        elif s.block == LINK[0] and _dim(gen, s.unit_text, "B") and "rx" not in name.rsplit(".", 1)[-1]:
            out["link_bytes"].append(name)  # transmitted bytes: what the link roof bounds
    return out


def ceilings(gen) -> list[dict]:
    """Compute and memory ceilings of ``gen`` (per chip): ``name``, ``kind`` (compute | memory),
    ``value`` (FLOP/s or B/s), ``unit``, ``spec``, and ``precision`` for matrix peaks. Sparse peaks
    are left out (the counters count dense work)."""
    reg = gen.registry
    out = []
    for name, c in gen.spec.items():
        sparsity = getattr(getattr(c, "sparsity", None), "value", getattr(c, "sparsity", None))
        if sparsity == "sparse" or not _dim(gen, c.unit_text, "FLOP/s"):
            continue
        value = float(reg.Quantity(c.value, c.unit).to("FLOP/s").magnitude)
        if name.startswith("spec.mxu.") and c.precision:
            out.append(
                {
                    "name": c.precision.upper(),
                    "kind": "compute",
                    "value": value,
                    "unit": "FLOP/s",
                    "spec": name,
                    "precision": c.precision,
                }
            )
        elif name.startswith("spec.vpu."):
            out.append(
                {"name": "vector", "kind": "compute", "value": value, "unit": "FLOP/s", "spec": name, "precision": None}
            )
    out.sort(key=lambda d: -d["value"])
    for kind, (spec, label) in [("memory", v) for v in MEMORY.values()] + [("link", LINK[1:])]:
        c = gen.spec.get(spec)
        if c is not None and _dim(gen, c.unit_text, "B/s"):
            out.append(
                {
                    "name": label,
                    "kind": kind,
                    "value": float(reg.Quantity(c.value, c.unit).to("B/s").magnitude),
                    "unit": "B/s",
                    "spec": spec,
                    "precision": None,
                }
            )
    return out


def _amount(totals: GroupTotals, names: list[str], k, gen, unit: str, what: str = "sums") -> float:
    """Sum of ``names``' attributed amounts (or error ``estimate``) of group ``k`` (an index, or
    ``slice(None)`` for all groups) in ``unit``."""
    reg = gen.registry
    total = 0.0
    for n in names:
        src = getattr(totals, what)
        if n in src:
            total += float(
                reg.Quantity(float(np.sum(np.asarray(src[n])[k])), gen.signals[n].unit_text).to(unit).magnitude
            )
    return total


def significant(amount: float, estimate: float, total: float) -> bool:
    """Attributed work counts as the op's own when its error estimate is under ``PINNED`` of it (the rule
    that pins an amount, ``_unpinned``) and it is over 0.01 % of the run's total: windowed attribution
    leaks a little of the neighbours' work into ops that do none (a norm never runs the matrix engine)."""
    return estimate < PINNED * amount and amount > 1e-4 * total


def op_rows(gen, totals: GroupTotals, bound: list | None = None) -> list[dict]:
    """One row per op class of an ``op`` grouping, by time (longest first; ``(no span)`` left out):
    ``op``, ``time_s`` (summed over chips), ``time_share`` (of all chips' time), ``spans``, ``work``
    (``matrix``, ``vector`` or None), ``precision``, ``flops`` (FLOP), ``hbm_bytes`` (B),
    ``intensity`` (FLOP/B), ``flops_per_s`` (FLOP/s per chip), ``ceiling`` and ``peak`` (FLOP/s),
    ``ridge`` (FLOP/B), ``attainable`` (FLOP/s), ``efficiency`` (fraction of attainable), ``side``
    (memory | link | compute) and ``bound`` (the dominant top-down node, from ``bound``); ``roof`` (``HBM``,
    or ``link`` for a collective: an op whose transmitted link bytes at the link peak take longer than its
    HBM bytes at the HBM peak, placed at FLOP per link byte against the link roof), ``link_bytes`` (B),
    ``link_bytes_per_s`` and ``link_utilization`` (of the link peak, collectives only); ``determined`` and
    ``undetermined`` (what the windows do not pin down: ``hbm_bytes``, ``matrix_flops``, ``vector_flops`` —
    then work, FLOPs, the position and the top-down bound are None — or ``side``, module docstring)."""
    run = _run(gen, totals)
    rows = [_op_row(run, k, label, bound) for k, label in enumerate(totals.groups) if label != NO_SPAN]
    rows.sort(key=lambda r: -r["time_s"])
    return rows


@dataclass
class _Run:
    """What each op's row reads: the generation, the attributed totals, the roofline's counters
    (``signal_sets``) and ceilings, the HBM and link peaks (B/s), all chips' time (s) and the run's
    matrix and vector FLOPs and link bytes."""

    gen: Any
    totals: GroupTotals
    sets: dict
    cs: list[dict]
    hbm: float | None
    link_peak: float | None
    total_time: float
    all_mat: float
    all_vec: float
    all_link: float
    all_hbm: float


def _run(gen, totals: GroupTotals) -> _Run:
    """The ``_Run`` of ``gen``'s roofline over the attributed ``totals``."""
    sets = signal_sets(gen)
    cs = ceilings(gen)
    return _Run(
        gen,
        totals,
        sets,
        cs,
        next((c["value"] for c in cs if c["name"] == "HBM"), None),
        next((c["value"] for c in cs if c["kind"] == "link"), None),
        float(np.sum(totals.time_s)),
        _amount(totals, sets["matrix_flops"], slice(None), gen, "FLOP"),
        _amount(totals, sets["vector_flops"], slice(None), gen, "FLOP"),
        _amount(totals, sets["link_bytes"], slice(None), gen, "B"),
        _amount(totals, sets["hbm_bytes"], slice(None), gen, "B"),
    )


def _op_row(run: _Run, k: int, label: str, bound: list | None) -> dict:
    """Op class ``k``'s row (``op_rows``): its work, bytes and link bytes, then its place on the roofline."""
    totals, gen = run.totals, run.gen
    t = float(totals.time_s[k])
    work, flops, prec = _work(run, k)
    byts = _amount(totals, run.sets["hbm_bytes"], k, gen, "B")
    link, link_ok = _significant_amount(run, "link_bytes", k, "B", run.all_link)
    row = {
        "op": label,
        "time_s": t,
        "time_share": t / run.total_time if run.total_time > 0 else None,
        "spans": int(totals.spans[k]),
        "work": work,
        "precision": prec,
        "flops": flops if work else 0.0,
        "hbm_bytes": byts,
        "intensity": None,
        "flops_per_s": None,
        "ceiling": None,
        "peak": None,
        "ridge": None,
        "attainable": None,
        "efficiency": None,
        "side": None,
        "bound": bound[k] if bound else None,
        "roof": None,
        "link_bytes": link if link_ok else 0.0,
        "link_bytes_per_s": None,
        "link_utilization": None,
        "determined": True,
        "undetermined": [],
    }
    loose = _unpinned(run, k, work)
    if loose:  # the windows do not tell this op's work or bytes from its neighbours': no place on the roofline
        row.update(work=None, precision=None, flops=None, bound=None, determined=False, undetermined=loose)
        return row
    # a collective: its link bytes at the link peak take longer than its HBM bytes at the HBM peak,
    # so the link roof is the one that bounds it (an all-reduce reads and writes HBM too)
    hbm, link_peak = run.hbm, run.link_peak
    collective = bool(work) and link_ok and bool(link_peak) and bool(hbm) and link / link_peak >= byts / hbm
    _place(row, run, flops, byts, link, collective, _ceiling(run.cs, work, prec))
    if row["side"] is not None and not collective and _across_ridge(run, k, row, flops, byts):
        row.update(side=None, determined=False, undetermined=["side"])
    return row


def _unpinned(run: _Run, k: int, work: str | None) -> list[str]:
    """The ``signal_sets`` entries of op class ``k`` that the windows do not pin down (module docstring),
    where that leaves its row undetermined: the matrix FLOPs of an op not found doing matrix work (or the
    vector FLOPs of one found doing neither), or the HBM bytes of an op found doing work (its intensity's
    denominator) — significant work has an estimate under half of it, so it is pinned. An op with no work
    and no doubt about it keeps its row whatever its bytes (a host transfer). Empty when determined."""
    share = float(run.totals.time_s[k]) / run.total_time if run.total_time > 0 else 0.0
    check = [("hbm_bytes", "B", run.all_hbm)]
    if work != "matrix":
        check.append(("matrix_flops", "FLOP", run.all_mat))
    if work is None:
        check.append(("vector_flops", "FLOP", run.all_vec))
    out = []
    for key, unit, total in check:
        amount = _amount(run.totals, run.sets[key], k, run.gen, unit)
        est = _amount(run.totals, run.sets[key], k, run.gen, unit, "estimate")
        if not (est <= PINNED * amount or amount + est <= PINNED * share * total):
            out.append(key)
    if work is None and out == ["hbm_bytes"]:
        return []  # no work, and no doubt about that: its bytes place it nowhere
    return out


def _across_ridge(run: _Run, k: int, row: dict, flops: float, byts: float) -> bool:
    """Whether op ``k``'s intensity, with its ``flops`` and HBM ``byts`` each anywhere within their error
    estimates, can lie on either side of its ridge point."""
    key = "matrix_flops" if row["work"] == "matrix" else "vector_flops"
    ef = _amount(run.totals, run.sets[key], k, run.gen, "FLOP", "estimate")
    eb = _amount(run.totals, run.sets["hbm_bytes"], k, run.gen, "B", "estimate")
    lo = (flops - ef) / (byts + eb) if byts + eb > 0 else np.inf
    hi = (flops + ef) / (byts - eb) if byts > eb else np.inf
    return bool(lo < row["ridge"] <= hi)


def _significant_amount(run: _Run, counters: str, k: int, unit: str, total: float) -> tuple[float, bool]:
    """Op class ``k``'s amount of a ``signal_sets`` entry in ``unit``, and whether it is ``significant``
    against its error estimate and the run's ``total``."""
    names = run.sets[counters]
    amount = _amount(run.totals, names, k, run.gen, unit)
    return amount, significant(amount, _amount(run.totals, names, k, run.gen, unit, "estimate"), total)


def _work(run: _Run, k: int) -> tuple[str | None, float, str | None]:
    """(work: ``matrix`` where its matrix FLOPs are significant, else ``vector`` where its vector FLOPs
    are, else None; the FLOPs of that work; the dominant precision of matrix work)."""
    mat, mat_ok = _significant_amount(run, "matrix_flops", k, "FLOP", run.all_mat)
    vec, vec_ok = _significant_amount(run, "vector_flops", k, "FLOP", run.all_vec)
    work = "matrix" if mat_ok else ("vector" if vec_ok else None)
    flops = mat if work == "matrix" else vec
    prec = None
    if work == "matrix":
        per = {p: _amount(run.totals, names, k, run.gen, "FLOP") for p, names in run.sets["by_precision"].items()}
        prec = max(per, key=per.get) or None
    return work, flops, prec


def _place(row: dict, run: _Run, flops: float, byts: float, link: float, collective: bool, ceil: dict | None) -> None:
    """A row's place on the roofline: its roof (HBM, or the links for a collective), FLOP/s, intensity,
    compute ceiling and ridge, attainable FLOP/s, side and efficiency."""
    work, t = row["work"], row["time_s"]
    roof, bw, moved = ("link", run.link_peak, link) if collective else ("HBM", run.hbm, byts)
    if work:
        row["roof"] = roof
    if collective and t > 0:
        row["link_bytes_per_s"] = link / t
        row["link_utilization"] = link / t / run.link_peak
    if work and t > 0:
        row["flops_per_s"] = flops / t
    if work and moved > 0:
        row["intensity"] = flops / moved
    if ceil is not None and bw:
        row["ceiling"], row["peak"], row["ridge"] = ceil["name"], ceil["value"], ceil["value"] / bw
        if row["intensity"] is not None:
            att = min(ceil["value"], row["intensity"] * bw)
            row["attainable"] = att
            row["side"] = ("link" if collective else "memory") if row["intensity"] * bw < ceil["value"] else "compute"
            if row["flops_per_s"] is not None and att > 0:
                row["efficiency"] = row["flops_per_s"] / att


def _ceiling(cs: list[dict], work: str | None, precision: str | None) -> dict | None:
    compute = [c for c in cs if c["kind"] == "compute"]
    if work == "vector":
        return next((c for c in compute if c["name"] == "vector"), None)
    if work == "matrix":
        exact = next((c for c in compute if c["precision"] == precision), None)
        return exact or next((c for c in compute if c["precision"]), None)
    return None


__all__ = ["MEMORY", "PINNED", "ceilings", "op_rows", "signal_sets"]
