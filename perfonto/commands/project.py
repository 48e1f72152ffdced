"""``perfonto project``: project the serving throughput of a model on a generation (offline scenario).

For a generation with a recorded public claim (Sohu), every preset is projected and printed beside
the claim, with what the claim needs from the hardware. Also home of ``EmuProgress``, the progress
bar the emulator commands share.
"""

from __future__ import annotations

import argparse
import json
import time

from . import HELP
from .common import (
    CommandError,
    catalog_options,
    json_option,
    stderr,
    stdout,
    transient_bar,
    why as _why,
)
from .workload_args import workload_options


class EmuProgress:
    """A rich progress bar on stderr for long emulations: shown only on a terminal, never under
    ``--json``, and only once the work has taken more than ``after_s`` seconds."""

    def __init__(self, label: str, enabled: bool = True, after_s: float = 1.0):
        self.label, self.after = label, after_s
        self.console = stderr()
        self.enabled = enabled and self.console.is_terminal
        self.t0 = time.perf_counter()
        self.bar = None
        self.task = None

    def __call__(self, done: float, total: float) -> None:
        if not self.enabled:
            return
        if self.bar is None:
            if time.perf_counter() - self.t0 < self.after:
                return
            from rich.progress import TextColumn, TimeElapsedColumn

            self.bar = transient_bar(self.console, TextColumn("{task.percentage:>3.0f} %"), TimeElapsedColumn())
            self.bar.start()
            self.task = self.bar.add_task(self.label, total=max(total, 1))
        self.bar.update(self.task, completed=done, total=max(total, 1))

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.bar = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def register(sub) -> None:
    p = sub.add_parser("project", help=HELP["project"])
    catalog_options(
        p,
        generation="hardware generation (default: sohu, or the --catalog folder's)",
        catalog="a catalog folder whose generation to project (future silicon: a generation extending a shipped one)",
        metavar="DIR",
    )
    workload_options(p, "model", "chips", "isl", "osl", "dtype", "kv_dtype", "preset", *MAPPING, "mapping")
    add_scenario_args(p)
    workload_options(p, "requests")
    # the what-if commands' --batch: refused with what sets the batch here (cmd_project)
    p.add_argument("--batch", default=None, help=argparse.SUPPRESS, dest="whatif_batch")
    json_option(p)
    p.set_defaults(func=cmd_project)


#: The mapping options of ``project`` (``mapping_from_args``).
MAPPING = ("tp", "pp", "dp", "ep", "attention_dp")


def add_scenario_args(p) -> None:
    """``--engine-profile``, ``--rate`` / ``--concurrency`` (exclusive; default offline) and speculative
    decoding (``--draft-tokens``, ``--acceptance``), shared by ``project`` and ``run``."""
    workload_options(p, "engine_profile", "rate", "concurrency", "draft_tokens", "acceptance")


def scenario_of(args) -> dict:
    """The serving scenario of ``add_scenario_args``' options, ``--preset`` and ``--requests`` as the
    keyword arguments of ``emulator.project.project`` (``run``'s ``serving``): the acceptance only with
    draft tokens (``DEFAULT_ACCEPTANCE`` when not given).

    Raises:
        CommandError: ``--acceptance`` without ``--draft-tokens`` (it would be silently ignored).
    """
    from .workload_args import DEFAULT_ACCEPTANCE

    if args.acceptance is not None and not args.draft_tokens:
        raise CommandError(
            f"--acceptance {args.acceptance:g} applies to speculative decoding only: give --draft-tokens K (K > 0) "
            "with it, or leave it out",
            2,
        )
    return dict(
        preset=args.preset,
        num_requests=args.requests,
        rate=args.rate,
        concurrency=args.concurrency,
        draft_tokens=args.draft_tokens,
        acceptance=(DEFAULT_ACCEPTANCE if args.acceptance is None else args.acceptance) if args.draft_tokens else 0.0,
        engine_profile=args.engine_profile,
    )


def _chips_given(args) -> bool:
    """Whether ``--chips`` is on the command line (its default is 8; a ``--mapping`` sets the chips otherwise)."""
    return any(a == "--chips" or a.startswith("--chips=") for a in getattr(args, "argv", ()))


def apply_mapping_option(args) -> None:
    """``--mapping tp4-dp2`` (the what-if commands' form) as --tp/--pp/--dp/--ep/--attention-dp, and the
    chips as its product unless ``--chips`` is given.

    Raises:
        CommandError: --mapping with one of those, or a mapping that is not one.
    """
    if getattr(args, "mapping", None) is None:
        return
    from perfonto.whatif.knobs import KnobError, parse_mapping

    if any(getattr(args, k) is not None for k in MAPPING):
        raise CommandError("--mapping and --tp/--pp/--dp/--ep/--attention-dp both set the mapping; give one", 2)
    try:
        m = parse_mapping(args.mapping)
    except KnobError as exc:
        raise CommandError(f"--mapping: {exc}", 2) from None
    for k in ("tp", "pp", "dp", "ep"):
        setattr(args, k, m.get(k))
    args.attention_dp = True if m.get("attn_dp") else None
    if not _chips_given(args):
        args.chips = m.get("tp", 1) * m.get("pp", 1) * m.get("dp", 1)


def _mapping_fix(tp: int, pp: int, dp: int, chips: int, given_dp: bool) -> str:
    """What to give when tp × pp × dp is not ``chips``: the --dp that fills them, else the --chips it takes."""
    if not given_dp and chips % (tp * pp) == 0:
        return f"give --dp {chips // (tp * pp)} (data-parallel replicas of tp {tp} × pp {pp}), or --chips {tp * pp}"
    return f"give --chips {tp * pp * dp}, or a --tp/--pp/--dp whose product is {chips}"


def mapping_from_args(args, chips: int, model: str):
    """A ``Mapping`` when any of --tp/--pp/--dp/--ep/--attention-dp is given, else None (the preset's)."""
    from perfonto.emulator.models import get_model
    from perfonto.emulator.parallel import Mapping, MappingError

    if all(getattr(args, k) is None for k in MAPPING):
        return None
    m = get_model(model)
    pp, dp = args.pp or 1, args.dp or 1
    tp = args.tp or max(chips // (pp * dp), 1)
    if tp * pp * dp != chips:
        raise MappingError(
            f"tp {tp} × pp {pp} × dp {dp} = {tp * pp * dp} chips, not --chips {chips}: "
            + _mapping_fix(tp, pp, dp, chips, args.dp is not None)
        )
    if not m.is_moe:
        return Mapping(tp=tp, pp=pp, dp=dp, ep=args.ep or 1)
    attn_dp = args.attention_dp if args.attention_dp is not None else tp > 1
    return Mapping(tp=tp, pp=pp, dp=dp, ep=args.ep or tp, attn_dp=bool(attn_dp and tp > 1))


def _usage_mapping(args, preset):
    """``mapping_from_args``, and that mapping (or ``preset``'s for ``--chips``) checked against the model
    before any projection: a chip count or ``--tp/--pp/--dp/--ep`` the model does not split over is a bad
    combination of options, a usage error (exit 2) as ``run`` gives it; a model that does not fit in memory
    is found by the projection (exit 1).

    Raises:
        CommandError: exit 2, the mapping's refusal."""
    from perfonto.emulator.models import get_model
    from perfonto.emulator.parallel import MappingError

    try:
        mapping = mapping_from_args(args, args.chips, args.model)
        m = get_model(args.model)
        (mapping or preset.mapping_for(m, args.chips)).check(m)
    except MappingError as exc:
        raise CommandError(_why(exc), 2) from None
    return mapping


def _fmt_s(v) -> str:
    """A duration in ms or s; ``—`` when null or NaN."""
    from perfonto.report_format import finite

    v = finite(v)
    if v is None:
        return "—"
    if v < 0.01:
        return f"{v * 1e3:,.3f} ms"
    return f"{v * 1e3:,.1f} ms" if v < 1 else f"{v:,.2f} s"


def cmd_project(args) -> int:
    from perfonto.emulator.presets import PresetError, family_claim, preset_names, resolve

    if args.whatif_batch is not None:
        raise CommandError(
            f"project has no --batch: the engine's max batch is its preset's sizing (trtllm-bench's); to set it, "
            f"perfonto sweep --batch {args.whatif_batch} (or --vary batch=…), or --engine-profile NAME",
            2,
        )
    apply_mapping_option(args)
    try:
        args.generation = _generation(args)
        try:
            chosen_preset = resolve(args.generation, args.preset)  # unknown preset: fail early, a usage error
        except PresetError as exc:
            raise CommandError(_why(exc), 2) from None
        mapping = _usage_mapping(args, chosen_preset)
        claim = family_claim(args.generation)
        names = preset_names(args.generation) if claim else [args.preset]
        chosen = args.preset or (names[0] if claim else None)
        results, skipped = {}, {}
        for name in names:
            try:
                results[name] = _project_one(args, name, mapping)
            except (ValueError, KeyError) as exc:
                if name == chosen:
                    raise
                skipped[name] = _why(exc)  # a preset beside the chosen one that cannot serve the scenario
    except (ValueError, KeyError, OSError) as exc:
        raise CommandError(_why(exc), 1) from None
    main = results[chosen]
    doc = main.to_json()
    if claim:
        doc["presets"] = {n: r.to_json() for n, r in results.items()}
        doc["skipped_presets"] = skipped
        doc["claim"] = _claim_doc(args, claim, results, main)
    if args.json:
        print(json.dumps(doc, indent=2))
        return 0
    scenario = (
        "online"
        if args.rate is not None
        else f"closed-loop (concurrency {args.concurrency})"
        if args.concurrency
        else "offline"
    )
    _render(stdout(), results, chosen, doc.get("claim"), scenario=scenario)
    for n, why in skipped.items():
        stdout().print(f"preset {n}: not projected: {why}", markup=False)
    return 0


def _generation(args):
    """The generation to project: a shipped name (``--generation``, default sohu), or the generation a
    ``--catalog`` folder declares (loaded with its parents: ``whatif.points.base_generation``).

    Raises:
        ValueError: the folder's generation does not load (its first messages)."""
    if args.catalog is None and args.generation is None:
        return "sohu"
    if args.catalog is None:
        from .workload_args import unknown_generation

        refused = unknown_generation(args.generation)
        if refused is not None:
            raise refused
        return args.generation
    from perfonto.whatif.cliargs import target_of
    from perfonto.whatif.points import base_generation

    return base_generation(target_of(args.generation, args.catalog))


def _project_one(args, name, mapping):
    """The projection of ``args``' scenario under preset ``name`` (a progress bar on a terminal)."""
    from perfonto.emulator.project import project

    from .run import emulation_of

    with EmuProgress(
        f"projecting {args.model} on {args.chips} × {getattr(args.generation, 'name', args.generation)}"
        + (f" ({name})" if name else ""),
        enabled=not args.json,
    ) as bar:
        return project(
            args.generation,
            **emulation_of(args),
            dtype=args.dtype,
            kv_dtype=args.kv_dtype,
            mapping=mapping,
            progress=bar,
            **{**scenario_of(args), "preset": name},
        )


def claim_scenario_matches(args, claim: dict) -> bool:
    """Whether ``project``'s arguments are the public claim's scenario: its model, chips, lengths and
    dtype, offline (no --rate, --concurrency or --draft-tokens), each preset's own mapping, KV cache and
    engine (no --tp/--pp/--dp/--ep/--attention-dp, --kv-dtype other than the weights', or --engine-profile).
    Only then are the projections compared with the claim's tokens/s and its needs worked out from them."""
    return (
        args.model in ("llama3-70b", "llama-3-70b", "llama-3.3-70b", "llama-3.1-70b")
        and args.chips == claim["chips"]
        and (args.isl, args.osl) == (claim["isl"], claim["osl"])
        and args.dtype == claim["dtype"]
        and args.rate is None
        and not args.concurrency
        and not args.draft_tokens
        and all(getattr(args, k, None) is None for k in MAPPING)
        and args.kv_dtype in (None, claim["dtype"])
        and args.engine_profile is None
    )


def _claim_doc(args, claim: dict, results: dict, main) -> dict:
    """The ``claim`` section of ``project``'s JSON: the claim, whether this is its scenario, and — only
    when it is — each preset's steady tokens/s against it and what the claim needs (FLOP/s, HBM traffic
    per token under the claim preset). Another scenario's tokens/s (an offered load, a closed loop, another
    model) is no measure of the claim, and its bytes per token are not the claim's."""
    from perfonto.emulator.presets import resolve
    from perfonto.emulator.project import claim_requirements, hbm_bytes_per_token

    same = claim_scenario_matches(args, claim)
    doc = {**claim, "scenario_matches": same}
    if not same:
        return doc
    ref = results.get("claim", main)
    need = claim_requirements(
        ref.config,
        tokens_per_second=float(claim["tokens_per_second"]),
        chips=int(claim["chips"]),
        isl=int(claim["isl"]),
        osl=int(claim["osl"]),
        hbm_bytes_per_token=hbm_bytes_per_token(ref) if "claim" in results else None,
    )
    need["catalog_peak_flops"] = main.config.hw.peak(main.config.hw.math_dtype(main.config.prec.weights))
    need["share_of_catalog_peak"] = need["sustained_flops_per_chip"] / need["catalog_peak_flops"]
    return {
        **doc,
        "needs": need,
        "assumptions_needed": (
            list(resolve(args.generation, "claim").stated(mapping=results["claim"].mapping))
            if "claim" in results
            else []
        ),
        "compared_figure": (
            "steady_tokens_per_second (the server at full load: its largest batch, still admitting prompts)"
        ),
        "by_preset": {
            n: {
                "tokens_per_second": r.figures.steady_tokens_per_second,
                "benchmark_tokens_per_second": r.figures.tokens_per_second,
                "ratio_to_claim": r.figures.steady_tokens_per_second / float(claim["tokens_per_second"]),
                "reaches_claim": r.figures.steady_tokens_per_second > float(claim["tokens_per_second"]),
            }
            for n, r in results.items()
        },
    }


def _render(out, results: dict, chosen, claim, scenario: str = "offline") -> None:
    from rich.table import Table

    first = results[chosen]
    out.print(
        f"[bold]{first.model}[/] on {first.chips} × {first.generation}, {first.isl}/{first.osl} tokens, "
        f"{first.dtype} weights, {first.kv_dtype} KV cache, "
        f"{scenario} benchmark of {first.figures.requests:,} requests"
        + (f" (of {first.step_cap['requests_requested']:,} asked: cut at the step cap)" if first.step_cap else "")
    )
    _cap_warnings(out, results)
    profile = first.engine_profile
    title = "Projected serving figures (whole server" + (f", engine profile {profile})" if profile else ")")
    # two tables, throughput then latency: one of twelve columns was cut short at 120 characters ('468,4…')
    t = Table(title=title)
    for col in ("preset", "output tok/s", "total tok/s", "steady total tok/s"):
        t.add_column(col, justify="left" if col == "preset" else "right", no_wrap=True)
    lat = Table()
    for col in ("preset", "TTFT p50", "TTFT p90", "TTFT p99", "TPOT p50", "TPOT p99", "ITL p50", "ITL p90", "ITL p99"):
        lat.add_column(col, justify="left" if col == "preset" else "right", no_wrap=True)
    for r in results.values():
        f = r.figures.to_json()
        t.add_row(
            r.preset,
            f"{f['output_tokens_per_second']:,.0f}",
            f"{f['tokens_per_second']:,.0f}",
            f"{f['steady_tokens_per_second']:,.0f}",
        )
        lat.add_row(
            r.preset,
            *(_fmt_s(f[f"ttft_{q}_s"]) for q in ("p50", "p90", "p99")),
            _fmt_s(f["tpot_p50_s"]),
            _fmt_s(f["tpot_p99_s"]),
            *(_fmt_s(f[f"itl_{q}_s"]) for q in ("p50", "p90", "p99")),
        )
    out.print(t)
    out.print(lat)
    out.print(
        "output and total tok/s: tokens over the whole benchmark (trtllm-bench's figure); steady: at full load "
        "(from the first to the last step at the largest batch that still admits prompts; else the middle half); "
        "TTFT from arrival (queueing included: offline, every request is queued at t = 0; "
        "above the capacity the queue, and TTFT with it, grow over the run); "
        "TPOT per request (last − first token) ÷ (tokens − 1); ITL every gap between consecutive emissions of a "
        "request (the tokens one speculative step emits together are one emission, as vLLM's per-chunk ITL)"
    )
    for n, r in results.items():
        f = r.figures.to_json()
        out.print(
            f"[bold]{r.preset}[/]: TTFT p50 = queue {_fmt_s(f['ttft_queue_p50_s'])} + prefill "
            f"{_fmt_s(f['ttft_prefill_p50_s'])} (p99: {_fmt_s(f['ttft_queue_p99_s'])} + "
            f"{_fmt_s(f['ttft_prefill_p99_s'])}); at most {f['queued_max']:,} requests queued and "
            f"{f['in_flight_max']:,} in flight per scheduler rank"
        )
    for n, r in results.items():
        out.print(
            f"[bold]{r.preset}[/]: {r.mapping.describe()}; {r.engine.describe()}"
            + (f" (engine profile {r.engine_profile})" if r.engine_profile else "")
            + f"; KV cache {r.kv_capacity_tokens:,} tokens per rank"
        )
    for n, r in results.items():
        if r.named:
            prof = f" with engine profile {r.engine_profile}" if r.engine_profile else ""
            out.print(f"[bold]{r.preset}[/]{prof} assumptions:")
            for s in r.named:
                out.print(f"  - {s}", markup=False)
    if claim:
        _render_claim(out, claim)


def _cap_warnings(out, results: dict) -> None:
    """A warning for each preset whose run was cut at the emulator's step cap (its figures are a part's)."""
    from perfonto.emulator.project import step_cap_note

    for r in results.values():
        if r.step_cap:
            out.print(
                f"[bold yellow]warning[/] ({r.preset}): " + step_cap_note(r.step_cap, r.isl, r.osl),
                highlight=False,
            )


def _render_claim(out, claim: dict) -> None:
    """The public claim, and on its own scenario each preset against it and what it needs."""
    out.print()
    out.print(
        f"[bold]Public claim[/]: more than {claim['tokens_per_second']:,} tokens/s (input + output) for an "
        f"{claim['chips']}-chip server, {claim['model']}, {claim['dtype'].upper()}, {claim['isl']}/{claim['osl']}"
    )
    out.print(f"  source: {claim['source']}", markup=False)
    if not claim["scenario_matches"]:
        out.print(
            "  the figures above are for your scenario, not the claim's (offline, "
            f"{claim['model']}, {claim['chips']} chips, {claim['isl']}/{claim['osl']}, {claim['dtype']}): "
            "`perfonto project` on the claim's scenario compares the presets with it and says what it needs",
            markup=False,
        )
        return
    need = claim["needs"]
    for n, b in claim["by_preset"].items():
        out.print(
            f"  {n}: {b['tokens_per_second']:,.0f} tokens/s at full load = {b['ratio_to_claim']:.2f} × the claim "
            f"({'reaches' if b['reaches_claim'] else 'falls short of'} it; whole benchmark "
            f"{b['benchmark_tokens_per_second']:,.0f})"
        )
    out.print("[bold]What the claim needs[/]:")
    out.print(
        f"  - {need['sustained_flops_per_chip'] / 1e15:.2f} PFLOP/s of {claim['dtype'].upper()} matrix work "
        f"sustained per chip ({need['flops_per_token'] / 1e9:.1f} GFLOP per token × "
        f"{need['tokens_per_second']:,.0f} tokens/s ÷ {claim['chips']} chips), "
        f"{need['share_of_catalog_peak'] * 100:.0f} % of the catalog's {need['catalog_peak_flops'] / 1e15:.1f} "
        f"PFLOP/s peak; a peak of at least {need['peak_needed_at_90pct'] / 1e15:.2f} PFLOP/s at 90 % utilisation",
        markup=False,
    )
    if need.get("hbm_bandwidth_needed"):
        out.print(
            f"  - {need['hbm_bandwidth_needed'] / 1e12:.2f} TB/s of HBM traffic per chip "
            f"({need['hbm_bytes_per_token'] / 1e6:.2f} MB per token under the claim preset: weights and KV "
            f"re-read every step), {need['hbm_bandwidth_needed'] / need['hbm_peak_bandwidth'] * 100:.0f} % of "
            f"the {need['hbm_peak_bandwidth'] / 1e12:.1f} TB/s peak — it must overlap the matrix work",
            markup=False,
        )
    out.print(
        f"  - the model ({need['model_bytes_one_chip'] / 1e9:.1f} GB) "
        f"{'fits' if need['fits_one_chip'] else 'does not fit'} in one chip's {need['hbm_capacity'] / 1e9:.0f} GB, "
        f"so the chips can serve as independent replicas without chip-to-chip traffic",
        markup=False,
    )
    for s in claim.get("assumptions_needed", []):
        out.print(f"  - {s}", markup=False)
