"""``perfonto compare-runs BASELINE RUN [RUN …] [--json] [--confidence C] [--fail-on-regression METRIC:PCT]``:
each run against the baseline (``analysis.compare_runs``): every metric with its change, a moving-block
bootstrap interval over windows (for a request-level metric, TTFT/TPOT/ITL/E2E, a block bootstrap over the runs'
request records: ``analysis.compare_records``) and a verdict; metrics with a value in one run only; the top-down
shares and the per-op time shares side by side.

Exit 0; 1 when a folder cannot be read or the runs are of different catalogs, or when a
``--fail-on-regression`` rule is crossed (for CI); 2 for a usage error."""

from __future__ import annotations

import argparse
import json

from . import HELP
from .common import CommandError, file_force_option, stdout


def _rule(text: str) -> tuple[str, float]:
    name, sep, pct = text.rpartition(":")
    try:
        v = float(pct.strip().rstrip("%"))
    except ValueError:
        v = float("nan")
    if not sep or not name or not v == v or v == 0 or abs(v) == float("inf"):
        raise argparse.ArgumentTypeError(
            f"write METRIC:PCT with a signed, non-zero percent, e.g. mfu:-5 (a drop of more "
            f"than 5 % fails) or ttft_p99:+10 (a rise of more than 10 %), not {text!r}"
        )
    return name.strip(), v


def _confidence(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        v = float("nan")
    if not 0.5 <= v < 1:
        raise argparse.ArgumentTypeError(f"a confidence is between 0.5 and 1 (e.g. 0.95), not {text!r}")
    return v


def register(sub) -> None:
    p = sub.add_parser("compare-runs", help=HELP["compare-runs"])
    p.add_argument("runs", nargs="+", metavar="RUN", help="run or analyze output folders; the first is the baseline")
    p.add_argument("--confidence", type=_confidence, default=0.95, help="confidence of the intervals (default: 0.95)")
    p.add_argument(
        "--fail-on-regression",
        type=_rule,
        action="append",
        default=[],
        metavar="METRIC:PCT",
        help="exit 1 when METRIC changes past the signed percent beyond the noise (repeat for several)",
    )
    p.add_argument("--all", action="store_true", help="print every metric, not only those that changed")
    p.add_argument(
        "--html", default=None, metavar="FILE", help="also write the comparison as one self-contained HTML page"
    )
    p.add_argument("--json", action="store_true", help="print the comparison as one JSON document")
    file_force_option(p)
    p.set_defaults(func=cmd_compare_runs)


def cmd_compare_runs(args) -> int:
    from perfonto.analysis.compare_runs import CompareError, RuleError, compare, finite, load_run, regressions

    if len(args.runs) < 2:
        raise CommandError("give a baseline and at least one run to compare with it", 2)
    try:
        runs = [load_run(r) for r in args.runs]
        results = [compare(runs[0], r, confidence=args.confidence) for r in runs[1:]]
        crossed = [x for res in results for x in regressions(res, args.fail_on_regression)]
    except RuleError as exc:  # a rule that names no shared metric: a usage error, not a regression
        raise CommandError(str(exc), 2) from None
    except CompareError as exc:
        raise CommandError(str(exc), 1) from None
    if args.html:
        from perfonto.analysis.compare_html import render
        from perfonto.outputs import check_file_target, write_file

        check_file_target(args.html, "--html", args.force)
        write_file(args.html, render(results, [r.report for r in runs]))  # beside it, then renamed
    if args.json:
        print(
            json.dumps(
                finite({"ok": not crossed, "comparisons": results, "regressions": crossed}),
                indent=2,
                default=str,
                allow_nan=False,
            )
        )
    else:
        for res in results:
            _render(res, stdout(), args.all)
        for line in crossed:
            stdout().print(f"regression: {line}", markup=False)
        if args.fail_on_regression and not crossed:
            rules = ", ".join(f"{n}:{p:+g} %" for n, p in args.fail_on_regression)
            stdout().print(f"no regression past {rules}", markup=False)
    return 1 if crossed else 0


def _pct(x: float) -> str:
    """A relative change in percent, signed: two decimals, or two significant digits below 0.01 % (a change of
    a few parts per million is not "+0.00 %")."""
    v = 100 * x
    if abs(v) < 1e-6:  # round-off: sums taken in another order
        return "+0.00"
    return f"{v:+.2f}" if abs(v) >= 0.01 else f"{v:+.1e}"


def _render(res: dict, out, show_all: bool) -> None:
    from rich.table import Table

    from perfonto.report_format import plain

    pct = round(res["confidence"] * 100)
    out.print(
        f"{res['run']} against {res['baseline']} ({res['generation']}): the change in each run-level value, its "
        f"{pct} % interval from a moving-block bootstrap over windows, and the verdict on it",
        markup=False,
    )
    t, shown, differs = _change_table(res, pct, show_all)
    if shown:
        out.print(t)  # an empty table (headers, no row) reads as a failure to compare: the line below says it all
    if differs:
        out.print(
            "* the mean over windows moved beyond the noise where the run-level value did not, or the reverse: "
            "windows weigh unequally in the run's totals (--json: window_relative, window_interval); the verdict "
            "is the run-level value's",
            markup=False,
        )
    over = [n for n, m in res["metrics"].items() if m.get("over") == "records"]
    if over:
        out.print(
            f"request-level metrics ({', '.join(over[:6])}{', …' if len(over) > 6 else ''}) have no window series: "
            "their interval is a block bootstrap over each run's request records (requests, or token gaps for "
            "ITL, in time slices), where the records are at hand",
            markup=False,
        )
    if res.get("note"):
        out.print(f"note: {res['note']}", markup=False)
    quiet = len(res["metrics"]) - shown
    if quiet and not shown:
        out.print(
            f"no metric changed beyond the noise at {pct} % confidence: {quiet} metric(s) compared (--all lists them)",
            markup=False,
        )
    elif quiet:
        out.print(f"{quiet} metric(s) with no change at this confidence (--all lists them)", markup=False)
    if res.get("units_differ"):
        out.print(
            "not compared, the unit differs (two catalogs' metrics of one name): "
            + ", ".join(f"{n} ({a or 'no unit'} → {b or 'no unit'})" for n, (a, b) in res["units_differ"].items()),
            markup=False,
        )
    if res["only_in"]:
        out.print("value in one run only: " + ", ".join(f"{n} ({w})" for n, w in res["only_in"].items()), markup=False)
    b0, b1 = res["bottleneck"]
    out.print(f"bottleneck: {b0} → {b1}", markup=False)
    if res["ops"]:
        ops = Table(title="Per-op share of time", title_justify="left")
        for col in ("op", "baseline", "run"):
            ops.add_column(col)
        for op, (a, b) in res["ops"].items():
            ops.add_row(plain(op), "—" if a is None else f"{100 * a:.1f} %", "—" if b is None else f"{100 * b:.1f} %")
        out.print(ops)


def _change_table(res: dict, pct: int, show_all: bool):
    """(the table of changed metrics — every metric with ``show_all`` —, rows in it, rows marked ``*``)."""
    from rich.table import Table

    from perfonto.analysis.compare_runs import undecided
    from perfonto.report_format import plain

    t = Table()
    t.add_column("metric (unit)", overflow="fold", min_width=20)
    t.add_column("baseline", justify="right", no_wrap=True)
    t.add_column("run", justify="right", no_wrap=True)
    t.add_column("change", justify="right", no_wrap=True)
    t.add_column(f"{pct} % interval", justify="right", no_wrap=True)
    t.add_column("verdict", overflow="fold", min_width=16)
    shown, differs = 0, 0
    for name, m in res["metrics"].items():
        if not show_all and m["verdict"] == "no change":
            continue
        lo, hi = m["relative_interval"]
        told = not undecided(m)  # no interval where the windows (or records) cannot tell
        interval = f"[{_pct(lo)}, {_pct(hi)}] %" if told and lo is not None and hi is not None else "—"
        change = "new (baseline 0)" if m["relative"] is None else f"{_pct(m['relative'])} %"
        mark = " *" if m.get("differs") else ""
        differs += bool(mark)
        t.add_row(
            plain(name) + (f" ({plain(m['unit'])})" if m["unit"] else ""),
            f"{m['baseline']:.6g}",
            f"{m['value']:.6g}",
            change + mark,
            interval,
            m["verdict"],
        )
        shown += 1
    return t, shown, differs
