"""``perfonto validate-emulator``: the emulator's predicted throughput against every calibration row,
and against each model family when the fit never saw it.

For each row of ``emulator/data/calibration.yaml`` (public TensorRT-LLM measurements) the row's
benchmark is replayed with the fitted constants and its output tokens/s compared with the
measurement. Summary: ``geomean_error = exp(mean |ln(predicted/measured)|) − 1`` and ``worst_error``
(the largest ``max(p/m, m/p) − 1``, symmetric: the table's signed ``p/m − 1`` of that row is printed
beside it), as fractions, over all rows and over the ``shipped`` ones (the
16 public rows of ``../shared``). Then, per model family (Llama 3, Qwen3), the same errors when the
constants are refitted without that family's rows (leave-one-family-out; ``--no-loo`` skips it).
Then the other cited sources (``emulator/data/calibration_sources.yaml``, ``--sources``): each figure
(throughput; TTFT and ITL where the source states them) under the shipped fit and, unless
``--no-loso``, with its source left out of a refit on the other sources' offline rows. Then, per
engine profile (``emulator/data/engine_profiles.yaml``) and figure kind (dense / MoE throughput, TTFT,
ITL), the in-sample, other-source, leave-one-source-out and leave-one-family-out geomean errors, and a
closing note with issue 30's targets on the leave-one-source-out figures. Exit 0 when it ran.
"""

from __future__ import annotations

import json

from . import HELP
from .common import CommandError, stdout, why as _why
from .project import EmuProgress


def register(sub) -> None:
    p = sub.add_parser("validate-emulator", help=HELP["validate-emulator"])
    add_rows_option(p)
    p.add_argument("--no-loo", action="store_true", help="skip the leave-one-family-out refits")
    p.add_argument(
        "--sources",
        default=None,
        help="the other cited sources' rows (default: the shipped emulator/data/calibration_sources.yaml)",
    )
    p.add_argument("--no-loso", action="store_true", help="skip the leave-one-source-out refits")
    p.add_argument(
        "--loso-prior",
        type=float,
        default=None,
        metavar="W",
        help="weight of the refits' pull toward the design values (default: source_validation.REFIT_PRIOR, 1; 0: none)",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help='print {"rows", "geomean_error", "worst_error", "shipped", "leave_one_family_out", "other_sources", '
        '"leave_one_source_out", "by_profile"} and nothing else',
    )
    p.set_defaults(func=cmd_validate_emulator)


def add_rows_option(p) -> None:
    """``--rows``: the calibration file that ``prepare_rows`` reads (``validate-emulator``, ``calibrate``)."""
    p.add_argument(
        "--rows", default=None, help="calibration file (default: the shipped emulator/data/calibration.yaml)"
    )


def prepare_rows(path, json_mode: bool, label: str):
    """Prepared rows of ``path`` with a progress bar (none under --json).

    Raises:
        ValueError: ``path`` is not a readable regular file of bounded size (a folder, a device such
        as /dev/full, a name too long — ``ontology.files.FileReadError`` names it and the reason), or
        its rows do not load.
    """
    from perfonto.emulator.calibration_rows import load_rows
    from perfonto.ontology.files import read_bytes

    if path is not None:
        read_bytes(path, "calibration file")  # refuse devices and folders before the loader reads them
    header, rows = load_rows(path)
    return header, _replayed(rows, json_mode, label)


def _replayed(rows, json_mode: bool, label: str) -> list:
    """``calibration.prepare`` of each row (its benchmark replayed once), in order, with a progress bar
    labelled ``label`` (none under --json)."""
    from perfonto.emulator.calibration import prepare

    preps = []
    with EmuProgress(label, enabled=not json_mode) as bar:
        for i, r in enumerate(rows):
            preps.append(prepare(r))
            bar(i + 1, len(rows))
    return preps


def _prior(w):
    """The refits' prior: ``w`` (≥ 0) or ``source_validation.REFIT_PRIOR``.

    Raises:
        ValueError: a negative or non-finite weight."""
    import math

    from perfonto.emulator.source_validation import REFIT_PRIOR

    if w is None:
        return REFIT_PRIOR
    if not (math.isfinite(w) and 0 <= w <= MAX_PRIOR):
        raise ValueError(
            f"--loso-prior must be a weight between 0 and {MAX_PRIOR:g} (got {w:g}; {MAX_PRIOR:g} already pins "
            "every constant at its design value, and past it the fit's residuals overflow)"
        )
    return w


#: The largest ``--loso-prior``: a pull of 10^6 per unit of a constant's range pins it; 1e308 overflowed.
MAX_PRIOR = 1e6


def _other_sources(path, json_mode: bool):
    """The other cited sources (``calibration_sources.yaml``): ``(sources, prepared offline rows,
    closed-loop rows)``.

    Raises:
        ValueError: the file is not a readable regular file, or its rows do not load.
    """
    from perfonto.emulator.calibration_rows import load_sources
    from perfonto.ontology.files import read_bytes

    if path is not None:
        read_bytes(path, "sources file")
    sources, rows = load_sources(path)
    offline = [r for r in rows if r.concurrency == 0]
    preps = _replayed(offline, json_mode, "replaying the other sources' offline benchmarks")
    return sources, preps, [r for r in rows if r.concurrency > 0]


def _figures(offline, online, params: dict, bar) -> list[dict]:
    """Every figure of the other sources under ``params``."""
    from perfonto.emulator.source_validation import figures

    out = [f for p in offline for f in figures(p.row, params, p)]
    for i, r in enumerate(online):
        out += figures(r, params)
        bar(i + 1, len(online))
    return out


def cmd_validate_emulator(args) -> int:
    from perfonto.emulator.assumptions import FITTED_BOUNDS, load_fitted
    from perfonto.emulator.calibration import leave_family_out, validate
    from perfonto.emulator.calibration_rows import load_sources
    from perfonto.emulator.source_validation import by_profile, fitted_sources, leave_source_out
    from perfonto.ontology.files import read_bytes

    try:
        prior = _prior(args.loso_prior)  # refuse bad arguments before minutes of replays
        if args.sources is not None:
            read_bytes(args.sources, "sources file")
        load_sources(args.sources)  # a malformed file or row is refused before any replay
        _, preps = prepare_rows(args.rows, args.json, "replaying the calibration benchmarks")
    except (ValueError, KeyError, OSError) as exc:
        raise CommandError(_why(exc), 1) from None
    res = validate(preps)
    params = {k: v for k, v in load_fitted()["parameters"].items() if k in FITTED_BOUNDS}
    if not args.no_loo:
        with EmuProgress("leave-one-family-out refits", enabled=not args.json) as bar:
            res["leave_one_family_out"] = leave_family_out(preps, {"parameters": params}, progress=bar)
    try:
        sources, offline, online = _other_sources(args.sources, args.json)
        source_profile = {k: v.get("profile") for k, v in sources.items()}
        fit_only = fitted_sources(source_profile)
        with EmuProgress("other sources under the shipped fit", enabled=not args.json) as bar:
            res["other_sources"] = _figures(offline, online, params, bar)
        if not args.no_loso:
            with EmuProgress("leave-one-source-out refits", enabled=not args.json) as bar:
                res["leave_one_source_out"] = leave_source_out(
                    preps + offline, online, progress=bar, prior=prior, fit_only=fit_only
                )
        res["by_profile"] = by_profile(
            res,
            res.get("leave_one_family_out"),
            rows_are_profiles=args.rows is None,
            loso=res.get("leave_one_source_out"),
            others=res["other_sources"],
            source_profile=source_profile,
        )
    except (ValueError, KeyError, OSError) as exc:
        raise CommandError(_why(exc), 1) from None
    if args.json:
        print(json.dumps(res, indent=2))
        return 0
    from rich.table import Table

    t = Table(title="Emulator vs public measurements (output tokens/s of the group)")
    for col in ("model", "gpu", "par.", "dtype", "isl/osl", "set", "measured", "predicted", "error"):
        t.add_column(col, justify="right" if col in ("measured", "predicted", "error") else "left")
    for r in res["rows"]:
        par = f"TP{r['tp']}" + (f"PP{r['pp']}" if r.get("pp", 1) > 1 else "")
        t.add_row(
            r["model"],
            r["gpu"],
            par,
            r["dtype"],
            f"{r['isl']}/{r['osl']}",
            r["set"],
            f"{r['measured']:,.0f}",
            f"{r['predicted']:,.0f}",
            f"{r['error'] * 100:+.1f} %",
        )
    out = stdout()
    out.print(t)
    for line in summary_lines(res):
        out.print(line, markup=False)
    not_run = {"loso": "--no-loso" if args.no_loso else None, "loo": "--no-loo" if args.no_loo else None}
    _print_others(out, res.get("other_sources", []), res.get("leave_one_source_out"), not_run["loso"])
    _print_profiles(out, res["by_profile"], not_run)
    return 0


#: how the summary's errors are defined (said once under the table)
ERRORS_SAID = (
    "errors: the table's is predicted ÷ measured − 1; geomean = exp(mean |ln(predicted/measured)|) − 1 and "
    "worst_error = the largest max(p/m, m/p) − 1 (both symmetric: 10 % over and 10 % under weigh the same)"
)


def _row_name(r: dict) -> str:
    par = f"TP{r['tp']}" + (f"PP{r['pp']}" if r.get("pp", 1) > 1 else "")
    return f"{r['model']} {r['gpu']} {par} {r['dtype']} {r['isl']}/{r['osl']}"


def _worst(rows: list[dict]) -> str:
    """The row of the largest symmetric error, as the table shows it: "worst 8.3 % (b200 … 2048/128:
    −7.7 % in the table)"; "worst 0.0 %" without rows."""
    if not rows:
        return "worst 0.0 %"
    r = max(rows, key=lambda x: max(x["predicted"] / x["measured"], x["measured"] / x["predicted"]))
    sym = max(r["predicted"] / r["measured"], r["measured"] / r["predicted"]) - 1.0
    return f"worst {sym * 100:.1f} % ({_row_name(r)}: {r['error'] * 100:+.1f} % in the table)"


def summary_lines(res: dict) -> list[str]:
    """The summary under the rows' table: how the errors are defined, then the geomean and worst errors of
    all rows and of the shipped ones, the worst naming its row and the signed error the table shows for it
    (the summary's worst is symmetric, ``max(p/m, m/p) − 1``: a row at −7.7 % is 8.3 % worst), then each
    family left out of the fit (its rows are not in the table: the symmetric worst alone)."""
    rows = res["rows"]
    shipped = [r for r in rows if r.get("set") == "shipped"]
    sh = res["shipped"]
    lines = [
        ERRORS_SAID,
        f"all {len(rows)} rows: geomean {res['geomean_error'] * 100:.1f} %, {_worst(rows)}",
        f"shipped rows ({sh['n']}): geomean {sh['geomean_error'] * 100:.1f} %, {_worst(shipped)}",
    ]
    for fam, v in res.get("leave_one_family_out", {}).items():
        lines.append(
            f"{fam} left out of the fit: geomean {v['geomean_error'] * 100:.1f} %, worst "
            f"{v['worst_error'] * 100:.1f} % (symmetric) over its {v['n']} rows"
        )
    return lines


def _pct(v) -> str:
    return "n/a" if v is None else f"{v['geomean_error'] * 100:.1f} %"


def _print_others(out, figs: list[dict], loso: dict | None, loso_off: str | None = None) -> None:
    """The other sources' figures: measured, under the shipped fit, and with their source left out
    (``loso_off``: the option that skipped those refits, named in the column's header)."""
    from rich.table import Table

    if not figs:
        return
    held = {(f["source"], f["row"], f["metric"]): f for v in (loso or {}).values() for f in v["figures"]}
    t = Table(
        title="Other cited sources (throughput: output tokens/s of the group; TTFT, ITL: mean ms)",
        caption="error: predicted ÷ measured − 1",
    )
    left_out = "source left out" + (f" (not run: {loso_off})" if loso_off else "")
    for col in ("source", "row", "figure", "measured", "shipped fit", "error", left_out, "error "):
        # a source's name is one word: folded whole over lines, never cut short
        t.add_column(col, justify="left" if col in ("source", "row", "figure") else "right", overflow="fold")
    for f in figs:
        h = held.get((f["source"], f["row"], f["metric"]))
        t.add_row(
            f["source"],
            f["row"],
            f["metric"],
            f"{f['measured']:,.2f}",
            f"{f['predicted']:,.2f}",
            f"{f['error'] * 100:+.1f} %",
            "" if h is None else f"{h['predicted']:,.2f}",
            "" if h is None else f"{h['error'] * 100:+.1f} %",
        )
    out.print(t)
    for s, v in (loso or {}).items():
        fit_on = ", ".join(v["fit_sources"]) or "nothing (design values)"
        out.print(
            f"  {s} left out: constants fitted on {v['fit_rows']} offline rows of {fit_on} (prior {v['prior']:g})",
            markup=False,
        )


def _print_profiles(out, prof: dict, not_run: dict | None = None) -> None:
    """Per engine profile and figure kind: in-sample, other sources under the shipped fit,
    leave-one-source-out and leave-one-family-out geomean errors, then the closing note with issue 30's
    targets. ``not_run``: {"loso", "loo"} → the option that skipped those refits (None: they ran), said
    as such instead of 'n/a (no figures)'."""
    off = not_run or {}

    def held(v, which: str) -> str:
        return f"not run ({off[which]})" if off.get(which) else f"{_pct(v)} ({_n(v)})"

    out.print(
        "By engine profile and figure (geomean error: in sample; other sources under the shipped fit; "
        "leaving one source out; leaving one family out):"
    )
    for name, p in prof.items():
        if "kinds" not in p:
            out.print(f"  {name}: {p['note']}", markup=False)
            continue
        for kind, k in p["kinds"].items():
            n = max((k[f]["n"] for f in ("in_sample", "shipped_fit_other_sources") if k[f]), default=0)
            if not n and k["leave_one_source_out"] is None:
                continue
            out.print(
                f"  {name} {kind}: in sample {_pct(k['in_sample'])} ({_n(k['in_sample'])}); other sources "
                f"{_pct(k['shipped_fit_other_sources'])} ({_n(k['shipped_fit_other_sources'])}); leave one source "
                f"out {held(k['leave_one_source_out'], 'loso')}; leave one family out "
                f"{'not run (' + off['loo'] + ')' if off.get('loo') else _pct(k['leave_one_family_out'])}",
                markup=False,
            )
        out.print(f"  {name}: {p['loso_note']}", markup=False)
    out.print(
        "Closing note — targets on the leave-one-source-out error: dense ≤ 15 %, MoE ≤ 30 %, TTFT and ITL rows ≤ 25 %.",
        markup=False,
    )
    for name, p in prof.items():
        for kind, k in (p.get("kinds") or {}).items():
            loso = k["leave_one_source_out"]
            met = "n/a" if loso is None else ("met" if loso["geomean_error"] <= k["target"] else "not met")
            out.print(
                f"  {name} {kind}: leave one source out {held(loso, 'loso')} "
                f"vs ≤ {k['target'] * 100:.0f} %: {'not judged' if off.get('loso') else met}",
                markup=False,
            )


def _n(v) -> str:
    return "no figures" if v is None else f"{v['n']} figures"
