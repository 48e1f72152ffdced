"""``perfonto validate-emulator``: the emulator's predicted throughput against every calibration row,
and against each model family when the fit never saw it.

For each row of ``emulator/data/calibration.yaml`` (public TensorRT-LLM measurements) the row's
benchmark is replayed with the fitted constants and its output tokens/s compared with the
measurement. Summary: ``geomean_error = exp(mean |ln(predicted/measured)|) − 1`` and ``worst_error``
(the largest ``max(p/m, m/p) − 1``), as fractions, over all rows and over the ``shipped`` ones (the
16 public rows of ``../shared``). Then, per model family (Llama 3, Qwen3), the same errors when the
constants are refitted without that family's rows (leave-one-family-out; ``--no-loo`` skips it).
Then, per engine profile (``emulator/data/engine_profiles.yaml``) and model kind (dense / MoE), the
in-sample, leave-one-source-out and leave-one-family-out geomean errors, and a closing note with
issue 30's targets. Exit 0 when it ran.
"""

from __future__ import annotations

import json

from . import HELP
from .common import CommandError, stdout, why as _why
from .project import EmuProgress


def register(sub) -> None:
    p = sub.add_parser("validate-emulator", help=HELP["validate-emulator"])
    p.add_argument(
        "--rows", default=None, help="calibration file (default: the shipped emulator/data/calibration.yaml)"
    )
    p.add_argument("--no-loo", action="store_true", help="skip the leave-one-family-out refits")
    p.add_argument(
        "--json",
        action="store_true",
        help='print {"rows", "geomean_error", "worst_error", "shipped", "leave_one_family_out"} and nothing else',
    )
    p.set_defaults(func=cmd_validate_emulator)


def prepare_rows(path, json_mode: bool, label: str):
    """Prepared rows of ``path`` with a progress bar (none under --json).

    Raises:
        ValueError: ``path`` is not a readable regular file of bounded size (a folder, a device such
        as /dev/full, a name too long — ``ontology.files.FileReadError`` names it and the reason), or
        its rows do not load.
    """
    from perfonto.emulator.calibration import load_rows, prepare
    from perfonto.ontology.files import read_bytes

    if path is not None:
        read_bytes(path, "calibration file")  # refuse devices and folders before the loader reads them
    header, rows = load_rows(path)
    preps = []
    with EmuProgress(label, enabled=not json_mode) as bar:
        for i, r in enumerate(rows):
            preps.append(prepare(r))
            bar(i + 1, len(rows))
    return header, preps


def cmd_validate_emulator(args) -> int:
    from perfonto.emulator.assumptions import FITTED_BOUNDS, load_fitted
    from perfonto.emulator.calibration import by_profile, leave_family_out, validate

    try:
        _, preps = prepare_rows(args.rows, args.json, "replaying the calibration benchmarks")
    except (ValueError, KeyError, OSError) as exc:
        raise CommandError(_why(exc), 1) from None
    res = validate(preps)
    if not args.no_loo:
        params = {k: v for k, v in load_fitted()["parameters"].items() if k in FITTED_BOUNDS}
        with EmuProgress("leave-one-family-out refits", enabled=not args.json) as bar:
            res["leave_one_family_out"] = leave_family_out(preps, {"parameters": params}, progress=bar)
    try:
        res["by_profile"] = by_profile(res, res.get("leave_one_family_out"), rows_are_profiles=args.rows is None)
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
    sh = res["shipped"]
    out.print(
        f"geomean_error {res['geomean_error']:.4f} ({res['geomean_error'] * 100:.1f} %), "
        f"worst_error {res['worst_error']:.4f} ({res['worst_error'] * 100:.1f} %) over {len(res['rows'])} rows; "
        f"shipped rows: geomean {sh['geomean_error'] * 100:.1f} %, worst {sh['worst_error'] * 100:.1f} % over {sh['n']}"
    )
    for fam, v in res.get("leave_one_family_out", {}).items():
        out.print(
            f"{fam} left out of the fit: geomean {v['geomean_error'] * 100:.1f} %, worst "
            f"{v['worst_error'] * 100:.1f} % "
            f"over its {v['n']} rows"
        )
    _print_profiles(out, res["by_profile"])
    return 0


def _pct(v) -> str:
    return "n/a" if v is None else f"{v['geomean_error'] * 100:.1f} %"


def _print_profiles(out, prof: dict) -> None:
    """Per engine profile and model kind: in-sample, leave-one-source-out and leave-one-family-out
    geomean errors, then the closing note with issue 30's targets."""
    out.print("By engine profile and model kind (geomean error in sample, leaving one source out, one family out):")
    for name, p in prof.items():
        if not p["rows"]:
            out.print(f"  {name}: {p['note']}", markup=False)
            continue
        for kind, k in p["kinds"].items():
            out.print(
                f"  {name} {kind}: {k['in_sample']['n']} rows; in sample {_pct(k['in_sample'])}; "
                f"leave one source out {_pct(k['leave_one_source_out'])}; "
                f"leave one family out {_pct(k['leave_one_family_out'])}",
                markup=False,
            )
        out.print(f"  {name}: {p['loso_note']}", markup=False)
    out.print(
        "Closing note — targets on the leave-one-source-out error: dense ≤ 15 %, MoE ≤ 30 %, TTFT and ITL rows ≤ 25 %.",
        markup=False,
    )
    for name, p in prof.items():
        for kind, k in (p.get("kinds") or {}).items():
            lofo = k["leave_one_family_out"]
            met = "n/a" if lofo is None else ("met" if lofo["geomean_error"] <= k["target"] else "not met")
            out.print(
                f"  {name} {kind}: leave-one-source-out not computable ({p['loso_note']}); nearest out-of-sample "
                f"figure, leave one family out, {_pct(lofo)} vs ≤ {k['target'] * 100:.0f} %: {met}",
                markup=False,
            )
    out.print(
        "  TTFT and ITL: the calibration rows are offline throughput only; no latency row to check the 25 % target",
        markup=False,
    )
