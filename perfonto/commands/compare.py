"""``perfonto compare GEN_A GEN_B [--catalog DIR]``: two generations over a list of workloads, side by side, with the
assumption that drives each difference (``whatif.compare``)."""

from __future__ import annotations

import json

from . import HELP
from .common import CommandError, file_force_option, stdout

#: Workloads compared when none is given: the public claim's scenario, a decode-heavy and a
#: prefill-heavy one.
DEFAULT_WORKLOADS = [
    {"model": "llama3-70b", "chips": 8, "isl": 2048, "osl": 128},
    {"model": "llama-3.1-8b", "chips": 1, "isl": 128, "osl": 1024, "concurrency": 64},
    {"model": "llama3-70b", "chips": 8, "isl": 4096, "osl": 16},
]


def register(sub) -> None:
    from perfonto.whatif.cliargs import add_output_args, add_workload_args

    p = sub.add_parser("compare", help=HELP["compare"])
    p.add_argument("a", metavar="GEN_A", help="generation name, YAML file or catalog folder (the reference)")
    p.add_argument("b", metavar="GEN_B", help="generation name, YAML file or catalog folder")
    p.add_argument(
        "--catalog",
        metavar="DIR",
        default=None,
        help="catalog folder: a generation name is looked up among its *.yaml files first (and runs on the "
        "folder's catalog), then among the shipped generations (default: the shipped ones only)",
    )
    p.add_argument("--preset-a", default=None, help="preset of A (default: its family's)")
    p.add_argument("--preset-b", default=None, help="preset of B (default: its family's)")
    p.add_argument(
        "--vary",
        action="append",
        default=[],
        metavar="NAME=VALUES",
        help="workload knobs whose grid is the list of workloads (isl=128,2048, model=…); default: "
        "the claim scenario, a decode-heavy and a prefill-heavy workload",
    )
    add_workload_args(p, generation=False)
    add_output_args(p, "the side-by-side table")
    file_force_option(p)
    p.set_defaults(func=cmd_compare)


def cmd_compare(args) -> int:
    from perfonto.whatif.cliargs import base_point, cache_of, check_outputs, write_outputs
    from perfonto.whatif.compare import compare
    from perfonto.whatif.knobs import KnobError, Point, grid, parse_vary
    from perfonto.whatif.plots import compare_figure
    from perfonto.whatif.points import base_generation

    from .project import EmuProgress

    try:
        ta, tb = _target(args.a, args.catalog), _target(args.b, args.catalog)
        ga = base_generation(ta)
        base_generation(tb)
        knobs = [parse_vary(v, ga) for v in args.vary]
        if any(k.is_spec for k in knobs):
            raise KnobError(
                "compare moves the generations' own spec constants; vary only workload knobs here "
                "(perfonto sweep varies spec constants)"
            )
        if any(k.name == "preset" for k in knobs):
            raise KnobError("the presets of a comparison are --preset-a and --preset-b")
        base = base_point(args)
        for k in knobs:
            if k.name in dict(base.workload):
                raise KnobError(f"--vary {k.name} and --{k.name.replace('_', '-')} both set {k.name}; give one")
        if "preset" in dict(base.workload):
            raise KnobError("give the presets as --preset-a and --preset-b")
        chosen = set(dict(base.workload)) - {"requests"}  # --requests alone applies to the default workloads
        if knobs:
            workloads = grid(base, knobs)
        elif chosen:
            workloads = [base]
        else:
            workloads = [Point(workload=tuple(sorted({**w, **dict(base.workload)}.items()))) for w in DEFAULT_WORKLOADS]
        check_outputs(args)
        with EmuProgress(f"comparing {args.a} and {args.b}", enabled=not args.json, after_s=0.5) as bar:
            cmp = compare(
                ta,
                tb,
                workloads,
                preset_a=args.preset_a,
                preset_b=args.preset_b,
                jobs=args.jobs,
                cache=cache_of(args),
                progress=bar,
            )
    except KnobError as exc:
        raise CommandError(str(exc), 2) from None
    if all(e["a"].get("error") or e["b"].get("error") for e in cmp.entries):
        e = cmp.entries[0]
        raise CommandError(f"no workload runs on both: {e['a'].get('error') or e['b'].get('error')}", 1)
    outputs = write_outputs(args, lambda: [_flat(cmp, e) for e in cmp.entries], lambda path: compare_figure(cmp, path))
    if args.json:
        from perfonto.whatif.points import ROW_UNITS

        print(json.dumps({**cmp.to_json(), "units": dict(ROW_UNITS), "outputs": outputs}, indent=2, default=str))
        return 0
    _render(cmp, outputs)
    return 0


def _target(name: str, catalog: str | None):
    """The what-if target of GEN_A or GEN_B: a YAML file or catalog folder as given; with ``--catalog``, a
    name the folder declares on the folder's catalog, any other the shipped generation of that name
    (``common.catalog_generation``: the folder first, as ``perfonto diff --catalog``)."""
    from perfonto.whatif.cliargs import target_of

    from .common import catalog_generation, names_a_file, shipped_generation

    if catalog is None or names_a_file(name):
        return target_of(name, None)
    gen, in_folder = catalog_generation(name, catalog)
    if gen is None:
        shipped_generation(name, catalog, in_folder)  # a name neither declares: a usage error naming both
    return target_of(name, catalog if gen is not None else None)


def _flat(cmp, e) -> dict:
    row = dict(e["workload"])
    for side in ("a", "b"):
        for f in (
            "benchmark_tokens_per_second",
            "tokens_per_second",
            "itl_p50_s",
            "ttft_p50_s",
            "mfu",
            "bottleneck",
            "error",
        ):
            row[f"{getattr(cmp, side)}.{f}"] = e[side].get(f)
    row["ratio_tokens_per_second"] = e["ratio"]["benchmark_tokens_per_second"]
    row["ratio_steady_tokens_per_second"] = e["ratio"]["tokens_per_second"]
    row["drives"] = e["drives"]
    row["drives_factor"] = e["changes"][0]["factor"]["benchmark_tokens_per_second"] if e["changes"] else None
    row["interaction"] = e["interaction"]
    return row


def _render(cmp, outputs: dict) -> None:
    from rich.table import Table

    out = stdout()
    t = Table(title=f"{cmp.b} vs {cmp.a} (projected tokens/s over the benchmark; ratio = {cmp.b} / {cmp.a})")
    for col in (
        "workload",
        f"{cmp.a} tok/s",
        f"{cmp.b} tok/s",
        "ratio",
        "ITL ratio",
        f"{cmp.a} bound",
        f"{cmp.b} bound",
        "drives (factor alone)",
    ):
        t.add_column(col, justify="right" if "tok" in col or "ratio" in col else "left")
    for e in cmp.entries:
        w = ", ".join(f"{k}={v}" for k, v in e["workload"].items())
        a, b, r = e["a"], e["b"], e["ratio"]
        if a.get("error") or b.get("error"):
            t.add_row(w, "—", "—", "—", "—", "—", "—", f"error: {(a.get('error') or b.get('error'))[:60]}")
            continue
        top = e["changes"][0] if e["changes"] else None
        t.add_row(
            w,
            f"{a['benchmark_tokens_per_second']:,.0f}",
            f"{b['benchmark_tokens_per_second']:,.0f}",
            f"×{r['benchmark_tokens_per_second']:.2f}",
            "—" if r["itl_p50_s"] is None else f"×{r['itl_p50_s']:.2f}",
            a["bottleneck"] or "—",
            b["bottleneck"] or "—",
            f"{top['what']} (×{top['factor']['benchmark_tokens_per_second']:.2f})" if top else "—",
        )
    out.print(t)
    for e in cmp.entries:
        if e["a"].get("error") or e["b"].get("error") or not e["changes"]:
            continue
        w = ", ".join(f"{k}={v}" for k, v in e["workload"].items())
        f = "benchmark_tokens_per_second"
        moves = "; ".join(
            f"{c['what'].split(':')[0]} ×{c['factor'][f]:.3f}"
            for c in e["changes"][:5]
            if c["factor"][f] is not None and abs(c["factor"][f] - 1) > 5e-4
        )
        out.print(f"{w}: one change at a time — {moves}; interaction ×{e['interaction']:.3f}", markup=False)
    if cmp.only:
        out.print(f"not moved: {'; '.join(cmp.only)}")
    for k, v in outputs.items():
        out.print(f"{k}: {v}")
