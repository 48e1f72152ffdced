"""``perfonto plan``: which counters to read together, in how many passes and how often, for a set of
metrics on a generation's counter slots (``metrics.plan_groups``). A command that produces: exit 0
with a plan (even one with metrics that cannot be measured consistently, which it lists), 2 for an
unknown metric or generation, 1 for constraints no grouping meets."""

from __future__ import annotations

import json

from . import HELP
from .common import CommandError, catalog_options, file_force_option, positive_int


def register(sub) -> None:
    p = sub.add_parser("plan", help=HELP["plan"])
    p.add_argument(
        "--metrics",
        required=True,
        metavar="A,B",
        help="metrics to collect, comma-separated; patterns expand (`topdown.*` is the top-down tree)",
    )
    catalog_options(p, metavar="DIR")
    p.add_argument(
        "--slots",
        type=positive_int,
        default=None,
        metavar="N",
        help="programmable counter slots per block, replacing the declared ones (what-if for future silicon)",
    )
    p.add_argument(
        "--collector-config",
        default=None,
        metavar="FILE",
        help="write the passes, groups and read intervals for a collector (YAML for .yaml/.yml, else JSON)",
    )
    p.add_argument("--json", action="store_true", help="print the plan as one JSON object on stdout")
    file_force_option(p)
    p.set_defaults(func=cmd_plan)


def cmd_plan(args) -> int:
    from perfonto.metrics.catalog import load_catalog
    from perfonto.metrics.plan_groups import PlanError, plan_groups

    if args.collector_config is not None and not args.collector_config.strip():
        raise CommandError("--collector-config needs a file name (e.g. --collector-config plan.yaml)", 2)
    cat = load_catalog(args.catalog, args.generation)
    if cat.graph is None or cat.errors:
        usage = any(d.code == "unknown-generation" for d in cat.diagnostics)
        name = args.generation or "sohu"
        where = f" --catalog {args.catalog}" if args.catalog else ""
        msg = f"no generation named `{name}`" if usage else f"the catalog does not compile; run `perfonto check{where}`"
        raise CommandError(msg, 2 if usage else 1, cat.errors)
    try:
        plan = plan_groups(cat, args.metrics.split(","), slots=args.slots)
    except PlanError as exc:
        text = str(exc)
        raise CommandError(text, 2 if text.startswith(("no metric", "metric `")) else 1) from None
    doc = plan.to_json()
    if args.collector_config:
        _write_config(args.collector_config, doc, args.force)
    if args.json:
        print(json.dumps({"ok": True, **doc}, indent=2))
    else:
        print(render(plan))
    return 0


def _write_config(path: str, doc: dict, force: bool = False) -> None:
    """The collector config: generation, read interval and passes (groups and their metrics), with each
    counter's read cap; YAML when ``path`` ends in .yaml/.yml, else JSON."""
    from pathlib import Path

    body = {k: doc[k] for k in ("generation", "slots_override", "read_interval_s", "passes", "read_caps")}
    body = {"perfonto_collector_plan": 1, **body}
    p = Path(path)
    if p.suffix.lower() in (".yaml", ".yml"):
        import yaml

        text = yaml.safe_dump(body, sort_keys=False)
    else:
        text = json.dumps(body, indent=2) + "\n"
    from perfonto.outputs import check_file_target, write_file

    try:
        check_file_target(p, "--collector-config", force)
        write_file(p, text)  # atomic, and a link at the path is replaced, never written through
    except OSError as exc:
        from perfonto.ontology.files import describe_os_error

        raise CommandError(f"cannot write the collector config: {describe_os_error(exc)}", 1) from None


def _s(x: float | None) -> str:
    """Seconds as text: ``1.07374 s``; below a second in ms, µs or ns (``10.4856 µs``, not ``1.04856e-05 s``)."""
    if x is None:
        return "unknown"
    for unit, f in (("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9)):
        if f <= x < f * 1e3:
            return f"{x / f:.6g} {unit}"
    return f"{x:.6g} s"


def _uncapped(names: tuple[str, ...], capped: bool) -> str:
    """The headline's word on the counters whose wrap time is unknown, which the read interval leaves out."""
    if not names or not capped:
        return ""
    shown = ", ".join(names[:6]) + (", …" if len(names) > 6 else "")
    return f" (the cap leaves out {len(names)} counter(s) of unknown rate or width: {shown})"


def render(plan) -> str:
    """The plan as text: the passes with their groups and metrics, the read caps, the metrics that cannot
    be measured consistently and the slots one pass would need."""
    slots = f"--slots {plan.slots_override}" if plan.slots_override else "declared slots"
    out = [
        f"{plan.generation}: {len(plan.metrics)} metric(s) in {len(plan.passes)} pass(es) ({slots}; "
        f"{'fewest passes, proven' if plan.optimal else 'greedy, not proven fewest'}); "
        + (
            f"read every {_s(plan.read_interval_s)} or more often"
            if plan.read_interval_s is not None
            else "no read-interval cap (no counter read with a known width and max_rate)"
        )
        + _uncapped(plan.uncapped, plan.read_interval_s is not None)
    ]
    for p in plan.passes:
        out.append(f"pass {p.index} (read interval cap {_s(p.read_interval_s)}):")
        for g in p.groups:
            used = f"{len(g.counters)}/{g.slots} slots" if g.slots is not None else "all at once"
            prog = ", ".join(c.split(".", 1)[1] for c in g.counters) or "-"
            fixed = ", ".join(c.split(".", 1)[1] for c in g.fixed)
            out.append(f"  {g.block} [{used}]: {prog}" + (f"; fixed: {fixed}" if fixed else ""))
        out.append(f"  consistent: {', '.join(p.metrics) or '-'}")
    out.append("read caps (half the shortest time to wrap at the maximum rate):")
    for n, c in sorted(plan.caps.items()):
        rate = f"{c.max_rate:g} {c.unit}/s" if c.max_rate is not None else "-"
        rng = f"range {c.range_raw:,}" if c.range_raw is not None else "range unknown"
        out.append(f"  {n}: {_s(c.cap_s)} ({rng}, max rate {rate}{'; ' + c.note if c.note else ''})")
    if plan.inconsistent:
        out.append("cannot be measured consistently (inputs in different passes):")
        for i in plan.inconsistent:
            out.append(f"  {i.metric}: {i.reason} (passes {', '.join(map(str, i.passes))})")
    need = ", ".join(f"{b} {'impossible' if n is None else n}" for b, n in plan.one_pass_slots.items())
    out.append(f"programmable slots per block for one pass: {need or 'none needed'}")
    return "\n".join(out)
