"""The report's modelling assumptions and, for a generation with a public claim (Sohu), the comparison
with it (``emulator.claim.run_context``): the claim's scenario projected under the run's preset, the
run's own figure when it is that scenario, and each assumption moved alone toward the claim preset,
the one that moves the projection most first."""

from __future__ import annotations

from rich.console import Console


def render_context(ctx: dict | None, console: Console) -> None:
    """Print the assumptions and the claim comparison of ``ctx`` (nothing when ``ctx`` is None)."""
    if not ctx:
        return
    says = ctx.get("preset_says") or []
    console.print("[bold]Modelling assumptions[/bold] (what shapes these numbers), as this run made them:")
    for a in [a for a in ctx.get("assumptions", []) if a not in says]:
        console.print(f"  • {a}", markup=False)
    if says:  # the same choices in the preset's words, with their reasons (they were one list: read as repeats)
        preset = (ctx.get("claim") or {}).get("preset")
        console.print(f"  as the preset{f' `{preset}`' if preset else ''} states them, with their reasons:")
        for a in says:
            console.print(f"    ◦ {a}", markup=False)
    c = ctx.get("claim")
    if not c:
        return
    cl = c["claim"]
    console.print(
        f"[bold]Public claim[/bold]: more than {cl['tokens_per_second']:,} tokens/s (input + output), "
        f"{cl['model']} on {cl['chips']} chips, {str(cl['dtype']).upper()}, {cl['isl']}/{cl['osl']}",
        highlight=False,
    )
    console.print(f"  source: {cl['source']}", markup=False, highlight=False)
    if c.get("scenario_matches") and c.get("run_ratio") is not None:
        few = c.get("run_steps") is not None and c["run_steps"] < 20 and not c.get("whole_steps")
        console.print(
            f"  this run: {c['run_tokens_per_second']:,.0f} tokens/s = {c['run_ratio']:.2f} × the claim"
            + (f" (over only {c['run_steps']} forward passes: run longer for a steady figure)" if few else ""),
            highlight=False,
        )
    else:
        console.print("  this run is another scenario than the claim's; the claim's scenario projected instead:")
    console.print(
        f"  the claim's scenario under preset `{c['preset']}`: {c['tokens_per_second']:,.0f} tokens/s at full load = "
        f"{c['ratio']:.2f} × the claim ({'reaches' if c['reaches'] else 'falls short of'} it)",
        highlight=False,
    )
    if c.get("changes"):
        console.print("  one assumption at a time, moved to the claim preset's setting (× the projection):")
        for ch in c["changes"]:
            console.print(f"    × {ch['factor']:.2f}  {ch['what']}", markup=False, highlight=False)
        console.print(f"  [bold]moves it most[/bold]: {c['moves_most']}", highlight=False)
    console.print(f"  [dim]{c['note']}[/dim]")
