"""``perfonto findings RUN [--reproject] [--out DIR] [--json]``: the guided findings of a run folder
(``analysis.findings``, kept in its ``report.json``) with their estimated gains; with ``--reproject``,
each finding whose cause is an emulator knob is re-projected (``perfonto.whatif.reproject``: the run
emulated again without it, into ``DIR/reproject/<n>/``) and its measured gain printed beside the
estimate. ``DIR/findings.json`` holds the findings with the re-projections.

Exit 0; 1 when the run folder cannot be read or a re-projection fails; 2 for a usage error."""

from __future__ import annotations

import json
from pathlib import Path

from . import HELP
from .common import CommandError, output_options, stdout


OUT_DEFAULT = "perfonto-findings"


def register(sub) -> None:
    p = sub.add_parser("findings", help=HELP["findings"])
    p.add_argument("run", metavar="RUN", help="a run or analyze output folder (holding report.json)")
    p.add_argument(
        "--reproject",
        action="store_true",
        help="emulate the run again without each finding's cause (an emulator knob) and measure the gain",
    )
    output_options(
        p,
        out_help=f"output folder for --reproject (default: ./{OUT_DEFAULT})",
        default=OUT_DEFAULT,
        json_help="print the findings as one JSON document",
    )
    p.set_defaults(func=cmd_findings)


def _report(run: Path) -> dict:
    from perfonto.analysis.findings import check_findings
    from perfonto.ontology.files import FileReadError, exists, read_text

    path = run / "report.json"
    if not exists(path):
        raise CommandError(f"{path}: no report.json; give a folder written by `perfonto run` or `perfonto analyze`")
    try:  # a regular file only: a pipe or device named report.json is refused, never waited on
        data = json.loads(read_text(path, "report"))
    except FileReadError as exc:
        raise CommandError(str(exc))
    except json.JSONDecodeError as exc:
        raise CommandError(f"{path}:{exc.lineno}:{exc.colno}: not JSON ({exc.msg})")
    if not isinstance(data, dict) or "findings" not in data:
        raise CommandError(f"{path}: the report holds no findings; analyse the run again with this perfonto")
    try:
        check_findings(data["findings"], str(path))
    except ValueError as exc:
        raise CommandError(f"{exc}; analyse the run again to rewrite its report")
    return data


def _reproject_all(run: Path, found: list[dict], tmp: Path, log) -> None:
    from perfonto.whatif.reproject import reproject

    for i, f in enumerate(found):
        if not f.get("remove"):
            f["reprojection"] = {"skipped": "its cause is not an emulator knob that the rule can remove"}
            continue
        log(f"re-projecting `{f['metric']}` with {', '.join(f'{k} → {v}' for k, v in f['remove'].items())} …")
        r = reproject(run, f["remove"], tmp / "reproject" / f"{i:02d}")
        est = f.get("estimated_gain")
        if "gain" in r and est:
            r["estimate_error"] = (r["gain"] - est) / est
        f["reprojection"] = r


def _pct(x: float) -> str:
    return f"{x * 100:+.1f} %"


def _print(found: list[dict], console) -> None:
    from rich.text import Text

    from perfonto.analysis.findings import gain_text

    from perfonto.report import render_guided

    render_guided(found, console)
    for f in found:
        r = f.get("reprojection")
        if r and "gain" in r:
            knobs = ", ".join(f"{k} → {v}" for k, v in r["knobs"].items())
            few = "; few steps: emulate longer for a steadier figure" if r["steps"] < 5 else ""
            est = f.get("estimated_gain")
            console.print(
                Text(
                    f"  re-projected `{f['metric']}` ({knobs}): {_pct(r['gain'])} throughput measured over "
                    f"{r['steps']} steps (step {r['step_period_s'][0] * 1e3:.3f} → "
                    f"{r['step_period_s'][1] * 1e3:.3f} ms){few}"
                    + (f", against {gain_text(est)} estimated from its share of time" if est is not None else "")
                )
            )
        elif r and "skipped" in r:
            console.print(Text(f"  not re-projected `{f['metric']}`: {r['skipped']}"))
    asked = [f for f in found if f.get("reprojection")]
    if asked and not any("gain" in f["reprojection"] for f in asked):
        console.print(
            Text(
                f"--reproject: none of the {len(asked)} finding(s) was re-projected (their rules name no emulator "
                "knob that removes the cause: `remove:` in the findings rules); the gains above are the estimates"
            )
        )


def cmd_findings(args) -> int:
    from rich.console import Console
    from rich.text import Text

    from perfonto.outputs import output_folder
    from perfonto.whatif.reproject import ReprojectError

    run = Path(args.run)
    found = _report(run)["findings"]
    console = Console(stderr=args.json)
    if not args.reproject and args.out != OUT_DEFAULT:
        console.print(Text(f"note: --out {args.out} is for --reproject; nothing is written without it"))
    if args.reproject:
        try:
            with output_folder(
                Path(args.out), command=["findings", str(run)], force=args.force, inputs={"run": str(run)}
            ) as tmp:
                _reproject_all(run, found, tmp, lambda s: console.print(Text(s)))
                (tmp / "findings.json").write_text(json.dumps(found, indent=1, allow_nan=False), encoding="utf-8")
        except ReprojectError as exc:
            raise CommandError(str(exc))
    if args.json:
        print(json.dumps({"run": str(run), "findings": found}, indent=1, allow_nan=False))
    else:
        if not found:
            stdout().print("no findings: no threshold crossed")
        _print(found, stdout())
    return 0
