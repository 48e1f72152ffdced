"""``perfonto calibrate``: fit the emulator's efficiency model to the calibration rows.

Replays every row of ``emulator/data/calibration.yaml``, fits the constants of
``emulator.assumptions.FITTED_BOUNDS`` (least squares on ln(predicted/measured), shared by every
GPU, model and length), checks them by leaving each model family out in turn, and writes ``emulator/data/fitted.yaml``
(or ``--out``). The shipped ``fitted.yaml`` is this command's output. Exit 0 when it wrote the file.
"""

from __future__ import annotations

import json
from pathlib import Path

from . import HELP
from .common import CommandError, stderr, stdout, why as _why
from .project import EmuProgress
from .validate_emulator import add_rows_option, prepare_rows


def register(sub) -> None:
    p = sub.add_parser("calibrate", help=HELP["calibrate"])
    add_rows_option(p)
    p.add_argument("--out", default=None, help="where to write the parameters (default: emulator/data/fitted.yaml)")
    p.add_argument("--no-loo", action="store_true", help="skip the leave-one-family-out check")
    p.add_argument("--json", action="store_true", help="print the fit as one JSON object")
    p.set_defaults(func=cmd_calibrate)


def cmd_calibrate(args) -> int:
    from perfonto.emulator.assumptions import DATA
    from perfonto.emulator.calibration import fit, leave_family_out, validate, write_fitted

    err = stderr()
    try:
        header, preps = prepare_rows(args.rows, args.json, "replaying the calibration benchmarks")
    except (ValueError, KeyError, OSError) as exc:
        raise CommandError(_why(exc), 1) from None
    if not args.json:
        err.print(f"fitting {len(preps)} rows …")
    f = fit(preps)
    res = validate(preps, f["parameters"])
    loo = None
    if not args.no_loo:
        with EmuProgress("leave-one-family-out refits", enabled=not args.json) as bar:
            loo = leave_family_out(preps, f, progress=bar)
    out = Path(args.out) if args.out else DATA / "fitted.yaml"
    try:
        write_fitted(out, f, res, header, loo)
    except OSError as exc:
        raise CommandError(f"cannot write {out}: {exc.strerror or exc}", 1) from None
    doc = {"parameters": f["parameters"], "fit": res, "leave_one_family_out": loo, "written": str(out)}
    if args.json:
        print(json.dumps(doc, indent=2))
        return 0
    con = stdout()
    con.print(f"wrote {out}")
    for k, v in f["parameters"].items():
        con.print(f"  {k:16s} {v:.4g}")
    con.print(
        f"fit: geomean_error {res['geomean_error']:.4f}, worst_error {res['worst_error']:.4f} over {len(preps)} rows "
        f"(shipped rows: {res['shipped']['geomean_error']:.4f})"
    )
    for fam, v in (loo or {}).items():
        con.print(
            f"leave {fam} out: geomean_error {v['geomean_error']:.4f}, worst_error {v['worst_error']:.4f} over "
            f"{v['n']} rows"
        )
    return 0
