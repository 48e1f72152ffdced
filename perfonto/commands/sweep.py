"""``perfonto sweep``: vary spec constants and workload knobs over ranges or lists (``whatif.knobs``
gives the syntax), project every point in parallel, mark where the bottleneck changes."""

from __future__ import annotations

import json

from . import HELP
from .common import CommandError, file_force_option, positive_int, stdout


def register(sub) -> None:
    from perfonto.whatif.cliargs import add_output_args, add_workload_args

    p = sub.add_parser("sweep", help=HELP["sweep"])
    p.add_argument(
        "--vary",
        action="append",
        default=[],
        metavar="NAME=VALUES",
        help="a knob and its values: spec.hbm.peak_bandwidth=4..16TB/s:7, isl=128,2048, "
        "concurrency=1..256:9:log, model=llama-3.1-8b,llama3-70b (repeat for a grid)",
    )
    add_workload_args(p)
    add_output_args(p, "the table")
    p.add_argument(
        "--tol", type=float, default=0.005, help="relative width to which a crossing is bisected (default: 0.005)"
    )
    p.add_argument(
        "--max-points", type=positive_int, default=1000, help="refuse a grid of more points than this (default: 1000)"
    )
    file_force_option(p)
    p.set_defaults(func=cmd_sweep)


def cmd_sweep(args) -> int:
    from perfonto.whatif.cliargs import base_point, cache_of, check_outputs, target_of, write_outputs
    from perfonto.whatif.knobs import KnobError, parse_vary
    from perfonto.whatif.plots import sweep_figure
    from perfonto.whatif.points import ROW_UNITS, base_generation
    from perfonto.whatif.sweep import sweep

    from .project import EmuProgress

    if not (0 < args.tol < 1):
        raise CommandError(f"--tol must be between 0 and 1 (a relative width), got {args.tol}", 2)
    try:
        target = target_of(args.generation, args.catalog)
        gen = base_generation(target)
        knobs = [parse_vary(v, gen) for v in args.vary]
        base = base_point(args)
        if not knobs:
            raise KnobError(
                "nothing to sweep: give at least one --vary NAME=VALUES (e.g. --vary "
                "spec.hbm.peak_bandwidth=4..16TB/s:7)"
            )
        for k in knobs:
            if k.name in dict(base.workload):
                raise KnobError(f"--vary {k.name} and --{k.name.replace('_', '-')} both set {k.name}; give one")
        check_outputs(args)
    except KnobError as exc:
        raise CommandError(str(exc), 2) from None
    cache = cache_of(args)
    try:
        with EmuProgress(f"sweeping {len(knobs)} knob(s)", enabled=not args.json, after_s=0.5) as bar:
            res = sweep(
                target, base, knobs, jobs=args.jobs, cache=cache, progress=bar, tol=args.tol, max_points=args.max_points
            )
    except KnobError as exc:
        raise CommandError(str(exc), 2) from None
    ok = [r for r in res.rows if not r.get("error")]
    if not ok:
        raise CommandError(f"no point of the sweep could be projected; the first: {res.rows[0]['error']}", 1)
    units = res.units() | dict(ROW_UNITS)  # the knobs' (spec.hbm.peak_bandwidth: TB/s; a clock: GHz), the figures'
    outputs = write_outputs(args, res.shown_rows, lambda path: sweep_figure(res, path), units, headed=set(res.units()))
    figure, notes = _notes(res, set(dict(base.workload)))
    doc = {
        "generation": gen.name,
        **res.to_json(),
        "outputs": outputs,
        "units": units,
        "cache": {"folder": str(cache.folder) if cache.folder else None, "hits": cache.hits},
        "failed_points": len(res.rows) - len(ok),
        "table_figure": figure[0],
        "notes": notes,
    }
    if args.json:
        print(json.dumps(doc, indent=2, default=str))
        return 0
    _render(res, gen.name, outputs, figure, notes)
    stdout().print(_cache_line(cache), markup=False, highlight=False, soft_wrap=True)
    return 0


def _cache_line(cache) -> str:
    """What the sweep took from perfonto's cache of projected points (the text said nothing of it): how many
    projections it read (the grid's points and those of the crossings' bisection), and whether the others
    could be kept."""
    if cache.folder is None:
        return "cache: off (--no-cache or PERFONTO_NO_CACHE): every point projected"
    read = f"{cache.hits} projection(s) read from {cache.folder}"
    if not cache.writable():
        return f"cache: {read}; the folder cannot be written (read-only, or not a folder): nothing was kept"
    return f"cache: {read}; any others projected and kept there"


def _fmt(v, kind: str) -> str:
    """A sweep cell: ``s`` seconds, ``pct`` a share, ``tok`` tokens/s; ``—`` when null or NaN."""
    from perfonto.report_format import finite

    if v is None or (not isinstance(v, str) and finite(v) is None):
        return "—"
    if kind == "s":
        return f"{v * 1e3:,.2f} ms" if v < 1 else f"{v:,.2f} s"
    if kind == "pct":
        return f"{v * 100:.1f} %"
    if kind == "tok":
        return f"{v:,.0f}"
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def _fixed_note(rows: list[dict], out) -> None:
    """What the "fixed per-op" column means, when the ops' fixed cost is a large part of some point's time;
    and, where the interconnect's share is mostly collectives whose HBM traffic sets their time, that."""
    ok = [r for r in rows if not r.get("error")]
    fixed = [r.get("fixed_op_share") or 0.0 for r in ok]
    if fixed and max(fixed) >= 0.25:  # a class's time that no bandwidth or FLOP/s buys back
        out.print(
            f"fixed per-op: the share of the time that is the ops' fixed cost (launch, ramp-up and drain per op: "
            f"the preset's op_overhead_s), counted inside the ops' classes — up to {max(fixed) * 100:.0f} % here, "
            "which faster HBM, links or matrix engines do not shorten"
        )
    local = [(r.get("share_interconnect") or 0.0) - (r.get("link_share") or 0.0) for r in ok]
    if local and max(local) >= 0.10:
        out.print(
            f"interconnect: up to {max(local) * 100:.0f} % of the time is collectives whose reduction's HBM reads "
            "and writes (or arithmetic) take longer than their link transfers: faster links do not shorten that "
            "part; faster HBM does (link_share in --json: the part the links set)"
        )


def _crossing_line(c: dict, knobs) -> str:
    """One crossing in words: where it is (bisected), or, when no point between its bracket's ends runs,
    between which points that run it lies and that the points between cannot run."""
    where = ", ".join(f"{k}={_fmt(v, '')}" for k, v in c["series"].items())
    unit = next((k.unit for k in knobs if k.name == c["knob"]), "")
    grid = f"the grid points {_fmt(c['grid'][0], '')} and {_fmt(c['grid'][1], '')}"
    if c.get("at") is None:
        bad = c.get("cannot_run") or {}
        vals = ", ".join(_fmt(v, "") for v in bad.get("values", []))
        return (
            f"bottleneck {c['from']} → {c['to']} between {c['knob']} = {_fmt(c['low'], '')} and "
            f"{_fmt(c['high'], '')} {unit}".rstrip()
            + (f" ({where})" if where else "")
            + ("" if [c["low"], c["high"]] == list(c["grid"]) else f" (of {grid})")
            + f": the crossing cannot be placed closer, as {c['knob']} = {vals} between them cannot run "
            f"({bad.get('error', '')})"
        )
    return (
        f"bottleneck {c['from']} → {c['to']} at {c['knob']} = {c['at']:.4g} {unit}".rstrip()
        + (f" ({where})" if where else "")
        + f", between {grid}"
    )


def _notes(res, given: set[str]) -> tuple[tuple[str, str], list[str]]:
    """The tokens/s the table shows (``sweep_notes.table_figure``) and the notes printed under it (the same
    in ``--json``), the step cap's first."""
    from perfonto.whatif import sweep_notes as sn

    figure, why = sn.table_figure(res)
    notes = [
        sn.cap_note(res.rows),
        why,
        sn.bottleneck_note(res),
        *sn.flat_notes(res),
        sn.requests_note(res.rows, {k.name for k in res.knobs}, given),
    ]
    return figure, [n for n in notes if n]


def _render(res, gen: str, outputs: dict, figure: tuple[str, str], notes: list[str]) -> None:
    from rich.table import Table

    out = stdout()
    steady = " (steady state)" if figure[0] == "tokens_per_second" else ""
    t = Table(title=f"sweep of {gen}: {len(res.rows)} point(s), projected{steady}")
    for k in res.knobs:
        t.add_column(k.name + (f" [{k.unit}]" if k.unit else ""), justify="right")
    for col in (figure[1], "requests", "TTFT p50", "ITL p50", "MFU", "bottleneck", "fixed per-op"):
        t.add_column(col, justify="left" if col == "bottleneck" else "right")
    for r in res.rows:
        cells = [_fmt(k.shown(r.get(k.name)), "") for k in res.knobs]
        if r.get("error"):
            t.add_row(*cells, "—", "—", "—", "—", "—", f"error: {r['error'][:60]}", "—")
            continue
        t.add_row(
            *cells,
            _fmt(r[figure[0]], "tok"),
            f"{r['requests']:,}" if r.get("requests") is not None else "—",
            _fmt(r["ttft_p50_s"], "s"),
            _fmt(r["itl_p50_s"], "s"),
            _fmt(r["mfu"], "pct"),
            r["bottleneck"] or "—",
            _fmt(r.get("fixed_op_share"), "pct"),
        )
    out.print(t)
    for c in res.to_json()["crossings"]:  # in the knobs' units
        out.print(_crossing_line(c, res.knobs), markup=False, highlight=False, soft_wrap=True)
    _fixed_note(res.rows, out)
    for n in notes:
        out.print(n, markup=False, highlight=False)
    for k, v in outputs.items():
        out.print(f"{k}: {v}")
