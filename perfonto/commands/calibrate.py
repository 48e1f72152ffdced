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
from .common import CommandError, out_path, stderr, stdout, why as _why
from .project import EmuProgress
from .validate_emulator import add_rows_option, prepare_rows


OUT_HELP = (
    "where to write the parameters (default: emulator/data/fitted.yaml, the constants every projection uses; "
    "required with a --rows file other than the shipped one)"
)


def register(sub) -> None:
    p = sub.add_parser("calibrate", help=HELP["calibrate"])
    add_rows_option(p)
    p.add_argument("--out", default=None, help=OUT_HELP, type=out_path)
    p.add_argument("--force", action="store_true", help="write over an --out file that calibrate did not write")
    p.add_argument("--no-loo", action="store_true", help="skip the leave-one-family-out check")
    p.add_argument("--json", action="store_true", help="print the fit as one JSON object")
    p.set_defaults(func=cmd_calibrate)


def cmd_calibrate(args) -> int:
    from perfonto.emulator.assumptions import DATA
    from perfonto.emulator.calibration import fit, leave_family_out, validate, write_fitted

    err = stderr()
    out = _out_path(args, DATA)
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
    try:
        write_fitted(out, f, res, header, loo, rows=_shown(args.rows, DATA), out=_shown_out(out, DATA))
    except OSError as exc:
        raise CommandError(f"cannot write {out}: {exc.strerror or exc}", 1) from None
    loose = f.get("unconstrained", [])
    doc = {
        "parameters": f["parameters"],
        "not_fitted": loose,
        "fit": res,
        "leave_one_family_out": loo,
        "written": str(out),
    }
    if args.json:
        print(json.dumps(doc, indent=2))
        return 0
    con = stdout()
    con.print(f"wrote {out}")
    for k, v in f["parameters"].items():
        con.print(
            f"  {k:16s} {v:.4g}" + ("  (not fitted: no row depends on it; its design value)" if k in loose else "")
        )
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


FITTED_ABOUT = "Efficiency-model constants fitted by `perfonto calibrate`"


def _shown(rows, data: Path) -> str:
    """The rows file as ``fitted.yaml``'s ``about`` names it: the shipped one (however it was named) by its
    place in the project."""
    return (
        "emulator/data/calibration.yaml" if rows is None or _same(Path(rows), data / "calibration.yaml") else str(rows)
    )


def _shown_out(out: Path, data: Path) -> str | None:
    """``--out`` as the reproduce hint names it: None for the shipped ``fitted.yaml``."""
    return None if _same(out, data / "fitted.yaml") or out == data / "fitted.yaml" else str(out)


def _out_path(args, data: Path) -> Path:
    """Where the fit goes, checked before any replay: a ``--rows`` file other than the shipped one needs
    ``--out`` (its fit would otherwise replace the constants every projection uses); ``--out`` is never
    the rows file itself, and a file there that this command did not write (no ``about`` of a fit) is
    kept unless ``--force``.

    Raises:
        CommandError: one of those, naming the file and what to give instead.
    """
    shipped = data / "calibration.yaml"
    rows = Path(args.rows) if args.rows else shipped
    custom = args.rows is not None and not _same(rows, shipped)
    if args.out is None:
        if custom:
            raise CommandError(
                f"--rows {args.rows} is not the shipped calibration file: give --out FILE for its fit (without "
                f"--out the fit would replace {data / 'fitted.yaml'}, the constants every projection uses)",
                2,
            )
        return data / "fitted.yaml"
    out = Path(args.out)
    if _same(out, rows):
        raise CommandError(f"--out {out} is the --rows file: the fit would replace the rows; give another --out", 2)
    if out.is_dir() or not out.parent.is_dir():
        where = (
            "is a folder"
            if out.is_dir()
            else f"is in {out.parent}, which is not a folder"
            if out.parent.exists()
            else f"is in {out.parent}, which does not exist"
        )
        raise CommandError(f"--out {out} {where}: give a file path in an existing folder", 2)
    if custom and _same(out, data / "fitted.yaml") and not args.force:
        raise CommandError(
            f"--out {out} is the shipped constants every projection uses, and --rows {args.rows} is not the "
            "shipped calibration file: give another --out, or --force to replace them",
            2,
        )
    if out.exists() and not args.force and not _written_by_calibrate(out):
        raise CommandError(
            f"--out {out} exists and was not written by `perfonto calibrate`: give another path, or --force to "
            "replace it",
            2,
        )
    return out


def _same(a: Path, b: Path) -> bool:
    try:
        return a.exists() and b.exists() and a.samefile(b)
    except OSError:
        return False


def _written_by_calibrate(path: Path) -> bool:
    """Whether ``path`` is a regular YAML file whose ``about`` is a fit's (``write_fitted``)."""
    import yaml

    try:
        if not path.is_file() or path.stat().st_size > 1_000_000:
            return False
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, yaml.YAMLError):
        return False
    return isinstance(doc, dict) and str(doc.get("about", "")).startswith(FITTED_ABOUT)
