"""``perfonto coverage``: run the coverage scenarios (several seeds), judge whether the catalog tells
them apart, and what each counter buys (``whatif.coverage``). Exit 1 when a pair of scenarios is
not told apart (a command that judges)."""

from __future__ import annotations

import json
import tempfile

from . import HELP
from .common import (
    catalog_failure,
    file_force_option,
    catalog_options,
    CommandError,
    jobs_option,
    json_option,
    out_path,
    positive_int,
    stdout,
)


def register(sub) -> None:
    p = sub.add_parser("coverage", help=HELP["coverage"])
    catalog_options(p, catalog="a catalog folder (a proposed counter is judged by what it adds)", metavar="DIR")
    p.add_argument(
        "--scenarios",
        default=None,
        metavar="FILE",
        help="more scenarios (YAML, the format of perfonto/whatif/scenarios.yaml)",
    )
    p.add_argument("--only", default=None, metavar="A,B", help="only these scenarios")
    p.add_argument(
        "--seeds",
        type=positive_int,
        default=3,
        help="runs per scenario, seeds 0..N-1, for run-to-run noise (default: 3)",
    )
    p.add_argument(
        "--without",
        action="append",
        default=[],
        metavar="SIGNAL",
        help="judge the catalog recompiled without SIGNAL (repeat); every counter a diagnosis reads is judged anyway",
    )
    p.add_argument(
        "--only-without",
        action="store_true",
        help="judge only the --without counters (faster); the others that feed a diagnosis are listed as not judged",
    )
    jobs_option(p)
    p.add_argument(
        "--keep", default=None, metavar="DIR", help="keep the runs' captures in DIR (default: a temporary folder)"
    )
    p.add_argument("--out", default=None, metavar="FILE", help="write the judgement as JSON", type=out_path)
    json_option(p)
    file_force_option(p)
    p.set_defaults(func=cmd_coverage)


def _proposed(gen) -> list[str]:
    """Signals of ``gen`` its parent generation does not have (a catalog folder's proposals)."""
    from perfonto.ontology.loader import load_generation

    if len(gen.lineage) < 2:
        return []
    parent, _ = load_generation(gen.lineage[-2])
    return sorted(set(gen.signals) - set(parent.signals)) if parent is not None else []


def cmd_coverage(args) -> int:
    target, base, gen = _target(args)
    nominal, scs = _scenarios(args, base, gen)
    _check_without(args.without, gen)
    cov, runs = _judge(args, target, nominal, scs, gen)
    if not cov.scenarios:
        first = next((r["error"] for r in runs if r.get("error")), "no run")
        raise CommandError(f"no scenario could be emulated: {first}", 1)
    doc = {"generation": gen.name, **cov.to_json(), "collection": _collection(base)}
    if args.out:
        _write_out(args.out, doc, args.force)
    if args.json:
        print(json.dumps(doc, indent=2, default=str))
    else:
        _render(cov, gen.name, args)
        _render_collection(doc["collection"])
    return 0 if cov.all_told_apart else 1


def _collection(base) -> dict | None:
    """What reading the top-down tree costs on the declared counter slots (``metrics.plan_groups``)."""
    from perfonto.metrics.plan_groups import PlanError, tree_slots

    try:
        return tree_slots(base.graph)
    except PlanError as exc:  # constraints no grouping meets: said, not fatal to the coverage judgement
        return {"error": str(exc)}


def _render_collection(row: dict | None) -> None:
    if row is None:
        return
    if "error" in row:
        stdout().print(f"top-down tree collection: cannot be planned: {row['error']}", markup=False)
        return
    need = ", ".join(f"{b} {'impossible' if n is None else n}" for b, n in row["one_pass_slots"].items()) or "none"
    stdout().print(
        f"top-down tree collection: {row['metrics']} metrics in {row['passes']} pass(es) on the declared counter "
        f"slots; one pass needs programmable slots per block: {need} (`perfonto plan --metrics 'topdown.*'`)",
        markup=False,
    )


def _target(args):
    """The target of ``--generation`` / ``--catalog``, its base catalog part and generation."""
    from perfonto.ontology.diagnostics import CatalogError
    from perfonto.whatif.catalogs import parts
    from perfonto.whatif.cliargs import target_of

    target = target_of(args.generation, args.catalog)
    try:
        base = parts(target)[0]
        gen = base.generation
    except CatalogError as exc:
        raise catalog_failure(exc, args) from None
    return target, base, gen


def _scenarios(args, base, gen):
    """The nominal run and the scenarios (``--scenarios`` added, ``--only`` kept); the headlines are
    the catalog's top-down metrics."""
    from perfonto.whatif.scenarios import ScenarioError, load_scenarios

    try:
        heads = [m for m, x in base.graph.metrics.items() if "topdown" in x.groups]
        nominal, scs = load_scenarios(args.scenarios, gen, heads or None)
    except ScenarioError as exc:
        code = 2 if any(d.code == "io" for d in exc.diagnostics) else 1
        raise CommandError(
            f"the scenarios do not load ({len(exc.diagnostics)} problem(s))", code, exc.diagnostics
        ) from None
    if args.only:
        scs = _only(args.only, scs)
    return nominal, scs


def _only(only: str, scs: list) -> list:
    """The scenarios ``--only`` names (at least two, each known), in the file's order."""
    want = [s.strip() for s in only.split(",") if s.strip()]
    names = [s.name for s in scs]
    bad = [w for w in want if w not in names]
    if bad or len(want) < 2:
        from perfonto.ontology.diagnostics import did_you_mean

        hint = did_you_mean(bad[0], names) if bad else ""
        raise CommandError(
            f"--only: {'no scenario ' + repr(bad[0]) if bad else 'name at least two scenarios'}; "
            f"{hint or 'scenarios: ' + ', '.join(names)}",
            2,
        )
    return [s for s in scs if s.name in want]


def _check_without(without: list[str], gen) -> None:
    """Every ``--without`` signal is one of the generation's."""
    for s in without:
        if s not in gen.signals:
            from perfonto.ontology.diagnostics import did_you_mean

            raise CommandError(
                f"--without {s}: `{gen.name}` has no signal `{s}`; "
                f"{did_you_mean(s, gen.signals) or 'see perfonto explain'}",
                2,
            )


def _judge(args, target, nominal, scs: list, gen):
    """Emulate every scenario and the nominal run for each seed (in ``--keep`` or a temporary
    folder) and judge the catalog on them; returns the judgement and the runs."""
    from perfonto.whatif.coverage import judge
    from perfonto.whatif.knobs import KnobError
    from perfonto.whatif.runs import run_all

    from .project import EmuProgress

    proposed = _proposed(gen) if args.catalog else []
    with tempfile.TemporaryDirectory(prefix="perfonto-coverage-") as tmp:
        work = args.keep or tmp
        try:
            with EmuProgress(
                f"coverage: {len(scs) + 1} runs × {args.seeds} seeds", enabled=not args.json, after_s=0.5
            ) as bar:
                runs = run_all(target, nominal, scs, list(range(args.seeds)), work, jobs=args.jobs, progress=bar)
            cov = judge(target, scs, runs, without=args.without, all_counters=not args.only_without, proposed=proposed)
        except KnobError as exc:
            raise CommandError(str(exc), 1) from None
    return cov, runs


def _write_out(path: str, doc: dict, force: bool = False) -> None:
    """Write the judgement to ``--out`` (beside it, then renamed)."""
    from perfonto.outputs import check_file_target, write_file

    try:
        check_file_target(path, "--out", force)
        write_file(path, json.dumps(doc, indent=2, default=str))  # beside it, then renamed
    except OSError as exc:
        from .common import why

        raise CommandError(why(exc), 1) from None


def _short(m: str | None) -> str:
    return "—" if m in (None, "None") else m.removeprefix("topdown.")


def _render(cov, gen: str, args) -> None:
    """Print the judgement: the scenarios and their diagnoses, the confusion of headlines, the pairs
    told apart, what no metric or scenario touches, and what each counter buys."""
    out = stdout()
    out.print(_scenario_table(cov, gen, args))
    out.print(_confusion_table(cov))
    _print_pairs_and_gaps(out, cov)
    w, quiet, unjudged = _without_table(cov, args)
    out.print(w)
    if quiet:
        out.print(
            f"{len(quiet)} counters lose no diagnosis (only evidence: metrics that moved and read them): "
            f"{', '.join(quiet)}"
        )
    if unjudged:
        out.print(
            f"{len(unjudged)} counters not judged (--only-without; a top-down or thresholded metric reads them, "
            f"name them with --without or drop --only-without): {', '.join(unjudged)}"
        )
    for sig, e in cov.proposed.items():
        out.print(
            f"[bold]proposed[/] {sig}: read by {', '.join(e['metrics']) or 'no metric'}; moves in "
            f"{', '.join(sorted(e['lost_evidence'])) or 'no scenario'}; adds "
            f"{len(e.get('lost_diagnoses', []))} diagnosis(es), tells {len(e.get('lost_pairs', []))} pair(s) apart"
        )


def _scenario_table(cov, gen: str, args):
    """Per scenario: its headlines (× runs when they differ), the findings it adds, whether it met its
    expected diagnosis, how many metrics it moved."""
    from rich.table import Table

    t = Table(
        title=f"coverage of the {gen} catalog: {len(cov.scenarios)} scenarios × {args.seeds} seeds (diagnosis = "
        "headline + thresholds it adds to the nominal run's)"
    )
    for col in ("scenario", "headline", "findings it adds", "expected", "metrics moved"):
        t.add_column(col)
    for s in cov.scenarios:
        d = cov.diagnosis[s]
        exp = cov.expected.get(s)
        t.add_row(
            s,
            ", ".join(
                f"{_short(h)}" + (f" ×{n}" if len(d["headlines"]) > 1 else "") for h, n in d["headlines"].items()
            ),
            ", ".join(d["findings"]) or "—",
            ("yes" if exp["met"] else f"no (wanted {_short(exp['expect'])})") if exp else "—",
            str(len(cov.moves.get(s, {}))),
        )
    return t


def _confusion_table(cov):
    """Scenario × headline: how many of the scenario's runs got each headline."""
    from rich.table import Table

    heads = sorted({h for s in cov.scenarios for h in cov.diagnosis[s]["headlines"]})
    c = Table(title="confusion: headlines of each scenario's runs")
    c.add_column("scenario")
    for h in heads:
        c.add_column(_short(h), justify="right")
    for s in cov.scenarios:
        c.add_row(s, *[str(cov.diagnosis[s]["headlines"].get(h, "")) for h in heads])
    return c


def _print_pairs_and_gaps(out, cov) -> None:
    """The pairs told apart (those by a finding only named), the pairs not told apart, the counters
    no metric reads, the metrics no scenario moves and those no run evaluated."""
    missed = [k for k, v in cov.pairs.items() if v is None]
    by_finding = {k: v for k, v in cov.pairs.items() if v and v["by"] == "finding"}
    out.print(
        f"pairs told apart: {len(cov.pairs) - len(missed)} of {len(cov.pairs)}"
        + (
            f" ({len(by_finding)} by a finding only: "
            + "; ".join(f"{k} by {v['metric']}" for k, v in by_finding.items())
            + ")"
            if by_finding
            else ""
        )
    )
    for k in missed:
        out.print(f"  [bold]not told apart[/]: {k}")
    out.print(f"counters no metric reads ({len(cov.unread)}): {', '.join(cov.unread) or '—'}")
    out.print(f"metrics no scenario moves ({len(cov.unmoved)}): {', '.join(cov.unmoved) or '—'}", markup=False)
    if cov.never_evaluated:
        out.print(
            f"metrics no run evaluated ({len(cov.never_evaluated)}): {', '.join(cov.never_evaluated)}", markup=False
        )


def _without_table(cov, args):
    """The counters that lose a diagnosis (or were named with ``--without``), most diagnoses lost
    first; returns the table, the counters losing none, and those not judged (``--only-without``)."""
    from rich.table import Table

    w = Table(title="without a counter: the catalog recompiled without it, every run judged again")
    for col in ("counter", "diagnoses lost", "pairs no longer told apart"):
        w.add_column(col)
    quiet, unjudged = [], []
    for sig, e in sorted(cov.without.items(), key=lambda kv: (-len(kv[1].get("lost_diagnoses") or []), kv[0])):
        if e.get("lost_diagnoses") is None:  # could change a diagnosis, not judged (--only-without)
            unjudged.append(sig)
            continue
        lost = e["lost_diagnoses"]
        if not lost and sig not in args.without:
            quiet.append(sig)
            continue
        w.add_row(sig, _lost_text(lost) or "—", ", ".join(e.get("lost_pairs", [])) or "—")
    return w, quiet, unjudged


def _lost_text(lost: list[dict]) -> str:
    """The diagnoses a counter's removal loses: a changed headline, or a threshold that no longer flags."""
    return "; ".join(
        f"{x['scenario']}: {_short(x['before'][0])} → {_short(x['after'][0]) if x['after'] else 'none'}"
        if x["what"] == "headline"
        else f"{x['scenario']}: {x['before'][0]} no longer flags"
        for x in lost
    )
